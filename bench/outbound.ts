/**
 * `npm run bench:outbound`: outbound delivery throughput against a baseline measured in the same run.
 *
 *   (a) bare: a nodemailer SMTP pool (10 connections) sending prebuilt messages to a local sink
 *   (b) Mailroom: the same number of sends accepted over the API (`POST /mailboxes/{id}/send`, 20 at a
 *       time) and delivered by the mta to the same sink, found through MX records a local DNS server
 *       publishes; on PostgreSQL and NATS (BENCH_DATABASE_URL, BENCH_NATS_URL), as a deployment runs.
 *
 * The sink is a bare smtp-server that takes every message. Both senders' sockets run without Nagle's
 * algorithm (see layers/smtp-transport.ts). (b) is timed from the first send to the
 * last message at the sink, so it counts acceptance, storage, signing, the bus and delivery.
 *
 * Beside the rates it prints the PostgreSQL transactions (b) made per send (pg_stat_database of its
 * database, from the first send until the statistics caught up after the last delivery: storing,
 * delivering, events and what indexing had done by then). Each statement outside a transaction is
 * one, so it counts the round trips a send costs the database. It moves less than the rates with the
 * machine's noise, but it does move with the rate: every statement on the way is batched across the
 * sends waiting for it, so a slower run (fewer sends a batch) makes more transactions a send (200
 * messages at 46/s: 5.8 a send; 1,000 at 84/s: 4.1).
 *
 * Targets: (b) delivers >= 500 messages/s and >= 0.3 x (a).
 * Exit status: 0 when both pass, 2 when a target is missed, 1 when the run is invalid.
 * Settings: BENCH_MESSAGES (default 1000); BENCH_BATCH (default 1: one message a request; n > 1 sends n
 * messages a request through POST …/send/batch, up to 100, to see what the request itself costs); BENCH_SERVER_NODE_ARGS (node flags for the server; default
 * the production launchers' own; e.g. add `--cpu-prof --cpu-prof-dir=/tmp/prof` to profile it); BENCH_ROLES (the server's roles, default every
 * one; e.g. `api,mta` leaves out the worker and indexer, to see what indexing sent mail costs; `+` between
 * nodes runs a cluster, the first node taking the sends: `api,smtp,worker,indexer+mta` gives the mta a
 * process of its own; a partial set shares the suites' in-memory stand-in for Qdrant).
 */
import nodemailer from "nodemailer"
import MailComposer from "nodemailer/lib/mail-composer"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import pg from "pg"
import { upgrade } from "../test/support/billing.ts"
import { startDnsServer } from "../test/support/dns-server.ts"
import { startFakeQdrant } from "../test/support/fake-qdrant.ts"
import { withApiKey } from "../test/support/accounts.ts"
import { newBox } from "../test/support/mailboxes.ts"
import { type MxServer, startMxServer } from "../test/support/mx-server.ts"
import { startServer } from "../test/support/process.ts"
import { createDatabase, deleteStreams, natsPrefix } from "../test/support/services.ts"
import { sleep } from "../test/support/wait.ts"
import { serverNodeArgs } from "./support/children.ts"

const MESSAGES = Number(process.env.BENCH_MESSAGES ?? 1000)
const ADMIN_DATABASE_URL = process.env.BENCH_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test"
const NATS_URL = process.env.BENCH_NATS_URL ?? "nats://127.0.0.1:4222"
/** Sends one key may make: below the enterprise plan's 500 requests a minute. */
const SENDS_PER_KEY = 400
const API_CONCURRENCY = 20
/** Messages a request carries: 1 is POST …/send, more POST …/send/batch. */
const BATCH = Math.min(100, Math.max(1, Number(process.env.BENCH_BATCH ?? 1)))
/** The server's node flags: the production launchers' own, or BENCH_SERVER_NODE_ARGS (e.g. with "--cpu-prof"). */
const SERVER_NODE_ARGS = serverNodeArgs("BENCH_SERVER_NODE_ARGS")
const ROLES = process.env.BENCH_ROLES

