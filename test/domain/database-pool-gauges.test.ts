/**
 * `mailroom_db_pool_*` follow the app database's pool (layers/postgres.ts `sample`, `sampled`). Two faults
 * kept them from it: every sample after the first set the first one's counts again (the counts were read
 * once, when the repeated effect was made), and a process that also opens the vector index's own PGlite
 * (PostgreSQL without pgvector, and the embedded default) had both pools write the same gauges. A
 * PostgreSQL pool full of waiting statements read "0 in use, 1 idle". In process, the machine's
 * PostgreSQL (read-only statements) beside an embedded vector database: the PostgreSQL + NATS run.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Layer, Redacted } from "effect"
import { describe, expect, it } from "vitest"
import * as PgvectorIndex from "../../layers/pgvector-index.ts"
import * as Postgres from "../../layers/postgres.ts"
import { exposition } from "../../src/metrics.ts"
import { createDataDir } from "../support/services.ts"

const serverUrl = process.env.DATABASE_URL

/** A gauge's value in the exposition, by its name and labels as written there. */
const gauge = (series: string) => {
  const line = exposition().split("\n").find((l) => l.startsWith(`${series} `))
  return line === undefined ? undefined : Number(line.slice(series.length + 1))
}

describe.skipIf(serverUrl === undefined)("the database pool's gauges", () => {
  it("count the app database's connections, not the vector index's PGlite's beside it", async () => {
    const dataDir = createDataDir()
    try {
      const database = Postgres.layer({ url: Redacted.make(serverUrl!), maxConnections: 4 })
      const both = Layer.merge(database, PgvectorIndex.embeddedDatabaseLayer(dataDir.dir))
      await Effect.runPromise(Effect.scoped(Effect.provide(
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          // Three statements hold three of the four connections for 3 s, past two samples of both pools.
          const busy = yield* Effect.fork(Effect.all([1, 2, 3].map(() => sql`SELECT pg_sleep(3)`), { concurrency: "unbounded" }))
          yield* Effect.sleep("2200 millis")
          expect(gauge(`mailroom_db_pool_connections{state="in_use"}`)).toBe(3)
          yield* Effect.fromFiber(busy)
        }),
        both
      )))
    } finally {
      dataDir.remove()
    }
  }, 60_000)
})
