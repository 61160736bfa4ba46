/**
 * `npm run bench:soak`: the embedded default (`npm start`: every role in one process, PGlite, the
 * in-process bus, the offline embedder) under a sustained, open-loop mix of mail arriving and agents
 * reading and searching it, minute by minute, against a baseline measured in the same run.
 *
 * Setup: a fresh Mailroom (`node --import tsx src/main.ts` in a temporary DATA_DIR, free ports,
 * started by test/support/process.ts as the suites start it); one user registered, moved to the
 * enterprise plan through local billing (500 requests per minute per key, 300 searches per minute,
 * 100,000 emails per day), SOAK_MAILBOXES mailboxes, and enough API keys that no key takes more than
 * 250 requests in any minute: the bench measures the server, not its 429s (a 429 counts as an error).
 *
 * Messages: BEIR SciFact abstracts (../shared/data/scifact; a title as the subject, the abstract cut
 * to 1,500 characters as a plain-text body, ~1.7 KB a message), one recipient each, round-robin over
 * the mailboxes, sent with nodemailer's pooled transport over SOAK_SMTP_CONNECTIONS reused connections.
 * Searches are SciFact claims.
 *
 * Phases:
 *   seed      SOAK_SEED messages, sent back to back, then waited for until the API lists them all
 *             (so that reads have mail to read) and they are indexed (so that the baseline does not
 *             share the server with their indexing).
 *   baseline  SOAK_BASELINE_SECONDS of the read and search load alone, no mail arriving.
 *   soak      SOAK_MINUTES of everything at once, open loop (each request is sent at its scheduled
 *             time whether or not earlier ones have been answered; latency runs from that time):
 *               SMTP    SOAK_SMTP_RATE msgs/s (20)
 *               reads   SOAK_READ_RATE req/s (100): 40% GET /v1/api/mailboxes/{id}/emails, 40% GET
 *                       /v1/api/emails/{id} (an email a listing has shown), 20% GET /v1/api/mailboxes
 *               search  SOAK_SEARCH_RATE req/s (2): POST /v1/search, hybrid, limit 10
 *   drain     every message that got a 250 must become readable: the mailboxes are listed until every
 *             `queued as` id is there (or SOAK_DRAIN_SECONDS pass).
 *
 * Per minute: offered and accepted msgs/s (250s received in that minute), indexed/s (email.processed
 * webhooks received by the bench: emails made searchable), how long the emails accepted that minute took
 * from their 250 to being searchable (p50/p99: the bench's time of the 250 to the email.processed
 * event's own timestamp; ingest, the index stage's wait and its work), read p50/p99, search p99
 * (by the minute the request was due), errors by kind (any non-2xx answer, a request that failed or
 * timed out, any SMTP reply other than 250), the server's RSS (VmRSS at the minute's end) and CPU
 * (of all its threads, from /proc: 100% = one core).
 *
 * Targets: accepted >= 95% of the offered SMTP rate in every minute; read p99 < 250 ms and search
 * p99 < 1 s in every minute; no error; every accepted message readable; RSS of the last minute within
 * 10% of the second (judged with SOAK_MINUTES >= 3). Exit status 0 when met, 2 when missed, 1 when
 * the run is invalid (a failed start, the server dying).
 *
 * Settings: SOAK_MINUTES (5), SOAK_SMTP_RATE (20), SOAK_READ_RATE (100), SOAK_SEARCH_RATE (2),
 * SOAK_BASELINE_SECONDS (20), SOAK_SEED (200), SOAK_MAILBOXES (8), SOAK_SMTP_CONNECTIONS (4),
 * SOAK_DRAIN_SECONDS (300; also how long accepted mail is waited for to become searchable), SOAK_DATA (the SciFact directory), SOAK_NODE_ARGS (node flags for the
 * server; default the production launchers' own; e.g. add "--cpu-prof --cpu-prof-dir=/tmp/prof"), SOAK_KEEP (keep the data directory), SOAK_SERVER_LOG
 * (a file to write everything the server printed to).
 */
import * as fs from "node:fs"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { performance } from "node:perf_hooks"
import nodemailer from "nodemailer"
import { withApiKey } from "../test/support/accounts.ts"
import { upgrade } from "../test/support/billing.ts"
import { repoRoot, type Server, startServer } from "../test/support/process.ts"
import { withKey, withToken } from "../test/support/typed-client.ts"
import { sleep } from "../test/support/wait.ts"
import { serverNodeArgs } from "./support/children.ts"

