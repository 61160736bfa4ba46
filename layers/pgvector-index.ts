/**
 * The pgvector VectorIndex: one table per embedding model with an HNSW index (cosine distance).
 *
 * It lives in the app's PostgreSQL when that database has the `vector` extension, otherwise in an
 * embedded PGlite of its own under `DATA_DIR/vectors`, which serves a single process only (DESIGN.md
 * §1). Beside the embedded app database it is always a PGlite of its own (`apartLayer`): a PGlite is
 * one backend running one statement at a time, so in the app's PGlite a hybrid search's nearest
 * neighbours would wait for its word ranking; in two they run at once, each on its own thread.
 * Tables are created here rather than by a migration because the extension may be missing and each
 * model has its own dimension.
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
  COLLECTION_PREFIX,
  collectionName,
  type VectorCollection,
  type PointDescription,
  type VectorFilter,
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

const vectorType = (sql: SqlClient.SqlClient, dimensions: number) =>
  sql.literal(`${dimensions > MAX_VECTOR_DIMENSIONS ? "halfvec" : "vector"}(${dimensions})`)

const hnswIndex = (sql: SqlClient.SqlClient, table: string, dimensions: number) =>
  sql`CREATE INDEX IF NOT EXISTS ${sql(`${table}_hnsw`)} ON ${sql(table)}
      USING hnsw (embedding ${sql.literal(dimensions > MAX_VECTOR_DIMENSIONS ? "halfvec_cosine_ops" : "vector_cosine_ops")})`

/** A collection's table with its two indexes, where missing. */
const createTable = (sql: SqlClient.SqlClient, table: string, dimensions: number) =>
  Effect.all([
    sql`
      CREATE TABLE IF NOT EXISTS ${sql(table)} (
        email_id   text NOT NULL,
        chunk      integer NOT NULL,
        namespace  text NOT NULL,
        mailbox_id text NOT NULL,
        domain     text NOT NULL,
        date       timestamptz NOT NULL,
        embedding  ${vectorType(sql, dimensions)} NOT NULL,
        sender_keys text[],
        received_at timestamptz,
        PRIMARY KEY (email_id, chunk)
      )`,
    // Kept since 2026-12: a table of before has them added, its rows without (the search lets those
    // through until the worker describes them, `undescribed`, which this index finds at once).
    sql`ALTER TABLE ${sql(table)} ADD COLUMN IF NOT EXISTS sender_keys text[], ADD COLUMN IF NOT EXISTS received_at timestamptz`,
    sql`CREATE INDEX IF NOT EXISTS ${sql(`${table}_undescribed`)} ON ${sql(table)} (email_id) WHERE received_at IS NULL`,
    hnswIndex(sql, table, dimensions),
    sql`CREATE INDEX IF NOT EXISTS ${sql(`${table}_namespace`)} ON ${sql(table)} (namespace, mailbox_id)`
  ], { discard: true }).pipe(
    sql.withTransaction,
    // Concurrent starts may race to create the same table: the loser sees a unique violation.
    Effect.retry({ times: 2 }),
    Effect.mapError(failed(`create ${table}`))
  )

/** The collections' tables in `sql`'s database (each model's), with their vectors' column type. */
const collectionTables = (sql: SqlClient.SqlClient) =>
  sql<{ table: string; type: string }>`
    SELECT c.relname AS table, format_type(a.atttypid, a.atttypmod) AS type
    FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
    WHERE a.attname = 'embedding' AND NOT a.attisdropped AND c.relkind = 'r'
      AND c.relnamespace = 'public'::regnamespace AND starts_with(c.relname, ${COLLECTION_PREFIX})
    ORDER BY c.relname`

/** A point as a row: its vector in pgvector's text form, `[0.1,0.2,…]`. */
interface Row extends Omit<VectorPoint, "vector"> {
  readonly embedding: string
}

/**
 * Rows written in one statement, each replacing the one of its email and chunk. A row's sender keys
 * travel as one text, a line each (`unnest` would flatten an array of arrays), none as NULL.
 */
