/**
 * The operator's CLI as an operator runs it: `bin/mailroom.mjs` (the package's `bin`, what
 * `npx mailroom` runs) and `npm run reindex --all`, as processes against this suite's own data
 * directory (or database). An account made by the CLI logs in over the API on the plan the CLI set;
 * a key made over the API is revoked by the CLI; `--all` reaches reindex through npm; the account is
 * then deleted by the CLI.
 *
 * PostgreSQL + NATS run only: every command is its own process, and on the embedded database each
 * would open it again (PGlite: seconds of CPU a command, the embedded run's costliest suite); what the
 * commands do goes through the same services whichever database is behind them. That a command opens
 * the embedded database (once the server is stopped, and not before) is test/embedded-database.test.ts.
 *
 * The bin only hands its arguments to the entry point (src/main.ts, or the build's main.js): the first
 * case runs it as `npx mailroom` does; the others run the entry point the suites start
 * (`mailroomEntry`: under `npm test` the build made once, not tsx compiling the sources per command).
 */
import { spawn } from "node:child_process"
import * as path from "node:path"
import pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { totpAt } from "../../services/accounts/totp.ts"
import { DOMAIN, fresh } from "../support/mailboxes.ts"
import { freePort, mailroomEntry } from "../support/process.ts"
import { type Backend, createBackend, repoRoot, type Server, startServer } from "../support/server.ts"
import { adminDatabaseUrl, createDatabase, mode } from "../support/services.ts"
import { connectSmtp, envelope } from "../support/smtp-client.ts"
import { anonymous, withKey, withToken } from "../support/typed-client.ts"
import { until } from "../support/wait.ts"

