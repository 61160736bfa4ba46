/**
 * A private backend and server per suite. Starting the process itself lives in process.ts (free of
 * vitest, so that benchmarks share it); its helpers are re-exported here for the suites.
 */
import { afterAll, afterEach, beforeAll, beforeEach } from "vitest"
import { type Server, startServer } from "./process.ts"
import {
  adminDatabaseUrl,
  createDatabase,
  createDataDir,
  deleteStreams,
  localNatsUrl,
  localPostgresUrl,
  natsPrefix,
  sharedNatsUrl,
  testPgliteSharedBuffers,
  testSecret
} from "./services.ts"

export { deleteStreams } from "./services.ts"

export { freePort, repoRoot, type Server, startServer } from "./process.ts"

export interface Backend {
  /** Settings every process of this backend shares (database, bus, secret). */
  readonly env: Record<string, string>
  readonly dispose: () => Promise<void>
}

/**
 * A private backend for one suite: in embedded mode a fresh DATA_DIR; in PostgreSQL mode a fresh
 * database, a NATS prefix of its own and a JWT secret.
 */
export const createBackend = async (options: { readonly forcePostgres?: boolean } = {}): Promise<Backend> => {
  const dataDir = createDataDir({ migrated: true })
  const pgUrl = adminDatabaseUrl ?? (options.forcePostgres ? localPostgresUrl : undefined)
  if (!pgUrl) {
    return { env: { DATA_DIR: dataDir.dir, PGLITE_SHARED_BUFFERS: testPgliteSharedBuffers }, dispose: async () => dataDir.remove() }
  }
  const database = await createDatabase(pgUrl, { migrated: true })
  const env: Record<string, string> = {
    DATA_DIR: dataDir.dir,
    PGLITE_SHARED_BUFFERS: testPgliteSharedBuffers,
    DATABASE_URL: database.url,
    JWT_SECRET: testSecret()
  }
  const natsUrl = sharedNatsUrl ?? (options.forcePostgres ? localNatsUrl : undefined)
  if (natsUrl) {
    env.NATS_URL = natsUrl
    env.NATS_PREFIX = natsPrefix()
  }
  return {
    env,
    // Each part is removed even when another fails; the first failure is then the suite's.
    dispose: async () => {
      const results = await Promise.allSettled([
        database.drop(),
        Promise.resolve().then(dataDir.remove),
        env.NATS_PREFIX ? deleteStreams(natsUrl!, env.NATS_PREFIX) : Promise.resolve()
      ])
      const failed = results.find((result) => result.status === "rejected")
      if (failed) throw failed.reason
    }
  }
}

export interface SuiteServer {
  readonly backend: Backend
  readonly server: Server
  readonly url: string
}

/**
 * One server on a private backend for the whole suite (vitest `beforeAll`/`afterAll`), stopped and
 * cleaned up afterwards. `onReady` receives it once it answers.
 */
export const useSuiteServer = (onReady: (suite: SuiteServer) => void, env: Record<string, string> = {}) => {
  let suite: SuiteServer | undefined
  beforeAll(async () => {
    const backend = await createBackend()
    try {
      const server = await startServer({ ...backend.env, ...env })
      suite = { backend, server, url: server.url }
    } catch (error) {
      await backend.dispose()
      throw error
    }
    onReady(suite)
  })
  // A test that fails shows what the server logged while it ran (warnings and errors: a 500's cause
  // is in them, and the answer itself says only INTERNAL_ERROR).
  let logged = 0
  beforeEach(() => {
    logged = suite?.server.output().length ?? 0
  })
  afterEach(({ task }) => {
    const during = suite?.server.output().slice(logged).trim()
    if (task.result?.state === "fail" && during) console.error(`The server logged during "${task.name}":\n${during.slice(-6000)}`)
  })
  afterAll(async () => {
    const code = await suite?.server.stop()
    await suite?.backend.dispose()
    // SIGTERM drains and exits 0 (README, "Drain"); a server that hangs on its way out is cut off at
    // SHUTDOWN_TIMEOUT with exit 1 (one MCP request did that, unseen: every stop took 30 s).
    if (suite !== undefined && code !== 0) {
      throw new Error(`The suite's server did not stop cleanly on SIGTERM (exit ${code}):\n${suite.server.output().slice(-3000)}`)
    }
  })
}
