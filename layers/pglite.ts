/**
 * The embedded database: PGlite (PostgreSQL compiled to WebAssembly) persisted under `DATA_DIR`,
 * served over a private Unix socket by pglite-socket so that the app talks to it through the very
 * same @effect/sql-pg client, SQL and migrations as a real PostgreSQL.
 *
 * PGlite is a single backend: one connection at a time, so the pool holds exactly one. A lock file
 * keeps a second process from opening the same data directory (which would corrupt it).
 */
import { PGlite } from "@electric-sql/pglite"
import { vector } from "@electric-sql/pglite-pgvector"
import { PGLiteSocketServer } from "@electric-sql/pglite-socket"
import { PgClient } from "@effect/sql-pg"
import type { SqlClient } from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import { Effect, Layer } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { clientSettings } from "./postgres.ts"

export interface PgliteOptions {
  /** Directory that holds the database files (created when missing). */
  readonly dataDir: string
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
        fs.mkdirSync(dir, { recursive: true })
        const lockFile = path.join(dir, "mailroom.lock")
        for (let attempt = 0; attempt < 2; attempt++) {
          try {
            fs.writeFileSync(lockFile, String(process.pid), { flag: "wx" })
            return lockFile
          } catch (error) {
            if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error
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

const startServer = (dataDir: string) =>
  Effect.acquireRelease(
    Effect.tryPromise({
      try: async () => {
        const db = await PGlite.create({ dataDir, extensions: { vector } })
        removeStaleSocketDirs()
        const socketDir = fs.mkdtempSync(path.join(os.tmpdir(), `${SOCKET_DIR_PREFIX}${process.pid}-`))
        const server = new PGLiteSocketServer({ db, path: path.join(socketDir, ".s.PGSQL.5432"), maxConnections: 1 })
        await server.start()
        return { db, server, socketDir }
      },
      catch: (cause) => new SqlError({ cause, message: `Could not open the embedded database in ${dataDir}` })
    }),
    ({ db, server, socketDir }) =>
      Effect.promise(async () => {
        await server.stop().catch(() => undefined)
        await db.close().catch(() => undefined)
        fs.rmSync(socketDir, { recursive: true, force: true })
      })
  )

export const layer = (options: PgliteOptions): Layer.Layer<PgClient.PgClient | SqlClient, SqlError> =>
  Layer.unwrapScoped(
    Effect.gen(function*() {
      const dataDir = path.resolve(options.dataDir, "pglite")
      yield* lockDataDir(path.resolve(options.dataDir))
      const { socketDir } = yield* startServer(dataDir)
      return PgClient.layer({
        ...clientSettings,
        host: socketDir,
        port: 5432,
        username: "postgres",
        database: "postgres",
        maxConnections: 1,
        minConnections: 1,
        applicationName: "mailroom"
      })
    })
  )
