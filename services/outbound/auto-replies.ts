/**
 * A mailbox's automatic reply: the account sets it (`AutoReplies`: read, set, turn off), and the
 * worker's responder (`AutoReplyResponderLive`) answers received mail with it, as a reply from the
 * mailbox (replies.ts: to the Reply-To or From, In-Reply-To and References set, sent and counted as
 * every send), by the rules of auto-reply-rules.ts.
 *
 * The responder hears `email.received`. It answers mail received while the auto-reply is on (between
 * its `starts_at` and `ends_at`, and not before it was set: a new consumer reading old events answers
 * none of them). A sender is claimed before the answer goes, so two emails from one sender at once get
 * one answer; an answer that fails for a passing reason gives its claim back and is tried again.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Layer, Option, Schema } from "effect"
import { Bus, type BusMessage, decodeJson, subjects } from "../bus/bus.ts"
import { measured } from "../bus/metrics.ts"
import { NotFound, ValidationError } from "../errors.ts"
import { Headers } from "../mail/schemas.ts"
import { ownMailbox } from "../mailboxes/owned.ts"
import { BusEvent } from "../webhooks/schemas.ts"
import { AUTO_REPLY_HEADERS, autoReplyVerdict } from "./auto-reply-rules.ts"
import { type AutoReply, type AutoReplyInput, DEFAULT_INTERVAL_DAYS } from "./schemas.ts"
import { Replies } from "./replies.ts"

const SettingRow = Schema.Struct({
  mailboxId: Schema.String,
  subject: Schema.NullOr(Schema.String),
  textBody: Schema.String,
  htmlBody: Schema.NullOr(Schema.String),
  intervalDays: Schema.Number,
  startsAt: Schema.NullOr(Schema.DateFromSelf),
  endsAt: Schema.NullOr(Schema.DateFromSelf),
  createdAt: Schema.DateFromSelf,
  updatedAt: Schema.DateFromSelf
})
type SettingRow = typeof SettingRow.Type

const toAutoReply = (row: SettingRow, now = new Date()): AutoReply => ({
  mailbox_id: row.mailboxId,
  subject: row.subject,
  text: row.textBody,
  html: row.htmlBody,
  interval_days: row.intervalDays,
  starts_at: row.startsAt?.toISOString() ?? null,
  ends_at: row.endsAt?.toISOString() ?? null,
  active: (row.startsAt === null || row.startsAt <= now) && (row.endsAt === null || row.endsAt > now),
  created_at: row.createdAt.toISOString(),
  updated_at: row.updatedAt.toISOString()
})

const COLUMNS = "mailbox_id, subject, text_body, html_body, interval_days, starts_at, ends_at, created_at, updated_at"

export class AutoReplies extends Effect.Service<AutoReplies>()("mailroom/AutoReplies", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const decode = Schema.decodeUnknown(Schema.Array(SettingRow))

    /** The mailbox's automatic reply, or null when it has none; 404 for a mailbox that is not the caller's. */
    const get = (userId: string, mailboxId: string) =>
      Effect.gen(function*() {
        yield* ownMailbox(sql, userId, mailboxId)
        const rows = yield* Effect.orDie(decode(yield* sql`
          SELECT ${sql.literal(COLUMNS)} FROM mailbox_auto_replies WHERE mailbox_id = ${mailboxId}`))
        return rows[0] === undefined ? null : toAutoReply(rows[0])
      })

    /** Set (or replace) the mailbox's automatic reply. */
    const set = (userId: string, mailboxId: string, input: AutoReplyInput) =>
      Effect.gen(function*() {
        yield* ownMailbox(sql, userId, mailboxId)
        const startsAt = input.starts_at ? new Date(input.starts_at) : null
        const endsAt = input.ends_at ? new Date(input.ends_at) : null
        if (startsAt !== null && endsAt !== null && endsAt <= startsAt) {
          return yield* ValidationError.field("ends_at", "must be after starts_at")
        }
        // Without starts_at the window opens now: one that has already closed would answer nothing, ever.
        if (startsAt === null && endsAt !== null && endsAt.getTime() <= Date.now()) {
          return yield* ValidationError.field("ends_at", "must be in the future when starts_at is left out (the answers start now)")
        }
        const rows = yield* Effect.orDie(decode(yield* sql`
          INSERT INTO mailbox_auto_replies (mailbox_id, subject, text_body, html_body, interval_days, starts_at, ends_at)
          VALUES (${mailboxId}, ${input.subject ?? null}, ${input.text}, ${input.html ?? null},
                  ${input.interval_days ?? DEFAULT_INTERVAL_DAYS}, ${startsAt}, ${endsAt})
          ON CONFLICT (mailbox_id) DO UPDATE SET subject = EXCLUDED.subject, text_body = EXCLUDED.text_body,
            html_body = EXCLUDED.html_body, interval_days = EXCLUDED.interval_days, starts_at = EXCLUDED.starts_at,
            ends_at = EXCLUDED.ends_at, updated_at = now()
          RETURNING ${sql.literal(COLUMNS)}`))
        return toAutoReply(rows[0]!)
      })

    /** Turn the mailbox's automatic reply off; 404 when it has none. */
    const remove = (userId: string, mailboxId: string) =>
      Effect.gen(function*() {
        yield* ownMailbox(sql, userId, mailboxId)
        const rows = yield* sql`DELETE FROM mailbox_auto_replies WHERE mailbox_id = ${mailboxId} RETURNING 1`
        if (rows.length === 0) {
          return yield* new NotFound({ message: "This mailbox has no automatic reply", details: { mailbox_id: mailboxId } })
        }
        return { mailbox_id: mailboxId, deleted: true as const }
      })

    return { get, set, remove } as const
  })
}) {}

