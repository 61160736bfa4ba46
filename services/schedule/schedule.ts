/**
 * A mailbox's schedule (schemas.ts): what it is to attend and to host, as one calendar an agent can
 * ask "what is on this week?" or "am I free on Thursday at three?".
 *
 * Two sources keep it (`calendar_entries`, one calendar per event):
 * - the meetings the mailbox organizes (services/meetings writes each change: `organize`);
 * - the invitations it receives (the worker reads each received calendar: `receive`), their updates
 *   and cancellations applied as an attendee's calendar applies them (occurrences.ts `merge`), and the
 *   mailbox's answers to them (services/invitations: `answered`).
 *
 * Asked for a range (`list`), the index finds the events whose occurrences can fall in it, and each is
 * expanded into its occurrences there (occurrences.ts): a weekly meeting shows every week, at its
 * local time in its own zone, with the occurrences its organizer moved or called off as they are now.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Either } from "effect"
import { NotFound, ValidationError } from "../errors.ts"
import { attendeeOf, readInvitation } from "../invitations/icalendar.ts"
import type { ParticipationStatus, ResponseStatus } from "../invitations/schemas.ts"
import { type EventStatus, headline, invitationOf, merge, occurrences, span } from "./occurrences.ts"
import { DEFAULT_DAYS, DEFAULT_LIMIT, MAX_DAYS, type ScheduleItem, type ScheduleMeta, type ScheduleParams } from "./schemas.ts"

const DAY = 86_400_000

/** A received email with a calendar, as `receive` needs it. */
export interface ReceivedCalendar {
  readonly emailId: string
  readonly mailboxId: string
  readonly userId: string
  /** Whether an address is the mailbox (its address, or the one the email was delivered to). */
  readonly isMine: (address: string) => boolean
  readonly text: string
}

interface EntryRow {
  readonly uid: string
  readonly role: "organizer" | "attendee"
  readonly meetingId: string | null
  readonly emailId: string | null
  readonly status: EventStatus
  readonly response: ParticipationStatus
  readonly calendar: string
}

/** The range asked for, its defaults filled in (from now, a week), or the parameter at fault. */
const rangeOf = (params: ScheduleParams, now: Date) => {
  const from = params.from === undefined ? now : new Date(params.from)
  const to = params.to === undefined ? new Date(from.getTime() + DEFAULT_DAYS * DAY) : new Date(params.to)
  if (to <= from) return Effect.fail(ValidationError.field("to", "must be after from"))
  if (to.getTime() - from.getTime() > MAX_DAYS * DAY) return Effect.fail(ValidationError.field("to", `must be at most ${MAX_DAYS} days after from`))
  return Effect.succeed({ from, to })
}

