/**
 * The embedded database: PGlite (PostgreSQL compiled to WebAssembly) persisted under `DATA_DIR`,
 * served over a private Unix socket by pglite-socket so that the app talks to it through the very
 * same @effect/sql-pg client, SQL and migrations as a real PostgreSQL.
 *
 * PGlite and its socket server run in a worker thread of their own (pglite-worker.mjs): every
 * statement executes in WebAssembly, synchronously, and on the main thread it would stall HTTP and
 * SMTP for as long as it runs. Closing waits for the thread to close the database (a PGlite not
 * closed can leave its files damaged); a thread that dies while the app runs ends the process.
 *
 * PGlite is a single backend: one connection at a time, so the pool holds exactly one. A lock file
 * keeps a second process from opening the same data directory (which would corrupt it).
 */
import { PgClient } from "@effect/sql-pg"
import { SqlClient } from "@effect/sql"
import { SqlError } from "@effect/sql/SqlError"
import { Duration, Effect, Layer, Schedule } from "effect"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as os from "node:os"
import * as path from "node:path"
import { Worker } from "node:worker_threads"
import type { DatabaseProbe } from "../services/health/database-probe.ts"
import { pooledClient, type PoolOptions } from "./postgres.ts"
import { makeDirectory, ownerOnlyDirectory } from "./directories.ts"

export interface PgliteOptions {
  /** Directory that holds the database files (created when missing). */
  readonly dataDir: string
  /** Statements with parameters run prepared (postgres.ts `PreparingClient`); the default. */
  readonly preparedStatements?: boolean
  /**
   * PostgreSQL's `shared_buffers` for this PGlite (`128MB`, `16MB`, …), else PostgreSQL's default
   * (128MB). PGlite zeroes all of it at every start: ~0.4 s of CPU for 128MB.
   */
  readonly sharedBuffers?: string | undefined
  /** PostgreSQL settings from the start (`-c name=value`), for a PGlite that serves one purpose. */
  readonly settings?: Readonly<Record<string, string>>
  /** Its pool in the `mailroom_db_pool_*` gauges (postgres.ts `sampled`): the app's database; not the vector index's. */
  readonly sampled?: boolean
}

const MB = 1024 * 1024
/** The most sized buffers take, whatever the memory: PGLITE_SHARED_BUFFERS's own ceiling. */
const MAX_SIZED_BUFFERS = 1024 * MB

/** Bytes of the relation files under `dir` (a PGlite's `base`). */
const relationBytes = (dir: string): number => {
  let total = 0
  for (const entry of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) total += fs.statSync(path.join(entry.parentPath, entry.name)).size
  }
  return total
}

/**
 * `shared_buffers` that hold all of a PGlite's data as it stands at start (`dataDir` as given to
 * `layer`): a quarter more than its relation files, in steps of 16MB, from PostgreSQL's 128MB up
 * to 1GB or an eighth of the memory this process may use, whichever is less. For a database whose
 * every query wanders over the whole of an index (an HNSW graph): PGlite reads a page missing from
 * its buffers through its file system, so a graph larger than the buffers is read from files, over
 * and over. Fixed for the life of the process: a database grown since is sized again at the next start.
 */
export const buffersForData = (
  dataDir: string,
  memory: number = Math.min(os.totalmem(), process.constrainedMemory() || Infinity)
): { readonly sharedBuffers: string; readonly dataBytes: number } => {
  const base = path.resolve(dataDir, "pglite", "base")
  const bytes = fs.existsSync(base) ? relationBytes(base) : 0
  const ceiling = Math.max(128 * MB, Math.min(MAX_SIZED_BUFFERS, memory / 8))
  const wanted = Math.ceil((bytes * 1.25) / (16 * MB)) * 16 * MB
  return { sharedBuffers: `${Math.floor(Math.min(ceiling, Math.max(128 * MB, wanted)) / MB)}MB`, dataBytes: bytes }
}

const isAlive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM"
  }
}

