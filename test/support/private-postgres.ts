/**
 * A private PostgreSQL server in a temporary cluster on a spare port, so a test can crash it
 * (`pg_ctl stop -m immediate`: no checkpoint, recovery from the WAL on the next start) without
 * touching the machine's shared one. Uses the machine's PostgreSQL binaries; initdb refuses to run
 * as root, so when the tests run as root the server runs as the `postgres` user.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { freePort } from "./server.ts"

export interface PrivatePostgres {
  /** `postgres://postgres@127.0.0.1:<port>/postgres` (trust authentication). */
  readonly url: string
  /** Immediate shutdown: every backend is killed, nothing is flushed beyond what was committed. */
  readonly crash: () => void
  readonly start: () => void
  readonly dispose: () => void
}

const binDir = (): string | undefined => {
  const root = "/usr/lib/postgresql"
  if (!fs.existsSync(root)) return undefined
  const versions = fs.readdirSync(root).filter((v) => fs.existsSync(path.join(root, v, "bin", "initdb")))
  const newest = versions.sort((a, b) => Number(b) - Number(a))[0]
  return newest ? path.join(root, newest, "bin") : undefined
}

/** Whether this machine can run a private server (PostgreSQL's binaries installed). */
export const privatePostgresAvailable = () => binDir() !== undefined

export const startPrivatePostgres = async (): Promise<PrivatePostgres> => {
  const bin = binDir()
  if (!bin) throw new Error("PostgreSQL's binaries (initdb, pg_ctl) are not installed under /usr/lib/postgresql")
  const asRoot = process.getuid?.() === 0
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "mailroom-pg-"))
  const dataDir = path.join(dir, "data")
  const log = path.join(dir, "server.log")
  fs.chmodSync(dir, 0o755)
  if (asRoot) execFileSync("chown", ["postgres:postgres", dir])
  const run = (tool: string, args: ReadonlyArray<string>) =>
    asRoot
      ? execFileSync("runuser", ["-u", "postgres", "--", path.join(bin, tool), ...args], { stdio: "pipe" })
      : execFileSync(path.join(bin, tool), args, { stdio: "pipe" })

  const port = await freePort()
  run("initdb", ["-D", dataDir, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8"])
  // Its own socket directory and loopback only; fsync stays on, so a crash is a real crash.
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c max_connections=60`
  const start = () => void run("pg_ctl", ["-D", dataDir, "-l", log, "-o", options, "-w", "-t", "60", "start"])
  const stop = (mode: "immediate" | "fast") => void run("pg_ctl", ["-D", dataDir, "-m", mode, "-w", "stop"])
  start()
  let disposed = false
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    crash: () => stop("immediate"),
    start,
    dispose: () => {
      if (disposed) return
      disposed = true
      try {
        stop("fast")
      } catch {
        // already stopped (a test that crashed it last); the directory goes all the same
      }
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }
}
