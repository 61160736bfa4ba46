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
import { ValidationError } from "../errors.ts"
import { attendeeOf, organizerAddress, readInvitation } from "../invitations/icalendar.ts"
import type { ParticipationStatus, Party, ResponseStatus } from "../invitations/schemas.ts"
import { ownMailboxes } from "../mailboxes/owned.ts"
import { type CalendarSender, dropRefusal, keepRefusal, organizerRefusal } from "./calendar-sender.ts"
import { type EventStatus, headline, invitationOf, merge, type Occurrence, occurrences, readKept, type Span, spanning, unkeepable } from "./occurrences.ts"
import { fromWallTime } from "../time-zones.ts"
import { freeSlots, localIso, MINUTE, minutesOf } from "./availability.ts"
import {
  type AvailabilityMeta,
  type AvailabilityParams,
  DEFAULT_DAYS,
  DEFAULT_LIMIT,
  DEFAULT_SLOTS,
  type FreeSlot,
  type InvitationReceivedData,
  MAX_AVAILABILITY_DAYS,
  MAX_DAYS,
  type ScheduleItem,
  type ScheduleMeta,
  type ScheduleParams
} from "./schemas.ts"

const DAY = 86_400_000

/** A received email with a calendar, as `receive` needs it. */
export interface ReceivedCalendar {
  readonly emailId: string
  readonly mailboxId: string
  readonly userId: string
  /** Whether an address is the mailbox (its address, or the one the email was delivered to). */
  readonly isMine: (address: string) => boolean
  /** Who sent it: only the event's organizer, vouched for, changes an event the schedule holds (calendar-sender.ts). */
  readonly sender: CalendarSender
  readonly text: string
}

/** An occurrence as the schedule answers it, with its moments (ms). */
interface Occurring {
  readonly item: ScheduleItem
  readonly startsAt: number
  readonly endsAt: number
}

/** A kept calendar's row but the calendar itself. */
interface EntryFields {
  readonly mailboxId: string
  readonly userId: string
  readonly uid: string
  readonly role: "organizer" | "attendee"
  readonly meetingId: string | null
  readonly emailId: string | null
  readonly status: EventStatus
  readonly response: ParticipationStatus
}

interface EntryRow extends EntryFields {
  readonly calendar: string
  /** The last repeat walking its rules from the first reached when it was kept (occurrences.ts `spanning`). */
  readonly repeatsUntil: string | null
}

/** Events read at a time to walk again, after migrations/0077 (each walk a quarter of a second at most). */
const REWALK_BATCH = 20

/** How far ahead the reminders' look expands a calendar at once: again when it changes, or this has passed. */
const LOOKAHEAD = 60 * MINUTE

/** A calendar to keep and when it has occurrences (`Schedule.walk`). */
export interface Walked {
  readonly calendar: string
  readonly when: Span | undefined
}

/** A turn of Node's event loop: what arrived meanwhile (a request, a reply from the database) is handled first. */
const letOthersRun = Effect.async<void>((resume) => {
  const pending = setImmediate(() => resume(Effect.void))
  return Effect.sync(() => clearImmediate(pending))
})

/**
 * When a calendar being kept has occurrences (occurrences.ts `spanning`): a rule walked from its first
 * repeat may take the walk's whole budget (a quarter of a second), which is given up in slices, the
 * process answering others between them.
 */
const spanOf = (calendar: string) =>
  Effect.gen(function*() {
    const walking = spanning(calendar)
    for (let step = walking.next(); ; step = walking.next()) {
      if (step.done) return step.value
      yield* letOthersRun
    }
  })

/** One of `row`'s occurrences as the schedule answers it. */
const itemOf = (row: EntryFields, o: Occurrence, organizer: Party | null): ScheduleItem => {
  const status = row.status === "cancelled" ? "cancelled" : o.status
  return {
    mailbox_id: row.mailboxId,
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
    organizer
  }
}