const insertRows = (sql: SqlClient.SqlClient, table: string, dimensions: number, rows: ReadonlyArray<Row>) =>
  sql`
    INSERT INTO ${sql(table)} (email_id, chunk, namespace, mailbox_id, domain, date, embedding, sender_keys, received_at)
    SELECT email_id, chunk, namespace, mailbox_id, domain, date, embedding::${vectorType(sql, dimensions)},
           string_to_array(sender_keys, E'\\n'), received_at
    FROM unnest(${rows.map((r) => r.emailId)}::text[], ${rows.map((r) => r.chunk)}::int[],
                ${rows.map((r) => r.namespace)}::text[], ${rows.map((r) => r.mailboxId)}::text[],
                ${rows.map((r) => r.domain)}::text[], ${rows.map((r) => r.date)}::timestamptz[],
                ${rows.map((r) => r.embedding)}::text[], ${rows.map((r) => r.senderKeys?.join("\n") ?? null)}::text[],
                ${rows.map((r) => r.receivedAt ?? null)}::timestamptz[])
      AS p (email_id, chunk, namespace, mailbox_id, domain, date, embedding, sender_keys, received_at)
    ON CONFLICT (email_id, chunk) DO UPDATE SET
      namespace = EXCLUDED.namespace, mailbox_id = EXCLUDED.mailbox_id, domain = EXCLUDED.domain,
      date = EXCLUDED.date, embedding = EXCLUDED.embedding, sender_keys = EXCLUDED.sender_keys,
      received_at = EXCLUDED.received_at`

/**
 * A filter's sender and arrival, `AND …`: met, or let through for the caller to judge when the row
 * was stored before they were kept (no arrival: every row since has one).
 */
const narrowedTo = (sql: SqlClient.SqlClient, { received, senderKey }: VectorFilter) => {
  const conditions = [
    ...(senderKey === undefined ? [] : [sql`${senderKey} = ANY(sender_keys)`]),
    ...(received?.after === undefined ? [] : [sql`received_at >= ${received.after}`]),
    ...(received?.before === undefined ? [] : [sql`received_at < ${received.before}`])
  ]
  return conditions.length === 0 ? sql`` : sql`AND (received_at IS NULL OR (${sql.and(conditions)}))`
}

/**
 * How a nearest-neighbour search runs: at least `EF_SEARCH` candidates, iterative scans (a filtered
 * search still gets its rows), and sorting off. Without fresh statistics (PGlite has no autovacuum)
 * the planner prefers the namespace index and a sort, which is an exact search over the whole
 * namespace: with sorting off, the HNSW index is the only way to the order asked for.
 */
const SEARCH_SETTINGS = { "hnsw.ef_search": String(EF_SEARCH), "hnsw.iterative_scan": "relaxed_order", "enable_sort": "off" }

/**
 * `searchSettingsAtStart`: the database is the index's alone and runs with `SEARCH_SETTINGS` from its
 * start, so a search within them is its one statement; in a shared database each search sets them
 * for its own transaction (three more round trips).
 */