const number = (name: string, fallback: number) => {
  const value = Number(process.env[name] ?? fallback)
  if (!Number.isFinite(value) || value < 0) throw new Error(`${name} must be a non-negative number`)
  return value
}
const MINUTES = number("SOAK_MINUTES", 5)
const SMTP_RATE = number("SOAK_SMTP_RATE", 20)
const READ_RATE = number("SOAK_READ_RATE", 100)
const SEARCH_RATE = number("SOAK_SEARCH_RATE", 2)
const BASELINE_SECONDS = number("SOAK_BASELINE_SECONDS", 20)
const SEED = number("SOAK_SEED", 200)
const MAILBOXES = Math.max(1, number("SOAK_MAILBOXES", 8))
const SMTP_CONNECTIONS = Math.max(1, number("SOAK_SMTP_CONNECTIONS", 4))
const DRAIN_SECONDS = number("SOAK_DRAIN_SECONDS", 300)
const DATA = path.resolve(repoRoot, process.env.SOAK_DATA ?? "../shared/data/scifact")
const NODE_ARGS = serverNodeArgs("SOAK_NODE_ARGS")

/** Requests one key takes in a minute at most: half its enterprise limit (500), so no 429 is measured. */
const REQUESTS_PER_KEY_MINUTE = 250
/** A request unanswered this long is an error (and is not waited for any longer). */
const REQUEST_TIMEOUT_MS = 120_000
const BODY_CHARS = 1_500
const DOMAIN = "agents.localhost"
const CLK_TCK = 100

// ---------------------------------------------------------------------------------------------
// Measurements

const percentile = (values: ReadonlyArray<number>, p: number) => {
  if (values.length === 0) return NaN
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!
}

interface Bucket {
  readonly reads: Array<number>
  readonly searches: Array<number>
  readonly smtp: Array<number>
  offered: number
  accepted: number
  /** email.processed events received (emails made searchable). */
  indexed: number
  /** For each email accepted in the minute and searchable by the report: ms from its 250 to its email.processed. */
  readonly searchable: Array<number>
  readonly errors: Map<string, number>
  rssKb: number
  cpuTicks: number
}

const bucket = (): Bucket => ({ reads: [], searches: [], smtp: [], offered: 0, accepted: 0, indexed: 0, searchable: [], errors: new Map(), rssKb: 0, cpuTicks: 0 })
const countError = (b: Bucket, kind: string) => b.errors.set(kind, (b.errors.get(kind) ?? 0) + 1)

const procStatus = (pid: number) => {
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, "utf8")
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    return {
      rssKb: Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0),
      // utime and stime, of every thread of the process.
      cpuTicks: Number(fields[11]) + Number(fields[12])
    }
  } catch {
    return undefined
  }
}


/**
 * Open-loop schedule: `fire(dueAt)` at `rate` per second from `start` until `end`, never waiting
 * for an answer (a late answer does not delay the next request).
 */
const openLoop = async (rate: number, start: number, end: number, fire: (dueAt: number) => void) => {
  if (rate <= 0) return
  for (let k = 0; ; k++) {
    const dueAt = start + (k * 1000) / rate
    if (dueAt >= end) return
    await sleep(dueAt - performance.now())
    fire(dueAt)
  }
}

// ---------------------------------------------------------------------------------------------
// Data

interface Doc {
  readonly id: string
  readonly title: string
  readonly text: string
}

const readJsonLines = <T>(file: string): Array<T> =>
  fs.readFileSync(path.join(DATA, file), "utf8").split("\n").filter((line) => line.trim().length > 0).map((line) => JSON.parse(line) as T)

const docs: Array<Doc> = readJsonLines<{ _id: string; title: string; text: string }>("corpus.jsonl")
  .map((doc) => ({ id: doc._id, title: doc.title, text: doc.text.slice(0, BODY_CHARS) }))
const queries: Array<string> = readJsonLines<{ text: string }>("queries.jsonl").map((query) => query.text)

// ---------------------------------------------------------------------------------------------
// The run

/** Stops the server when the run fails part-way (set once it has started). */
let stopOnError: (() => Promise<void>) | undefined

