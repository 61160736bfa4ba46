/**
 * Nothing accepted is lost when PostgreSQL crashes (`pg_ctl stop -m immediate`: no checkpoint, WAL
 * recovery on restart) at the same moment a worker is killed (SIGKILL), while mail is flowing and
 * oversized messages are mixed in. Every message answered 250 becomes exactly one email; a message
 * over its limit is never answered 250 and never stored. The cluster: one api+smtp node and one
 * worker node over a private PostgreSQL and a private nats-server (both crashed or stopped by the
 * test, never the machine's shared ones), with stand-ins for Qdrant and OpenAI's embeddings.
 *
 * It brings its own PostgreSQL, so it runs once per CI: in the PostgreSQL + NATS run.
 */
import { jetstreamManager } from "@nats-io/jetstream"
import { connect } from "@nats-io/transport-node"
import { randomUUID } from "node:crypto"
import nodemailer from "nodemailer"
import pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { streamName } from "../../layers/nats-bus.ts"
import { withApiKey } from "../support/accounts.ts"
import { type FakeOpenAi, fakeOpenAiEnv, startFakeOpenAi } from "../support/fake-openai.ts"
import { type FakeQdrant, startFakeQdrant } from "../support/fake-qdrant.ts"
import { startPrivateNats, type PrivateNats } from "../support/nats-server.ts"
import { type PrivatePostgres, privatePostgresAvailable, startPrivatePostgres } from "../support/private-postgres.ts"
import { createDataDir, mode, testSecret } from "../support/services.ts"
import { type Server, startServer } from "../support/server.ts"
import { connectSmtp, envelope } from "../support/smtp-client.ts"
import { withKey } from "../support/typed-client.ts"
import { sleep, until } from "../support/wait.ts"

const MESSAGES = 300
const CONNECTIONS = 4
const FREE_MAX_BYTES = 10 * 1024 * 1024

let postgres: PrivatePostgres
let nats: PrivateNats
let qdrant: FakeQdrant
let openai: FakeOpenAi
let dataDir: ReturnType<typeof createDataDir>
let env: Record<string, string>
let node: Server
let worker: Server
let db: pg.Client

const startWorker = () => startServer({ ...env, ROLES: "worker" }, { ready: "none" })