const makeIndex = (sql: SqlClient.SqlClient, kind: string, options?: { readonly searchSettingsAtStart?: boolean }) =>
  Effect.gen(function*() {
    yield* sql`CREATE EXTENSION IF NOT EXISTS vector`.pipe(Effect.mapError(failed("enable the vector extension")))

    const collection = Effect.fn("PgvectorIndex.collection")(function*(model: string, dimensions: number) {
      const table = collectionName(model, dimensions)
      const type = vectorType(sql, dimensions)
      yield* createTable(sql, table, dimensions)

      const upsert = (points: ReadonlyArray<VectorPoint>) =>
        Effect.forEach(
          Array.from({ length: Math.ceil(points.length / UPSERT_BATCH) }, (_, i) => points.slice(i * UPSERT_BATCH, (i + 1) * UPSERT_BATCH)),
          (batch) => insertRows(sql, table, dimensions, batch.map((p) => ({ ...p, embedding: literal(p.vector) }))),
          { discard: true }
        ).pipe(Effect.mapError(failed(`store vectors in ${table}`)))

      const search: VectorCollection["search"] = (vector, filter, limit, searchOptions) => {
        const exact = searchOptions?.exact === true
        if (limit <= 0 || (filter.mailboxIds !== undefined && filter.mailboxIds.length === 0)) return Effect.succeed([])
        const query = sql`${literal(vector)}::${type}`
        const mailboxes = filter.mailboxIds === undefined ? sql`` : sql`AND mailbox_id = ANY(${[...filter.mailboxIds]}::text[])`
        const nearest = (rows: number) => {
          // Ordered by the distance column, not the same expression again: the query vector then
          // travels and is parsed once (~1 ms of the index's thread at 512 dimensions in PGlite),
          // and the planner still takes the HNSW index for it.
          const found = sql<{ emailId: string; distance: number }>`
              SELECT email_id, embedding <=> ${query} AS distance
              FROM ${sql(table)}
              WHERE namespace = ${filter.namespace} ${mailboxes} ${narrowedTo(sql, filter)}
              ORDER BY distance
              LIMIT ${rows}`
          if (exact) return Effect.zipRight(sql`SET LOCAL enable_indexscan = off`, found).pipe(sql.withTransaction)
          if (options?.searchSettingsAtStart && rows <= EF_SEARCH) return found
          return Effect.zipRight(
            sql`SELECT set_config('hnsw.ef_search', ${String(Math.min(MAX_EF_SEARCH, Math.max(EF_SEARCH, rows)))}, true),
                       set_config('hnsw.iterative_scan', ${SEARCH_SETTINGS["hnsw.iterative_scan"]}, true),
                       set_config('enable_sort', ${SEARCH_SETTINGS.enable_sort}, true)`,
            found
          ).pipe(sql.withTransaction)
        }
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
          Effect.map((best) =>
            [...best].map(([emailId, similarity]) => ({ emailId, similarity }))
              .sort((a, b) => b.similarity - a.similarity)
              .slice(0, limit)
          ),
          Effect.mapError(failed(`search ${table}`))
        )
      }

      // A row stored before sender and arrival were kept has no arrival (every row since has one).
      const undescribed = (from: string | undefined, limit: number) =>
        sql<{ emailId: string }>`
          SELECT DISTINCT email_id FROM ${sql(table)}
          WHERE received_at IS NULL ${from === undefined ? sql`` : sql`AND email_id > ${from}`}
          ORDER BY email_id LIMIT ${limit}`.pipe(
          Effect.map((rows) => ({
            emailIds: rows.map((row) => row.emailId),
            next: rows.length < limit ? undefined : rows[rows.length - 1]!.emailId
          })),
          Effect.mapError(failed(`read ${table}`))
        )

      const describe = (emails: ReadonlyArray<PointDescription>) =>
        emails.length === 0 ? Effect.void : sql`
          UPDATE ${sql(table)} t SET sender_keys = string_to_array(d.sender_keys, E'\\n'), received_at = d.received_at
          FROM unnest(${emails.map((e) => e.emailId)}::text[], ${emails.map((e) => e.senderKeys.join("\n"))}::text[],
                      ${emails.map((e) => e.receivedAt)}::timestamptz[]) AS d (email_id, sender_keys, received_at)
          WHERE t.email_id = d.email_id`.pipe(Effect.asVoid, Effect.mapError(failed(`describe vectors in ${table}`)))

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

      return { model, dimensions, upsert, search, undescribed, describe, remove, count } satisfies VectorCollection
    })

    const forgetNamespace = (namespace: string) =>
      Effect.flatMap(collectionTables(sql), (tables) =>
        Effect.forEach(tables, ({ table }) => sql`DELETE FROM ${sql(table)} WHERE namespace = ${namespace}`, { discard: true })).pipe(
        Effect.mapError(failed(`remove the vectors of ${namespace}`))
      )

    return {
      kind,
      collection,
      forgetNamespace,
      ping: sql`SELECT 1`.pipe(Effect.asVoid, Effect.mapError(failed("reach the database")))
    }
  })

