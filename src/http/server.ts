/**
 * The api role: the HttpApi served over node:http, with SPEC's envelope on every answer,
 * OpenAPI at /v1/openapi.json and its docs page at /docs.
 */
import { HttpApiBuilder, HttpApiSwagger, HttpServer, HttpServerRequest } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { Effect, Layer, Option } from "effect"
import { createServer } from "node:http"
import { Authenticator } from "../../services/accounts/authenticator.ts"
import { PayloadTooLarge } from "../../services/errors.ts"
import { RateLimiter } from "../../services/ratelimit/rate-limiter.ts"
import { AppConfig } from "../config.ts"
import { MailroomApi } from "./api.ts"
import { ApiKeysHandlers } from "./api-keys/http.ts"
import { AuthHandlers } from "./auth/http.ts"
import { BillingHandlers, BillingWebhookHandlers } from "./billing/http.ts"
import { PaymentPagesLive } from "./billing/payment-pages.ts"
import { DashboardDomainsHandlers, DomainListHandlers, DomainsHandlers } from "./domains/http.ts"
import { EmailsHandlers } from "./emails/http.ts"
import { errorResponse, toApiError } from "./errors.ts"
import { HealthHandlers } from "./health/http.ts"
import { DashboardMailboxesHandlers, MailboxesHandlers } from "./mailboxes/http.ts"
import { ApiAuthenticationLive, ClientRateLimitLive, SessionAuthenticationLive } from "./middleware.ts"
import { SearchHandlers } from "./search/http.ts"
import { WebhooksHandlers } from "./webhooks/http.ts"

export const MAX_JSON_BYTES = 1024 * 1024

/**
 * Around every route: refuse oversized bodies before reading them, cap what is read, and answer
 * every failure (decode errors, unknown routes, defects) with the error envelope.
 */
const EnvelopeMiddleware = HttpApiBuilder.middleware((app) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const length = Number(request.headers["content-length"] ?? 0)
    if (length > MAX_JSON_BYTES) {
      return errorResponse(
        PayloadTooLarge.of({ message: "The request body is larger than 1 MiB", details: { max_bytes: MAX_JSON_BYTES } })
      )
    }
    return yield* app
  }).pipe(
    HttpServerRequest.withMaxBodySize(Option.some(MAX_JSON_BYTES)),
    Effect.catchAllCause((cause) => Effect.map(toApiError(cause), errorResponse))
  )
)

const Handlers = Layer.mergeAll(
  HealthHandlers,
  AuthHandlers,
  ApiKeysHandlers,
  BillingHandlers,
  BillingWebhookHandlers,
  MailboxesHandlers,
  DashboardMailboxesHandlers,
  EmailsHandlers,
  WebhooksHandlers,
  DomainsHandlers,
  DashboardDomainsHandlers,
  DomainListHandlers,
  SearchHandlers
)
const Middleware = Layer.mergeAll(ApiAuthenticationLive, SessionAuthenticationLive, ClientRateLimitLive).pipe(
  Layer.provide(Layer.merge(Authenticator.Default, RateLimiter.layer))
)

/**
 * The API: every feature's handlers, each with the domain services it uses. What stays open are the
 * adapters and settings, chosen in src/app.ts: SQL, bus, payment provider, DNS, vectors, settings.
 */
export const ApiLive = HttpApiBuilder.api(MailroomApi).pipe(
  Layer.provide(Handlers),
  Layer.provide(Middleware)
)

export const HttpServerLive = Layer.unwrapEffect(
  Effect.map(AppConfig, (config) =>
    HttpApiBuilder.serve().pipe(
      Layer.provide(HttpApiSwagger.layer({ path: "/docs" })),
      Layer.provide(PaymentPagesLive),
      Layer.provide(HttpApiBuilder.middlewareOpenApi({ path: "/v1/openapi.json" })),
      Layer.provide(EnvelopeMiddleware),
      Layer.provide(ApiLive),
      HttpServer.withLogAddress,
      Layer.provide(NodeHttpServer.layer(createServer, { port: config.port, host: config.host }))
    )
  )
)

