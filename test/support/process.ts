/**
 * Start Mailroom as users run it: `node src/main.ts` (or its build) in its own process, configured only through
 * environment variables, talked to over real HTTP. Free of vitest, so that benchmarks use it too.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as net from "node:net"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")

/** Whether `port` can be listened on at 127.0.0.1 now. */
const bindable = (port: number) =>
  new Promise<boolean>((resolve) => {
    const server = net.createServer()
    server.once("error", () => resolve(false))
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)))
  })

/**
 * Ports below the kernel's ephemeral range (ip_local_port_range, 32768-60999 by default): 20000-31999,
 * in ranges of 3,000, one for each run of the suites on this machine at a time (`claimPortRange`), and
 * in its run's range each vitest worker a block of 500.
 */
const PORTS_FROM = 20_000
const RUN_RANGE = 3_000
const RUN_RANGES = 4
const PORTS_PER_WORKER = 500
const WORKER_BLOCKS = RUN_RANGE / PORTS_PER_WORKER
let handedOut = 0

/**
 * The range of ports this run's suites take theirs from, held until `release`: its first port is
 * listened on for as long, which is how a second run on the machine (another checkout's CI, an
 * engineer's `npm test`) sees the range is taken and claims the next. Without it two runs handed
 * out the same ports, and a suite of one talked to a server of the other (or found it gone).
 * global-setup claims one and passes it to the workers (MAILROOM_TEST_PORTS_FROM).
 */
export const claimPortRange = async (): Promise<{ readonly from: number; readonly release: () => Promise<void> }> => {
  for (let range = 0; range < RUN_RANGES; range++) {
    const from = PORTS_FROM + range * RUN_RANGE
    const holder = net.createServer()
    const held = await new Promise<boolean>((resolve) => {
      holder.once("error", () => resolve(false))
      holder.listen(from, "127.0.0.1", () => resolve(true))
    })
    if (held) {
      holder.unref()
      return { from, release: () => new Promise<void>((resolve) => holder.close(() => resolve())) }
    }
  }
  throw new Error(`Every range of test ports (${PORTS_FROM}-${PORTS_FROM + RUN_RANGES * RUN_RANGE - 1}) is held by another run of the suites`)
}

/**
 * A port for a server a test starts, which nothing else takes before the server listens on it, nor
 * while it is down between a crash and its restart on the same port. A port the kernel picks
 * (`listen(0)`) comes from its ephemeral range, which it also hands every outgoing connection: free
 * when found, it could be some connection's a moment later (EADDRINUSE, seen in CI). These come from
 * below that range: the run's range (`claimPortRange`; the first where no run claimed one, as a
 * benchmark), each vitest worker (`VITEST_POOL_ID`) its own block, in turn, each tried first.
 */
export const freePort = async (): Promise<number> => {
  const worker = Number(process.env["VITEST_POOL_ID"] ?? "1")
  const from = Number(process.env["MAILROOM_TEST_PORTS_FROM"] ?? PORTS_FROM)
  const block = from + ((Math.max(worker, 1) - 1) % WORKER_BLOCKS) * PORTS_PER_WORKER
  for (let tries = 0; tries < PORTS_PER_WORKER; tries++) {
    const port = block + (handedOut++ % PORTS_PER_WORKER)
    if (await bindable(port)) return port
  }
  throw new Error(`No free port in ${block}-${block + PORTS_PER_WORKER - 1}`)
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

/**
 * V8's flags for the Mailroom processes of the suites (vitest sets VITEST; benchmarks, which share this
 * module, and production keep V8's defaults): PGlite's WebAssembly is compiled by V8's baseline
 * compiler only. Optimising it (TurboFan, in background threads) took ~1.5 s of the ~5.5 s of CPU a
 * start costs, for code a test's statements run no faster with: 3,300 statements on one PGlite took
 * the same time either way and 1.8 s less CPU without. A run starts ~130 servers and commands.
 * vitest.config.ts gives its workers, with their in-process PGlites, the same flags.
 */
export const SUITE_NODE_FLAGS: ReadonlyArray<string> = ["--liftoff-only"]
const suiteNodeFlags = process.env.VITEST ? SUITE_NODE_FLAGS : []

/**
 * How node runs Mailroom in a test: the compiled build `npm test` makes once (test/run.mjs sets
 * MAILROOM_TEST_BUILD), which is what the production image runs and starts in half the CPU time of
 * compiling the sources through tsx in every process; the sources through tsx otherwise (a suite
 * run on its own with `npx vitest run`).
 */
export const mailroomEntry = (): ReadonlyArray<string> => {
  const build = process.env.MAILROOM_TEST_BUILD
  return [...suiteNodeFlags, ...(build ? [path.join(build, "src/main.js")] : ["--import", "tsx", "src/main.ts"])]
}

/** Spawn Mailroom (`mailroomEntry`) and wait until it answers /healthz (or `waitFor` returns true). */
export const startServer = async (
  env: Record<string, string>,
  options: {
    readonly timeoutMs?: number
    readonly ready?: "healthz" | "none"
    /** Node flags for the server, e.g. `--cpu-prof`. */
    readonly nodeArgs?: ReadonlyArray<string>
    /** What node runs: `mailroomEntry()` unless a test runs a build of its own. */
    readonly entry?: ReadonlyArray<string>
  } = {}
): Promise<Server> => {
  const port = env.PORT ? Number(env.PORT) : await freePort()
  const smtpPort = env.SMTP_PORT ? Number(env.SMTP_PORT) : await freePort()
  const child = spawn(process.execPath, [...(options.nodeArgs ?? []), ...(options.entry ?? mailroomEntry())], {
    cwd: repoRoot,
    // One embedding thread per test server: suites run side by side, each with its own server. Passwords
    // hashed at the lowest cost allowed (~4 ms a hash against ~130): suites register and log in hundreds
    // of users, and scrypt took over a quarter of the black-box suites' CPU (test/api, the webhook and
    // send suites: 196 s of wall time and 297 s of CPU at the default, 140-158 s and 215-244 s at 10). A test
    // that sets it keeps its own.
    env: {
      ...baseEnv(),
      LOG_LEVEL: "warn",
      EMBEDDER_THREADS: "1",
      PASSWORD_HASH_COST: "10",
      ...env,
      PORT: String(port),
      SMTP_PORT: String(smtpPort)
    },
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