/** pgvector in this SqlClient's database; it must have the extension. */
export const layer: Layer.Layer<VectorIndex, VectorIndexError, SqlClient.SqlClient> = Layer.effect(
  VectorIndex,
  Effect.flatMap(SqlClient.SqlClient, (sql) => makeIndex(sql, "pgvector"))
)

/** Rows moved at a time, and the memory a collection's HNSW index is built in after a move. */
const MOVE_BATCH = 500
const MOVE_BUILD_MEMORY = "512MB"

/**
 * The collections an earlier version kept in the app's embedded database, moved into the vector
 * index's own (`to`) and dropped from `from`, at start, before anything searches. The rows go in
 * without the HNSW index, which is then built in one go (about five times faster than inserting
 * into it). The old table is dropped last: a move cut short leaves it where it was, and the next
 * start moves it again from the beginning.
 */
const moveCollections = (from: SqlClient.SqlClient, to: SqlClient.SqlClient) =>
  Effect.gen(function*() {
    const tables = yield* collectionTables(from)
    for (const { table, type } of tables) {
      const dimensions = Number(/^(?:half)?vec(?:tor)?\((\d+)\)$/.exec(type)?.[1])
      if (!Number.isInteger(dimensions) || dimensions <= 0) continue
      const counted = yield* from<{ n: string }>`SELECT count(*) AS n FROM ${from(table)}`
      yield* Effect.logInfo(`Moving ${Number(counted[0]?.n ?? 0).toLocaleString("en")} vectors (${table}) from the embedded database into the vector index's own, once`)
      const started = performance.now()
      yield* createTable(to, table, dimensions)
      yield* to`DROP INDEX IF EXISTS ${to(`${table}_hnsw`)}`
      yield* to`TRUNCATE ${to(table)}`
      // Not in a transaction of `to`: @effect/sql keeps one transaction per fiber whatever the
      // client, so `from`'s reads would go to `to`'s connection.
      let after = { emailId: "", chunk: -1 }
      for (;;) {
        const rows = yield* from<Row>`
          SELECT email_id, chunk, namespace, mailbox_id, domain, date, embedding::text AS embedding
          FROM ${from(table)} WHERE (email_id, chunk) > (${after.emailId}, ${after.chunk})
          ORDER BY email_id, chunk LIMIT ${MOVE_BATCH}`
        if (rows.length === 0) break
        yield* insertRows(to, table, dimensions, rows)
        after = rows[rows.length - 1]!
      }
      yield* Effect.zipRight(
        to`SET LOCAL maintenance_work_mem = ${to.literal(`'${MOVE_BUILD_MEMORY}'`)}`,
        hnswIndex(to, table, dimensions)
      ).pipe(to.withTransaction)
      // Only now, with every row and the index in place: a move cut short before this point starts
      // over at the next start (the TRUNCATE above).
      yield* from`DROP TABLE ${from(table)}`
      yield* Effect.logInfo(`Moved ${table} in ${((performance.now() - started) / 1000).toFixed(1)} s`)
    }
  }).pipe(Effect.catchTag("SqlError", (cause) => Effect.fail(failed("move the vectors out of the embedded database")(cause))))

/**
 * The SqlClient of the vector index's own embedded PGlite (`embeddedDatabaseLayer`). A tag of its
 * own, apart from the app's SqlClient, so that a process can open the two at once (src/app.ts).
 */
export class EmbeddedVectorDatabase extends Context.Tag("EmbeddedVectorDatabase")<EmbeddedVectorDatabase, SqlClient.SqlClient>() {}

