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
const files: Migrator.Loader = Effect.try({
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

/** A migration as the logs and `mailroom migrate` name it: `81_sent_mail_index`. */
const migrationName = ([id, name]: readonly [number, string]) => `${id}_${name}`

const MIGRATIONS_TABLE = "mailroom_migrations"

/**
 * This version's migrations, once the database is known to have none applied past the last of them.
 * One that has was migrated by a newer Mailroom: this code would run on tables it does not know and
 * write rows that break the newer version's rules (mail stored with no `stored_seq`, which agents
 * reading `after=` then skip once the newer version is back), so the start is refused. Read in the
 * migrator's transaction, after it has locked the table: a newer node migrating at the same moment
 * is seen.
 */
const loader: Migrator.Loader<SqlClient.SqlClient> = Effect.gen(function*() {
  const known = yield* files
  const sql = yield* SqlClient.SqlClient
  const [newest] = yield* sql<{ readonly migrationId: number; readonly name: string }>`
    SELECT migration_id, name FROM ${sql(MIGRATIONS_TABLE)} ORDER BY migration_id DESC LIMIT 1`.pipe(
    Effect.mapError((cause) => new Migrator.MigrationError({ reason: "failed", message: `Could not read ${MIGRATIONS_TABLE}`, cause }))
  )
  const last = known.at(-1)
  if (newest !== undefined && newest.migrationId > (last?.[0] ?? 0)) {
    return yield* new Migrator.MigrationError({
      reason: "bad-state",
      message: `This database was migrated by a newer Mailroom (its newest migration is ${migrationName([newest.migrationId, newest.name])}; ` +
        `this version knows up to ${last === undefined ? "none" : migrationName([last[0], last[1]])}): start that version, ` +
        `or restore a backup taken before the upgrade`
    })
  }
  return known
})

/** The refusal of a database a newer version migrated (`loader`): trying again would not change it. */
const newerDatabase = (error: unknown) => error instanceof Migrator.MigrationError && error.reason === "bad-state"

/**
 * What was applied, in one short line: "Applied 80 migrations: 1_accounts to 81_sent_mail_index" (a
 * first start's eighty names would make one line of two thousand characters), up to three by name.
 */
export const appliedMigrations = (applied: ReadonlyArray<readonly [number, string]>): string => {
  const names = applied.map(migrationName)
  return `Applied ${names.length} migration${names.length === 1 ? "" : "s"}: ${
    names.length > 3 ? `${names[0]} to ${names.at(-1)}` : names.join(", ")
  }`
}

export const migrate = Migrator.make({})({ loader, table: MIGRATIONS_TABLE }).pipe(
  // Two nodes starting at once on a fresh database can race to create the migrations table.
  Effect.retry({ times: 3, schedule: Schedule.spaced("200 millis"), while: (error) => !newerDatabase(error) }),
  Effect.tap((done) =>
    done.length === 0 ? Effect.void : Effect.zipRight(
      Effect.logInfo(appliedMigrations(done)),
      Effect.logDebug(`Applied migrations ${done.map(migrationName).join(", ")}`)
    )
  )
)

/** The database as it is, its migrations not yet run: for `mailroom migrate`, which says what it applied. */
export const unmigratedLayer = (config: AppConfigShape) =>
  Option.match(config.databaseUrl, {
    onSome: (url) => Postgres.layer({ url, preparedStatements: config.databasePreparedStatements }),
    onNone: () =>
      Pglite.layer({
        dataDir: config.dataDir,
        preparedStatements: config.databasePreparedStatements,
        sharedBuffers: Option.getOrUndefined(config.pgliteSharedBuffers)
      })
  })

export const layer = (config: AppConfigShape) =>
  Option.match(config.databaseUrl, {
    onSome: () => Layer.effectDiscard(migrate).pipe(Layer.provideMerge(unmigratedLayer(config))),
    // Looked after from the migrations on, so that their tables have statistics from the start.
    onNone: () =>
      Pglite.upkept("the embedded database").pipe(Layer.provideMerge(Layer.effectDiscard(migrate)), Layer.provideMerge(unmigratedLayer(config)))
  })