const body = (i: number) => ({ to: [`reader${i}@sink.test`], subject: `Bench message ${i}`, text: `Hello number ${i}.\n`.repeat(20) })

/**
 * Transactions committed and rolled back in the database at `url` so far. A backend reports its
 * counts when it goes idle, at most every 10 s (PostgreSQL's PGSTAT_IDLE_INTERVAL), so a reading taken
 * right after work lags it by up to that.
 */
const transactions = async (url: string) => {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    const { rows } = await client.query<{ n: string }>(
      "SELECT xact_commit + xact_rollback AS n FROM pg_stat_database WHERE datname = current_database()"
    )
    return Number(rows[0]?.n ?? 0)
  } finally {
    await client.end()
  }
}
const STATS_LAG_MS = 11_000

const waitForCount = async (sink: MxServer, count: number, timeoutMs: number) => {
  await sink.waitFor(count, timeoutMs)
  return performance.now()
}

/** (a) The bare pool: prebuilt messages, 10 connections. */
const bare = async (sink: MxServer) => {
  const raws = await Promise.all(Array.from({ length: MESSAGES }, (_, i) =>
    new MailComposer({ from: "bench@agents.localhost", ...body(i), messageId: `<bare-${i}@agents.localhost>` }).compile().build()
  ))
  const transport = nodemailer.createTransport({
    host: "127.0.0.1",
    port: sink.port,
    pool: true,
    maxConnections: 10,
    maxMessages: Infinity,
    ignoreTLS: true,
    // Nagle's algorithm off, as the mta's connections have it (layers/smtp-transport.ts): with it on,
    // every message waits ~40 ms for the sink's delayed ACK, and the pool stops at ~214 msgs/s.
    getSocket: (_options: unknown, callback: (error: Error | null, socketOptions: { connection: net.Socket } | undefined) => void) => {
      const socket = net.connect({ host: "127.0.0.1", port: sink.port, noDelay: true }, () => callback(null, { connection: socket }))
      socket.once("error", (error) => callback(error, undefined))
    }
  })
  const before = sink.delivered().length
  const started = performance.now()
  await Promise.all(raws.map((raw, i) => transport.sendMail({ envelope: { from: "bench@agents.localhost", to: [`reader${i}@sink.test`] }, raw })))
  const ended = await waitForCount(sink, before + MESSAGES, 120_000)
  transport.close()
  return MESSAGES / ((ended - started) / 1000)
}