/**
 * An embedded PGlite of its own under `dataDir/vectors` for pgvector, looked after as the embedded
 * database is (PGlite has no autovacuum). `sharedBuffers` as for the embedded database (pglite.ts);
 * unset, they are sized to hold the whole index (`Pglite.buffersForData`): every search walks the
 * HNSW graph across all of it, and a page PGlite must read from its files costs many times a page
 * in its buffers (at 100,000 emails, whose index and vectors are ~460MB: the same nearest-neighbour
 * query p50 / p99 5.2 / 11.8 ms with 128MB of buffers, 2.9 / 5.7 ms with 512MB; README).
 */
export const embeddedDatabaseLayer = (
  dataDir: string,
  options?: { readonly sharedBuffers?: string | undefined }
): Layer.Layer<EmbeddedVectorDatabase, VectorIndexError> =>
  Layer.scoped(
    EmbeddedVectorDatabase,
    Effect.gen(function*() {
      const database = Pglite.upkept("the embedded vector index").pipe(
        Layer.provideMerge(Layer.unwrapEffect(Effect.gen(function*() {
          const directory = path.join(dataDir, "vectors")
          let sharedBuffers = options?.sharedBuffers
          if (sharedBuffers === undefined) {
            const sized = Pglite.buffersForData(directory)
            yield* Effect.logInfo(`The vector index's buffers: ${sized.sharedBuffers}, for ${Math.ceil(sized.dataBytes / 1024 / 1024)}MB of data`)
            sharedBuffers = sized.sharedBuffers
          }
          // Not in the database pool's gauges, which are the app database's.
          return Pglite.layer({ dataDir: directory, sharedBuffers, settings: SEARCH_SETTINGS, sampled: false })
        })))
      )
      const context = yield* Layer.build(database).pipe(
        Effect.mapError((cause) => new VectorIndexError({ message: `Could not open the embedded vector index: ${cause.message}`, cause }))
      )
      return Context.get(context, SqlClient.SqlClient)
    })
  )

/** pgvector in the vector index's own embedded PGlite. */
const onEmbeddedDatabase = (options?: { readonly movingFrom?: SqlClient.SqlClient }) =>
  Effect.gen(function*() {
    const sql = yield* EmbeddedVectorDatabase
    const index = yield* makeIndex(sql, "pgvector (embedded)", { searchSettingsAtStart: true })
    if (options?.movingFrom !== undefined) yield* moveCollections(options.movingFrom, sql)
    return index
  })

/** pgvector in an embedded PGlite of its own under `dataDir/vectors` (`embeddedDatabaseLayer`). */
export const embeddedLayer = (
  dataDir: string,
  options?: { readonly sharedBuffers?: string | undefined }
): Layer.Layer<VectorIndex, VectorIndexError> =>
  Layer.effect(VectorIndex, onEmbeddedDatabase()).pipe(Layer.provide(embeddedDatabaseLayer(dataDir, options)))

/**
 * Beside the embedded app database (the `SqlClient`, a PGlite): the vectors in a PGlite of their
 * own (`EmbeddedVectorDatabase`), so that a hybrid search's two halves run at once (see the top of
 * this file). The collections an earlier version kept in the app's PGlite move over at start, once.
 */
export const apartLayer: Layer.Layer<VectorIndex, VectorIndexError, SqlClient.SqlClient | EmbeddedVectorDatabase> = Layer
  .effect(VectorIndex, Effect.flatMap(SqlClient.SqlClient, (app) => onEmbeddedDatabase({ movingFrom: app })))

/**
 * The app's PostgreSQL when it can hold vectors, else the embedded index: what an operator gets without
 * `QDRANT_URL`. A process that shares its work with others (`embedded: "refuse"`) cannot use an
 * index only it can see, and says what to set instead.
 */
export const autoLayer = (options: {
  readonly dataDir: string
  readonly embedded: "allow" | "refuse"
  readonly sharedBuffers?: string | undefined
}): Layer.Layer<VectorIndex, VectorIndexError, SqlClient.SqlClient> =>
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
      return embeddedLayer(options.dataDir, { sharedBuffers: options.sharedBuffers })
    })
  )
