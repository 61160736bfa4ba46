/**
 * Accounts for in-process suites, made with SQL: a user row and its subscription on the plan a test
 * needs. Registration itself (and its password hashing) is the accounts suite's subject; other
 * suites only need someone to own things.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import type { Plan } from "../../services/plans/plans.ts"
import { uniqueName } from "./services.ts"

export interface TestUser {
  readonly userId: string
  readonly plan: Plan
}

export const insertUser = (plan: Plan = "free"): Effect.Effect<TestUser, never, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const userId = uniqueName("usr")
    const email = `${userId}@example.com`
    yield* sql`INSERT INTO users (id, email, email_normalized, name, password_hash)
               VALUES (${userId}, ${email}, ${email}, 'Test', 'not a hash')`
    // In milliseconds, as the product writes periods (from JavaScript dates): a period start read back
    // into a Date and written again then names the same period.
    yield* sql`INSERT INTO subscriptions (user_id, plan, status, current_period_start, current_period_end)
               VALUES (${userId}, ${plan}, 'active', date_trunc('milliseconds', now()), date_trunc('milliseconds', now()) + interval '1 month')`
    return { userId, plan }
  }).pipe(Effect.orDie)