/** The range asked for, its defaults filled in (from now, a week), or the parameter at fault. */
const rangeOf = (params: { readonly from?: string | undefined; readonly to?: string | undefined }, now: Date, maxDays: number) => {
  const from = params.from === undefined ? now : new Date(params.from)
  const to = params.to === undefined ? new Date(from.getTime() + DEFAULT_DAYS * DAY) : new Date(params.to)
  if (to <= from) return Effect.fail(ValidationError.field("to", "must be after from"))
  if (to.getTime() - from.getTime() > maxDays * DAY) return Effect.fail(ValidationError.field("to", `must be at most ${maxDays} days after from`))
  return Effect.succeed({ from, to })
}

/** Whether a date_time is floating: a wall-clock time without an offset (RFC 5545 §3.3.5, form 1). */
const isFloating = (dateTime: string) => !/(?:Z|[+-]\d\d:?\d\d)$/i.test(dateTime)

/** The moment a wall-clock time (YYYY-MM-DDTHH:MM:SS) is in `zone`. */
const wallMoment = (zone: string, dateTime: string) =>
  fromWallTime(zone, {
    year: Number(dateTime.slice(0, 4)),
    month: Number(dateTime.slice(5, 7)),
    day: Number(dateTime.slice(8, 10)),
    hour: Number(dateTime.slice(11, 13)),
    minute: Number(dateTime.slice(14, 16)),
    second: Number(dateTime.slice(17, 19) || 0)
  })

/** Midnight of a day (YYYY-MM-DD) in `zone`. */
const dayStart = (zone: string, date: string) => wallMoment(zone, `${date}T00:00:00`)

/**
 * Which revision of a received event a schedule holds (its SEQUENCE), the email that brought it, and
 * the event's status as it stands (`cancelled` once its organizer called it off).
 */
export interface ScheduleRevision {
  readonly sequence: number
  readonly emailId: string
  readonly status: EventStatus
}

/** What `receive` weighs a calendar against: the event as the schedule keeps it, and the email that brought it. */
interface KeptEntry {
  readonly role: string
  readonly emailId: string | null
  readonly calendar: string
}

