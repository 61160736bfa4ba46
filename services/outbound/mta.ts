/**
 * The delivery actor (the `mta` role; issue 16, DESIGN.md §4b): takes each outbound job off the bus
 * (`mail.outbound.<email_id>`, one per recipient domain) and delivers the email to that domain's
 * recipients that are still waiting.
 *
 * - Recipients hosted on this Mailroom (a shared domain, a verified custom domain) are delivered
 *   internally: no network, through the inbound path's own rules, limits and events.
 * - Others go to `SMTP_RELAY_URL` when set, else to the domain's MX hosts by preference (RFC 5321
 *   §5.1: no MX means the domain's own address; a null MX, RFC 7505, means it takes no mail), each
 *   resolved through the Dns port (answers kept a minute: dns/answers.ts), on `OUTBOUND_SMTP_PORT`, with
 *   opportunistic STARTTLS. An MX host that cannot be reached or answers 4xx at once hands over to the
 *   next one. A host's non-public addresses (loopback, private, link-local, cloud metadata: the
 *   domain's owner writes its DNS) are never connected to unless `OUTBOUND_ALLOW_PRIVATE`; a domain
 *   whose every host has only such addresses fails (`550 5.4.4 Not sent: … resolves only to …`).
 * - Per recipient: 2xx `sent`; 4xx, time-outs, refused connections `deferred`, tried again on the
 *   retry schedule until `OUTBOUND_MAX_AGE`, then `failed`; 5xx `bounced`, and the address joins the
 *   account's suppression list when the refusal is about it (`byCode`). Each change is an event (`email.sent`, `email.delivery_delayed` on
 *   the first deferral, `email.bounced`, `email.failed`).
 *
 * Mailroom's own mail to a person (`mail.outbound.system.<id>`, system-mail.ts) carries its message in
 * the job and is routed the same way; nothing records it but the log and the delivery metric. Received
 * mail's forwarded copies (`mail.outbound.forward.<email_id>`, forwards.ts) are routed the same way too,
 * their outcomes kept per address beside the email.
 *
 * At least once: the job is acknowledged only after the rows say what happened and the change was
 * told. A job whose recipients are all settled sends nothing, so a redelivered job never sends twice
 * what was recorded; an mta that dies between the receiver's 250 and the record sends that message
 * again (with the same Message-ID, as the raw is stored), which receivers de-duplicate by. A change
 * recorded but not told (the mta died, or the bus refused the event) is marked so (`announced`), and
 * the job, coming back, tells it under the event id it had.
 *
 * One attempt at a time: the bus may hand a job out twice at once; an attempt claims the recipients
 * it tries as it reads them, and a copy that finds them held comes back when the claim ends (claims.ts).
 */
import { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Data, Duration, Effect, Either, Layer, Option, Schema } from "effect"
import { groupCommit } from "../batching.ts"
import { Bus, type BusError, type BusMessage, decodeJson, subjects } from "../bus/bus.ts"
import { measured } from "../bus/metrics.ts"
import { answerCache, keptAnswers } from "../dns/answers.ts"
import { kindInWords, nonPublicKind } from "../dns/addresses.ts"
import { Dns, type DnsError, type MxRecord, type ResolvedAddress } from "../dns/dns.ts"
import { type Backpressure, BackpressureTypeId } from "../health/dependency-health.ts"
import type { Verdict } from "../mail/authentication.ts"
import { Inbound, type Recipient } from "../mail/inbound.ts"
import type { RecipientRefusal } from "../mail/refusals.ts"
import { MailboxSettings } from "../mailboxes/mailboxes.ts"
import { domainOf } from "../mailboxes/rules.ts"
import { Lifecycle } from "../lifecycle.ts"
import { bounceAddressFor } from "./bounce-address.ts"
import { CLAIM_SECONDS, DeliveryHeld, underClaim } from "./claims.ts"
import { announce, refusesTheAddress, type SentEmail, SentEmailRow, type StatusChange, suppressBounced } from "./ledger.ts"
import { OutboundJob } from "./schemas.ts"
import { DkimKeys } from "./dkim.ts"
import { ForwardedCopies, ForwardJob } from "./forwards.ts"
import { deliveriesFromZero, recordDeliveries } from "./metrics.ts"
import { OutboundSettings, retryDelay } from "./settings.ts"
import { SystemMailJob } from "./system-mail.ts"
import { type SmtpTarget, SmtpTransport } from "./transport.ts"

/** What became of one recipient on this attempt. */
interface Outcome {
  readonly recipient: string
  readonly status: "sent" | "deferred" | "bounced" | "failed" | "suppressed"
  readonly response: string
  /** A bounce that says the address takes no mail: it joins the account's suppression list. */
  readonly suppress: boolean
  /**
   * Not tried on this attempt (`deferred`): every host stopped at an earlier envelope of the message,
   * whose answer was that envelope's own. It keeps what it was (queued, or deferred with its attempts
   * and last answer) and waits for the job to come back; `response` says why, for a log or a give-up.
   */
  readonly untried?: true
}

