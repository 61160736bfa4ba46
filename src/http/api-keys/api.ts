/** API keys on `{base_url}`: the contract. */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { keySortAliases, keySortFields } from "../../../services/keys/schemas.ts"
import { ApiKey, CreatedApiKey, CreateKeyInput, RevokedApiKey, UpdateKeyInput } from "../../../services/keys/schemas.ts"
import { ListMeta, ListParams } from "../../../services/listing.ts"
import { Ok, OkWithMeta } from "../envelope.ts"
import { NotFound } from "../../../services/errors.ts"
import { envelope } from "../errors.ts"
import { ApiAuthentication, SessionAuthentication } from "../security.ts"

const keyEndpoints = <const Name extends string>(name: Name) =>
  HttpApiGroup.make(name)
  .add(
    HttpApiEndpoint.get("list", "/api-keys")
      .setUrlParams(ListParams(keySortFields, keySortAliases))
      .addSuccess(OkWithMeta(Schema.Array(ApiKey), ListMeta))
      .annotateContext(OpenApi.annotations({
        summary: "List API keys",
        description: "The account's keys, masked, with when each was last used; newest first unless `sort` says otherwise"
      }))
  )
  .add(
    HttpApiEndpoint.post("create", "/api-keys")
      .setPayload(CreateKeyInput)
      .addSuccess(OkWithMeta(CreatedApiKey, Schema.Struct({ warning: Schema.String })), { status: 201 })
      .annotateContext(OpenApi.annotations({
        summary: "Create an API key",
        description: "The full key is in this answer only; expirationDays (1-365) makes it expire; mailboxIds limits it to those mailboxes: " +
          "their mail only, other mailboxes 404 as unknown ones, routes about the whole account 403"
      }))
  )
  .add(
    HttpApiEndpoint.patch("update", "/api-keys/:id")
      .setPath(Schema.Struct({ id: Schema.String }))
      .setPayload(UpdateKeyInput)
      .addSuccess(Ok(ApiKey))
      .addError(envelope(NotFound))
      .annotateContext(OpenApi.annotations({
        summary: "Rename an API key or change its mailboxes",
        description: "name, and mailboxIds (some of the account's mailboxes, or null for the whole account); a new limit applies at once"
      }))
  )
  .add(
    HttpApiEndpoint.del("revoke", "/api-keys/:id")
      .setPath(Schema.Struct({ id: Schema.String }))
      .addSuccess(Ok(RevokedApiKey))
      .addError(envelope(NotFound))
      .annotateContext(OpenApi.annotations({ summary: "Revoke an API key", description: "The key stops working at once" }))
  )

export class ApiKeysGroup extends keyEndpoints("apiKeys")
  .middleware(ApiAuthentication)
  .prefix("/v1")
  .annotate(OpenApi.Title, "API keys")
  .annotate(OpenApi.Description, "Keys for programmatic access on {base_url}; a key acts with its owner's full rights, or only on the mailboxes it is limited to (mailboxIds)")
{}

/** The same routes under /api for dashboard sessions: where a person makes their agents' keys. */
export class DashboardApiKeysGroup extends keyEndpoints("dashboardApiKeys")
  .middleware(SessionAuthentication)
  .prefix("/api")
  .annotate(OpenApi.Title, "API keys (dashboard session)")
  .annotate(OpenApi.Description, "As /v1/api-keys, for the dashboard's cookie session")
{}
