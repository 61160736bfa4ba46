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

/** A migration as the logs and `mailroom migrate` name it: `81_sent_mail_index`. */
const migrationName = ([id, name]: readonly [number, string]) => `${id}_${name}`

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

export const migrate = Migrator.make({})({ loader, table: "mailroom_migrations" }).pipe(
  // Two nodes starting at once on a fresh database can race to create the migrations table.
  Effect.retry({ times: 3, schedule: Schedule.spaced("200 millis") }),
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