/**
 * 2xx sent, 5xx bounced, anything else (4xx, no answer) deferred. A bounce suppresses the address
 * only when it is about the address (ledger.ts `refusesTheAddress`): the recipient's own answer at
 * RCPT, or a message's refusal that says so of its enhanced code; never a refusal of the sender or of
 * the message (a relay that will not take our MAIL FROM, content refused as spam).
 */
const byCode = (recipient: string, code: number | undefined, response: string, stage: "rcpt" | "data" | "sender"): Outcome => {
  const status = code !== undefined && code >= 200 && code < 300 ? "sent" : code !== undefined && code >= 500 ? "bounced" : "deferred"
  return { recipient, status, response, suppress: status === "bounced" && stage !== "sender" && refusesTheAddress(response, stage === "rcpt") }
}

/** One SMTP transaction's envelope: its sender (a bounce address) and recipients. */
interface Envelope {
  readonly from: string
  readonly to: ReadonlyArray<string>
}

/** How mail for a domain can leave: to these hosts in order, or not at all (for now, or ever). */
type Routes =
  | { readonly kind: "hosts"; readonly implicit: boolean; readonly hosts: ReadonlyArray<{ readonly name: string; readonly target: SmtpTarget }> }
  | { readonly kind: "none"; readonly response: string }
  | { readonly kind: "unavailable"; readonly response: string }

/**
 * Some recipients wait for a later attempt: the job goes back to the bus, which offers it again on
 * the schedule. Expected, not a fault: the attempt is logged by the mta, the bus boundary logs this at
 * debug only.
 */
export class DeliveryDeferred extends Data.TaggedError("DeliveryDeferred")<{ readonly emailId: string; readonly domain: string }>
  implements Backpressure
{
  readonly [BackpressureTypeId] = true as const
  override get message() {
    return `delivery of ${this.emailId} to ${this.domain} deferred`
  }
}

/**
 * The process began to shut down while this attempt still waited on a remote server: it is left
 * unrecorded, and the job unacknowledged comes back (to this mta once it starts again, or to another
 * one). Flow control, not a fault: the bus boundary logs it at debug only.
 */
export class DeliveryStopped extends Data.TaggedError("DeliveryStopped")<{ readonly domain: string }> implements Backpressure {
  readonly [BackpressureTypeId] = true as const
  override get message() {
    return `delivery to ${this.domain} left for the next start: the process is shutting down`
  }
}

/**
 * How long an attempt in flight may still take once the process begins to stop. A healthy server
 * answers in milliseconds; one that does not answer would hold the shutdown for the connect and
 * command time-outs (30 and 60 s), past SHUTDOWN_TIMEOUT's 30 s, and the process would be cut off.
 */
const STOP_GRACE = Duration.seconds(5)

const WaitingRow = Schema.Struct({
  recipient: Schema.String,
  attempts: Schema.Number,
  status: Schema.Literal("queued", "deferred"),
  /** Its last attempt's answer (none while queued): kept when this attempt does not try it. */
  response: Schema.NullOr(Schema.String),
  /** On the account's suppression list now: it joined it (bounced, unsubscribed, …) since this one was queued. */
  suppressed: Schema.Boolean
})

/** A recipient whose latest change of status was written but not told (its teller died, or the bus refused the event). */
const UntoldRow = Schema.Struct({
  recipient: Schema.String,
  status: Schema.Literal("sent", "deferred", "bounced", "failed", "suppressed"),
  attempts: Schema.Number,
  response: Schema.NullOr(Schema.String),
  next: Schema.NullOr(Schema.String)
})

/** A job's email, the raw message to send, its recipients in the job's domain still waiting, and where they are. */
const JobRow = Schema.Struct({
  /** The job's place in its batch. */
  idx: Schema.NumberFromString,
  ...SentEmailRow.fields,
  mailFrom: Schema.String,
  /** The key its bounce addresses are tagged with (bounce-address.ts); none for mail stored before keys. */
  bounceKey: Schema.NullOr(Schema.String),
  createdAt: Schema.DateFromSelf,
  content: Schema.Uint8ArrayFromSelf,
  waiting: Schema.Array(WaitingRow),
  untold: Schema.Array(UntoldRow),
  /** Until when another attempt holds some of the job's waiting recipients (a copy of this job being handled now). */
  heldUntil: Schema.NullOr(Schema.DateFromSelf),
  /** The domain is one of this server's verified custom domains. */
  verifiedHere: Schema.Boolean
})

/** What an attempt writes for one recipient. */
interface DeliveryUpdate {
  readonly emailId: string
  readonly recipient: string
  readonly status: Outcome["status"] | "queued"
  readonly attempts: number
  /** None for a queued recipient this attempt did not try. */
  readonly response: string | null
  readonly nextAttemptAt: Date | null
  /** Nothing to tell of it (a deferral that went on): told already. */
  readonly announced: boolean
}

/** Jobs read, or attempts recorded, in one statement (group commit, batching.ts). */
const MAX_BATCH = 32

