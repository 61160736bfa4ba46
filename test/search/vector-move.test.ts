/**
 * Beside the embedded database the vectors live in a PGlite of their own (`PgvectorIndex.apartLayer`),
 * so that a hybrid search's two halves run at once. An embedded DATA_DIR written by an earlier
 * version keeps its collections in the app's PGlite: they move over at start, once, whole, and the
 * old tables go. Adapter-level and PGlite only, so it runs once, in embedded mode.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as PgvectorIndex from "../../layers/pgvector-index.ts"
import * as Pglite from "../../layers/pglite.ts"
import { collectionName, VectorIndex, type VectorIndexShape, type VectorPoint } from "../../services/search/vector-index.ts"
import { createDataDir, mode } from "../support/services.ts"

const MODEL = "move-test"
/** More than one batch of the move (500 rows). */
const POINTS = 1_234

/** Point `i`: a unit vector of its own in 8 dimensions, in one of two namespaces. */
const pointOf = (i: number, dimensions = 8): VectorPoint => {
  const vector = Float32Array.from({ length: dimensions }, (_, d) => Math.sin((i + 1) * (d + 1) * 0.37) + (d === i % dimensions ? 2 : 0))
  const norm = Math.hypot(...vector)
  return {
    emailId: `e${String(i).padStart(5, "0")}`,
    chunk: i % 3,
    namespace: i % 2 === 0 ? "ns-even" : "ns-odd",
    mailboxId: "mb-1",
    domain: "a.example",
    date: new Date(Date.UTC(2025, 0, 1 + (i % 28))),
    vector: vector.map((x) => x / norm)
  }
}

/** Run `use` with what `layer` builds, then close it (and its PGlites). */
const withLayer = <A, ROut>(layer: Layer.Layer<ROut, unknown>, use: (context: Context.Context<ROut>) => Effect.Effect<A, unknown>) =>
  Effect.scoped(Effect.flatMap(Layer.build(layer), use))

const appDatabase = (dir: string) => Pglite.layer({ dataDir: dir })

/** The index as the app opens it beside the embedded database. */
const apart = (dir: string) =>
  PgvectorIndex.apartLayer.pipe(Layer.provide(PgvectorIndex.embeddedDatabaseLayer(dir)), Layer.provideMerge(appDatabase(dir)))

/** The tables named like collections in a PGlite's database. */
const collectionTables = (sql: SqlClient.SqlClient) =>
  Effect.map(
    sql<{ name: string }>`SELECT tablename AS name FROM pg_tables WHERE schemaname = 'public' AND starts_with(tablename, 'emails_') ORDER BY 1`,
    (rows) => rows.map((row) => row.name)
  )

const indexesOf = (sql: SqlClient.SqlClient, table: string) =>
  Effect.map(sql<{ name: string }>`SELECT indexname AS name FROM pg_indexes WHERE tablename = ${table} ORDER BY 1`, (rows) =>
    rows.map((row) => row.name))

const collectionOf = (index: VectorIndexShape, dimensions = 8) => index.collection(MODEL, dimensions)

describe.skipIf(mode !== "embedded")("vectors apart from the embedded database", () => {
  it.scoped("an earlier version's collections move into the index's own PGlite at start, once, and leave the app's", () =>
    Effect.gen(function*() {
      const data = createDataDir()
      yield* Effect.addFinalizer(() => Effect.sync(data.remove))
      const table = collectionName(MODEL, 8)
      const wide = collectionName(MODEL, 3_000)

      // As an earlier version kept them: in the app's PGlite (pgvector over its SqlClient).
      yield* withLayer(PgvectorIndex.layer.pipe(Layer.provideMerge(appDatabase(data.dir))), (context) =>
        Effect.gen(function*() {
          const index = Context.get(context, VectorIndex)
          yield* (yield* collectionOf(index)).upsert(Array.from({ length: POINTS }, (_, i) => pointOf(i)))
          // A second collection, above pgvector's 2,000 dimensions for `vector`: halfvec.
          yield* (yield* collectionOf(index, 3_000)).upsert([pointOf(1, 3_000), pointOf(2, 3_000)])
        }))

      // A move cut short before: the index's own PGlite already holds part of the table (here a row
      // the old one does not have), and the old table is still there. The move starts over.
      yield* withLayer(PgvectorIndex.embeddedLayer(data.dir), (context) =>
        Effect.flatMap(collectionOf(Context.get(context, VectorIndex)), (collection) =>
          collection.upsert([{ ...pointOf(0), emailId: "left-over" }])))

      yield* withLayer(apart(data.dir), (context) =>
        Effect.gen(function*() {
          const collection = yield* collectionOf(Context.get(context, VectorIndex))
          expect(yield* collection.count()).toBe(POINTS)
          expect(yield* collection.count("ns-odd")).toBe(POINTS / 2)
          // Every field came along: the nearest to point 777 is point 777, in its namespace only.
          const probe = pointOf(777)
          const hits = yield* collection.search(probe.vector, { namespace: "ns-odd", mailboxIds: ["mb-1"] }, 3)
          expect(hits[0]).toEqual({ emailId: probe.emailId, similarity: expect.closeTo(1, 5) })
          expect(yield* collection.search(probe.vector, { namespace: "ns-even" }, 50)).not.toContainEqual(
            expect.objectContaining({ emailId: probe.emailId })
          )
          const wideCollection = yield* collectionOf(Context.get(context, VectorIndex), 3_000)
          expect(yield* wideCollection.count()).toBe(2)
          // The app's PGlite holds no collection any more.
          expect(yield* collectionTables(Context.get(context, SqlClient.SqlClient))).toEqual([])
        }))

      // In the index's own PGlite: both tables, each with its HNSW index built after the rows.
      yield* withLayer(Pglite.layer({ dataDir: path.join(data.dir, "vectors") }), (context) =>
        Effect.gen(function*() {
          const sql = Context.get(context, SqlClient.SqlClient)
          expect(yield* collectionTables(sql)).toEqual([table, wide].sort())
          expect(yield* indexesOf(sql, table)).toEqual([`${table}_hnsw`, `${table}_namespace`, `${table}_pkey`, `${table}_undescribed`])
          const dates = yield* sql<{ date: Date }>`SELECT date FROM ${sql(table)} WHERE email_id = ${pointOf(40).emailId}`
          expect(dates.map((row) => row.date.toISOString())).toEqual([pointOf(40).date.toISOString()])
        }))

      // The next start finds nothing to move and keeps what it has.
      yield* withLayer(apart(data.dir), (context) =>
        Effect.gen(function*() {
          const collection = yield* collectionOf(Context.get(context, VectorIndex))
          expect(yield* collection.count()).toBe(POINTS)
        }))
      expect(fs.existsSync(path.join(data.dir, "vectors", "pglite"))).toBe(true)
    }), { timeout: 120_000 })
})
