/**
 * A mailbox's schedule (services/schedule), for API keys under /v1/api and for dashboard sessions
 * under /api:
 *
 *   /mailboxes/{mailbox_id}/schedule      the occurrences of its meetings and invitations in a range
 *   /mailboxes/{mailbox_id}/availability  the times it is free, within working hours
 *   /schedule?mailbox_ids=…               several mailboxes' schedules, merged
 *   /availability?mailbox_ids=…           the times several mailboxes are all free (to meet)
 */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { NotFound, ValidationError } from "../../../services/errors.ts"
import {
  AvailabilityMeta,
  AvailabilityParams,
  FreeSlot,
  MAX_AVAILABILITY_DAYS,
  MAX_DAYS,
  ScheduleItem,
  ScheduleMeta,
  ScheduleParams,
  SharedAvailabilityParams,
  SharedScheduleParams
} from "../../../services/schedule/schemas.ts"
import { OkWithMeta } from "../envelope.ts"
import { envelope } from "../errors.ts"
import { ApiAuthentication, SessionAuthentication } from "../security.ts"

const MailboxPath = Schema.Struct({ mailboxId: Schema.String })

const scheduleEndpoints = <const Name extends string>(name: Name) =>
  HttpApiGroup.make(name).add(
    HttpApiEndpoint.get("get", "/mailboxes/:mailboxId/schedule")
      .setPath(MailboxPath)
      .setUrlParams(ScheduleParams)
      .addSuccess(OkWithMeta(Schema.Array(ScheduleItem), ScheduleMeta))
      .addError(envelope(ValidationError))
      .addError(envelope(NotFound))
      .annotateContext(OpenApi.annotations({
        summary: "The mailbox's schedule",
        description: "Every occurrence between from and to (default: the week from now; at most " + MAX_DAYS + " days) of the meetings " +
          "the mailbox organizes and of the invitations it received, in order of start: a repeating event once per occurrence at its " +
          "local time, with the occurrences its organizer moved or called off as they are now. `busy` says which take its time. " +
          "Invitations arrive on it as they are received (not mail labelled spam or blocked, until it is answered), with their updates " +
          "and cancellations."
      }))
  ).add(
    HttpApiEndpoint.get("availability", "/mailboxes/:mailboxId/availability")
      .setPath(MailboxPath)
      .setUrlParams(AvailabilityParams)
      .addSuccess(OkWithMeta(Schema.Array(FreeSlot), AvailabilityMeta))
      .addError(envelope(ValidationError))
      .addError(envelope(NotFound))
      .annotateContext(OpenApi.annotations({
        summary: "When the mailbox is free",
        description: "Slots of duration_minutes (default 30) between from and to (default the week from now; at most " +
          MAX_AVAILABILITY_DAYS + " days) within working hours (hours, default 09:00-17:00, on weekdays, default Monday to Friday, " +
          "in time_zone, default UTC) that none of its busy occurrences overlaps, starting at a day's opening and every step_minutes " +
          "(default 30) after; answered with the zone's offset, soonest first. What to propose when asked for a time."
      }))
  ).add(
    HttpApiEndpoint.get("shared", "/schedule")
      .setUrlParams(SharedScheduleParams)
      .addSuccess(OkWithMeta(Schema.Array(ScheduleItem), ScheduleMeta))
      .addError(envelope(ValidationError))
      .addError(envelope(NotFound))
      .annotateContext(OpenApi.annotations({
        summary: "Several mailboxes' schedules, merged",
        description: "The schedules of the mailboxes mailbox_ids names, as one: every occurrence in the range, in order of start, each " +
          "with the mailbox it is on (a meeting between two of them shows once for each). 404 names the first that is not the account's."
      }))
  ).add(
    HttpApiEndpoint.get("sharedAvailability", "/availability")
      .setUrlParams(SharedAvailabilityParams)
      .addSuccess(OkWithMeta(Schema.Array(FreeSlot), AvailabilityMeta))
      .addError(envelope(ValidationError))
      .addError(envelope(NotFound))
      .annotateContext(OpenApi.annotations({
        summary: "When several mailboxes are all free",
        description: "Free slots, as a mailbox's availability answers them, that none of the busy occurrences of any mailbox " +
          "mailbox_ids names overlaps: a time they can all make, to propose for a meeting among them. 404 names the first that is " +
          "not the account's."
      }))
  )

export class ScheduleGroup extends scheduleEndpoints("schedule")
  .middleware(ApiAuthentication)
  .prefix("/v1/api")
  .annotate(OpenApi.Title, "Schedule")
  .annotate(OpenApi.Description, "A mailbox's calendar: what it attends and what it hosts, and when it is free")
{}

export class DashboardScheduleGroup extends scheduleEndpoints("dashboardSchedule")
  .middleware(SessionAuthentication)
  .prefix("/api")
  .annotate(OpenApi.Title, "Schedule (dashboard)")
  .annotate(OpenApi.Description, "The schedule routes for dashboard sessions")
{}