export class Mta extends Effect.Service<Mta>()("mailroom/Mta", {
  scoped: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const bus = yield* Bus
    const dns = yield* Dns
    const transport = yield* SmtpTransport
    const inbound = yield* Inbound
    const copies = yield* ForwardedCopies
    const settings = yield* OutboundSettings
    const { sharedDomains } = yield* MailboxSettings
    const lifecycle = yield* Lifecycle
    // A domain's MX hosts and their addresses, kept a minute (dns/answers.ts): mail to one domain asks once.
    const keptMx = answerCache<ReadonlyArray<MxRecord>>(keptAnswers)
    const keptAddresses = answerCache<ReadonlyArray<ResolvedAddress>>(keptAnswers)

    /**
     * The jobs being started at once, read together, and their waiting recipients claimed for them:
     * each one's email, its raw message, whom in the job's domain it now holds, whether and until when
     * another attempt holds others, and whether the domain is hosted here. Recipients come as JSON: one
     * row per job, however many there are; a job whose email is gone has none.
     *
     * The waiting rows are locked in one order (so two such statements wait for each other rather than
     * deadlock) and read as they are once locked: a claim another attempt committed meanwhile is seen.
     * Of two copies of one job in a batch, the first claims.
     */
    const readJob = yield* groupCommit({
      maxBatch: MAX_BATCH,
      parallel: 2,
      run: (jobs: ReadonlyArray<OutboundJob & { readonly claim: string }>) =>
        sql`
          WITH j AS (
            SELECT * FROM unnest(${jobs.map((j) => j.email_id)}::text[], ${jobs.map((j) => j.domain)}::text[],
                                 ${jobs.map((j) => j.claim)}::text[]) WITH ORDINALITY AS j(email_id, domain, claim, idx)
          ),
          firsts AS (SELECT DISTINCT ON (email_id, domain) * FROM j ORDER BY email_id, domain, idx),
          locked AS MATERIALIZED (
            SELECT o.email_id, o.recipient, o.domain, o.attempts, o.status, o.last_response, o.claimed_until, f.idx, f.claim,
                   o.claimed_until IS NULL OR o.claimed_until < now() AS free
            FROM outbound_deliveries o JOIN firsts f ON o.email_id = f.email_id AND o.domain = f.domain
            WHERE o.status IN ('queued', 'deferred')
            ORDER BY o.email_id, o.recipient
            FOR UPDATE OF o
          ),
          -- (A statement in WITH runs whether or not the query reads it.)
          claimed AS (
            UPDATE outbound_deliveries d SET claim = l.claim, claimed_until = now() + make_interval(secs => ${CLAIM_SECONDS})
            FROM locked l
            WHERE d.email_id = l.email_id AND d.recipient = l.recipient AND l.free
          )
          SELECT j.idx, e.user_id, e.mailbox_id, e.message_id, e.thread_id, e.mail_from, e.bounce_key::text AS bounce_key, e.created_at, b.content,
                 coalesce((SELECT json_agg(json_build_object('recipient', l.recipient, 'attempts', l.attempts, 'status', l.status,
                                                             'response', l.last_response,
                                                             'suppressed', EXISTS (SELECT 1 FROM suppressions s
                                                                                   WHERE s.user_id = e.user_id AND s.address = lower(l.recipient)))
                                           ORDER BY l.recipient)
                           FROM locked l WHERE l.idx = j.idx AND l.free),
                          '[]'::json) AS waiting,
                 -- Held by another attempt: claimed before, or by the first copy of this job in the batch.
                 (SELECT max(CASE WHEN l.free THEN now() + make_interval(secs => ${CLAIM_SECONDS}) ELSE l.claimed_until END)
                  FROM locked l
                  WHERE l.email_id = j.email_id AND l.domain = j.domain AND (l.idx <> j.idx OR NOT l.free)) AS held_until,
                 coalesce((SELECT json_agg(json_build_object('recipient', d.recipient, 'status', d.status, 'attempts', d.attempts,
                                                             'response', d.last_response, 'next', d.next_attempt_at)
                                           ORDER BY d.recipient)
                           FROM outbound_deliveries d
                           WHERE d.email_id = e.id AND d.domain = j.domain AND NOT d.announced),
                          '[]'::json) AS untold,
                 EXISTS (SELECT 1 FROM domains WHERE name = j.domain AND verified) AS verified_here
          FROM j JOIN emails e ON e.id = j.email_id JOIN blobs b ON b.sha256 = e.raw_sha256`.pipe(
          Effect.flatMap((rows) => Effect.orDie(Schema.decodeUnknown(Schema.Array(JobRow))(rows))),
          Effect.map((rows) => {
            const byIdx = new Map(rows.map((row) => [row.idx, row]))
            return jobs.map((_, i) => byIdx.get(i + 1))
          })
        )
    })

    /** The attempts finishing at once, recorded together. */
    const writeUpdates = yield* groupCommit({
      maxBatch: MAX_BATCH,
      parallel: 2,
      run: (batches: ReadonlyArray<ReadonlyArray<DeliveryUpdate>>) => {
        // In one order, so that two batches touching the same rows (a job redelivered while its first
        // attempt runs) wait for each other rather than deadlock.
        const rows = batches.flat().sort((a, b) => a.emailId.localeCompare(b.emailId) || a.recipient.localeCompare(b.recipient))
        return sql`
          UPDATE outbound_deliveries d
          SET status = u.status, attempts = u.attempts, last_response = u.response, next_attempt_at = u.next_attempt_at, updated_at = now(),
              announced = u.announced, claim = NULL, claimed_until = NULL,
              -- Its job reached the mta: it was published, whether or not its sender lived to say so (requeue.ts).
              published = true
          FROM (SELECT * FROM unnest(${rows.map((r) => r.emailId)}::text[], ${rows.map((r) => r.recipient)}::text[],
                                     ${rows.map((r) => r.status)}::text[], ${rows.map((r) => r.attempts)}::int[],
                                     ${rows.map((r) => r.response)}::text[],
                                     ${rows.map((r) => r.nextAttemptAt?.toISOString() ?? null)}::timestamptz[],
                                     ${rows.map((r) => r.announced)}::bool[])
                AS t(email_id, recipient, status, attempts, response, next_attempt_at, announced)) u
          WHERE d.email_id = u.email_id AND d.recipient = u.recipient`.pipe(Effect.as(batches.map(() => undefined)))
      }
    })

    /** These recipients' changes were told (one statement for the tellings finishing at once). */
    const markAnnounced = yield* groupCommit({
      maxBatch: MAX_BATCH,
      parallel: 1,
      run: (batches: ReadonlyArray<ReadonlyArray<{ readonly emailId: string; readonly recipient: string }>>) => {
        const rows = batches.flat().sort((a, b) => a.emailId.localeCompare(b.emailId) || a.recipient.localeCompare(b.recipient))
        return sql`
          UPDATE outbound_deliveries d SET announced = true
          FROM unnest(${rows.map((r) => r.emailId)}::text[], ${rows.map((r) => r.recipient)}::text[]) AS t(email_id, recipient)
          WHERE d.email_id = t.email_id AND d.recipient = t.recipient`.pipe(Effect.as(batches.map(() => undefined)))
      }
    })

    /**
     * Tell `changes` as events, then note them told. Should either fail (or the process die), the job
     * comes back and tells them again: an event's id is the same each time (ledger.ts), so a receiver
     * that heard it already drops it.
     */
    const tell = (email: SentEmail, changes: ReadonlyArray<StatusChange>, at: Date) =>
      changes.length === 0 ? Effect.void : Effect.zipRight(
        announce(bus, email, changes, at),
        markAnnounced(changes.map((c) => ({ emailId: email.id, recipient: c.recipient })))
      )

    /**
     * Internal delivery: each recipient through the inbound rules, then one acceptance for those taken.
     * A forwarded copy comes `as` the email it copies: judged by the recipients' allow and block lists
     * by that email's sender (not the copy's bounce address, which no list names), and received with
     * its verdicts. Mail a mailbox of this server sends is Mailroom's own and has none to check.
     */
    const deliverInternally = (
      recipients: ReadonlyArray<string>,
      raw: Uint8Array,
      mailFrom: string,
      as?: { readonly sender: string; readonly verdict: Verdict | undefined }
    ) =>
      Effect.gen(function*() {
        const outcomes: Array<Outcome> = []
        const taken: Array<Recipient> = []
        for (const address of recipients) {
          // Those taken already count with it: the copy is an email for each of their mailboxes.
          const found = yield* Effect.either(inbound.recipient(address, raw.byteLength, as?.sender ?? mailFrom, taken))
          if (found._tag === "Right") taken.push(found.right)
          else {
            const reply = (found.left as RecipientRefusal).reply
            outcomes.push(byCode(address, reply.code, `${reply.code} ${reply.text}`, "rcpt"))
          }
        }
        if (taken.length > 0) {
          const accepted = yield* Effect.either(inbound.accept({ mailFrom, recipients: taken, raw, receivedAt: new Date(), verdict: as?.verdict }))
          for (const r of taken) {
            outcomes.push(
              accepted._tag === "Right"
                ? byCode(r.address, 250, "250 2.0.0 Delivered to a mailbox on this server", "data")
                : byCode(r.address, accepted.left.reply.code, `${accepted.left.reply.code} ${accepted.left.reply.text}`, "data")
            )
          }
        }
        return outcomes
      })

    /** Where mail for `domain` goes: the relay, or its MX hosts by preference (resolved through the Dns port). */
    const routes = (domain: string): Effect.Effect<Routes> =>
      Option.match(settings.relay, {
        onSome: (relay) =>
          Effect.succeed<Routes>({
            kind: "hosts",
            implicit: false,
            hosts: [{
              name: relay.host,
              target: {
                host: relay.host,
                port: relay.port,
                secure: relay.secure,
                verifyTls: true,
                auth: relay.user === undefined ? undefined : { user: relay.user, pass: relay.pass ?? "" }
              }
            }]
          }),
        onNone: () =>
          keptMx(domain, dns.mx(domain)).pipe(
            Effect.map((records): Routes => {
              const hosts = [...records].sort((a, b) => a.priority - b.priority).map((r) => r.exchange)
              if (hosts.length === 1 && (hosts[0] === "" || hosts[0] === ".")) {
                return { kind: "none", response: `556 5.1.10 ${domain} accepts no mail (null MX)` }
              }
              return { kind: "hosts", implicit: false, hosts: hosts.map(mxRoute) }
            }),
            Effect.catchAll((error) =>
              Effect.succeed<Routes>(
                error.reason === "NotFound"
                  // No MX record: the domain itself is the mail host (RFC 5321 §5.1).
                  ? { kind: "hosts", implicit: true, hosts: [mxRoute(domain)] }
                  : { kind: "unavailable", response: `451 4.4.3 ${error.message}` }
              )
            )
          )
      })

    const mxRoute = (host: string) => ({ name: host, target: { host, port: settings.mxPort, secure: false, verifyTls: false } })

    /**
     * The address to connect to: the relay's name as given (the operator's choice), an MX host's
     * through our Dns port, its first public address. A domain's owner writes its DNS, so without
     * OUTBOUND_ALLOW_PRIVATE a host's loopback, private, link-local (a cloud's metadata service) and
     * other non-public addresses are passed over; a host that has no other is `refused`, saying why.
     * The connection goes to the address checked here, never to a fresh lookup.
     */
    const addressOf = (name: string): Effect.Effect<{ readonly address: string } | { readonly refused: string }, DnsError> =>
      Option.isSome(settings.relay)
        ? Effect.succeed({ address: name })
        : Effect.map(keptAddresses(name, dns.addresses(name)), (addresses) => {
          if (settings.allowPrivate) return { address: addresses[0]!.address }
          const usable = addresses.find((a) => nonPublicKind(a.address) === undefined)
          if (usable !== undefined) return { address: usable.address }
          const described = addresses.length === 1
            ? `${addresses[0]!.address}, ${kindInWords(nonPublicKind(addresses[0]!.address)!)}`
            : addresses.map((a) => `${a.address} (${kindInWords(nonPublicKind(a.address)!)})`).join(" and ")
          return { refused: `${name} resolves only to ${described}` }
        })

    /**
     * External delivery of one message in `envelopes` (one SMTP transaction each: a recipient's own
     * bounce address, or several recipients under one), one after another on the host's connection.
     * The first route that answers decides; an envelope a route cannot take (unreachable, or 4xx at
     * once) hands it and those after it over to the next. Given up STOP_GRACE after the process begins
     * to stop (DeliveryStopped). `sevenBit`, when given (a forwarded copy of 8-bit mail, forwards.ts), is
     * the message for a server that takes no 8-bit mail.
     *
     * A host that fails as a whole (not reached, its greeting or login refused, a 421) fails every
     * envelope still waiting: each was tried. A 4xx to one envelope's MAIL FROM or DATA is that
     * envelope's answer alone: those after it were not tried on that host, and an envelope no host
     * got to is `untried`, charged with nothing (no attempt, no answer of another's, no event).
     */
    const deliverOut = (domain: string, envelopes: ReadonlyArray<Envelope>, raw: Uint8Array, sevenBit?: Uint8Array) =>
      Effect.gen(function*() {
        const each = (of: ReadonlyArray<Envelope>, status: Outcome["status"], response: string) =>
          of.flatMap((e) => e.to).map((recipient): Outcome => ({ recipient, status, response, suppress: false }))
        const found = yield* routes(domain)
        if (found.kind === "none") return each(envelopes, "failed", found.response)
        if (found.kind === "unavailable") return each(envelopes, "deferred", found.response)
        if (found.hosts.length === 0) return each(envelopes, "deferred", `451 4.4.1 No mail host for ${domain} could be reached`)
        const outcomes: Array<Outcome> = []
        let waiting = envelopes
        // The latest answer each waiting envelope got, its own or its host's; one without was never tried.
        const answered = new Map<Envelope, string>()
        const failAll = (of: ReadonlyArray<Envelope>, response: string) => of.forEach((e) => answered.set(e, response))
        // The answer that stopped the last host before the untried envelopes.
        let stoppedBy = ""
        // Hosts passed over for having only non-public addresses; when every host was, the domain's mail goes nowhere.
        const refusedHosts: Array<string> = []
        for (const route of found.hosts) {
          const address = yield* Effect.either(addressOf(route.name))
          if (Either.isLeft(address)) {
            // An implicit MX (the domain itself) that does not exist: the domain takes no mail.
            if (found.implicit && address.left.reason === "NotFound") {
              return [...outcomes, ...each(waiting, "failed", `550 5.1.2 ${domain} has no mail server`)]
            }
            failAll(waiting, `451 4.4.3 ${address.left.message}`)
            continue
          }
          if ("refused" in address.right) {
            refusedHosts.push(address.right.refused)
            failAll(waiting, `550 5.4.4 Not sent: ${address.right.refused}`)
            continue
          }
          const target = { ...route.target, host: address.right.address, serverName: route.name }
          let taken = 0
          for (const envelope of waiting) {
            const result = yield* Effect.either(transport.send(target, { from: envelope.from, to: envelope.to, raw, sevenBit, heloName: settings.heloName }))
            if (Either.isRight(result)) {
              const byRecipient = new Map(result.right.map((o) => [o.recipient.toLowerCase(), o]))
              outcomes.push(...envelope.to.map((recipient) => {
                const o = byRecipient.get(recipient.toLowerCase())
                return o === undefined
                  ? byCode(recipient, undefined, "451 4.4.0 The server did not answer for this recipient", "data")
                  : byCode(recipient, o.code, o.response, o.stage)
              }))
              taken++
              continue
            }
            const failure = result.left
            // The relay refused our credentials: the operator's to fix; the mail waits, deferred.
            if (failure.loginRefused === true) {
              return [...outcomes, ...each(waiting.slice(taken), "deferred", `451 4.7.0 ${route.name} refused the login: ${failure.response}`)]
            }
            // A relay with credentials that offers no STARTTLS: the password stays unsent and the mail waits, deferred.
            if (failure.encryptionMissing === true) {
              const response = `451 4.7.10 ${failure.response}: use smtps:// or a relay that offers STARTTLS (SMTP_RELAY_URL)`
              yield* Effect.logWarning(`Delivery deferred: ${response}`)
              return [...outcomes, ...each(waiting.slice(taken), "deferred", response)]
            }
            const response = failure.code === undefined ? `451 4.4.1 ${route.name}: ${failure.response}` : failure.response
            // A permanent refusal of the whole message (sender, data) is the domain's answer; it suppresses
            // no address unless it says the addresses take no mail (a DATA "550 5.1.1"), never for a refused sender.
            if (failure.code !== undefined && failure.code >= 500) {
              outcomes.push(...envelope.to.map((recipient) => byCode(recipient, failure.code, failure.response, failure.command === "DATA" ? "data" : "sender")))
              taken++
              continue
            }
            // Not reached, or not now: this envelope and those after it try the next host.
            const ownAnswer = failure.code !== undefined && failure.code !== 421 && (failure.command === "MAIL FROM" || failure.command === "DATA")
            if (ownAnswer) {
              answered.set(envelope, response)
              stoppedBy = response
            } else {
              failAll(waiting.slice(taken), response)
            }
            break
          }
          waiting = waiting.slice(taken)
          if (waiting.length === 0) return outcomes
        }
        // Every host has only addresses in our own network (RFC 5321 §5.1: no MX host usable is an
        // error to report): failed now, as a domain that takes no mail is. Its DNS, not the network,
        // would have to change, and waiting 48 hours for that would only delay telling the sender.
        if (refusedHosts.length === found.hosts.length) {
          const response = `550 5.4.4 Not sent: ${refusedHosts.join("; ")}; mail is delivered to public addresses only`
          yield* Effect.logWarning(`Delivery refused: ${response}`).pipe(Effect.annotateLogs({ domain }))
          return [...outcomes, ...each(waiting, "failed", response)]
        }
        return [
          ...outcomes,
          ...waiting.flatMap((envelope) => {
            const response = answered.get(envelope)
            return response !== undefined ? each([envelope], "deferred", response) : envelope.to.map((recipient): Outcome => ({
              recipient,
              status: "deferred",
              response: `Not tried: ${domain}'s mail server deferred an earlier recipient's transaction of this message (${stoppedBy})`,
              suppress: false,
              untried: true
            }))
          })
        ]
      }).pipe(
        Effect.raceFirst(lifecycle.stopping.pipe(Effect.zipRight(Effect.sleep(STOP_GRACE)), Effect.zipRight(new DeliveryStopped({ domain }))))
      )

    /** Record the attempt's outcomes and announce each change; true when some recipients wait for another attempt. */
    const record = (
      email: typeof JobRow.Type,
      emailId: string,
      outcomes: ReadonlyArray<Outcome>
    ) =>
      Effect.gen(function*() {
        const now = new Date()
        const before = new Map(email.waiting.map((w) => [w.recipient, w]))
        const giveUpAt = email.createdAt.getTime() + Duration.toMillis(settings.maxAge)
        const changed: Array<StatusChange & { readonly previousStatus: string | undefined }> = []
        // Not tried this time, and still in time: left as they were (queued, or deferred with their
        // attempts and last answer), to be tried when the job comes back; nothing to tell or count.
        const untouched: Array<DeliveryUpdate> = []
        for (const o of outcomes) {
          const previous = before.get(o.recipient)
          // Giving up on a suppressed recipient is no attempt: nothing was sent to it; nor is passing one over.
          const attempts = (previous?.attempts ?? 0) + (o.status === "suppressed" || o.untried === true ? 0 : 1)
          const next = new Date(now.getTime() + Duration.toMillis(retryDelay(settings.retryDelays, o.untried === true ? attempts + 1 : attempts)))
          // Out of time: the next attempt would come after OUTBOUND_MAX_AGE.
          const expired = o.status === "deferred" && next.getTime() > giveUpAt
          if (o.untried === true && !expired && previous !== undefined) {
            untouched.push({
              emailId,
              recipient: o.recipient,
              status: previous.status,
              attempts,
              response: previous.response,
              nextAttemptAt: next,
              announced: true
            })
            continue
          }
          const status: Outcome["status"] = expired ? "failed" : o.status
          changed.push({
            recipient: o.recipient,
            status,
            attempts,
            response: expired ? `Gave up after ${attempts} attempts: ${o.response}` : o.response,
            nextAttemptAt: status === "deferred" ? next : null,
            previousStatus: previous?.status,
            suppress: o.suppress
          })
        }
        const sent: SentEmail = { id: emailId, ...email }
        // Suppressed before the outcome is written, so that no crash between the two leaves a bounced
        // recipient unsuppressed: the job, delivered again, skips a settled recipient but settles a
        // suppressed one as such. And whoever reads the bounce finds the suppression.
        yield* suppressBounced(sql, sent, changed)
        // A deferral is told once, when it starts; every final outcome is told.
        const told = changed.filter((r) => r.status !== "deferred" || r.previousStatus !== "deferred")
        yield* writeUpdates([...changed.map((r) => ({ ...r, emailId, announced: !told.includes(r) })), ...untouched])
        // Counted once written, before telling (a publish to the bus): whoever reads the outcome
        // finds it counted a moment later at most.
        yield* recordDeliveries(changed.map((r) => r.status))
        yield* tell(sent, told, now)
        return untouched.length > 0 || changed.some((r) => r.status === "deferred")
      })

    /**
     * One job: the domain's waiting recipients of one email, one attempt. The recipients are claimed
     * as they are read (claims.ts); held by another copy of the job, they are left to it (DeliveryHeld).
     */
    const deliver = Effect.fn("Mta.deliver")(function*(job: OutboundJob) {
      return yield* underClaim(sql, "outbound_deliveries", job.email_id, (claim) => attempt(job, claim))
    })

    const attempt = Effect.fnUntraced(function*(job: OutboundJob, claim: string) {
      const email = yield* readJob({ ...job, claim })
      if (!email) return
      // What an attempt wrote but could not tell (its teller died, or the bus refused the event): told first.
      yield* tell({ id: job.email_id, ...email }, email.untold.map(untoldChange), new Date())
      const held = email.heldUntil === null
        ? Effect.void
        : new DeliveryHeld({ emailId: job.email_id, domain: job.domain, until: email.heldUntil })
      // Every recipient settled (a redelivered job), or held by another attempt.
      if (email.waiting.length === 0) return yield* held
      yield* attemptClaimed(job, email)
      // Some were held (a dead attempt's claim on them has not ended yet): the job comes back for them.
      yield* held
    })

    /** An attempt on the recipients it claimed. */
    const attemptClaimed = Effect.fnUntraced(function*(job: OutboundJob, email: typeof JobRow.Type) {
      // A recipient suppressed while the message waited (another message to it bounced, say) is not tried again.
      const suppressed = email.waiting.filter((w) => w.suppressed).map((w): Outcome => ({
        recipient: w.recipient,
        status: "suppressed",
        response: `Not sent: ${w.recipient} joined the account's suppression list since this message was queued`,
        suppress: false
      }))
      const recipients = email.waiting.filter((w) => !w.suppressed).map((w) => w.recipient)
      const hosted = sharedDomains.includes(job.domain) || email.verifiedHere
      // Each recipient's own bounce address, so a report to it speaks only of that recipient; mail
      // stored before bounce keys goes to them all under its one bare address.
      const envelopes: ReadonlyArray<Envelope> = recipients.length === 0
        ? []
        : email.bounceKey === null
        ? [{ from: email.mailFrom, to: recipients }]
        : recipients.map((recipient) => ({ from: bounceAddressFor(email.mailFrom, email.bounceKey, recipient), to: [recipient] }))
      const outcomes = [
        ...suppressed,
        ...(envelopes.length === 0
          ? []
          : hosted
          ? (yield* Effect.forEach(envelopes, (e) => deliverInternally(e.to, email.content, e.from))).flat()
          : yield* deliverOut(job.domain, envelopes, email.content))
      ]
      const deferred = yield* record(email, job.email_id, outcomes)
      // Addresses only at debug: no line at info or above holds one (README, Logs).
      yield* Effect.logInfo("Delivery attempt").pipe(Effect.annotateLogs({
        email_id: job.email_id,
        domain: job.domain,
        outcomes: countedOutcomes(outcomes.map((o) => ({ status: o.untried === true ? "untried" : o.status })))
      }))
      yield* Effect.logDebug("Delivery attempt's recipients").pipe(Effect.annotateLogs({
        email_id: job.email_id,
        outcomes: outcomes.map((o) => `${o.recipient}: ${o.untried === true ? "untried" : o.status}`).join(", ")
      }))
      if (deferred) return yield* new DeliveryDeferred({ emailId: job.email_id, domain: job.domain })
    })

    /**
     * Mailroom's own mail to a person (system-mail.ts): one recipient, no stored email. Given up, with
     * a warning, once it expires or is refused for good; a deferral comes back on the retry schedule.
     */
    const deliverSystemMail = Effect.fn("Mta.deliverSystemMail")(function*(job: SystemMailJob) {
      const log = Effect.annotateLogs({ system_mail_id: job.system_mail_id, recipient: job.to })
      if (Date.now() > job.expires_at) return yield* log(Effect.logWarning("System mail not delivered before it expired"))
      const domain = domainOf(job.to)
      const hosted = sharedDomains.includes(domain) ||
        (yield* sql<{ verified: boolean }>`SELECT EXISTS (SELECT 1 FROM domains WHERE name = ${domain} AND verified) AS verified`)[0]!.verified
      const [outcome] = hosted
        ? yield* deliverInternally([job.to], job.raw, job.mail_from)
        : yield* deliverOut(domain, [{ from: job.mail_from, to: [job.to] }], job.raw)
      yield* recordDeliveries([outcome!.status])
      yield* log(outcome!.status === "sent"
        ? Effect.logInfo("System mail delivered")
        : Effect.logWarning(`System mail ${outcome!.status}: ${outcome!.response}`))
      if (outcome!.status === "deferred") return yield* new DeliveryDeferred({ emailId: job.system_mail_id, domain })
    })

    /** One job of forwarded copies: the domain's waiting addresses of one received email, one attempt, under a claim (claims.ts). */
    const deliverForward = Effect.fn("Mta.deliverForward")(function*(job: ForwardJob) {
      return yield* underClaim(sql, "forward_deliveries", job.forward_of, (claim) => forwardAttempt(job, claim))
    })

    const forwardAttempt = Effect.fnUntraced(function*(job: ForwardJob, claim: string) {
      const copy = yield* copies.read(job, claim)
      // Deleted since, or every address settled (a redelivered job): nothing to do.
      if (copy === undefined) return
      const addresses = copy.waiting.map((w) => w.address)
      const outcomes = sharedDomains.includes(job.domain) || copy.verifiedHere
        ? yield* deliverInternally(addresses, copy.raw, copy.mailFrom, copy)
        : yield* deliverOut(job.domain, [{ from: copy.mailFrom, to: addresses }], copy.raw, copy.sevenBit)
      const rows = yield* copies.record(job, copy, outcomes)
      yield* recordDeliveries(rows.map((r) => r.status))
      yield* Effect.logInfo("Forwarding attempt").pipe(Effect.annotateLogs({
        email_id: job.forward_of,
        domain: job.domain,
        outcomes: rows.map((r) => `${r.address}: ${r.status}`).join(", ")
      }))
      if (rows.some((r) => r.status === "deferred")) return yield* new DeliveryDeferred({ emailId: job.forward_of, domain: job.domain })
      if (copy.held !== undefined) return yield* copy.held
    })

    const Job = Schema.Union(OutboundJob, SystemMailJob, ForwardJob)

    /** The bus handler: a malformed job is logged and dropped, never retried. */
    const handle = (message: BusMessage): Effect.Effect<void, SqlError | BusError | DeliveryDeferred | DeliveryHeld | DeliveryStopped> =>
      Effect.try(() => decodeJson(message.data)).pipe(
        Effect.flatMap(Schema.decodeUnknown(Job)),
        Effect.matchEffect({
          onFailure: (error) => Effect.logError("Dropping a malformed outbound job", { subject: message.subject, error }),
          onSuccess: (job) =>
            "system_mail_id" in job ? deliverSystemMail(job) : "forward_of" in job ? deliverForward(job) : deliver(job)
        })
      )

    return { deliver, handle } as const
  })
}) {}

