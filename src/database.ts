/**
 * The app's one SqlClient: PostgreSQL when `DATABASE_URL` is set, else the embedded PGlite under
 * `DATA_DIR`. Numbered migrations from migrations/ run before anything else uses it.
 */
import * as Migrator from "@effect/sql/Migrator"
import { SqlClient } from "@effect/sql"
import { Effect, Layer, Option, Schedule } from "effect"
import * as fs from "node:fs"
import { fileURLToPath } from "node:url"
import * as Pglite from "../layers/pglite.ts"
import * as Postgres from "../layers/postgres.ts"
import type { AppConfigShape } from "./config.ts"

export const migrationsDirectory = fileURLToPath(new URL("../migrations/", import.meta.url))

/** migrations/NNNN_name.sql, each run as one script in the migrator's transaction. */
const loader: Migrator.Loader = Effect.try({
  try: () =>
    fs
      .readdirSync(migrationsDirectory)
      .flatMap((file) => {
        const match = /^(\d+)_(.+)\.sql$/.exec(file)
        if (!match) return []
        const script = fs.readFileSync(`${migrationsDirectory}/${file}`, "utf8")
        const migration = Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(script).raw)
        return [[Number(match[1]), match[2]!, Effect.succeed(migration)] as const]
      })
      .sort(([a], [b]) => a - b),
  catch: (cause) => new Migrator.MigrationError({ reason: "import-error", message: "Could not read migrations/", cause })
})

export const migrate = Migrator.make({})({ loader, table: "mailroom_migrations" }).pipe(
  // Two nodes starting at once on a fresh database can race to create the migrations table.
  Effect.retry({ times: 3, schedule: Schedule.spaced("200 millis") }),
  Effect.tap((done) =>
    done.length > 0 ? Effect.logInfo(`Applied migrations ${done.map(([id, name]) => `${id}_${name}`).join(", ")}`) : Effect.void
  )
)

/**
 * PGlite runs no autovacuum, so the embedded database looks after itself, as autovacuum would:
 *
 * - Without VACUUM, the space of updated and deleted rows is never reused (every rate-limit lease,
 *   label change and delivery record leaves a dead row), so a long-running `npm start` would grow
 *   without end; and the visibility map is never set, so an index-only scan (the search postings)
 *   still reads the table for every row it finds, about three times the work.
 * - Without ANALYZE the planner has no statistics to use the indexes well (the full-text postings,
 *   the vector index).
 *
 * Every minute (and at start) each table is looked at in `pg_stat_user_tables` and vacuumed or
 * analysed by PostgreSQL's own autovacuum rules (`autovacuumDue`), one table per statement, so the one
 * connection serves other work between them. A PostgreSQL server does all this itself.
 */
const UPKEEP_EVERY = "1 minute"

interface TableActivity {
  readonly live: number
  readonly dead: number
  readonly insertedSinceVacuum: number
  readonly modifiedSinceAnalyze: number
  readonly everVacuumed: boolean
}

/**
 * What a table is due, by autovacuum's default thresholds: VACUUM past 50 dead rows + 20% of the
 * table, or 1,000 inserted rows + 20%; ANALYZE past 50 changed rows + 10%. A table that holds rows
 * but was never vacuumed is vacuumed once (a small table would otherwise wait for 1,000 inserts
 * before an index-only scan of it skips the table).
 */
export const autovacuumDue = (t: TableActivity): "vacuum" | "analyze" | undefined =>
  t.dead > 50 + 0.2 * t.live || t.insertedSinceVacuum > 1000 + 0.2 * t.live || (!t.everVacuumed && t.live > 0)
    ? "vacuum"
    : t.modifiedSinceAnalyze > 50 + 0.1 * t.live
    ? "analyze"
    : undefined

/** One pass over the tables: each one due is vacuumed (with ANALYZE) or analysed; what was done is returned. */
export const upkeep = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const tables = yield* sql<{
    relation: string
    live: string | number
    dead: string | number
    insertedSinceVacuum: string | number
    modifiedSinceAnalyze: string | number
    everVacuumed: boolean
  }>`
    SELECT format('%I.%I', schemaname, relname) AS relation, n_live_tup AS live, n_dead_tup AS dead,
           n_ins_since_vacuum AS inserted_since_vacuum, n_mod_since_analyze AS modified_since_analyze,
           (last_vacuum IS NOT NULL OR last_autovacuum IS NOT NULL) AS ever_vacuumed
    FROM pg_stat_user_tables ORDER BY relname`
  const done: Array<{ readonly table: string; readonly action: "vacuum" | "analyze"; readonly ms: number }> = []
  for (const row of tables) {
    const action = autovacuumDue({
      ...row,
      live: Number(row.live),
      dead: Number(row.dead),
      insertedSinceVacuum: Number(row.insertedSinceVacuum),
      modifiedSinceAnalyze: Number(row.modifiedSinceAnalyze)
    })
    if (action === undefined) continue
    const started = performance.now()
    // The name comes quoted from format('%I'): safe as an identifier.
    yield* sql.unsafe(`${action === "vacuum" ? "VACUUM (ANALYZE)" : "ANALYZE"} ${row.relation}`)
    done.push({ table: row.relation, action, ms: Math.round(performance.now() - started) })
  }
  return done
})

const upkept = Layer.scopedDiscard(
  upkeep.pipe(
    Effect.tap((done) =>
      done.length === 0 ? Effect.void : Effect.logDebug(`Embedded database upkeep: ${done.map((d) => `${d.action} ${d.table} ${d.ms} ms`).join(", ")}`)
    ),
    Effect.catchAll((error) => Effect.logWarning("Could not vacuum or analyse the embedded database", error)),
    Effect.repeat(Schedule.spaced(UPKEEP_EVERY)),
    Effect.forkScoped
  )
)

export const layer = (config: AppConfigShape) =>
  Option.match(config.databaseUrl, {
    onSome: (url) =>
      Layer.effectDiscard(migrate).pipe(Layer.provideMerge(Postgres.layer({ url, preparedStatements: config.databasePreparedStatements }))),
    // Looked after from the migrations on, so that their tables have statistics from the start.
    onNone: () =>
      upkept.pipe(Layer.provideMerge(Layer.effectDiscard(migrate)), Layer.provideMerge(
        Pglite.layer({ dataDir: config.dataDir, preparedStatements: config.databasePreparedStatements })
      ))
  })
