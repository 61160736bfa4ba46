/** The operating settings are checked at start like every other: a bad value stops the process naming it. */
import { spawn } from "node:child_process"
import { expect, it } from "vitest"
import { repoRoot } from "../support/server.ts"
import { createDataDir } from "../support/services.ts"

it("refuses a bad LOG_FORMAT, METRICS_PORT and SHUTDOWN_TIMEOUT, naming each, with exit 1", async () => {
  const dataDir = createDataDir()
  const { code, stderr } = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
    const child = spawn(process.execPath, ["--import", "tsx", "src/main.ts"], {
      cwd: repoRoot,
      env: { ...process.env, DATA_DIR: dataDir.dir, LOG_FORMAT: "xml", METRICS_PORT: "99999", SHUTDOWN_TIMEOUT: "-1" },
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
    `LOG_FORMAT: Expected one of (pretty, json) but received "xml"`,
    `METRICS_PORT: Expected a network port value but received "99999"`,
    "SHUTDOWN_TIMEOUT: Expected a number of seconds greater than 0 but received -1",
    ""
  ].join("\n"))
})
