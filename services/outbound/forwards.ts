/**
 * Delivering received mail's forwarded copies (mail/forwarding.ts): the mta's side. A copy is queued
 * with its email (mail/store.ts) and travels as one job per address domain
 * (`mail.outbound.forward.<email_id>`), routed and retried as sent mail is (mta.ts).
 *
 * A copy is the message as it was received, unchanged below two fields in front of it: a `Received`
 * trace field (RFC 5321 §4.4, as every relay adds) and `X-Mailroom-Forwarded-By` naming the mailbox,
 * with a MAC that shows Mailroom wrote it (forward-rules.ts: what ends loops). The sender's own DKIM
 * signature therefore still verifies, so DMARC can still pass at the address. Mailroom seals the copy
 * with an ARC set (arc-seal.ts: what it found of the sender's SPF, DKIM and DMARC, for a receiver that
 * trusts Mailroom's word where SPF no longer can) and signs it with DKIM, both with the mailbox
 * domain's key. For a receiving server that takes no 8-bit mail, 8-bit mail's copy is also made 7-bit
 * and sealed and signed as such (`sevenBit`).
 * Its envelope sender is the email's bounce address (`bounces+<email_id>@<mailbox domain>`): SPF is
 * judged against Mailroom's domain, and a later delivery report finds the copy (bounces.ts).
 */
import { SqlClient } from "@effect/sql"
import { Duration, Effect, Schema } from "effect"
import { Bus, encodeJson, subjects } from "../bus/bus.ts"
import type { Publication } from "../bus/outbox.ts"
import { Authentication, type Verdict } from "../mail/authentication.ts"
import { FORWARDED_BY_HEADER, forwardedByValue, ForwardingKey } from "../mail/forward-rules.ts"
import { ArcSeal } from "./arc-seal.ts"
import { bounceAddress, bounceAddressFor } from "./bounce-address.ts"
import { CLAIM_SECONDS, DeliveryHeld } from "./claims.ts"
import { dkimSign } from "./dkim-signature.ts"
import { DkimKeys } from "./dkim.ts"
import { OutboundSettings, retryDelay } from "./settings.ts"
import { sevenBit } from "./seven-bit.ts"

/** One job: the copies of the email `forward_of` to the addresses at `domain` still waiting. */
export const ForwardJob = Schema.Struct({
  forward_of: Schema.String,
  domain: Schema.String
})
export type ForwardJob = typeof ForwardJob.Type

/** The jobs of the email's queued copies, one per domain, as the bus carries them. */
export const forwardPublications = (emailId: string, domains: ReadonlyArray<string>): ReadonlyArray<Publication> =>
  domains.map((domain) => ({
    subject: subjects.forwardedMail(emailId),
    data: encodeJson(Schema.encodeSync(ForwardJob)({ forward_of: emailId, domain })),
    msgId: `forward:${emailId}:${domain}`
  }))

/** Hand the email's queued copies to the mta, a job per domain; a job published again is dropped by the bus or finds nothing left. */
export const publishForwards = (bus: Bus["Type"], emailId: string, domains: ReadonlyArray<string>) =>
  Effect.forEach(forwardPublications(emailId, domains), ({ data, msgId, subject }) => bus.publish(subject, data, { msgId }), {
    discard: true
  })

/**
 * Whether a permanent refusal is of this message rather than of the address (RFC 3463's enhanced
 * status): a mailbox full (5.2.2), a message too big (5.2.3, 5.3.4), its content (5.6.x) or a policy
 * about it or its sender (5.7.x: a block or allow list, a spam verdict). The next copy may well be
 * taken. A refusal without an enhanced status is taken as the address's.
 */
export const refusesOnlyThisMessage = (response: string): boolean => {
  const status = /\b5\.(\d{1,3})\.(\d{1,3})\b/.exec(response)
  if (status === null) return false
  const [subject, detail] = [Number(status[1]), Number(status[2])]
  return (subject === 2 && (detail === 2 || detail === 3)) || (subject === 3 && detail === 4) || subject === 6 || subject === 7
}

