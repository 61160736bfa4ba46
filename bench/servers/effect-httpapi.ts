/**
 * Baseline (b): one Effect HttpApi route, `GET /v1/api-keys`, answering the fixed JSON through a
 * response schema (and the same optional `limit` query parameter), served the way Mailroom serves its API (HttpApiBuilder over NodeHttpServer), with
 * no authentication, rate limiting or SQL. Listens on `PORT`.
 */
import { HttpApi, HttpApiBuilder, HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { NodeHttpServer, NodeRuntime } from "@effect/platform-node"
import { Effect, Layer, Schema } from "effect"
import { createServer } from "node:http"
import { payload } from "../payload.ts"

const Key = Schema.Struct({
  keyId: Schema.String,
  name: Schema.String,
  keyPrefix: Schema.String,
  plan: Schema.Literal("free", "pro", "enterprise"),
  rateLimit: Schema.Number,
  lastUsed: Schema.NullOr(Schema.String),
  createdAt: Schema.String,
  expirationTs: Schema.NullOr(Schema.String)
})

const KeyList = Schema.Struct({
  success: Schema.Literal(true),
  data: Schema.Array(Key),
  meta: Schema.Struct({ total: Schema.Number, limit: Schema.Number, offset: Schema.Number, hasMore: Schema.Boolean })
})

const Api = HttpApi.make("bench").add(
  HttpApiGroup.make("apiKeys").add(HttpApiEndpoint.get("list", "/v1/api-keys")
      .setUrlParams(Schema.Struct({ limit: Schema.optional(Schema.NumberFromString) }))
      .addSuccess(KeyList)
  )
)

const ApiKeysLive = HttpApiBuilder.group(Api, "apiKeys", (handlers) =>
  handlers.handle("list", () => Effect.succeed(payload)))

const port = Number(process.env.PORT ?? 0)

HttpApiBuilder.serve().pipe(
  Layer.provide(HttpApiBuilder.api(Api).pipe(Layer.provide(ApiKeysLive))),
  Layer.provide(NodeHttpServer.layer(createServer, { port, host: "127.0.0.1" })),
  Layer.launch,
  NodeRuntime.runMain
)
