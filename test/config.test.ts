/**
 * Configuration is checked at start: a bad value stops the process with a message naming the
 * variable, and a partial-role process refuses the embedded stores (the vector index included).
 * Each setting's rule is proved in process (`refusal`); that a refused setting stops the process with
 * that message, and without a stack trace, by processes.
 */
import { Effect, Either, Option } from "effect"
import { spawn } from "node:child_process"
import * as net from "node:net"
import pg from "pg"
import { describe, expect, it } from "vitest"
import { configFailure, loadConfig, loadConfigFor, settingsFrom } from "../src/config.ts"
import { mailroomEntry } from "./support/process.ts"
import { createBackend, freePort, repoRoot } from "./support/server.ts"
import { createDataDir } from "./support/services.ts"

const run = (env: Record<string, string>) =>
  new Promise<{ code: number | null; output: string }>((resolve) => {
    const dataDir = createDataDir()
    const clean = Object.fromEntries(
      Object.entries(process.env).filter(([key]) => !["DATABASE_URL", "NATS_URL", "JWT_SECRET", "ROLES", "QDRANT_URL"].includes(key))
    ) as Record<string, string>
    const child = spawn(process.execPath, [...mailroomEntry()], {
      cwd: repoRoot,
      env: { ...clean, DATA_DIR: dataDir.dir, PORT: "39991", SMTP_PORT: "39992", ...env },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    child.stdout.on("data", (chunk) => (output += chunk))
    child.stderr.on("data", (chunk) => (output += chunk))
    // Seven starts at once (describe.concurrent), a database created and migrated by some: on two busy
    // cores, half a minute was not always enough.
    const timer = setTimeout(() => child.kill("SIGKILL"), 55_000)
    // "close", not "exit": only then has everything the process printed been read.
    child.on("close", (code) => {
      clearTimeout(timer)
      dataDir.remove()
      resolve({ code, output })
    })
  })

/** What a process given only `env` prints as it stops on its settings; "accepted" when they are taken. */
const refusal = async (env: Record<string, string>) => {
  const loaded = await Effect.runPromise(
    Effect.either(loadConfig).pipe(Effect.withConfigProvider(settingsFrom(env)))
  )
  return Either.isLeft(loaded) ? configFailure(loaded.left) : "accepted"
}

/** A port held by a listener of this test (no other suite's server holds it right now; a fixed port could be anyone's). */
const holdAPort = async () => {
  const blocker = net.createServer()
  await new Promise<void>((resolve, reject) => {
    blocker.once("error", reject)
    blocker.listen(0, "127.0.0.1", resolve)
  })
  return {
    port: (blocker.address() as net.AddressInfo).port,
    release: () => new Promise<void>((resolve) => blocker.close(() => resolve()))
  }
}

// Each case is a process that stops at start: independent, so they run side by side.
describe.concurrent("configuration", () => {
  it.each([
    [{ PORT: "abc" }, /PORT: .*abc/],
    [{ SMTP_PORT: "70000" }, /SMTP_PORT/],
    [{ ROLES: "api,mailman" }, /ROLES: Expected a comma-separated list of api, smtp, worker, indexer, mta but received "api,mailman"/],
    [{ STAGE_LAG_WARNING: "0" }, /STAGE_LAG_WARNING: Expected a number of seconds greater than 0/],
    [{ STAGE_LAG_WARNING: "soon" }, /STAGE_LAG_WARNING/],
    [{ WEBHOOK_ALLOW_PRIVATE: "sometimes" }, /WEBHOOK_ALLOW_PRIVATE/],
    [{ FREE_MAX_CUSTOM_DOMAINS: "-1" }, /FREE_MAX_CUSTOM_DOMAINS/],
    [{ SPF_RECORD: "include:amazonses.com" }, /\nSPF_RECORD: Expected an SPF record such as "v=spf1 include:relay\.example ~all" \(ending in an all\) but received "include:amazonses\.com"/],
    [{ SMTP_MAX_CONNECTIONS_PER_IP: "many" }, /SMTP_MAX_CONNECTIONS_PER_IP/],
    [{ APP_URL: "not a url" }, /APP_URL/],
    [{ DNS_SERVERS: "1.1.1.1:53,bad host" }, /DNS_SERVERS/],
    [{ TRUSTED_PROXIES: "10.0.0.0/8,lb.internal" }, /\nTRUSTED_PROXIES: Expected addresses or networks such as 10\.0\.0\.0\/8 but received "lb\.internal"/],
    [{ POSTMASTER_MAILBOX: "operator-desk" }, /\nPOSTMASTER_MAILBOX: Expected an address such as ops-desk@example\.com but received "operator-desk"/],
    [{ POSTMASTER_MAILBOX: "postmaster@agents.localhost" }, /\nPOSTMASTER_MAILBOX: postmaster@agents\.localhost can never be a mailbox's address: The local part "postmaster" is reserved/],
    [{ POSTMASTER_MAILBOX: "desk@agents.localhost" }, /\nPOSTMASTER_MAILBOX: desk@agents\.localhost can never be a mailbox's address: The local part must be at least 5 characters/],
    [{ POSTMASTER_MAILBOX: "desk@not a domain" }, /\nPOSTMASTER_MAILBOX: .* but received "desk@not a domain"/],
    [{ PROXY_PROTOCOL: "10.0.0.0/8" }, /\nPROXY_PROTOCOL: Expected addresses such as 10\.0\.0\.5 \(or \*\) but received "10\.0\.0\.0\/8"/],
    [{ TRUSTED_PROXIES: "10.0.0.0/33" }, /\nTRUSTED_PROXIES: .* but received "10\.0\.0\.0\/33"/],
    [{ DATABASE_URL: "postgres://127.0.0.1:1/x" }, /JWT_SECRET/],
    // Named, never quoted: it may hold a password.
    [{ DATABASE_URL: "db.internal:5432/mailroom" }, /DATABASE_URL: Expected postgres:\/\/\[user\[:password\]@\]host\[:port\]\/database but received "<redacted>"/],
    [{ JWT_SECRET: "short" }, /JWT_SECRET: Expected at least 32 characters/],
    [{ STRIPE_SECRET_KEY: "sk_test_x" }, /STRIPE_WEBHOOK_SECRET: .*STRIPE_WEBHOOK_SECRET, STRIPE_PRICE_PRO, STRIPE_PRICE_ENTERPRISE/],
    [{ STRIPE_SECRET_KEY: "sk_test_x", STRIPE_WEBHOOK_SECRET: "whsec_x", STRIPE_PRICE_PRO: "price_pro" }, /STRIPE_PRICE_ENTERPRISE/],
    [{ STRIPE_API_URL: "nowhere" }, /STRIPE_API_URL/],
    [{ SMTP_TLS_CERT: "/etc/mailroom/cert.pem" }, /SMTP_TLS_KEY: .*both or neither/],
    [{ SUBMISSIONS_PORT: "2465" }, /SMTP_TLS_CERT: SUBMISSIONS_PORT \(submission on implicit TLS\) needs SMTP_TLS_CERT and SMTP_TLS_KEY/],
    [{ IMAPS_PORT: "2993" }, /SMTP_TLS_CERT: IMAPS_PORT \(IMAP on implicit TLS\) needs SMTP_TLS_CERT and SMTP_TLS_KEY/],
    [{ IMAP_PORT: "seven" }, /IMAP_PORT/],
    [{ SUBMISSION_PORT: "none" }, /SUBMISSION_PORT/],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: "collector" }, /OTEL_EXPORTER_OTLP_ENDPOINT/],
    [{ OTEL_BSP_SCHEDULE_DELAY: "0" }, /OTEL_BSP_SCHEDULE_DELAY: Expected 1 or more/],
    [{ NATS_REPLICAS: "0" }, /NATS_REPLICAS: Expected 1 to 5/],
    [{ QDRANT_PREFIX: "staging." }, /\nQDRANT_PREFIX: Expected at most 40 letters, digits, '-' or '_' but received "staging\."/],
    [{ NATS_REPLICAS: "three" }, /NATS_REPLICAS/],
    [{ PGLITE_SHARED_BUFFERS: "2GB" }, /PGLITE_SHARED_BUFFERS: Expected a size from 128kB to 1GB, such as 32MB, but received "2GB"/],
    [{ PGLITE_SHARED_BUFFERS: "lots" }, /PGLITE_SHARED_BUFFERS: Expected a size from 128kB/],
    [{ EMBEDDER_NICE: "25" }, /\nEMBEDDER_NICE: Expected 0 to 19 but received 25/],
    [{ LOG_LEVEL: "all" }, /\nLOG_LEVEL: Expected one of trace, debug, info, warn, warning, error, fatal, none, off but received "all"/],
    [{ SHARED_DOMAINS: "agents.localhost,not a domain" }, /\nSHARED_DOMAINS: Expected a host name such as example\.com but received "not a domain"/],
    [{ MX_HOST: "bad host!" }, /\nMX_HOST: Expected a host name such as example\.com but received "bad host!"/],
    [{ SMTP_HELO_NAME: "bad name" }, /\nSMTP_HELO_NAME: Expected a host name such as example\.com but received "bad name"/],
    [{ PASSWORD_HASH_COST: "8" }, /\nPASSWORD_HASH_COST: Expected an integer from 10 to 17 but received 8/],
    [{ PASSWORD_HASH_COST: "high" }, /\nPASSWORD_HASH_COST/],
    // Two of this process's own listeners on one port: both named, not told as another process's doing when the second cannot listen.
    [{ PORT: "3557", SMTP_PORT: "3557" }, /\nSMTP_PORT: Expected a port of its own, but PORT is 3557 too/],
    [{ ROLES: "smtp", SMTP_PORT: "3558", SUBMISSION_PORT: "3558", NATS_URL: "nats://127.0.0.1:4222", DATABASE_URL: "postgres://127.0.0.1:1/x", JWT_SECRET: "x".repeat(32) },
      /\nSUBMISSION_PORT: Expected a port of its own, but SMTP_PORT is 3558 too/],
    [{ ROLES: "smtp", SMTP_PORT: "3558", METRICS_PORT: "3558", NATS_URL: "nats://127.0.0.1:4222", DATABASE_URL: "postgres://127.0.0.1:1/x", JWT_SECRET: "x".repeat(32) },
      /\nMETRICS_PORT: Expected a port of its own, but SMTP_PORT is 3558 too/]
  ])("refuses %j with a message naming the variable", async (env, message) => {
    const output = await refusal(env)
    expect(output).toMatch(/^mailroom: invalid configuration\n/)
    expect(output).toMatch(message)
    // Named once: never "EMBEDDER_NICE.EMBEDDER_NICE".
    expect(output).not.toMatch(/\b([A-Z_]+)\.\1\b/)
  })

  it("takes the defaults, and a complete set of settings", async () => {
    expect(await refusal({})).toBe("accepted")
    expect(await refusal({ PORT: "8080", ROLES: "api,smtp,worker,indexer,mta", EMBEDDER_NICE: "0", PGLITE_SHARED_BUFFERS: "32MB",
      TRUSTED_PROXIES: "10.0.0.5, 172.16.0.0/12,fd00::/8", PROXY_PROTOCOL: "10.0.0.5,2001:db8::1",
      POSTMASTER_MAILBOX: "Operator-Desk@Agents.localhost", QDRANT_PREFIX: "staging_" })).toBe("accepted")
    // One port on two addresses of the machine is two listeners; METRICS_PORT is not opened beside the api role.
    expect(await refusal({ HOST: "127.0.0.1", SMTP_HOST: "127.0.0.2", PORT: "3557", SMTP_PORT: "3557", METRICS_PORT: "3557" })).toBe("accepted")
  })

  it("asks JWT_SECRET of a node serving its roles, not of a one-off command (migrate, dns-records), which signs no tokens", async () => {
    const cluster = { DATABASE_URL: "postgres://127.0.0.1:1/x", NATS_URL: "nats://127.0.0.1:4222" }
    expect(await refusal(cluster)).toMatch(/\nJWT_SECRET: JWT_SECRET is required when DATABASE_URL is set/)
    for (const command of ["migrate", "dns-records"]) {
      const loaded = await Effect.runPromise(Effect.either(loadConfigFor(command)).pipe(Effect.withConfigProvider(settingsFrom(cluster))))
      expect(Either.isRight(loaded), command).toBe(true)
    }
  })

  it("takes a variable set to nothing as one not set (an environment file's `OPENAI_API_KEY=`)", async () => {
    const loaded = await Effect.runPromise(loadConfig.pipe(Effect.withConfigProvider(settingsFrom({
      OPENAI_API_KEY: "", QDRANT_URL: "", NATS_REPLICAS: " ", PORT: "", DISALLOWED_EMAIL_NAME: "", LOG_LEVEL: "  "
    }))))
    const defaults = await Effect.runPromise(loadConfig.pipe(Effect.withConfigProvider(settingsFrom({}))))
    expect(Option.isNone(loaded.openaiApiKey)).toBe(true)
    expect(Option.isNone(loaded.qdrantUrl)).toBe(true)
    expect(loaded).toEqual(defaults)
  })

  it("stops the process on a refused setting: exit 1, every refusal said, no stack trace, no secret", async () => {
    // QDRANT_URL set to nothing is not set: only the three refused settings are said.
    const { code, output } = await run({ PORT: "abc", EMBEDDER_NICE: "25", DATABASE_URL: "db.internal:5432/mailroom", JWT_SECRET: "x".repeat(40), QDRANT_URL: "" })
    expect(code).toBe(1)
    expect(output).toContain("mailroom: invalid configuration\n")
    expect(output).toMatch(/\nPORT: .*abc/)
    expect(output).toMatch(/\nEMBEDDER_NICE: Expected 0 to 19 but received 25/)
    expect(output).toMatch(/\nDATABASE_URL: .*"<redacted>"/)
    expect(output).not.toContain("db.internal")
    expect(output).not.toContain("QDRANT_URL")
    // No stack trace, from the sources or from the build.
    expect(output).not.toMatch(/\bat .*\.[mc]?[jt]s:\d+/)
  })

  it("stops when the SMTP TLS files cannot be read, naming both", async () => {
    const { code, output } = await run({ SMTP_TLS_CERT: "/nonexistent/cert.pem", SMTP_TLS_KEY: "/nonexistent/key.pem" })
    expect(code).toBe(1)
    expect(output).toMatch(/SMTP_TLS_CERT: Cannot read \/nonexistent\/cert\.pem: ENOENT/)
    expect(output).toMatch(/SMTP_TLS_KEY: Cannot read \/nonexistent\/key\.pem: ENOENT/)
  })

  it("stops when the SMTP TLS files are no PEM certificate and key, naming them, without a stack trace", async () => {
    const { code, output } = await run({ SMTP_TLS_CERT: "/etc/hostname", SMTP_TLS_KEY: "/etc/hostname" })
    expect(code).toBe(1)
    expect(output).toMatch(/SMTP_TLS_CERT: \/etc\/hostname and SMTP_TLS_KEY's \/etc\/hostname are not a PEM certificate and its private key: /)
    expect(output).not.toMatch(/\bat .*\.[mc]?[jt]s:\d+/)
  })

  it("refuses a partial-role process on the embedded stores, naming the missing setting", async () => {
    const { code, output } = await run({ ROLES: "api" })
    expect(code).toBe(1)
    expect(output).toMatch(/DATABASE_URL/)
    expect(output).toMatch(/NATS_URL/)
    const withDb = await run({ ROLES: "worker", DATABASE_URL: "postgres://127.0.0.1:1/x", JWT_SECRET: "x".repeat(40) })
    expect(withDb.code).toBe(1)
    expect(withDb.output).toMatch(/NATS_URL/)
    expect(withDb.output).not.toMatch(/DATABASE_URL:/)
  })

  it("knows the indexer role: alone it is a partial process, and the four others without it are too", async () => {
    const indexer = await run({ ROLES: "indexer" })
    expect(indexer.code).toBe(1)
    expect(indexer.output).toMatch(/ROLES=indexer runs only part of Mailroom, so it must share state with the other nodes: set DATABASE_URL and NATS_URL/)
    const withoutIndexer = await run({ ROLES: "api,smtp,worker,mta" })
    expect(withoutIndexer.code).toBe(1)
    expect(withoutIndexer.output).toMatch(/ROLES=api,smtp,worker,mta runs only part of Mailroom/)
  })

  it("refuses a partial-role process whose PostgreSQL lacks pgvector and that has no QDRANT_URL", async (ctx) => {
    // A PostgreSQL and NATS of the machine's, in both modes, as the cluster suite uses.
    const backend = await createBackend({ forcePostgres: true })
    try {
      const probe = new pg.Client({ connectionString: backend.env.DATABASE_URL! })
      await probe.connect()
      const offered = await probe.query("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").finally(() => probe.end())
      // With pgvector the index lives in that database, which every node shares: nothing to refuse.
      if (offered.rowCount! > 0) return ctx.skip()
      const { code, output } = await run({ ...backend.env, ROLES: "api" })
      expect(code).toBe(1)
      expect(output).toMatch(/could not start\n.*set QDRANT_URL, or use a PostgreSQL with the pgvector extension/)
      // No stack trace, from the sources or from the build.
      expect(output).not.toMatch(/\bat .*\.[mc]?[jt]s:\d+/)
    } finally {
      await backend.dispose()
    }
  })
})

describe.concurrent("a start that fails", () => {
  it("stops naming the server and database it could not reach (never the password), with the database's own reason", async () => {
    const { code, output } = await run({
      DATABASE_URL: "postgres://postgres:s3cret-pw@127.0.0.1:1/mailroom",
      NATS_URL: "nats://127.0.0.1:4222",
      JWT_SECRET: "x".repeat(32),
      PORT: String(await freePort()),
      SMTP_PORT: String(await freePort())
    })
    expect(code).toBe(1)
    expect(output).toMatch(/could not start\nCould not connect to PostgreSQL at 127\.0\.0\.1:1, database mailroom\nconnect ECONNREFUSED 127\.0\.0\.1:1\n/)
    expect(output).not.toMatch(/\bat .*\.[mc]?[jt]s:\d+/)
    expect(output).not.toContain("s3cret-pw")
  })

  it("says which database a reachable server does not have", async () => {
    const { code, output } = await run({
      DATABASE_URL: "postgres://postgres@127.0.0.1:5432/mailroom_never_made",
      NATS_URL: "nats://127.0.0.1:4222",
      JWT_SECRET: "x".repeat(32),
      PORT: String(await freePort()),
      SMTP_PORT: String(await freePort())
    })
    expect(code).toBe(1)
    expect(output).toMatch(/could not start\nCould not connect to PostgreSQL at 127\.0\.0\.1:5432, database mailroom_never_made\ndatabase "mailroom_never_made" does not exist\n/)
  })

  it("says why for a name with two addresses too (localhost: each attempt's refusal), and takes libpq's socket form of the URL", async () => {
    const env = { NATS_URL: "nats://127.0.0.1:4222", JWT_SECRET: "x".repeat(32), PORT: String(await freePort()), SMTP_PORT: String(await freePort()) }
    const named = await run({ ...env, DATABASE_URL: "postgres://postgres@localhost:1/mailroom" })
    expect(named.code).toBe(1)
    expect(named.output).toMatch(/could not start\nCould not connect to PostgreSQL at localhost:1, database mailroom\n.*connect ECONNREFUSED/)
    // The socket form is no WHATWG URL but pg's own: it passes the check (and fails only to connect here).
    const socket = await run({ ...env, DATABASE_URL: "postgresql://postgres@/mailroom?host=/nonexistent-socket-dir" })
    expect(socket.output).not.toMatch(/invalid configuration/)
    expect(socket.output).toMatch(/could not start\nCould not connect to PostgreSQL at \/nonexistent-socket-dir:5432, database mailroom\n/)
  })

  it("refuses a DKIM_PRIVATE_KEY it cannot read as any setting is refused, naming it", async () => {
    const { code, output } = await run({ DKIM_PRIVATE_KEY: "/nonexistent/key.pem", PORT: String(await freePort()), SMTP_PORT: String(await freePort()) })
    expect(code).toBe(1)
    expect(output).toMatch(/mailroom: invalid configuration\nDKIM_PRIVATE_KEY: Expected a PEM private key or the path of a file holding one \(ENOENT[^\n]*\)\n/)
  })

  it("stops with a one-line reason when the HTTP port is taken", async () => {
    const taken = await holdAPort()
    try {
      const { code, output } = await run({ PORT: String(taken.port), SMTP_PORT: String(await freePort()) })
      expect(code).toBe(1)
      // It names the listener, its settings and what to do, on one line.
      expect(output).toContain(
        `could not start\nHTTP could not listen on 127.0.0.1:${taken.port} (HOST, PORT): listen EADDRINUSE: address already in use ` +
          `127.0.0.1:${taken.port}. Another process listens on port ${taken.port}: stop it, or set PORT to a free port\n`
      )
      expect(output).not.toMatch(/\bat .*\.[mc]?[jt]s:\d+/)
      // With LOG_FORMAT=json the log says so too, where a pipeline looks for why a node stopped.
      const logged = await run({ PORT: String(taken.port), SMTP_PORT: String(await freePort()), LOG_FORMAT: "json" })
      const lines = logged.output.split("\n").filter((line) => line.startsWith("{")).map((line) => JSON.parse(line) as Record<string, unknown>)
      expect(lines.find((line) => line["level"] === "fatal")).toMatchObject({
        message: "Could not start",
        details: { reasons: expect.stringContaining(`Another process listens on port ${taken.port}`) }
      })
    } finally {
      await taken.release()
    }
  }, 120_000)

  it("stops naming the directory when DATA_DIR takes no directories (/proc: it spun for ever before)", async () => {
    const { code, output } = await run({ DATA_DIR: "/proc", PORT: String(await freePort()), SMTP_PORT: String(await freePort()) })
    expect(code).toBe(1)
    expect(output).toMatch(/could not start\n(Could not make the directory \/proc\/\w+|Cannot write in \/proc\b).*ENOENT.*\n/)
    expect(output).not.toMatch(/\bat .*\.[mc]?[jt]s:\d+/)
  })

  it("names HOST when it is no address of this machine", async () => {
    // 192.0.2.0/24 is TEST-NET-1 (RFC 5737): never a machine's own address.
    const { code, output } = await run({ HOST: "192.0.2.1", PORT: String(await freePort()), SMTP_PORT: String(await freePort()) })
    expect(code).toBe(1)
    expect(output).toMatch(/could not start\nHTTP could not listen on 192\.0\.2\.1:\d+ \(HOST, PORT\): .*EADDRNOTAVAIL.*set HOST to one of its addresses/)
    expect(output).not.toMatch(/\bat .*\.[mc]?[jt]s:\d+/)
  })
})

// Alone: it holds the SMTP port the other cases' processes are given.
describe.sequential("a port in use", () => {
  it("stops with a one-line reason when the SMTP port is taken", async () => {
    const taken = await holdAPort()
    try {
      const { code, output } = await run({ PORT: String(await freePort()), SMTP_PORT: String(taken.port) })
      expect(code).toBe(1)
      expect(output).toMatch(
        new RegExp(`could not start\\nSMTP could not listen on 127\\.0\\.0\\.1:${taken.port} \\(SMTP_HOST, SMTP_PORT\\): .*EADDRINUSE.*set SMTP_PORT to a free port`)
      )
      // No stack trace, from the sources or from the build.
      expect(output).not.toMatch(/\bat .*\.[mc]?[jt]s:\d+/)
    } finally {
      await taken.release()
    }
  })
})
