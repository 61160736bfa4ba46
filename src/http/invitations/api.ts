/**
 * Calendar invitations (services/invitations), for API keys under /v1/api and for dashboard sessions
 * under /api:
 *
 *   /emails/{email_id}/invitation            what the email's invitation says, and the mailbox's answer
 *   /emails/{email_id}/invitation/respond    accept, decline or tentatively accept it
 */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import {
  IdempotencyKeyReused,
  InvitationNotRespondable,
  InvitationUnreadable,
  NoInvitation,
  NotFound,
  ValidationError
} from "../../../services/errors.ts"
import { Invitation, RespondInput } from "../../../services/invitations/schemas.ts"
import { SendAccepted } from "../../../services/outbound/schemas.ts"
import { Ok } from "../envelope.ts"
import { envelope } from "../errors.ts"
import { refusingSends } from "../outbound/refusals.ts"
import { IdempotencyHeaders } from "../outbound/api.ts"
import { ApiAuthentication, SessionAuthentication } from "../security.ts"

const EmailPath = Schema.Struct({ emailId: Schema.String })

const invitationEndpoints = <const Name extends string>(name: Name) =>
  HttpApiGroup.make(name)
    .add(
      HttpApiEndpoint.get("get", "/emails/:emailId/invitation")
        .setPath(EmailPath)
        .addSuccess(Ok(Invitation))
        .addError(envelope(NotFound))
        .addError(envelope(NoInvitation))
        .addError(envelope(InvitationUnreadable))
        .annotateContext(OpenApi.annotations({
          summary: "Read an email's calendar invitation",
          description: "The event its calendar part (text/calendar, or an .ics file) describes: what, when (in UTC, with the zone it names), " +
            "where, who organizes and who is invited with their answers so far, and whether and how this mailbox answered. " +
            "404 NO_INVITATION when the email carries none."
        }))
    )
    .add(
      HttpApiEndpoint.post("respond", "/emails/:emailId/invitation/respond")
        .setPath(EmailPath)
        .setPayload(RespondInput)
        .setHeaders(IdempotencyHeaders)
        .addSuccess(Ok(SendAccepted), { status: 202 })
        .addError(envelope(ValidationError))
        .addError(envelope(NotFound))
        .addError(envelope(NoInvitation))
        .addError(envelope(InvitationUnreadable))
        .addError(envelope(InvitationNotRespondable))
        .pipe(refusingSends)
        .addError(envelope(IdempotencyKeyReused))
        .annotateContext(OpenApi.annotations({
          summary: "Answer an email's calendar invitation",
          description: "Sends the organizer an iTIP REPLY (accepted, declined or tentative, with an optional comment) from the mailbox " +
            "holding the invitation, as a reply to it: calendars (Google, Outlook, Apple) update the attendee's answer. Answering again " +
            "sends a new REPLY. 202 once it is stored and queued, as a send; GET …/invitation then shows the answer."
        }))
    )

export class InvitationsGroup extends invitationEndpoints("invitations")
  .middleware(ApiAuthentication)
  .prefix("/v1/api")
  .annotate(OpenApi.Title, "Invitations")
  .annotate(OpenApi.Description, "Calendar invitations received by mail: read them, and accept or decline")
{}

export class DashboardInvitationsGroup extends invitationEndpoints("dashboardInvitations")
  .middleware(SessionAuthentication)
  .prefix("/api")
  .annotate(OpenApi.Title, "Invitations (dashboard)")
  .annotate(OpenApi.Description, "The invitation routes for dashboard sessions")
{}
