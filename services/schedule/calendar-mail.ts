/**
 * The worker's reader of received calendars (a consumer of `email.received`): each received email with
 * attachments is looked at once for a calendar part (calendar-part.ts), and what the calendar asks is
 * done:
 * - a REPLY (an attendee's answer) goes to the mailbox's meeting it answers (Meetings.recordAnswer);
 * - a REQUEST or CANCEL (an invitation, its update, its cancellation) goes on the mailbox's schedule
 *   (Schedule.receive) and, when it changed it, is announced (`invitation.received`), unless the mail is
 *   labelled spam or blocked: a stranger's invitation does not take an agent's time until someone
 *   answers it (answering puts it on, services/invitations) or takes the label off (a consumer of
 *   `email.labels_changed` reads it then, as if it had just arrived).
 * Either changes what the mailbox holds only when its sender may (calendar-sender.ts: the organizer's,
 * the attendee's own From, vouched for); one refused for want of that vouching is read again, as if
 * it had just arrived, when a person takes `unauthenticated` off it.
 * Mail without attachments costs it nothing (the event says so).
 *
 * Beside consuming, it works through what the schedule has still to read from before it existed
 * (`calendar_backfill`, filled by its migration): each received calendar and each meeting, once; then
 * the repeating events kept before their rules' walks were (Schedule.rewalkKept).
 */
import { SqlClient } from "@effect/sql"
import { Effect, Layer, Schema } from "effect"
import { type BusMessage, Bus, decodeJson, encodeJson, subjects } from "../bus/bus.ts"
import { measured } from "../bus/metrics.ts"
import { calendarPart } from "../invitations/calendar-part.ts"
import { MAX_CALENDAR_BYTES } from "../invitations/schemas.ts"
import { UNAUTHENTICATED } from "../mail/authentication.ts"
import { decodeText } from "../mail/charsets.ts"
import { routingForm } from "../mail/inbound.ts"
import { Meetings } from "../meetings/meetings.ts"
import { mailboxAddresses } from "../outbound/replies.ts"
import { BusEvent } from "../webhooks/schemas.ts"
import { senderOf } from "./calendar-sender.ts"
import { Schedule } from "./schedule.ts"

/**
 * What is read of an event: fields every version's email.received and email.labels_changed carried
 * (round one's, ae6f099, on); the rest is read from the email, so an event written before fields were
 * added (from_name) is read alike.
 */
const ReceivedData = Schema.Struct({ email_id: Schema.String, has_attachments: Schema.Boolean })
const LabelsChangedData = Schema.Struct({
  ...ReceivedData.fields,
  labels: Schema.Array(Schema.String),
  removed: Schema.Array(Schema.String)
})

/** Labels that keep a received invitation off the schedule. */
const JUNK = ["spam", "blocked"]
const isJunk = (label: string) => JUNK.includes(label)

/** Backfill entries taken at a time. */
const BACKFILL_BATCH = 50

interface CalendarMailRow {
  readonly mailboxId: string
  readonly userId: string
  readonly receivedAt: Date
  /** The From address: whose answer a REPLY may carry, who may change an event (with `labels`, calendar-sender.ts). */
  readonly fromAddress: string | null
  readonly mailboxAddress: string
  readonly rcptTo: string
  readonly labels: ReadonlyArray<string>
  readonly content: Uint8Array
  readonly charset: string | null
}

export interface BackfillEntry {
  readonly kind: "email" | "meeting"
  readonly id: string
}

/**
 * Works through `calendar_backfill` a batch at a time, each batch taken and handled in one
 * transaction: an entry is gone once handled, and stays for the next start when its handling fails.
 * Nodes starting together share the work (SKIP LOCKED). Answers how many were handled.
 */
export const drainBackfill = <E, R>(sql: SqlClient.SqlClient, handle: (entry: BackfillEntry) => Effect.Effect<unknown, E, R>) =>
  Effect.gen(function*() {
    let done = 0
    while (true) {
      const taken = yield* sql.withTransaction(Effect.gen(function*() {
        const batch = yield* sql<BackfillEntry>`
          DELETE FROM calendar_backfill WHERE (kind, id) IN (
            SELECT kind, id FROM calendar_backfill ORDER BY kind, id LIMIT ${BACKFILL_BATCH} FOR UPDATE SKIP LOCKED
          ) RETURNING kind, id`
        for (const entry of batch) yield* handle(entry)
        return batch.length
      }))
      done += taken
      if (taken < BACKFILL_BATCH) return done
    }
  })