/** Take the data directory for this process, or fail naming the process that holds it. */
const lockDataDir = (dir: string) =>
  Effect.acquireRelease(
    Effect.try({
      try: () => {
        makeDirectory(dir)
        const lockFile = path.join(dir, "mailroom.lock")
        for (let attempt = 0; attempt < 2; attempt++) {
          try {
            fs.writeFileSync(lockFile, String(process.pid), { flag: "wx" })
            return lockFile
          } catch (error) {
            if ((error as NodeJS.ErrnoException).code !== "EEXIST") {
              throw new Error(`Cannot write in ${dir} (${(error as Error).message}): set DATA_DIR to a directory this process may write in`)
            }
            const holder = Number(fs.readFileSync(lockFile, "utf8"))
            if (Number.isInteger(holder) && holder !== process.pid && isAlive(holder)) {
              throw new Error(
                `The embedded database in ${dir} is in use by process ${holder}; stop it, or give this process another DATA_DIR (or a DATABASE_URL)`
              )
            }
            fs.rmSync(lockFile, { force: true }) // left behind by a process that is gone
          }
        }
        throw new Error(`Could not lock ${dir}`)
      },
      catch: (cause) => new SqlError({ cause, message: cause instanceof Error ? cause.message : String(cause) })
    }),
    (lockFile) => Effect.sync(() => fs.rmSync(lockFile, { force: true }))
  )

/**
 * The socket lives in a short temporary path (unix socket paths are limited to ~100 bytes, which a
 * DATA_DIR may exceed), named after this process. A process killed without its finalizers leaves its
 * directory behind; the next start removes those whose process is gone.
 */
const SOCKET_DIR_PREFIX = "mailroom-pglite-"

const removeStaleSocketDirs = () => {
  for (const entry of fs.readdirSync(os.tmpdir())) {
    const pid = Number(entry.slice(SOCKET_DIR_PREFIX.length).split("-")[0])
    if (!entry.startsWith(SOCKET_DIR_PREFIX) || !Number.isInteger(pid) || pid <= 0 || isAlive(pid)) continue
    fs.rmSync(path.join(os.tmpdir(), entry), { recursive: true, force: true })
  }
}

type FromWorker =
  | { readonly type: "ready" }
  | { readonly type: "failed"; readonly message: string }
  | { readonly type: "stopped"; readonly problem?: string }

const workerUrl = new URL("./pglite-worker.mjs", import.meta.url)

/** PGlite's two WebAssembly programs, compiled once for every database thread of this process. */
export interface CompiledPrograms {
  readonly pglite: WebAssembly.Module
  readonly initdb: WebAssembly.Module
}

let programs: Promise<CompiledPrograms> | undefined

/** The runtime's WebAssembly: this project's declarations of it are types only. */
const wasm = (globalThis as unknown as { readonly WebAssembly: { compile: (bytes: Uint8Array) => Promise<WebAssembly.Module> } }).WebAssembly

/**
 * Each PGlite compiles PostgreSQL (9 MB of WebAssembly) and initdb when it opens, unless given them
 * compiled; a process with two embedded databases (the app's and the vector index) compiled them
 * twice, ~0.35 s of CPU each time. Compiled here once, on first use, and handed to every thread (a
 * compiled module is shared between the threads of a process, not copied). A failure is not kept:
 * the next database to open tries again.
 */
const compiledPrograms = (): Promise<CompiledPrograms> => {
  if (programs === undefined) {
    const dist = path.dirname(createRequire(import.meta.url).resolve("@electric-sql/pglite"))
    const compile = (file: string) => fs.promises.readFile(path.join(dist, file)).then((bytes) => wasm.compile(bytes))
    programs = Promise.all([compile("pglite.wasm"), compile("initdb.wasm")]).then(([pglite, initdb]) => ({ pglite, initdb }))
    programs.catch(() => (programs = undefined))
  }
  return programs
}

/**
 * The database thread is gone while the app runs: every statement would now fail or wait forever.
 * Say so and end the process (exit 1) rather than hang; the data directory is as a killed process
 * leaves it, which the next start recovers (the lock names a dead process, the socket dir is stale).
 * The write is waited for: stderr to a pipe is asynchronous, and an immediate exit can lose it.
 */
const crashed = (message: string) => {
  process.stderr.write(`mailroom: ${message}\n`, () => process.exit(1))
}

