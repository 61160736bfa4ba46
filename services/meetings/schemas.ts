/**
 * Meetings a mailbox organizes (services/meetings/meetings.ts): an event its agent schedules, the
 * invitations (iTIP REQUEST) it sends, and the attendees' answers that come back (REPLY). Contract-safe:
 * schemas and limits only.
 */
import { Schema } from "effect"
import { EventTime, ParticipationStatus } from "../invitations/schemas.ts"
import { isTimeZone, localMoment, localTime } from "../time-zones.ts"
import { ListParams } from "../listing.ts"
import { AddressInput, Instant, MAX_RECIPIENTS, headerText } from "../outbound/schemas.ts"
import { MAX_TIMES_OF_DAY, ruleProblem, timesOfDay } from "../schedule/rule-limits.ts"
import { rule } from "../schema-rules.ts"

/** A day, as a whole-day meeting's start and end are written. */
const Day = Schema.String.pipe(
  rule((value) => /^\d{4}-\d{2}-\d{2}$/.test(value) && !Number.isNaN(Date.parse(`${value}T00:00:00Z`)) &&
    new Date(`${value}T00:00:00Z`).toISOString().startsWith(value), { message: () => "must be a day such as 2026-12-24" })
)

/** A local time without an offset, read in the time_zone beside it: 2026-12-03T15:00:00 (seconds optional). */
const isLocal = (value: string) => localTime(value) !== undefined

const isInstant = Schema.is(Instant)

/** A moment with its offset, or a local time for the time_zone beside it to place (WhenInput checks which). */
const MeetingDateTime = Schema.String.pipe(rule((value) => isInstant(value) || isLocal(value), {
  message: () => "must be an ISO 8601 time with a zone, such as 2026-12-01T09:00:00Z, or a local time such as 2026-12-01T10:00:00 with time_zone",
  description: "A moment with its offset (2026-12-03T15:00:00+01:00), or a local time (2026-12-03T15:00:00) with time_zone, which places it"
}))

/** What is wrong with a local time: no zone to place it, or a time the zone's clocks skip; undefined when nothing. */
const localTimeProblem = (local: string, zone: string | undefined) =>
  zone === undefined
    ? { path: ["date_time"], message: "has no offset: add one (2026-12-01T10:00:00+01:00), or give the time_zone it is in" }
    : localMoment(local, zone) === undefined
    ? { path: ["date_time"], message: `does not exist in ${zone}: the clocks skip it (summer time begins)` }
    : undefined

/** When a meeting starts or ends: a moment (with its zone), or a whole day; one of the two. */
export const WhenInput = Schema.Struct({
  date_time: Schema.optional(MeetingDateTime),
  time_zone: Schema.optional(Schema.String.pipe(rule(isTimeZone, { message: () => "must be an IANA time zone such as Europe/Paris" })))
    .annotations({
      description: "The zone the meeting keeps its local time in (an IANA name such as Europe/Paris): a date_time without an offset is " +
        "read there, and a repeating meeting stays at 15:00 there across summer time; without one, times are sent in UTC"
    }),
  date: Schema.optional(Day.annotations({ description: "A whole day (YYYY-MM-DD); a whole-day meeting's end is the day after its last" }))
}).pipe(
  rule((when) =>
    (when.date_time === undefined) === (when.date === undefined)
      ? "must be {\"date_time\": an ISO 8601 time with its zone} or {\"date\": YYYY-MM-DD}, one of the two"
      : when.date !== undefined && when.time_zone !== undefined
      ? "time_zone goes with a date_time, not a whole day"
      : when.date_time !== undefined && isLocal(when.date_time)
      ? localTimeProblem(when.date_time, when.time_zone)
      : undefined
  )
).annotations({ identifier: "MeetingTimeInput" })
export type WhenInput = typeof WhenInput.Type

/** An RRULE (RFC 5545 §3.3.10): FREQ and the rule's other parts, e.g. FREQ=WEEKLY;BYDAY=TH;COUNT=4. */
const Rule = Schema.String.pipe(
  // As RFC 5545 writes a rule: the attendees' calendars read it, and the schedule walks it.
  rule((value) => {
    const problem = value.length > 500 ? "is longer than 500 characters" : ruleProblem(value)
    return problem === undefined || `must be an iCalendar RRULE such as FREQ=WEEKLY;BYDAY=TH;COUNT=4: this one ${problem}`
  }),
  // A meeting every second or minute is no meeting: calendar programs offer neither, and the
  // schedule walks such a rule only so far (services/schedule/occurrences.ts).
  rule((value) => !/(^|;)FREQ=(SECONDLY|MINUTELY)(;|$)/i.test(value), {
    message: () => "must repeat at most hourly (FREQ=HOURLY, DAILY, WEEKLY, MONTHLY or YEARLY)"
  }),
  rule((value) => timesOfDay(value) <= MAX_TIMES_OF_DAY, {
    message: () => `must name at most ${MAX_TIMES_OF_DAY} times of day (BYHOUR × BYMINUTE × BYSECOND values)`
  })
)

