/**
 * The database pool's two time limits (layers/postgres.ts), on the embedded database, whose pool has
 * one connection: a query queued behind a statement that runs longer than the 5 s connect limit
 * still gets the connection and answers, where it used to fail with "Failed to acquire connection".
 * (The same pool serves PostgreSQL; with one connection the embedded database is where a long
 * statement makes others wait.)
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { testDatabase } from "../support/database.ts"
import { mode } from "../support/services.ts"

layer(testDatabase, { timeout: 60_000 })("database pool", (it) => {
  it.effect.skipIf(mode !== "embedded")(
    "a query waits for the one connection behind a statement longer than the connect limit, and answers",
    () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const long = yield* Effect.fork(sql`SELECT pg_sleep(6)`)
        // The sleeper takes the connection first (a wall-clock wait: the suite's TestClock would never end an Effect.sleep).
        yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 200)))
        const started = Date.now()
        const [row] = yield* sql<{ readonly answer: number }>`SELECT 42 AS answer`
        expect(row?.answer).toBe(42)
        expect(Date.now() - started).toBeGreaterThan(5_000) // it did wait behind the sleeper
        yield* Fiber.join(long)
      }),
    30_000
  )
})
