/**
 * Test-owned backing services: every suite gets its own PostgreSQL database, NATS subject space and
 * data directory, under unique names, and removes them afterwards. The machine's shared services
 * stay as they were.
 *
 * Mode: with `DATABASE_URL` / `NATS_URL` set (CI's second run), suites use those servers;
 * otherwise the embedded defaults (PGlite under a temporary DATA_DIR, the in-process bus).
 */
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import pg from "pg"

export const adminDatabaseUrl = process.env.DATABASE_URL
export const sharedNatsUrl = process.env.NATS_URL
export const mode = adminDatabaseUrl ? "postgres" : "embedded"
/** The machine's own PostgreSQL and NATS, which some suites use in either run (`forcePostgres`). */
export const localPostgresUrl = "postgres://postgres@127.0.0.1:5432/test"
export const localNatsUrl = "nats://127.0.0.1:4222"

/**
 * PGLITE_SHARED_BUFFERS for the suites' embedded databases: a test's data fits in 16MB, and PGlite
 * zeroes its buffers at every start (128MB, PostgreSQL's default, costs each PGlite ~0.4 s more CPU).
 * Benchmarks keep the default.
 */
export const testPgliteSharedBuffers = "16MB"

export const uniqueName = (prefix: string) => `${prefix}_${Date.now().toString(36)}_${randomBytes(4).toString("hex")}`

/**
 * This run of the suites (set by global-setup): the databases, data directories and NATS prefixes
 * the suites make carry it, so that the run's teardown can find and remove whatever a suite left
 * behind, and name it (see `sweepRun`).
 */
export const runTag = () => process.env.MAILROOM_TEST_RUN ?? "solo"

/** The names a run's leftovers start with: databases, data directories, NATS streams. */
export const runPrefixes = (run: string) => ({
  database: `mailroom_test_${run}_`,
  dataDir: `mailroom-data-${run}-`,
  nats: `t-${run}-`
})

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..")

/**
 * The test file that is making a database or a data directory, for the run's sweep to name when a
 * suite leaves one behind: the first frame of the caller's stack in a test file (with its line), else
 * the file the vitest worker is running (its state: an internal of vitest, absent outside a worker,
 * as in the benches); `undefined` when neither says.
 */
const madeBy = (): string | undefined => {
  for (const line of new Error().stack?.split("\n") ?? []) {
    const frame = /\b(test\/(?!support\/)\S+?\.test\.ts):(\d+)/.exec(line)
    if (frame) return `${frame[1]}:${frame[2]}`
  }
  const file = (globalThis as { __vitest_worker__?: { filepath?: string } }).__vitest_worker__?.filepath
  return file === undefined ? undefined : path.relative(repoRoot, file)
}

export interface TestDatabase {
  readonly name: string
  readonly url: string
  readonly drop: () => Promise<void>
}

/**
 * The run's migrated database (global-setup makes it in the PostgreSQL run) when it is on the server
 * at `adminUrl`: a copy of it starts with the app's migrations applied.
 */
const migratedTemplateOn = (adminUrl: string): string | undefined => {
  const template = process.env.MAILROOM_TEST_PG_MIGRATED
  const server = process.env.MAILROOM_TEST_PG_MIGRATED_SERVER
  return template !== undefined && server !== undefined && new URL(server).host === new URL(adminUrl).host ? template : undefined
}

/**
 * A fresh database on the PostgreSQL server at `adminUrl`, dropped by `drop()`: empty, or with
 * `migrated` a copy of the run's migrated one where there is one on that server. Migrating an empty
 * database takes ~1.8 s (~1.5 s of it CPU); copying the migrated one ~0.2 s.
 */
export const createDatabase = async (adminUrl: string, options: { readonly migrated?: boolean } = {}): Promise<TestDatabase> => {
  const name = uniqueName(`mailroom_test_${runTag()}`)
  const maker = madeBy()
  const template = options.migrated ? migratedTemplateOn(adminUrl) : undefined
  const admin = new pg.Client({ connectionString: adminUrl })
  await admin.connect()
  try {
    await admin.query(`CREATE DATABASE ${name}${template === undefined ? "" : ` TEMPLATE ${template}`}`)
    if (maker !== undefined) await admin.query(`COMMENT ON DATABASE ${name} IS ${admin.escapeLiteral(`made by ${maker}`)}`)
  } finally {
    await admin.end()
  }
  const url = new URL(adminUrl)
  url.pathname = `/${name}`
  return {
    name,
    url: url.toString(),
    drop: async () => {
      const client = new pg.Client({ connectionString: adminUrl })
      await client.connect()
      try {
        await dropDatabase(client, name)
      } finally {
        await client.end()
      }
    }
  }
}

/** Drop a suite's database, whoever is still connected to it. */
export const dropDatabase = (admin: pg.Client, name: string) => admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)

/**
 * Where the suites' data directories go: in memory (/dev/shm) where the machine has it, else the
 * temporary directory. A run copies, writes and removes PGlite's ~40MB of files a few hundred times.
 */
export const dataDirRoot = (() => {
  try {
    fs.accessSync("/dev/shm", fs.constants.W_OK)
    return "/dev/shm"
  } catch {
    return os.tmpdir()
  }
})()

export interface TestDataDir {
  readonly dir: string
  readonly remove: () => void
}

/**
 * A fresh DATA_DIR; in embedded mode its two PGlites (the database, and the vector index beside it)
 * start from the initialised one made by global-setup. `migrated`: the database starts with the app's
 * migrations applied (global-setup's second template), for a server's first start.
 */
export const createDataDir = (options: { readonly migrated?: boolean } = {}): TestDataDir => {
  // The maker's file and line in the name (`…-mta-crash.31-XXXXXX`), for the sweep to show.
  const maker = madeBy()?.replace(/^.*\//, "").replace(/\.test\.ts/, "").replace(/:/, ".")
  const dir = fs.mkdtempSync(path.join(dataDirRoot, `${runPrefixes(runTag()).dataDir}${maker === undefined ? "" : `${maker}-`}`))
  const empty = process.env.MAILROOM_TEST_PGLITE_TEMPLATE
  const migrated = options.migrated ? process.env.MAILROOM_TEST_PGLITE_MIGRATED : undefined
  const copy = (template: string | undefined, target: string) => {
    if (template && fs.existsSync(template)) fs.cpSync(template, path.join(dir, target), { recursive: true })
  }
  copy(migrated ?? empty, "pglite")
  copy(empty, path.join("vectors", "pglite"))
  return { dir, remove: () => fs.rmSync(dir, { recursive: true, force: true }) }
}

/** A NATS subject/stream prefix no other suite uses. Streams made under it are deleted by the bus tests' cleanup. */
export const natsPrefix = () => uniqueName(`t_${runTag()}`).replace(/_/g, "-")

/** A 32+ character secret for JWT_SECRET. */
export const testSecret = () => randomBytes(32).toString("hex")

/** Remove the JetStream streams a test prefix created; `removed` hears each one's name. */
export const deleteStreams = async (url: string, prefix: string, removed: (name: string) => void = () => {}) => {
  const { connect } = await import("@nats-io/transport-node")
  const { jetstreamManager } = await import("@nats-io/jetstream")
  const nc = await connect({ servers: url, timeout: 3_000 })
  try {
    const jsm = await jetstreamManager(nc)
    for await (const name of jsm.streams.names()) {
      if (name.startsWith(prefix.replace(/[^A-Za-z0-9_-]/g, "_"))) {
        await jsm.streams.delete(name)
        removed(name)
      }
    }
  } finally {
    await nc.close()
  }
}
