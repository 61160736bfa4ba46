/**
 * Subscriptions and usage, read side (SPEC "Billing"). Every user holds one subscription row from
 * registration on; usage is counted per billing period.
 */
import { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Schema } from "effect"
import { NotFound } from "../errors.ts"
import { limits, Plan, reportLimit } from "../plans/plans.ts"
import { addMonth, calendarMonth } from "./periods.ts"

export const SubscriptionStatus = Schema.Literal("active", "canceled", "past_due")

export const Subscription = Schema.Struct({
  status: SubscriptionStatus,
  plan: Plan,
  currentPeriodStart: Schema.String,
  currentPeriodEnd: Schema.String,
  cancelAtPeriodEnd: Schema.Boolean
}).annotations({ identifier: "Subscription" })
export type Subscription = typeof Subscription.Type

export const Usage = Schema.Struct({
  emailsUsed: Schema.Number,
  emailsLimit: Schema.Number.annotations({ description: "-1 means unlimited" }),
  searchesUsed: Schema.Number,
  searchesLimit: Schema.Number.annotations({ description: "-1 means unlimited" }),
  storageUsed: Schema.Number.annotations({ description: "Bytes" }),
  storageLimit: Schema.Number.annotations({ description: "Bytes; -1 means unlimited" })
}).annotations({ identifier: "Usage" })
export type Usage = typeof Usage.Type

interface SubscriptionRow {
  readonly plan: Plan
  readonly status: typeof SubscriptionStatus.Type
  readonly currentPeriodStart: Date
  readonly currentPeriodEnd: Date
  readonly cancelAtPeriodEnd: boolean
}

const toSubscription = (row: SubscriptionRow): Subscription => ({
  status: row.status,
  plan: row.plan,
  currentPeriodStart: row.currentPeriodStart.toISOString(),
  currentPeriodEnd: row.currentPeriodEnd.toISOString(),
  cancelAtPeriodEnd: row.cancelAtPeriodEnd
})

export class Billing extends Effect.Service<Billing>()("mailroom/Billing", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    /** Every new account starts on an active free plan for the current calendar month. */
    const openFreeSubscription = Effect.fn("Billing.openFreeSubscription")(function*(userId: string) {
      const period = calendarMonth(new Date())
      yield* sql`INSERT INTO subscriptions ${
        sql.insert({ userId, plan: "free", status: "active", currentPeriodStart: period.start, currentPeriodEnd: period.end })
      }`
    })

    /** The subscription with its current period; a free plan's period rolls to the current month. */
    const currentRow = (userId: string): Effect.Effect<SubscriptionRow, NotFound | SqlError> =>
      Effect.gen(function*() {
        const rows = yield* sql<SubscriptionRow>`
          SELECT plan, status, current_period_start, current_period_end, cancel_at_period_end
          FROM subscriptions WHERE user_id = ${userId}`
        const row = rows[0]
        if (!row) return yield* NotFound.of({ message: "No subscription for this account" })
        const now = new Date()
        if (row.plan !== "free" || row.currentPeriodEnd > now) return row
        const period = calendarMonth(now)
        yield* sql`UPDATE subscriptions SET current_period_start = ${period.start}, current_period_end = ${period.end},
                     updated_at = now()
                   WHERE user_id = ${userId} AND current_period_end <= ${now}`
        return { ...row, currentPeriodStart: period.start, currentPeriodEnd: period.end }
      })

    const subscription = Effect.fn("Billing.subscription")(function*(userId: string) {
      return toSubscription(yield* currentRow(userId))
    })

    const usage = Effect.fn("Billing.usage")(function*(userId: string) {
      const row = yield* currentRow(userId)
      const counters = yield* sql<{ emails: string; searches: string }>`
        SELECT emails, searches FROM usage_counters
        WHERE user_id = ${userId} AND period_start = ${row.currentPeriodStart}`
      const storage = yield* sql<{ bytes: string }>`SELECT bytes FROM storage_usage WHERE user_id = ${userId}`
      const plan = limits[row.plan]
      return {
        emailsUsed: Number(counters[0]?.emails ?? 0),
        emailsLimit: reportLimit(plan.emailsPerMonth),
        searchesUsed: Number(counters[0]?.searches ?? 0),
        searchesLimit: reportLimit(plan.searchesPerMonth),
        storageUsed: Number(storage[0]?.bytes ?? 0),
        storageLimit: reportLimit(plan.storageBytes)
      } satisfies Usage
    })

    /** A paid plan starts now and runs a month; the change applies to every limit at once. */
    const changePlan = Effect.fn("Billing.changePlan")(function*(userId: string, plan: Plan) {
      const now = new Date()
      const period = plan === "free" ? calendarMonth(now) : { start: now, end: addMonth(now) }
      yield* sql`UPDATE subscriptions SET plan = ${plan}, status = 'active', current_period_start = ${period.start},
                   current_period_end = ${period.end}, cancel_at_period_end = false, updated_at = now()
                 WHERE user_id = ${userId}`
    })

    const setCancelAtPeriodEnd = Effect.fn("Billing.setCancelAtPeriodEnd")(function*(userId: string, cancel: boolean) {
      yield* sql`UPDATE subscriptions SET cancel_at_period_end = ${cancel}, updated_at = now() WHERE user_id = ${userId}`
    })

    return { openFreeSubscription, subscription, usage, changePlan, setCancelAtPeriodEnd } as const
  })
}) {}