/** A received email whose mailbox answers automatically, with what the rules and the answer need. */
const AnsweringRow = Schema.Struct({
  userId: Schema.String,
  mailboxId: Schema.String,
  mailboxAddress: Schema.String,
  rcptTo: Schema.String,
  mailFrom: Schema.String,
  labels: Schema.Array(Schema.String),
  headers: Schema.parseJson(Headers),
  receivedAt: Schema.DateFromSelf,
  subject: Schema.NullOr(Schema.String),
  textBody: Schema.String,
  htmlBody: Schema.NullOr(Schema.String),
  intervalDays: Schema.Number
})

/**
 * Only the email's id, which every version's email.received carried: the rest is read from the email,
 * so an event written before fields were added (round one's has no from_name) is answered alike.
 */
const ReceivedData = Schema.Struct({ email_id: Schema.String })

/** Failures that pass (the database, the bus): the claim is given back and the event tried again. */
const passing = new Set(["SqlError", "ServiceUnavailable"])

/**
 * `send` once per `sender` of the mailbox per `intervalDays`: the sender is claimed first, so that
 * two answers at once are one. A send that fails for a passing reason gives the claim back and fails
 * (to be tried again); one refused for good keeps it (logged: the sender suppressed, the plan's sends
 * used up). Some: what `send` answered; None: claimed already, or refused.
 */
export const answerOnce = <A, E extends { readonly _tag: string; readonly message: string }, R>(
  sql: SqlClient.SqlClient,
  mailboxId: string,
  sender: string,
  intervalDays: number,
  send: Effect.Effect<A, E, R>
) =>
  Effect.gen(function*() {
    // The claim's time as PostgreSQL keeps it (microseconds; a Date would round it): what gives it back.
    const claimed = yield* sql<{ claim: string }>`
      INSERT INTO auto_replies_sent (mailbox_id, sender, sent_at) VALUES (${mailboxId}, ${sender}, now())
      ON CONFLICT (mailbox_id, sender) DO UPDATE SET sent_at = EXCLUDED.sent_at
        WHERE auto_replies_sent.sent_at <= now() - make_interval(days => ${intervalDays})
      RETURNING sent_at::text AS claim`
    if (claimed.length === 0) return Option.none<A>()
    return yield* send.pipe(
      Effect.map(Option.some),
      Effect.catchAll((error) =>
        passing.has(error._tag)
          ? Effect.zipRight(
            sql`DELETE FROM auto_replies_sent WHERE mailbox_id = ${mailboxId} AND sender = ${sender}
                AND sent_at = ${claimed[0]!.claim}::timestamptz`,
            Effect.fail(error)
          )
          : Effect.as(Effect.logInfo(`Automatic reply not sent: ${error.message}`), Option.none<A>())
      )
    )
  })

/** The worker's responder: received mail answered by its mailbox's automatic reply. */
export const AutoReplyResponderLive = Layer.scopedDiscard(
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const bus = yield* Bus
    const replies = yield* Replies

    const answering = (emailId: string) =>
      Effect.flatMap(
        sql`
          SELECT e.user_id, e.mailbox_id, m.local_part || '@' || m.domain AS mailbox_address, e.rcpt_to, e.mail_from, e.labels,
                 e.headers::text AS headers, e.received_at, a.subject, a.text_body, a.html_body, a.interval_days
          FROM emails e
          JOIN mailboxes m ON m.id = e.mailbox_id AND m.status = 'active'
          JOIN mailbox_auto_replies a ON a.mailbox_id = e.mailbox_id
          WHERE e.id = ${emailId} AND e.direction = 'inbound' AND e.received_at >= a.created_at
            AND (a.starts_at IS NULL OR a.starts_at <= e.received_at) AND (a.ends_at IS NULL OR a.ends_at > e.received_at)`,
        (rows) => Effect.map(Effect.orDie(Schema.decodeUnknown(Schema.Array(AnsweringRow))(rows)), (found) => Option.fromNullable(found[0]))
      )

    const respond = (emailId: string) =>
      Effect.gen(function*() {
        const found = yield* answering(emailId)
        if (Option.isNone(found)) return
        const email = found.value
        const verdict = autoReplyVerdict(email)
        if (!verdict.answer) {
          return yield* Effect.logDebug(`No automatic reply: ${verdict.reason}`).pipe(Effect.annotateLogs({ email_id: emailId }))
        }
        const sent = yield* answerOnce(
          sql,
          email.mailboxId,
          verdict.to,
          email.intervalDays,
          replies.reply(email.userId, emailId, {
            text: email.textBody,
            ...(email.htmlBody === null ? {} : { html: email.htmlBody }),
            ...(email.subject === null ? {} : { subject: email.subject }),
            headers: AUTO_REPLY_HEADERS
          }, false)
        )
        if (Option.isSome(sent)) {
          yield* Effect.logInfo("Automatic reply sent").pipe(Effect.annotateLogs({ email_id: emailId, reply_id: sent.value.email_id }))
        }
      })

    const handle = (message: BusMessage) =>
      Effect.try(() => decodeJson(message.data)).pipe(
        Effect.flatMap(Schema.decodeUnknown(BusEvent)),
        Effect.flatMap((event) => Schema.decodeUnknown(ReceivedData)(event.data)),
        Effect.matchEffect({
          onFailure: (error) => Effect.logError("Not answering a malformed email.received event: no automatic reply goes for it", { subject: message.subject, error }),
          onSuccess: (data) => respond(data.email_id)
        })
      )

    yield* bus.consume(measured({
      name: "auto-replies",
      stream: "events",
      filter: subjects.event("email.received"),
      concurrency: 8,
      handler: handle
    }))
  })
)