export class Schedule extends Effect.Service<Schedule>()("mailroom/Schedule", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const bounds = (calendar: string) => {
      const when = span(calendar)
      return when === undefined ? undefined : { first: when.first, last: when.last }
    }

    /**
     * A received invitation, update or cancellation (an iTIP REQUEST or CANCEL) applied to the
     * mailbox's schedule; anything else, an older revision, or the mailbox's own meeting coming back
     * (it invited itself) changes nothing. The mailbox's answer is what the newest revision says of it
     * (a new time asks again), else the one it gave.
     */
    const receive = Effect.fn("Schedule.receive")(function*(email: ReceivedCalendar) {
      const invitation = invitationOf(email.text)
      if (invitation === undefined) return false
      const named = Either.match(readInvitation(email.text), {
        onLeft: () => undefined,
        onRight: (event) => attendeeOf(event, email.isMine)?.status
      })
      return yield* sql.withTransaction(Effect.gen(function*() {
        const rows = yield* sql<{ role: string; calendar: string; sequence: number; response: ParticipationStatus }>`
          SELECT role, calendar, sequence, response FROM calendar_entries
          WHERE mailbox_id = ${email.mailboxId} AND uid = ${invitation.uid}
          FOR UPDATE`
        const before = rows[0]
        if (before?.role === "organizer") return false
        const calendar = merge(before?.calendar, invitation)
        if (calendar === undefined) return false
        const when = bounds(calendar)
        if (when === undefined) return false
        const { sequence, status } = headline(calendar)
        const response = before === undefined || (invitation.method === "REQUEST" && invitation.sequence > before.sequence)
          ? named ?? "needs_action"
          : before.response
        yield* sql`
          INSERT INTO calendar_entries (mailbox_id, uid, user_id, role, email_id, sequence, status, response, calendar, first_start, last_end)
          VALUES (${email.mailboxId}, ${invitation.uid}, ${email.userId}, 'attendee', ${email.emailId}, ${sequence}, ${status}, ${response},
                  ${calendar}, ${when.first}, ${when.last})
          ON CONFLICT (mailbox_id, uid) DO UPDATE SET email_id = EXCLUDED.email_id, sequence = EXCLUDED.sequence,
            status = EXCLUDED.status, response = EXCLUDED.response, calendar = EXCLUDED.calendar,
            first_start = EXCLUDED.first_start, last_end = EXCLUDED.last_end, updated_at = now()`
        return true
      }))
    })

    /** The mailbox's answer to an invitation it received (the event `uid`), as it sent it. */
    const answered = Effect.fn("Schedule.answered")(function*(mailboxId: string, uid: string, status: ResponseStatus) {
      yield* sql`
        UPDATE calendar_entries SET response = ${status}, updated_at = now()
        WHERE mailbox_id = ${mailboxId} AND uid = ${uid} AND role = 'attendee'`
    })

    /** One of the mailbox's meetings as its latest invitation or cancellation (`calendar`) describes it. */
    const organize = Effect.fn("Schedule.organize")(function*(
      meeting: { readonly meetingId: string; readonly mailboxId: string; readonly userId: string; readonly uid: string; readonly emailId: string | null },
      calendar: string
    ) {
      const when = bounds(calendar)
      if (when === undefined) return
      const { sequence, status } = headline(calendar)
      yield* sql`
        INSERT INTO calendar_entries (mailbox_id, uid, user_id, role, meeting_id, email_id, sequence, status, response, calendar,
                                      first_start, last_end)
        VALUES (${meeting.mailboxId}, ${meeting.uid}, ${meeting.userId}, 'organizer', ${meeting.meetingId}, ${meeting.emailId}, ${sequence},
                ${status}, 'accepted', ${calendar}, ${when.first}, ${when.last})
        ON CONFLICT (mailbox_id, uid) DO UPDATE SET role = 'organizer', meeting_id = EXCLUDED.meeting_id, email_id = EXCLUDED.email_id,
          sequence = EXCLUDED.sequence, status = EXCLUDED.status, response = 'accepted', calendar = EXCLUDED.calendar,
          first_start = EXCLUDED.first_start, last_end = EXCLUDED.last_end, updated_at = now()`
    })

    /** The occurrences on the mailbox's schedule in the range, in order of start. 404 for another account's mailbox. */
    const list = Effect.fn("Schedule.list")(function*(userId: string, mailboxId: string, params: ScheduleParams) {
      const range = yield* rangeOf(params, new Date())
      const limit = params.limit ?? DEFAULT_LIMIT
      const includeCancelled = params.include_cancelled ?? false
      const mailboxes = yield* sql`SELECT 1 FROM mailboxes WHERE id = ${mailboxId} AND user_id = ${userId} AND status = 'active'`
      if (mailboxes.length === 0) return yield* new NotFound({ message: "Mailbox not found", details: { mailbox_id: mailboxId } })
      const rows = yield* sql<EntryRow>`
        SELECT uid, role, meeting_id, email_id, status, response, calendar FROM calendar_entries
        WHERE mailbox_id = ${mailboxId} AND first_start < ${range.to} AND (last_end IS NULL OR last_end > ${range.from})
          ${includeCancelled ? sql`` : sql`AND status <> 'cancelled'`}`
      const items: Array<ScheduleItem & { readonly startsAt: number }> = []
      for (const row of rows) {
        const { organizer } = headline(row.calendar)
        for (const o of occurrences(row.calendar, range.from, range.to)) {
          const status = row.status === "cancelled" ? "cancelled" : o.status
          if (status === "cancelled" && !includeCancelled) continue
          items.push({
            uid: row.uid,
            recurrence_id: o.recurrenceId,
            role: row.role,
            meeting_id: row.meetingId,
            email_id: row.emailId,
            summary: o.summary,
            location: o.location,
            url: o.url,
            start: o.start,
            end: o.end,
            status,
            response: row.response,
            busy: status !== "cancelled" && row.response !== "declined" && o.opaque,
            organizer,
            startsAt: o.startsAt
          })
        }
      }
      items.sort((a, b) => a.startsAt - b.startsAt || a.uid.localeCompare(b.uid))
      const data: Array<ScheduleItem> = items.slice(0, limit).map(({ startsAt: _, ...item }) => item)
      const meta: ScheduleMeta = {
        from: range.from.toISOString(),
        to: range.to.toISOString(),
        count: data.length,
        hasMore: items.length > limit
      }
      return { data, meta }
    })

    return { receive, answered, organize, list } as const
  })
}) {}
