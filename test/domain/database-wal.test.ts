/**
 * The embedded database's WAL stays bounded (layers/pglite.ts `checkpoint`): PGlite runs PostgreSQL
 * single-user, with no checkpointer, so without the server's own checkpoints every WAL segment
 * written since the start stayed in `pg_wal` (800+ MB after 20,000 emails). Embedded mode only: a
 * PostgreSQL server checkpoints by itself.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Pglite from "../../layers/pglite.ts"
import { createDataDir, mode, testPgliteSharedBuffers } from "../support/services.ts"
import { until } from "../support/wait.ts"

const MB = 1024 * 1024

describe.skipIf(mode !== "embedded")("embedded database WAL", () => {
  it("a checkpoint is due past 32MB of WAL, or 5 minutes after the last with anything written", () => {
    const quiet = { sinceRedo: 200, sinceCheckpoint: 120, secondsSinceCheckpoint: 10 }
    expect(Pglite.checkpointDue(quiet)).toBe(false)
    expect(Pglite.checkpointDue({ ...quiet, sinceRedo: 32 * MB - 1 })).toBe(false)
    expect(Pglite.checkpointDue({ ...quiet, sinceRedo: 32 * MB })).toBe(true)
    // Idle for an hour: nothing to checkpoint.
    expect(Pglite.checkpointDue({ ...quiet, secondsSinceCheckpoint: 3600 })).toBe(false)
    expect(Pglite.checkpointDue({ ...quiet, sinceCheckpoint: 50_000, secondsSinceCheckpoint: 299 })).toBe(false)
    expect(Pglite.checkpointDue({ ...quiet, sinceCheckpoint: 50_000, secondsSinceCheckpoint: 300 })).toBe(true)
  })

  // The live clock and a look at the WAL every 100 ms, not the TestClock: in CI's full embedded run
  // (files sharing one module graph per worker) this test's fiber once found the live clock in place
  // of the TestClock after building the layers (`TestClock.sleeps()` then failed as 'Not a valid
  // effect: undefined'), never when run alone.
  it.live("pg_wal grown past 128MB shrinks to max_wal_size at the next look", () =>
    Effect.scoped(Effect.gen(function*() {
      const dir = yield* Effect.acquireRelease(Effect.sync(() => createDataDir()), (d) => Effect.sync(d.remove))
      const walDir = path.join(dir.dir, "pglite", "pg_wal")
      const segments = () => fs.readdirSync(walDir).filter((name) => /^[0-9A-F]{24}$/.test(name)).length
      const context = yield* Layer.build(
        Pglite.upkept("the test database", { upkeep: "1 hour", checkpoint: "100 millis" }).pipe(
          Layer.provideMerge(Pglite.layer({ dataDir: dir.dir, sharedBuffers: testPgliteSharedBuffers }))
        )
      )
      const sql = yield* Effect.provide(SqlClient.SqlClient, context)
      const [settings] = yield* sql<{ maxWalSize: string; minWalSize: string }>`
        SELECT current_setting('max_wal_size') AS max_wal_size, current_setting('min_wal_size') AS min_wal_size`
      expect(settings).toEqual({ maxWalSize: "64MB", minWalSize: "32MB" })

      for (let round = 0; round < 2; round++) {
        // 128MB of WAL (messages written to the WAL only, not decoded by anyone): 8 segments of 16MB,
        // counted while the transaction holds the one connection, so that no checkpoint comes between.
        yield* sql.withTransaction(Effect.gen(function*() {
          yield* sql`SELECT pg_logical_emit_message(false, 'wal-test', repeat(md5(g::text), 32768)) FROM generate_series(1, 128) AS g`
          expect(segments()).toBeGreaterThanOrEqual(8)
        }))
        // max_wal_size (4 segments) kept for reuse, and the one being written.
        yield* Effect.promise(() => until(() => `pg_wal within 5 segments (${segments()})`, async () => (segments() <= 5 ? true : undefined), 8_000))
      }
    })), 30_000)
})
