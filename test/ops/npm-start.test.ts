/**
 * `npm start`, as the README's first screen gives it, drains on SIGTERM like any other start: the
 * signal reaches Mailroom's own node process. Through tsx's command-line wrapper it did not always:
 * the wrapper passes the signal on and, unless its child confirms within ~60 ms, kills it (exit 143,
 * no drain, the embedded database not closed). A node busy parsing mail is busy that long, so here
 * a preloaded module keeps the event loop busy for a second when the test asks, and the signal comes
 * meanwhile. Embedded mode only: what `npm start` runs by default.
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { freePort, repoRoot } from "../support/process.ts"
import { mode } from "../support/services.ts"
import { sleep, until } from "../support/wait.ts"

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "mailroom-npm-start-"))
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))

describe.skipIf(mode !== "embedded")("npm start", () => {
  it("drains on SIGTERM and exits 0, even when the signal comes while the event loop is busy", { timeout: 120_000 }, async () => {
    const trigger = path.join(dir, "busy")
    const preload = path.join(dir, "busy.mjs")
    // Only in Mailroom's own process (npm, and a wrapper, are node processes too).
    fs.writeFileSync(preload, `
      import * as fs from "node:fs"
      if (process.argv[1]?.endsWith("main.ts")) {
        setInterval(() => {
          if (!fs.existsSync(${JSON.stringify(trigger)})) return
          fs.rmSync(${JSON.stringify(trigger)})
          const end = Date.now() + 1000
          while (Date.now() < end) {}
        }, 5).unref()
      }
    `)
    const port = await freePort()
    const child = spawn("npm", ["start"], {
      cwd: repoRoot,
      env: {
        ...process.env,
        DATA_DIR: path.join(dir, "data"),
        PORT: String(port),
        SMTP_PORT: String(await freePort()),
        NODE_OPTIONS: `--import=${preload}`,
        LOG_LEVEL: "info"
      },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    child.stdout.on("data", (chunk) => (output += chunk))
    child.stderr.on("data", (chunk) => (output += chunk))
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
    await until("npm start answering", async () => (await fetch(`http://127.0.0.1:${port}/healthz`).catch(() => undefined))?.ok || undefined, 90_000)

    fs.writeFileSync(trigger, "")
    await until("the event loop busy", async () => !fs.existsSync(trigger) || undefined, 5_000)
    await sleep(50)
    child.kill("SIGTERM")
    expect(await exited, output).toBe(0)
    expect(output).toMatch(/Shutdown complete/)
  })
})
