/**
 * A real PgBouncer (Debian's package; .ci/run installs it) in transaction mode in front of a PostgreSQL
 * server, for tests of what Mailroom does behind a pooler: its own directory and port, trust
 * authentication, run as `nobody` when the test runs as root (PgBouncer refuses root).
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { freePort } from "./process.ts"
import { sleep } from "./wait.ts"

export interface PgBouncer {
  /** `server`'s URL with the pooler's host and port. */
  readonly url: string
  readonly close: () => Promise<void>
}

const reachable = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = net.connect(port, "127.0.0.1")
    socket.once("connect", () => (socket.destroy(), resolve(true)))
    socket.once("error", () => resolve(false))
  })

/** A pooler for `server` (a postgres:// URL whose database it serves). */
export const startPgBouncer = async (server: string): Promise<PgBouncer> => {
  const target = new URL(server)
  const database = target.pathname.slice(1)
  const port = await freePort()
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "mailroom-pgbouncer-"))
  fs.chmodSync(dir, 0o755)
  const config = path.join(dir, "pgbouncer.ini")
  fs.writeFileSync(path.join(dir, "users.txt"), `"${decodeURIComponent(target.username)}" ""\n`, { mode: 0o644 })
  fs.writeFileSync(config, [
    "[databases]",
    `${database} = host=${target.hostname} port=${target.port || 5432} dbname=${database}`,
    "[pgbouncer]",
    "listen_addr = 127.0.0.1",
    `listen_port = ${port}`,
    "unix_socket_dir =",
    "auth_type = trust",
    `auth_file = ${path.join(dir, "users.txt")}`,
    "pool_mode = transaction",
    "ignore_startup_parameters = extra_float_digits,application_name",
    ""
  ].join("\n"), { mode: 0o644 })
  const asRoot = process.getuid?.() === 0
  const child: ChildProcess = spawn("pgbouncer", [...(asRoot ? ["-u", "nobody"] : []), config], { stdio: "ignore" })
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
  for (let waited = 0; !(await reachable(port)); waited += 50) {
    if (waited > 10_000 || child.exitCode !== null) throw new Error("pgbouncer did not start (Debian package `pgbouncer`; .ci/run installs it)")
    await sleep(50)
  }
  const url = new URL(server)
  url.hostname = "127.0.0.1"
  url.port = String(port)
  return {
    url: url.toString(),
    close: async () => {
      child.kill("SIGTERM")
      await Promise.race([exited, sleep(5_000)])
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }
}
