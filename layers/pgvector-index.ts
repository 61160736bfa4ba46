/**
 * The pgvector VectorIndex: one table per embedding model with an HNSW index (cosine distance).
 *
 * It lives in the app's SQL database when that database has the `vector` extension (PGlite always
 * has it), otherwise in an embedded PGlite of its own under `DATA_DIR/vectors`, which serves a
 * single process only (DESIGN.md §1). Tables are created here rather than by a migration because
 * the extension may be missing and each model has its own dimension.
 *
 * Filtered searches (one namespace among many) use pgvector's iterative index scans, so a small
 * namespace still gets its `limit` neighbours instead of whatever survives the filter of the first
 * `ef_search` candidates.
 */
import { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Context, Effect, Layer } from "effect"
import * as path from "node:path"
import {
  collectionName,
  type VectorCollection,
  VectorIndex,
  VectorIndexError,
  type VectorPoint
} from "../services/search/vector-index.ts"
import * as Pglite from "./pglite.ts"

/** pgvector's HNSW indexes `vector` up to 2,000 dimensions and `halfvec` up to 4,000. */
const MAX_VECTOR_DIMENSIONS = 2_000
const UPSERT_BATCH = 500
/** Candidates the HNSW search keeps at least: recall against speed (pgvector allows 1-1000). */
const EF_SEARCH = 100
const MAX_EF_SEARCH = 1_000
/** Chunks fetched at first per email asked for: most emails have one or two, and search answers emails. */
const CHUNKS_PER_EMAIL = 1.5

/** The database's own words, not only @effect/sql's "Failed to execute statement". */
const failed = (what: string) => (cause: SqlError) => {
  const reason = cause.cause instanceof Error ? cause.cause.message : cause.message
  return new VectorIndexError({ message: `pgvector: could not ${what}: ${reason}`, cause })
}

const literal = (vector: Float32Array) => `[${Array.from(vector).join(",")}]`

const makeIndex = (sql: SqlClient.SqlClient, kind: string) =>
  Effect.gen(function*() {
    yield* sql`CREATE EXTENSION IF NOT EXISTS vector`.pipe(Effect.mapError(failed("enable the vector extension")))

    const collection = Effect.fn("PgvectorIndex.collection")(function*(model: string, dimensions: number) {
      const table = collectionName(model, dimensions)
      const half = dimensions > MAX_VECTOR_DIMENSIONS
      const type = sql.literal(`${half ? "halfvec" : "vector"}(${dimensions})`)
      const ops = sql.literal(half ? "halfvec_cosine_ops" : "vector_cosine_ops")
      const create = sql`
        CREATE TABLE IF NOT EXISTS ${sql(table)} (
          email_id   text NOT NULL,
          chunk      integer NOT NULL,
          namespace  text NOT NULL,
          mailbox_id text NOT NULL,
          domain     text NOT NULL,
          date       timestamptz NOT NULL,
          embedding  ${type} NOT NULL,
          PRIMARY KEY (email_id, chunk)
        )`
      // Concurrent starts may race to create the same table: the loser sees a unique violation.
      yield* Effect.all([
        create,
        sql`CREATE INDEX IF NOT EXISTS ${sql(`${table}_hnsw`)} ON ${sql(table)} USING hnsw (embedding ${ops})`,
        sql`CREATE INDEX IF NOT EXISTS ${sql(`${table}_namespace`)} ON ${sql(table)} (namespace, mailbox_id)`
      ], { discard: true }).pipe(
        sql.withTransaction,
        Effect.retry({ times: 2 }),
        Effect.mapError(failed(`create ${table}`))
      )

      const upsert = (points: ReadonlyArray<VectorPoint>) =>
        Effect.forEach(
          Array.from({ length: Math.ceil(points.length / UPSERT_BATCH) }, (_, i) => points.slice(i * UPSERT_BATCH, (i + 1) * UPSERT_BATCH)),
          (batch) =>
            sql`
              INSERT INTO ${sql(table)} (email_id, chunk, namespace, mailbox_id, domain, date, embedding)
              SELECT email_id, chunk, namespace, mailbox_id, domain, date, embedding::${type}
              FROM unnest(${batch.map((p) => p.emailId)}::text[], ${batch.map((p) => p.chunk)}::int[],
                          ${batch.map((p) => p.namespace)}::text[], ${batch.map((p) => p.mailboxId)}::text[],
                          ${batch.map((p) => p.domain)}::text[], ${batch.map((p) => p.date)}::timestamptz[],
                          ${batch.map((p) => literal(p.vector))}::text[])
                AS p (email_id, chunk, namespace, mailbox_id, domain, date, embedding)
              ON CONFLICT (email_id, chunk) DO UPDATE SET
                namespace = EXCLUDED.namespace, mailbox_id = EXCLUDED.mailbox_id, domain = EXCLUDED.domain,
                date = EXCLUDED.date, embedding = EXCLUDED.embedding`,
          { discard: true }
        ).pipe(Effect.mapError(failed(`store vectors in ${table}`)))

      const search: VectorCollection["search"] = (vector, filter, limit, options) => {
        if (limit <= 0 || (filter.mailboxIds !== undefined && filter.mailboxIds.length === 0)) return Effect.succeed([])
        const query = sql`${literal(vector)}::${type}`
        const mailboxes = filter.mailboxIds === undefined ? sql`` : sql`AND mailbox_id = ANY(${[...filter.mailboxIds]}::text[])`
        const nearest = (rows: number) =>
          Effect.gen(function*() {
            if (options?.exact) {
              yield* sql`SET LOCAL enable_indexscan = off`
            } else {
              // Without fresh statistics (PGlite has no autovacuum) the planner prefers the namespace
              // index and a sort, which is an exact search over the whole namespace: with sorting
              // off, the HNSW index is the only way to the order asked for.
              yield* sql`SELECT set_config('hnsw.ef_search', ${String(Math.min(MAX_EF_SEARCH, Math.max(EF_SEARCH, rows)))}, true),
                                set_config('hnsw.iterative_scan', 'relaxed_order', true),
                                set_config('enable_sort', 'off', true)`
            }
            return yield* sql<{ emailId: string; distance: number }>`
              SELECT email_id, embedding <=> ${query} AS distance
              FROM ${sql(table)}
              WHERE namespace = ${filter.namespace} ${mailboxes}
              ORDER BY embedding <=> ${query}
              LIMIT ${rows}`
          })
        return Effect.gen(function*() {
          // Search answers emails, the rows are chunks: when the nearest rows hold fewer than `limit`
          // emails (a long email has up to 16 chunks) and there may be more, look further.
          for (let rows = Math.ceil(limit * CHUNKS_PER_EMAIL); ; rows *= 4) {
            const found = yield* nearest(rows)
            // Relaxed order: the index may answer slightly out of order. Best chunk per email.
            const best = new Map<string, number>()
            for (const row of found) {
              const similarity = 1 - Number(row.distance)
              if ((best.get(row.emailId) ?? -Infinity) < similarity) best.set(row.emailId, similarity)
            }
            if (best.size >= limit || found.length < rows) return best
          }
        }).pipe(
          sql.withTransaction,
          Effect.map((best) =>
            [...best].map(([emailId, similarity]) => ({ emailId, similarity }))
              .sort((a, b) => b.similarity - a.similarity)
              .slice(0, limit)
          ),
          Effect.mapError(failed(`search ${table}`))
        )
      }

      const remove = (emailIds: ReadonlyArray<string>) =>
        emailIds.length === 0 ? Effect.void : sql`DELETE FROM ${sql(table)} WHERE email_id = ANY(${[...emailIds]}::text[])`.pipe(
          Effect.asVoid,
          Effect.mapError(failed(`remove vectors from ${table}`))
        )

      const count = (namespace?: string) =>
        sql<{ n: string }>`SELECT count(*) AS n FROM ${sql(table)} ${namespace === undefined ? sql`` : sql`WHERE namespace = ${namespace}`}`.pipe(
          Effect.map((rows) => Number(rows[0]?.n ?? 0)),
          Effect.mapError(failed(`count ${table}`))
        )

      return { model, dimensions, upsert, search, remove, count } satisfies VectorCollection
    })

    return {
      kind,
      collection,
      ping: sql`SELECT 1`.pipe(Effect.asVoid, Effect.mapError(failed("reach the database")))
    }
  })