/** (b) Mailroom: sends over the API, delivered by the mta. */
const mailroom = async (sink: MxServer) => {
  // Everything made here is undone at the end, in reverse, also when a node fails to start.
  const cleanups: Array<() => Promise<unknown> | unknown> = []
  try {
    const names = await startDnsServer()
    cleanups.push(() => names.close())
    names.set("sink.test", { MX: [{ preference: 10, exchange: "mx.sink.test" }] })
    names.set("mx.sink.test", { A: ["127.0.0.1"] })
    const database = await createDatabase(ADMIN_DATABASE_URL)
    cleanups.push(() => database.drop())
    const prefix = natsPrefix()
    cleanups.push(() => deleteStreams(NATS_URL, prefix))
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "mailroom-bench-outbound-"))
    cleanups.push(() => fs.rmSync(dataDir, { recursive: true, force: true }))
    const qdrant = ROLES === undefined ? undefined : await startFakeQdrant()
    if (qdrant !== undefined) cleanups.push(() => qdrant.close())
    const env = {
      DATABASE_URL: database.url,
      NATS_URL,
      NATS_PREFIX: prefix,
      JWT_SECRET: randomBytes(32).toString("hex"),
      DNS_SERVERS: names.address,
      OUTBOUND_SMTP_PORT: String(sink.port),
      // The sink is on 127.0.0.1, which the mta refuses by default.
      OUTBOUND_ALLOW_PRIVATE: "true",
      ...(qdrant === undefined ? {} : { QDRANT_URL: qdrant.url })
    }
    const nodes: Array<Awaited<ReturnType<typeof startServer>>> = []
    for (const [i, roles] of (ROLES?.split("+") ?? [undefined]).entries()) {
      const nodeDir = path.join(dataDir, `node${i}`)
      fs.mkdirSync(nodeDir)
      // A node without the API answers no /healthz: it is taken as started once spawned.
      const ready = roles === undefined || roles.split(",").includes("api") ? "healthz" : "none"
      const node = await startServer({ ...env, DATA_DIR: nodeDir, ...(roles === undefined ? {} : { ROLES: roles }) }, { nodeArgs: SERVER_NODE_ARGS, ready })
      cleanups.push(() => node.stop())
      nodes.push(node)
    }
    const server = nodes[0]!
    const senders: Array<{ apiKey: string; mailboxId: string }> = []
    for (let i = 0; i < Math.ceil(MESSAGES / SENDS_PER_KEY); i++) {
      const user = await withApiKey(server.url)
      await upgrade(server.url, user.apiKey, "enterprise")
      const box = await newBox(server.url, { user })
      senders.push({ apiKey: user.apiKey, mailboxId: box.mailboxId })
    }
    // The set-up's counts reach the statistics first, so that only the sends' are counted below.
    await sleep(STATS_LAG_MS)
    const transactionsBefore = await transactions(database.url)
    const before = sink.delivered().length
    const started = performance.now()
    let next = 0
    let refused = 0
    await Promise.all(Array.from({ length: API_CONCURRENCY }, async () => {
      while (next < MESSAGES) {
        const i = next
        // A batch stays with one sender's key.
        const size = Math.min(BATCH, MESSAGES - i, SENDS_PER_KEY - (i % SENDS_PER_KEY))
        next += size
        const sender = senders[Math.floor(i / SENDS_PER_KEY)]!
        const bodies = Array.from({ length: size }, (_, k) => body(i + k))
        const response = await fetch(`${server.url}/v1/api/mailboxes/${sender.mailboxId}/send${BATCH > 1 ? "/batch" : ""}`, {
          method: "POST",
          headers: { "x-api-key": sender.apiKey, "content-type": "application/json" },
          body: JSON.stringify(BATCH > 1 ? { messages: bodies } : bodies[0])
        })
        if (response.status !== 202) refused += size
        await response.arrayBuffer()
      }
    }))
    const accepted = performance.now()
    if (refused > 0) throw new Error(`${refused} sends were refused`)
    const ended = await waitForCount(sink, before + MESSAGES, 300_000)
    await sleep(STATS_LAG_MS)
    // Less the two statistics reads themselves.
    const perSend = (await transactions(database.url) - transactionsBefore - 2) / MESSAGES
    return { accepted: MESSAGES / ((accepted - started) / 1000), delivered: MESSAGES / ((ended - started) / 1000), perSend }
  } finally {
    for (const cleanup of cleanups.reverse()) await cleanup()
  }
}

const main = async () => {
  const sink = await startMxServer()
  try {
    console.log(`outbound bench: ${MESSAGES} messages each${BATCH > 1 ? `; Mailroom's in batches of ${BATCH}` : ""}`)
    const a = await bare(sink)
    console.log(`(a) bare nodemailer pool:  ${a.toFixed(0)} msgs/s delivered`)
    const b = await mailroom(sink)
    console.log(`(b) Mailroom send + mta:   ${b.accepted.toFixed(0)} msgs/s accepted, ${b.delivered.toFixed(0)} msgs/s delivered`)
    console.log(`    PostgreSQL transactions per send: ${b.perSend.toFixed(2)}`)
    const ratio = b.delivered / a
    const fast = b.delivered >= 500
    const close = ratio >= 0.3
    console.log(`ratio (b)/(a): ${ratio.toFixed(2)} (target >= 0.30: ${close ? "pass" : "MISS"}); delivered >= 500/s: ${fast ? "pass" : "MISS"}`)
    process.exitCode = fast && close ? 0 : 2
  } finally {
    await sink.close()
  }
}

main().catch((error) => {
  console.error(error)
  process.exitCode = 1
})