interface Run {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

let backend: Backend
let server: Server | undefined

/** Run a command line in the repository with the suite's settings; `input` goes to stdin. */
const run = (command: string, args: ReadonlyArray<string>, options: { input?: string; env?: Record<string, string> } = {}) =>
  new Promise<Run>((resolve, reject) => {
    const env: Record<string, string> = {}
    for (const [key, value] of Object.entries(process.env)) {
      if (value !== undefined && !["DATABASE_URL", "NATS_URL", "NATS_PREFIX", "JWT_SECRET", "DATA_DIR"].includes(key)) env[key] = value
    }
    const child = spawn(command, args, {
      cwd: repoRoot,
      env: { ...env, EMBEDDER_THREADS: "1", ...backend.env, ...options.env },
      stdio: ["pipe", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk) => (stdout += chunk))
    child.stderr.on("data", (chunk) => (stderr += chunk))
    child.once("error", reject)
    child.once("exit", (code) => resolve({ code, stdout, stderr }))
    child.stdin.end(options.input ?? "")
  })

/** `mailroom <args>` through the package's bin, as an operator types it. */
const bin = (args: ReadonlyArray<string>, options?: { input?: string; env?: Record<string, string> }) =>
  run(process.execPath, [path.join(repoRoot, "bin/mailroom.mjs"), ...args], options)

/** The same command line through the entry point the bin hands it to. */
const mailroom = (args: ReadonlyArray<string>, options?: { input?: string; env?: Record<string, string> }) =>
  run(process.execPath, [...mailroomEntry(), ...args], options)

beforeAll(async () => {
  backend = await createBackend()
})
afterAll(async () => {
  await server?.kill()
  await backend?.dispose()
})

describe.skipIf(mode !== "postgres")("mailroom (the bin)", () => {
  it("prints its commands, and refuses a wrong command line with exit 2", async () => {
    const help = await bin(["help"])
    expect(help.code).toBe(0)
    for (const command of ["serve", "migrate", "reindex [--all]", "dns-records", "users create", "users set-plan", "users set-password", "users reset-two-factor", "users delete", "keys revoke", "usage"]) {
      expect(help.stdout).toContain(command)
    }
    const unknown = await bin(["frobnicate"])
    expect(unknown).toMatchObject({ code: 2, stdout: "" })
    expect(unknown.stderr).toBe("mailroom: unknown command frobnicate\nRun `mailroom help` for the commands.\n")
  })

  it("refuses a wrong command line with exit 2 and the usage's message alone, before it opens anything", async () => {
    // No database at this address: a command that opened one before checking its line would fail (exit 1) instead.
    const nowhere = { DATABASE_URL: "postgres://postgres@127.0.0.1:1/nowhere" }
    const refusals: Array<readonly [ReadonlyArray<string>, string]> = [
      [["users", "create"], "users create takes <email>"],
      [["users", "create", "not-an-address"], "email \"not-an-address\": must be a valid email address"],
      [["users", "delete", "someone@example.com"], "users delete deletes the account and everything it holds, for good: add --yes to confirm"],
      [["migrate", "now"], "migrate takes no arguments"]
    ]
    for (const [args, message] of refusals) {
      const refused = await mailroom(args, { env: nowhere })
      // The message and where the commands are: no stack trace, nothing logged.
      expect({ code: refused.code, stdout: refused.stdout, stderr: refused.stderr }, args.join(" ")).toEqual({
        code: 2,
        stdout: "",
        stderr: `mailroom: ${message}\nRun \`mailroom help\` for the commands.\n`
      })
    }
  }, 180_000)

  it("prints the DNS records for the shared domains: MX, SPF, the DKIM key the mta signs with, and DMARC", async () => {
    const records = await mailroom(["dns-records"], { env: { SHARED_DOMAINS: "agents.example.test,bots.example.test", MX_HOST: "mx.example.test" } })
    expect(records.code).toBe(0)
    const lines = records.stdout.split("\n").filter((line) => !line.startsWith(";") && line.length > 0)
    const dkim = /^mailroom\._domainkey\.(agents|bots)\.example\.test\.\tIN\tTXT\t"v=DKIM1; k=rsa; p=[A-Za-z0-9+/=]{1,238}"( "[A-Za-z0-9+/=]{1,255}")+$/
    expect(lines).toEqual([
      "agents.example.test.\tIN\tMX\t10 mx.example.test.",
      "agents.example.test.\tIN\tTXT\t\"v=spf1 mx ~all\"",
      expect.stringMatching(dkim),
      "_dmarc.agents.example.test.\tIN\tTXT\t\"v=DMARC1; p=none\"",
      "bots.example.test.\tIN\tMX\t10 mx.example.test.",
      "bots.example.test.\tIN\tTXT\t\"v=spf1 mx ~all\"",
      expect.stringMatching(dkim),
      "_dmarc.bots.example.test.\tIN\tTXT\t\"v=DMARC1; p=none\""
    ])
    // One key, kept: a second run prints the same one.
    const again = await mailroom(["dns-records"], { env: { SHARED_DOMAINS: "agents.example.test,bots.example.test", MX_HOST: "mx.example.test" } })
    expect(again.stdout).toBe(records.stdout)
  })

  it("refuses a database a newer version migrated, with exit 1 and what to do, whether migrating or serving", async () => {
    const database = await createDatabase(adminDatabaseUrl!, { migrated: true })
    try {
      const client = new pg.Client({ connectionString: database.url })
      await client.connect()
      try {
        await client.query("INSERT INTO mailroom_migrations (migration_id, name) VALUES (9999, 'from_a_newer_version')")
      } finally {
        await client.end()
      }
      const newer = /This database was migrated by a newer Mailroom \(its newest migration is 9999_from_a_newer_version; this version knows up to \d+_\w+\): start that version, or restore a backup taken before the upgrade\n$/
      const migrating = await mailroom(["migrate"], { env: { DATABASE_URL: database.url } })
      expect({ code: migrating.code, stdout: migrating.stdout }).toEqual({ code: 1, stdout: "" })
      expect(migrating.stderr).toMatch(new RegExp(`^mailroom: migrate failed: ${newer.source}`))
      const serving = await mailroom(["serve"], {
        env: { DATABASE_URL: database.url, PORT: String(await freePort()), SMTP_PORT: String(await freePort()) }
      })
      expect(serving.code).toBe(1)
      expect(serving.stderr).toMatch(new RegExp(`mailroom: could not start\n${newer.source}`))
      expect(serving.stderr).not.toMatch(/\bat .*\.[mc]?[jt]s:\d+/)
    } finally {
      await database.drop()
    }
  }, 120_000)

  it("migrates, creates an account on a plan, lifts it to enterprise, and revokes a key made over the API", async () => {
    // The suite's database has every migration already: nothing is applied, and it says so.
    const migrated = await mailroom(["migrate"])
    expect(migrated.code).toBe(0)
    expect(migrated.stdout).toMatch(/^Nothing to apply: the database has every migration, the latest \d+_\w+\n$/)
    const email = `${fresh("ops")}@example.com`
    const password = "a long operator password"

    const created = await mailroom(["users", "create", email, "--name", "Ops Person", "--plan", "pro", "--password-stdin"], { input: `${password}\n` })
    expect(created.stderr).toBe("")
    expect(created.code).toBe(0)
    expect(created.stdout).toMatch(new RegExp(`^Created usr_[0-9a-f]{24} ${email} \\(plan pro\\)\\n$`))
    expect(created.stdout).not.toContain(password)

    const missing = await mailroom(["users", "set-plan", email])
    expect(missing.code).toBe(2)
    expect(missing.stderr).toContain("users set-plan takes <email> <plan>")
    const badPlan = await mailroom(["users", "set-plan", email, "gold"])
    expect(badPlan.code).toBe(2)
    expect(badPlan.stderr).toContain(`unknown plan "gold" (plans: free, pro, enterprise)`)
    const lifted = await mailroom(["users", "set-plan", email, "enterprise"])
    expect(lifted.code).toBe(0)
    expect(lifted.stdout).toMatch(new RegExp(`^${email}: pro -> enterprise until \\d{4}-`))
    // The same plan again would restart its period and usage: refused, nothing changed.
    const again = await mailroom(["users", "set-plan", email, "enterprise"])
    expect(again.code).toBe(1)
    expect(again.stderr).toContain(`${email} is on the enterprise plan already`)

    // Over the API: the account logs in on enterprise; a key, a mailbox and one email.
    server = await startServer({ ...backend.env })
    const login = await anonymous(server.url).POST("/api/auth/login", { body: { email, password } })
    expect(login.response.status).toBe(200)
    const loggedIn = withToken(server.url, login.data!.data)
    expect((await loggedIn.GET("/v1/billing/subscription")).data?.data.plan).toBe("enterprise")
    // Two-factor sign-in on, for the operator to turn off below.
    const { secret } = (await loggedIn.POST("/api/auth/two-factor/setup", { body: { password } })).data!.data
    expect((await loggedIn.POST("/api/auth/two-factor/enable", { body: { code: totpAt(secret, Date.now()) } })).response.status).toBe(200)
    const key = await loggedIn.POST("/v1/api-keys", { body: { name: "to revoke" } })
    expect(key.response.status).toBe(201)
    const keyId = key.data!.data.keyId
    const keyed = withKey(server.url, key.data!.data)
    const mailbox = await keyed.POST("/v1/api/mailboxes", { body: { local_part: fresh("ops"), domain: DOMAIN } })
    expect(mailbox.response.status).toBe(201)
    const box = { address: mailbox.data!.mailbox.email_address }
    const session = await connectSmtp(server.smtpPort)
    await envelope(session, "someone@example.org", [box.address])
    expect((await session.data(`Subject: reindex me\r\nTo: <${box.address}>\r\n\r\nhello operator\r\n`)).code).toBe(250)
    await session.close()
    await until("the email to be indexed", async () => {
      const found = await keyed.POST("/v1/search", { body: { query: "operator", mode: "text" } })
      return found.response.status === 200 && found.data?.data.length === 1 ? true : undefined
    })
    expect(await server.stop()).toBe(0)
    server = undefined

    const asked = new Date()
    const usage = await mailroom(["usage", email])
    expect(usage.code).toBe(0)
    expect(usage.stdout).toContain("plan:      enterprise (active)")
    expect(usage.stdout).toContain("emails:    1 of unlimited received this period; 1 stored")
    expect(usage.stdout).toContain("sent:      0 of unlimited this period")
    // Today's counts against enterprise's daily limits, as the usage route answers them, and when they start again.
    const dayEnd = new Date(Date.UTC(asked.getUTCFullYear(), asked.getUTCMonth(), asked.getUTCDate() + 1)).toISOString()
    expect(usage.stdout).toContain(`today:     1 of 100000 emails received, 0 of 100000 sent (the UTC day, until ${dayEnd})`)
    expect(usage.stdout).toContain("api keys:  1 active")

    const revoked = await mailroom(["keys", "revoke", keyId])
    expect(revoked).toMatchObject({ code: 0, stdout: `Revoked ${keyId}\n` })
    const twice = await mailroom(["keys", "revoke", keyId])
    expect(twice.code).toBe(1)
    expect(twice.stderr).toContain("was revoked already")

    // `npm run reindex --all`: npm keeps --all for itself; the command still sees it. (Without
    // --all it would embed nothing: the one email is indexed already.)
    const all = await run("npm", ["run", "--silent", "reindex", "--all"])
    expect(all.stderr).toContain("Embedding 1 emails")
    expect(all.code).toBe(0)

    // A person who lost their authenticator app and recovery codes: the operator turns two-factor sign-in off.
    const resetTwoFactor = await mailroom(["users", "reset-two-factor", email.toUpperCase()])
    expect(resetTwoFactor).toMatchObject({ code: 0, stderr: "" })
    expect(resetTwoFactor.stdout).toBe(`${email}: two-factor sign-in turned off; the password alone signs in until it is turned on again\n`)
    expect((await mailroom(["users", "reset-two-factor", email])).stdout).toBe(`${email}: two-factor sign-in was off; nothing changed\n`)
    const nobody = await mailroom(["users", "reset-two-factor", `nobody-${email}`])
    expect(nobody.code).toBe(1)
    expect(nobody.stderr).toContain(`No account with the email nobody-${email}`)

    // A person locked out where no mail reaches them: the operator sets a password; the login made above ends.
    const tooShort = await mailroom(["users", "set-password", email, "--password-stdin"], { input: "short\n" })
    expect(tooShort.code).toBe(2)
    expect(tooShort.stderr).toContain("at least 8 characters")
    const reset = await mailroom(["users", "set-password", email])
    expect(reset.stderr).toBe("")
    expect(reset.stdout).toMatch(new RegExp(`^${email}: password set; 1 session signed out\nPassword: [A-Za-z0-9_-]{24}\n$`))

    // Deleting the account asks for --yes, then takes it and everything it holds.
    const unconfirmed = await mailroom(["users", "delete", email])
    expect(unconfirmed.code).toBe(2)
    expect(unconfirmed.stderr).toContain("add --yes to confirm")
    const deleted = await mailroom(["users", "delete", email, "--yes"])
    expect(deleted.stderr).toBe("")
    expect(deleted).toMatchObject({ code: 0 })
    expect(deleted.stdout).toMatch(new RegExp(`^Deleted usr_[0-9a-f]{24} ${email}: 1 mailbox, 1 email \\(their addresses are held from other accounts for 30 days\\)\n$`))
    const gone = await mailroom(["usage", email])
    expect(gone.code).toBe(1)
    expect(gone.stderr).toContain(`No account with the email ${email}`)
  }, 240_000)
})
