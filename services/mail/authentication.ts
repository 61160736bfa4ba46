/**
 * Who really sent an inbound message (issue 20; DESIGN.md §4b "authentication").
 *
 * - Every message is checked from what only the SMTP node knows (the client's address, its HELO
 *   name, MAIL FROM) and the message: SPF, every DKIM signature, DMARC (the From domain's policy
 *   and whether SPF or DKIM passed for an aligned domain) and ARC. With DMARC_ENFORCE=true the SMTP
 *   node checks before it answers DATA and the verdicts travel with the message on the bus;
 *   otherwise the connection's facts travel instead and ingest checks (smtp/server.ts). The
 *   verdicts are stored with the email as `authentication`, with one RFC 8601
 *   `Authentication-Results` value summing them up. The raw message is never changed: the summary
 *   is stored beside it, not added to it.
 * - A verdict is never a reason to lose mail: a check that cannot be made (DNS down, too slow) is a
 *   `temperror`, and the message is accepted. Only with `DMARC_ENFORCE=true` is a message refused,
 *   and only when DMARC fails under the From domain's `p=reject`: 550 5.7.1.
 * - An email that fails DMARC, or has no aligned pass at all (nothing vouches for its From domain),
 *   is labelled `unauthenticated`: an agent must not believe its From.
 *
 * Only `effect` here: the HTTP contract (and so the published client) reads these schemas; the
 * checks themselves are the Authenticator port's (layers/mailauth.ts).
 */
import { Context, type Effect, Schema } from "effect"

/** RFC 7208 §2.6. */
export const SpfResult = Schema.Literal("pass", "fail", "softfail", "neutral", "none", "temperror", "permerror")
/** RFC 8601 §2.7.1. */
export const DkimResult = Schema.Literal("pass", "fail", "neutral", "policy", "temperror", "permerror")
/** RFC 7489 §11.2. */
export const DmarcResult = Schema.Literal("pass", "fail", "none", "temperror", "permerror")
/** RFC 8617 §2.2. */
export const ArcResult = Schema.Literal("pass", "fail", "none", "temperror")
export const DmarcPolicy = Schema.Literal("none", "quarantine", "reject")

export const SpfVerdict = Schema.Struct({
  result: SpfResult,
  domain: Schema.String.annotations({ description: "The domain checked: MAIL FROM's, or the HELO name's for an empty MAIL FROM" }),
  aligned: Schema.Boolean.annotations({ description: "Whether the domain aligns with the header From domain (DMARC)" })
}).annotations({ identifier: "SpfVerdict" })
export type SpfVerdict = typeof SpfVerdict.Type

export const DkimVerdict = Schema.Struct({
  result: DkimResult,
  domain: Schema.String.annotations({ description: "The signing domain (d=)" }),
  selector: Schema.String.annotations({ description: "The key's selector (s=)" }),
  aligned: Schema.Boolean.annotations({ description: "Whether the signing domain aligns with the header From domain (DMARC)" })
}).annotations({ identifier: "DkimVerdict" })
export type DkimVerdict = typeof DkimVerdict.Type

export const DmarcVerdict = Schema.Struct({
  result: DmarcResult,
  domain: Schema.NullOr(Schema.String).annotations({ description: "The header From domain; null when the message has no single From address" }),
  policy: Schema.NullOr(DmarcPolicy).annotations({ description: "The policy the domain publishes for it (sp= for a subdomain); null without a DMARC record" })
}).annotations({ identifier: "DmarcVerdict" })
export type DmarcVerdict = typeof DmarcVerdict.Type

const arcFields = {
  result: ArcResult,
  domain: Schema.NullOr(Schema.String).annotations({
    description: "The domain of the latest ARC set's seal (its ARC-Seal's d=): the last intermediary, who vouches for the mail only when result is pass; null without an ARC chain"
  })
}

export const ArcVerdict = Schema.Struct(arcFields).annotations({ identifier: "ArcVerdict" })

export const Authentication = Schema.Struct({
  spf: SpfVerdict,
  dkim: Schema.Array(DkimVerdict).annotations({ description: "One entry per DKIM-Signature, in header order; empty when unsigned" }),
  dmarc: DmarcVerdict,
  arc: ArcVerdict
}).annotations({
  identifier: "Authentication",
  description: "SPF, DKIM, DMARC and ARC verdicts, computed when the message was received"
})
export type Authentication = typeof Authentication.Type

