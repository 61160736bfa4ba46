/**
 * The Authenticator port over mailauth (the nodemailer family's SPF, DKIM, DMARC and ARC verifier).
 *
 * mailauth asks its questions through a resolver function shaped like node's `dns.promises.resolve`;
 * ours answers them through the Dns port, so DNS_SERVERS is honoured and every question has the
 * port's time-out, and keeps its answers for a minute (dns-answers.ts): the same sender's next message
 * asks nothing again. The whole check has a deadline too (VERIFY_TIMEOUT), well inside the SMTP node's
 * DATA time-out: a message whose checks cannot finish is accepted with `temperror` verdicts.
 *
 * Where mailauth and RFC 8601 disagree, RFC 8601 wins: a signature whose body hash does not match
 * is `fail` (mailauth says `neutral`), since the message was changed after it was signed.
 */
import { Duration, Effect, Layer, Runtime } from "effect"
import { authenticate } from "mailauth"
import { Dns, type DnsError } from "../services/dns/dns.ts"
import { answerCache, checkAnswers } from "./dns-answers.ts"
import {
  type Authentication,
  authenticationResults,
  Authenticator,
  type DkimVerdict,
  type DmarcVerdict,
  type Envelope,
  type SpfVerdict
} from "../services/mail/authentication.ts"

/** How long checking one message may take, DNS included. */
const VERIFY_TIMEOUT = Duration.seconds(10)

type Answer = ReadonlyArray<unknown>

/** A failure as node's resolver reports it: mailauth reads `code` (ENOTFOUND/ENODATA: no such records). */
const resolverError = (error: DnsError) =>
  Object.assign(new Error(error.message), { code: error.reason === "NotFound" ? "ENOTFOUND" : "ETIMEOUT" })

const pick = <const A extends string>(value: unknown, allowed: ReadonlyArray<A>, otherwise: A): A =>
  typeof value === "string" && (allowed as ReadonlyArray<string>).includes(value) ? (value as A) : otherwise

const lower = (text: string) => text.toLowerCase().replace(/\.$/, "")

/** The domain of an address (or a bare domain), lower-cased. */
const domainOf = (address: string) => lower(address.slice(address.lastIndexOf("@") + 1).trim())

/**
 * Relaxed alignment without a DMARC record to say how: the same domain, or one a subdomain of the
 * other. Stricter than the organizational-domain rule (siblings do not align), never looser.
 */
const related = (a: string, b: string) => a === b || a.endsWith(`.${b}`) || b.endsWith(`.${a}`)

/** Every check `temperror`: what a message gets when its checks could not be made. */
const unverified = (envelope: Envelope): Authentication => ({
  spf: { result: "temperror", domain: domainOf(envelope.mailFrom || envelope.helo || ""), aligned: false },
  dkim: [],
  dmarc: { result: "temperror", domain: null, policy: null },
  arc: { result: "temperror" }
})

/** VERIFY_INBOUND=false: nothing is checked (a gateway in front of Mailroom checks already). */
export const none: Layer.Layer<Authenticator> = Layer.succeed(Authenticator, { verify: () => Effect.succeed(undefined) })

