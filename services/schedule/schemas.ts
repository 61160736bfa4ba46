/**
 * A mailbox's schedule (services/schedule/schedule.ts): the occurrences of the meetings it organizes
 * and of the invitations it received, between two moments. Contract-safe: schemas and limits only.
 */
import { Schema } from "effect"
import { EventTime, ParticipationStatus, Party } from "../invitations/schemas.ts"
import { isTimeZone } from "../time-zones.ts"
import { IntegerParam } from "../listing.ts"
import { Instant } from "../outbound/schemas.ts"
import { rule } from "../schema-rules.ts"

/** The range a schedule is asked for, when only `from` (or nothing) is given. */
export const DEFAULT_DAYS = 7
/** The longest range one request may ask for. */
export const MAX_DAYS = 366
/** Occurrences in one answer unless `limit` says otherwise, and at most (`limit`'s largest). */
export const DEFAULT_LIMIT = 100
export const MAX_ITEMS = 500

const TrueOrFalse = Schema.transform(
  Schema.Literal("true", "false"),
  Schema.Boolean,
  { strict: true, decode: (value) => value === "true", encode: (value) => (value ? "true" : "false") }
)

/** A range asked for: `from` (default now) and `to` (default a week later), at most `maxDays` apart. */
const rangeFields = (maxDays: number) => ({
  from: Schema.optional(Instant.annotations({ description: "From this moment (ISO 8601 with its zone); default: now" })),
  to: Schema.optional(Instant.annotations({
    description: `Until this moment, after from and at most ${maxDays} days later; default: ${DEFAULT_DAYS} days after from`
  }))
})

export const ScheduleParams = Schema.Struct({
  ...rangeFields(MAX_DAYS),
  limit: Schema.optional(IntegerParam(1, MAX_ITEMS).annotations({ description: `At most this many occurrences (1-${MAX_ITEMS}, default 100)` })),
  include_cancelled: Schema.optional(TrueOrFalse.annotations({
    description: "true: cancelled events and occurrences too (status cancelled, busy false); default false"
  }))
}).annotations({ parseOptions: { errors: "all" } })
export type ScheduleParams = typeof ScheduleParams.Type

/** The most mailboxes one schedule or one free-time question may name. */
export const MAX_MAILBOXES = 20

/** `mailbox_ids=a,b`: the account's mailboxes a schedule or a free time is asked of, together. */
const mailboxIdsField = (what: string) => ({
  mailbox_ids: Schema.split(",").pipe(
    Schema.compose(Schema.Array(Schema.String.pipe(Schema.minLength(1, { message: () => "must not name an empty mailbox id" }))).pipe(
      Schema.minItems(1),
      Schema.maxItems(MAX_MAILBOXES, { message: () => `must name at most ${MAX_MAILBOXES} mailboxes` })
    ))
  ).annotations({ description: `Comma-separated ids of the account's mailboxes (1-${MAX_MAILBOXES}) ${what}` })
})

export const SharedScheduleParams = Schema.Struct({
  ...mailboxIdsField("whose schedules to merge"),
  ...ScheduleParams.fields
}).annotations({ parseOptions: { errors: "all" } })
export type SharedScheduleParams = typeof SharedScheduleParams.Type

export const ScheduleItem = Schema.Struct({
  mailbox_id: Schema.String.annotations({ description: "The mailbox whose schedule it is on" }),
  uid: Schema.String.annotations({ description: "The event's identity, as calendars know it" }),
  recurrence_id: Schema.NullOr(Schema.String).annotations({
    description: "For an occurrence of a repeating event: the start it was due at (what RECURRENCE-ID names); null: it does not repeat"
  }),
  role: Schema.Literal("organizer", "attendee").annotations({
    description: "organizer: one of the mailbox's meetings; attendee: an invitation it received"
  }),
  meeting_id: Schema.NullOr(Schema.String).annotations({ description: "The meeting (GET /meetings/{meeting_id}), for the organizer's" }),
  email_id: Schema.NullOr(Schema.String).annotations({
    description: "The latest invitation, update or cancellation about it (GET /emails/{email_id}/invitation answers an attendee's)"
  }),
  summary: Schema.NullOr(Schema.String),
  location: Schema.NullOr(Schema.String),
  url: Schema.NullOr(Schema.String),
  start: EventTime,
  end: EventTime,
  status: Schema.Literal("confirmed", "tentative", "cancelled").annotations({ description: "As its organizer has it" }),
  response: ParticipationStatus.annotations({
    description: "The mailbox's answer: needs_action until it answers (POST /emails/{email_id}/invitation/respond); its own meetings: accepted"
  }),
  busy: Schema.Boolean.annotations({
    description: "Whether it takes the mailbox's time: not cancelled, not declined, not marked free (TRANSP:TRANSPARENT)"
  }),
  organizer: Schema.NullOr(Party)
}).annotations({ identifier: "ScheduleItem" })
export type ScheduleItem = typeof ScheduleItem.Type

export const ScheduleMeta = Schema.Struct({
  from: Schema.String,
  to: Schema.String,
  count: Schema.Number,
  hasMore: Schema.Boolean.annotations({ description: "More occurrences than limit: ask again from the last one's start" })
}).annotations({ identifier: "ScheduleMeta" })
export type ScheduleMeta = typeof ScheduleMeta.Type