/**
 * Copies of the email `emailId` refused for good (5xx, a delivery report) suspend their addresses on its
 * mailbox's forwarding (mail/forwarding.ts), with the refusal as the reason: further copies would only
 * bounce, which costs the domain's reputation. The account resumes one by adding it again. A refusal
 * of this message alone (`refusesOnlyThisMessage`: one sender blocked there, a full mailbox) suspends
 * nothing: the copy is bounced, and the next one goes.
 */
export const suspendRefused = (
  sql: SqlClient.SqlClient,
  emailId: string,
  bounced: ReadonlyArray<{ readonly address: string; readonly response: string }>
) => {
  const refused = bounced.filter((copy) => !refusesOnlyThisMessage(copy.response))
  return refused.length === 0 ? Effect.void : Effect.asVoid(sql`
    UPDATE mailbox_forwards f SET suspended_at = now(), suspended_reason = u.response
    FROM (SELECT * FROM unnest(${refused.map((r) => r.address)}::text[], ${refused.map((r) => r.response)}::text[]) AS t(address, response)) u,
         emails e
    WHERE e.id = ${emailId} AND f.mailbox_id = e.mailbox_id AND f.address = u.address AND f.suspended_at IS NULL`)
}

const WaitingCopy = Schema.Struct({
  address: Schema.String,
  attempts: Schema.Number,
  status: Schema.String
})

const CopyRow = Schema.Struct({
  mailbox: Schema.String,
  mailboxDomain: Schema.String,
  customDomainId: Schema.NullOr(Schema.String),
  receivedAt: Schema.DateFromSelf,
  /** What Mailroom found when the email arrived (null: not checked), and the ARC chain it came with. */
  mailFrom: Schema.String,
  /** The key its copies' bounce addresses are tagged with (bounce-address.ts); none for mail stored before keys. */
  bounceKey: Schema.NullOr(Schema.String),
  authentication: Schema.NullOr(Authentication),
  authenticationResults: Schema.NullOr(Schema.String),
  arcResult: Schema.NullOr(Schema.String),
  /** The email's Message-ID field(s), as stored: what its forwarded-by field's MAC is bound to. */
  messageIdField: Schema.NullOr(Schema.Union(Schema.String, Schema.Array(Schema.String))),
  content: Schema.Uint8ArrayFromSelf,
  waiting: Schema.Array(WaitingCopy),
  /** Until when another attempt holds some of the waiting addresses (a copy of this job being handled now). */
  heldUntil: Schema.NullOr(Schema.DateFromSelf),
  /** The job's domain is one of this server's verified custom domains. */
  verifiedHere: Schema.Boolean
})

/** A job's copies: the message to send (signed), from which envelope sender, to whom, and where they are. */
export interface ForwardedCopy {
  readonly mailFrom: string
  /** The copy as received below Mailroom's fields, sealed and signed. */
  readonly raw: Uint8Array
  /**
   * The copy of 8-bit mail made 7-bit (seven-bit.ts), sealed and signed as it then is: what a server that
   * takes no 8-bit mail is given (the transport chooses). The sender's own signature does not survive
   * the re-encoding, so it goes only where the copy as received cannot: RFC 6152 §3 leaves a relay
   * to convert or to bounce.
   */
  readonly sevenBit: Uint8Array | undefined
  readonly waiting: ReadonlyArray<typeof WaitingCopy.Type>
  /** Some waiting addresses another attempt holds (its process died, the claim not ended yet): the job comes back for them. */
  readonly held: DeliveryHeld | undefined
  readonly verifiedHere: boolean
  readonly receivedAt: Date
  /**
   * The verdicts on the email as it reached Mailroom (none when it was not checked): what a copy to a
   * mailbox of this server is received with, so that a forged From stays `unauthenticated` there.
   */
  readonly verdict: Verdict | undefined
  /** The email's own envelope sender: whom a mailbox of this server's allow and block lists judge the copy by. */
  readonly sender: string
}

