/**
 * The embedded database in its own thread (layers/pglite.ts): a data directory another live process
 * holds is refused, naming that process; a damaged one stops the start with PGlite's reason; a clean
 * stop closes the database and the vector index's PGlite beside it and leaves nothing behind (no lock,
 * no socket directory), so the next start
 * opens it, and so does the operator's command (`mailroom usage`), which is refused while a server holds it.
 * (That the data itself survives a restart is test/api/restart.test.ts; the commands themselves,
 * test/ops/cli.test.ts.)
 * Embedded mode only: with DATABASE_URL there is no PGlite to test.
 */
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { withApiKey } from "./support/accounts.ts"
import { mailroomEntry, repoRoot, type Server, startServer } from "./support/process.ts"
import { createDataDir, mode, type TestDataDir } from "./support/services.ts"
import { anonymous, withKey } from "./support/typed-client.ts"

const dirs: Array<TestDataDir> = []
const servers: Array<Server> = []
afterEach(async () => {
  for (const server of servers.splice(0)) await server.stop()
  for (const dir of dirs.splice(0)) dir.remove()
})

const dataDir = () => {
  const dir = createDataDir()
  dirs.push(dir)
  return dir.dir
}

/** Start a server on `dir` that is expected not to start; answers its exit code and output. */
const refusedStart = async (dir: string) => {
  const server = await startServer({ DATA_DIR: dir }, { ready: "none" })
  servers.push(server)
  const code = await new Promise<number | null>((resolve) => {
    if (server.process.exitCode !== null) return resolve(server.process.exitCode)
    server.process.once("exit", (exitCode) => resolve(exitCode))
  })
  // Everything the process printed has been read once its pipes close.
  await new Promise((resolve) => setTimeout(resolve, 200))
  return { code, output: server.output() }
}

/** `mailroom <args>` on the data directory `dir`, as an operator runs it on a laptop. */
const command = (dir: string, args: ReadonlyArray<string>) =>
  new Promise<{ readonly code: number; readonly stdout: string; readonly stderr: string }>((resolve) => {
    execFile(process.execPath, [...mailroomEntry(), ...args], { cwd: repoRoot, env: { ...process.env, DATA_DIR: dir } }, (error, stdout, stderr) =>
      resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }))
  })

const socketDirsOf = (pid: number) => fs.readdirSync(os.tmpdir()).filter((entry) => entry.startsWith(`mailroom-pglite-${pid}-`))

describe.skipIf(mode !== "embedded")("embedded database", () => {
  it("refuses a data directory another live process holds, naming it; the holder keeps serving", async () => {
    const dir = dataDir()
    const holder = await startServer({ DATA_DIR: dir })
    servers.push(holder)
    const { code, output } = await refusedStart(dir)
    expect(code).toBe(1)
    expect(output).toContain(`The embedded database in ${dir} is in use by process ${holder.process.pid}`)
    expect(output).not.toMatch(/\bat .*\.[mc]?[jt]s:\d+/) // no stack trace, from the sources or the build
    // An operator's command likewise: the server must be stopped first.
    const usage = await command(dir, ["usage", "someone@example.com"])
    expect(usage.code).toBe(1)
    expect(usage.stderr).toContain(`The embedded database in ${dir} is in use by process ${holder.process.pid}`)
    expect((await anonymous(holder.url).GET("/readyz")).response.status).toBe(200)
  })

  it("stops with the reason when the data directory is damaged", async () => {
    const dir = dataDir()
    const first = await startServer({ DATA_DIR: dir })
    expect(await first.stop()).toBe(0)
    fs.writeFileSync(path.join(dir, "pglite", "global", "pg_control"), "not a control file")
    const { code, output } = await refusedStart(dir)
    expect(code).toBe(1)
    expect(output).toContain(`Could not open the embedded database in ${path.join(dir, "pglite")}`)
    // The refused start gave the directory back.
    expect(fs.existsSync(path.join(dir, "mailroom.lock"))).toBe(false)
  })

  it("a clean stop closes the database and leaves no lock or socket behind; the next start opens it", async () => {
    const dir = dataDir()
    const first = await startServer({ DATA_DIR: dir, LOG_LEVEL: "info" })
    // A first start applies every migration, said in one short line.
    const migrations = fs.readdirSync(path.join(repoRoot, "migrations")).filter((file) => file.endsWith(".sql")).sort()
      .map((file) => file.replace(/^0+/, "").replace(/\.sql$/, ""))
    expect(first.output()).toContain(`Applied ${migrations.length} migrations: ${migrations[0]} to ${migrations.at(-1)}\n`)
    const user = await withApiKey(first.url)
    const pid = first.process.pid!
    // The database and, beside it, the vector index's own (layers/pgvector-index.ts `apartLayer`).
    expect(socketDirsOf(pid)).toHaveLength(2)
    // Their files (all mail, webhook secrets) are the owner's alone: PGlite writes them readable by all,
    // so the directories holding them are closed to others.
    for (const data of [path.join(dir, "pglite"), path.join(dir, "vectors", "pglite")]) {
      expect((fs.statSync(data).mode & 0o777).toString(8), data).toBe("700")
    }
    expect(await first.stop()).toBe(0)
    expect(first.output()).not.toMatch(/did not close cleanly/)
    expect(fs.existsSync(path.join(dir, "mailroom.lock"))).toBe(false)
    expect(fs.existsSync(path.join(dir, "vectors", "mailroom.lock"))).toBe(false)
    expect(socketDirsOf(pid)).toHaveLength(0)
    // Stopped, the operator's command opens it.
    const usage = await command(dir, ["usage", user.email])
    expect(usage.stderr).toBe("")
    expect(usage.stdout).toContain("plan:      free (active)")

    const second = await startServer({ DATA_DIR: dir, LOG_LEVEL: "info" })
    servers.push(second)
    expect((await withKey(second.url, user).GET("/v1/api-keys")).response.status).toBe(200)
    expect(second.output()).not.toContain("Applied")
  })
})
