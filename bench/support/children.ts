/**
 * What the benches that start Mailroom as child processes share: settings read as seconds, one
 * clean-up list run once on success, failure or signal, a scratch directory, and children started
 * with only the settings the bench gives them (never the caller's Mailroom variables), their output
 * in a log file the bench quotes when something goes wrong.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { sleep } from "../../test/support/wait.ts"

/** A run that cannot be measured: the bench says why and exits 1. */
export class BenchError extends Error {}

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")

/** The node flags `npm start`, `npm run start:prod` and the image give the server (package.json, Dockerfile). */
export const PRODUCTION_NODE_ARGS = "--max-semi-space-size=64"

/**
 * The node flags a bench starts its servers with: the setting `name` when given (empty for none;
 * add profiling flags to the production ones, e.g. "--max-semi-space-size=64 --cpu-prof"), else the
 * production launchers' own, so that a bench measures the server as it runs.
 */
export const serverNodeArgs = (name: string): ReadonlyArray<string> =>
  (process.env[name] ?? PRODUCTION_NODE_ARGS).split(/\s+/).filter((arg) => arg.length > 0)

/** A setting in seconds, from the environment; a positive number or the bench stops. */
export const seconds = (name: string, fallback: number) => {
  const value = Number(process.env[name] ?? fallback)
  if (!Number.isFinite(value) || value <= 0) throw new Error(`${name} must be a positive number of seconds`)
  return value
}

// ---------------------------------------------------------------------------------------------
// Clean-up: every step registered is run once, last registered first, on success, failure or signal.

const cleanups: Array<() => Promise<void>> = []
export const onCleanup = (step: () => Promise<void>) => cleanups.unshift(step)
let cleaning: Promise<void> | undefined
/** Stop the children, drop databases, remove temporary files: once, whoever asks first. */
export const cleanUp = () =>
  cleaning ??= (async () => {
    for (const step of cleanups.splice(0)) {
      await step().catch((error: unknown) => console.error(`clean-up step failed: ${String(error)}`))
    }
  })()

/** A temporary directory removed at clean-up. */
export const scratchDirectory = (prefix: string) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix))
  onCleanup(async () => fs.rmSync(dir, { recursive: true, force: true }))
  return dir
}

// ---------------------------------------------------------------------------------------------
// Child processes

/** The last `lines` lines of a child's log. */
export const logTail = (file: string, lines = 40) => {
  try {
    return fs.readFileSync(file, "utf8").trimEnd().split("\n").slice(-lines).join("\n") || "(no output)"
  } catch {
    return "(no output)"
  }
}

/** Every variable Mailroom reads: children get only what the bench sets, never the caller's. */
const MAILROOM_SETTINGS = new Set([
  "PORT", "HOST", "APP_URL", "SMTP_PORT", "SMTP_HOST", "ROLES", "DATA_DIR", "DATABASE_URL", "NATS_URL", "NATS_PREFIX",
  "QDRANT_URL", "QDRANT_API_KEY", "OPENAI_API_KEY", "EMBEDDING_MODEL", "STRIPE_SECRET_KEY", "STRIPE_WEBHOOK_SECRET",
  "STRIPE_PRICE_PRO", "STRIPE_PRICE_ENTERPRISE", "SHARED_DOMAINS", "DISALLOWED_EMAIL_NAME", "MX_HOST", "VERIFY_PREFIX",
  "FREE_MAX_CUSTOM_DOMAINS", "DNS_SERVERS", "WEBHOOK_ALLOW_PRIVATE", "OUTBOUND_ALLOW_PRIVATE", "JWT_SECRET", "LOG_LEVEL", "SMTP_TLS_CERT",
  "SMTP_TLS_KEY", "SMTP_MAX_CONNECTIONS_PER_IP", "SUBMISSION_PORT", "SUBMISSIONS_PORT", "SUBMISSION_HOST", "VERIFY_INBOUND", "DMARC_ENFORCE", "RSPAMD_URL", "SPAM_REJECT"
])

const childEnv = (settings: Record<string, string>) => {
  const env: Record<string, string> = {}
  for (const [name, value] of Object.entries(process.env)) {
    if (value !== undefined && !MAILROOM_SETTINGS.has(name)) env[name] = value
  }
  return { ...env, ...settings }
}

export interface Child {
  readonly name: string
  readonly child: ChildProcess
  readonly logFile: string
  readonly exited: () => boolean
  /** SIGTERM, then SIGKILL if it has not exited within the child's `stopWithinMs`. */
  readonly stop: () => Promise<void>
}

export interface ChildOptions {
  /** Where the log file goes (the bench's scratch directory). */
  readonly logDir: string
  /** Node flags before the script (e.g. `--cpu-prof`). */
  readonly nodeArgs: ReadonlyArray<string>
  readonly stopWithinMs: number
}

/** `script` (TypeScript, through tsx) in a child process of its own, stopped at clean-up. */
export const spawnChild = (name: string, script: string, settings: Record<string, string>, options: ChildOptions): Child => {
  const logFile = path.join(options.logDir, `${name.replace(/[^A-Za-z0-9]+/g, "-")}.log`)
  const log = fs.openSync(logFile, "w")
  const child = spawn(process.execPath, [...options.nodeArgs, "--import", "tsx", script], {
    cwd: repoRoot,
    env: childEnv(settings),
    stdio: ["ignore", log, log]
  })
  fs.closeSync(log)
  let exited = false
  const exit = new Promise<void>((resolve) =>
    child.once("exit", () => {
      exited = true
      resolve()
    })
  )
  const stop = async () => {
    if (exited) return
    child.kill("SIGTERM")
    const stopped = await Promise.race([exit.then(() => true), sleep(options.stopWithinMs).then(() => false)])
    if (!stopped) {
      child.kill("SIGKILL")
      await exit
    }
  }
  onCleanup(stop)
  return { name, child, logFile, exited: () => exited, stop }
}

/** Wait until `ready` is true, failing if the child exits first or the time runs out. */
export const waitReady = async (server: Child, what: string, withinMs: number, ready: () => Promise<boolean>) => {
  const deadline = Date.now() + withinMs
  while (true) {
    if (server.exited()) {
      throw new BenchError(`${server.name} exited during start-up (code ${server.child.exitCode}). Its output:\n${logTail(server.logFile)}`)
    }
    if (await ready()) return
    if (Date.now() > deadline) {
      throw new BenchError(`${server.name}: ${what} not ready within ${withinMs / 1000} s. Its output:\n${logTail(server.logFile)}`)
    }
    await sleep(100)
  }
}
