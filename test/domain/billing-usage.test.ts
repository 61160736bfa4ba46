/**
 * The usage answer's day (services/billing/billing.ts `usage`): today's counts of received and sent
 * mail are the UTC day's that Effect's Clock tells, and `dayEnd` is that day's end, when they start again.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Effect, Layer, TestClock, TestContext } from "effect"
import * as MemoryBus from "../../layers/memory-bus.ts"
import { Principals } from "../../services/accounts/principals.ts"
import { Billing } from "../../services/billing/billing.ts"
import { DependencyHealth } from "../../services/health/dependency-health.ts"
import { RecipientDirectory } from "../../services/mail/directory.ts"
import { WebhookSubscriptions } from "../../services/webhooks/subscriptions.ts"
import { testDatabase } from "../support/database.ts"
import { insertUser } from "../support/users.ts"

const services = Billing.Default.pipe(
  Layer.provideMerge(Layer.mergeAll(RecipientDirectory.Default, Principals.Default, WebhookSubscriptions.Default)),
  Layer.provideMerge(MemoryBus.layer),
  Layer.provideMerge(DependencyHealth.Default),
  Layer.provideMerge(testDatabase)
)

// The services on the live clock (their background fibers, a flush every second among them, would each
// run once per second the test clock is moved through); the test's own fiber on a TestClock.
layer(services, { timeout: "60 seconds", excludeTestServices: true })("Billing.usage", (it) => {
  it.effect("counts today by the clock: the day's received and sent mail until midnight UTC, none from then, and dayEnd the next midnight", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const billing = yield* Billing
      // Pro: its period is the one insertUser opened, whatever the test clock says.
      const { userId } = yield* insertUser("pro")
      yield* sql`INSERT INTO mail_daily_counters (user_id, day, emails, sent) VALUES
                   (${userId}, '2026-03-14', 7, 3), (${userId}, '2026-03-16', 1, 1)`
      yield* TestClock.setTime(Date.parse("2026-03-14T23:59:59.000Z"))
      expect(yield* billing.usage(userId)).toMatchObject({
        emailsToday: 7,
        emailsDailyLimit: 10_000,
        emailsSentToday: 3,
        emailsSentDailyLimit: 10_000,
        dayEnd: "2026-03-15T00:00:00.000Z"
      })
      // The day's end: its counts are behind, and the next day (nothing counted) runs to the next midnight.
      yield* TestClock.adjust("1 second")
      expect(yield* billing.usage(userId)).toMatchObject({ emailsToday: 0, emailsSentToday: 0, dayEnd: "2026-03-16T00:00:00.000Z" })
      yield* TestClock.adjust("1 day")
      expect(yield* billing.usage(userId)).toMatchObject({ emailsToday: 1, emailsSentToday: 1, dayEnd: "2026-03-17T00:00:00.000Z" })
    }).pipe(Effect.provide(TestContext.TestContext)))
})