const main = async () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "mailroom-soak-"))
  let server: Server | undefined
  const finish = async (code: number) => {
    if (server) {
      const exit = await Promise.race([server.stop(), sleep(60_000).then(() => "timeout" as const)])
      if (exit === "timeout") {
        console.log("server did not stop within 60 s after SIGTERM; killed")
        await server.kill()
        code = Math.max(code, 1)
      } else if (exit !== 0) {
        console.log(`server exited with ${exit} on SIGTERM:\n${server.output().slice(-2000)}`)
        code = Math.max(code, 1)
      }
    }
    if (server && process.env.SOAK_SERVER_LOG) fs.writeFileSync(process.env.SOAK_SERVER_LOG, server.output())
    if (process.env.SOAK_KEEP) console.log(`data directory kept: ${dataDir}`)
    else fs.rmSync(dataDir, { recursive: true, force: true })
    process.exit(code)
  }

  console.log(
    `soak: ${MINUTES} min of SMTP ${SMTP_RATE} msgs/s + reads ${READ_RATE} req/s + searches ${SEARCH_RATE}/s ` +
      `on the embedded default (${os.availableParallelism()} cores, load average ${os.loadavg().map((l) => l.toFixed(2)).join(" ")})`
  )
  // email.processed webhooks arrive here: how the bench knows which emails are searchable.
  const processed = new Set<string>()
  /** When each email became searchable: its email.processed event's timestamp (ms since the epoch). */
  const searchableAt = new Map<string, number>()
  /** What the indexer reported it spent on each (`processing_ms`). */
  const processingMs: Array<number> = []
  let onProcessed = () => {}
  const receiver = http.createServer((request, response) => {
    let body = ""
    request.on("data", (chunk) => (body += chunk))
    request.on("end", () => {
      try {
        const event = JSON.parse(body)
        const id = event.data?.email_id
        if (typeof id === "string" && !processed.has(id)) {
          processed.add(id)
          searchableAt.set(id, Date.parse(event.timestamp))
          if (typeof event.data.processing_ms === "number") processingMs.push(event.data.processing_ms)
          onProcessed()
        }
      } finally {
        response.end("ok")
      }
    })
  })
  await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", () => resolve()))
  receiver.unref()
  server = await startServer(
    // As `npm start` runs: one embedding thread per core (the suites' helper pins it to one).
    // Private webhook targets: the receiver above is on loopback.
    { DATA_DIR: dataDir, LOG_LEVEL: "warn", EMBEDDER_THREADS: String(os.availableParallelism()), WEBHOOK_ALLOW_PRIVATE: "true" },
    { timeoutMs: 180_000, nodeArgs: NODE_ARGS }
  )
  stopOnError = async () => {
    if (process.env.SOAK_SERVER_LOG) fs.writeFileSync(process.env.SOAK_SERVER_LOG, server!.output())
    await server!.kill()
    fs.rmSync(dataDir, { recursive: true, force: true })
  }
  const pid = server.process.pid!
  let serverDied = false
  let stopping = false
  server.process.once("exit", (code, signal) => {
    if (!stopping) {
      serverDied = true
      console.log(`server died (code ${code}, signal ${signal}):\n${server!.output().slice(-4000)}`)
    }
  })

  // ---- account, keys, mailboxes
  const user = await withApiKey(server.url)
  await upgrade(server.url, user.apiKey, "enterprise")
  const keyCount = Math.max(1, Math.ceil(((READ_RATE + SEARCH_RATE) * 60) / REQUESTS_PER_KEY_MINUTE))
  const keys = [user.apiKey]
  while (keys.length < keyCount) {
    const created = await withToken(server.url, user).POST("/v1/api-keys", { body: { name: `soak ${keys.length}` } })
    if (created.response.status !== 201 || !created.data) throw new Error(`key not created: ${created.response.status} ${JSON.stringify(created.error)}`)
    keys.push(created.data.data.apiKey)
  }
  let nextKey = 0
  const key = () => keys[nextKey++ % keys.length]!
  const keyed = () => withKey(server.url, { apiKey: key() })
  const mailboxes: Array<{ id: string; address: string }> = []
  for (let i = 0; i < MAILBOXES; i++) {
    const created = await keyed().POST("/v1/api/mailboxes", {
      body: { local_part: `soak-${Date.now().toString(36)}-${i}`, domain: DOMAIN }
    })
    if (created.response.status !== 201 || !created.data) throw new Error(`mailbox not created: ${created.response.status} ${JSON.stringify(created.error)}`)
    mailboxes.push({ id: created.data.mailbox.mailbox_id, address: created.data.mailbox.email_address })
  }
  const webhook = await keyed().POST("/v1/api/webhooks", {
    body: { url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/processed`, events: ["email.processed"] }
  })
  if (webhook.response.status !== 201) throw new Error(`webhook not created: ${webhook.response.status} ${JSON.stringify(webhook.error)}`)
  console.log(`setup: 1 enterprise user, ${keys.length} API keys, ${mailboxes.length} mailboxes, an email.processed webhook`)

  // ---- load generators
  const transport = nodemailer.createTransport({
    host: "127.0.0.1",
    port: server.smtpPort,
    secure: false,
    ignoreTLS: true,
    pool: true,
    maxConnections: SMTP_CONNECTIONS,
    maxMessages: Infinity,
    socketTimeout: REQUEST_TIMEOUT_MS,
    greetingTimeout: 30_000
  })
  const accepted = new Set<string>()
  /** When each accepted message got its 250 (ms since the epoch, this machine's clock as the server's). */
  const acceptedAt = new Map<string, number>()
  let sent = 0
  const inFlight = new Set<Promise<void>>()
  const track = (work: Promise<void>) => {
    inFlight.add(work)
    void work.finally(() => inFlight.delete(work))
  }

  /** Send one message; `onDone` hears its latency (ms from `dueAt`) or why it failed. */
  const sendOne = (dueAt: number, onDone: (result: { ms: number } | { error: string }) => void) => {
    const doc = docs[sent % docs.length]!
    const box = mailboxes[sent % mailboxes.length]!
    sent++
    track(
      transport.sendMail({
        from: `doc-${doc.id}@scifact.example`,
        to: box.address,
        subject: doc.title,
        text: doc.text,
        messageId: `<soak-${sent}-${Date.now().toString(36)}@scifact.example>`
      }).then(
        (info: { response: string }) => {
          const id = /queued as (\S+)/.exec(info.response)?.[1]
          if (!info.response.startsWith("250") || id === undefined) return onDone({ error: `smtp ${info.response.slice(0, 3)}` })
          accepted.add(id)
          acceptedAt.set(id, Date.now())
          onDone({ ms: performance.now() - dueAt })
        },
        (error: { responseCode?: number; code?: string; message: string }) =>
          onDone({ error: error.responseCode ? `smtp ${error.responseCode}` : `smtp ${error.code ?? error.message}` })
      )
    )
  }

  /** Emails a listing has shown: what the get-email reads ask for. */
  const known: Array<string> = []
  const knownSet = new Set<string>()
  const learn = (rows: ReadonlyArray<{ email_id: string }>) => {
    for (const row of rows) {
      if (knownSet.has(row.email_id)) continue
      knownSet.add(row.email_id)
      known.push(row.email_id)
    }
  }
  const pick = <T>(items: ReadonlyArray<T>) => items[Math.floor(Math.random() * items.length)]!

  const timed = async (
    dueAt: number,
    kind: string,
    call: () => Promise<{ status: number; body: any }>,
    onDone: (result: { ms: number; body: any } | { error: string }) => void
  ) => {
    try {
      const reply = await call()
      if (reply.status < 200 || reply.status > 299) return onDone({ error: `${kind} ${reply.status}` })
      onDone({ ms: performance.now() - dueAt, body: reply.body })
    } catch (error) {
      onDone({ error: `${kind} ${(error as Error).name === "TimeoutError" ? "timeout" : "failed"}` })
    }
  }
  const signal = () => AbortSignal.timeout(REQUEST_TIMEOUT_MS)

  const readOne = (dueAt: number, into: () => Bucket) => {
    const roll = Math.random()
    const request = (p: string) => () =>
      fetch(`${server!.url}${p}`, { headers: { "x-api-key": key() }, signal: signal() }).then(async (r) => ({
        status: r.status,
        body: await r.json().catch(() => undefined)
      }))
    const [kind, call] = roll < 0.4 || known.length === 0
      ? ["list-emails", request(`/v1/api/mailboxes/${pick(mailboxes).id}/emails?limit=20`)] as const
      : roll < 0.8
      ? ["get-email", request(`/v1/api/emails/${pick(known)}`)] as const
      : ["list-mailboxes", request(`/v1/api/mailboxes`)] as const
    track(timed(dueAt, kind, call, (result) => {
      const b = into()
      if ("error" in result) return countError(b, result.error)
      b.reads.push(result.ms)
      if (kind === "list-emails") learn(result.body.data)
    }))
  }

  const searchOne = (dueAt: number, into: () => Bucket) =>
    track(timed(
      dueAt,
      "search",
      () =>
        fetch(`${server!.url}/v1/search`, {
          method: "POST",
          headers: { "x-api-key": key(), "content-type": "application/json" },
          body: JSON.stringify({ query: pick(queries), limit: 10 }),
          signal: signal()
        }).then(async (r) => ({ status: r.status, body: await r.json().catch(() => undefined) })),
      (result) => {
        const b = into()
        if ("error" in result) return countError(b, result.error)
        b.searches.push(result.ms)
      }
    ))

  /** Every email the API lists in the bench's mailboxes. */
  const listAll = async () => {
    const ids = new Set<string>()
    for (const box of mailboxes) {
      for (let offset = 0;; offset += 100) {
        const page = await keyed().GET("/v1/api/mailboxes/{mailboxId}/emails", {
          params: { path: { mailboxId: box.id }, query: { limit: 100, offset } }
        })
        if (page.response.status !== 200 || !page.data) throw new Error(`listing failed: ${page.response.status} ${JSON.stringify(page.error)}`)
        for (const row of page.data.data) ids.add(row.email_id)
        if (!page.data.meta.hasMore) break
      }
    }
    return ids
  }
  const waitReadable = async (timeoutMs: number) => {
    const started = performance.now()
    for (;;) {
      const listed = await listAll()
      const missing = [...accepted].filter((id) => !listed.has(id))
      if (missing.length === 0 || performance.now() - started > timeoutMs) {
        return { missing, seconds: (performance.now() - started) / 1000, listed }
      }
      await sleep(1000)
    }
  }

  // ---- seed
  if (SEED > 0) {
    const started = performance.now()
    const seedErrors = bucket()
    await Promise.all(Array.from({ length: SMTP_CONNECTIONS }, async () => {
      while (sent < SEED) {
        await new Promise<void>((resolve) => sendOne(performance.now(), (result) => {
          if ("error" in result) countError(seedErrors, result.error)
          resolve()
        }))
      }
    }))
    const drained = await waitReadable(DRAIN_SECONDS * 1000)
    learn([...drained.listed].map((email_id) => ({ email_id })))
    console.log(
      `seed: ${accepted.size} messages accepted in ${((performance.now() - started) / 1000).toFixed(1)} s, readable after ` +
        `${drained.seconds.toFixed(1)} s more${seedErrors.errors.size > 0 ? `; errors ${JSON.stringify([...seedErrors.errors])}` : ""}`
    )
    if (drained.missing.length > 0) throw new Error(`${drained.missing.length} seeded messages never became readable`)
    // The baseline must not share the server with the seed's indexing.
    const indexing = performance.now()
    while ([...accepted].some((id) => !processed.has(id))) {
      if (performance.now() - indexing > DRAIN_SECONDS * 1000) throw new Error("the seed was not indexed in time")
      await sleep(500)
    }
    console.log(`seed indexed (searchable) ${((performance.now() - indexing) / 1000).toFixed(1)} s after that`)
  }

  // ---- baseline: reads and searches alone
  const baseline = bucket()
  {
    const start = performance.now() + 100
    const end = start + BASELINE_SECONDS * 1000
    await Promise.all([
      openLoop(READ_RATE, start, end, (dueAt) => readOne(dueAt, () => baseline)),
      openLoop(SEARCH_RATE, start, end, (dueAt) => searchOne(dueAt, () => baseline))
    ])
    await Promise.all([...inFlight])
  }

  // ---- soak
  const minutes = Array.from({ length: Math.ceil(MINUTES) }, bucket)
  const start = performance.now() + 100
  const end = start + MINUTES * 60_000
  const minuteOf = (at: number) => minutes[Math.min(minutes.length - 1, Math.max(0, Math.floor((at - start) / 60_000)))]!
  // The same moments on the wall clock, which the 250s and the events' timestamps are on.
  const startWall = Date.now() + (start - performance.now())
  const endWall = startWall + MINUTES * 60_000
  onProcessed = () => {
    if (performance.now() < end) minuteOf(performance.now()).indexed++
  }
  const startCpu = procStatus(pid)?.cpuTicks ?? 0
  let lastCpu = startCpu
  const sampler = (async () => {
    for (let m = 0; m < minutes.length; m++) {
      await sleep(start + Math.min(MINUTES * 60_000, (m + 1) * 60_000) - performance.now())
      const status = procStatus(pid)
      if (!status) return
      minutes[m]!.rssKb = status.rssKb
      minutes[m]!.cpuTicks = status.cpuTicks - lastCpu
      lastCpu = status.cpuTicks
    }
  })()
  console.log(`baseline done (${BASELINE_SECONDS} s); soaking for ${MINUTES} min…`)
  const progress = setInterval(() => {
    const m = Math.floor((performance.now() - start) / 60_000)
    const b = minutes[Math.min(m, minutes.length - 1)]!
    console.log(
      `  t=${((performance.now() - start) / 1000).toFixed(0)} s: accepted ${b.accepted}, reads ${b.reads.length}, ` +
        `searches ${b.searches.length}, in flight ${inFlight.size}, errors ${[...b.errors.values()].reduce((a, c) => a + c, 0)}`
    )
  }, 30_000)
  await Promise.all([
    openLoop(SMTP_RATE, start, end, (dueAt) => {
      minuteOf(dueAt).offered++
      sendOne(dueAt, (result) => {
        if ("error" in result) return countError(minuteOf(dueAt), result.error)
        // A 250 after the load has ended counts in no minute (the tail is reported on its own).
        const now = performance.now()
        if (now < end) minuteOf(now).accepted++
        minuteOf(dueAt).smtp.push(result.ms)
      })
    }),
    openLoop(READ_RATE, start, end, (dueAt) => readOne(dueAt, () => minuteOf(dueAt))),
    openLoop(SEARCH_RATE, start, end, (dueAt) => searchOne(dueAt, () => minuteOf(dueAt)))
  ])
  clearInterval(progress)
  await sampler
  const unanswered = inFlight.size
  const searchableAtEnd = [...accepted].filter((id) => processed.has(id)).length
  const acceptedAtEnd = accepted.size
  const waited = performance.now()
  await Promise.all([...inFlight])
  const tailSeconds = (performance.now() - waited) / 1000
  transport.close()
  const drain = serverDied ? { missing: [...accepted], seconds: 0 } : await waitReadable(DRAIN_SECONDS * 1000)
  // The mail accepted during the soak, waited for until it is searchable (or SOAK_DRAIN_SECONDS pass).
  const soakAccepted = [...acceptedAt].filter(([, at]) => at >= startWall && at < endWall)
  const indexWaitStart = performance.now()
  while (!serverDied && soakAccepted.some(([id]) => !searchableAt.has(id)) && performance.now() - indexWaitStart < DRAIN_SECONDS * 1000) {
    await sleep(500)
  }
  const indexWaited = (performance.now() - indexWaitStart) / 1000
  const unsearchable = soakAccepted.filter(([id]) => !searchableAt.has(id)).length
  const searchableLags: Array<number> = []
  for (const [id, at] of soakAccepted) {
    const done = searchableAt.get(id)
    if (done === undefined) continue
    searchableLags.push(done - at)
    minuteOf(start + (at - startWall)).searchable.push(done - at)
  }

  // ---- report
  const ms = (value: number) => (Number.isNaN(value) ? "-" : value >= 10_000 ? `${(value / 1000).toFixed(1)} s` : `${value.toFixed(0)} ms`)
  const ratio = (value: number, base: number) => (Number.isNaN(value) || !(base > 0) ? "" : ` (${(value / base).toFixed(1)}x)`)
  const baseRead99 = percentile(baseline.reads, 99)
  const baseSearch99 = percentile(baseline.searches, 99)
  const errorsOf = (b: Bucket) => [...b.errors].map(([kind, n]) => `${kind}: ${n}`).join(", ")
  console.log(
    `\nbaseline (no mail arriving, ${BASELINE_SECONDS} s): read p50 ${ms(percentile(baseline.reads, 50))}, ` +
      `p99 ${ms(baseRead99)} (${baseline.reads.length} reads); search p50 ${ms(percentile(baseline.searches, 50))}, ` +
      `p99 ${ms(baseSearch99)} (${baseline.searches.length}); errors: ${errorsOf(baseline) || "none"}`
  )
  const header = [
    "min", "offered/s", "accepted/s", "indexed/s", "searchable p50", "p99", "smtp p99", "read p50", "read p99 (x base)", "search p99 (x base)",
    "errors", "RSS MB", "CPU %"
  ]
  const rows = minutes.map((b, i) => {
    const seconds = Math.min(60, MINUTES * 60 - i * 60)
    const errors = [...b.errors.values()].reduce((a, c) => a + c, 0)
    return [
      String(i + 1),
      (b.offered / seconds).toFixed(1),
      (b.accepted / seconds).toFixed(1),
      (b.indexed / seconds).toFixed(1),
      ms(percentile(b.searchable, 50)),
      ms(percentile(b.searchable, 99)),
      ms(percentile(b.smtp, 99)),
      ms(percentile(b.reads, 50)),
      ms(percentile(b.reads, 99)) + ratio(percentile(b.reads, 99), baseRead99),
      ms(percentile(b.searches, 99)) + ratio(percentile(b.searches, 99), baseSearch99),
      String(errors),
      (b.rssKb / 1024).toFixed(0),
      ((b.cpuTicks / CLK_TCK / seconds) * 100).toFixed(0)
    ]
  })
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)))
  const line = (cells: ReadonlyArray<string>) => cells.map((c, i) => c.padStart(widths[i]!)).join("  ")
  console.log(line(header))
  for (const row of rows) console.log(line(row))
  for (const [i, b] of minutes.entries()) if (b.errors.size > 0) console.log(`  minute ${i + 1} errors: ${errorsOf(b)}`)
  console.log(
    `after the load: ${unanswered} requests were still unanswered, the last answered ${tailSeconds.toFixed(1)} s later; ` +
      `${accepted.size} messages accepted in all, ${drain.missing.length} not readable ${drain.seconds.toFixed(1)} s after; ` +
      `when the load ended ${searchableAtEnd} of the ${acceptedAtEnd} accepted were searchable (index backlog ${acceptedAtEnd - searchableAtEnd})`
  )
  console.log(
    `from a 250 to searchable (email.processed), the ${soakAccepted.length} messages accepted during the load: ` +
      `p50 ${ms(percentile(searchableLags, 50))}, p99 ${ms(percentile(searchableLags, 99))}, max ${ms(percentile(searchableLags, 100))}` +
      (unsearchable > 0 ? `; ${unsearchable} not searchable ${indexWaited.toFixed(0)} s after the load` : "") +
      `; the indexer's own time a message (processing_ms) p50 ${ms(percentile(processingMs, 50))}, p99 ${ms(percentile(processingMs, 99))}`
  )

  // ---- targets
  const results: Array<[string, boolean | undefined]> = []
  results.push([
    `SMTP sustains ${SMTP_RATE} msgs/s (accepted >= 95% of offered in every minute)`,
    minutes.every((b) => b.accepted >= 0.95 * b.offered)
  ])
  results.push(["read p99 < 250 ms in every minute", minutes.every((b) => percentile(b.reads, 99) < 250)])
  results.push(["search p99 < 1 s in every minute", minutes.every((b) => percentile(b.searches, 99) < 1000)])
  results.push(["no errors", minutes.every((b) => b.errors.size === 0) && baseline.errors.size === 0])
  results.push([`every accepted message readable (${accepted.size})`, drain.missing.length === 0])
  const second = minutes[1]?.rssKb
  const last = minutes[minutes.length - 1]?.rssKb
  results.push([
    `RSS of the last minute within 10% of the second (${second ? (second / 1024).toFixed(0) : "-"} -> ${last ? (last / 1024).toFixed(0) : "-"} MB)`,
    minutes.length >= 3 && second && last ? Math.abs(last - second) <= 0.1 * second : undefined
  ])
  console.log("\ntargets:")
  for (const [name, met] of results) console.log(`  ${met === undefined ? "not judged (needs SOAK_MINUTES >= 3)" : met ? "met   " : "MISSED"}  ${name}`)
  stopping = true
  if (serverDied) return finish(1)
  return finish(results.every(([, met]) => met !== false) ? 0 : 2)
}

main().catch(async (error) => {
  console.error(error)
  await stopOnError?.()
  process.exit(1)
})