/** Ask the thread to stop the server and close the database, and wait until it has ended. */
const stopWorker = (worker: Worker, state: { stopping: boolean; exited: boolean }) =>
  Effect.async<string | undefined>((resume) => {
    state.stopping = true
    if (state.exited) return resume(Effect.succeed("the database thread had already ended"))
    let problem: string | undefined
    const onMessage = (message: FromWorker) => {
      if (message.type === "stopped") problem = message.problem
    }
    worker.on("message", onMessage)
    worker.once("exit", () => {
      worker.off("message", onMessage)
      resume(Effect.succeed(problem))
    })
    worker.postMessage({ type: "stop" })
  }).pipe(
    Effect.flatMap((problem) =>
      problem === undefined ? Effect.void : Effect.logWarning(`The embedded database did not close cleanly: ${problem}`)
    )
  )

/**
 * Open the database in its own thread and wait until it serves `socketPath`. A failure to open
 * (a damaged data directory, say) fails with the thread's reason; a thread that dies later ends the
 * process (`crashed`). Released by closing the database in the thread and waiting for its end.
 */
const startWorker = (
  dataDir: string,
  socketPath: string,
  startSettings: Readonly<Record<string, string>>,
  compiled: CompiledPrograms
) =>
  Effect.acquireRelease(
    Effect.async<{ worker: Worker; state: { stopping: boolean; exited: boolean } }, SqlError>((resume) => {
      const worker = new Worker(workerUrl, { workerData: { dataDir, socketPath, settings: startSettings, compiled } })
      const state = { stopping: false, exited: false, opened: false }
      const opening = (message: string, cause?: unknown) =>
        resume(Effect.fail(new SqlError({ cause, message: `Could not open the embedded database in ${dataDir}: ${message}` })))
      worker.on("message", (message: FromWorker) => {
        if (message.type === "ready") {
          state.opened = true
          resume(Effect.succeed({ worker, state }))
        } else if (message.type === "failed") opening(message.message)
      })
      worker.on("error", (error) => {
        if (!state.opened) return opening(`its thread failed: ${error.message}`, error)
        if (!state.stopping) crashed(`the embedded database thread failed: ${error.stack ?? error.message}`)
      })
      worker.on("exit", (code) => {
        state.exited = true
        if (!state.opened) return opening(`its thread ended (code ${code}) before the database was open`)
        if (!state.stopping) crashed(`the embedded database thread ended unexpectedly (code ${code})`)
      })
      // Interrupted while opening (the process is stopping): let the thread finish opening, then close.
      return Effect.asVoid(stopWorker(worker, state))
    }),
    ({ state, worker }) => stopWorker(worker, state)
  )