export const CalendarMailLive = Layer.scopedDiscard(
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const bus = yield* Bus
    const meetings = yield* Meetings
    const schedule = yield* Schedule

    /**
     * A received email's calendar, answered or entered as it asks; true when it changed something.
     * `announce`: tell webhooks and event streams what changed (not for mail from before the schedule).
     */
    const read = (emailId: string, announce: boolean) =>
      Effect.gen(function*() {
        const rows = yield* sql<CalendarMailRow>`
          SELECT e.mailbox_id, e.user_id, e.received_at, e.from_address, m.local_part || '@' || m.domain AS mailbox_address, e.rcpt_to, e.labels,
                 b.content, a.charset
          FROM emails e
          JOIN mailboxes m ON m.id = e.mailbox_id AND m.status = 'active'
          JOIN LATERAL (${calendarPart(sql)}) a ON true
          JOIN blobs b ON b.sha256 = a.checksum AND a.size <= ${MAX_CALENDAR_BYTES}
          WHERE e.id = ${emailId} AND e.direction = 'inbound'`
        const found = rows[0]
        if (found === undefined) return false
        const text = decodeText(found.content, found.charset)
        const sender = senderOf(found)
        if (yield* meetings.recordAnswer({ emailId, mailboxId: found.mailboxId, receivedAt: found.receivedAt, sender }, text)) return true
        if (found.labels.some(isJunk)) return false
        const own = mailboxAddresses({ mailboxAddress: found.mailboxAddress, direction: "inbound", rcptTo: found.rcptTo })
        const changed = yield* schedule.receive({
          emailId,
          mailboxId: found.mailboxId,
          userId: found.userId,
          isMine: (address) => own.has(routingForm(address)),
          sender,
          text
        })
        if (changed === undefined) return false
        if (announce) {
          // Once kept: the same email redelivered (a crash before this publish) is announced again under the same id, which the bus drops.
          yield* bus.publish(
            subjects.event("invitation.received"),
            encodeJson({ event: "invitation.received", timestamp: new Date().toISOString(), namespace: found.userId, data: changed }),
            { msgId: `invitation.received:${emailId}` }
          )
        }
        return true
      }).pipe(
        // A calendar the library fails on (a thrown error, not the database's) fails the same way at
        // every delivery: passed over, not delivered again forever.
        Effect.catchAllDefect((defect) =>
          Effect.as(Effect.logWarning("An email's calendar could not be read; it is passed over", { email_id: emailId, defect }), false)
        )
      )

    const backfill = drainBackfill(sql, (entry) => entry.kind === "email" ? read(entry.id, false) : meetings.enterInSchedule(entry.id)).pipe(
      Effect.tap((done) => done > 0 ? Effect.logInfo("Schedule filled in from mail and meetings from before it", { entries: done }) : Effect.void),
      Effect.catchAll((error) => Effect.logError("Could not fill in the schedule from earlier mail; it is tried again at the next start", { error }))
    )

    /** An event's data as `schema`, then `then`; a malformed event is logged and passed over. */
    const handler = <A, I>(schema: Schema.Schema<A, I>, then: (data: A) => Effect.Effect<unknown, unknown>) => (message: BusMessage) =>
      Effect.try(() => decodeJson(message.data)).pipe(
        Effect.flatMap(Schema.decodeUnknown(BusEvent)),
        Effect.flatMap((event) => Schema.decodeUnknown(schema)(event.data)),
        Effect.matchEffect({
          onFailure: (error) => Effect.logError("Not reading a malformed event for calendars: a calendar its email carries is not entered in the schedule", {
            subject: message.subject,
            error
          }),
          onSuccess: (data) => Effect.asVoid(then(data))
        })
      )

    const rewalk = schedule.rewalkKept.pipe(
      Effect.tap((done) => done > 0 ? Effect.logInfo("Schedule's repeating events walked again", { entries: done }) : Effect.void),
      Effect.catchAll((error) => Effect.logError("Could not walk the schedule's earlier repeating events again; tried again at the next start", { error }))
    )

    yield* Effect.forkScoped(Effect.zipRight(backfill, rewalk))
    yield* bus.consume(measured({
      // The durable name from when it read meeting answers only: under a new one the bus would deliver it
      // the events it still holds (a week) again, and their announcements would go out twice.
      name: "meeting-answers",
      stream: "events",
      filter: subjects.event("email.received"),
      concurrency: 4,
      handler: handler(ReceivedData, (data) => data.has_attachments ? read(data.email_id, true) : Effect.void)
    }))
    /**
     * Whether a person's taking `unauthenticated` off the email vouches for a change it was refused for want
     * of that (only then: a new invitation from it was entered on arrival, and would be announced twice).
     */
    const vouchedFor = (data: typeof LabelsChangedData.Type) =>
      data.removed.includes(UNAUTHENTICATED) && !data.labels.includes(UNAUTHENTICATED)
        ? Effect.map(
          sql`SELECT 1 FROM calendar_refusals WHERE email_id = ${data.email_id} AND reason = 'unverified_sender'`,
          (rows) => rows.length > 0
        )
        : Effect.succeed(false)
    // Mail taken out of spam (or unblocked) by hand, or vouched for: its calendar is read as if it had just arrived.
    yield* bus.consume(measured({
      name: "calendar-cleared-mail",
      stream: "events",
      filter: subjects.event("email.labels_changed"),
      concurrency: 2,
      handler: handler(LabelsChangedData, (data) =>
        !data.has_attachments || data.labels.some(isJunk)
          ? Effect.void
          : data.removed.some(isJunk)
          ? read(data.email_id, true)
          : Effect.flatMap(vouchedFor(data), (vouched) => vouched ? read(data.email_id, true) : Effect.void))
    }))
  })
)
