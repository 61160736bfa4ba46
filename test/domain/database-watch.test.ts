/**
 * A connection whose server has gone silent (layers/postgres.ts `watchConnections`): PostgreSQL behind a
 * TCP proxy that stops carrying bytes on the open connections while new ones still reach the server (a
 * failover that moved its address). A statement sent into the silence fails within seconds rather than
 * the kernel's ~15 minutes, and the next one works; a statement the server is still running is left
 * alone however long it takes, behind a pooler too. The statements read nothing, so the machine's `test`
 * database serves.
 * The PostgreSQL + NATS run only: the embedded database's pool is not watched (nothing stands between).
 */
import { SqlClient } from "@effect/sql"
import { Cause, Effect, Exit, Fiber, Redacted } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Postgres from "../../layers/postgres.ts"
import { unreachableDependency } from "../../services/health/dependency-health.ts"
import { startPgBouncer } from "../support/pgbouncer.ts"
import { startTcpProxy, type TcpProxy } from "../support/tcp-proxy.ts"

const serverUrl = process.env.DATABASE_URL

describe.skipIf(serverUrl === undefined)("a database connection the server no longer answers on", () => {
  let proxy: TcpProxy

  beforeAll(async () => {
    const target = new URL(serverUrl!)
    proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || 5432) })
  })
  afterAll(() => proxy?.close())

  /** `program` on a pool of one connection through the proxy, closed afterwards. */
  const overProxy = <A, E>(program: Effect.Effect<A, E, SqlClient.SqlClient>) => {
    const url = new URL(serverUrl!)
    url.hostname = "127.0.0.1"
    url.port = String(proxy.port)
    return Effect.runPromise(Effect.scoped(Effect.provide(program, Postgres.layer({ url: Redacted.make(url.toString()), maxConnections: 1 }))))
  }

  it("fails a statement sent into the silence within seconds, and the next one runs on a fresh connection", async () => {
    try {
      await overProxy(Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* sql`SELECT 1`
        proxy.freeze("open")
        const started = Date.now()
        const lost = yield* Effect.exit(sql`SELECT 2 AS two`)
        const waited = Date.now() - started
        // Failed as the database unreachable (a 503 at the API), not as a fault.
        expect(Exit.isFailure(lost) && unreachableDependency(Cause.squash(lost.cause))).toBe("database")
        // Unanswered for 10 s, then checked: the server is not running it.
        expect(waited).toBeGreaterThanOrEqual(9_500)
        expect(waited).toBeLessThan(20_000)
        const [row] = yield* sql<{ readonly three: number }>`SELECT 3 AS three`
        expect(row?.three).toBe(3)
      }))
    } finally {
      proxy.thaw()
    }
  }, 40_000)

  it("drops a connection whose answer stops arriving half-way (the server waiting to write it)", async () => {
    try {
      await overProxy(Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* sql`SELECT 1`
        const before = proxy.carried()
        // A megabyte a row, a row every 50 ms: frozen once the answer has begun to arrive.
        const large = yield* Effect.fork(Effect.exit(sql`SELECT repeat('x', 1000000) AS filler, pg_sleep(0.05) FROM generate_series(1, 400)`))
        while (proxy.carried() < before + 2_000_000) yield* Effect.sleep("10 millis")
        proxy.freeze("open")
        const started = Date.now()
        const lost = yield* Fiber.join(large)
        expect(Exit.isFailure(lost)).toBe(true)
        expect(Date.now() - started).toBeLessThan(25_000)
        const [row] = yield* sql<{ readonly four: number }>`SELECT 4 AS four`
        expect(row?.four).toBe(4)
      }))
    } finally {
      proxy.thaw()
    }
  }, 40_000)

  it("leaves a statement the server is still running alone, however long it takes", async () => {
    const [row] = await overProxy(Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ readonly answer: number }>`SELECT pg_sleep(14), 7 AS answer`))
    expect(row?.answer).toBe(7)
  }, 40_000)

  it("behind a pooler (PgBouncer, whose connections' process ids are its own), leaves a long statement alone too", async () => {
    const pooler = await startPgBouncer(serverUrl!)
    try {
      const pooled = Postgres.layer({ url: Redacted.make(pooler.url), maxConnections: 1, preparedStatements: false })
      const [row] = await Effect.runPromise(Effect.scoped(Effect.provide(
        Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ readonly answer: number }>`SELECT pg_sleep(14), 8 AS answer`),
        pooled
      )))
      expect(row?.answer).toBe(8)
    } finally {
      await pooler.close()
    }
  }, 40_000)
})
