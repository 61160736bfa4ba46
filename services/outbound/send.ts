/**
 * Sending (the API side of outbound mail; issue 16, DESIGN.md §4b).
 *
 * A send is accepted (202) only once it is durable: the message is built and signed, stored as an
 * email of the sending mailbox (direction `outbound`, label `sent`, in its thread) with one delivery
 * row per recipient, counted against the plan, and one job per recipient domain is on the bus for
 * the mta. If the bus does not take the jobs, the stored send is taken back and the caller is told
 * to retry (503), so a refused one never goes out; should the take-back fail too (the database gone
 * that moment), the send stays stored and the mta role queues it (requeue.ts), so it is accepted
 * (202) after all: no caller told "nothing was sent" sees it go out. Sends
 * accepted at the same moment share their round trips: their mailboxes are looked up, and the sends
 * without a key stored, one statement for the lot (group commit, batching.ts).
 *
 * `Idempotency-Key`: the key, the request's fingerprint and the answer are stored last in the
 * transaction that stores the email. A repeat within 24 hours answers the first answer and sends
 * nothing; a concurrent repeat waits on the key's row, then rolls back what it stored and does the
 * same; another body under the key is 409. (A send taken back because the bus refused it takes its key back too.)
 */
import { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Cause, Data, Effect, Schema } from "effect"
import { newId, sha256 } from "../accounts/tokens.ts"
import { groupCommit, groupCommitIsolated, inLockOrder } from "../batching.ts"
import { Bus, subjects } from "../bus/bus.ts"
import {
  IdempotencyKeyReused,
  type NotFound,
  PayloadTooLarge,
  RecipientSuppressed,
  SenderDomainUnverified,
  SendQuotaReached,
  ServiceUnavailable,
  StorageQuotaReached,
  ValidationError
} from "../errors.ts"
import { DependencyHealth, retryOnConflict } from "../health/dependency-health.ts"
import { escapeHtml } from "../html.ts"
import { utcDay } from "../mail/inbound.ts"
import { parseMessage } from "../mail/parse.ts"
import type { EmailRow } from "../mail/records.ts"
import { type NewEmail, storeEmailsWith } from "../mail/store.ts"
import { MailboxSettings } from "../mailboxes/mailboxes.ts"
import { mailboxNotFound } from "../mailboxes/owned.ts"
import { domainOf } from "../mailboxes/rules.ts"
import { limits, Plan } from "../plans/plans.ts"
import { compose, type Composition, type NamedAddress } from "./compose.ts"
import { DkimKeys } from "./dkim.ts"
import { dkimSign } from "./dkim-signature.ts"
import { bounceAddress } from "./bounce-address.ts"
import { publishJob } from "./requeue.ts"
import { prepareSubmitted } from "./submitted.ts"
import { type AddressInput, isAddress, MAX_RECIPIENTS, SendAccepted, type SendInput, SuppressionReason, withAsciiDomain } from "./schemas.ts"
import { claim, earlierAnswer, hashed, type HashedKey, type Idempotency } from "./idempotency.ts"
import { UNSUBSCRIBE_PLACEHOLDER, unsubscribeHeaders, Unsubscribes } from "./unsubscribes.ts"

/**
 * Everything an outgoing message is made of, whichever route asked for it (send, reply, forward):
 * what the composer writes, but the sender, Message-ID, date and signature (Mailroom's to choose),
 * plus the recipients no header shows.
 */
export interface OutgoingMessage extends Omit<Composition, "from" | "messageId" | "date" | "dkim"> {
  readonly bcc: ReadonlyArray<NamedAddress>
  /** Offer one-click unsubscribe (unsubscribes.ts): one recipient only. */
  readonly listUnsubscribe?: boolean | undefined
}

/** An address as the composer takes it, from what the caller wrote. */
export const named = (input: AddressInput): NamedAddress =>
  typeof input === "string" ? { address: input } : { name: input.name, address: input.address }

/** A send request as an outgoing message. */
export const fromSendInput = (input: SendInput): OutgoingMessage => ({
  to: (input.to ?? []).map(named),
  cc: (input.cc ?? []).map(named),
  bcc: (input.bcc ?? []).map(named),
  replyTo: input.reply_to === undefined ? undefined : named(input.reply_to),
  subject: input.subject ?? "",
  text: input.text,
  html: input.html,
  attachments: input.attachments ?? [],
  headers: input.headers ?? {},
  listUnsubscribe: input.list_unsubscribe === true,
  references: []
})

