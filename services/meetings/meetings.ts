/**
 * Meetings a mailbox organizes (schemas.ts): its agent schedules one, and Mailroom sends the attendees
 * an invitation as calendars expect it (iTIP REQUEST over mail, RFC 5546 / 6047: Google, Outlook and
 * Apple show it with Accept and Decline), sends the update when it changes (the same UID, the next
 * SEQUENCE; attendees taken off get a cancellation) and the cancellation when it is called off (METHOD
 * CANCEL). The attendees' calendars answer by mail (REPLY); the worker hands each answer the mailbox
 * receives to `recordAnswer` (services/schedule/calendar-mail.ts), which keeps it on the meeting and
 * announces it (`meeting.answered`). Each change is written to the mailbox's schedule with the meeting.
 *
 * Each message goes through the ordinary send path (Outbound.submit): the plan's sends, suppressions,
 * DKIM and delivery apply as to any send, and each is the mailbox's sent mail. The meeting is kept
 * after its invitation is accepted for delivery, so a refused send (a suppressed attendee, the plan's
 * sends used up) leaves no meeting behind.
 */
import { SqlClient, type SqlError } from "@effect/sql"
import { Effect, Schema } from "effect"
import { newId } from "../accounts/tokens.ts"
import { Bus, encodeJson, subjects } from "../bus/bus.ts"
import { Conflict, NotFound, ValidationError } from "../errors.ts"
import type { EventTime } from "../invitations/schemas.ts"
import { localMoment } from "../time-zones.ts"
import { describeRule, type OrganizedEvent, organizerCalendar, replyAnswers } from "../invitations/icalendar.ts"
import type { Page, Sort } from "../listing.ts"
import { routingForm } from "../mail/inbound.ts"
import { named, Outbound } from "../outbound/send.ts"
import type { AddressInput } from "../outbound/schemas.ts"
import { attendeeRefusal, type CalendarSender, dropRefusal, keepRefusal } from "../schedule/calendar-sender.ts"
import { Schedule } from "../schedule/schedule.ts"
import type { Meeting, MeetingAnsweredData, MeetingAttendee, MeetingInput, MeetingUpdate, WhenInput } from "./schemas.ts"

const MeetingRow = Schema.Struct({
  id: Schema.String,
  mailboxId: Schema.String,
  uid: Schema.String,
  sequence: Schema.Number,
  status: Schema.Literal("confirmed", "cancelled"),
  summary: Schema.String,
  description: Schema.NullOr(Schema.String),
  location: Schema.NullOr(Schema.String),
  url: Schema.NullOr(Schema.String),
  startTime: Schema.String,
  endTime: Schema.String,
  recurrence: Schema.NullOr(Schema.String),
  attendees: Schema.String,
  emailId: Schema.NullOr(Schema.String),
  createdAt: Schema.DateFromSelf,
  updatedAt: Schema.DateFromSelf
})
type MeetingRow = typeof MeetingRow.Type

// JSON columns as text: the client would rename their snake_case keys as it does column names.
const COLUMNS = "id, mailbox_id, uid, sequence, status, summary, description, location, url, start_time::text AS start_time, " +
  "end_time::text AS end_time, recurrence, attendees::text AS attendees, email_id, created_at, updated_at"

const toMeeting = (row: MeetingRow): Meeting => ({
  meeting_id: row.id,
  mailbox_id: row.mailboxId,
  uid: row.uid,
  sequence: row.sequence,
  status: row.status,
  summary: row.summary,
  description: row.description,
  location: row.location,
  url: row.url,
  start: JSON.parse(row.startTime) as EventTime,
  end: JSON.parse(row.endTime) as EventTime,
  recurrence: row.recurrence,
  attendees: JSON.parse(row.attendees) as Array<MeetingAttendee>,
  email_id: row.emailId,
  created_at: row.createdAt.toISOString(),
  updated_at: row.updatedAt.toISOString()
})

/** A date_time as given: a moment with its offset, or a local time its zone places (WhenInput let through only those). */
const momentOfInput = (dateTime: string, zone: string | undefined) => (zone === undefined ? undefined : localMoment(dateTime, zone)) ?? Date.parse(dateTime)

