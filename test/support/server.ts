/**
 * Start Mailroom as users run it: `node src/main.ts` in its own process, configured only through
 * environment variables, talked to over real HTTP.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { afterAll, beforeAll } from "vitest"
import * as net from "node:net"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import {
  adminDatabaseUrl,
  createDatabase,
  createDataDir,
  natsPrefix,
  sharedNatsUrl,
  testSecret
} from "./services.ts"

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")

export const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = net.createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as net.AddressInfo
      server.close(() => resolve(port))
    })
  })

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
  const dataDir = createDataDir()
  const pgUrl = adminDatabaseUrl ?? (options.forcePostgres ? "postgres://postgres@127.0.0.1:5432/test" : undefined)
  if (!pgUrl) {
    return { env: { DATA_DIR: dataDir.dir }, dispose: async () => dataDir.remove() }
  }
  const database = await createDatabase(pgUrl)
  const env: Record<string, string> = { DATA_DIR: dataDir.dir, DATABASE_URL: database.url, JWT_SECRET: testSecret() }
  const natsUrl = sharedNatsUrl ?? (options.forcePostgres ? "nats://127.0.0.1:4222" : undefined)
  if (natsUrl) {
    env.NATS_URL = natsUrl
    env.NATS_PREFIX = natsPrefix()
  }
  return {
    env,
    dispose: async () => {
      await database.drop()
      dataDir.remove()
      if (env.NATS_PREFIX) await deleteStreams(natsUrl!, env.NATS_PREFIX)
    }
  }
}

/** Remove the JetStream streams a test prefix created. */
export const deleteStreams = async (url: string, prefix: string) => {
  const { connect } = await import("@nats-io/transport-node")
  const { jetstreamManager } = await import("@nats-io/jetstream")
  const nc = await connect({ servers: url })
  try {
    const jsm = await jetstreamManager(nc)
    for await (const name of jsm.streams.names()) {
      if (name.startsWith(prefix.replace(/[^A-Za-z0-9_-]/g, "_"))) await jsm.streams.delete(name)
    }
  } finally {
    await nc.close()
  }
}

export interface Server {
  readonly url: string
  readonly port: number
  readonly smtpPort: number
  readonly process: ChildProcess
  /** Everything the process printed so far. */
  readonly output: () => string
  /** SIGTERM, resolving with the exit code. */
  readonly stop: () => Promise<number | null>
  /** SIGKILL: a crash. */
  readonly kill: () => Promise<void>
}

const baseEnv = () => {
  const env: Record<string, string> = {}
  for (const [key, value] of Object.entries(process.env)) {
    if (value === undefined) continue
    // The suite decides which backend a server uses, never the shell it was started from.
    if (["DATABASE_URL", "NATS_URL", "NATS_PREFIX", "JWT_SECRET", "DATA_DIR", "ROLES", "PORT", "SMTP_PORT"].includes(key)) continue
    env[key] = value
  }
  return env
}

/** Spawn `src/main.ts` and wait until it answers /healthz (or `waitFor` returns true). */
export const startServer = async (
  env: Record<string, string>,
  options: {
    readonly timeoutMs?: number
    readonly ready?: "healthz" | "none"
    /** What node runs: the sources through tsx, unless a test runs a build. */
    readonly nodeArgs?: ReadonlyArray<string>
  } = {}
): Promise<Server> => {
  const port = env.PORT ? Number(env.PORT) : await freePort()
  const smtpPort = env.SMTP_PORT ? Number(env.SMTP_PORT) : await freePort()
  const child = spawn(process.execPath, [...(options.nodeArgs ?? ["--import", "tsx", "src/main.ts"])], {
    cwd: repoRoot,
    // One embedding thread per test server: suites run side by side, each with its own server.
    env: { ...baseEnv(), LOG_LEVEL: "warn", EMBEDDER_THREADS: "1", ...env, PORT: String(port), SMTP_PORT: String(smtpPort) },
    stdio: ["ignore", "pipe", "pipe"]
  })
  let output = ""
  child.stdout!.on("data", (chunk) => (output += chunk))
  child.stderr!.on("data", (chunk) => (output += chunk))
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
  const url = `http://127.0.0.1:${port}`
  const server: Server = {
    url,
    port,
    smtpPort,
    process: child,
    output: () => output,
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode
      child.kill("SIGTERM")
      return exited
    },
    kill: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return
      child.kill("SIGKILL")
      await exited
    }
  }
  if (options.ready === "none") return server
  const deadline = Date.now() + (options.timeoutMs ?? 90_000)
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`Server exited with ${child.exitCode} before it was ready:\n${output}`)
    try {
      const response = await fetch(`${url}/healthz`)
      if (response.status === 200) return server
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  await server.kill()
  throw new Error(`Server not ready within the time-out:\n${output}`)
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
  afterAll(async () => {
    await suite?.server.stop()
    await suite?.backend.dispose()
  })
}
