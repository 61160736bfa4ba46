/**
 * The production build, as the image runs it: `npm run build` bundles the server into JavaScript, and
 * `node <out>/src/main.js` (no tsx) serves the whole product — migrations run, mail sent over SMTP is
 * stored, and indexed by the embedder's worker thread, so a search finds it. Runs once per CI (the
 * embedded run): the build is the same whichever database the product is given.
 *
 * Under `npm test` the build is the one test/run.mjs made with the same script (MAILROOM_TEST_BUILD),
 * not a second compile; run alone, the suite builds into a directory of its own, asynchronously (a
 * compile that blocks the worker for a minute makes vitest's own messages time out).
 */
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import nodemailer from "nodemailer"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { withApiKey } from "./support/accounts.ts"
import { upgrade } from "./support/billing.ts"
import { newBox } from "./support/mailboxes.ts"
import { createDataDir, mode, type TestDataDir } from "./support/services.ts"
import { freePort, repoRoot, type Server, startServer } from "./support/server.ts"
import { withKey } from "./support/typed-client.ts"
import { until } from "./support/wait.ts"

/** A command's exit status and output, without blocking this worker while it runs. */
const runCommand = (file: string, args: ReadonlyArray<string>, env: NodeJS.ProcessEnv = process.env) =>
  new Promise<{ status: number; stdout: string; stderr: string }>((resolve) =>
    execFile(file, [...args], { encoding: "utf8", env }, (error, stdout, stderr) =>
      resolve({ status: error === null ? 0 : typeof error.code === "number" ? error.code : 1, stdout, stderr }))
  )