/** An untold change as it is told. */
const untoldChange = (row: typeof UntoldRow.Type): StatusChange => ({
  recipient: row.recipient,
  status: row.status,
  attempts: row.attempts,
  response: row.response ?? "",
  nextAttemptAt: row.next === null ? null : new Date(row.next)
})

/** Outcomes as counts by status, in the order first met: "2 sent, 1 deferred". */
const countedOutcomes = (outcomes: ReadonlyArray<{ readonly status: string }>) => {
  const counts = new Map<string, number>()
  for (const { status } of outcomes) counts.set(status, (counts.get(status) ?? 0) + 1)
  return [...counts].map(([status, n]) => `${n} ${status}`).join(", ")
}

/** The mta: consumes `mail.outbound.>` while the role runs; a deferred job comes back on the retry schedule. */
export const MtaLive = Layer.scopedDiscard(
  Effect.gen(function*() {
    const bus = yield* Bus
    const { handle } = yield* Mta
    yield* deliveriesFromZero
    const settings = yield* OutboundSettings
    // What to publish for the shared domains' signatures to verify (also `mailroom dns-records`).
    const { sharedDomains } = yield* MailboxSettings
    const dkim = yield* DkimKeys
    for (const domain of sharedDomains) {
      const record = yield* dkim.record(domain, undefined)
      yield* Effect.logInfo(`DKIM: publish ${record.name} TXT "${record.value}"`)
    }
    yield* bus.consume(measured({
      name: "mta",
      stream: "mail",
      filter: subjects.allOutboundMail,
      // Network-bound: many deliveries wait on remote servers at once.
      concurrency: 16,
      // A crashed mta's jobs come back after this; a long SMTP session keeps its job with progress signals.
      ackWait: Duration.seconds(15),
      retryDelay: (deliveryCount) => retryDelay(settings.retryDelays, deliveryCount),
      handler: handle
    }))
  })
).pipe(Layer.provide(Mta.Default), Layer.provide(Inbound.Default), Layer.provide(ForwardedCopies.Default))