const SenderRow = Schema.Struct({
  /** The send's place in its batch. */
  idx: Schema.Number,
  address: Schema.String,
  /** The mailbox's display name: its From's name. */
  displayName: Schema.NullOr(Schema.String),
  domain: Schema.String,
  plan: Plan,
  periodStart: Schema.DateFromSelf,
  customDomainId: Schema.NullOr(Schema.String),
  customDomainVerified: Schema.NullOr(Schema.Boolean),
  sentToday: Schema.NumberFromString,
  sentThisPeriod: Schema.NumberFromString,
  /** The account's stored mail and drafts, in bytes, less the drafts now being sent (their bytes pass to their emails). */
  storage: Schema.NumberFromString,
  suppressed: Schema.Array(Schema.Struct({ address: Schema.String, reason: SuppressionReason }))
})

/** The stored answer of an Idempotency-Key, as a send's route answers it. */
const SendAnswer = Schema.parseJson(SendAccepted)
const BatchAnswer = Schema.parseJson(Schema.Array(SendAccepted))

/** A send built and checked, to be stored: the email, its raw message, who it goes to, and what it counts against. */
interface AcceptedSend {
  readonly email: NewEmail
  readonly raw: Uint8Array
  readonly recipients: ReadonlyArray<string>
  readonly day: string
  readonly periodStart: Date
  readonly plan: Plan
}

/** A message built and signed, to be checked against the plan and kept. */
interface BuiltSend {
  readonly emailId: string
  readonly messageId: string
  readonly raw: Uint8Array
  readonly recipients: ReadonlyArray<string>
  readonly now: Date
}

/** A batch's refusal of its message `i`: the field named as the body's validation names it, `messages.<i>.<field>`. */
const inMessage = (i: number) => <E>(error: E): E => {
  if (!(error instanceof ValidationError)) return error
  // A send's refusals name fields, each with its message (never the dashboard's field_errors map).
  const details = Object.fromEntries(
    Object.entries(error.details ?? {}).flatMap(([field, said]) => (typeof said === "string" ? [[`messages.${i}.${field}`, said]] : []))
  )
  return new ValidationError({ message: `messages.${i}.${error.message}`, details }) as E
}

/** A batch's refusal for suppressed recipients, naming the messages that have them (`details.messages`, places in the batch). */
const suppressedIn = (recipients: ReadonlyArray<ReadonlyArray<string>>) => (error: RecipientSuppressed): RecipientSuppressed => {
  const addresses = new Set((error.details?.addresses ?? []).map((address) => address.toLowerCase()))
  const messages = recipients.flatMap((list, i) => (list.some((recipient) => addresses.has(recipient.toLowerCase())) ? [i] : []))
  return new RecipientSuppressed({
    message: `messages.${messages.join(", messages.")}: ${error.message}`,
    details: { ...error.details, messages }
  })
}

/** A body with `{{unsubscribe_url}}` made the message's unsubscribe link (as written for its part). */
const withLink = (body: string | undefined, link: string | undefined) =>
  body === undefined || link === undefined ? body : body.replaceAll(UNSUBSCRIBE_PLACEHOLDER, link)

/** How a refusal says why each address is suppressed (in the order the reasons are declared). */
const whySuppressed: Record<SuppressionReason, (is: "is" | "are") => string> = {
  bounced: (is) => `bounced before and ${is} suppressed`,
  unsubscribed: (is) => `unsubscribed and ${is} suppressed`,
  complained: (is) => `reported your mail as spam and ${is} suppressed`,
  manual: (is) => `${is} suppressed by the account`
}

/**
 * Which of the plan's send limits a refused statement would have passed: the counters' checks
 * (migrations/0024) refuse a count past the limit written beside it.
 */
const limitPassed = (error: SqlError): "day" | "period" | undefined => {
  const cause = error.cause as { readonly code?: unknown; readonly constraint?: unknown; readonly message?: unknown } | undefined
  if (cause?.code !== "23514") return undefined
  const named = `${String(cause.constraint ?? "")} ${String(cause.message ?? "")}`
  return named.includes("mail_daily_counters_sent_within_limit")
    ? "day"
    : named.includes("usage_counters_emails_sent_within_limit")
    ? "period"
    : undefined
}

/** 403 SEND_QUOTA: the plan's sends of the day (or billing period) are used up, or too few are left for `sends` more. */
const quotaReached = (plan: Plan, window: "day" | "period", used: number, sends: number) => {
  const limit = window === "day" ? limits[plan].sendsPerDay : limits[plan].sendsPerMonth!
  const left = Math.max(0, limit - used)
  return new SendQuotaReached({
    message: `The ${plan} plan sends at most ${limit} messages a ${window === "day" ? "day" : "billing period"}: ${used} sent, ` +
      (left === 0 ? "none left" : `${left} left, fewer than these ${sends}`),
    details: { window, used, limit, plan }
  })
}

/**
 * 403 STORAGE_QUOTA: `size` more bytes (a send's stored copy, a draft) would take the account's stored
 * mail and drafts, `used`, past its plan's storage.
 */
