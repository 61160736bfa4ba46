/**
 * A Stripe subscription Mailroom no longer counts as paying, which Stripe may still bill: a past_due
 * plan that housekeeping lapsed to free, and the subscription an account left by paying a second
 * checkout. Billing, housekeeping's sweep and the Stripe provider in process, against a local HTTP
 * server standing in for Stripe's API.
 */
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { SqlClient } from "@effect/sql"
import { afterAll, expect, layer } from "@effect/vitest"
import { Effect, Either, Layer, Option, Redacted } from "effect"
import * as MemoryBus from "../../layers/memory-bus.ts"
import * as StripeBilling from "../../layers/stripe-billing.ts"
import { Principals } from "../../services/accounts/principals.ts"
import { Billing } from "../../services/billing/billing.ts"
import type { BillingEvent } from "../../services/billing/events.ts"
import { PaymentProvider } from "../../services/billing/payments.ts"
import { DependencyHealth } from "../../services/health/dependency-health.ts"
import { RecipientDirectory } from "../../services/mail/directory.ts"
import { WebhookSubscriptions } from "../../services/webhooks/subscriptions.ts"
import { sweep } from "../../services/maintenance/housekeeping.ts"
import { testDatabase } from "../support/database.ts"
import { uniqueName } from "../support/services.ts"
import { insertUser } from "../support/users.ts"

const PRICES = { pro: "price_pro_test", enterprise: "price_enterprise_test" }

/** Stripe's API as the provider uses it here: subscriptions a test sets, checkout and portal sessions made. */
const requests: Array<string> = []
const subscriptions = new Map<string, { status: string; price: string }>()
const stripeApi = http.createServer((req, res) => {
  req.resume()
  req.on("end", () => {
    const path = (req.url ?? "").split("?")[0]!
    requests.push(`${req.method} ${path}`)
    const reply = (status: number, json: unknown) => {
      res.writeHead(status, { "content-type": "application/json" })
      res.end(JSON.stringify(json))
    }
    // Made, or given the account's email.
    const customer = /^\/v1\/customers(?:\/([^/]+))?$/.exec(path)
    if (customer) return reply(200, { id: customer[1] ?? uniqueName("cus"), object: "customer" })
    if (path === "/v1/checkout/sessions") return reply(200, { id: "cs_1", object: "checkout.session", url: "https://checkout.stripe.test/c/1" })
    if (path === "/v1/billing_portal/sessions") return reply(200, { id: "bps_1", object: "billing_portal.session", url: "https://billing.stripe.test/p/1" })
    const id = decodeURIComponent(/^\/v1\/subscriptions\/([^/]+)$/.exec(path)?.[1] ?? "")
    const found = subscriptions.get(id)
    if (req.method === "GET" && found) {
      return reply(200, { id, object: "subscription", status: found.status, items: { object: "list", data: [{ id: "si_1", price: { id: found.price } }] } })
    }
    reply(404, { error: { type: "invalid_request_error", code: "resource_missing", message: `No such subscription: '${id}'` } })
  })
})
await new Promise<void>((resolve) => stripeApi.listen(0, "127.0.0.1", () => resolve()))
afterAll(() => new Promise<void>((resolve) => stripeApi.close(() => resolve())))

const stripe = StripeBilling.layer({
  secretKey: Redacted.make("sk_test_mailroom"),
  webhookSecret: Redacted.make("whsec_test"),
  prices: PRICES,
  apiUrl: Option.some(`http://127.0.0.1:${(stripeApi.address() as AddressInfo).port}`)
})

const services = Layer.merge(Billing.Default, stripe).pipe(
  Layer.provideMerge(Layer.mergeAll(RecipientDirectory.Default, Principals.Default, WebhookSubscriptions.Default)),
  Layer.provideMerge(MemoryBus.layer),
  Layer.provideMerge(DependencyHealth.Default),
  Layer.provideMerge(testDatabase)
)

const row = (userId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ plan: string; status: string; stripeSubscriptionId: string | null }>`
      SELECT plan, status, stripe_subscription_id FROM subscriptions WHERE user_id = ${userId}`).pipe(Effect.map((rows) => rows[0]))

const DAY = 86400_000
const urls = { successUrl: "https://agent.example.com/done", cancelUrl: "https://agent.example.com/cancel" }

/** Events of one account's subscription `subscriptionId`, each a new event id. */
const eventsOf = (userId: string, customerId: string, subscriptionId: string) => ({
  paid: (at: Date, plan: "pro" | "enterprise" = "pro"): BillingEvent => ({
    userId, customerId, subscriptionId, at, plan, eventId: uniqueName("evt"), eventType: "checkout.session.completed", kind: "checkout-completed"
  }),
  changed: (at: Date, status: "active" | "past_due", period: { start: Date; end: Date }): BillingEvent => ({
    userId, customerId, subscriptionId, at, status, plan: "pro", periodStart: period.start, periodEnd: period.end, cancelAtPeriodEnd: false,
    eventId: uniqueName("evt"), eventType: "customer.subscription.updated", kind: "subscription-changed"
  }),
  ended: (at: Date): BillingEvent => ({
    userId, customerId, subscriptionId, at, eventId: uniqueName("evt"), eventType: "customer.subscription.deleted", kind: "subscription-ended"
  })
})