describe.skipIf(mode !== "embedded")("the production build", () => {
  // Made in beforeAll, not here: a skipped suite's body still runs (to collect its tests), its hooks do not.
  const prebuilt = process.env.MAILROOM_TEST_BUILD
  let outDir = ""
  let dataDir: TestDataDir | undefined
  let server: Server

  beforeAll(async () => {
    outDir = prebuilt ?? fs.mkdtempSync(path.join(os.tmpdir(), "mailroom-build-"))
    dataDir = createDataDir()
    if (prebuilt === undefined) {
      const build = await runCommand("npm", ["run", "--prefix", repoRoot, "build", "--", outDir])
      expect(build.status, `${build.stdout}\n${build.stderr}`).toBe(0)
      // Dependencies resolve from the output's parents, as they do from /app in the image.
      fs.symlinkSync(path.join(repoRoot, "node_modules"), path.join(outDir, "node_modules"), "dir")
    }
    server = await startServer({ DATA_DIR: dataDir.dir }, { entry: [path.join(outDir, "src/main.js")] })
  }, 240_000)

  afterAll(async () => {
    await server?.stop()
    dataDir?.remove()
    if (prebuilt === undefined && outDir !== "") fs.rmSync(outDir, { recursive: true, force: true })
  })

  it("bundles the server into JavaScript that imports no TypeScript and no source file", () => {
    const files = fs.readdirSync(path.join(outDir, "src"), { recursive: true, encoding: "utf8" }).filter((file) => /\.m?js$/.test(file))
    expect(files).toContain("main.js")
    // Relative imports reach only the bundle's own files beside the importing one (chunks, the scripts
    // copied beside main.js, the dashboard's modules), and each is there.
    const unresolved = files.flatMap((file) =>
      [...fs.readFileSync(path.join(outDir, "src", file), "utf8").matchAll(/(?:from|import\()\s*"(\.{1,2}\/[^"]*)"/g)]
        .map((match) => match[1]!)
        .filter((specifier) => !/^\.\/[\w.-]+\.m?js$/.test(specifier) || !fs.existsSync(path.join(outDir, "src", path.dirname(file), specifier)))
    )
    expect(unresolved).toEqual([])
    expect(fs.existsSync(path.join(outDir, "services"))).toBe(false)
  })

  it("runs without tsx: mail sent over SMTP is stored and found by search", async () => {
    expect(server.process.spawnargs.join(" ")).not.toContain("tsx")
    const box = await newBox(server.url, { user: await withApiKey(server.url) })
    await upgrade(server.url, box.user.apiKey, "enterprise") // searches a minute enough to poll
    const transport = nodemailer.createTransport({ host: "127.0.0.1", port: server.smtpPort, secure: false, ignoreTLS: true })
    try {
      const info = await transport.sendMail({
        from: "sender@example.com",
        to: box.address,
        subject: "Invoice 2291 is due",
        text: "The invoice for November is attached; the amount is due within 14 days."
      })
      expect(info.response).toMatch(/^250 /)
    } finally {
      transport.close()
    }
    const found = await until("the email is searchable", async () => {
      const reply = await withKey(server.url, box.user).POST("/v1/search", { body: { query: "invoice due", mode: "hybrid" } })
      expect(reply.response.status, JSON.stringify(reply.error)).toBe(200)
      return reply.data!.data.length > 0 ? reply.data!.data : undefined
    }, 60_000, 1_000)
    expect(found[0]!.subject).toBe("Invoice 2291 is due")
  }, 120_000)

  it("serves the dashboard: its page, its own modules and the vendored Preact and htm", async () => {
    const page = await fetch(`${server.url}/`)
    expect(page.status).toBe(200)
    const html = await page.text()
    const urls = [...html.matchAll(/(?:src|href)="(\/assets\/[^"]+)"/g), ...html.matchAll(/"(\/assets\/[^"]+\/vendor\/[^"]+)"/g)].map((m) => m[1]!)
    expect(urls.length).toBeGreaterThanOrEqual(7)
    for (const url of urls) expect((await fetch(`${server.url}${url}`)).status, url).toBe(200)
  })

  it("runs the mailroom command from the image's layout: bin/ beside dist/, no sources, no tsx", async () => {
    // As the Dockerfile lays out /app: bin/mailroom.mjs next to dist/ (here a link to the build),
    // nothing else. tsx is not reachable from bin/, so the command must run the build.
    const layout = fs.mkdtempSync(path.join(os.tmpdir(), "mailroom-image-"))
    try {
      fs.cpSync(path.join(repoRoot, "bin"), path.join(layout, "bin"), { recursive: true })
      fs.symlinkSync(outDir, path.join(layout, "dist"), "dir")
      const help = await runCommand(path.join(layout, "bin/mailroom.mjs"), ["help"])
      expect(help.status, `${help.stdout}\n${help.stderr}`).toBe(0)
      expect(help.stdout).toMatch(/^Usage: mailroom/)
      const wrong = await runCommand(path.join(layout, "bin/mailroom.mjs"), ["fly"])
      expect(wrong.status).toBe(2)
      expect(wrong.stderr).toMatch(/unknown command fly/)
    } finally {
      fs.rmSync(layout, { recursive: true, force: true })
    }
  })

  it("passes the image's health check (deploy/healthcheck.mjs) for its roles, and fails it when nothing answers", async () => {
    const check = async (env: Record<string, string>) =>
      (await runCommand(process.execPath, [path.join(repoRoot, "deploy/healthcheck.mjs")], { ...process.env, ...env })).status
    const nobody = String(await freePort())
    // With the api role (ROLES unset: every role): GET /healthz on PORT.
    expect(await check({ PORT: String(server.port) })).toBe(0)
    expect(await check({ PORT: nobody })).toBe(1)
    // A variable set to nothing is not set, as the server reads it: ROLES= is every role.
    expect(await check({ ROLES: "", PORT: nobody })).toBe(1)
    // Without it: GET /healthz on METRICS_PORT (this process serves it on its API port, as such a node beside /metrics).
    expect(await check({ ROLES: "worker", METRICS_PORT: String(server.port) })).toBe(0)
    expect(await check({ ROLES: "worker", METRICS_PORT: nobody })).toBe(1)
    // The smtp role without METRICS_PORT: the SMTP port takes a connection.
    expect(await check({ ROLES: "smtp", SMTP_PORT: String(server.smtpPort) })).toBe(0)
    expect(await check({ ROLES: "smtp", SMTP_PORT: nobody })).toBe(1)
  })
})
