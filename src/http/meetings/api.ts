/**
 * Meetings a mailbox organizes (services/meetings), for API keys under /v1/api and for dashboard
 * sessions under /api:
 *
 *   /mailboxes/{mailbox_id}/meetings      schedule one (the invitations sent), list them
 *   /meetings/{meeting_id}                read one with its attendees' answers, change it (the update sent)
 *   /meetings/{meeting_id}/cancel         call it off (the cancellation sent)
 */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { Conflict, NotFound, PayloadTooLarge, ValidationError } from "../../../services/errors.ts"
import { ListMeta } from "../../../services/listing.ts"
import { Meeting, MeetingInput, MeetingListParams, MeetingUpdate } from "../../../services/meetings/schemas.ts"
import { Ok, OkWithMeta } from "../envelope.ts"
import { envelope } from "../errors.ts"
import { refusingSends } from "../outbound/refusals.ts"
import { ApiAuthentication, SessionAuthentication } from "../security.ts"

const MailboxPath = Schema.Struct({ mailboxId: Schema.String })
const MeetingPath = Schema.Struct({ meetingId: Schema.String })

const SENT = "Each message is sent as the mailbox's mail (the plan's sends, suppressions and DKIM apply, and its refusals)."

const meetingEndpoints = <const Name extends string>(name: Name) =>
  HttpApiGroup.make(name)
    .add(
      HttpApiEndpoint.post("create", "/mailboxes/:mailboxId/meetings")
        .setPath(MailboxPath)
        .setPayload(MeetingInput)
        .addSuccess(Ok(Meeting), { status: 201 })
        .addError(envelope(ValidationError))
        .addError(envelope(NotFound))
        .pipe(refusingSends)
        .addError(envelope(PayloadTooLarge))
        .annotateContext(OpenApi.annotations({
        summary: "Schedule a meeting",
        description: "The mailbox organizes it: every attendee gets an invitation their calendar shows with Accept and Decline " +
          "(an iTIP REQUEST: Google, Outlook and Apple read it), and their answers, which come back by mail, show on the meeting " +
          `(\`attendees[].status\`). Times are kept and sent in UTC; a whole-day meeting by its dates. ${SENT}`
      }))
    )
    .add(
      HttpApiEndpoint.get("list", "/mailboxes/:mailboxId/meetings")
        .setPath(MailboxPath)
        .setUrlParams(MeetingListParams)
        .addSuccess(OkWithMeta(Schema.Array(Meeting), ListMeta))
        .addError(envelope(ValidationError))
        .addError(envelope(NotFound))
        .annotateContext(OpenApi.annotations({
          summary: "List the mailbox's meetings",
          description: "Newest first (sort created_at or start, asc or desc; limit 1-100, default 20; offset; status: confirmed or cancelled)"
        }))
    )
    .add(
      HttpApiEndpoint.get("get", "/meetings/:meetingId")
        .setPath(MeetingPath)
        .addSuccess(Ok(Meeting))
        .addError(envelope(NotFound))
        .annotateContext(OpenApi.annotations({ summary: "Get a meeting", description: "With each attendee's answer so far" }))
    )
    .add(
      HttpApiEndpoint.patch("update", "/meetings/:meetingId")
        .setPath(MeetingPath)
        .setPayload(MeetingUpdate)
        .addSuccess(Ok(Meeting))
        .addError(envelope(ValidationError))
        .addError(envelope(NotFound))
        .addError(envelope(Conflict))
        .pipe(refusingSends)
        .addError(envelope(PayloadTooLarge))
        .annotateContext(OpenApi.annotations({
          summary: "Change a meeting",
          description: "The fields given (attendees: the whole list). The attendees get the update (the next sequence); a new time " +
            "or repeat rule asks everyone to answer again; attendees taken off get a cancellation. A change that changes nothing " +
            `sends nothing. 409 CONFLICT once it is cancelled. ${SENT}`
        }))
    )
    .add(
      HttpApiEndpoint.post("cancel", "/meetings/:meetingId/cancel")
        .setPath(MeetingPath)
        .addSuccess(Ok(Meeting))
        .addError(envelope(NotFound))
        .addError(envelope(Conflict))
        .pipe(refusingSends)
        .addError(envelope(PayloadTooLarge))
        .annotateContext(OpenApi.annotations({
          summary: "Cancel a meeting",
          description: `Every attendee gets the cancellation (their calendar removes it); the meeting is kept, status cancelled. 409 CONFLICT when it already is. ${SENT}`
        }))
    )

export class MeetingsGroup extends meetingEndpoints("meetings")
  .middleware(ApiAuthentication)
  .prefix("/v1/api")
  .annotate(OpenApi.Title, "Meetings")
  .annotate(OpenApi.Description, "Meetings a mailbox organizes: invitations sent, answers collected, updates and cancellations")
{}

export class DashboardMeetingsGroup extends meetingEndpoints("dashboardMeetings")
  .middleware(SessionAuthentication)
  .prefix("/api")
  .annotate(OpenApi.Title, "Meetings (dashboard)")
  .annotate(OpenApi.Description, "The meeting routes for dashboard sessions")
{}
