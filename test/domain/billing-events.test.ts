/**
 * A payment provider's events applied to a subscription (services/billing/billing.ts `applyEvent`):
 * each once, never an older state over a newer one, and a subscription that ended stays ended.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as MemoryBus from "../../layers/memory-bus.ts"
import { Principals } from "../../services/accounts/principals.ts"
import { Billing } from "../../services/billing/billing.ts"
import type { BillingEvent } from "../../services/billing/events.ts"
import { DependencyHealth } from "../../services/health/dependency-health.ts"
import { RecipientDirectory } from "../../services/mail/directory.ts"
import { WebhookSubscriptions } from "../../services/webhooks/subscriptions.ts"
import { testDatabase } from "../support/database.ts"
import { uniqueName } from "../support/services.ts"
import { insertUser } from "../support/users.ts"

const services = Billing.Default.pipe(
  Layer.provideMerge(Layer.mergeAll(RecipientDirectory.Default, Principals.Default, WebhookSubscriptions.Default)),
  Layer.provideMerge(MemoryBus.layer),
  Layer.provideMerge(DependencyHealth.Default),
  Layer.provideMerge(testDatabase)
)

/** What the account's row holds of its Stripe subscription. */
const row = (userId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ plan: string; status: string; stripeSubscriptionId: string | null }>`
      SELECT plan, status, stripe_subscription_id FROM subscriptions WHERE user_id = ${userId}`).pipe(Effect.map((rows) => rows[0]))

/** The subscription `common` names, updated at `common.at` to an active pro plan for 30 days (a new event id each time). */
const subscriptionUpdated = (common: { readonly userId: string; readonly customerId: string; readonly subscriptionId: string; readonly at: Date }): BillingEvent => ({
  ...common,
  eventId: uniqueName("evt"),
  eventType: "customer.subscription.updated",
  kind: "subscription-changed",
  plan: "pro",
  status: "active",
  periodStart: common.at,
  periodEnd: new Date(common.at.getTime() + 30 * 86400_000),
  cancelAtPeriodEnd: false
})

layer(services, { timeout: "60 seconds", excludeTestServices: true })("Billing.applyEvent", (it) => {
  it.effect("customer.subscription.deleted applied before an update of the same second: the update does not revive the subscription", () =>
    Effect.gen(function*() {
      const billing = yield* Billing
      const { userId } = yield* insertUser()
      const customerId = uniqueName("cus")
      const subscriptionId = uniqueName("sub")
      const at = new Date(Math.floor(Date.now() / 1000) * 1000)
      const common = { userId, customerId, subscriptionId, at }
      const paid: BillingEvent = { ...common, eventId: uniqueName("evt"), eventType: "checkout.session.completed", kind: "checkout-completed", plan: "pro", at: new Date(at.getTime() - 60_000) }
      expect(yield* billing.applyEvent(paid)).toBe("applied")
      const updated = subscriptionUpdated(common)
      const deleted: BillingEvent = { ...common, eventId: uniqueName("evt"), eventType: "customer.subscription.deleted", kind: "subscription-ended" }

      expect(yield* billing.applyEvent(deleted)).toBe("applied")
      expect(yield* billing.applyEvent(updated)).toBe("superseded")
      expect(yield* row(userId)).toEqual({ plan: "free", status: "canceled", stripeSubscriptionId: null })
      // Nor does anything else said of it later: a failed invoice, its checkout delivered late.
      const failed: BillingEvent = { ...common, eventId: uniqueName("evt"), eventType: "invoice.payment_failed", kind: "payment-failed" }
      expect(yield* billing.applyEvent(failed)).toBe("superseded")
      expect(yield* billing.applyEvent({ ...paid, eventId: uniqueName("evt"), at })).toBe("superseded")
      expect(yield* row(userId)).toEqual({ plan: "free", status: "canceled", stripeSubscriptionId: null })

      // A new checkout (another subscription) is paid as ever.
      const next = uniqueName("sub")
      expect(yield* billing.applyEvent({ ...paid, eventId: uniqueName("evt"), subscriptionId: next, plan: "enterprise", at })).toBe("applied")
      expect(yield* row(userId)).toEqual({ plan: "enterprise", status: "active", stripeSubscriptionId: next })
    }))

  it.effect("a deletion and an update of the same second applied at once: the subscription ends, every time", () =>
    Effect.gen(function*() {
      const billing = yield* Billing
      const rounds = 40
      const ends = yield* Effect.forEach(Array.from({ length: rounds }, (_, i) => i), () =>
        Effect.gen(function*() {
          const { userId } = yield* insertUser()
          const at = new Date(Math.floor(Date.now() / 1000) * 1000)
          const common = { userId, customerId: uniqueName("cus"), subscriptionId: uniqueName("sub"), at }
          const paid: BillingEvent = { ...common, eventId: uniqueName("evt"), eventType: "checkout.session.completed", kind: "checkout-completed", plan: "pro", at: new Date(at.getTime() - 60_000) }
          expect(yield* billing.applyEvent(paid)).toBe("applied")
          const deleted: BillingEvent = { ...common, eventId: uniqueName("evt"), eventType: "customer.subscription.deleted", kind: "subscription-ended" }
          // On PostgreSQL each on a connection of its own, as two webhook calls at once are.
          yield* Effect.all([billing.applyEvent(deleted), billing.applyEvent(subscriptionUpdated(common))], { concurrency: 2 })
          return yield* row(userId)
        }))
      expect(ends).toEqual(Array.from({ length: rounds }, () => ({ plan: "free", status: "canceled", stripeSubscriptionId: null })))
    }))

  it.effect("the update first, then the deletion of the same second: the deletion wins", () =>
    Effect.gen(function*() {
      const billing = yield* Billing
      const { userId } = yield* insertUser()
      const subscriptionId = uniqueName("sub")
      const at = new Date(Math.floor(Date.now() / 1000) * 1000)
      const common = { userId, customerId: uniqueName("cus"), subscriptionId, at }
      expect(yield* billing.applyEvent(subscriptionUpdated(common))).toBe("applied")
      expect(yield* billing.applyEvent({ ...common, eventId: uniqueName("evt"), eventType: "customer.subscription.deleted", kind: "subscription-ended" }))
        .toBe("applied")
      expect(yield* row(userId)).toEqual({ plan: "free", status: "canceled", stripeSubscriptionId: null })
    }))
})
