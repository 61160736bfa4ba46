/**
 * The HTTP contract: every feature's groups (each in `<feature>/api.ts`, its handlers beside it in
 * `<feature>/http.ts`), assembled with the errors any route can answer. The server (server.ts), the
 * OpenAPI document and the typed clients all come from this one definition.
 */
import { HttpApi, OpenApi } from "@effect/platform"
import { ApiKeysGroup } from "./api-keys/api.ts"
import { AuthGroup } from "./auth/api.ts"
import { BillingGroup, BillingWebhookGroup } from "./billing/api.ts"
import { DashboardDomainsGroup, DomainListGroup, DomainsGroup } from "./domains/api.ts"
import { EmailsGroup } from "./emails/api.ts"
import {
  BadRequestError,
  InternalErrorError,
  NotFoundError,
  PayloadTooLargeError,
  UnavailableError,
  UnsupportedMediaTypeError,
  ValidationFailed
} from "./errors.ts"
import { HealthGroup } from "./health/api.ts"
import { DashboardMailboxesGroup, MailboxesGroup } from "./mailboxes/api.ts"
import { SearchGroup } from "./search/api.ts"
import { WebhooksGroup } from "./webhooks/api.ts"

export class MailroomApi extends HttpApi.make("mailroom")
  .add(HealthGroup)
  .add(AuthGroup)
  .add(ApiKeysGroup)
  .add(BillingGroup)
  .add(BillingWebhookGroup)
  .add(MailboxesGroup)
  .add(DashboardMailboxesGroup)
  .add(EmailsGroup)
  .add(WebhooksGroup)
  .add(DomainsGroup)
  .add(DashboardDomainsGroup)
  .add(DomainListGroup)
  .add(SearchGroup)
  .addError(ValidationFailed)
  .addError(BadRequestError)
  .addError(NotFoundError)
  .addError(PayloadTooLargeError)
  .addError(UnsupportedMediaTypeError)
  .addError(InternalErrorError)
  .addError(UnavailableError)
  .annotate(OpenApi.Title, "Mailroom")
  .annotate(OpenApi.Version, "1.0.0")
  .annotate(OpenApi.Description, "Email for software agents. Every response uses the { success, data, meta } / { success, error } envelope.")
{}