/** A start or end as kept and answered: a moment in UTC (with the zone it is kept in, if any), or a day. */
const timeOf = (when: WhenInput): EventTime =>
  when.date !== undefined
    ? { date_time: null, date: when.date, time_zone: null }
    : { date_time: new Date(momentOfInput(when.date_time!, when.time_zone)).toISOString().replace(".000Z", "Z"), date: null, time_zone: when.time_zone ?? null }

/** Whether two times are the same: a day, or a moment and the zone it is shown in (a stored time's fields come in any order). */
const sameTime = (a: EventTime, b: EventTime) => a.date === b.date && a.date_time === b.date_time && a.time_zone === b.time_zone

/** The moment a start stands for, to order meetings by (a day: its midnight in UTC). */
const momentOf = (time: EventTime) => new Date(time.date ?? time.date_time!)

/** The end after the start, both moments or both days; otherwise the field at fault. */
const checkTimes = (start: EventTime, end: EventTime) => {
  if ((start.date === null) !== (end.date === null)) {
    return Effect.fail(ValidationError.field("end", "must be a date when start is a date, and a date_time when start is a date_time"))
  }
  return momentOf(end) > momentOf(start) ? Effect.void : Effect.fail(ValidationError.field("end", "must be after start"))
}

/**
 * A repeat rule's UNTIL of the start's kind (RFC 5545 §3.3.10): a date for a whole-day meeting, a
 * UTC date-time for one at a time (kept in UTC or in a zone alike); otherwise `recurrence` at fault.
 * The rule alone reads well either way (schemas.ts), but calendars that get the other kind end the
 * series where they please or refuse the invitation.
 */
const checkUntil = (start: EventTime, recurrence: string | null) => {
  const until = recurrence === null ? undefined : /(?:^|;)UNTIL=([^;]*)/i.exec(recurrence)?.[1]
  if (until === undefined) return Effect.void
  if (start.date !== null) {
    return /^\d{8}$/.test(until)
      ? Effect.void
      : Effect.fail(ValidationError.field("recurrence", "must end with UNTIL as a date such as 20270115, as start is a whole day (date)"))
  }
  return /^\d{8}T\d{6}Z$/i.test(until)
    ? Effect.void
    : Effect.fail(ValidationError.field("recurrence", "must end with UNTIL as a UTC date-time such as 20270115T235959Z, as start is a date_time"))
}

/** The attendees as given, each address once, none the mailbox itself; answers kept from `earlier`. */
const attendeesOf = (
  input: ReadonlyArray<AddressInput>,
  organizer: string,
  earlier: ReadonlyArray<MeetingAttendee> = []
): Effect.Effect<Array<MeetingAttendee>, ValidationError> =>
  Effect.gen(function*() {
    const seen = new Set<string>()
    const attendees: Array<MeetingAttendee> = []
    for (const [i, entry] of input.entries()) {
      const { address, name } = named(entry)
      const key = routingForm(address)
      if (key === routingForm(organizer)) return yield* ValidationError.field(`attendees.${i}`, "is the organizing mailbox itself")
      if (seen.has(key)) continue
      seen.add(key)
      const before = earlier.find((a) => routingForm(a.address) === key)
      attendees.push(before ?? { address, name: name ?? null, status: "needs_action", comment: null, responded_at: null })
    }
    return attendees
  })

const plural = (n: number, one: string) => `${n} ${one}${n === 1 ? "" : "s"}`

/** When, as the invitation's text says it: in the zone the meeting is kept in, else UTC (calendars show each reader's own). */
const whenText = (start: EventTime, end: EventTime) => {
  if (start.date !== null) {
    const days = Math.round((momentOf(end).getTime() - momentOf(start).getTime()) / 86_400_000)
    return `${start.date} (${plural(days, "day")})`
  }
  const format = (time: EventTime) =>
    time.time_zone === null
      ? new Date(time.date_time!).toUTCString().replace(":00 GMT", " UTC")
      : `${new Intl.DateTimeFormat("en-GB", { timeZone: time.time_zone, dateStyle: "medium", timeStyle: "short" }).format(new Date(time.date_time!))} (${time.time_zone})`
  return `${format(start)} – ${format(end)}`
}

