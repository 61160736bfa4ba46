/**
 * The embedded database's upkeep (layers/pglite.ts): PGlite runs no autovacuum, so the app vacuums
 * and analyses each table by autovacuum's own rules. In process, on the embedded database only (a
 * PostgreSQL server's autovacuum would race the assertions, and the app leaves it to the server).
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { autovacuumDue, upkeep } from "../../layers/pglite.ts"
import { testDatabase } from "../support/database.ts"
import { mode } from "../support/services.ts"
import { sleep } from "../support/wait.ts"

const quiet = { live: 100_000, dead: 0, insertedSinceVacuum: 0, modifiedSinceAnalyze: 0, everVacuumed: true }

layer(testDatabase, { timeout: 60_000 })("embedded database upkeep", (it) => {
  it.effect.skipIf(mode !== "embedded")("a table is due by autovacuum's default thresholds", () =>
    Effect.sync(() => {
      expect(autovacuumDue(quiet)).toBeUndefined()
      // Dead rows past 50 + 20%, inserted rows past 1,000 + 20%.
      expect(autovacuumDue({ ...quiet, dead: 20_050 })).toBeUndefined()
      expect(autovacuumDue({ ...quiet, dead: 20_051 })).toBe("vacuum")
      expect(autovacuumDue({ ...quiet, insertedSinceVacuum: 21_000 })).toBeUndefined()
      expect(autovacuumDue({ ...quiet, insertedSinceVacuum: 21_001 })).toBe("vacuum")
      // Changed rows past 50 + 10%: statistics only.
      expect(autovacuumDue({ ...quiet, modifiedSinceAnalyze: 10_051 })).toBe("analyze")
      // Never vacuumed: once, when it holds rows.
      expect(autovacuumDue({ ...quiet, everVacuumed: false })).toBe("vacuum")
      expect(autovacuumDue({ ...quiet, live: 0, everVacuumed: false })).toBeUndefined()
    }))

  it.effect.skipIf(mode !== "embedded")(
    "a table that took many rows is vacuumed, so an index-only scan no longer reads the table; then left alone",
    () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        // The migrations' tables are due at first; one pass settles them.
        yield* upkeep
        yield* sql`CREATE TABLE upkeep_probe (id int PRIMARY KEY, word text NOT NULL)`
        yield* sql`CREATE INDEX upkeep_probe_word ON upkeep_probe (word, id)`
        yield* sql`INSERT INTO upkeep_probe SELECT g, md5(g::text) FROM generate_series(1, 5000) AS g`
        const probeScan = sql<{ "QUERY PLAN": string }>`
          EXPLAIN (ANALYZE, FORMAT TEXT) SELECT id FROM upkeep_probe WHERE word >= '8' ORDER BY word`.pipe(
          Effect.map((rows) => rows.map((row) => Object.values(row).join(" ")).find((line) => line.includes("Heap Fetches")) ?? "")
        )
        // Statistics reach pg_stat_user_tables within a second or so: pass until the table is seen.
        let done: ReadonlyArray<{ readonly table: string; readonly action: string }> = []
        for (let tries = 0; tries < 40 && !done.some((d) => d.table === "public.upkeep_probe"); tries++) {
          yield* sql`SET enable_seqscan = off`
          const before = yield* probeScan
          if (tries === 0) expect(before).not.toMatch(/Heap Fetches: 0\b/)
          yield* Effect.promise(() => sleep(100))
          done = yield* upkeep
        }
        expect(done).toContainEqual(expect.objectContaining({ table: "public.upkeep_probe", action: "vacuum" }))
        expect(yield* probeScan).toMatch(/Heap Fetches: 0\b/)
        // Nothing changed since: the next pass leaves it be.
        expect((yield* upkeep).map((d) => d.table)).not.toContain("public.upkeep_probe")
        yield* sql`RESET enable_seqscan`
      }),
    30_000
  )
})
