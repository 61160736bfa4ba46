/**
 * The HTTP contract: every route, its payloads, success envelopes and errors. The server
 * (src/http/server.ts), the OpenAPI document and the typed test client all come from this one
 * definition.
 */
import { HttpApi, HttpApiEndpoint, HttpApiGroup, HttpApiMiddleware, HttpApiSchema, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { CurrentPrincipal } from "../../services/accounts/principal.ts"
import {
  LoginInput,
  RefreshedCredentials,
  RefreshInput,
  RegisteredUser,
  RegisterInput,
  SessionCredentials
} from "../../services/accounts/schemas.ts"
import { Subscription, Usage } from "../../services/billing/billing.ts"
import {
  CreatedDomain,
  CreateDomainInput,
  DeletedDomain,
  Domain,
  DomainListMeta,
  MigrateInput,
  Migration,
  PagedDomainListMeta
} from "../../services/domains/schemas.ts"
import { Details } from "../../services/errors.ts"
import { keySortFields } from "../../services/keys/api-keys.ts"
import { ApiKey, CreatedApiKey, CreateKeyInput, RevokedApiKey } from "../../services/keys/schemas.ts"
import { Limit, ListMeta, Offset, SortParam } from "../../services/listing.ts"
import {
  AddressBody,
  JsonBody,
  CheckEmailParams,
  DeleteBody,
  DeletedMailbox,
  Mailbox,
  RenamedMailbox
} from "../../services/mailboxes/schemas.ts"
import { Email, EmailSummary, emailSortFields, Thread } from "../../services/mail/schemas.ts"
import { SearchInput, SearchMeta, SearchResult, SuggestionsParams } from "../../services/search/schemas.ts"
import { Plan } from "../../services/plans/plans.ts"
import {
  CreatedWebhook,
  CreateWebhookInput,
  DeletedWebhook,
  Delivery,
  UpdatedWebhook,
  UpdateWebhookInput,
  Webhook,
  WebhookListItem
} from "../../services/webhooks/schemas.ts"
import { webhookSortFields } from "../../services/webhooks/webhooks.ts"
import {
  BadRequestError,
  ConflictError,
  ForbiddenError,
  InternalErrorError,
  NotFoundError,
  PayloadTooLargeError,
  RateLimitedError,
  UnauthorizedError,
  UnavailableError,
  UnprocessableError,
  UnsupportedMediaTypeError,
  ValidationFailed
} from "./errors.ts"

/** `{ success: true, data }` and, when given, `meta`. */
export const Ok = <D extends Schema.Schema.Any>(data: D, identifier?: string) =>
  Schema.Struct({ success: Schema.Literal(true), data }).annotations(identifier ? { identifier } : {})

export const OkWithMeta = <D extends Schema.Schema.Any, M extends Schema.Schema.Any>(data: D, meta: M, identifier?: string) =>
  Schema.Struct({ success: Schema.Literal(true), data, meta }).annotations(identifier ? { identifier } : {})

const Message = Schema.Struct({ message: Schema.String })

// ---------------------------------------------------------------------------------------------
// Middleware

/** `{base_url}` routes: `X-API-Key`, or `Authorization: Bearer` with an API key or access token. */
export class ApiAuthentication extends HttpApiMiddleware.Tag<ApiAuthentication>()("ApiAuthentication", {
  provides: CurrentPrincipal,
  failure: Schema.Union(UnauthorizedError, RateLimitedError, UnavailableError, InternalErrorError)
}) {}

/** Dashboard routes (`/api/*`): the session cookie set by login, or `Authorization: Bearer <access token>`. */
export class SessionAuthentication extends HttpApiMiddleware.Tag<SessionAuthentication>()("SessionAuthentication", {
  provides: CurrentPrincipal,
  failure: Schema.Union(UnauthorizedError, ForbiddenError, RateLimitedError, UnavailableError, InternalErrorError)
}) {}

/** Routes open to anyone are limited per client address. */
export class ClientRateLimit extends HttpApiMiddleware.Tag<ClientRateLimit>()("ClientRateLimit", {
  failure: Schema.Union(RateLimitedError, UnavailableError, InternalErrorError)
}) {}

// ---------------------------------------------------------------------------------------------
// Health and docs

const Health = Schema.Struct({
  status: Schema.Literal("ok"),
  database: Schema.optional(Schema.Literal("ok")),
  bus: Schema.optional(Schema.Literal("ok"))
})

export class HealthGroup extends HttpApiGroup.make("health")
  .add(HttpApiEndpoint.get("healthz", "/healthz").addSuccess(Ok(Health)))
  .add(HttpApiEndpoint.get("readyz", "/readyz").addSuccess(Ok(Health)).addError(UnavailableError))
  .annotate(OpenApi.Description, "Liveness (the process serves) and readiness (database and bus reachable)")
{}

// ---------------------------------------------------------------------------------------------
// User authentication (on {app_url})

export class AuthGroup extends HttpApiGroup.make("auth")
  .add(
    HttpApiEndpoint.post("register", "/register")
      .setPayload(RegisterInput)
      .addSuccess(Ok(RegisteredUser), { status: 201 })
      .addError(ConflictError)
  )
  .add(
    HttpApiEndpoint.post("login", "/login")
      .setPayload(LoginInput)
      .addSuccess(Ok(SessionCredentials))
      .addError(UnauthorizedError)
  )
  .add(
    HttpApiEndpoint.post("refresh", "/refresh")
      .setPayload(RefreshInput)
      .addSuccess(Ok(RefreshedCredentials))
      .addError(UnauthorizedError)
  )
  .middleware(ClientRateLimit)
  .add(
    HttpApiEndpoint.post("logout", "/logout")
      .addSuccess(Ok(Message))
      .middleware(SessionAuthentication)
  )
  .prefix("/api/auth")
  .annotate(OpenApi.Title, "User authentication")
{}

// ---------------------------------------------------------------------------------------------
// API keys (on {base_url})

const ListParams = <F extends string>(fields: ReadonlyArray<F>) =>
  Schema.Struct({
    limit: Schema.optional(Limit),
    offset: Schema.optional(Offset),
    sort: Schema.optional(SortParam(fields))
  }).annotations({ parseOptions: { errors: "all" } })

export class ApiKeysGroup extends HttpApiGroup.make("apiKeys")
  .add(
    HttpApiEndpoint.get("list", "/api-keys")
      .setUrlParams(ListParams(keySortFields))
      .addSuccess(OkWithMeta(Schema.Array(ApiKey), ListMeta))
  )
  .add(
    HttpApiEndpoint.post("create", "/api-keys")
      .setPayload(CreateKeyInput)
      .addSuccess(OkWithMeta(CreatedApiKey, Schema.Struct({ warning: Schema.String })), { status: 201 })
  )
  .add(
    HttpApiEndpoint.del("revoke", "/api-keys/:id")
      .setPath(Schema.Struct({ id: Schema.String }))
      .addSuccess(Ok(RevokedApiKey))
      .addError(NotFoundError)
  )
  .middleware(ApiAuthentication)
  .prefix("/v1")
  .annotate(OpenApi.Title, "API keys")
{}

// ---------------------------------------------------------------------------------------------
// Billing (on {base_url})

const HttpUrl = Schema.String.pipe(
  Schema.filter((value) => {
    try {
      const url = new URL(value)
      return url.protocol === "https:" || url.protocol === "http:" ? undefined : "must be an http(s) URL"
    } catch {
      return "must be a valid URL"
    }
  })
)

export const CheckoutInput = Schema.Struct({
  plan: Plan,
  successUrl: HttpUrl,
  cancelUrl: HttpUrl
}).annotations({ identifier: "CheckoutInput", parseOptions: { errors: "all" } })

export const PortalInput = Schema.Struct({ returnUrl: HttpUrl }).annotations({
  identifier: "PortalInput",
  parseOptions: { errors: "all" }
})


const SessionUrl = Schema.Struct({ url: Schema.String.annotations({ description: "Hosted page to send the user to" }) })

export class BillingGroup extends HttpApiGroup.make("billing")
  .add(HttpApiEndpoint.get("subscription", "/billing/subscription").addSuccess(Ok(Subscription)))
  .add(HttpApiEndpoint.get("usage", "/billing/usage").addSuccess(Ok(Usage)))
  .add(
    HttpApiEndpoint.post("checkout", "/billing/checkout")
      .setPayload(CheckoutInput)
      .addSuccess(Ok(SessionUrl))
      .addError(ConflictError)
  )
  .add(
    HttpApiEndpoint.post("portal", "/billing/portal")
      .setPayload(PortalInput)
      .addSuccess(Ok(SessionUrl))
  )
  .middleware(ApiAuthentication)
  .prefix("/v1")
  .annotate(OpenApi.Title, "Billing")
{}

/** Stripe calls this; it proves itself with `Stripe-Signature`, not a key. */
export class BillingWebhookGroup extends HttpApiGroup.make("billingWebhook")
  .add(
    HttpApiEndpoint.post("webhook", "/billing/webhook")
      .addSuccess(Ok(Schema.Struct({ received: Schema.Literal(true) })))
      .annotate(
        OpenApi.Description,
        "Stripe's events (signed with STRIPE_WEBHOOK_SECRET): checkout.session.completed, customer.subscription.*, invoice.payment_failed. A bad signature is 400 INVALID_SIGNATURE; 404 without Stripe configured"
      )
  )
  .prefix("/v1")
  .annotate(OpenApi.Title, "Billing webhook")
{}

// ---------------------------------------------------------------------------------------------
// Mailboxes (on {app_url}): the same routes for API keys under /v1/api and for dashboard sessions
// under /api. Some answers carry `mailbox` / `mailboxes` next to `success` instead of `data`.
// Bodies accept any JSON: the handlers decode them, so that SPEC's codes (MISSING_FIELDS,
// LOCAL_TOO_SHORT, ...) come from the rules and a wrong shape is reported as each surface requires.

const MailboxCreated = Schema.Struct({ success: Schema.Literal(true), mailbox: Mailbox }).annotations({ identifier: "MailboxCreated" })
const MailboxList = Schema.Struct({ success: Schema.Literal(true), mailboxes: Schema.Array(Mailbox) }).annotations({
  identifier: "MailboxList"
})

/** check-email: a rule failure (422 or 409 codes) is a 200 with `valid: false`. */
const EmailCheckResult = Schema.Union(
  Schema.Struct({ success: Schema.Literal(true), valid: Schema.Literal(true), email_address: Schema.String }),
  Schema.Struct({
    success: Schema.Literal(true),
    valid: Schema.Literal(false),
    code: Schema.String,
    message: Schema.String,
    details: Details
  })
).annotations({ identifier: "EmailCheckResult" })

const MailboxPath = Schema.Struct({ mailboxId: Schema.String })

const mailboxEndpoints = <const Name extends string>(name: Name) =>
  HttpApiGroup.make(name)
    .add(HttpApiEndpoint.get("list", "/mailboxes").addSuccess(MailboxList))
    .add(
      HttpApiEndpoint.post("create", "/mailboxes")
        .setPayload(AddressBody)
        .addSuccess(MailboxCreated, { status: 201 })
        .addError(ForbiddenError)
        .addError(ConflictError)
        .addError(UnprocessableError)
    )
    .add(
      HttpApiEndpoint.get("checkEmail", "/mailboxes/check-email")
        .setUrlParams(CheckEmailParams)
        .addSuccess(EmailCheckResult)
    )
    .add(
      HttpApiEndpoint.patch("rename", "/mailboxes/:mailboxId")
        .setPath(MailboxPath)
        .setPayload(AddressBody)
        .addSuccess(Ok(RenamedMailbox))
        .addError(ConflictError)
        .addError(UnprocessableError)
    )
    .add(
      HttpApiEndpoint.del("remove", "/mailboxes/:mailboxId")
        .setPath(MailboxPath)
        .setPayload(DeleteBody)
        .addSuccess(Ok(DeletedMailbox))
    )

export class MailboxesGroup extends mailboxEndpoints("mailboxes")
  .middleware(ApiAuthentication)
  .prefix("/v1/api")
  .annotate(OpenApi.Title, "Mailboxes")
{}

export class DashboardMailboxesGroup extends mailboxEndpoints("dashboardMailboxes")
  .middleware(SessionAuthentication)
  .prefix("/api")
  .annotate(OpenApi.Title, "Mailboxes (dashboard session)")
  .annotate(OpenApi.Description, "As /v1/api/mailboxes; a body of the wrong shape gives VALIDATION_ERROR with details.field_errors")
{}

// ---------------------------------------------------------------------------------------------
// Reading mail (DESIGN.md §4): a mailbox's emails, one email, its raw MIME, an attachment, a thread.

const MailboxEmailsPath = Schema.Struct({ mailboxId: Schema.String })
const EmailPath = Schema.Struct({ emailId: Schema.String })
const AttachmentPath = Schema.Struct({ emailId: Schema.String, attachmentId: Schema.String })
const ThreadPath = Schema.Struct({ threadId: Schema.String })

export class EmailsGroup extends HttpApiGroup.make("emails")
  .add(
    HttpApiEndpoint.get("list", "/mailboxes/:mailboxId/emails")
      .setPath(MailboxEmailsPath)
      .setUrlParams(ListParams(emailSortFields))
      .addSuccess(OkWithMeta(Schema.Array(EmailSummary), ListMeta))
      .annotate(OpenApi.Description, "Newest first (sort received_at:desc) unless `sort` says otherwise")
  )
  .add(HttpApiEndpoint.get("get", "/emails/:emailId").setPath(EmailPath).addSuccess(Ok(Email)))
  .add(
    HttpApiEndpoint.get("raw", "/emails/:emailId/raw")
      .setPath(EmailPath)
      .addSuccess(HttpApiSchema.Uint8Array({ contentType: "message/rfc822" }))
      .annotate(OpenApi.Description, "The message exactly as it was received")
  )
  .add(
    HttpApiEndpoint.get("attachment", "/emails/:emailId/attachments/:attachmentId")
      .setPath(AttachmentPath)
      .addSuccess(HttpApiSchema.Uint8Array({ contentType: "application/octet-stream" }))
      .annotate(OpenApi.Description, "The decoded bytes, served with the attachment's own content type")
  )
  .add(HttpApiEndpoint.get("thread", "/threads/:threadId").setPath(ThreadPath).addSuccess(Ok(Thread)))
  .middleware(ApiAuthentication)
  .prefix("/v1/api")
  .annotate(OpenApi.Title, "Emails")
{}

// ---------------------------------------------------------------------------------------------
// Custom domains (on {app_url}): under /v1/api for API keys and under /api for dashboard sessions,
// and the generic list form `GET {base_url}/domains`. Bodies are decoded by the handlers, so a
// wrong shape is reported as each surface requires (see src/http/surface.ts).

const DomainPath = Schema.Struct({ id: Schema.String })

const domainEndpoints = <const Name extends string>(name: Name) =>
  HttpApiGroup.make(name)
    .add(
      HttpApiEndpoint.get("list", "/domains")
        .addSuccess(OkWithMeta(Schema.Array(Domain), DomainListMeta))
    )
    .add(
      HttpApiEndpoint.post("create", "/domains")
        .setPayload(JsonBody(CreateDomainInput, "CreateDomainInput"))
        .addSuccess(Ok(CreatedDomain), { status: 201 })
        .addError(ForbiddenError)
        .addError(ConflictError)
        .annotate(OpenApi.Description, "Registers a hostname (IDNs in punycode); answers the DNS records to publish. Over the plan's limit: 403 DOMAIN_QUOTA; registered anywhere already: 409 CONFLICT")
    )
    .add(
      HttpApiEndpoint.post("verify", "/domains/:id/verify")
        .setPath(DomainPath)
        .addSuccess(Ok(Domain))
        .annotate(OpenApi.Description, "Checks the TXT ownership record (400 VERIFICATION_FAILED without it) and reports mx_configured")
    )
    .add(
      HttpApiEndpoint.post("migrate", "/domains/:id/migrate-mailboxes")
        .setPath(DomainPath)
        .setPayload(JsonBody(MigrateInput, "MigrateMailboxesInput"))
        .addSuccess(Ok(Migration))
        .addError(ConflictError)
        .addError(UnprocessableError)
        .annotate(OpenApi.Description, "Moves every active mailbox of the domain to target_domain (dry_run, default true, only previews)")
    )
    .add(
      HttpApiEndpoint.del("remove", "/domains/:id")
        .setPath(DomainPath)
        .addSuccess(Ok(DeletedDomain))
        .addError(ConflictError)
        .annotate(OpenApi.Description, "409 DOMAIN_HAS_MAILBOXES while active mailboxes use it")
    )

export class DomainsGroup extends domainEndpoints("domains")
  .middleware(ApiAuthentication)
  .prefix("/v1/api")
  .annotate(OpenApi.Title, "Custom domains")
{}

export class DashboardDomainsGroup extends domainEndpoints("dashboardDomains")
  .middleware(SessionAuthentication)
  .prefix("/api")
  .annotate(OpenApi.Title, "Custom domains (dashboard session)")
{}

export class DomainListGroup extends HttpApiGroup.make("domainList")
  .add(
    HttpApiEndpoint.get("list", "/domains")
      .setUrlParams(ListParams(["createdAt"] as const))
      .addSuccess(OkWithMeta(Schema.Array(Domain), PagedDomainListMeta))
      .annotate(OpenApi.Description, "The domain list with the common list parameters; meta adds total, limit, offset, hasMore")
  )
  .middleware(ApiAuthentication)
  .prefix("/v1")
  .annotate(OpenApi.Title, "Custom domains (list form)")
{}

// ---------------------------------------------------------------------------------------------
// Webhooks (on {app_url}, SPEC "Webhooks") and their delivery log (DESIGN.md §4)

const WebhookPath = Schema.Struct({ id: Schema.String })

export class WebhooksGroup extends HttpApiGroup.make("webhooks")
  .add(
    HttpApiEndpoint.get("list", "/webhooks")
      .setUrlParams(ListParams(webhookSortFields))
      .addSuccess(OkWithMeta(Schema.Array(WebhookListItem), ListMeta))
      .annotate(OpenApi.Description, "Secrets masked; the creation time is spelled createdAt here")
  )
  .add(
    HttpApiEndpoint.post("create", "/webhooks")
      .setPayload(CreateWebhookInput)
      .addSuccess(Ok(CreatedWebhook), { status: 201 })
      .addError(ForbiddenError)
      .annotate(OpenApi.Description, "The full secret is in this answer only; over the plan's endpoint limit: 403 WEBHOOK_QUOTA")
  )
  .add(HttpApiEndpoint.get("get", "/webhooks/:id").setPath(WebhookPath).addSuccess(Ok(Webhook)))
  .add(
    HttpApiEndpoint.patch("update", "/webhooks/:id")
      .setPath(WebhookPath)
      .setPayload(UpdateWebhookInput)
      .addSuccess(Ok(UpdatedWebhook))
      .annotate(OpenApi.Description, "Every field optional; a changed secret is answered in full, once")
  )
  .add(HttpApiEndpoint.del("remove", "/webhooks/:id").setPath(WebhookPath).addSuccess(Ok(DeletedWebhook)))
  .add(
    HttpApiEndpoint.get("deliveries", "/webhooks/:id/deliveries")
      .setPath(WebhookPath)
      .setUrlParams(Schema.Struct({ limit: Schema.optional(Limit), offset: Schema.optional(Offset) }).annotations({ parseOptions: { errors: "all" } }))
      .addSuccess(OkWithMeta(Schema.Array(Delivery), ListMeta))
      .annotate(OpenApi.Description, "Every delivery to this endpoint, newest first, with each attempt's status, duration and error")
  )
  .middleware(ApiAuthentication)
  .prefix("/v1/api")
  .annotate(OpenApi.Title, "Webhooks")
{}

// ---------------------------------------------------------------------------------------------
// Search (on {base_url}, SPEC "Search")

export class SearchGroup extends HttpApiGroup.make("search")
  .add(
    HttpApiEndpoint.post("search", "/search")
      .setPayload(SearchInput)
      .addSuccess(OkWithMeta(Schema.Array(SearchResult), SearchMeta))
      .addError(ForbiddenError)
      .addError(RateLimitedError)
      .annotate(
        OpenApi.Description,
        "Your mail ranked by words and meaning together, best first. Counts against the plan's searches per period " +
          "(403 SEARCH_QUOTA when used up) and its searches per minute (429)"
      )
  )
  .add(
    HttpApiEndpoint.get("suggestions", "/search/suggestions")
      .setUrlParams(SuggestionsParams)
      .addSuccess(Ok(Schema.Array(Schema.String)))
      .annotate(OpenApi.Description, "Completions of a partial query: your past queries, then subjects, then senders (10 at most)")
  )
  .middleware(ApiAuthentication)
  .prefix("/v1")
  .annotate(OpenApi.Title, "Search")
{}

// ---------------------------------------------------------------------------------------------

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