/** pgvector in this SqlClient's database; it must have the extension. */
export const layer: Layer.Layer<VectorIndex, VectorIndexError, SqlClient.SqlClient> = Layer.effect(
  VectorIndex,
  Effect.flatMap(SqlClient.SqlClient, (sql) => makeIndex(sql, "pgvector"))
)

/** pgvector in an embedded PGlite of its own under `dataDir/vectors`. */
export const embeddedLayer = (dataDir: string): Layer.Layer<VectorIndex, VectorIndexError> =>
  Layer.scoped(
    VectorIndex,
    Effect.gen(function*() {
      const context = yield* Layer.build(Pglite.layer({ dataDir: path.join(dataDir, "vectors") })).pipe(
        Effect.mapError((cause) => new VectorIndexError({ message: `Could not open the embedded vector index: ${cause.message}`, cause }))
      )
      return yield* makeIndex(Context.get(context, SqlClient.SqlClient), "pgvector (embedded)")
    })
  )

/**
 * The app database when it can hold vectors, else the embedded one: what an operator gets without
 * `QDRANT_URL`. A process that shares its work with others (`embedded: "refuse"`) cannot use an
 * index only it can see, and says what to set instead.
 */
export const autoLayer = (options: { readonly dataDir: string; readonly embedded: "allow" | "refuse" }): Layer.Layer<VectorIndex, VectorIndexError, SqlClient.SqlClient> =>
  Layer.unwrapEffect(
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const available = yield* sql`SELECT 1 FROM pg_available_extensions WHERE name = 'vector'`.pipe(
        Effect.mapError(failed("look for the vector extension"))
      )
      if (available.length > 0) return layer
      if (options.embedded === "refuse") {
        return yield* new VectorIndexError({
          message: "This node shares its work with others, so the vector index must be shared too: set QDRANT_URL, " +
            "or use a PostgreSQL with the pgvector extension as DATABASE_URL (the embedded index serves a single all-role process only)"
        })
      }
      return embeddedLayer(options.dataDir)
    })
  )