const startServer = (dataDir: string, startSettings: Readonly<Record<string, string>>) =>
  Effect.gen(function*() {
    const socketDir = yield* Effect.acquireRelease(
      Effect.try({
        try: () => {
          removeStaleSocketDirs()
          return fs.mkdtempSync(path.join(os.tmpdir(), `${SOCKET_DIR_PREFIX}${process.pid}-`))
        },
        catch: (cause) => new SqlError({ cause, message: `Could not make a socket directory for the embedded database` })
      }),
      (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
    )
    const compiled = yield* Effect.tryPromise({
      try: compiledPrograms,
      catch: (cause) => new SqlError({ cause, message: `Could not load the embedded database's program: ${cause instanceof Error ? cause.message : String(cause)}` })
    })
    yield* startWorker(dataDir, path.join(socketDir, ".s.PGSQL.5432"), startSettings, compiled)
    return { socketDir }
  })

/**
 * PostgreSQL removes or recycles a WAL segment only at a checkpoint, and PGlite runs it single-user
 * (`--single`): no checkpointer, so none runs while the database is open (a standalone backend asks
 * for none when WAL passes max_wal_size, and has no one to count checkpoint_timeout). Every segment
 * since the start stayed in `pg_wal` (800+ MB after 20,000 emails, 34 MB of mail), and the checkpoint
 * that closing (or recovery after a crash) makes kept them all as recycled segments: PostgreSQL keeps
 * up to max_wal_size of them, 1GB by default. Here it keeps 64MB (`checkpointDue` below makes
 * the checkpoints).
 */
const WAL_SETTINGS = { min_wal_size: "32MB", max_wal_size: "64MB" }

export const layer = (options: PgliteOptions): Layer.Layer<PgClient.PgClient | SqlClient.SqlClient | DatabaseProbe, SqlError> =>
  Layer.unwrapScoped(
    Effect.gen(function*() {
      const dataDir = path.resolve(options.dataDir, "pglite")
      yield* lockDataDir(path.resolve(options.dataDir))
      // PostgreSQL writes PG_VERSION first when it creates a cluster: without it, initdb and every
      // migration run now, tens of seconds on a busy machine with nothing else to say meanwhile.
      if (!fs.existsSync(path.join(dataDir, "PG_VERSION"))) {
        yield* Effect.logInfo(`Creating the embedded database in ${dataDir}: a first start takes longer`)
      }
      yield* Effect.try({
        try: () => ownerOnlyDirectory(dataDir),
        catch: (cause) => new SqlError({ cause, message: cause instanceof Error ? cause.message : String(cause) })
      })
      const { socketDir } = yield* startServer(dataDir, {
        ...WAL_SETTINGS,
        ...options.settings,
        ...(options.sharedBuffers === undefined ? {} : { shared_buffers: options.sharedBuffers })
      })
      return pooledClient(poolOptions(dataDir, socketDir, options))
    })
  )

/**
 * Its thread serves the socket once the database is open, but on a loaded machine (a first start
 * creating the database, other processes' CPU) the first connection can take many seconds more to be
 * answered: 5 s, a server's bound, failed one start in five on a machine at load 12-16. The database
 * is this process's own and a thread that dies ends the process (`crashed`): it is waited for, saying
 * so every PROGRESS_EVERY, up to OPEN_TIMEOUT, past which only a stuck thread or a starved machine is
 * left to explain it.
 */
const OPEN_TIMEOUT = Duration.minutes(10)
const PROGRESS_EVERY = Duration.seconds(15)

/** How the app reaches the PGlite in `dataDir` served in `socketDir`: one connection, waited for (see OPEN_TIMEOUT). */
export const poolOptions = (dataDir: string, socketDir: string, options: Pick<PgliteOptions, "sampled" | "preparedStatements"> = {}): PoolOptions => ({
  target: { host: socketDir, port: 5432, username: "postgres", database: "postgres" },
  maxConnections: 1,
  minConnections: 1,
  connecting: {
    timeout: OPEN_TIMEOUT,
    failure: (timedOut) =>
      timedOut
        ? `The embedded database in ${dataDir} opened but did not answer within ${Duration.format(OPEN_TIMEOUT)}: ` +
          `check that this machine has CPU and memory to spare (its load, free memory), then start again; ` +
          `if it happens again, leave ${dataDir} as it is and report it`
        : `Could not connect to the embedded database in ${dataDir} (its socket in ${socketDir}): ` +
          `check that ${path.dirname(socketDir)} is writable and not full, then start again`,
    progress: {
      every: PROGRESS_EVERY,
      say: (waited) => `Waiting for the embedded database in ${dataDir} to answer (${Math.round(Duration.toSeconds(waited))} s so far): it is slow to start on a busy machine`
    }
  },
  ...(options.sampled === undefined ? {} : { sampled: options.sampled }),
  ...(options.preparedStatements === undefined ? {} : { preparedStatements: options.preparedStatements })
})

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

/**
 * With no checkpointer in PGlite (`WAL_SETTINGS`), the server makes the checkpoints, by the
 * checkpointer's own two rules: every 10 s it reads how much WAL was written since the last
 * checkpoint began (its redo point) and checkpoints past 32MB (where PostgreSQL's checkpointer would
 * ask for one at max_wal_size 64MB: max_wal_size / (1 + checkpoint_completion_target), in whole
 * segments), or when the last is 5 minutes old (checkpoint_timeout) and more than a WAL page was
 * written since (an idle database is left alone). So `pg_wal` holds 64MB of segments for reuse plus
 * what 10 s of writing adds past 32MB: at most 145MB while rows went in at 10MB of WAL a second, where
 * it had grown with every row (561MB after 300,000 rows of 1.6kB), 65MB once closed. A checkpoint
 * writes out the dirty buffers and holds the one connection meanwhile: 0.1–0.3 s at that rate.
 * Closing the database makes one too. Segments a directory kept from before (recycled ahead under
 * max_wal_size 1GB) are removed as the WAL passes them.
 */
const CHECKPOINT_EVERY = "10 seconds"
const CHECKPOINT_AFTER_WAL = 32 * MB
const CHECKPOINT_TIMEOUT_SECONDS = 5 * 60
const WAL_PAGE = 8192

interface WalSinceCheckpoint {
  /** Bytes of WAL from the last checkpoint's redo point to the end of the WAL. */
  readonly sinceRedo: number
  /** Bytes of WAL from the last checkpoint's own record (it included) to the end of the WAL. */
  readonly sinceCheckpoint: number
  readonly secondsSinceCheckpoint: number
}

export const checkpointDue = (w: WalSinceCheckpoint): boolean =>
  w.sinceRedo >= CHECKPOINT_AFTER_WAL || (w.secondsSinceCheckpoint >= CHECKPOINT_TIMEOUT_SECONDS && w.sinceCheckpoint > WAL_PAGE)

/** One look at the WAL: a checkpoint when due (`checkpointDue`), returned with its WAL and time, else undefined. */
export const checkpoint = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<{
    sinceRedo: string | number
    sinceCheckpoint: string | number
    secondsSinceCheckpoint: string | number
  }>`
    SELECT pg_current_wal_insert_lsn() - redo_lsn AS since_redo,
           pg_current_wal_insert_lsn() - checkpoint_lsn AS since_checkpoint,
           extract(epoch FROM clock_timestamp() - checkpoint_time) AS seconds_since_checkpoint
    FROM pg_control_checkpoint()`
  const wal = rows[0]
  if (wal === undefined) return undefined
  const since = {
    sinceRedo: Number(wal.sinceRedo),
    sinceCheckpoint: Number(wal.sinceCheckpoint),
    secondsSinceCheckpoint: Number(wal.secondsSinceCheckpoint)
  }
  if (!checkpointDue(since)) return undefined
  const started = performance.now()
  yield* sql`CHECKPOINT`
  return { walBytes: since.sinceRedo, ms: Math.round(performance.now() - started) }
})