export class Schedule extends Effect.Service<Schedule>()("mailroom/Schedule", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    /**
     * A received invitation, update or cancellation (an iTIP REQUEST or CANCEL) applied to the
     * mailbox's schedule: what changed, for `invitation.received`; undefined when nothing did (any other
     * calendar, an older revision, the same one in another email, the mailbox's own meeting coming
     * back when it invited itself, or a change to a kept event its sender may not make, which is kept
     * as refused: calendar-sender.ts).
     * The mailbox's answer is what the newest revision says of it (a new time asks again), else the one
     * it gave.
     */
    const receive = Effect.fn("Schedule.receive")(function*(email: ReceivedCalendar) {
      const invitation = invitationOf(email.text)
      if (invitation === undefined) return undefined
      const named = Either.match(readInvitation(email.text), {
        onLeft: () => undefined,
        onRight: (event) => attendeeOf(event, email.isMine)?.status
      })
      /**
       * Why the invitation may not change the kept invitation: it names another organizer, or the email is
       * not the organizer's own, vouched for (only the organizer changes an event or calls it off, RFC 5546
       * §3.2, and the calendar's ORGANIZER line is the sender's to write). A new event is entered from
       * anyone: it changes nothing the mailbox had.
       */
      const senderRefusal = (entry: KeptEntry | undefined) => {
        if (entry === undefined || entry.role === "organizer") return undefined
        // Nothing to refuse when it would change nothing: the email the schedule holds read again (redelivered, or
        // read with the mailbox's answer to it), or a copy or an older revision. Refusing those would say of the very
        // invitation the schedule shows that it was not applied, and keep the mailbox from answering it.
        if (entry.emailId === email.emailId) return undefined
        const merged = merge(entry.calendar, invitation)
        if (merged === undefined || merged === entry.calendar) return undefined
        const organizer = organizerAddress(entry.calendar)
        return organizerAddress(invitation.calendar) !== organizer ? "not_organizer" : organizerRefusal(email.sender, organizer)
      }
      /** Whether the invitation leaves the kept entry as it is: the mailbox's own meeting, or a change refused (and kept as refused). */
      const ignored = (entry: KeptEntry | undefined) =>
        Effect.gen(function*() {
          if (entry?.role === "organizer") return true
          const refused = senderRefusal(entry)
          if (refused === undefined) return false
          yield* keepRefusal(sql, email.emailId, refused)
          yield* Effect.logInfo("A change to an event on the schedule not from its organizer, vouched for, is not applied").pipe(
            Effect.annotateLogs({ mailbox_id: email.mailboxId, email_id: email.emailId, uid: invitation.uid, reason: refused })
          )
          return true
        })
      // The walk first, against the entry as it stands: a rule walked from its first repeat takes up to a
      // quarter of a second, which must not hold the entry's lock (nor, on the embedded database, every
      // other query). Redone in the transaction only when the entry changed meanwhile.
      const current = (yield* sql<KeptEntry>`
        SELECT role, email_id, calendar FROM calendar_entries WHERE mailbox_id = ${email.mailboxId} AND uid = ${invitation.uid}`)[0]
      if (yield* ignored(current)) return undefined
      const expected = merge(current?.calendar, invitation)
      const refusal = expected === undefined ? undefined : unkeepable(expected)
      if (refusal !== undefined) {
        yield* Effect.logInfo("An invitation is not put on the schedule: its calendar is too large to expand at every request", {
          mailbox_id: email.mailboxId,
          email_id: email.emailId,
          uid: invitation.uid,
          size: refusal
        })
        return undefined
      }
      const walked = expected === undefined ? undefined : yield* spanOf(expected)
      return yield* sql.withTransaction(Effect.gen(function*() {
        const rows = yield* sql<
          { role: string; emailId: string | null; calendar: string; sequence: number; status: EventStatus; response: ParticipationStatus }
        >`
          SELECT role, email_id, calendar, sequence, status, response FROM calendar_entries
          WHERE mailbox_id = ${email.mailboxId} AND uid = ${invitation.uid}
          FOR UPDATE`
        const before = rows[0]
        if (yield* ignored(before)) return undefined
        // Its sender may make it (read again once a person took `unauthenticated` off it): refused no more.
        yield* dropRefusal(sql, email.emailId)
        const calendar = merge(before?.calendar, invitation)
        if (calendar !== undefined && calendar !== expected && unkeepable(calendar) !== undefined) return undefined
        const when = calendar === undefined ? undefined : calendar === expected ? walked : yield* spanOf(calendar)
        if (calendar === undefined || when === undefined) return undefined
        const { sequence, status, organizer } = headline(calendar)
        const response = before === undefined || (invitation.method === "REQUEST" && invitation.sequence > before.sequence)
          ? named ?? "needs_action"
          : before.response
        // The same invitation in another email (sent twice): nothing changed, nothing to announce. The same
        // email again (redelivered after a crash before its announcement) is announced again.
        const same = before !== undefined && before.calendar === calendar && before.response === response
        if (same && before.emailId !== email.emailId) return undefined
        // The email an agent reads and answers the event in: the latest invitation, not a cancellation of
        // some of its occurrences (which cannot be answered); a cancellation of the whole event is its latest word.
        const emailId = invitation.method === "CANCEL" && status !== "cancelled" && before !== undefined ? before.emailId : email.emailId
        if (!same) {
          yield* sql`
            INSERT INTO calendar_entries (mailbox_id, uid, user_id, role, email_id, sequence, status, response, calendar, first_start, last_end,
                                          repeats_until)
            VALUES (${email.mailboxId}, ${invitation.uid}, ${email.userId}, 'attendee', ${emailId}, ${sequence}, ${status}, ${response},
                    ${calendar}, ${when.first}, ${when.last}, ${when.repeatsUntil})
            ON CONFLICT (mailbox_id, uid) DO UPDATE SET email_id = EXCLUDED.email_id, sequence = EXCLUDED.sequence,
              status = EXCLUDED.status, response = EXCLUDED.response, calendar = EXCLUDED.calendar,
              first_start = EXCLUDED.first_start, last_end = EXCLUDED.last_end, repeats_until = EXCLUDED.repeats_until, updated_at = now()`
        }
        const event = Either.getOrUndefined(readInvitation(calendar))
        const change: InvitationReceivedData["change"] = invitation.method === "CANCEL"
          ? "cancelled"
          : before === undefined || before.status === "cancelled" && status !== "cancelled"
          ? "new"
          : "updated"
        return {
          mailbox_id: email.mailboxId,
          email_id: email.emailId,
          uid: invitation.uid,
          change,
          recurrence_id: invitation.occurrence,
          summary: event?.summary ?? null,
          start: event?.start ?? null,
          end: event?.end ?? null,
          recurrence: event?.recurrence ?? null,
          organizer,
          response
        } satisfies InvitationReceivedData
      }))
    })

    /**
     * The revision of a received event (`uid`) the mailbox's schedule holds, the email it came in and the
     * event's status; none when it holds none.
     */
    const revision = Effect.fn("Schedule.revision")(function*(mailboxId: string, uid: string) {
      const rows = yield* sql<{ sequence: number; emailId: string | null; status: EventStatus }>`
        SELECT sequence, email_id, status FROM calendar_entries WHERE mailbox_id = ${mailboxId} AND uid = ${uid} AND role = 'attendee'`
      const row = rows[0]
      return row === undefined || row.emailId === null
        ? undefined
        : ({ sequence: Number(row.sequence), emailId: row.emailId, status: row.status } satisfies ScheduleRevision)
    })

    /** The mailbox's answer to an invitation it received (the event `uid`), as it sent it. */
    const answered = Effect.fn("Schedule.answered")(function*(mailboxId: string, uid: string, status: ResponseStatus) {
      yield* sql`
        UPDATE calendar_entries SET response = ${status}, updated_at = now()
        WHERE mailbox_id = ${mailboxId} AND uid = ${uid} AND role = 'attendee'`
    })

    /**
     * One of the mailbox's meetings as its latest invitation or cancellation describes it, walked
     * (`walk`) before the caller's transaction: the walk may take a quarter of a second.
     */
    const organize = Effect.fn("Schedule.organize")(function*(
      meeting: { readonly meetingId: string; readonly mailboxId: string; readonly userId: string; readonly uid: string; readonly emailId: string | null },
      { calendar, when }: Walked
    ) {
      if (when === undefined) return
      const { sequence, status } = headline(calendar)
      yield* sql`
        INSERT INTO calendar_entries (mailbox_id, uid, user_id, role, meeting_id, email_id, sequence, status, response, calendar,
                                      first_start, last_end, repeats_until)
        VALUES (${meeting.mailboxId}, ${meeting.uid}, ${meeting.userId}, 'organizer', ${meeting.meetingId}, ${meeting.emailId}, ${sequence},
                ${status}, 'accepted', ${calendar}, ${when.first}, ${when.last}, ${when.repeatsUntil})
        ON CONFLICT (mailbox_id, uid) DO UPDATE SET role = 'organizer', meeting_id = EXCLUDED.meeting_id, email_id = EXCLUDED.email_id,
          sequence = EXCLUDED.sequence, status = EXCLUDED.status, response = 'accepted', calendar = EXCLUDED.calendar,
          first_start = EXCLUDED.first_start, last_end = EXCLUDED.last_end, repeats_until = EXCLUDED.repeats_until, updated_at = now()`
    })

    /**
     * A kept calendar's occurrences as `expand` walks them, or none when walking it fails: one event
     * the calendar library cannot walk (kept before its rule was checked, or failing on one it passed)
     * is left out, logged, rather than failing the whole schedule, its free time and every reminder.
     */
    const expandedOrNone = <A>(entry: { readonly mailboxId: string; readonly uid: string }, expand: () => ReadonlyArray<A>) =>
      Effect.try(expand).pipe(Effect.catchAll((error) =>
        Effect.as(
          Effect.logWarning("An event on the schedule could not be walked; it is left out", { mailbox_id: entry.mailboxId, uid: entry.uid, error: error.cause }),
          [] as ReadonlyArray<A>
        )
      ))

    /** Every occurrence on the mailboxes' schedules in the range (each event's first `perEvent`), in order of start (then of the mailboxes as named). */
    const occurring = (
      mailboxIds: ReadonlyArray<string>,
      range: { readonly from: Date; readonly to: Date },
      includeCancelled: boolean,
      perEvent = Infinity
    ) =>
      Effect.gen(function*() {
        const rows = yield* sql<EntryRow>`
          SELECT mailbox_id, user_id, uid, role, meeting_id, email_id, status, response, calendar, repeats_until FROM calendar_entries
          WHERE mailbox_id = ANY(${[...mailboxIds]}::text[])
            AND coalesce(last_end, 'infinity'::timestamptz) > ${range.from} AND first_start < ${range.to}
            ${includeCancelled ? sql`` : sql`AND status <> 'cancelled'`}`
        const items: Array<Occurring> = []
        for (const row of rows) {
          const expanded = yield* expandedOrNone(row, () => {
            const calendar = readKept(row.calendar)
            const { organizer } = headline(calendar)
            return occurrences(calendar, range.from, range.to, { max: perEvent, repeatsUntil: row.repeatsUntil }).map((o) => ({ o, organizer }))
          })
          for (const { o, organizer } of expanded) {
            const item = itemOf(row, o, organizer)
            if (item.status !== "cancelled" || includeCancelled) items.push({ item, startsAt: o.startsAt, endsAt: o.endsAt })
          }
        }
        return items.sort((a, b) =>
          a.startsAt - b.startsAt || a.item.uid.localeCompare(b.item.uid) || mailboxIds.indexOf(a.item.mailbox_id) - mailboxIds.indexOf(b.item.mailbox_id)
        )
      })

    /**
     * The reminders' look: each calendar still running, expanded `LOOKAHEAD` ahead and kept until it
     * changes (its `updated_at`) or that has passed, so that a look every few seconds reads the rows
     * but walks a repeating event's rules (ms each, from its first start) about once an hour.
     */
    const expanded = new Map<string, { readonly version: string; readonly until: number; readonly found: ReadonlyArray<Occurrence>; readonly organizer: Party | null }>()
    const keyOf = (entry: { readonly mailboxId: string; readonly uid: string }) => `${entry.mailboxId} ${entry.uid}`

    /**
     * What starts after `now` and at most `leadMs` later on any active mailbox's schedule, to remind it
     * of: occurrences at a time (not whole days), neither cancelled nor declined, soonest first.
     */
    const startingSoon = Effect.fn("Schedule.startingSoon")(function*(now: Date, leadMs: number) {
      const until = now.getTime() + leadMs
      const rows = yield* sql<EntryFields & { readonly version: string }>`
        SELECT mailbox_id, user_id, uid, role, meeting_id, email_id, status, response, updated_at::text AS version FROM calendar_entries
        WHERE status <> 'cancelled' AND response <> 'declined' AND mailbox_id IN (SELECT id FROM mailboxes WHERE status = 'active')
          AND coalesce(last_end, 'infinity'::timestamptz) > ${now} AND first_start <= ${new Date(until)}`
      const stale = rows.filter((row) => {
        const kept = expanded.get(keyOf(row))
        return kept === undefined || kept.version !== row.version || kept.until < until
      })
      if (stale.length > 0) {
        const horizon = now.getTime() + Math.max(leadMs, LOOKAHEAD)
        const calendars = yield* sql<{ mailboxId: string; uid: string; version: string; calendar: string; repeatsUntil: string | null }>`
          SELECT mailbox_id, uid, updated_at::text AS version, calendar, repeats_until FROM calendar_entries
          WHERE (mailbox_id, uid) IN (SELECT * FROM unnest(${stale.map((row) => row.mailboxId)}::text[], ${stale.map((row) => row.uid)}::text[]))`
        for (const c of calendars) {
          const [walked] = yield* expandedOrNone(c, () => {
            const calendar = readKept(c.calendar)
            return [{ found: occurrences(calendar, now, new Date(horizon + 1), { repeatsUntil: c.repeatsUntil }), organizer: headline(calendar).organizer }]
          })
          expanded.set(keyOf(c), { version: c.version, until: horizon, found: walked?.found ?? [], organizer: walked?.organizer ?? null })
        }
      }
      const running = new Set(rows.map(keyOf))
      for (const key of expanded.keys()) if (!running.has(key)) expanded.delete(key)
      return rows.flatMap((row) => {
        // None when the calendar was deleted between the two statements.
        const kept = expanded.get(keyOf(row))
        if (kept === undefined) return []
        return kept.found
          .filter((o) => o.start.date === null && o.status !== "cancelled" && o.startsAt > now.getTime() && o.startsAt <= until)
          .map((o) => ({ item: itemOf(row, o, kept.organizer), userId: row.userId, startsAt: o.startsAt }))
      }).sort((a, b) => a.startsAt - b.startsAt)
    })

    /**
     * The occurrences on the mailboxes' schedules in the range, in order of start (one mailbox's, or
     * several merged, each occurrence naming its mailbox). 404 for a mailbox not the caller's.
     */
    const list = Effect.fn("Schedule.list")(function*(userId: string, mailboxIds: ReadonlyArray<string>, params: ScheduleParams) {
      const range = yield* rangeOf(params, new Date(), MAX_DAYS)
      const limit = params.limit ?? DEFAULT_LIMIT
      const ids = yield* ownMailboxes(sql, userId, mailboxIds)
      // Each event's first `limit + 1`: a page of `limit` and whether there is more need no others.
      const items = yield* occurring(ids, range, params.include_cancelled ?? false, limit + 1)
      const data = items.slice(0, limit).map(({ item }) => item)
      const meta: ScheduleMeta = { from: range.from.toISOString(), to: range.to.toISOString(), count: data.length, hasMore: items.length > limit }
      return { data, meta }
    })

    /**
     * When the mailboxes are all free (one, or several to meet): slots of the length asked for, within
     * the working hours in the zone asked for, that none of their busy occurrences overlaps (a whole-day
     * one takes the day, in that zone). 404 for a mailbox not the caller's.
     */
    const availability = Effect.fn("Schedule.availability")(function*(userId: string, mailboxIds: ReadonlyArray<string>, params: AvailabilityParams) {
      const range = yield* rangeOf(params, new Date(), MAX_AVAILABILITY_DAYS)
      const timeZone = params.time_zone ?? "UTC"
      const [opens, closes] = (params.hours ?? "09:00-17:00").split("-").map(minutesOf) as [number, number]
      const ids = yield* ownMailboxes(sql, userId, mailboxIds)
      const busy = (yield* occurring(ids, range, false)).filter(({ item }) => item.busy).map(({ item, startsAt, endsAt }) =>
        item.start.date !== null
          ? { start: dayStart(timeZone, item.start.date), end: dayStart(timeZone, item.end.date ?? item.start.date) }
          : isFloating(item.start.date_time!)
          // A floating time is the wall clock wherever one is: in the zone asked for.
          ? { start: wallMoment(timeZone, item.start.date_time!), end: wallMoment(timeZone, item.end.date_time ?? item.start.date_time!) }
          : { start: startsAt, end: endsAt })
      const { slots, hasMore } = freeSlots(
        busy,
        { start: range.from.getTime(), end: range.to.getTime() },
        { timeZone, opens, closes, weekdays: new Set((params.weekdays ?? "1,2,3,4,5").split(",").map(Number)) },
        (params.duration_minutes ?? 30) * MINUTE,
        (params.step_minutes ?? 30) * MINUTE,
        params.limit ?? DEFAULT_SLOTS
      )
      const data: Array<FreeSlot> = slots.map((slot) => ({ start: localIso(timeZone, slot.start), end: localIso(timeZone, slot.end) }))
      const meta: AvailabilityMeta = {
        from: range.from.toISOString(),
        to: range.to.toISOString(),
        time_zone: timeZone,
        count: data.length,
        hasMore
      }
      return { data, meta }
    })

    /**
     * The events kept before their walks were (migrations/0077), or before the size limits (0079): each
     * walked once more and its bounds written, unless its calendar changed meanwhile (that change wrote
     * its own), then taken off the list; a received invitation over the limits (`unkeepable`) is taken off
     * the schedule instead, as `receive` would not keep it now. A walk is not in a transaction (it may take
     * a quarter of a second), and nodes starting together may walk the same entries, their writes alike.
     * Answers how many were read.
     */
    const rewalkKept = Effect.gen(function*() {
      let done = 0
      while (true) {
        const batch = yield* sql<{ mailboxId: string; uid: string; role: string; calendar: string }>`
          SELECT r.mailbox_id, r.uid, e.role, e.calendar FROM calendar_rewalk r JOIN calendar_entries e USING (mailbox_id, uid)
          ORDER BY r.mailbox_id, r.uid LIMIT ${REWALK_BATCH}`
        for (const row of batch) {
          const over = row.role === "attendee" ? unkeepable(row.calendar) : undefined
          if (over !== undefined) {
            // Unless it changed meanwhile (that change was held to the limits); off the list either way.
            const dropped = yield* sql.withTransaction(Effect.gen(function*() {
              const rows = yield* sql`
                DELETE FROM calendar_entries WHERE mailbox_id = ${row.mailboxId} AND uid = ${row.uid} AND calendar = ${row.calendar} RETURNING 1`
              yield* sql`DELETE FROM calendar_rewalk WHERE mailbox_id = ${row.mailboxId} AND uid = ${row.uid}`
              return rows
            }))
            if (dropped.length === 0) continue
            yield* Effect.logInfo("An invitation kept before the schedule's size limits is taken off it: its calendar is too large to expand at every request", {
              mailbox_id: row.mailboxId,
              uid: row.uid,
              size: over
            })
            continue
          }
          const when = yield* spanOf(row.calendar)
          yield* sql.withTransaction(Effect.gen(function*() {
            if (when !== undefined) {
              yield* sql`
                UPDATE calendar_entries SET first_start = ${when.first}, last_end = ${when.last}, repeats_until = ${when.repeatsUntil}
                WHERE mailbox_id = ${row.mailboxId} AND uid = ${row.uid} AND calendar = ${row.calendar}`
            }
            yield* sql`DELETE FROM calendar_rewalk WHERE mailbox_id = ${row.mailboxId} AND uid = ${row.uid}`
          }))
        }
        done += batch.length
        if (batch.length < REWALK_BATCH) return done
      }
    })

    /** A calendar to keep, with when it has occurrences: for `organize`. */
    const walk = (calendar: string): Effect.Effect<Walked> => Effect.map(spanOf(calendar), (when) => ({ calendar, when }))

    return { receive, answered, revision, walk, organize, list, availability, startingSoon, rewalkKept } as const
  })
}) {}
