/**
 * `/readyz`'s question to the database (layers/postgres.ts `probe`): whether the server answers, not
 * whether this process's pool has a connection to spare. With every connection lent out to long
 * statements the server still counts as reachable, answered at once on a connection of its own; a
 * server that has gone silent or refuses connections does not, within the probe's 2 s.
 * The PostgreSQL + NATS run only: the embedded database is reached in-process, through its pool.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Fiber, Redacted } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Postgres from "../../layers/postgres.ts"
import { DatabaseProbe } from "../../services/health/database-probe.ts"
import { startTcpProxy, type TcpProxy } from "../support/tcp-proxy.ts"

const serverUrl = process.env.DATABASE_URL

describe.skipIf(serverUrl === undefined)("whether the database answers", () => {
  let proxy: TcpProxy

  beforeAll(async () => {
    const target = new URL(serverUrl!)
    proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || 5432) })
  })
  afterAll(() => proxy?.close())

  /** `program` on a pool of two connections through the proxy, closed afterwards. */
  const overProxy = <A, E>(program: Effect.Effect<A, E, SqlClient.SqlClient | DatabaseProbe>) => {
    const url = new URL(serverUrl!)
    url.hostname = "127.0.0.1"
    url.port = String(proxy.port)
    return Effect.runPromise(Effect.scoped(Effect.provide(program, Postgres.layer({ url: Redacted.make(url.toString()), maxConnections: 2 }))))
  }

  /** Both of the pool's connections busy for `seconds`. */
  const fillThePool = (seconds: number) =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const sleepers = yield* Effect.fork(Effect.all([sql`SELECT pg_sleep(${seconds})`, sql`SELECT pg_sleep(${seconds})`], { concurrency: 2 }))
      // Both statements on their way (a wall-clock wait).
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 300)))
      return sleepers
    })

  it("is reachable at once while every connection of the pool is busy, where a query through the pool waits its turn", async () => {
    await overProxy(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const probe = yield* DatabaseProbe
      expect(yield* probe.reachable).toBe(true)
      const sleepers = yield* fillThePool(4)
      const started = Date.now()
      expect(yield* probe.reachable).toBe(true)
      expect(Date.now() - started).toBeLessThan(1_500)
      // The pool itself has nothing to spare: its next query answers only after a sleeper.
      yield* sql`SELECT 1`
      expect(Date.now() - started).toBeGreaterThan(3_000)
      yield* Fiber.join(sleepers)
    }))
  }, 30_000)

  it("is not reachable within seconds when the server goes silent under a full pool, nor while it refuses connections", async () => {
    await overProxy(Effect.gen(function*() {
      const probe = yield* DatabaseProbe
      const sleepers = yield* fillThePool(30)
      proxy.freeze()
      try {
        const started = Date.now()
        expect(yield* probe.reachable).toBe(false)
        expect(Date.now() - started).toBeLessThan(3_500)
      } finally {
        proxy.thaw()
      }
      yield* Fiber.interrupt(sleepers)
      yield* Effect.promise(() => proxy.cut())
      try {
        const started = Date.now()
        expect(yield* probe.reachable).toBe(false)
        expect(Date.now() - started).toBeLessThan(3_500)
      } finally {
        yield* Effect.promise(() => proxy.restore())
      }
      expect(yield* probe.reachable).toBe(true)
    }))
  }, 60_000)
})