export const layer = (options: { readonly authservId: string }): Layer.Layer<Authenticator, never, Dns> =>
  Layer.effect(Authenticator, Effect.gen(function*() {
    const dns = yield* Dns
    const runtime = yield* Effect.runtime<never>()
    const runPromise = Runtime.runPromise(runtime)

    const ask = (name: string, type: string): Effect.Effect<Answer, DnsError> => {
      switch (type) {
        case "TXT":
          // node gives each record as its character-strings; the port joins them already.
          return Effect.map(dns.txt(name), (records) => records.map((record) => [record]))
        case "MX":
          return Effect.map(dns.mx(name), (records) => records.map((r) => ({ exchange: r.exchange, priority: r.priority })))
        case "A":
        case "AAAA": {
          const family = type === "A" ? 4 : 6
          return Effect.map(dns.addresses(name), (found) => found.filter((a) => a.family === family).map((a) => a.address))
        }
        case "PTR":
          return dns.ptr(name)
        default:
          return Effect.succeed([])
      }
    }

    /** Each question asked once a minute at most (dns-answers.ts). */
    const remembered = answerCache<Answer>(checkAnswers)
    const question = (name: string, type: string): Effect.Effect<Answer, DnsError> =>
      remembered(`${type} ${name.toLowerCase()}`, ask(name, type))

    /** mailauth's resolver: a Promise of node's answer shape, or a rejection with node's error code. */
    const resolver = (name: string, type: string): Promise<never> =>
      runPromise(Effect.either(question(name, type))).then((answer) => {
        if (answer._tag === "Left") throw resolverError(answer.left)
        // A copy: the kept answer is shared with the next messages' checks, whatever mailauth does to it.
        return answer.right.map((item) => (Array.isArray(item) ? [...item] : typeof item === "object" && item !== null ? { ...item } : item)) as never
      })

    const check = (envelope: Envelope) =>
      Effect.tryPromise(() =>
        authenticate(Buffer.from(envelope.raw.buffer, envelope.raw.byteOffset, envelope.raw.byteLength), {
          ip: envelope.clientIp,
          ...(envelope.helo ? { helo: envelope.helo } : {}),
          sender: envelope.mailFrom,
          mta: options.authservId,
          resolver,
          disableBimi: true
        })
      ).pipe(Effect.map((result): Authentication => {
        const fromHeader = result.dkim.headerFrom ?? []
        const fromDomain = fromHeader.length === 1 ? domainOf(fromHeader[0]!) : null
        const dmarcRecord = result.dmarc === false ? undefined : result.dmarc
        const spfDomain = result.spf === false ? domainOf(envelope.mailFrom || envelope.helo || "") : lower(result.spf.domain)
        const spfResult = result.spf === false ? "none" : pick(result.spf.status.result, ["pass", "fail", "softfail", "neutral", "none", "temperror", "permerror"], "permerror")
        const spf: SpfVerdict = {
          result: spfResult,
          domain: spfDomain,
          // Under a DMARC record with aspf=s the domains must be equal; otherwise related ones align.
          aligned: fromDomain !== null && (dmarcRecord?.alignment?.spf.strict === true
            ? spfDomain === fromDomain
            : related(spfDomain, fromDomain))
        }
        const dkim = result.dkim.results
          .filter((signature) => typeof signature.signingDomain === "string" && signature.signingDomain.length > 0)
          .map((signature): DkimVerdict => ({
            result: signature.status.comment === "body hash did not verify"
              ? "fail"
              : pick(signature.status.result, ["pass", "fail", "neutral", "policy", "temperror", "permerror"], "permerror"),
            domain: lower(signature.signingDomain),
            selector: signature.selector ?? "",
            aligned: Boolean(signature.status.aligned)
          }))
        const dmarcResult = dmarcRecord === undefined
          ? "none"
          : pick(dmarcRecord.status.result, ["pass", "fail", "none", "temperror", "permerror"], "permerror")
        // No record (mailauth's `none`, without a policy) is no policy.
        const dmarc: DmarcVerdict = {
          result: dmarcResult,
          domain: fromDomain,
          policy: dmarcRecord === undefined || dmarcResult === "none" || typeof dmarcRecord.policy !== "string"
            ? null
            : pick(dmarcRecord.policy.toLowerCase(), ["none", "quarantine", "reject"], "none")
        }
        const arc = result.arc === false ? "none" : pick(result.arc.status.result, ["pass", "fail", "none", "temperror"], "fail")
        return { spf, dkim, dmarc, arc: { result: arc } }
      }))

    const verify = (envelope: Envelope) =>
      check(envelope).pipe(
        Effect.timeoutFail({ duration: VERIFY_TIMEOUT, onTimeout: () => new Error("the checks took too long") }),
        Effect.catchAll((error) =>
          Effect.as(
            Effect.logWarning("Could not check a message's SPF, DKIM, DMARC and ARC; it is kept as temperror", error),
            unverified(envelope)
          )
        ),
        Effect.map((authentication) => ({ authentication, results: authenticationResults(options.authservId, authentication) }))
      )

    return { verify }
  }))