describe.skipIf(mode !== "postgres" || !privatePostgresAvailable())("a PostgreSQL crash during a worker kill", () => {
  beforeAll(async () => {
    postgres = await startPrivatePostgres()
    nats = await startPrivateNats()
    qdrant = await startFakeQdrant()
    openai = await startFakeOpenAi()
    dataDir = createDataDir()
    env = {
      DATABASE_URL: postgres.url,
      NATS_URL: nats.url,
      JWT_SECRET: testSecret(),
      DATA_DIR: dataDir.dir,
      QDRANT_URL: qdrant.url,
      ...fakeOpenAiEnv(openai)
    }
    node = await startServer({ ...env, ROLES: "api,smtp" })
    worker = await startWorker()
    db = new pg.Client({ connectionString: postgres.url })
    db.on("error", () => {}) // the crash ends this connection; the test reconnects
    await db.connect()
  }, 120_000)

  afterAll(async () => {
    await db?.end().catch(() => undefined)
    await worker?.kill()
    await node?.kill()
    await qdrant?.close()
    await openai?.close()
    await nats?.dispose()
    postgres?.dispose()
    dataDir?.remove()
  }, 60_000)

  const reconnect = async () => {
    await db.end().catch(() => undefined)
    db = new pg.Client({ connectionString: postgres.url })
    db.on("error", () => {})
    await db.connect()
  }

  it("loses and duplicates nothing accepted, and never takes an oversized message", async () => {
    const user = await withApiKey(node.url)
    const small = await withApiKey(node.url) // stays on the free plan: 10 MB per message
    const mailbox = async (apiKey: string, prefix: string) => {
      const created = await withKey(node.url, { apiKey }).POST("/v1/api/mailboxes", {
        body: { local_part: `${prefix}-${Date.now().toString(36)}`, domain: "agents.localhost" }
      })
      expect(created.response.status, JSON.stringify(created.error)).toBe(201)
      return created.data!.mailbox
    }
    const target = await mailbox(user.apiKey, "crash")
    const freeBox = await mailbox(small.apiKey, "oversized")
    await db.query("UPDATE subscriptions SET plan = 'enterprise' WHERE user_id = $1", [user.userId])

    const transport = nodemailer.createTransport({
      host: "127.0.0.1",
      port: node.smtpPort,
      secure: false,
      ignoreTLS: true,
      pool: true,
      maxConnections: CONNECTIONS,
      maxMessages: Infinity
    })
    const oversized: Array<string> = []
    /** One message of exactly `FREE_MAX_BYTES + 1` bytes to the free mailbox, no SIZE declared. */
    const sendOversized = async (label: string) => {
      const head = `From: load@example.com\r\nTo: ${freeBox.email_address}\r\nSubject: Oversized ${label}\r\n\r\n`
      const raw = Buffer.concat([Buffer.from(head), Buffer.alloc(FREE_MAX_BYTES + 1 - head.length - 2, "A"), Buffer.from("\r\n")])
      try {
        const session = await connectSmtp(node.smtpPort)
        try {
          const { replies } = await envelope(session, "load@example.com", [freeBox.email_address])
          const reply = replies[0]!.code === 250 ? await session.data(raw) : replies[0]!
          oversized.push(`${label}: ${reply.code} ${reply.text}`)
        } finally {
          await session.close()
        }
      } catch (error) {
        oversized.push(`${label}: ${String(error)}`)
      }
    }

    const accepted: Array<string> = []
    const refused: Array<string> = []
    let reachedHundred!: () => void
    const hundredAccepted = new Promise<void>((resolve) => (reachedHundred = resolve))
    let crashedAt: { accepted: number } | undefined

    const crash = (async () => {
      await hundredAccepted
      await worker.kill()
      postgres.crash()
      crashedAt = { accepted: accepted.length }
      await sendOversized("during the outage")
      await sleep(3000)
      postgres.start()
      worker = await startWorker()
      await sendOversized("after the restart")
    })()

    await sendOversized("before the crash")
    await Promise.all(
      Array.from({ length: MESSAGES }, async (_, n) => {
        const seq = `crash-${n}`
        try {
          const info = await transport.sendMail({
            from: "load@example.com",
            to: target.email_address,
            subject: `Crash ${seq}`,
            text: `Message ${seq}, unique body ${randomUUID()}`,
            headers: { "X-Test-Seq": seq }
          })
          if (/^250[ -]/.test(info.response)) {
            accepted.push(seq)
            if (accepted.length === 100) reachedHundred()
          } else refused.push(`${seq}: ${info.response}`)
        } catch (error) {
          refused.push(`${seq}: ${(error as { response?: string }).response ?? String(error)}`)
        }
      })
    )
    reachedHundred() // fewer than 100 accepted: crash anyway, so the assertions below report it
    await crash
    transport.close()
    console.info(
      `[crash] ${accepted.length} accepted, ${refused.length} refused; crashed at ${JSON.stringify(crashedAt)}; oversized: ${oversized.join(" | ")}`
    )
    // Refusals are temporary (the database was down), never a lost 250.
    for (const reply of refused) expect(reply).toMatch(/: (451|421)|ECONNRESET|ECONNECTION|EPROTOCOL|closed/i)
    expect(accepted.length).toBeGreaterThanOrEqual(100)
    expect(oversized).toHaveLength(3)
    for (const reply of oversized) expect(reply).toMatch(/: (552 5\.3\.4|451 4\.3\.0)|connection closed|ECONNRESET/)

    // Every accepted message is stored once, after the killed worker's messages come back.
    await reconnect()
    const stored = async () => {
      const { rows } = await db.query<{ seq: string; copies: string }>(
        `SELECT headers->>'x-test-seq' AS seq, count(*) AS copies FROM emails WHERE mailbox_id = $1 GROUP BY 1`,
        [target.mailbox_id]
      )
      return rows
    }
    const bus = await connect({ servers: nats.url })
    try {
      const jsm = await jetstreamManager(bus)
      let last = ""
      await until(() => last, async () => {
        const rows = await stored()
        // The restarted worker declares its consumer again as it starts: until then, keep waiting.
        const info = await jsm.consumers.info(streamName("", "mail"), "ingest").catch((error: Error) => {
          last = `${rows.length} stored; consumer: ${error.message}`
          return undefined
        })
        if (info === undefined) return undefined
        last = `${rows.length} stored, ${info.num_pending} pending, ${info.num_ack_pending} unacknowledged`
        const have = new Set(rows.map((row) => row.seq))
        return accepted.every((seq) => have.has(seq)) && info.num_pending === 0 && info.num_ack_pending === 0 ? true : undefined
      }, 120_000, 500)
    } finally {
      await bus.close()
    }
    await sleep(3000)
    const rows = await stored()
    expect(rows.filter((row) => Number(row.copies) > 1).map((row) => row.seq)).toEqual([])
    const storedSeqs = new Set(rows.map((row) => row.seq))
    expect(accepted.filter((seq) => !storedSeqs.has(seq))).toEqual([])
    // Stored without a 250 only where the reply never reached the client (a refusal after the store).
    const refusedSeqs = new Set(refused.map((reply) => reply.split(":")[0]))
    expect([...storedSeqs].filter((seq) => !accepted.includes(seq) && !refusedSeqs.has(seq))).toEqual([])

    const big = await db.query("SELECT count(*)::int AS n FROM emails WHERE mailbox_id = $1", [freeBox.mailbox_id])
    expect(big.rows[0].n).toBe(0)
    const counted = await db.query("SELECT coalesce(sum(emails), 0)::int AS n FROM mail_daily_counters WHERE user_id = $1", [small.userId])
    expect(counted.rows[0].n).toBe(0)
    expect(worker.process.exitCode).toBeNull()
    expect(node.process.exitCode).toBeNull()
  }, 300_000)
})
