/**
 * The local payment provider's hosted pages (src/http/billing/payment-pages.ts), in process over
 * stand-ins: the database out of reach while a checkout or portal link is opened is the pages' own
 * "try again" (503), never an account without a plan offered a purchase, nor a 500.
 */
import { HttpApiBuilder, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { SqlError } from "@effect/sql/SqlError"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { Billing } from "../../services/billing/billing.ts"
import { NotFound } from "../../services/errors.ts"
import { DependencyHealth } from "../../services/health/dependency-health.ts"
import { LocalPayments, type PaymentSession } from "../../layers/local-billing.ts"
import { PaymentPages } from "../../src/http/billing/payment-pages.ts"

const outage = () =>
  new SqlError({
    message: "Failed to execute statement",
    cause: Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { code: "ECONNREFUSED" })
  })

const session = (kind: "checkout" | "portal"): PaymentSession => ({
  id: `pay_${kind}`,
  kind,
  userId: "usr_1",
  plan: kind === "checkout" ? "pro" : null,
  successUrl: "https://agent.example/done",
  cancelUrl: "https://agent.example/cancel",
  returnUrl: "https://agent.example/back",
  status: "open",
  completedAt: null,
  madeOnPlan: "free",
  refusedOnPlan: null,
  expired: false
})

const payments = Layer.succeed(
  LocalPayments,
  LocalPayments.of({
    find: (id) => Effect.succeed(Option.fromNullable([session("checkout"), session("portal")].find((found) => found.id === id))),
    completeCheckout: () => Effect.succeed(Option.none()),
    setCancelAtPeriodEnd: () => Effect.succeed(Option.none())
  })
)

/** A Billing whose subscription read answers `subscription`; nothing else of it is used by the pages. */
const billingWith = (subscription: Billing["subscription"]) =>
  Layer.succeed(Billing, Billing.make({ subscription } as unknown as Billing))

/** GET `path` through the pages' routes, over `billing`: the status and the page. */
const get = (path: string, billing: Layer.Layer<Billing>) =>
  Effect.gen(function*() {
    const router = yield* HttpApiBuilder.Router.router
    const response = yield* router.pipe(
      Effect.provideService(HttpServerRequest.HttpServerRequest, HttpServerRequest.fromWeb(new Request(`http://mailroom.test${path}`)))
    )
    const web = HttpServerResponse.toWeb(response)
    return { status: web.status, retryAfter: web.headers.get("retry-after"), body: yield* Effect.promise(() => web.text()) }
  }).pipe(
    Effect.scoped,
    Effect.provide(
      PaymentPages.pipe(
        Layer.provideMerge(HttpApiBuilder.Router.Live),
        Layer.provide(Layer.mergeAll(payments, billing, DependencyHealth.Default)),
        Layer.provideMerge(NodeHttpServer.layerContext)
      )
    )
  )

describe("payment pages", () => {
  it.effect("a checkout opened while the database is out of reach answers 503 'try again', offering no purchase", () =>
    Effect.gen(function*() {
      const page = yield* get("/billing/checkout/pay_checkout", billingWith(() => Effect.fail(outage())))
      expect(page.status).toBe(503)
      expect(page.retryAfter).toBe("5")
      expect(page.body).toContain("Try again in a moment")
      expect(page.body).not.toContain("Confirm and pay")
    }))

  it.effect("a checkout of an account with no subscription on record is offered as from no plan", () =>
    Effect.gen(function*() {
      const page = yield* get("/billing/checkout/pay_checkout", billingWith(() => Effect.fail(new NotFound({ message: "No subscription" }))))
      expect(page.status).toBe(200)
      expect(page.body).toContain("Upgrade to Pro")
      expect(page.body).toContain("Confirm and pay")
    }))

  it.effect("the portal opened while the database is out of reach answers its page's 503 'try again'", () =>
    Effect.gen(function*() {
      const page = yield* get("/billing/portal/pay_portal", billingWith(() => Effect.fail(outage())))
      expect(page.status).toBe(503)
      expect(page.body).toContain("Try again in a moment")
    }))

  it.effect("the portal of an account with no subscription on record is an unknown link (404), not a failure", () =>
    Effect.gen(function*() {
      const page = yield* get("/billing/portal/pay_portal", billingWith(() => Effect.fail(new NotFound({ message: "No subscription" }))))
      expect(page.status).toBe(404)
      expect(page.body).toContain("No such payment link")
    }))
})
