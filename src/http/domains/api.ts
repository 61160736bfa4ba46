/**
 * Custom domains on `{app_url}`: under /v1/api for API keys and under /api for dashboard sessions,
 * and the generic list form `GET {base_url}/domains`. Bodies are decoded by the handlers, so a wrong
 * shape is reported as each surface requires (see ../surface.ts).
 */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import {
  CreateDomainInput,
  DeletedDomain,
  Domain,
  DomainListParams,
  MigrateInput,
  Migration,
  PagedDomainListMeta,
  UpdateDomainInput
} from "../../../services/domains/schemas.ts"
import { JsonBody } from "../../../services/mailboxes/schemas.ts"
import { Ok, OkWithMeta } from "../envelope.ts"
import {
  BadRequest,
  Conflict,
  DomainHasMailboxes,
  DomainNotAllowed,
  DomainQuotaReached,
  EmailTaken,
  NotFound,
  ValidationError,
  VerificationFailed
} from "../../../services/errors.ts"
import { envelope } from "../errors.ts"
import { ApiAuthentication, SessionAuthentication } from "../security.ts"

const DomainPath = Schema.Struct({ id: Schema.String })

const domainEndpoints = <const Name extends string>(name: Name) =>
  HttpApiGroup.make(name)
    .add(
      HttpApiEndpoint.get("list", "/domains")
        .setUrlParams(DomainListParams)
        .addSuccess(OkWithMeta(Schema.Array(Domain), PagedDomainListMeta))
        .annotateContext(OpenApi.annotations({
          summary: "List custom domains",
          description: "The account's domains, newest first, with the common list parameters (limit 1-100, default 20; offset; " +
            "sort createdAt:asc|desc); meta has the plan's domain limit (domain_count counts every domain) and total, limit, offset, hasMore"
        }))
    )
    .add(
      HttpApiEndpoint.post("create", "/domains")
        .setPayload(JsonBody(CreateDomainInput, "CreateDomainInput"))
        .addSuccess(Ok(Domain), { status: 201 })
        .addError(envelope(BadRequest))
        .addError(envelope(ValidationError))
        .addError(envelope(DomainQuotaReached))
        .addError(envelope(Conflict))
        .annotateContext(OpenApi.annotations({
          summary: "Add a custom domain",
          description: "Registers a hostname (IDNs in punycode); answers the DNS records to publish. Over the plan's limit: 403 DOMAIN_QUOTA; on this account already, shared, or verified by another account: 409 CONFLICT. Another account's unverified claim does not stop it: the first to verify holds the name"
        }))
    )
    .add(
      HttpApiEndpoint.get("get", "/domains/:id")
        .setPath(DomainPath)
        .addSuccess(Ok(Domain))
        .addError(envelope(NotFound))
        .annotateContext(OpenApi.annotations({
          summary: "Get a custom domain",
          description: "The domain as the list shows it, with the DNS records to publish (dns_records); another account's is 404 NOT_FOUND"
        }))
    )
    .add(
      HttpApiEndpoint.post("verify", "/domains/:id/verify")
        .setPath(DomainPath)
        .addSuccess(Ok(Domain))
        .addError(envelope(VerificationFailed))
        .addError(envelope(NotFound))
        .addError(envelope(Conflict))
        .annotateContext(OpenApi.annotations({
          summary: "Verify a domain's DNS",
          description: "Checks the TXT ownership record (400 VERIFICATION_FAILED without it) and reports mx_configured, dkim_configured, spf_configured and dmarc_configured (a DKIM key, DMARC record or SPF include that could not be looked up keeps its last finding). A name another account verified first is 409 CONFLICT"
        }))
    )
    .add(
      HttpApiEndpoint.patch("update", "/domains/:id")
        .setPath(DomainPath)
        .setPayload(JsonBody(UpdateDomainInput, "UpdateDomainInput"))
        .addSuccess(Ok(Domain))
        .addError(envelope(BadRequest))
        .addError(envelope(ValidationError))
        .addError(envelope(NotFound))
        .annotateContext(OpenApi.annotations({
          summary: "Set a domain's catch-all mailbox",
          description: "catch_all_mailbox_id: an active mailbox of the account (on any domain) that takes the domain's mail to " +
            "addresses no mailbox has, instead of 550 5.1.1; null turns it off. Applies from the next message on, once the " +
            "domain is verified (and the plan receives on custom domains). Another account's or a deleted mailbox: 400 VALIDATION_ERROR"
        }))
    )
    .add(
      HttpApiEndpoint.post("migrate", "/domains/:id/migrate-mailboxes")
        .setPath(DomainPath)
        .setPayload(JsonBody(MigrateInput, "MigrateMailboxesInput"))
        .addSuccess(Ok(Migration))
        .addError(envelope(BadRequest))
        .addError(envelope(ValidationError))
        .addError(envelope(NotFound))
        .addError(envelope(Conflict))
        .addError(envelope(EmailTaken))
        .addError(envelope(DomainNotAllowed))
        .annotateContext(OpenApi.annotations({
          summary: "Move a domain's mailboxes",
          description: "Moves every active mailbox of the domain to target_domain (dry_run, default true, only previews)"
        }))
    )
    .add(
      HttpApiEndpoint.del("remove", "/domains/:id")
        .setPath(DomainPath)
        .addSuccess(Ok(DeletedDomain))
        .addError(envelope(NotFound))
        .addError(envelope(DomainHasMailboxes))
        .annotateContext(OpenApi.annotations({
          summary: "Delete a custom domain",
          description: "409 DOMAIN_HAS_MAILBOXES while active mailboxes use it"
        }))
    )

export class DomainsGroup extends domainEndpoints("domains")
  .middleware(ApiAuthentication)
  .prefix("/v1/api")
  .annotate(OpenApi.Title, "Custom domains")
  .annotate(OpenApi.Description, "Your own domains for mailboxes: register, prove ownership by DNS, migrate mailboxes, delete (API keys, under /v1/api)")
{}

export class DashboardDomainsGroup extends domainEndpoints("dashboardDomains")
  .middleware(SessionAuthentication)
  .prefix("/api")
  .annotate(OpenApi.Title, "Custom domains (dashboard session)")
  .annotate(OpenApi.Description, "As /v1/api/domains, for dashboard sessions; field errors come as details.field_errors")
{}

export class DomainListGroup extends HttpApiGroup.make("domainList")
  .add(
    HttpApiEndpoint.get("list", "/domains")
      .setUrlParams(DomainListParams)
      .addSuccess(OkWithMeta(Schema.Array(Domain), PagedDomainListMeta))
      .annotateContext(OpenApi.annotations({
        summary: "List custom domains, paginated",
        description: "The domain list with the common list parameters; meta adds total, limit, offset, hasMore"
      }))
  )
  .middleware(ApiAuthentication)
  .prefix("/v1")
  .annotate(OpenApi.Title, "Custom domains (list form)")
  .annotate(OpenApi.Description, "SPEC's generic list form of the domains, with the common list parameters")
{}