export const storageQuotaReached = (plan: Plan, used: number, size: number, what: "message's copy" | "batch's copies" | "draft") => {
  const limit = limits[plan].storageBytes!
  return new StorageQuotaReached({
    message: `The ${plan} plan stores ${limit / 2 ** 30} GB of mail and drafts, and this ${what} would not fit: delete drafts or a mailbox, or upgrade`,
    details: { used, size, limit, plan }
  })
}

/** The key's row appeared while this send ran: answer what the first one answered. */
class KeyTaken extends Data.TaggedError("KeyTaken") {}

export class Outbound extends Effect.Service<Outbound>()("mailroom/Outbound", {
  scoped: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const bus = yield* Bus
    const dkim = yield* DkimKeys
    const health = yield* DependencyHealth
    const { sharedDomains } = yield* MailboxSettings
    const unsubscribes = yield* Unsubscribes

    /**
     * The sending mailboxes of the sends being accepted at once, each with its owner's plan, sends so
     * far and which of its recipients are suppressed: one statement for the lot (group commit,
     * batching.ts), a lone send at once. A mailbox that is not the caller's has no row.
     */
    const senders = yield* groupCommit({
      maxBatch: 64,
      parallel: 2,
      run: (asked: ReadonlyArray<{ readonly userId: string; readonly mailboxId: string; readonly recipients: ReadonlyArray<string> }>) => {
        const now = new Date()
        const input = asked.map((a, i) => ({ idx: i + 1, user_id: a.userId, mailbox_id: a.mailboxId, recipients: a.recipients }))
        return sql`
          SELECT i.idx, m.local_part || '@' || m.domain AS address, m.display_name, m.domain, s.plan, p.period_start,
                 d.id AS custom_domain_id, d.verified AS custom_domain_verified,
                 coalesce(c.sent, 0) AS sent_today, coalesce(u.emails_sent, 0) AS sent_this_period, coalesce(su.bytes, 0) - coalesce(g.bytes, 0) AS storage,
                 (SELECT coalesce(json_agg(json_build_object('address', x.address, 'reason', x.reason) ORDER BY x.address), '[]')
                  FROM suppressions x WHERE x.user_id = m.user_id AND x.address = ANY(i.recipients)) AS suppressed
          FROM jsonb_to_recordset(${JSON.stringify(input)}::jsonb) AS i(idx int, user_id text, mailbox_id text, recipients text[])
          JOIN mailboxes m ON m.id = i.mailbox_id AND m.user_id = i.user_id AND m.status = 'active'
          JOIN subscriptions s ON s.user_id = m.user_id
          CROSS JOIN LATERAL (
            SELECT CASE WHEN s.plan = 'free' AND s.current_period_end <= ${now}
                        THEN date_trunc('month', ${now}::timestamptz AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
                        ELSE s.current_period_start END AS period_start
          ) p
          LEFT JOIN domains d ON d.name = m.domain AND d.user_id = m.user_id
          LEFT JOIN mail_daily_counters c ON c.user_id = m.user_id AND c.day = ${utcDay(now)}::date
          LEFT JOIN usage_counters u ON u.user_id = m.user_id AND u.period_start = p.period_start
          LEFT JOIN storage_usage su ON su.user_id = m.user_id
          -- Drafts of the mailbox being sent (this send may be one) give their bytes to the emails they become.
          LEFT JOIN LATERAL (SELECT sum(mailroom_draft_bytes('draft', d.content)) AS bytes FROM drafts d
                             WHERE d.mailbox_id = m.id AND d.status = 'sending') g ON true`.pipe(
          Effect.flatMap((rows) => Effect.orDie(Schema.decodeUnknown(Schema.Array(SenderRow))(rows))),
          Effect.map((rows) => {
            const byIdx = new Map(rows.map((row) => [row.idx, row]))
            return asked.map((_, i) => byIdx.get(i + 1))
          })
        )
      }
    })

    /** The sending mailbox (`senders`); 404 when it is not the caller's, 422 when its custom domain is unverified. */
    const sender = (userId: string, mailboxId: string, recipients: ReadonlyArray<string>) =>
      Effect.gen(function*() {
        const row = yield* senders({ userId, mailboxId, recipients })
        if (!row) return yield* mailboxNotFound(mailboxId)
        const shared = sharedDomains.includes(row.domain)
        if (!shared && row.customDomainVerified !== true) {
          return yield* new SenderDomainUnverified({
            message: `${row.domain} is not verified: verify the domain before sending from it`,
            details: { domain: row.domain }
          })
        }
        return { ...row, customDomainId: shared ? null : row.customDomainId }
      })

    /**
     * What goes in the statement storing sent emails, beside them: the raw messages, one delivery row
     * per recipient and the send counters, so that a send is durable in one round trip (store.ts
     * `alongside`). They join the `email` item, which holds only the emails this statement stored.
     */
    const alongside = (sends: ReadonlyArray<AcceptedSend>) => {
      const raws = inLockOrder(new Map(sends.map((s) => [s.email.rawSha256, s])))
      const deliveries = sends.flatMap((s) => s.recipients.map((recipient) => ({ emailId: s.email.emailId, recipient })))
      return sql`,
        raw_blob AS (
          INSERT INTO blobs ${sql.insert(raws.map((s) => ({ sha256: s.email.rawSha256, size: s.raw.byteLength, content: s.raw })))}
          ON CONFLICT (sha256) DO UPDATE SET created_at = now()
        ),
        deliveries AS (
          INSERT INTO outbound_deliveries (email_id, recipient, domain, published)
          SELECT email.id, r.recipient, r.domain, false
          FROM email JOIN unnest(${deliveries.map((d) => d.emailId)}::text[], ${deliveries.map((d) => d.recipient)}::text[],
                                 ${deliveries.map((d) => domainOf(d.recipient))}::text[]) AS r(email_id, recipient, domain)
                       ON r.email_id = email.id
        ),
        counted AS (
          SELECT email.user_id, c.day, c.period_start, min(c.day_limit) AS day_limit, min(c.period_limit) AS period_limit,
                 count(*) AS sends
          FROM email JOIN unnest(${sends.map((s) => s.email.emailId)}::text[], ${sends.map((s) => s.day)}::date[],
                                 ${sends.map((s) => s.periodStart.toISOString())}::timestamptz[],
                                 ${sends.map((s) => limits[s.plan].sendsPerDay)}::bigint[],
                                 ${sends.map((s) => limits[s.plan].sendsPerMonth)}::bigint[])
                         AS c(email_id, day, period_start, day_limit, period_limit)
                       ON c.email_id = email.id
          GROUP BY email.user_id, c.day, c.period_start
        ),
        -- Each counter written with the limit it counts against: its check refuses the statement
        -- (nothing stored) when sends accepted at the same moment would together pass it. The day's row
        -- is locked before the period's, as every statement counting mail takes them (inbound.ts): the
        -- period's reads the day's, since PostgreSQL runs WITH parts no query reads last-first, and a
        -- send holding the period's row while inbound mail of the account held the day's deadlocked.
        sent_today AS (
          INSERT INTO mail_daily_counters (user_id, day, sent, sent_limit)
          SELECT user_id, day, sum(sends), min(day_limit) FROM counted GROUP BY user_id, day ORDER BY user_id, day
          ON CONFLICT (user_id, day) DO UPDATE SET sent = mail_daily_counters.sent + EXCLUDED.sent, sent_limit = EXCLUDED.sent_limit
          RETURNING user_id
        ),
        sent_this_period AS (
          INSERT INTO usage_counters (user_id, period_start, emails_sent, emails_sent_limit)
          SELECT user_id, period_start, sum(sends), min(period_limit) FROM counted
          WHERE (SELECT count(*) FROM sent_today) > 0
          GROUP BY user_id, period_start ORDER BY user_id, period_start
          ON CONFLICT (user_id, period_start) DO UPDATE SET emails_sent = usage_counters.emails_sent + EXCLUDED.emails_sent,
                                                            emails_sent_limit = EXCLUDED.emails_sent_limit
        )`
    }

    /**
     * Sends without an Idempotency-Key accepted at once are stored together, one statement for the lot
     * (group commit, batching.ts); one the database refuses fails alone.
     */
    const storeSend = yield* groupCommitIsolated({
      maxBatch: 32,
      parallel: 2,
      run: (sends: ReadonlyArray<AcceptedSend>) => {
        const byId = new Map(sends.map((s) => [s.email.emailId, s]))
        return storeEmailsWith(sql, sends.map((s) => s.email), (part) => alongside(part.map((email) => byId.get(email.emailId)!)))
      }
    })

    /**
     * Recipients (to, cc and bcc, or an envelope's) once each, case-insensitively: who the message is delivered to. The
     * domain is lower-cased (it is case-insensitive, and routes the delivery); the local part keeps the
     * case it was written in, which RFC 5321 (§2.4) requires a sender to pass on, since the receiving
     * server may tell `Ada` from `ada`.
     */
    const recipientsOf = (addresses: ReadonlyArray<string>) => {
      const kept = new Map<string, string>()
      for (const address of addresses) {
        const at = address.lastIndexOf("@")
        const recipient = `${address.slice(0, at)}@${address.slice(at + 1).toLowerCase()}`
        if (!kept.has(recipient.toLowerCase())) kept.set(recipient.toLowerCase(), recipient)
      }
      return [...kept.values()]
    }

    const checkMessage = (message: OutgoingMessage, recipients: ReadonlyArray<string>) => {
      if (recipients.length === 0) return Effect.fail(ValidationError.field("to", "must list at least one recipient (to, cc or bcc)"))
      if (recipients.length > MAX_RECIPIENTS) {
        return Effect.fail(ValidationError.field("to", `must list at most ${MAX_RECIPIENTS} recipients (to, cc and bcc together)`))
      }
      if ((message.text ?? "") === "" && (message.html ?? "") === "") {
        return Effect.fail(ValidationError.field("text", "a message needs text or html"))
      }
      if (message.listUnsubscribe === true && recipients.length > 1) {
        return Effect.fail(ValidationError.field(
          "list_unsubscribe",
          "works with one recipient (to, cc and bcc together): the link unsubscribes the address the message went to, so send one message per recipient"
        ))
      }
      return Effect.void
    }

    const checkSuppressions = (suppressed: typeof SenderRow.Type["suppressed"]) => {
      if (suppressed.length === 0) return Effect.void
      const reasons = Object.fromEntries(suppressed.map((s) => [s.address, s.reason]))
      const said = SuppressionReason.literals.flatMap((reason) => {
        const addresses = suppressed.filter((s) => s.reason === reason).map((s) => s.address)
        return addresses.length === 0 ? [] : [`${addresses.join(", ")} ${whySuppressed[reason](addresses.length === 1 ? "is" : "are")}`]
      })
      return Effect.fail(
        new RecipientSuppressed({
          message: `Not sent: ${said.join("; ")}`,
          details: { addresses: suppressed.map((s) => s.address), reasons }
        })
      )
    }

    /**
     * The counters as read, with `sends` more: what most refusals are. (Sends at the same moment are
     * held by the counters' checks.)
     */
    const checkQuota = (row: Pick<typeof SenderRow.Type, "plan" | "sentToday" | "sentThisPeriod">, sends: number) => {
      const plan = limits[row.plan]
      // The period first: when both would be passed, waiting for tomorrow would not help.
      if (plan.sendsPerMonth !== null && row.sentThisPeriod + sends > plan.sendsPerMonth) {
        return Effect.fail(quotaReached(row.plan, "period", row.sentThisPeriod, sends))
      }
      if (row.sentToday + sends > plan.sendsPerDay) return Effect.fail(quotaReached(row.plan, "day", row.sentToday, sends))
      return Effect.void
    }

    /**
     * A store the counters' checks refused: sends of the same moment took what this one counted on. The
     * refusal says what they left, read again (a batch may be refused with sends to spare, just fewer
     * than it holds), told as `checkQuota` tells it (the period first when both would be passed, whichever
     * check refused the statement: the day's is the first a statement takes).
     */
    const asQuota = (userId: string, sends: ReadonlyArray<AcceptedSend>) => (error: SqlError): Effect.Effect<never, SqlError | SendQuotaReached> => {
      const passed = limitPassed(error)
      if (passed === undefined) return Effect.fail(error)
      const { day, periodStart, plan } = sends[0]!
      return sql<{ sentToday: number; sentThisPeriod: number }>`
        SELECT coalesce((SELECT sent FROM mail_daily_counters WHERE user_id = ${userId} AND day = ${day}::date), 0)::float8 AS sent_today,
               coalesce((SELECT emails_sent FROM usage_counters WHERE user_id = ${userId} AND period_start = ${periodStart}), 0)::float8
                 AS sent_this_period`.pipe(
        Effect.flatMap(([counts = { sentToday: 0, sentThisPeriod: 0 }]) =>
          checkQuota({ plan, ...counts }, sends.length).pipe(
            // Not passed as read again (counts given back since): the check that refused tells.
            Effect.zipRight(Effect.fail(quotaReached(plan, passed, passed === "day" ? counts.sentToday : counts.sentThisPeriod, sends.length)))
          )
        )
      )
    }

    /** The deliveries of these emails, their jobs on the bus: none of them is published again (requeue.ts). */
    const markPublished = yield* groupCommit({
      maxBatch: 256,
      parallel: 1,
      run: (batches: ReadonlyArray<ReadonlyArray<string>>) =>
        sql`UPDATE outbound_deliveries SET published = true
            WHERE email_id = ANY(${[...new Set(batches.flat())].sort()}::text[]) AND NOT published`.pipe(Effect.as(batches.map(() => undefined)))
    })

    /**
     * Take stored sends back: the bus did not take their jobs. True once they are gone; false when they
     * could not be (they stay, and the mta role queues them once it finds them stranded). The counters
     * are locked in the order a send's statement locks them (the day's, the period's, then storage),
     * so that a send of the same account at that moment queues behind this rather than deadlocks;
     * a deadlock all the same is tried again.
     */
    const takeBack = (userId: string, sends: ReadonlyArray<AcceptedSend>, key: string | undefined) =>
      retryOnConflict(sql.withTransaction(Effect.gen(function*() {
        const { day, periodStart } = sends[0]!
        const bytes = sends.reduce((sum, s) => sum + s.raw.byteLength, 0)
        yield* sql`DELETE FROM emails WHERE id = ANY(${sends.map((s) => s.email.emailId)}::text[])`
        yield* sql`UPDATE mail_daily_counters SET sent = greatest(0, sent - ${sends.length}) WHERE user_id = ${userId} AND day = ${day}::date`
        yield* sql`UPDATE usage_counters SET emails_sent = greatest(0, emails_sent - ${sends.length})
                   WHERE user_id = ${userId} AND period_start = ${periodStart}`
        yield* sql`UPDATE storage_usage SET bytes = greatest(0, bytes - ${bytes}) WHERE user_id = ${userId}`
        if (key !== undefined) yield* sql`DELETE FROM idempotency_keys WHERE user_id = ${userId} AND key = ${key}`
      })), 3).pipe(
        Effect.as(true),
        Effect.catchAll((error) =>
          Effect.as(health.report("Could not take back a send the bus refused; it stays queued for the mta role's sweep", Cause.fail(error)), false)
        )
      )

    /**
     * The sending mailbox, checked: the caller's, verified, its recipients not suppressed, and `sends`
     * more messages within the plan's sends.
     */
    const checkedSender = (userId: string, mailboxId: string, recipients: ReadonlyArray<string>, sends = 1) =>
      Effect.gen(function*() {
        // Suppressions are kept lower-cased: an address bounced is suppressed in any case.
        const from = yield* sender(userId, mailboxId, recipients.map((recipient) => recipient.toLowerCase()))
        yield* checkSuppressions(from.suppressed)
        yield* checkQuota(from, sends)
        return from
      })

    /**
     * The end of every send, whoever built the messages: each `raw`, signed, kept as the mailbox's sent
     * mail with its deliveries and counted, then queued for the mta; 202's answers once they are durable
     * and on the bus. A batch's messages are kept in one transaction and taken back together: all or none.
     */
    const keepAndQueue = (
      userId: string,
      mailboxId: string,
      from: typeof SenderRow.Type,
      sent: ReadonlyArray<BuiltSend>,
      options: { readonly batch: boolean; readonly idempotency?: HashedKey | undefined }
    ): Effect.Effect<
      ReadonlyArray<SendAccepted>,
      PayloadTooLarge | StorageQuotaReached | SendQuotaReached | NotFound | ServiceUnavailable | IdempotencyKeyReused | SqlError
    > =>
      Effect.gen(function*() {
        const { batch, idempotency } = options
        const maxBytes = limits[from.plan].maxEmailBytes
        for (const [i, { raw }] of sent.entries()) {
          if (raw.byteLength > maxBytes) {
            return yield* new PayloadTooLarge({
              message: `${batch ? `messages.${i}: ` : ""}The message is ${raw.byteLength} bytes; the ${from.plan} plan sends at most ${maxBytes}`,
              details: { size: raw.byteLength, limit: maxBytes, ...(batch ? { index: i } : {}) }
            })
          }
        }
        // The sent copies are stored as the account's mail: they must fit the plan's storage, as received mail must.
        const storage = limits[from.plan].storageBytes
        const size = sent.reduce((sum, s) => sum + s.raw.byteLength, 0)
        if (storage !== null && from.storage + size > storage) {
          return yield* storageQuotaReached(from.plan, from.storage, size, batch ? "batch's copies" : "message's copy")
        }
        const accepted = yield* Effect.forEach(sent, ({ emailId, messageId, now, raw, recipients }) =>
          Effect.map(parseMessage(raw), (parsed): AcceptedSend => ({
            email: {
              emailId,
              mailboxId,
              userId,
              direction: "outbound",
              labels: ["sent"],
              rawSha256: sha256(raw),
              size: raw.byteLength,
              mailFrom: bounceAddress(emailId, from.domain),
              rcptTo: from.address,
              receivedAt: now,
              messageId,
              // The header From is the mailbox's address (submission checks it, in any letter case):
              // kept as the mailbox spells it, as the API's sends are.
              parsed: { ...parsed, from: from.address }
            },
            raw,
            recipients,
            day: utcDay(now),
            periodStart: from.periodStart,
            plan: from.plan
          })))
        // Not stored: its mailbox went with its account since it was looked up (mail/store.ts).
        const answer = (send: AcceptedSend, row: EmailRow | undefined): Effect.Effect<SendAccepted, NotFound> =>
          row === undefined
            ? Effect.fail(mailboxNotFound(mailboxId))
            : Effect.succeed({ email_id: send.email.emailId, message_id: send.email.messageId, thread_id: row.threadId, status: "queued" })
        /** The answers a key's first request was given, as this route answers them (one send's, or a batch's). */
        const earlier = (key: HashedKey) =>
          batch
            ? earlierAnswer(sql, userId, key, BatchAnswer)
            : Effect.map(earlierAnswer(sql, userId, key, SendAnswer), (one) => one && [one])

        const stored = !batch && idempotency === undefined
          ? [yield* storeSend(accepted[0]!).pipe(Effect.catchTag("SqlError", asQuota(userId, accepted)), Effect.flatMap((row) => answer(accepted[0]!, row)))]
          : yield* sql.withTransaction(Effect.gen(function*() {
            const rows = yield* storeEmailsWith(sql, accepted.map((s) => s.email), (part) => alongside(part.map((email) => accepted.find((s) => s.email === email)!)))
            const answers = yield* Effect.forEach(accepted, (send, i) => answer(send, rows[i]))
            if (idempotency === undefined) return answers
            // A concurrent send with the same key waits here until this one commits, then finds the key
            // taken and rolls back everything it stored.
            if (!(yield* claim(sql, userId, idempotency, batch ? answers : answers[0]))) return yield* new KeyTaken()
            return answers
          })).pipe(
            Effect.catchTag("SqlError", asQuota(userId, accepted)),
            Effect.catchTag("KeyTaken", () =>
              Effect.flatMap(earlier(idempotency!), (answers) =>
                answers === undefined
                  ? Effect.fail(ServiceUnavailable.of("The same Idempotency-Key is being sent right now; retry", 1))
                  : Effect.succeed(answers)))
          )
        // Another request's answer (a repeat of an Idempotency-Key): nothing of this one was kept.
        if (stored[0]?.email_id !== accepted[0]!.email.emailId) return stored

        const jobs = accepted.flatMap((send) => [...new Set(send.recipients.map(domainOf))].map((domain) => ({ email_id: send.email.emailId, domain })))
        const queued = yield* Effect.forEach(jobs, (job) => publishJob(bus, job), { concurrency: "unbounded", discard: true }).pipe(Effect.either)
        if (queued._tag === "Left" && (yield* takeBack(userId, accepted, idempotency?.key))) {
          return yield* ServiceUnavailable.of(`The ${batch ? "messages" : "message"} could not be queued; nothing was sent, retry`)
        }
        // Behind the answer: a mark lost (the process dying now) costs a second publish of the same
        // job, which the bus drops as a duplicate (requeue.ts). Not queued (kept all the same), the
        // sends are left for that sweep.
        if (queued._tag === "Right") yield* Effect.forkDaemon(Effect.ignore(markPublished(accepted.map((send) => send.email.emailId))))
        for (const send of accepted) {
          yield* Effect.logInfo("Email queued for delivery").pipe(
            Effect.annotateLogs({ email_id: send.email.emailId, mailbox_id: mailboxId, recipients: send.recipients.length })
          )
        }
        // A wait for the mailbox's mail (mail/arrivals.ts) answers with it at once, as it does for mail received.
        yield* bus.broadcast(subjects.mailSent(mailboxId), new Uint8Array())
        return stored
      })

    /** A message built (composed, with its unsubscribe link, signed) from `message`, ready to keep and queue. */
    const build = (userId: string, mailboxId: string, from: typeof SenderRow.Type, message: OutgoingMessage, recipients: ReadonlyArray<string>, now: Date) =>
      Effect.gen(function*() {
        const emailId = newId("eml")
        const messageId = `<${emailId}@${from.domain}>`
        const signer = yield* dkim.signer(from.domain, from.customDomainId ?? undefined)
        const unsubscribe = message.listUnsubscribe === true
          ? yield* unsubscribes.create({ userId, mailboxId, emailId, messageId, address: recipients[0]! })
          : undefined
        const raw = yield* compose({
          from: { name: from.displayName ?? undefined, address: from.address },
          to: onceEach(message.to),
          cc: onceEach(message.cc, message.to),
          replyTo: message.replyTo,
          subject: message.subject,
          text: withLink(message.text, unsubscribe),
          html: withLink(message.html, unsubscribe && escapeHtml(unsubscribe)),
          attachments: message.attachments,
          calendar: message.calendar,
          headers: unsubscribe === undefined ? message.headers : { ...message.headers, ...unsubscribeHeaders(unsubscribe) },
          messageId,
          inReplyTo: message.inReplyTo,
          references: message.references,
          date: now,
          dkim: signer
        }).pipe(Effect.mapError((error) => ValidationError.field("attachments", error.message)))
        return { emailId, messageId, raw, recipients, now } satisfies BuiltSend
      })

    /** Each address once in a header, case-insensitively, and none already in `before` (Cc leaves out who is in To). */
    const onceEach = <A extends { readonly address: string }>(addresses: ReadonlyArray<A>, before: ReadonlyArray<A> = []) => {
      const seen = new Set(before.map((a) => a.address.toLowerCase()))
      return addresses.filter((a) => !seen.has(a.address.toLowerCase()) && Boolean(seen.add(a.address.toLowerCase())))
    }

    const recipientsOfMessage = (message: OutgoingMessage) => recipientsOf([...message.to, ...message.cc, ...message.bcc].map((a) => a.address))

    /**
     * Send `message` from the caller's mailbox: 202's answer once it is durable and queued.
     * Untraced where it repeats per message; a traced Effect.fn per call is enough.
     */
    const submit = Effect.fn("Outbound.submit")(function*(
      userId: string,
      mailboxId: string,
      message: OutgoingMessage,
      idempotency?: Idempotency
    ) {
      const key = idempotency === undefined ? undefined : hashed(idempotency)
      if (key !== undefined) {
        const earlier = yield* earlierAnswer(sql, userId, key, SendAnswer)
        if (earlier !== undefined) return earlier
      }
      const recipients = recipientsOfMessage(message)
      yield* checkMessage(message, recipients)
      const from = yield* checkedSender(userId, mailboxId, recipients)
      const built = yield* build(userId, mailboxId, from, message, recipients, new Date())
      const [accepted] = yield* keepAndQueue(userId, mailboxId, from, [built], {
        batch: false,
        idempotency: key
      })
      return accepted!
    })

    /**
     * Send `messages` from the caller's mailbox, all or none: every message checked (a refusal names
     * it: `messages.<i>.<field>`), the plan's sends counted for all of them, kept in one transaction and
     * queued; 202's answers in order.
     */
    const submitBatch = Effect.fn("Outbound.submitBatch")(function*(
      userId: string,
      mailboxId: string,
      messages: ReadonlyArray<OutgoingMessage>,
      idempotency?: Idempotency
    ) {
      const key = idempotency === undefined ? undefined : hashed(idempotency)
      if (key !== undefined) {
        const earlier = yield* earlierAnswer(sql, userId, key, BatchAnswer)
        if (earlier !== undefined) return earlier
      }
      const recipients = messages.map(recipientsOfMessage)
      for (const [i, message] of messages.entries()) yield* Effect.mapError(checkMessage(message, recipients[i]!), inMessage(i))
      const from = yield* checkedSender(userId, mailboxId, [...new Set(recipients.flat())], messages.length).pipe(
        Effect.catchTag("RecipientSuppressed", (refused) => Effect.fail(suppressedIn(recipients)(refused)))
      )
      const now = new Date()
      const built = yield* Effect.forEach(messages, (message, i) => Effect.mapError(build(userId, mailboxId, from, message, recipients[i]!, now), inMessage(i)))
      return yield* keepAndQueue(userId, mailboxId, from, built, {
        batch: true,
        idempotency: key
      })
    })

    /**
     * Send a message the client composed itself (SMTP submission, submitted.ts) from the caller's
     * mailbox to the envelope's `recipients`: its header checked and completed, then signed, kept and
     * queued as every send is.
     */
    const submitComposed = Effect.fn("Outbound.submitComposed")(function*(
      userId: string,
      mailboxId: string,
      composed: { readonly raw: Uint8Array; readonly recipients: ReadonlyArray<string> }
    ) {
      // The envelope's addresses are held to the rule the API's are (an internationalized domain in punycode).
      const written = composed.recipients.map(withAsciiDomain)
      const wrong = written.find((address) => !isAddress(address))
      if (wrong !== undefined) return yield* ValidationError.field("to", `${wrong} is not an email address such as name@example.com`)
      const recipients = recipientsOf(written)
      if (recipients.length === 0) return yield* ValidationError.field("to", "must list at least one recipient")
      if (recipients.length > MAX_RECIPIENTS) {
        return yield* ValidationError.field("to", `must list at most ${MAX_RECIPIENTS} recipients`)
      }
      const from = yield* checkedSender(userId, mailboxId, recipients)
      const emailId = newId("eml")
      const now = new Date()
      const prepared = prepareSubmitted(composed.raw, { mailboxAddress: from.address, messageId: `<${emailId}@${from.domain}>`, date: now })
      if ("refused" in prepared) return yield* ValidationError.field(prepared.refused.field, prepared.refused.message)
      const signer = yield* dkim.signer(from.domain, from.customDomainId ?? undefined)
      const signed = yield* Effect.orDie(dkimSign(prepared.ok.raw, signer, now))
      const raw = new Uint8Array(signed.buffer, signed.byteOffset, signed.byteLength)
      const [accepted] = yield* keepAndQueue(userId, mailboxId, from, [{ emailId, messageId: prepared.ok.messageId, raw, recipients, now }], { batch: false })
      return accepted!
    })

    return { submit, submitBatch, submitComposed } as const
  }),
  dependencies: [Unsubscribes.Default]
}) {}
