/**
 * Runs once before all suites, and its teardown once after them (`sweepRun`). Names the run, claims
 * the range of ports its suites take theirs from (process.ts `claimPortRange`), and
 * makes the PGlite data directories that each suite's fresh DATA_DIR starts from as a copy, since an
 * initdb takes seconds:
 * - an empty one (initialised only), for the vector index (in either mode: beside a PostgreSQL without
 *   pgvector it is a PGlite too) and for suites that build their database themselves;
 * - in embedded mode, the same with the app's migrations applied, for the app database of a server a
 *   suite starts (createBackend) and of an in-process suite (database.ts): the schema is what every
 *   server's first start makes, and making it once saves each start ~1.5 s of CPU. Only the schema:
 *   nothing a server writes at its start (keys, secrets) is shared.
 * - in the PostgreSQL run, the same as a database on that server (`migratedDatabase`), which the
 *   suites' databases are made as copies of.
 */
import { PGlite } from "@electric-sql/pglite"
import { vector } from "@electric-sql/pglite-pgvector"
import { Effect, Redacted } from "effect"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import pg from "pg"
import * as Pglite from "../../layers/pglite.ts"
import * as Postgres from "../../layers/postgres.ts"
import { migrate } from "../../src/database.ts"
import { claimPortRange } from "./process.ts"
import {
  adminDatabaseUrl,
  createDatabase,
  dataDirRoot,
  deleteStreams,
  dropDatabase,
  localNatsUrl,
  localPostgresUrl,
  runPrefixes,
  sharedNatsUrl
} from "./services.ts"

/**
 * After the run: remove what a suite of this run made and did not remove (a database, a data
 * directory, NATS streams), and say so, naming each, so that the suite can be found. The machine's
 * shared services stay as they were even when a suite's clean-up did not run.
 */
const sweepRun = async (run: string) => {
  const prefixes = runPrefixes(run)
  const left: Array<string> = []
  for (const entry of fs.readdirSync(dataDirRoot)) {
    if (!entry.startsWith(prefixes.dataDir)) continue
    fs.rmSync(path.join(dataDirRoot, entry), { recursive: true, force: true })
    left.push(`data directory ${path.join(dataDirRoot, entry)}`)
  }
  const admin = new pg.Client({ connectionString: adminDatabaseUrl ?? localPostgresUrl, connectionTimeoutMillis: 3_000 })
  try {
    await admin.connect()
    const { rows } = await admin.query<{ datname: string; made_by: string | null }>(
      "SELECT datname, shobj_description(oid, 'pg_database') AS made_by FROM pg_database WHERE starts_with(datname, $1)",
      [prefixes.database]
    )
    for (const { datname, made_by } of rows) {
      await dropDatabase(admin, datname)
      left.push(`database ${datname}${made_by === null ? "" : ` (${made_by})`}`)
    }
  } catch {
    // No PostgreSQL here (an embedded run on a machine without one): nothing of this run is on it.
  } finally {
    await admin.end().catch(() => undefined)
  }
  await deleteStreams(sharedNatsUrl ?? localNatsUrl, prefixes.nats, (name) => left.push(`NATS stream ${name}`)).catch(() => undefined)
  if (left.length > 0) console.warn(`A suite of this run left behind, removed now:\n${left.map((what) => `  ${what}`).join("\n")}`)
}

/**
 * A database on the PostgreSQL at `adminUrl` with the app's migrations applied, which the suites'
 * databases are copies of (services.ts `createDatabase` with `migrated`).
 */
const migratedDatabase = async (adminUrl: string) => {
  const database = await createDatabase(adminUrl)
  // The pool is closed when the scope ends: a copy can be made only of a database nobody is connected to.
  await Effect.runPromise(Effect.scoped(Effect.provide(migrate, Postgres.layer({ url: Redacted.make(database.url), maxConnections: 1 }))))
  process.env.MAILROOM_TEST_PG_MIGRATED = database.name
  process.env.MAILROOM_TEST_PG_MIGRATED_SERVER = adminUrl
  return database
}

export default async function setup() {
  const run = `${Date.now().toString(36)}${randomBytes(2).toString("hex")}`
  process.env.MAILROOM_TEST_RUN = run
  const ports = await claimPortRange()
  process.env.MAILROOM_TEST_PORTS_FROM = String(ports.from)
  const dir = fs.mkdtempSync(path.join(dataDirRoot, "mailroom-pglite-template-"))
  const db = await PGlite.create({ dataDir: path.join(dir, "pglite"), extensions: { vector } })
  await db.query("SELECT 1")
  await db.close()
  process.env.MAILROOM_TEST_PGLITE_TEMPLATE = path.join(dir, "pglite")
  // On PostgreSQL the empty one still serves the vector index beside a PostgreSQL without pgvector;
  // the app's database is a copy of one migrated here, on that server.
  const template = adminDatabaseUrl === undefined ? undefined : await migratedDatabase(adminDatabaseUrl)
  const done = async () => {
    fs.rmSync(dir, { recursive: true, force: true })
    await template?.drop()
    await sweepRun(run)
    await ports.release()
  }
  if (template !== undefined) return done
  // Pglite.layer opens DATA_DIR/pglite.
  const migrated = path.join(dir, "migrated")
  fs.cpSync(path.join(dir, "pglite"), path.join(migrated, "pglite"), { recursive: true })
  await Effect.runPromise(Effect.scoped(Effect.provide(migrate, Pglite.layer({ dataDir: migrated, preparedStatements: true }))))
  process.env.MAILROOM_TEST_PGLITE_MIGRATED = path.join(migrated, "pglite")
  return done
}
