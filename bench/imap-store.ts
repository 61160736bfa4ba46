/**
 * What a mail program's "mark all" costs: IMAP `STORE 1:* +FLAGS (\Flagged)` over a big INBOX
 * (services/imap/store.ts), on a started server as users run it. The mailbox's mail is written straight
 * into the database (the server stopped meanwhile on the embedded default, whose PGlite one process
 * holds), then one session selects INBOX and flags every message while another client lists the
 * mailbox's emails through the API every 100 ms. Printed: the STORE's time (to its tagged OK, the untagged
 * FETCHes read), the API list's slowest answer meanwhile, the time until the event log holds every
 * `email.labels_changed` (the event-log consumer's processed count), and the same STORE of the first
 * BASELINE messages measured before it in the same run, as a ratio of time a message.
 *
 *   npm run bench:imap-store                  # embedded (PGlite, in-process bus)
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/test NATS_URL=nats://127.0.0.1:4222 npm run bench:imap-store
 *   MESSAGES=5000 npm run bench:imap-store
 */
import { PGlite } from "@electric-sql/pglite"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as net from "node:net"
import * as path from "node:path"
import pg from "pg"
import { withApiKey } from "../test/support/accounts.ts"
import { upgrade } from "../test/support/billing.ts"
import { newBox } from "../test/support/mailboxes.ts"
import { claimPortRange, freePort, type Server, startServer } from "../test/support/process.ts"
import { createDatabase, createDataDir, deleteStreams, natsPrefix, testSecret } from "../test/support/services.ts"

const MESSAGES = Number(process.env.MESSAGES ?? 20_200)
const BASELINE = 200

// Ports of a range no suite run on this machine holds (process.ts).
const ports = await claimPortRange()
process.env.MAILROOM_TEST_PORTS_FROM = String(ports.from)
const postgresUrl = process.env.DATABASE_URL
const natsUrl = process.env.NATS_URL
const dataDir = createDataDir()
const database = postgresUrl === undefined ? undefined : await createDatabase(postgresUrl)
const prefix = natsUrl === undefined ? undefined : natsPrefix()
const imapPort = await freePort()
const env: Record<string, string> = {
  DATA_DIR: dataDir.dir,
  IMAP_PORT: String(imapPort),
  LOG_LEVEL: "warn",
  ...(database === undefined ? {} : { DATABASE_URL: database.url, JWT_SECRET: testSecret() }),
  ...(natsUrl === undefined || prefix === undefined ? {} : { NATS_URL: natsUrl, NATS_PREFIX: prefix })
}

/** Every row in one statement: the same small message, each its own email of the mailbox. */
const seed = async (query: (text: string, params: Array<unknown>) => Promise<unknown>, mailboxId: string, userId: string, address: string) => {
  const raw = Buffer.from("Subject: Bench\r\nMessage-ID: <bench@test>\r\n\r\nFlag me.\r\n")
  const sha = createHash("sha256").update(raw).digest("hex")
  await query("INSERT INTO blobs (sha256, size, content) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING", [sha, raw.length, raw])
  await query(
    `INSERT INTO emails (id, mailbox_id, user_id, message_id, thread_id, subject, from_address, to_addresses, sent_at, received_at,
       mail_from, rcpt_to, headers, text_body, has_attachments, raw_sha256, size, labels)
     SELECT 'eml_bench_' || i, $1, $2, '<bench' || i || '@test>', 'thr_bench_' || i, 'Bench ' || i, 'sender@example.com', ARRAY[$3],
       now() - make_interval(secs => $4 - i), now() - make_interval(secs => $4 - i), 'bounce@example.com', $3,
       jsonb_build_object('subject', 'Bench ' || i), 'Flag me.', false, $5, $6, ARRAY['inbound', 'unread']
     FROM generate_series(1, $4::int) AS i`,
    [mailboxId, userId, address, MESSAGES, sha, raw.length]
  )
}

const processedEvents = async (url: string) => {
  const text = await (await fetch(`${url}/metrics`)).text()
  const line = text.split("\n").find((l) => l.startsWith("mailroom_consumer_processed_total{") && l.includes(`consumer="event-log"`))
  return line === undefined ? 0 : Number(line.split(" ").at(-1))
}