/** Free slots in one answer unless `limit` says otherwise. */
export const DEFAULT_SLOTS = 50
/** The longest range availability is asked for at once. */
export const MAX_AVAILABILITY_DAYS = 62

const Clock = /([01]\d|2[0-3]):[0-5]\d|24:00/.source

export const AvailabilityParams = Schema.Struct({
  ...rangeFields(MAX_AVAILABILITY_DAYS),
  duration_minutes: Schema.optional(IntegerParam(5, 1440).annotations({ description: "How long a slot is (5-1440 minutes, default 30)" })),
  step_minutes: Schema.optional(IntegerParam(5, 1440).annotations({
    description: "How far apart slots start, from the day's opening (5-1440 minutes, default 30)"
  })),
  time_zone: Schema.optional(Schema.String.pipe(rule(isTimeZone, { message: () => "must be an IANA time zone such as Europe/Paris" }))
    .annotations({ description: "The zone the working hours are in (IANA, default UTC); slots are answered with its offset" })),
  hours: Schema.optional(Schema.String.pipe(
    rule((value) => {
      const [opens, closes] = value.split("-")
      return new RegExp(`^(?:${Clock})-(?:${Clock})$`).test(value) && opens! < closes! ||
        "must be an opening and a closing time such as 09:00-17:00, the first earlier"
    })
  ).annotations({ description: "Working hours, local time: HH:MM-HH:MM (default 09:00-17:00)" })),
  weekdays: Schema.optional(Schema.String.pipe(
    rule((value) => /^[1-7](,[1-7])*$/.test(value) || "must be weekdays 1 (Monday) to 7 (Sunday), separated by commas")
  ).annotations({ description: "The working days, one string of day numbers separated by commas, 1 (Monday) to 7 (Sunday): default \"1,2,3,4,5\"" })),
  limit: Schema.optional(IntegerParam(1, MAX_ITEMS).annotations({ description: `At most this many slots (1-${MAX_ITEMS}, default ${DEFAULT_SLOTS})` }))
}).annotations({ parseOptions: { errors: "all" } })
export type AvailabilityParams = typeof AvailabilityParams.Type

export const SharedAvailabilityParams = Schema.Struct({
  ...mailboxIdsField("that must all be free"),
  ...AvailabilityParams.fields
}).annotations({ parseOptions: { errors: "all" } })
export type SharedAvailabilityParams = typeof SharedAvailabilityParams.Type

export const FreeSlot = Schema.Struct({
  start: Schema.String.annotations({ description: "RFC 3339 with the time zone's offset, e.g. 2026-12-03T15:00:00+01:00" }),
  end: Schema.String
}).annotations({ identifier: "FreeSlot" })
export type FreeSlot = typeof FreeSlot.Type

export const AvailabilityMeta = Schema.Struct({
  from: Schema.String,
  to: Schema.String,
  time_zone: Schema.String,
  count: Schema.Number,
  hasMore: Schema.Boolean.annotations({ description: "More slots than limit: ask again from the last one's start" })
}).annotations({ identifier: "AvailabilityMeta" })
export type AvailabilityMeta = typeof AvailabilityMeta.Type

/** How long before an occurrence starts its `schedule.reminder` is sent. */
export const REMINDER_MINUTES = 10

/** `schedule.reminder`: an occurrence on a mailbox's schedule starts soon. */
export const ScheduleReminderData = Schema.Struct({
  ...ScheduleItem.fields,
  starts_in_minutes: Schema.Number.annotations({ description: `Whole minutes until it starts (0-${REMINDER_MINUTES})` })
}).annotations({ identifier: "ScheduleReminderData" })
export type ScheduleReminderData = typeof ScheduleReminderData.Type

/** `invitation.received`: an invitation, its update or its cancellation changed a mailbox's schedule. */
export const InvitationReceivedData = Schema.Struct({
  mailbox_id: Schema.String,
  email_id: Schema.String.annotations({ description: "The email that brought it (GET /emails/{email_id}/invitation reads it; respond answers it)" }),
  uid: Schema.String,
  change: Schema.Literal("new", "updated", "cancelled").annotations({
    description: "new: on the schedule now; updated: a new revision (a new time asks for an answer again) or one occurrence changed; " +
      "cancelled: called off, whole or one occurrence"
  }),
  recurrence_id: Schema.NullOr(Schema.String).annotations({
    description: "The one occurrence the change is about (when it was to start, as the schedule's items name it); null: the whole event"
  }),
  summary: Schema.NullOr(Schema.String),
  start: Schema.NullOr(EventTime).annotations({ description: "When it (first) starts, as the schedule now has it" }),
  end: Schema.NullOr(EventTime),
  recurrence: Schema.NullOr(Schema.String),
  organizer: Schema.NullOr(Party),
  response: ParticipationStatus.annotations({ description: "The mailbox's answer as it stands: needs_action asks for one" })
}).annotations({ identifier: "InvitationReceivedData" })
export type InvitationReceivedData = typeof InvitationReceivedData.Type