/** An account whose pro subscription went past due 40 days ago and that housekeeping has lapsed to free. */
const lapsedAccount = Effect.gen(function*() {
  const billing = yield* Billing
  const { userId } = yield* insertUser()
  const subscriptionId = uniqueName("sub")
  const events = eventsOf(userId, uniqueName("cus"), subscriptionId)
  const now = Date.now()
  const period = { start: new Date(now - 40 * DAY), end: new Date(now - 10 * DAY) }
  expect(yield* billing.applyEvent(events.paid(period.start))).toBe("applied")
  expect(yield* billing.applyEvent(events.changed(new Date(period.end.getTime() + 60_000), "past_due", period))).toBe("applied")
  yield* sweep
  expect(yield* row(userId)).toEqual({ plan: "free", status: "canceled", stripeSubscriptionId: subscriptionId })
  return { userId, subscriptionId, events, period }
})

layer(services, { timeout: "60 seconds", excludeTestServices: true })("a subscription Stripe may still bill", (it) => {
  it.effect("lapsed to free with a payment past due: checkout opens no second subscription (refused, to the portal); paid up, the plan comes back", () =>
    Effect.gen(function*() {
      const billing = yield* Billing
      const payments = yield* PaymentProvider
      const { events, period, subscriptionId, userId } = yield* lapsedAccount
      for (const status of ["past_due", "unpaid", "paused", "incomplete"]) {
        subscriptions.set(subscriptionId, { status, price: PRICES.pro })
        const before = requests.length
        const refused = yield* Effect.either(payments.checkout({ userId, plan: "pro", ...urls }))
        expect(Either.isLeft(refused) && refused.left._tag, status).toBe("PaymentPastDue")
        // Stripe was asked about the subscription, and nothing was opened.
        expect(requests.slice(before).filter((r) => !r.startsWith("POST /v1/customers")), status).toEqual([`GET /v1/subscriptions/${subscriptionId}`])
      }

      // Stripe's dunning goes on (past_due, then unpaid): the account stays on free.
      const later = new Date(Date.now() - DAY)
      expect(yield* billing.applyEvent(events.changed(later, "past_due", period))).toBe("superseded")
      expect(yield* row(userId)).toEqual({ plan: "free", status: "canceled", stripeSubscriptionId: subscriptionId })

      // The customer pays the open invoice: the subscription is active again, and so is the plan.
      const renewed = { start: new Date(Date.now() - 1000), end: new Date(Date.now() + 30 * DAY) }
      expect(yield* billing.applyEvent(events.changed(new Date(Date.now() - 1000), "active", renewed))).toBe("applied")
      expect(yield* row(userId)).toEqual({ plan: "pro", status: "active", stripeSubscriptionId: subscriptionId })
      subscriptions.set(subscriptionId, { status: "active", price: PRICES.pro })
      const before = requests.length
      expect(yield* payments.checkout({ userId, plan: "enterprise", ...urls })).toEqual({ url: "https://billing.stripe.test/p/1" })
      expect(requests.slice(before).filter((r) => !r.startsWith("POST /v1/customers")))
        .toEqual([`GET /v1/subscriptions/${subscriptionId}`, "POST /v1/billing_portal/sessions"])
    }))

  it.effect("lapsed, its subscription ended at Stripe (or gone): a new Checkout Session opens", () =>
    Effect.gen(function*() {
      const payments = yield* PaymentProvider
      const { subscriptionId, userId } = yield* lapsedAccount
      for (const status of ["canceled", "incomplete_expired", "gone"]) {
        if (status === "gone") subscriptions.delete(subscriptionId)
        else subscriptions.set(subscriptionId, { status, price: PRICES.pro })
        const before = requests.length
        expect(yield* payments.checkout({ userId, plan: "pro", ...urls }), status).toEqual({ url: "https://checkout.stripe.test/c/1" })
        expect(requests.slice(before).filter((r) => !r.startsWith("POST /v1/customers")), status)
          .toEqual([`GET /v1/subscriptions/${subscriptionId}`, "POST /v1/checkout/sessions"])
      }
    }))

  it.effect("the events of a subscription the account left (two checkouts paid) are answered other-subscription until it ends", () =>
    Effect.gen(function*() {
      const billing = yield* Billing
      const { userId } = yield* insertUser()
      const customerId = uniqueName("cus")
      const first = eventsOf(userId, customerId, uniqueName("sub"))
      const second = eventsOf(userId, customerId, uniqueName("sub"))
      const now = Date.now()
      const period = { start: new Date(now - 60_000), end: new Date(now + 30 * DAY) }
      expect(yield* billing.applyEvent(first.paid(new Date(now - 60_000)))).toBe("applied")
      expect(yield* billing.applyEvent(second.paid(new Date(now - 50_000), "enterprise"))).toBe("applied")
      expect(yield* billing.applyEvent(first.changed(new Date(now - 40_000), "active", period))).toBe("other-subscription")
      expect(yield* billing.applyEvent(first.ended(new Date(now - 30_000)))).toBe("superseded")
      // Ended, it bills nothing more: what comes of it later is merely old news.
      expect(yield* billing.applyEvent(first.changed(new Date(now - 20_000), "active", period))).toBe("superseded")
      expect((yield* row(userId))?.plan).toBe("enterprise")
    }))
})