/** What became of one address on this attempt (mta.ts's outcome). */
export interface CopyOutcome {
  readonly recipient: string
  readonly status: "sent" | "deferred" | "bounced" | "failed" | "suppressed"
  readonly response: string
}

export class ForwardedCopies extends Effect.Service<ForwardedCopies>()("mailroom/ForwardedCopies", {
  dependencies: [DkimKeys.Default],
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const dkim = yield* DkimKeys
    const arc = yield* ArcSeal
    const settings = yield* OutboundSettings
    const { key: forwardingKey } = yield* ForwardingKey

    /**
     * The job's copy, its waiting addresses claimed for the attempt `claim` (claims.ts): none when the
     * email is gone or every address at the domain is settled; DeliveryHeld when another attempt holds
     * them all.
     */
    const read = Effect.fn("ForwardedCopies.read")(function*(job: ForwardJob, claim: string) {
      // The waiting addresses, locked in one order and claimed for this attempt (claims.ts); those
      // another attempt holds say until when.
      const rows = yield* sql`
        WITH locked AS MATERIALIZED (
          SELECT f.address, f.attempts, f.status, f.claimed_until, f.claimed_until IS NULL OR f.claimed_until < now() AS free
          FROM forward_deliveries f
          WHERE f.email_id = ${job.forward_of} AND f.domain = ${job.domain} AND f.status IN ('queued', 'deferred')
          ORDER BY f.address
          FOR UPDATE
        ),
        claimed AS (
          UPDATE forward_deliveries f SET claim = ${claim}, claimed_until = now() + make_interval(secs => ${CLAIM_SECONDS})
          FROM locked l WHERE f.email_id = ${job.forward_of} AND f.address = l.address AND l.free
        )
        SELECT lower(m.local_part || '@' || m.domain) AS mailbox, m.domain AS mailbox_domain, d.id AS custom_domain_id,
               e.received_at, e.mail_from, e.bounce_key::text AS bounce_key, e.authentication, e.authentication_results, e.authentication -> 'arc' ->> 'result' AS arc_result,
               e.headers -> 'message-id' AS message_id_field, b.content,
               coalesce((SELECT json_agg(json_build_object('address', l.address, 'attempts', l.attempts, 'status', l.status) ORDER BY l.address)
                         FROM locked l WHERE l.free),
                        '[]'::json) AS waiting,
               (SELECT max(l.claimed_until) FROM locked l WHERE NOT l.free) AS held_until,
               EXISTS (SELECT 1 FROM domains WHERE name = ${job.domain} AND verified) AS verified_here
        FROM emails e JOIN mailboxes m ON m.id = e.mailbox_id JOIN blobs b ON b.sha256 = e.raw_sha256
        LEFT JOIN domains d ON d.name = m.domain AND d.user_id = m.user_id
        WHERE e.id = ${job.forward_of}`.pipe(Effect.flatMap((found) => Effect.orDie(Schema.decodeUnknown(Schema.Array(CopyRow))(found))))
      const row = rows[0]
      if (row === undefined) return undefined
      const held = row.heldUntil === null ? undefined : new DeliveryHeld({ emailId: job.forward_of, domain: job.domain, until: row.heldUntil })
      if (row.waiting.length === 0) return held === undefined ? undefined : yield* held
      const now = new Date()
      const trace = [
        `Received: by ${settings.heloName} (Mailroom) for forwarding from <${row.mailbox}>; ${now.toUTCString().replace("GMT", "+0000")}`,
        `${FORWARDED_BY_HEADER}: ${forwardedByValue(forwardingKey, row.mailbox, row.messageIdField === null ? {} : { "message-id": row.messageIdField })}`,
        ""
      ].join("\r\n")
      const copy = Buffer.concat([Buffer.from(trace, "latin1"), Buffer.from(row.content)])
      const key = yield* dkim.signer(row.mailboxDomain, row.customDomainId ?? undefined)
      // Sealed when Mailroom checked the message and found no ARC chain, or one that validated.
      const chain = row.arcResult === "none" || row.arcResult === "pass" ? row.arcResult : undefined
      const signed = (message: Buffer) =>
        Effect.gen(function*() {
          const sealed = row.authenticationResults === null || chain === undefined
            ? Buffer.alloc(0)
            : yield* arc.seal(message, { key, results: row.authenticationResults, chain }).pipe(
              Effect.catchAll((error) =>
                Effect.as(Effect.logWarning("A forwarded copy could not be ARC-sealed; it goes with its DKIM signature only", error), Buffer.alloc(0))
              )
            )
          return yield* Effect.orDie(dkimSign(Buffer.concat([sealed, message]), key, now))
        })
      const raw = yield* signed(copy)
      // 8-bit mail also made 7-bit, sealed and signed as it then is, for a server that takes no 8-bit mail.
      const converted = sevenBit(copy)
      return {
        mailFrom: bounceAddressFor(bounceAddress(job.forward_of, row.mailboxDomain), row.bounceKey, job.domain),
        raw,
        sevenBit: converted === copy ? undefined : yield* signed(converted),
        waiting: row.waiting,
        held,
        verifiedHere: row.verifiedHere,
        receivedAt: row.receivedAt,
        verdict: row.authentication === null || row.authenticationResults === null
          ? undefined
          : { authentication: row.authentication, results: row.authenticationResults },
        sender: row.mailFrom
      } satisfies ForwardedCopy
    })

    /**
     * Record an attempt: each address's status, attempts and answer; a deferred one past
     * OUTBOUND_MAX_AGE (counted from the email's arrival) failed; a bounced one suspends its address.
     */
    const record = Effect.fn("ForwardedCopies.record")(function*(
      job: ForwardJob,
      copy: ForwardedCopy,
      outcomes: ReadonlyArray<CopyOutcome>
    ) {
      const now = new Date()
      const before = new Map(copy.waiting.map((w) => [w.address, w]))
      const rows = outcomes.map((o) => {
        const attempts = (before.get(o.recipient)?.attempts ?? 0) + 1
        const next = new Date(now.getTime() + Duration.toMillis(retryDelay(settings.retryDelays, attempts)))
        const expired = o.status === "deferred" && next.getTime() > copy.receivedAt.getTime() + Duration.toMillis(settings.maxAge)
        // A copy is never suppressed (the routes do not answer so for one): failed, should it be.
        const status = expired || o.status === "suppressed" ? "failed" : o.status
        return {
          address: o.recipient,
          status,
          attempts,
          response: expired ? `Gave up after ${attempts} attempts: ${o.response}` : o.response,
          nextAttemptAt: status === "deferred" ? next.toISOString() : null
        }
      })
      // One transaction: a job delivered again finds the outcome and the suspension both written, or neither.
      yield* Effect.gen(function*() {
        yield* sql`
          UPDATE forward_deliveries f
          SET status = u.status, attempts = u.attempts, last_response = u.response, next_attempt_at = u.next_attempt_at, updated_at = now(),
              claim = NULL, claimed_until = NULL
          FROM (SELECT * FROM unnest(${rows.map((r) => r.address)}::text[], ${rows.map((r) => r.status)}::text[],
                                     ${rows.map((r) => r.attempts)}::int[], ${rows.map((r) => r.response)}::text[],
                                     ${rows.map((r) => r.nextAttemptAt)}::timestamptz[])
                AS t(address, status, attempts, response, next_attempt_at)) u
          WHERE f.email_id = ${job.forward_of} AND f.address = u.address AND f.status IN ('queued', 'deferred')`
        yield* suspendRefused(sql, job.forward_of, rows.filter((r) => r.status === "bounced"))
      }).pipe(sql.withTransaction)
      return rows
    })

    return { read, record } as const
  })
}) {}