let server: Server | undefined
try {
  server = await startServer(env, { timeoutMs: 120_000 })
  const user = await withApiKey(server.url)
  // Past the free plan's requests a minute: the API list every 100 ms.
  await upgrade(server.url, user.apiKey, "enterprise")
  const box = await newBox(server.url, { user })
  if (database !== undefined) {
    const client = new pg.Client({ connectionString: database.url })
    await client.connect()
    await seed((text, params) => client.query(text, params), box.mailboxId, box.user.userId, box.address)
    await client.end()
  } else {
    await server.stop()
    const db = new PGlite(path.join(dataDir.dir, "pglite"))
    await seed((text, params) => db.query(text, params), box.mailboxId, box.user.userId, box.address)
    await db.close()
    server = await startServer(env, { timeoutMs: 120_000 })
  }
  const url = server.url
  const sizeBefore = database === undefined ? duSize(dataDir.dir) : 0

  const imap = await bareSession(imapPort)
  await imap.answer(/\r\n/)
  const send = (line: string, tag: string) => {
    imap.socket.write(`${tag} ${line}\r\n`)
    return imap.answer(new RegExp(`(^|\\r\\n)${tag} (OK|NO|BAD)[^\\r]*\\r\\n`))
  }
  const check = (answer: string, tag: string) => {
    if (!new RegExp(`${tag} OK`).test(answer)) throw new Error(`${tag}: ${answer.slice(-300)}`)
    return answer
  }
  check(await send(`LOGIN ${box.address} ${box.user.apiKey}`, "a1"), "a1")
  const selected = check(await send("SELECT INBOX", "a2"), "a2")
  const exists = Number(/\* (\d+) EXISTS/.exec(selected)?.[1])
  if (exists !== MESSAGES) throw new Error(`INBOX has ${exists} messages, not ${MESSAGES}`)

  /** The STORE timed, the API listing meanwhile; the event log waited for. */
  const timedStore = async (tag: string, range: string, count: number) => {
    const eventsBefore = await processedEvents(url)
    let storing = true
    const latencies: Array<number> = []
    const lister = (async () => {
      await Promise.resolve()
      while (storing) {
        const started = performance.now()
        const response = await fetch(`${url}/v1/api/mailboxes/${box.mailboxId}/emails?limit=20`, {
          headers: { authorization: `Bearer ${box.user.apiKey}` }
        })
        await response.arrayBuffer()
        if (response.status !== 200) throw new Error(`the API list answered ${response.status}`)
        latencies.push(performance.now() - started)
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
    })().catch((error) => {
      throw new Error(`API list failed (server exit ${server?.process.exitCode}, ${server?.process.signalCode}): ${server?.output().slice(-2000)}`, { cause: error })
    })
    lister.catch(() => {})
    const started = performance.now()
    const answer = check(await send(`STORE ${range} +FLAGS (\\Flagged)`, tag), tag)
    const storeMs = performance.now() - started
    const fetches = answer.match(/^\* \d+ FETCH \(FLAGS \(\\Flagged\)\)\r$/gm)?.length ?? 0
    if (fetches !== count) throw new Error(`${tag}: ${fetches} FETCH answers, not ${count}`)
    let settledMs = storeMs
    while ((await processedEvents(url)) < eventsBefore + count) {
      if (performance.now() - started > 600_000) throw new Error("the event log did not take every event in 10 minutes")
      await new Promise((resolve) => setTimeout(resolve, 50))
      settledMs = performance.now() - started
    }
    storing = false
    await lister
    return { storeMs, settledMs, apiMaxMs: Math.max(...latencies), apiRequests: latencies.length }
  }

  const baseline = await timedStore("b1", `1:${BASELINE}`, BASELINE)
  const big = await timedStore("b2", `${BASELINE + 1}:*`, MESSAGES - BASELINE)
  const perMessage = (result: typeof big, count: number) => result.storeMs / count
  const line = (name: string, result: typeof big, count: number) =>
    `${name.padEnd(28)} ${(result.storeMs / 1000).toFixed(2).padStart(8)} s  ${perMessage(result, count).toFixed(3).padStart(7)} ms/msg  ` +
    `events logged ${(result.settledMs / 1000).toFixed(2).padStart(7)} s  API list max ${result.apiMaxMs.toFixed(0).padStart(6)} ms (${result.apiRequests} req)`
  console.log(`IMAP STORE +FLAGS (\\Flagged), ${database === undefined ? "embedded (PGlite)" : `PostgreSQL${natsUrl ? " + NATS" : ""}`}`)
  console.log(line(`baseline: ${BASELINE} messages`, baseline, BASELINE))
  console.log(line(`${MESSAGES - BASELINE} messages`, big, MESSAGES - BASELINE))
  console.log(`time a message, against the baseline: ${(perMessage(big, MESSAGES - BASELINE) / perMessage(baseline, BASELINE)).toFixed(2)}×`)
  if (database === undefined) console.log(`data directory grew ${((duSize(dataDir.dir) - sizeBefore) / 1e6).toFixed(0)} MB`)
  imap.socket.destroy()
} catch (error) {
  console.error(server?.output().slice(-3000))
  throw error
} finally {
  await server?.stop()
  await database?.drop()
  if (natsUrl !== undefined && prefix !== undefined) await deleteStreams(natsUrl, prefix)
  dataDir.remove()
  await ports.release()
}

/** A bare IMAP connection (no time limit on an answer: test/support/imap-wire.ts's is 10 s). */
async function bareSession(port: number) {
  const socket = net.connect(port, "127.0.0.1")
  await new Promise((resolve) => socket.once("connect", resolve))
  socket.setEncoding("latin1")
  let buffer = ""
  let wake = () => {}
  socket.on("data", (chunk: string) => {
    buffer += chunk
    wake()
  })
  const answer = async (pattern: RegExp): Promise<string> => {
    for (;;) {
      const match = pattern.exec(buffer)
      if (match) {
        const text = buffer.slice(0, match.index + match[0].length)
        buffer = buffer.slice(match.index + match[0].length)
        return text
      }
      if (socket.destroyed) throw new Error("the IMAP connection closed")
      await new Promise<void>((resolve) => {
        wake = resolve
        setTimeout(resolve, 1000)
      })
    }
  }
  return { socket, answer }
}

function duSize(dir: string): number {
  let total = 0
  for (const entry of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) total += fs.statSync(path.join(entry.parentPath, entry.name)).size
  }
  return total
}
