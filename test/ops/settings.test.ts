/** The operating settings are checked at start like every other: a bad value stops the process naming it. */
import { spawn } from "node:child_process"
import { expect, it } from "vitest"
import { mailroomEntry } from "../support/process.ts"
import { repoRoot } from "../support/server.ts"
import { createDataDir } from "../support/services.ts"

it("refuses bad operating and outbound settings, naming each, with exit 1", async () => {
  const dataDir = createDataDir()
  const { code, stderr } = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
    const child = spawn(process.execPath, [...mailroomEntry()], {
      cwd: repoRoot,
      env: { ...process.env, DATA_DIR: dataDir.dir, LOG_FORMAT: "xml",
        METRICS_PORT: "99999",
        SHUTDOWN_TIMEOUT: "-1",
        SMTP_RELAY_URL: "http://relay.example.com",
        OUTBOUND_SMTP_PORT: "0x19",
        OUTBOUND_RETRY_DELAYS: "1m,soon",
        DKIM_SELECTOR: "no spaces",
        DATABASE_PREPARED_STATEMENTS: "maybe"
      },
      stdio: ["ignore", "ignore", "pipe"]
    })
    let stderr = ""
    child.stderr.on("data", (chunk) => (stderr += chunk))
    child.once("close", (code) => resolve({ code, stderr }))
  })
  dataDir.remove()
  expect(code).toBe(1)
  expect(stderr).toBe([
    "mailroom: invalid configuration",
    `DATABASE_PREPARED_STATEMENTS: Expected a boolean value but received "maybe"`,
    `LOG_FORMAT: Expected one of (pretty, json) but received "xml"`,
    `METRICS_PORT: Expected a network port value but received "99999"`,
    "SMTP_RELAY_URL: Expected smtp://[user:password@]host[:port] or smtps://…",
    `OUTBOUND_SMTP_PORT: Expected a network port value but received "0x19"`,
    `OUTBOUND_RETRY_DELAYS: Expected durations such as 1m,5m,1h but received "soon"`,
    `DKIM_SELECTOR: Expected a DNS label (letters, digits, -) but received "no spaces"`,
    "SHUTDOWN_TIMEOUT: Expected a number of seconds greater than 0 but received -1",
    ""
  ].join("\n"))
})
