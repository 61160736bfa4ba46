/**
 * The HTTP contract: every feature's groups (each in `<feature>/api.ts`, its handlers beside it in
 * `<feature>/http.ts`), assembled with the errors any route can answer; each endpoint declares the
 * errors of its own. The server (server.ts), the
 * OpenAPI document and the typed clients all come from this one definition.
 */
import { HttpApi, OpenApi } from "@effect/platform"
import { ApiKeysGroup, DashboardApiKeysGroup } from "./api-keys/api.ts"
import { AuthGroup } from "./auth/api.ts"
import { BillingGroup, BillingWebhookGroup, DashboardBillingGroup } from "./billing/api.ts"
import { DashboardDomainsGroup, DomainListGroup, DomainsGroup } from "./domains/api.ts"
import { DashboardEmailsGroup, EmailsGroup } from "./emails/api.ts"
import { DashboardEventsGroup, EventsGroup } from "./events/api.ts"
import {
  BadRequest,
  InternalError,
  PayloadTooLarge,
  ServiceUnavailable,
  UnsupportedMediaType,
  ValidationError
} from "../../services/errors.ts"
import { envelope } from "./errors.ts"
import { EventPayloads } from "../../services/webhooks/schemas.ts"
import { DashboardForwardingGroup, ForwardingGroup } from "./forwarding/api.ts"
import { AutoRepliesGroup, DashboardAutoRepliesGroup } from "./auto-replies/api.ts"
import { DashboardFiltersGroup, FiltersGroup } from "./filters/api.ts"
import { HealthGroup } from "./health/api.ts"
import { DashboardInvitationsGroup, InvitationsGroup } from "./invitations/api.ts"
import { DashboardMeetingsGroup, MeetingsGroup } from "./meetings/api.ts"
import { DashboardScheduleGroup, ScheduleGroup } from "./schedule/api.ts"
import { DashboardMailboxesGroup, MailboxesGroup } from "./mailboxes/api.ts"
import { publish } from "./openapi.ts"
import { DashboardOutboundGroup, OutboundGroup } from "./outbound/api.ts"
import { DashboardSearchGroup, SearchGroup } from "./search/api.ts"
import { DashboardSenderListsGroup, SenderListsGroup } from "./sender-lists/api.ts"
import { DashboardStatsGroup, StatsGroup } from "./stats/api.ts"
import { DashboardWebhooksGroup, WebhooksGroup } from "./webhooks/api.ts"

/** The groups, before anything is said about the whole: what publish() reads each route's credentials from. */
const Routes = HttpApi.make("mailroom")
  .add(HealthGroup)
  .add(AuthGroup)
  .add(ApiKeysGroup)
  .add(DashboardApiKeysGroup)
  .add(BillingGroup)
  .add(DashboardBillingGroup)
  .add(BillingWebhookGroup)
  .add(MailboxesGroup)
  .add(DashboardMailboxesGroup)
  .add(EmailsGroup)
  .add(DashboardEmailsGroup)
  .add(OutboundGroup)
  .add(DashboardOutboundGroup)
  .add(InvitationsGroup)
  .add(DashboardInvitationsGroup)
  .add(MeetingsGroup)
  .add(DashboardMeetingsGroup)
  .add(ScheduleGroup)
  .add(DashboardScheduleGroup)
  .add(WebhooksGroup)
  .add(DashboardWebhooksGroup)
  .add(SenderListsGroup)
  .add(DashboardSenderListsGroup)
  .add(ForwardingGroup)
  .add(DashboardForwardingGroup)
  .add(AutoRepliesGroup)
  .add(DashboardAutoRepliesGroup)
  .add(FiltersGroup)
  .add(DashboardFiltersGroup)
  .add(DomainsGroup)
  .add(DashboardDomainsGroup)
  .add(DomainListGroup)
  .add(SearchGroup)
  .add(DashboardSearchGroup)
  .add(StatsGroup)
  .add(DashboardStatsGroup)
  .add(EventsGroup)
  .add(DashboardEventsGroup)

export class MailroomApi extends Routes
  // What the edge (server.ts, input-rules.ts) can answer on any route, before or around its handler.
  .addError(envelope(ValidationError))
  .addError(envelope(BadRequest))
  .addError(envelope(PayloadTooLarge))
  .addError(envelope(UnsupportedMediaType))
  .addError(envelope(InternalError))
  .addError(envelope(ServiceUnavailable))
  .annotate(OpenApi.Title, "Mailroom")
  .annotate(OpenApi.Version, "1.0.0")
  .annotate(OpenApi.Description, "Email for software agents. Every response uses the { success, data, meta } / { success, error } envelope.")
  .annotate(OpenApi.Servers, [{ url: "/", description: "This server" }])
  .annotate(HttpApi.AdditionalSchemas, Object.values(EventPayloads))
  .annotate(OpenApi.Transform, publish(Routes))
{}