const MeetingFields = {
  summary: headerText(Schema.String).pipe(
    Schema.minLength(1, { message: () => "must not be empty" }),
    Schema.maxLength(255, { message: () => "must be at most 255 characters" })
  ).annotations({ description: "The meeting's title" }),
  description: Schema.optional(Schema.NullOr(Schema.String.pipe(Schema.maxLength(10_000)))).annotations({
    description: "What the meeting is about, as the invitation tells it (at most 10,000 characters); null: none"
  }),
  location: Schema.optional(Schema.NullOr(headerText(Schema.String).pipe(Schema.maxLength(500)))).annotations({
    description: "Where it takes place (at most 500 characters, one line); null: nowhere said"
  }),
  url: Schema.optional(Schema.NullOr(Schema.String.pipe(
    Schema.maxLength(2000),
    Schema.pattern(/^https?:\/\/[^\s]+$/i, { message: () => "must be an http or https URL" })
  ))).annotations({ description: "Where to join it (a video call's link)" }),
  start: WhenInput.annotations({ description: "When it starts" }),
  end: WhenInput.annotations({ description: "When it ends, after it starts" }),
  recurrence: Schema.optional(Schema.NullOr(Rule)).annotations({ description: "How it repeats (an RRULE); absent or null: once" }),
  attendees: Schema.Array(AddressInput).pipe(
    Schema.minItems(1, { message: () => "must list at least one attendee" }),
    Schema.maxItems(MAX_RECIPIENTS, { message: () => `must list at most ${MAX_RECIPIENTS} attendees` })
  ).annotations({
    description: `Whom to invite (1-${MAX_RECIPIENTS}); each gets the invitation by mail and answers from their calendar`
  })
}

export const MeetingInput = Schema.Struct(MeetingFields).annotations({ identifier: "MeetingInput", parseOptions: { errors: "all", onExcessProperty: "error" } })
export type MeetingInput = typeof MeetingInput.Type

export const MeetingUpdate = Schema.Struct({
  summary: Schema.optional(MeetingFields.summary),
  description: MeetingFields.description,
  location: MeetingFields.location,
  url: MeetingFields.url,
  start: Schema.optional(WhenInput).annotations({ description: "When it starts" }),
  end: Schema.optional(WhenInput).annotations({ description: "When it ends, after it starts" }),
  recurrence: MeetingFields.recurrence,
  attendees: Schema.optional(MeetingFields.attendees)
}).annotations({ identifier: "MeetingUpdate", parseOptions: { errors: "all", onExcessProperty: "error" } })
export type MeetingUpdate = typeof MeetingUpdate.Type

export const MeetingAttendee = Schema.Struct({
  address: Schema.String,
  name: Schema.NullOr(Schema.String),
  status: ParticipationStatus.annotations({ description: "Their answer: needs_action until their calendar replies" }),
  comment: Schema.NullOr(Schema.String).annotations({ description: "The note their answer carried" }),
  responded_at: Schema.NullOr(Schema.String)
}).annotations({ identifier: "MeetingAttendee" })
export type MeetingAttendee = typeof MeetingAttendee.Type

export const MeetingStatus = Schema.Literal("confirmed", "cancelled")

export const Meeting = Schema.Struct({
  meeting_id: Schema.String,
  mailbox_id: Schema.String,
  uid: Schema.String.annotations({ description: "The event's identity in the attendees' calendars" }),
  sequence: Schema.Number.annotations({ description: "Its revision: each change sends the invitation again with the next" }),
  status: MeetingStatus,
  summary: Schema.String,
  description: Schema.NullOr(Schema.String),
  location: Schema.NullOr(Schema.String),
  url: Schema.NullOr(Schema.String),
  start: EventTime,
  end: EventTime,
  recurrence: Schema.NullOr(Schema.String),
  attendees: Schema.Array(MeetingAttendee),
  email_id: Schema.NullOr(Schema.String).annotations({ description: "The latest invitation (or cancellation) sent" }),
  created_at: Schema.String,
  updated_at: Schema.String
}).annotations({ identifier: "Meeting" })
export type Meeting = typeof Meeting.Type

export const meetingSortFields = ["created_at", "start"] as const
export const MeetingListParams = Schema.Struct({
  ...ListParams(meetingSortFields).fields,
  status: Schema.optional(MeetingStatus.annotations({ message: () => "must be one of confirmed, cancelled" }))
}).annotations({ parseOptions: { errors: "all" } })

/** `meeting.answered`: an attendee's calendar answered one of a mailbox's meetings. */
export const MeetingAnsweredData = Schema.Struct({
  meeting_id: Schema.String,
  mailbox_id: Schema.String,
  uid: Schema.String,
  summary: Schema.String,
  attendee: MeetingAttendee.annotations({ description: "Who answered, and their answer (status, comment)" }),
  email_id: Schema.String.annotations({ description: "The answer as the mailbox received it (an email with the calendar's REPLY)" })
}).annotations({ identifier: "MeetingAnsweredData" })
export type MeetingAnsweredData = typeof MeetingAnsweredData.Type