/**
 * The verdicts as the bus carries them: a message still on the bus from an older node has no ARC
 * domain, which reads as null (stored ones are filled in on reading, mail/records.ts). The API's
 * answers always carry it (Authentication).
 */
export const AuthenticationOnTheBus = Schema.Struct({
  ...Authentication.fields,
  arc: Schema.Struct({ ...arcFields, domain: Schema.optionalWith(arcFields.domain, { default: () => null }) })
})

/** What the SMTP node knows of a message when DATA ends. */
export interface Envelope {
  /** The connecting client's address. */
  readonly clientIp: string
  /** The name the client gave in EHLO/HELO, if any. */
  readonly helo: string | undefined
  /** MAIL FROM; empty for a bounce. */
  readonly mailFrom: string
  readonly raw: Uint8Array
}

export interface Verdict {
  readonly authentication: Authentication
  /** One RFC 8601 `Authentication-Results` field value summing the verdicts up. */
  readonly results: string
}

/**
 * The port that checks a message: DNS questions go through the Dns port (DNS_SERVERS), each with a
 * time-out, and the whole check has a deadline. Never fails: what cannot be checked is a temperror.
 * Answers `undefined` when the operator turned the checks off (VERIFY_INBOUND=false): the email's
 * `authentication` is then null, and nothing pretends to have checked it.
 */
export class Authenticator extends Context.Tag("mailroom/Authenticator")<Authenticator, {
  readonly verify: (envelope: Envelope) => Effect.Effect<Verdict | undefined>
}>() {}

/** The label an email gets when nothing vouches for its From (label-rules.ts "verdict labels"). */
export const UNAUTHENTICATED = "unauthenticated"

/** Whether `authentication` leaves the From unproven: DMARC failed, or neither SPF nor DKIM passed aligned. */
export const isUnauthenticated = (authentication: Authentication): boolean => {
  if (authentication.dmarc.result === "fail") return true
  if (authentication.dmarc.result === "pass") return false
  const spf = authentication.spf.result === "pass" && authentication.spf.aligned
  const dkim = authentication.dkim.some((signature) => signature.result === "pass" && signature.aligned)
  return !(spf || dkim)
}

/**
 * Whether the message's From names no single author (none, or several: two From fields, or one
 * listing two addresses), so DMARC could not be evaluated (`permerror` without a domain): such mail
 * is labelled unauthenticated, and DMARC_ENFORCE refuses it, as RFC 7489 §6.6.1 says receivers do.
 */
export const withoutOneAuthor = (authentication: Authentication): boolean =>
  authentication.dmarc.result === "permerror" && authentication.dmarc.domain === null

/** Whether DMARC_ENFORCE refuses the message: DMARC failed and the domain asks for rejection, or its From names no single author. */
export const dmarcRejects = (authentication: Authentication): boolean =>
  (authentication.dmarc.result === "fail" && authentication.dmarc.policy === "reject") || withoutOneAuthor(authentication)

/** A property value as RFC 8601 §2.2 writes it: a token as is, anything else quoted (controls dropped). */
const value = (text: string) => {
  // eslint-disable-next-line no-control-regex
  const clean = text.replace(/[\u0000-\u001f\u007f]/g, "")
  return /^[A-Za-z0-9._@+-]+$/.test(clean) ? clean : `"${clean.replace(/[\\"]/g, (c) => `\\${c}`)}"`
}

/** The `Authentication-Results` field value for `authentication`, as the host `authservId` writes it. */
export const authenticationResults = (authservId: string, authentication: Authentication): string => {
  const { arc, dkim, dmarc, spf } = authentication
  const parts = [
    value(authservId),
    `spf=${spf.result} smtp.mailfrom=${value(spf.domain)}`,
    ...(dkim.length === 0
      ? ["dkim=none"]
      : dkim.map((signature) => `dkim=${signature.result} header.d=${value(signature.domain)} header.s=${value(signature.selector)}`)),
    `dmarc=${dmarc.result}${dmarc.policy === null ? "" : ` (p=${dmarc.policy})`}${dmarc.domain === null ? "" : ` header.from=${value(dmarc.domain)}`}`,
    `arc=${arc.result}`
  ]
  return parts.join("; ")
}