export class Meetings extends Effect.Service<Meetings>()("mailroom/Meetings", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const outbound = yield* Outbound
    const bus = yield* Bus
    const schedule = yield* Schedule

    const decode = (rows: ReadonlyArray<unknown>) => Effect.orDie(Schema.decodeUnknown(Schema.Array(MeetingRow))(rows))

    /** The caller's active mailbox: the organizer. */
    const organizerOf = (userId: string, mailboxId: string) =>
      Effect.gen(function*() {
        const rows = yield* sql<{ address: string; displayName: string | null }>`
          SELECT local_part || '@' || domain AS address, display_name FROM mailboxes
          WHERE id = ${mailboxId} AND user_id = ${userId} AND status = 'active'`
        const row = rows[0]
        if (row === undefined) return yield* new NotFound({ message: "Mailbox not found", details: { mailbox_id: mailboxId } })
        return { address: row.address, name: row.displayName }
      })

    const find = (userId: string, meetingId: string) =>
      Effect.gen(function*() {
        const rows = yield* decode(yield* sql`
          SELECT ${sql.literal(COLUMNS)} FROM meetings mt
          WHERE mt.id = ${meetingId} AND mt.user_id = ${userId}
            AND EXISTS (SELECT 1 FROM mailboxes m WHERE m.id = mt.mailbox_id AND m.status = 'active')`)
        const row = rows[0]
        if (row === undefined) return yield* new NotFound({ message: "Meeting not found", details: { meeting_id: meetingId } })
        return row
      })

    /** Send the attendees the calendar `method` asks of them about `event`: the send's answer. */
    const tell = (
      userId: string,
      mailboxId: string,
      method: "REQUEST" | "CANCEL",
      event: OrganizedEvent,
      to: ReadonlyArray<MeetingAttendee>,
      subject: string
    ) => {
      const lines = [
        `${event.organizer.name ?? event.organizer.address} ${method === "CANCEL" ? "has cancelled" : "invites you to"}: ${event.summary}`,
        "",
        `When: ${whenText(event.start, event.end)}${event.recurrence === null ? "" : `, repeating ${describeRule(event.recurrence)}`}`,
        ...(event.location === null ? [] : [`Where: ${event.location}`]),
        ...(event.url === null ? [] : [`Join: ${event.url}`]),
        ...(event.description === null ? [] : ["", event.description]),
        ...(method === "REQUEST" ? ["", "Answer from your calendar (Accept, Maybe or Decline): the organizer is told."] : [])
      ]
      return outbound.submit(userId, mailboxId, {
        to: to.map((a) => ({ address: a.address, name: a.name ?? undefined })),
        cc: [],
        bcc: [],
        subject,
        text: lines.join("\n"),
        attachments: [],
        headers: {},
        calendar: { method, content: organizerCalendar(method, event, new Date()) },
        references: []
      }).pipe(
        // Sent without an Idempotency-Key: a reused key cannot be its answer.
        Effect.catchTag("IdempotencyKeyReused", (error) => Effect.die(error))
      )
    }

    /**
     * The meeting written (`write`, answering its row) and the mailbox's schedule with it, as one; its
     * row. Its repeats are walked first, outside the transaction (a quarter of a second at most).
     */
    const scheduled = (userId: string, method: "REQUEST" | "CANCEL", event: OrganizedEvent, write: Effect.Effect<ReadonlyArray<unknown>, SqlError.SqlError>) =>
      Effect.gen(function*() {
        const walked = yield* schedule.walk(organizerCalendar(method, event, new Date()))
        return yield* sql.withTransaction(Effect.gen(function*() {
          const row = (yield* decode(yield* write))[0]!
          yield* schedule.organize({ meetingId: row.id, mailboxId: row.mailboxId, userId, uid: row.uid, emailId: row.emailId }, walked)
          return row
        }))
      })

    /** Schedule a meeting: the invitation sent to every attendee, then the meeting kept (201's answer). */
    const create = Effect.fn("Meetings.create")(function*(userId: string, mailboxId: string, input: MeetingInput) {
      const organizer = yield* organizerOf(userId, mailboxId)
      const start = timeOf(input.start)
      const end = timeOf(input.end)
      yield* checkTimes(start, end)
      yield* checkUntil(start, input.recurrence ?? null)
      const attendees = yield* attendeesOf(input.attendees, organizer.address)
      const id = newId("mtg")
      const event: OrganizedEvent = {
        uid: `${id}@${organizer.address.slice(organizer.address.lastIndexOf("@") + 1)}`,
        sequence: 0,
        summary: input.summary,
        description: input.description ?? null,
        location: input.location ?? null,
        url: input.url ?? null,
        start,
        end,
        recurrence: input.recurrence?.toUpperCase() ?? null,
        organizer,
        attendees
      }
      const sent = yield* tell(userId, mailboxId, "REQUEST", event, attendees, `Invitation: ${event.summary}`)
      const written = yield* scheduled(userId, "REQUEST", event, sql`
        INSERT INTO meetings (id, mailbox_id, user_id, uid, summary, description, location, url, start_time, end_time, starts_at,
                              recurrence, attendees, email_id)
        VALUES (${id}, ${mailboxId}, ${userId}, ${event.uid}, ${event.summary}, ${event.description}, ${event.location}, ${event.url},
                ${JSON.stringify(start)}::jsonb, ${JSON.stringify(end)}::jsonb, ${momentOf(start)}, ${event.recurrence},
                ${JSON.stringify(attendees)}::jsonb, ${sent.email_id})
        RETURNING ${sql.literal(COLUMNS)}`)
      yield* Effect.logInfo("Meeting scheduled").pipe(Effect.annotateLogs({ meeting_id: id, mailbox_id: mailboxId, attendees: attendees.length }))
      return toMeeting(written)
    })

    const list = Effect.fn("Meetings.list")(function*(
      userId: string,
      mailboxId: string,
      p: Page,
      sort: Sort<"created_at" | "start">,
      status: "confirmed" | "cancelled" | undefined
    ) {
      yield* organizerOf(userId, mailboxId)
      const byStatus = status === undefined ? sql`` : sql`AND status = ${status}`
      const order = sql.literal(`${sort.field === "start" ? "starts_at" : "created_at"} ${sort.direction === "asc" ? "ASC" : "DESC"}, id`)
      const [rows, counted] = yield* Effect.all([
        sql`SELECT ${sql.literal(COLUMNS)} FROM meetings WHERE mailbox_id = ${mailboxId} ${byStatus}
            ORDER BY ${order} LIMIT ${p.limit} OFFSET ${p.offset}`.pipe(Effect.flatMap(decode)),
        sql<{ n: number | string }>`SELECT count(*) AS n FROM meetings WHERE mailbox_id = ${mailboxId} ${byStatus}`
      ])
      return { data: rows.map(toMeeting), total: Number(counted[0]?.n ?? 0) }
    })

    const get = Effect.fn("Meetings.get")(function*(userId: string, meetingId: string) {
      return toMeeting(yield* find(userId, meetingId))
    })

    const stillOn = (row: MeetingRow) =>
      row.status === "cancelled"
        ? Effect.fail(new Conflict({ message: "The meeting is cancelled", details: { meeting_id: row.id, status: row.status } }))
        : Effect.void

    /**
     * Change a meeting: the update sent to its attendees with the next revision (a new time asks
     * everyone to answer again), a cancellation to attendees taken off it. A change that changes
     * nothing sends nothing.
     */
    const update = Effect.fn("Meetings.update")(function*(userId: string, meetingId: string, patch: MeetingUpdate) {
      const row = yield* find(userId, meetingId)
      yield* stillOn(row)
      const before = toMeeting(row)
      const organizer = yield* organizerOf(userId, row.mailboxId)
      const start = patch.start === undefined ? before.start : timeOf(patch.start)
      const end = patch.end === undefined ? before.end : timeOf(patch.end)
      yield* checkTimes(start, end)
      const recurrence = patch.recurrence === undefined ? before.recurrence : patch.recurrence?.toUpperCase() ?? null
      yield* checkUntil(start, recurrence)
      const rescheduled = !sameTime(start, before.start) || !sameTime(end, before.end) || recurrence !== before.recurrence
      const given = patch.attendees ?? before.attendees.map((a) => ({ address: a.address, ...(a.name === null ? {} : { name: a.name }) }))
      const kept = yield* attendeesOf(given, organizer.address, before.attendees)
      // A new time is a new question: every answer so far was to the old one.
      const attendees = rescheduled ? kept.map((a) => ({ ...a, status: "needs_action" as const, comment: null, responded_at: null })) : kept
      const removed = before.attendees.filter((a) => !kept.some((k) => routingForm(k.address) === routingForm(a.address)))
      const after = {
        summary: patch.summary ?? before.summary,
        description: patch.description === undefined ? before.description : patch.description,
        location: patch.location === undefined ? before.location : patch.location,
        url: patch.url === undefined ? before.url : patch.url
      }
      const changed = rescheduled || removed.length > 0 || kept.length !== before.attendees.length ||
        JSON.stringify(after) !== JSON.stringify({ summary: before.summary, description: before.description, location: before.location, url: before.url })
      if (!changed) return before
      const event: OrganizedEvent = { uid: row.uid, sequence: row.sequence + 1, ...after, start, end, recurrence, organizer, attendees }
      const sent = yield* tell(userId, row.mailboxId, "REQUEST", event, attendees, `Updated invitation: ${event.summary}`)
      if (removed.length > 0) {
        yield* tell(userId, row.mailboxId, "CANCEL", { ...event, attendees: removed }, removed, `Cancelled: ${event.summary}`)
      }
      const written = yield* scheduled(userId, "REQUEST", event, sql`
        UPDATE meetings SET sequence = ${event.sequence}, ${rescheduled ? sql`asked_sequence = ${event.sequence},` : sql``}
          summary = ${after.summary}, description = ${after.description},
          location = ${after.location}, url = ${after.url}, start_time = ${JSON.stringify(start)}::jsonb,
          end_time = ${JSON.stringify(end)}::jsonb, starts_at = ${momentOf(start)}, recurrence = ${recurrence},
          attendees = ${JSON.stringify(attendees)}::jsonb, email_id = ${sent.email_id}, updated_at = now()
        WHERE id = ${meetingId}
        RETURNING ${sql.literal(COLUMNS)}`)
      return toMeeting(written)
    })

    /** Call a meeting off: the cancellation sent to its attendees; the meeting kept, cancelled. */
    const cancel = Effect.fn("Meetings.cancel")(function*(userId: string, meetingId: string) {
      const row = yield* find(userId, meetingId)
      yield* stillOn(row)
      const organizer = yield* organizerOf(userId, row.mailboxId)
      const before = toMeeting(row)
      const event: OrganizedEvent = { ...before, organizer, sequence: row.sequence + 1 }
      const sent = yield* tell(userId, row.mailboxId, "CANCEL", event, before.attendees, `Cancelled: ${before.summary}`)
      const written = yield* scheduled(userId, "CANCEL", event, sql`
        UPDATE meetings SET status = 'cancelled', sequence = ${event.sequence}, email_id = ${sent.email_id}, updated_at = now()
        WHERE id = ${meetingId}
        RETURNING ${sql.literal(COLUMNS)}`)
      return toMeeting(written)
    })

    /**
     * An attendee's answer the mailbox received (a REPLY to one of its meetings): their status and note
     * on the meeting. An answer is its sender's own: a REPLY changes only the attendee whose address
     * its From is, and only when the inbound checks vouch for that From (anyone who has an invitation
     * knows its UID, and could otherwise decline for all of its attendees; and anyone can write a From:
     * schedule/calendar-sender.ts). One that answers for nobody it may is kept as refused, for its
     * email's invitation to say. An answer from someone not on it (the invitation forwarded to them) adds them. An
     * answer received before the one kept (arriving late) changes nothing, nor does an answer to a
     * revision before the meeting's time last changed, nor anything else (not a calendar, not a REPLY,
     * another mailbox's meeting); true when an answer was kept (and announced).
     */
    const recordAnswer = Effect.fn("Meetings.recordAnswer")(function*(
      found: { readonly emailId: string; readonly mailboxId: string; readonly receivedAt: Date; readonly sender: CalendarSender },
      text: string
    ) {
      const { emailId } = found
      const answers = replyAnswers(text)
      if (answers === undefined || answers.attendees.length === 0) return false
      const refusals = answers.attendees.map((answer) => attendeeRefusal(found.sender, answer.address))
      const own = answers.attendees.filter((_, i) => refusals[i] === undefined)
      if (own.length < answers.attendees.length) {
        yield* Effect.logInfo("A meeting answer for attendees other than its sender, or from a sender nothing vouches for, not kept for them").pipe(
          Effect.annotateLogs({ email_id: emailId, attendees: answers.attendees.length - own.length })
        )
      }
      const answered = yield* sql.withTransaction(Effect.gen(function*() {
        const meetings = yield* sql<{ id: string; userId: string; summary: string; attendees: string; askedSequence: number }>`
          SELECT id, user_id, summary, attendees::text AS attendees, asked_sequence FROM meetings
          WHERE uid = ${answers.uid} AND mailbox_id = ${found.mailboxId} FOR UPDATE`
        const meeting = meetings[0]
        if (meeting === undefined) return undefined
        if (own.length === 0) {
          // Its own answer unvouched for, rather than only others': what a person can overrule (taking `unauthenticated` off).
          yield* keepRefusal(sql, emailId, refusals.includes("unverified_sender") ? "unverified_sender" : "not_attendee")
          return undefined
        }
        yield* dropRefusal(sql, emailId)
        // An answer to a revision before the meeting last asked again (an accept of the old time,
        // arriving after the move) answers a question no longer asked (RFC 5546 §2.1.5).
        if (answers.sequence !== undefined && answers.sequence < meeting.askedSequence) {
          yield* Effect.logInfo("An answer to an earlier revision of a meeting, not kept").pipe(
            Effect.annotateLogs({ meeting_id: meeting.id, email_id: emailId, answered: answers.sequence, asked: meeting.askedSequence })
          )
          return undefined
        }
        const attendees = JSON.parse(meeting.attendees) as Array<MeetingAttendee>
        const at = new Date(found.receivedAt).toISOString()
        const changed: Array<MeetingAttendee> = []
        for (const answer of own) {
          const entry: MeetingAttendee = {
            address: answer.address,
            name: answer.name,
            status: answer.status,
            comment: answers.comment,
            responded_at: at
          }
          const i = attendees.findIndex((a) => routingForm(a.address) === routingForm(answer.address))
          // An older answer arriving late: the newer one kept stands.
          const earlier = i >= 0 ? attendees[i]!.responded_at : null
          if (earlier !== null && earlier > at) continue
          const kept = i >= 0 ? { ...entry, address: attendees[i]!.address, name: attendees[i]!.name ?? answer.name } : entry
          if (i >= 0) attendees[i] = kept
          else attendees.push(kept)
          changed.push(kept)
        }
        if (changed.length === 0) return undefined
        yield* sql`UPDATE meetings SET attendees = ${JSON.stringify(attendees)}::jsonb, updated_at = now() WHERE id = ${meeting.id}`
        return { meeting, changed }
      }))
      if (answered === undefined) return false
      const { meeting, changed } = answered
      yield* Effect.logInfo("Meeting answered").pipe(
        Effect.annotateLogs({ meeting_id: meeting.id, email_id: emailId, answers: changed.map((a) => `${a.address} ${a.status}`).join(", ") })
      )
      // Once kept: a redelivered answer is applied again and announced under the same id (the bus drops the repeat).
      for (const attendee of changed) {
        const data: MeetingAnsweredData = {
          meeting_id: meeting.id,
          mailbox_id: found.mailboxId,
          uid: answers.uid,
          summary: meeting.summary,
          attendee,
          email_id: emailId
        }
        yield* bus.publish(
          subjects.event("meeting.answered"),
          encodeJson({ event: "meeting.answered", timestamp: new Date().toISOString(), namespace: meeting.userId, data }),
          { msgId: `meeting.answered:${emailId}:${routingForm(attendee.address)}` }
        )
      }
      return true
    })

    /** A meeting entered in its mailbox's schedule as it stands (one scheduled before the schedule existed); gone ones are left. */
    const enterInSchedule = (meetingId: string) =>
      Effect.gen(function*() {
        const owners = yield* sql<{ userId: string }>`SELECT user_id FROM meetings WHERE id = ${meetingId}`
        const owner = owners[0]
        if (owner === undefined) return
        const row = yield* find(owner.userId, meetingId)
        const organizer = yield* organizerOf(owner.userId, row.mailboxId)
        const event: OrganizedEvent = { ...toMeeting(row), organizer }
        yield* schedule.organize(
          { meetingId, mailboxId: row.mailboxId, userId: owner.userId, uid: row.uid, emailId: row.emailId },
          yield* schedule.walk(organizerCalendar(row.status === "cancelled" ? "CANCEL" : "REQUEST", event, row.updatedAt))
        )
      }).pipe(Effect.catchTag("NotFound", () => Effect.void), Effect.withSpan("Meetings.enterInSchedule"))

    return { create, list, get, update, cancel, recordAnswer, enterInSchedule } as const
  }),
  dependencies: [Schedule.Default]
}) {}
