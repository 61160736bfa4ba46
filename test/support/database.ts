/**
 * A migrated database of its own for an in-process suite (`layer(testDatabase)` from @effect/vitest):
 * the rules of a domain service are tested against real SQL without starting a process.
 *
 * - Embedded mode (no `DATABASE_URL`): PGlite under a fresh temporary DATA_DIR, started from the
 *   migrated copy global-setup makes, so a suite pays neither for initdb nor for the migrations.
 * - Services mode (`DATABASE_URL` set): a fresh database on that server, a copy of the migrated one
 *   global-setup makes there, dropped when the suite ends.
 *
 * The migrations still run (`migrate`), finding every one applied: that applying them to an empty
 * database works is proved by making the copies, on either database.
 *
 * Either way a temporary directory comes with it (`TestDataDir`), for what a suite keeps beside the
 * database (an embedded vector index when the server has no pgvector), and is removed afterwards.
 */
import type { PgClient } from "@effect/sql-pg"
import type { MigrationError } from "@effect/sql/Migrator"
import type { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Context, Effect, Layer, Redacted } from "effect"
import * as Pglite from "../../layers/pglite.ts"
import * as Postgres from "../../layers/postgres.ts"
import { migrate } from "../../src/database.ts"
import { adminDatabaseUrl, createDatabase, createDataDir, testPgliteSharedBuffers } from "./services.ts"

/** The suite's temporary DATA_DIR (in embedded mode the database lives under it too). */
export class TestDataDir extends Context.Tag("test/TestDataDir")<TestDataDir, string>() {}

const dataDir = Layer.scoped(
  TestDataDir,
  Effect.acquireRelease(Effect.sync(() => createDataDir({ migrated: true })), (dir) => Effect.sync(dir.remove)).pipe(Effect.map((dir) => dir.dir))
)

const connection: Layer.Layer<PgClient.PgClient | SqlClient, SqlError, TestDataDir> = adminDatabaseUrl !== undefined
  ? Layer.unwrapScoped(
    Effect.acquireRelease(Effect.promise(() => createDatabase(adminDatabaseUrl!, { migrated: true })), (db) => Effect.promise(db.drop)).pipe(
      Effect.map((db) => Postgres.layer({ url: Redacted.make(db.url), maxConnections: 4 }))
    )
  )
  : Layer.unwrapEffect(Effect.map(TestDataDir, (dir) => Pglite.layer({ dataDir: dir, sharedBuffers: testPgliteSharedBuffers })))

export const testDatabase: Layer.Layer<
  PgClient.PgClient | SqlClient | TestDataDir,
  SqlError | MigrationError
> = Layer.effectDiscard(migrate).pipe(
  Layer.provideMerge(connection),
  Layer.provideMerge(dataDir)
)