/** How often the upkeep looks: at the tables (`upkeep`) and at the WAL (`checkpoint`). */
export interface UpkeepEvery {
  readonly upkeep: Duration.DurationInput
  readonly checkpoint: Duration.DurationInput
}

/**
 * The upkeep of the PGlite this SqlClient reaches from when the layer is built: vacuum and analyse
 * every minute, checkpoints as due every 10 s (`every` gives other intervals: a test's). Build it
 * once the tables are there (after the migrations), so that they have statistics from the start.
 * `what` names the database in the logs.
 */
export const upkept = (what: string, every: UpkeepEvery = { upkeep: UPKEEP_EVERY, checkpoint: CHECKPOINT_EVERY }) => Layer.scopedDiscard(
  Effect.zipRight(
    upkeep.pipe(
      Effect.tap((done) =>
        done.length === 0 ? Effect.void : Effect.logDebug(`Upkeep of ${what}: ${done.map((d) => `${d.action} ${d.table} ${d.ms} ms`).join(", ")}`)
      ),
      Effect.catchAll((error) => Effect.logWarning(`Could not vacuum or analyse ${what}`, error)),
      Effect.repeat(Schedule.spaced(every.upkeep)),
      Effect.forkScoped
    ),
    checkpoint.pipe(
      Effect.tap((done) =>
        done === undefined
          ? Effect.void
          : Effect.logDebug(`Checkpoint of ${what}: ${Math.round(done.walBytes / MB)} MB of WAL since the last, ${done.ms} ms`)
      ),
      Effect.catchAll((error) => Effect.logWarning(`Could not checkpoint ${what}`, error)),
      Effect.repeat(Schedule.spaced(every.checkpoint)),
      Effect.forkScoped
    )
  )
)
