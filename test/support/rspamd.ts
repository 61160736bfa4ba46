/**
 * A real rspamd (Debian's package; .ci/run installs it) for tests: Debian's stock rules, with a
 * private directory of local overrides: one normal worker on a loopback port, no controller or
 * proxy, no fuzzy servers or Redis, DNS look-ups (RBLs) sent where nothing answers so they fail at
 * once, and logs on stderr. Its list of top-level domains (for finding URLs in mail) is the few the
 * tests' mail uses: the public suffix list compiles into a Hyperscan database of ~40 MB, 17-20 s of
 * CPU at every start in a fresh directory (with it a start took ~18 s, without it ~1.5 s). A suite
 * starts one in `beforeAll`; `stop` and `start` again simulate an outage on the same port.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { freePort } from "./process.ts"
import { sleep } from "./wait.ts"

export interface Rspamd {
  readonly url: string
  readonly start: () => Promise<void>
  readonly stop: () => Promise<void>
  /** Stop it and remove its directory. */
  readonly close: () => Promise<void>
}

const STARTUP_TIMEOUT_MS = 90_000

export const rspamdInstalled = () => spawnSync("rspamd", ["--version"]).status === 0

export const startRspamd = async (): Promise<Rspamd> => {
  if (!rspamdInstalled()) throw new Error("rspamd is not installed (Debian package `rspamd`; .ci/run installs it)")
  const port = await freePort()
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "mailroom-rspamd-"))
  for (const sub of ["local.d", "override.d", "run", "db"]) fs.mkdirSync(path.join(dir, sub))
  const write = (file: string, text: string) => fs.writeFileSync(path.join(dir, file), text)
  write("override.d/worker-normal.inc", `bind_socket = "127.0.0.1:${port}";\ncount = 1;\n`)
  write("override.d/worker-controller.inc", "enabled = false;\n")
  write("override.d/worker-proxy.inc", "enabled = false;\n")
  write("override.d/fuzzy_check.conf", "enabled = false;\n")
  write("override.d/logging.inc", "type = \"console\";\nlevel = \"error\";\n")
  write("tld.dat", "com\norg\nnet\nexample\ntest\nlocalhost\n")
  write("local.d/options.inc", `url_tld = "${path.join(dir, "tld.dat")}";\ndns { nameserver = ["127.0.0.1:1"]; timeout = 0.2s; retransmits = 1; }\n`)
  const root = process.getuid?.() === 0
  const args = [
    "-f",
    ...(root ? ["-i", "-u", "root", "-g", "root"] : []),
    `--var=LOCAL_CONFDIR=${dir}`,
    `--var=RUNDIR=${path.join(dir, "run")}`,
    `--var=DBDIR=${path.join(dir, "db")}`,
    `--var=LOGDIR=${dir}`
  ]
  const url = `http://127.0.0.1:${port}`
  let child: ChildProcess | undefined
  let output = ""

  const start = async () => {
    output = ""
    const started = spawn("rspamd", args, { cwd: dir, stdio: ["ignore", "pipe", "pipe"] })
    child = started
    started.stdout!.on("data", (chunk: Buffer) => void (output += chunk.toString()))
    started.stderr!.on("data", (chunk: Buffer) => void (output += chunk.toString()))
    const deadline = Date.now() + STARTUP_TIMEOUT_MS
    for (;;) {
      if (started.exitCode !== null) throw new Error(`rspamd exited with ${started.exitCode}:\n${output}`)
      const ping = await fetch(`${url}/ping`).then((r) => r.ok, () => false)
      if (ping) return
      if (Date.now() > deadline) throw new Error(`rspamd did not answer on ${url} within ${STARTUP_TIMEOUT_MS} ms:\n${output}`)
      await sleep(250)
    }
  }

  const stop = async () => {
    const running = child
    child = undefined
    if (!running || running.exitCode !== null) return
    const exited = new Promise<void>((resolve) => running.once("exit", () => resolve()))
    running.kill("SIGTERM")
    const killed = setTimeout(() => running.kill("SIGKILL"), 10_000)
    await exited
    clearTimeout(killed)
    // The main process stops its workers as it exits; the port is free once nothing answers.
    while (await fetch(`${url}/ping`).then(() => true, () => false)) await sleep(100)
  }

  await start()
  return {
    url,
    start,
    stop,
    close: async () => {
      await stop()
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }
}
