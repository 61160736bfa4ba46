/**
 * The api role: the HttpApi served over node:http, with SPEC's envelope on every answer,
 * OpenAPI at /v1/openapi.json and its docs page at /docs.
 */
import { HttpApiBuilder, type HttpApp, HttpApiSwagger, HttpServer, HttpServerRequest } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { Effect, Layer, Option } from "effect"
import { createServer } from "node:http"
import { Accounts } from "../../services/accounts/accounts.ts"
import { Authenticator } from "../../services/accounts/authenticator.ts"
import { Billing } from "../../services/billing/billing.ts"
import { Domains, DomainSettings } from "../../services/domains/domains.ts"
import { PayloadTooLarge } from "../../services/errors.ts"
import { DependencyHealth } from "../../services/health/dependency-health.ts"
import { ApiKeys } from "../../services/keys/api-keys.ts"
import { KeyUsage } from "../../services/keys/last-used.ts"
import { Emails } from "../../services/mail/emails.ts"
import { Mailboxes } from "../../services/mailboxes/mailboxes.ts"
import { RateLimiter } from "../../services/ratelimit/rate-limiter.ts"
import { Search } from "../../services/search/search.ts"
import { Webhooks } from "../../services/webhooks/webhooks.ts"
import * as LocalBilling from "../../layers/local-billing.ts"
import * as StripeBilling from "../../layers/stripe-billing.ts"
import { AppConfig } from "../config.ts"
import { MailroomApi } from "./api.ts"
import { ApiKeysHandlers } from "./api-keys.ts"
import { AuthHandlers } from "./auth.ts"
import { BillingHandlers, BillingWebhookHandlers } from "./billing.ts"
import { DashboardDomainsHandlers, DomainListHandlers, DomainsHandlers } from "./domains.ts"
import { errorResponse, toApiError } from "./errors.ts"
import { HealthHandlers } from "./health.ts"
import { EmailsHandlers } from "./emails.ts"
import { DashboardMailboxesHandlers, MailboxesHandlers } from "./mailboxes.ts"
import { PaymentPagesLive } from "./payment-pages.ts"
import { SearchHandlers } from "./search.ts"
import { WebhooksHandlers } from "./webhooks.ts"
import { ApiAuthenticationLive, ClientRateLimitLive, SessionAuthenticationLive } from "./middleware.ts"

export const MAX_JSON_BYTES = 1024 * 1024

/**
 * Around every route: refuse oversized bodies before reading them, cap what is read, and answer
 * every failure (decode errors, unknown routes, defects) with the error envelope.
 */
const EnvelopeMiddleware = HttpApiBuilder.middleware(Effect.map(DependencyHealth, (health) => (app: HttpApp.Default) =>
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
    Effect.catchAllCause((cause) => Effect.map(toApiError(cause), errorResponse)),
    Effect.provideService(DependencyHealth, health)
  )
))

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
const Middleware = Layer.mergeAll(ApiAuthenticationLive, SessionAuthenticationLive, ClientRateLimitLive)

/** The API with its handlers; needs the domain services. */
export const ApiLive = HttpApiBuilder.api(MailroomApi).pipe(
  Layer.provide(Handlers),
  Layer.provide(Middleware)
)

/** The payment provider: Stripe when `STRIPE_SECRET_KEY` is set (config.ts checks the rest), else local billing. */
const PaymentsLive = Layer.unwrapEffect(
  Effect.map(AppConfig, (config) =>
    Option.match(config.stripeSecretKey, {
      onNone: () => LocalBilling.layer({ appUrl: config.appUrl }),
      onSome: (secretKey) =>
        StripeBilling.layer({
          secretKey,
          webhookSecret: Option.getOrThrow(config.stripeWebhookSecret),
          prices: { pro: Option.getOrThrow(config.stripePricePro), enterprise: Option.getOrThrow(config.stripePriceEnterprise) },
          apiUrl: config.stripeApiUrl
        })
    }))
)

/** The domain feature's operator settings. */
const DomainSettingsLive = Layer.effect(
  DomainSettings,
  Effect.map(AppConfig, (config) => ({
    verifyPrefix: config.verifyPrefix,
    mxHost: config.mxHost,
    freeMaxCustomDomains: config.freeMaxCustomDomains
  }))
)

/**
 * The domain services behind the API (SQL, bus, DNS, the current model's vectors, mailbox and
 * webhook settings come from the caller).
 */
export const ApiServices = Layer.mergeAll(
  Accounts.Default,
  ApiKeys.Default,
  Authenticator.Default,
  PaymentsLive,
  Domains.Default.pipe(Layer.provide(DomainSettingsLive)),
  Emails.Default,
  Search.Default,
  Webhooks.Default
).pipe(
  Layer.provideMerge(Mailboxes.Default),
  Layer.provideMerge(Layer.mergeAll(Billing.Default, RateLimiter.layer, KeyUsage.layer))
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

