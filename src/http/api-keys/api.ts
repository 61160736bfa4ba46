/** API keys on `{base_url}`: the contract. */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { keySortFields } from "../../../services/keys/api-keys.ts"
import { ApiKey, CreatedApiKey, CreateKeyInput, RevokedApiKey } from "../../../services/keys/schemas.ts"
import { ListMeta, ListParams } from "../../../services/listing.ts"
import { Ok, OkWithMeta } from "../envelope.ts"
import { NotFound } from "../../../services/errors.ts"
import { envelope } from "../errors.ts"
import { ApiAuthentication } from "../security.ts"

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
      .addError(envelope(NotFound))
  )
  .middleware(ApiAuthentication)
  .prefix("/v1")
  .annotate(OpenApi.Title, "API keys")
{}
