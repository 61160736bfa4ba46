/**
 * `npm run bench:smtp`: the durable inbound path against a bare smtp-server, measured in the same run.
 *
 * Targets (each its own child process):
 *   bare     bench/servers/bare-smtp.ts: smtp-server 3.21 reading every message to the end, discarding
 *            it and answering 250.
 *   durable  Mailroom (`node --import tsx src/main.ts`, every role, as `npm start`) on a fresh PostgreSQL
 *            database and a NATS prefix of its own: a 250 means the raw message is stored and the bus
 *            has it; the worker then parses and stores each email, and the indexer embeds and indexes it.
 *            Ingest checks each message's SPF, DKIM, DMARC and ARC (mailauth; after the 250, as
 *            without DMARC_ENFORCE), asking a DNS server this bench runs
 *            on loopback (DNS_SERVERS), where bench.localhost publishes SPF for 127.0.0.1, its DKIM
 *            key and DMARC p=none: every message passes all three, as mail from a careful sender does.
 *   durable-noindex  the same without the indexer role (ROLES=api,smtp,worker,mta): nothing is embedded.
 *            (Some roles only: its API is given the tests' stand-in for Qdrant, which nothing writes to.)
 *            durable / durable-noindex, in the same run, is what indexing costs accepting: the stages run
 *            at their own pace, so it should cost little (target: >= 0.8).
 *   embedded `npm start` as it comes: every role on PGlite and the in-process bus (no DATABASE_URL, no
 *            NATS_URL), measured against the same bare server. Its counts come from its own /readyz
 *            (the bench cannot open its database), whose `handled` counts what each stage finished.
 *   smtp, smtp-enforcing, smtp-unverified  the SMTP node alone (ROLES=smtp; accounts and mailboxes
 *            made in SQL, nothing ingested, so the worker's parsing and embedding do not share its CPU):
 *            as it runs by default (smtp: the checks left to ingest), with DMARC_ENFORCE=true
 *            (smtp-enforcing: the checks before the 250, which may refuse) and with VERIFY_INBOUND=false
 *            (smtp-unverified). A 250 still means stored and on the bus. smtp-enforcing /
 *            smtp-unverified, in the same run, is the checks' cost in msgs/s, and the difference of the
 *            node's CPU per accepted message is their CPU; smtp / smtp-unverified shows what is left of
 *            it on the default node.
 *
 * Senders (the load generator runs in this process, on `net`, and does nothing else while it measures):
 *   (a) reused  10 connections, EHLO once, then MAIL+RCPT+DATA (pipelined, as PIPELINING is
 *               advertised) and the body per message, back to back: how nodemailer's pool sends.
 *               Latency: MAIL written -> final 250.
 *   (b) single  100 connections in flight, each one message: connect, EHLO, MAIL+RCPT+DATA, body,
 *               QUIT; a finished connection is replaced at once. Latency: connect -> final 250, which
 *               includes the 100 ms smtp-server waits before every greeting (not configurable).
 * Each sender runs for a warm-up, then a measured period; only 250s finished inside the measured
 * period count towards msgs/s. Every reply other than the expected one is an error and is printed.
 *
 * Messages: ~4 KB MIME (multipart/mixed: multipart/alternative text + html, and a small base64
 * attachment), each with its own Message-ID (so each is a distinct blob), DKIM-signed (RSA 2048,
 * relaxed/relaxed) over From, MIME-Version, Content-Type and the body, which every message shares:
 * signed once, so the signature costs the load generator nothing and the server a full check.
 *
 * No stage may hide a backlog. For each Mailroom target and sender the bench reports, per stage:
 * accepted/s (250s), ingested/s (emails stored) and indexed/s (emails embedded: `search_documents` naming a model)
 * over the measured period; each stage's lag when the measured period ended (accepted but not
 * stored; stored but not indexed); and, after the senders stop, how long after the last 250 each
 * stage had finished everything. Ingest must drain within BENCH_DRAIN_SECONDS (else the run is
 * invalid); indexing is waited for up to BENCH_INDEX_DRAIN_SECONDS and what it has left is printed.
 * CPU used per process over each measured period (from /proc) shows where the time goes.
 *
 * Targets: (a) durable >= 1,000 msgs/s and >= 0.5 x bare; (b) durable >= 0.9 x bare; accepted/s with
 * indexing on >= 0.8 x with it off, for each sender.
 * Exit status: 0 when every target passes, 2 when a target is missed, 1 when the run is invalid
 * (errors, a backlog that does not drain, a failed start).
 *
 * Settings: BENCH_TARGETS ("bare,durable,durable-noindex,embedded,smtp,smtp-enforcing,smtp-unverified"), BENCH_SENDERS
 * ("a,b"), BENCH_SECONDS (10), BENCH_INDEX_DRAIN_SECONDS (120),
 * BENCH_WARMUP_SECONDS (2), BENCH_DRAIN_SECONDS (300, the longest wait for the worker),
 * BENCH_DATABASE_URL (postgres://postgres@127.0.0.1:5432/postgres, where the bench database is
 * created), BENCH_NATS_URL (nats://127.0.0.1:4222), BENCH_NODE_ARGS (node flags for the servers, the
 * bare one too; default the production launchers' own, "--max-semi-space-size=64"; e.g. add
 * "--cpu-prof --cpu-prof-dir=/tmp/prof").
 */
import { execFileSync } from "node:child_process"
import { generateKeyPairSync, randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { performance } from "node:perf_hooks"
import nodemailer from "nodemailer"
import pg from "pg"
import { type DnsServer, startDnsServer } from "../test/support/dns-server.ts"
import { startFakeQdrant } from "../test/support/fake-qdrant.ts"
import { freePort } from "../test/support/process.ts"
import { sleep } from "../test/support/wait.ts"
import {
  BenchError,
  cleanUp,
  logTail,
  onCleanup,
  scratchDirectory,
  seconds,
  serverNodeArgs,
  spawnChild as spawnBenchChild,
  waitReady
} from "./support/children.ts"

const MEASURE_SECONDS = seconds("BENCH_SECONDS", 10)
const WARMUP_SECONDS = seconds("BENCH_WARMUP_SECONDS", 2)
const DRAIN_SECONDS = seconds("BENCH_DRAIN_SECONDS", 300)
/** How long the bench waits for the index stage after the last 250 (what is left is reported). */
const INDEX_DRAIN_SECONDS = seconds("BENCH_INDEX_DRAIN_SECONDS", 120)
const list = (name: string, fallback: string) => new Set((process.env[name] ?? fallback).split(",").map((t) => t.trim()))
const TARGETS = list("BENCH_TARGETS", "bare,durable,durable-noindex,embedded,smtp,smtp-enforcing,smtp-unverified")
const SENDERS = list("BENCH_SENDERS", "a,b")
const NODE_ARGS = serverNodeArgs("BENCH_NODE_ARGS")
const ADMIN_DATABASE_URL = process.env.BENCH_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"
const NATS_URL = process.env.BENCH_NATS_URL ?? "nats://127.0.0.1:4222"

/** Sender (a): connections reused for many messages. */
const REUSED_CONNECTIONS = 10
/** Sender (b): connections in flight, one message each. */
const SINGLE_CONNECTIONS = 100
/** Size the messages are built to. */
const MESSAGE_BYTES = 4096
/** A client socket silent this long is a failure (the server hung). */
const CLIENT_TIMEOUT_MS = 60_000
/** Emails one account may receive per day on the enterprise plan, less a margin. */
const EMAILS_PER_ACCOUNT = 90_000
/** The fastest durable rate the account count is sized for (msgs/s). */
const SIZED_FOR_RATE = 8_000
const DOMAIN = "agents.localhost"
const CLK_TCK = (() => {
  try {
    return Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100
  } catch {
    return 100
  }
})()

/** Set on SIGINT: every sender stops at its next message. */
let interrupted = false

const scratch = scratchDirectory("mailroom-bench-smtp-")

/** A child of this bench: its log in the scratch directory, the bench's node flags, 15 s to stop. */
const spawnChild = (name: string, script: string, settings: Record<string, string>) =>
  spawnBenchChild(name, script, settings, { logDir: scratch, nodeArgs: NODE_ARGS, stopWithinMs: 15_000 })

// ---------------------------------------------------------------------------------------------
// A minimal SMTP client: replies are read in order, multi-line replies joined.

interface Reply {
  readonly code: number
  readonly text: string
}

class SmtpSession {
  private readonly replies: Array<Reply> = []
  private readonly waiters: Array<{ resolve: (reply: Reply) => void; reject: (error: Error) => void }> = []
  private partial = ""
  private lines: Array<string> = []
  private failure: Error | undefined
  readonly closed: Promise<void>

  private constructor(readonly socket: net.Socket) {
    socket.setNoDelay(true)
    socket.setTimeout(CLIENT_TIMEOUT_MS, () => socket.destroy(new Error(`no answer within ${CLIENT_TIMEOUT_MS / 1000} s`)))
    socket.on("data", (chunk: Buffer) => this.onData(chunk))
    this.closed = new Promise((resolve) => {
      socket.once("close", () => {
        this.fail(new Error("connection closed"))
        resolve()
      })
    })
    socket.on("error", (error) => this.fail(error))
  }

  /** Connect; resolves once the TCP connection is up (the greeting is the first reply). */
  static open(port: number) {
    return new Promise<SmtpSession>((resolve, reject) => {
      const socket = net.connect({ port, host: "127.0.0.1" })
      const onError = (error: Error) => reject(error)
      socket.once("error", onError)
      socket.once("connect", () => {
        socket.off("error", onError)
        resolve(new SmtpSession(socket))
      })
    })
  }

  private onData(chunk: Buffer) {
    const text = this.partial + chunk.toString("latin1")
    let start = 0
    let end: number
    while ((end = text.indexOf("\r\n", start)) !== -1) {
      const line = text.slice(start, end)
      start = end + 2
      this.lines.push(line)
      if (line.charAt(3) === "-") continue
      const reply = { code: Number(line.slice(0, 3)), text: this.lines.join(" | ") }
      this.lines = []
      const waiter = this.waiters.shift()
      if (waiter) waiter.resolve(reply)
      else this.replies.push(reply)
    }
    this.partial = text.slice(start)
  }

  private fail(error: Error) {
    this.failure ??= error
    for (const waiter of this.waiters.splice(0)) waiter.reject(this.failure)
  }

  /** The next reply, in the order the commands were written. */
  next(): Promise<Reply> {
    const reply = this.replies.shift()
    if (reply) return Promise.resolve(reply)
    if (this.failure) return Promise.reject(this.failure)
    return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }))
  }

  write(data: string | Buffer) {
    this.socket.write(data)
  }

  destroy() {
    this.socket.destroy()
  }
}

/** A reply that is not the one expected: counted and printed as an error. */
class Unexpected extends Error {
  constructor(readonly step: string, readonly reply: Reply) {
    super(`${step} ${reply.code} ${reply.text}`)
  }
}

const expectCode = (step: string, reply: Reply, code: number) => {
  if (reply.code !== code) throw new Unexpected(step, reply)
}

// ---------------------------------------------------------------------------------------------
// Messages

const runId = `${Date.now().toString(36)}${randomBytes(3).toString("hex")}`

const wrap = (text: string, width = 72) => {
  const lines: Array<string> = []
  let line = ""
  for (const word of text.split(" ")) {
    if (line.length + word.length + 1 > width) {
      lines.push(line)
      line = word
    } else line = line ? `${line} ${word}` : word
  }
  if (line) lines.push(line)
  return lines.join("\r\n")
}

const sentence =
  "The quarterly figures for the northern region are attached, together with the notes from " +
  "Thursday's review; please confirm the shipment dates before the end of the week so the agent " +
  "can schedule the follow-up calls."

/** The headers that differ per message (the rest are in the template). */
function headersFor(rcpt: string, n: number) {
  return [
    `Message-ID: <${runId}.${n}@bench.localhost>`,
    `Date: ${new Date().toUTCString().replace("GMT", "+0000")}`,
    "From: Bench Sender <sender@bench.localhost>",
    `To: <${rcpt}>`,
    `Subject: Bench message ${n}: quarterly figures and shipment dates`,
    "X-Mailer: mailroom-bench",
    ""
  ].join("\r\n")
}

/** The parts that do not change, built once; `message()` adds the per-message headers. */
const template = (() => {
  const attachment = randomBytes(420).toString("base64").replace(/.{76}/g, "$&\r\n")
  const body = (filler: number) => {
    const text = ["Hello,", "", wrap(`${sentence} ${"More context for the record. ".repeat(filler)}`), "", "Regards,", "Bench"].join("\r\n")
    const html = `<html><body><p>Hello,</p>\r\n<p>${wrap(sentence)}</p>\r\n<p>${
      wrap("More <b>context</b> for the record. ".repeat(filler))
    }</p>\r\n<p>Regards,<br>Bench</p></body></html>`
    return [
      "MIME-Version: 1.0",
      `Content-Type: multipart/mixed; boundary="mixed-${runId}"`,
      "",
      `--mixed-${runId}`,
      `Content-Type: multipart/alternative; boundary="alt-${runId}"`,
      "",
      `--alt-${runId}`,
      "Content-Type: text/plain; charset=utf-8",
      "Content-Transfer-Encoding: 7bit",
      "",
      text,
      `--alt-${runId}`,
      "Content-Type: text/html; charset=utf-8",
      "Content-Transfer-Encoding: 7bit",
      "",
      html,
      `--alt-${runId}--`,
      `--mixed-${runId}`,
      `Content-Type: application/octet-stream; name="figures.bin"`,
      `Content-Disposition: attachment; filename="figures.bin"`,
      "Content-Transfer-Encoding: base64",
      "",
      attachment,
      `--mixed-${runId}--`,
      "",
      ""
    ].join("\r\n")
  }
  // Grow the filler until the whole message, headers included, is about MESSAGE_BYTES.
  const headerBytes = headersFor("someone-0-000000000000@agents.localhost", 100_000).length
  let filler = 0
  while (body(filler + 1).length + headerBytes <= MESSAGE_BYTES) filler++
  const result = body(filler)
  if (/\r\n\./.test(result)) throw new Error("the message template has a line starting with '.', which would need dot-stuffing")
  return result
})()

/** The sending domain, its DKIM selector and key: published by the bench's DNS server. */
const SENDER_DOMAIN = "bench.localhost"
const DKIM_SELECTOR = "bench"
const dkimKey = generateKeyPairSync("rsa", { modulusLength: 2048 })

/** The DKIM-Signature every message carries (see the header comment), made once by nodemailer's signer. */
const dkimSignature = await (async () => {
  const transport = nodemailer.createTransport({
    streamTransport: true,
    buffer: true,
    dkim: {
      domainName: SENDER_DOMAIN,
      keySelector: DKIM_SELECTOR,
      privateKey: dkimKey.privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
      headerFieldNames: "from:mime-version:content-type"
    }
  })
  const sample = Buffer.from(`${headersFor(`sample@${DOMAIN}`, 0)}${template}`, "latin1")
  const info = await transport.sendMail({ envelope: { from: `sender@${SENDER_DOMAIN}`, to: [`sample@${DOMAIN}`] }, raw: sample })
  const signed = (info.message as Buffer).toString("latin1")
  const header = /^DKIM-Signature:.*?\r\n(?![ \t])/s.exec(signed)?.[0]
  if (header === undefined) throw new Error("nodemailer did not sign the sample message")
  return header
})()

/** What the bench's DNS server answers for the sending domain: SPF for loopback, the DKIM key, DMARC p=none. */
const publishSender = (names: DnsServer) => {
  const publicKey = dkimKey.publicKey.export({ type: "spki", format: "der" }).toString("base64")
  names.set(SENDER_DOMAIN, { TXT: [["v=spf1 ip4:127.0.0.1 -all"]] })
  // A TXT character-string holds at most 255 bytes: the key is published in pieces.
  names.set(`${DKIM_SELECTOR}._domainkey.${SENDER_DOMAIN}`, { TXT: [`v=DKIM1; k=rsa; p=${publicKey}`.match(/.{1,255}/g)!] })
  names.set(`_dmarc.${SENDER_DOMAIN}`, { TXT: [["v=DMARC1; p=none"]] })
}

let messageCounter = 0
/** One message for `rcpt`, with its own Message-ID, followed by the end-of-data line. */
const message = (rcpt: string) => {
  const n = ++messageCounter
  return Buffer.from(`${dkimSignature}${headersFor(rcpt, n)}${template}.\r\n`, "latin1")
}
const sampleSize = message("sample@agents.localhost").length - 3
messageCounter = 0

// ---------------------------------------------------------------------------------------------
// Load

interface Recorder {
  /** 250s for DATA inside the measured period. */
  ok: number
  /** Errors inside the measured period and outside it (all are printed). */
  readonly errors: Map<string, number>
}

interface Measurement {
  readonly sender: "a" | "b"
  readonly msgs: number
  readonly seconds: number
  readonly rate: number
  readonly p50: number
  readonly p99: number
  readonly errors: ReadonlyMap<string, number>
  readonly errorCount: number
  /** Every 250 for DATA in the run, warm-up and tail included (what the worker must ingest). */
  readonly accepted: number
  readonly lastAcceptAt: number
  readonly measureStart: number
  readonly measureEnd: number
  readonly cpu: CpuReport
  /** The stages after acceptance, for the Mailroom targets. */
  stages?: StagesReport
}

/** One stage after acceptance (ingest, index) over a run. */
interface StageReport {
  /** Finished per second during the measured period. */
  readonly rate: number
  /** Not yet finished by this stage when the measured period ended (ingest: accepted, index: ingested). */
  readonly lagAtEnd: number
  /** When the stage had finished everything, after the last 250; undefined: not within its limit. */
  readonly drainedAfterMs: number | undefined
  /** Left unfinished when the bench stopped waiting (0 when drained). */
  readonly left: number
}

interface StagesReport {
  readonly ingest: StageReport
  /** Undefined when the target does not index. */
  readonly index: StageReport | undefined
}

const percentile = (sorted: Float64Array, q: number) =>
  sorted.length === 0 ? Number.NaN : sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!

interface RunContext {
  readonly port: number
  /** Recipient of the n-th message. */
  readonly rcpt: (n: number) => string
  readonly stopped: () => boolean
  readonly record: (latencyMs: number | undefined, error: string | undefined) => void
}

const describe = (error: unknown) =>
  error instanceof Unexpected ? error.message : `connection: ${error instanceof Error ? error.message : String(error)}`

/** MAIL, RCPT and DATA in one write, then the body: one message on an open, greeted session. */
const sendOne = async (session: SmtpSession, rcpt: string) => {
  const body = message(rcpt)
  session.write(`MAIL FROM:<sender@bench.localhost> SIZE=${body.length - 3}\r\nRCPT TO:<${rcpt}>\r\nDATA\r\n`)
  const mail = await session.next()
  const to = await session.next()
  const data = await session.next()
  if (data.code !== 354) {
    // Report the first refusal in the group; the transaction is reset for the next one.
    session.write("RSET\r\n")
    await session.next()
    expectCode("MAIL", mail, 250)
    expectCode("RCPT", to, 250)
    expectCode("DATA", data, 354)
  }
  session.write(body)
  expectCode("end of data", await session.next(), 250)
}

const greet = async (session: SmtpSession) => {
  expectCode("greeting", await session.next(), 220)
  session.write("EHLO bench.localhost\r\n")
  expectCode("EHLO", await session.next(), 250)
}

/** Sender (a): one connection sending messages back to back until stopped; reconnects after a failure. */
const reusedConnection = async (ctx: RunContext, index: number) => {
  let n = index
  while (!ctx.stopped()) {
    let session: SmtpSession | undefined
    try {
      session = await SmtpSession.open(ctx.port)
      await greet(session)
      while (!ctx.stopped()) {
        const started = performance.now()
        try {
          await sendOne(session, ctx.rcpt(n))
          ctx.record(performance.now() - started, undefined)
        } catch (error) {
          if (!(error instanceof Unexpected)) throw error
          ctx.record(undefined, describe(error))
        }
        n += REUSED_CONNECTIONS
      }
      session.write("QUIT\r\n")
      await session.next().catch(() => undefined)
    } catch (error) {
      ctx.record(undefined, describe(error))
      await sleep(50)
    } finally {
      session?.destroy()
    }
  }
}

/** Sender (b): one slot of the pool, each pass a new connection with one message. */
const singleMessageSlot = async (ctx: RunContext, index: number) => {
  let n = index
  while (!ctx.stopped()) {
    const started = performance.now()
    let session: SmtpSession | undefined
    try {
      session = await SmtpSession.open(ctx.port)
      await greet(session)
      await sendOne(session, ctx.rcpt(n))
      ctx.record(performance.now() - started, undefined)
      session.write("QUIT\r\n")
      expectCode("QUIT", await session.next(), 221)
      await session.closed
    } catch (error) {
      ctx.record(undefined, describe(error))
      if (!(error instanceof Unexpected)) await sleep(50)
    } finally {
      session?.destroy()
    }
    n += SINGLE_CONNECTIONS
  }
}

// ---------------------------------------------------------------------------------------------
// CPU accounting from /proc: seconds of CPU each process used over the measured period.

interface CpuSource {
  readonly label: string
  /** The process ids to sum, read at the start and the end of the period. */
  readonly pids: () => Promise<ReadonlyArray<number>>
}

type CpuReport = ReadonlyArray<{ readonly label: string; readonly percent: number }>

const processTicks = (pid: number) => {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    return Number(fields[11]) + Number(fields[12])
  } catch {
    return undefined
  }
}

const machineTicks = () => {
  try {
    // user nice system idle iowait irq softirq steal (guest time is already inside user)
    const cpu = fs.readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1, 9).map(Number)
    const idle = (cpu[3] ?? 0) + (cpu[4] ?? 0)
    return { busy: cpu.reduce((a, b) => a + b, 0) - idle }
  } catch {
    return undefined
  }
}

const processesNamed = (name: string) => {
  const pids: Array<number> = []
  for (const entry of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    try {
      if (fs.readFileSync(`/proc/${entry}/comm`, "utf8").trim() === name) pids.push(Number(entry))
    } catch {
      // gone already
    }
  }
  return pids
}

/** Start counting; the returned function ends the period and reports each source in % of one core. */
const startCpu = async (sources: ReadonlyArray<CpuSource>) => {
  const started = performance.now()
  const machineBefore = machineTicks()
  const clientBefore = process.cpuUsage()
  const before = await Promise.all(sources.map(async (source) => {
    const ticks = new Map<number, number>()
    for (const pid of await source.pids()) ticks.set(pid, processTicks(pid) ?? 0)
    return ticks
  }))
  return async (): Promise<CpuReport> => {
    const elapsed = (performance.now() - started) / 1000
    const client = process.cpuUsage(clientBefore)
    const machineAfter = machineTicks()
    const report: Array<{ label: string; percent: number }> = []
    for (const [i, source] of sources.entries()) {
      const pids = new Set([...before[i]!.keys(), ...(await source.pids())])
      let used = 0
      for (const pid of pids) {
        const after = processTicks(pid)
        if (after !== undefined) used += after - (before[i]!.get(pid) ?? 0)
      }
      report.push({ label: source.label, percent: (100 * used) / CLK_TCK / elapsed })
    }
    report.push({ label: "bench client", percent: (client.user + client.system) / 1e4 / elapsed })
    if (machineBefore && machineAfter) {
      report.push({ label: `machine (${os.cpus().length} cores)`, percent: (100 * (machineAfter.busy - machineBefore.busy)) / CLK_TCK / elapsed })
    }
    return report
  }
}

// ---------------------------------------------------------------------------------------------
// One sender against one target

interface Target {
  readonly label: string
  readonly port: number
  readonly rcpt: (n: number) => string
  readonly cpu: ReadonlyArray<CpuSource>
  /** For Mailroom with its worker: emails stored so far, and (when it indexes) emails indexed so far. */
  readonly stages?: {
    readonly counts: () => Promise<{ readonly ingested: number; readonly indexed: number }>
    readonly indexing: boolean
  }
}

const senderLabels = { a: `(a) ${REUSED_CONNECTIONS} reused connections`, b: `(b) ${SINGLE_CONNECTIONS} x 1 message/connection` }

const run = async (target: Target, sender: "a" | "b", acceptedBefore: number): Promise<Measurement> => {
  const label = `${target.label} ${senderLabels[sender]}`
  process.stdout.write(`${label}: warm-up ${WARMUP_SECONDS} s, measuring ${MEASURE_SECONDS} s ... `)
  let measuring = false
  let stop = false
  let accepted = 0
  let lastAcceptAt = 0
  let latencies = new Float64Array(1 << 16)
  const recorder: Recorder = { ok: 0, errors: new Map() }
  let errorCount = 0
  const ctx: RunContext = {
    port: target.port,
    rcpt: target.rcpt,
    stopped: () => stop || interrupted,
    record: (latency, error) => {
      if (error !== undefined) {
        const key = `${measuring ? "" : "(outside the measured period) "}${error}`
        recorder.errors.set(key, (recorder.errors.get(key) ?? 0) + 1)
        errorCount++
        return
      }
      accepted++
      lastAcceptAt = performance.now()
      if (!measuring) return
      if (recorder.ok === latencies.length) {
        const grown = new Float64Array(latencies.length * 2)
        grown.set(latencies)
        latencies = grown
      }
      latencies[recorder.ok++] = latency!
    }
  }
  const workers = sender === "a"
    ? Array.from({ length: REUSED_CONNECTIONS }, (_, i) => reusedConnection(ctx, i))
    : Array.from({ length: SINGLE_CONNECTIONS }, (_, i) => singleMessageSlot(ctx, i))

  await sleep(WARMUP_SECONDS * 1000)
  const countsAtStart = target.stages ? await target.stages.counts() : undefined
  const endCpu = await startCpu(target.cpu)
  measuring = true
  const measureStart = performance.now()
  await sleep(MEASURE_SECONDS * 1000)
  measuring = false
  const measureEnd = performance.now()
  const cpu = await endCpu()
  stop = true
  const acceptedAtEnd = accepted
  const countsAtEnd = target.stages ? await target.stages.counts() : undefined
  await Promise.all(workers)

  const sorted = latencies.slice(0, recorder.ok).sort()
  const elapsed = (measureEnd - measureStart) / 1000
  const result: Measurement = {
    sender,
    msgs: recorder.ok,
    seconds: elapsed,
    rate: recorder.ok / elapsed,
    p50: percentile(sorted, 0.5),
    p99: percentile(sorted, 0.99),
    errors: recorder.errors,
    errorCount,
    accepted,
    lastAcceptAt,
    measureStart,
    measureEnd,
    cpu
  }
  console.log(
    `${fmtInt(result.rate)} msgs/s, p50 ${fmtMs(result.p50)} ms, p99 ${fmtMs(result.p99)} ms` +
      (errorCount > 0 ? `, ${errorCount} errors` : "")
  )

  if (target.stages && countsAtStart && countsAtEnd) {
    // Every stage must catch up with everything accepted so far (earlier senders' mail included).
    const expected = acceptedBefore + accepted
    const ingestLag = acceptedBefore + acceptedAtEnd - countsAtEnd.ingested
    const indexLag = countsAtEnd.ingested - countsAtEnd.indexed
    process.stdout.write(
      `  stages when the measured period ended: ingest ${fmtInt(ingestLag)} behind` +
        (target.stages.indexing ? `, index ${fmtInt(indexLag)} behind` : " (indexing off)") + "; draining ... "
    )
    const ingestDeadline = performance.now() + DRAIN_SECONDS * 1000
    const indexDeadline = performance.now() + INDEX_DRAIN_SECONDS * 1000
    let ingestDrainedAt: number | undefined
    let indexDrainedAt: number | undefined
    let counts = await target.stages.counts()
    while (!interrupted) {
      const now = performance.now()
      if (ingestDrainedAt === undefined && counts.ingested >= expected) ingestDrainedAt = now
      if (indexDrainedAt === undefined && target.stages.indexing && counts.indexed >= expected) indexDrainedAt = now
      if (counts.ingested > expected) throw new BenchError(`${label}: ${counts.ingested} emails stored but only ${expected} messages were accepted`)
      if (ingestDrainedAt === undefined && now > ingestDeadline) {
        throw new BenchError(`${label}: the worker had ingested ${counts.ingested} of ${expected} accepted messages ${DRAIN_SECONDS} s after the last 250`)
      }
      // Indexing is waited for up to its own limit; what is left then is reported, not an error.
      const indexDone = !target.stages.indexing || indexDrainedAt !== undefined || now > indexDeadline
      if (ingestDrainedAt !== undefined && indexDone) break
      await sleep(100)
      counts = await target.stages.counts()
    }
    const stage = (lagAtEnd: number, atStart: number, atEnd: number, drainedAt: number | undefined, left: number): StageReport => ({
      rate: (atEnd - atStart) / elapsed,
      lagAtEnd,
      drainedAfterMs: drainedAt === undefined ? undefined : Math.max(0, drainedAt - lastAcceptAt),
      left
    })
    result.stages = {
      ingest: stage(ingestLag, countsAtStart.ingested, countsAtEnd.ingested, ingestDrainedAt, expected - counts.ingested),
      index: target.stages.indexing
        ? stage(indexLag, countsAtStart.indexed, countsAtEnd.indexed, indexDrainedAt, expected - counts.indexed)
        : undefined
    }
    console.log(
      `ingest drained ${drainedText(result.stages.ingest)}` +
        (result.stages.index ? `, index drained ${drainedText(result.stages.index)}` : "")
    )
  }
  return result
}

// ---------------------------------------------------------------------------------------------
// Targets

/** True once the SMTP listener on `port` sends its 220 greeting. */
const smtpGreets = async (port: number) => {
  let session: SmtpSession | undefined
  try {
    session = await SmtpSession.open(port)
    const reply = await Promise.race([session.next(), sleep(3_000).then(() => ({ code: 0, text: "" }))])
    if (reply.code !== 220) return false
    session.write("QUIT\r\n")
    await session.next().catch(() => undefined)
    return true
  } catch {
    return false
  } finally {
    session?.destroy()
  }
}

const postgresBackground = (): CpuSource => ({
  label: "postgres (all other processes)",
  pids: async () => processesNamed("postgres")
})

const natsServer: CpuSource = { label: "nats-server", pids: async () => processesNamed("nats-server") }

const benchBare = async (): Promise<Array<Measurement>> => {
  const label = "bare"
  const port = await freePort()
  const server = spawnChild("bare smtp-server", "bench/servers/bare-smtp.ts", { SMTP_PORT: String(port) })
  try {
    await waitReady(server, "SMTP", 30_000, () => smtpGreets(port))
    const target: Target = {
      label,
      port,
      rcpt: (n) => `bench-${n % 4}@${DOMAIN}`,
      cpu: [{ label: "smtp-server process", pids: async () => [server.child.pid!] }]
    }
    const results: Array<Measurement> = []
    for (const sender of ["a", "b"] as const) {
      if (SENDERS.has(sender) && !interrupted) results.push(await run(target, sender, 0))
    }
    return results
  } finally {
    await server.stop()
  }
}

const createDatabase = async () => {
  const name = `bench_${Date.now().toString(36)}_${randomBytes(4).toString("hex")}`
  const admin = new pg.Client({ connectionString: ADMIN_DATABASE_URL })
  await admin.connect().catch((error: unknown) => {
    throw new BenchError(`the durable target needs PostgreSQL at ${ADMIN_DATABASE_URL}: ${String(error)}`)
  })
  try {
    await admin.query(`CREATE DATABASE ${name}`)
  } finally {
    await admin.end()
  }
  onCleanup(async () => {
    const client = new pg.Client({ connectionString: ADMIN_DATABASE_URL })
    await client.connect()
    try {
      await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
    } finally {
      await client.end()
    }
  })
  const url = new URL(ADMIN_DATABASE_URL)
  url.pathname = `/${name}`
  return { name, url: url.toString() }
}

/** Remove the JetStream streams made under `prefix` (as test/support/server.ts does). */
const deleteStreams = async (prefix: string) => {
  const { connect } = await import("@nats-io/transport-node")
  const { jetstreamManager } = await import("@nats-io/jetstream")
  const nc = await connect({ servers: NATS_URL })
  try {
    const jsm = await jetstreamManager(nc)
    const mine = prefix.replace(/[^A-Za-z0-9_-]/g, "_")
    for await (const name of jsm.streams.names()) {
      if (name.startsWith(mine)) await jsm.streams.delete(name)
    }
  } finally {
    await nc.close()
  }
}

const checkNats = async () => {
  const { hostname, port } = new URL(NATS_URL)
  const reachable = await new Promise<boolean>((resolve) => {
    const socket = net.connect({ host: hostname, port: Number(port || 4222) })
    socket.once("connect", () => {
      socket.destroy()
      resolve(true)
    })
    socket.once("error", () => resolve(false))
  })
  if (!reachable) throw new BenchError(`the durable target needs NATS with JetStream at ${NATS_URL}`)
}

const expectStatus = async (response: Response, status: number, what: string) => {
  const text = await response.text()
  if (response.status !== status) throw new BenchError(`${what}: expected ${status}, got ${response.status}: ${text.slice(0, 500)}`)
  return JSON.parse(text) as Record<string, unknown>
}

const pick = (body: Record<string, unknown>, route: ReadonlyArray<string>, what: string): string => {
  let value: unknown = body
  for (const key of route) value = (value as Record<string, unknown> | undefined)?.[key]
  if (typeof value !== "string") throw new BenchError(`${what}: the answer has no ${route.join(".")}: ${JSON.stringify(body).slice(0, 300)}`)
  return value
}

type TargetName = "bare" | "durable" | "durable-noindex" | "embedded" | SmtpNodeTarget
type SmtpNodeTarget = "smtp" | "smtp-enforcing" | "smtp-unverified"

/** The all-process Mailroom targets: where they keep their state, and whether they index. */
const mailroomTargets = {
  // Every role, as `npm start` runs them, on PostgreSQL and NATS.
  durable: { services: true, roles: "api,smtp,worker,indexer,mta" },
  // The same without the indexer: what accepting and ingesting reach when nothing is embedded.
  "durable-noindex": { services: true, roles: "api,smtp,worker,mta" },
  // `npm start` as it comes: PGlite, the in-process bus, every role.
  embedded: { services: false, roles: "api,smtp,worker,indexer,mta" }
} as const

/** `GET /readyz`'s stages: this one process runs every stage, so its counts are the whole story. */
const readyStages = async (baseUrl: string) => {
  const body = await expectStatus(await fetch(`${baseUrl}/readyz`), 200, "readyz")
  const stages = (body.data as { stages?: Record<"ingest" | "index", { handled: number }> } | undefined)?.stages
  if (!stages) throw new BenchError(`/readyz has no stages: ${JSON.stringify(body).slice(0, 300)}`)
  return { ingested: stages.ingest.handled, indexed: stages.index.handled }
}

/**
 * Mailroom in one process with every role it is given (`mailroomTargets`); `verify` says whether
 * SPF, DKIM, DMARC and ARC are checked (by ingest, asking the bench's DNS server at `dnsServers`).
 */
const benchMailroom = async (label: keyof typeof mailroomTargets, verify: boolean, dnsServers: string): Promise<Array<Measurement>> => {
  const setup = mailroomTargets[label]
  const indexing = setup.roles.includes("indexer")
  const dataDir = fs.mkdtempSync(path.join(scratch, "data-"))
  const [port, smtpPort] = [await freePort(), await freePort()]
  let database: { readonly name: string; readonly url: string } | undefined
  const services: Record<string, string> = {}
  if (setup.services) {
    await checkNats()
    database = await createDatabase()
    const prefix = `bench-${runId}-${label}`
    onCleanup(() => deleteStreams(prefix))
    Object.assign(services, { DATABASE_URL: database.url, NATS_URL, NATS_PREFIX: prefix, JWT_SECRET: randomBytes(32).toString("hex") })
    if (!indexing) {
      // Without the indexer the process runs only some roles, so its API must find a vector index
      // other nodes could share (this PostgreSQL may lack pgvector): the tests' stand-in for Qdrant.
      // Nothing is indexed, so it serves nothing but the API's start-up check.
      const qdrant = await startFakeQdrant()
      onCleanup(() => qdrant.close())
      services.QDRANT_URL = qdrant.url
    }
  }
  const server = spawnChild(`mailroom (${label})`, "src/main.ts", {
    ROLES: setup.roles,
    VERIFY_INBOUND: String(verify),
    DNS_SERVERS: dnsServers,
    PORT: String(port),
    HOST: "127.0.0.1",
    SMTP_PORT: String(smtpPort),
    SMTP_HOST: "127.0.0.1",
    // Every sender of the bench is one client address (loopback), with up to 100 connections.
    SMTP_MAX_CONNECTIONS_PER_IP: "0",
    DATA_DIR: dataDir,
    ...services,
    LOG_LEVEL: "warn"
  })
  const db = database ? new pg.Client({ connectionString: database.url }) : undefined
  // Dropping the database (WITH FORCE) ends this connection if it is still open: not a crash.
  db?.on("error", () => {})
  let dbOpen = false
  onCleanup(async () => {
    if (dbOpen) await db?.end()
  })
  try {
    const baseUrl = `http://127.0.0.1:${port}`
    await waitReady(server, "/healthz", 180_000, () => fetch(`${baseUrl}/healthz`).then((r) => r.status === 200, () => false))
    await waitReady(server, "SMTP", 30_000, () => smtpGreets(smtpPort))
    if (db) {
      await db.connect()
      dbOpen = true
    }

    const post = (route: string, body: unknown, headers: Record<string, string> = {}) =>
      fetch(`${baseUrl}${route}`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) })

    // Enough enterprise accounts that no daily limit is reached even at SIZED_FOR_RATE msgs/s.
    const senders = ["a", "b"].filter((s) => SENDERS.has(s)).length
    const accounts = Math.max(2, Math.ceil((SIZED_FOR_RATE * (WARMUP_SECONDS + MEASURE_SECONDS + 5) * senders) / EMAILS_PER_ACCOUNT))
    const mailboxes: Array<{ readonly address: string; readonly id: string; readonly key: string }> = []
    for (let i = 0; i < accounts; i++) {
      const email = `bench-${i}-${randomBytes(4).toString("hex")}@example.com`
      const password = randomBytes(12).toString("hex")
      await expectStatus(await post("/api/auth/register", { email, password, name: `Bench ${i}` }), 201, "register")
      const login = await expectStatus(await post("/api/auth/login", { email, password }), 200, "login")
      const token = pick(login, ["data", "accessToken"], "login")
      const key = pick(
        await expectStatus(await post("/v1/api-keys", { name: "bench" }, { authorization: `Bearer ${token}` }), 201, "create API key"),
        ["data", "apiKey"],
        "create API key"
      )
      const mailbox = await expectStatus(
        await post("/v1/api/mailboxes", { local_part: `bench-${i}-${runId}`, domain: DOMAIN }, { "x-api-key": key }),
        201,
        "create mailbox"
      )
      mailboxes.push({ address: pick(mailbox, ["mailbox", "email_address"], "create mailbox"), id: pick(mailbox, ["mailbox", "mailbox_id"], "create mailbox"), key })
      // The free plan takes 100 emails a day; the enterprise plan 100,000. Upgraded as a customer
      // would on local billing: checkout, then the confirm page's POST.
      const back = { successUrl: `${baseUrl}/docs`, cancelUrl: `${baseUrl}/docs` }
      const checkout = await expectStatus(await post("/v1/billing/checkout", { plan: "enterprise", ...back }, { "x-api-key": key }), 200, "checkout")
      const paid = await fetch(`${baseUrl}${new URL(pick(checkout, ["data", "url"], "checkout")).pathname}`, { method: "POST", redirect: "manual" })
      if (paid.status !== 303) throw new BenchError(`confirming the checkout: expected 303, got ${paid.status}: ${(await paid.text()).slice(0, 300)}`)
    }
    console.log(`  ${accounts} enterprise accounts, one mailbox each (${mailboxes.map((m) => m.address).join(", ")}); messages rotate over them`)

    // One message by hand: accepted, then ingested.
    const probe = await SmtpSession.open(smtpPort)
    try {
      await greet(probe)
      await sendOne(probe, mailboxes[0]!.address)
    } catch (error) {
      throw new BenchError(`a first message to ${mailboxes[0]!.address} was not accepted: ${describe(error)}\n${logTail(server.logFile)}`)
    } finally {
      probe.destroy()
    }
    // Exact counts from the database where the bench can read it; the embedded database belongs to
    // the process, whose /readyz counts what its stages finished (it runs all of them).
    const counts = db
      ? async () => {
        const row = (await db.query<{ ingested: string; indexed: string }>(
          "SELECT (SELECT count(*) FROM emails) AS ingested, (SELECT count(*) FROM search_documents WHERE model IS NOT NULL) AS indexed"
        )).rows[0]!
        return { ingested: Number(row.ingested), indexed: Number(row.indexed) }
      }
      : () => readyStages(baseUrl)
    const probeDeadline = Date.now() + 60_000
    while ((await counts()).ingested < 1) {
      if (Date.now() > probeDeadline) throw new BenchError(`the first message was accepted but not ingested within 60 s\n${logTail(server.logFile)}`)
      await sleep(50)
    }
    // The checks must really run and pass (or really not run): otherwise the ratio means nothing.
    const listed = await expectStatus(
      await fetch(`${baseUrl}/v1/api/mailboxes/${mailboxes[0]!.id}/emails`, { headers: { "x-api-key": mailboxes[0]!.key } }),
      200,
      "list the first email"
    )
    const verdict = (listed.data as Array<{ authentication: Record<string, any> | null }>)[0]?.authentication ?? null
    const summary = verdict === null
      ? "none (not checked)"
      : `spf=${verdict.spf.result} dkim=${verdict.dkim.map((d: { result: string }) => d.result).join(",") || "none"} dmarc=${verdict.dmarc.result}`
    console.log(`  the first message's verdicts: ${summary}`)
    if (verify ? summary !== "spf=pass dkim=pass dmarc=pass" : verdict !== null) {
      throw new BenchError(`the ${label} target expected ${verify ? "every check to pass" : "no checks"}, the first message has ${summary}`)
    }

    const cpu: Array<CpuSource> = [{ label: `mailroom process (${setup.roles})`, pids: async () => [server.child.pid!] }]
    if (db && database) {
      const pgBackends: CpuSource = {
        label: "postgres backends of the bench db",
        pids: async () =>
          (await db.query<{ pid: number }>("SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", [database.name]))
            .rows.map((r) => r.pid)
      }
      const others = postgresBackground()
      cpu.push(
        pgBackends,
        // All postgres processes less the bench database's backends: WAL writer, checkpointer, other users.
        {
          label: others.label,
          pids: async () => {
            const mine = new Set(await pgBackends.pids())
            return (await others.pids()).filter((pid) => !mine.has(pid))
          }
        },
        natsServer
      )
    }
    const target: Target = {
      label,
      port: smtpPort,
      rcpt: (n) => mailboxes[n % mailboxes.length]!.address,
      cpu,
      stages: { counts, indexing }
    }
    const results: Array<Measurement> = []
    let acceptedBefore = 1
    for (const sender of ["a", "b"] as const) {
      if (!SENDERS.has(sender) || interrupted) continue
      const result = await run(target, sender, acceptedBefore).catch((error: unknown) => {
        throw error instanceof BenchError ? new BenchError(`${error.message}\nMailroom's last output:\n${logTail(server.logFile)}`) : error
      })
      acceptedBefore += result.accepted
      results.push(result)
    }
    const output = logTail(server.logFile, 20)
    if (output !== "(no output)") console.log(`  Mailroom's last output (LOG_LEVEL=warn):\n${output.replace(/^/gm, "    ")}`)
    return results
  } finally {
    if (dbOpen) {
      dbOpen = false
      await db?.end().catch(() => undefined)
    }
    await server.stop()
  }
}

/**
 * The SMTP node alone (ROLES=smtp), checking after or before the 250, or not at all: see the header
 * comment. Its accounts are made in SQL, as the API would make them, since this process serves no HTTP.
 */
const benchSmtpNode = async (label: SmtpNodeTarget, names: DnsServer): Promise<Array<Measurement>> => {
  await checkNats()
  const verify = label !== "smtp-unverified"
  const database = await createDatabase()
  const prefix = `bench-${runId}-${label}`
  onCleanup(() => deleteStreams(prefix))
  const smtpPort = await freePort()
  const server = spawnChild(`mailroom (${label})`, "src/main.ts", {
    ROLES: "smtp",
    VERIFY_INBOUND: String(verify),
    DMARC_ENFORCE: String(label === "smtp-enforcing"),
    DNS_SERVERS: names.address,
    SMTP_PORT: String(smtpPort),
    SMTP_HOST: "127.0.0.1",
    SMTP_MAX_CONNECTIONS_PER_IP: "0",
    DATA_DIR: fs.mkdtempSync(path.join(scratch, "data-")),
    DATABASE_URL: database.url,
    NATS_URL,
    NATS_PREFIX: prefix,
    JWT_SECRET: randomBytes(32).toString("hex"),
    LOG_LEVEL: "warn"
  })
  const db = new pg.Client({ connectionString: database.url })
  db.on("error", () => {})
  try {
    // The node migrates the database before it listens.
    await waitReady(server, "SMTP", 120_000, () => smtpGreets(smtpPort))
    await db.connect()
    const senders = ["a", "b"].filter((s) => SENDERS.has(s)).length
    const accounts = Math.max(2, Math.ceil((SIZED_FOR_RATE * (WARMUP_SECONDS + MEASURE_SECONDS + 5) * senders) / EMAILS_PER_ACCOUNT))
    const mailboxes: Array<string> = []
    for (let i = 0; i < accounts; i++) {
      const userId = `usr_${label.replace(/-/g, "")}${i}${runId}`
      const local = `bench-${i}-${runId}`
      await db.query(`INSERT INTO users (id, email, email_normalized, name, password_hash) VALUES ($1, $2, $2, 'Bench', 'none')`, [userId, `${userId}@example.com`])
      await db.query(
        `INSERT INTO subscriptions (user_id, plan, status, current_period_start, current_period_end)
         VALUES ($1, 'enterprise', 'active', now(), now() + interval '1 month')`,
        [userId]
      )
      await db.query(
        `INSERT INTO mailboxes (id, user_id, local_part, domain, address_normalized) VALUES ($1, $2, $3, $4, $5)`,
        [`mbx_${userId}`, userId, local, DOMAIN, `${local}@${DOMAIN}`]
      )
      mailboxes.push(`${local}@${DOMAIN}`)
    }
    const asked = names.questions().length
    const probe = await SmtpSession.open(smtpPort)
    try {
      await greet(probe)
      await sendOne(probe, mailboxes[0]!)
    } catch (error) {
      throw new BenchError(`a first message to ${mailboxes[0]} was not accepted: ${describe(error)}\n${logTail(server.logFile)}`)
    } finally {
      probe.destroy()
    }
    // The checks must really run on this node (the DKIM key was asked for), or really not (nothing
    // was asked: unverified, or left to an ingest this bench does not run).
    const questions = names.questions().slice(asked)
    const keyAsked = questions.some((q) => q.startsWith(`TXT ${DKIM_SELECTOR}._domainkey.${SENDER_DOMAIN}`))
    console.log(`  ${label}: the first message made ${questions.length} DNS question(s)${keyAsked ? ", the DKIM key among them" : ""}`)
    const checksHere = label === "smtp-enforcing"
    if (checksHere !== keyAsked) throw new BenchError(`the ${label} target ${checksHere ? "did not check" : "checked"} the first message`)
    const target: Target = {
      label,
      port: smtpPort,
      rcpt: (n) => mailboxes[n % mailboxes.length]!,
      cpu: [{ label: "mailroom process (smtp)", pids: async () => [server.child.pid!] }, natsServer]
    }
    const results: Array<Measurement> = []
    for (const sender of ["a", "b"] as const) {
      if (SENDERS.has(sender) && !interrupted) results.push(await run(target, sender, 0))
    }
    return results
  } finally {
    await db.end().catch(() => undefined)
    await server.stop()
  }
}

// ---------------------------------------------------------------------------------------------
// Report

/** When a stage had finished everything, after the last 250, or what it had left. */
const drainedText = (report: StageReport) =>
  report.drainedAfterMs === undefined ? `not (${fmtInt(report.left)} left)` : `${fmtMs(report.drainedAfterMs / 1000)} s`

const fmtInt = (n: number) => (Number.isFinite(n) ? Math.round(n).toLocaleString("en-US") : "-")
const fmtMs = (n: number) => (Number.isNaN(n) ? "-" : n.toFixed(2))

const main = async () => {
  console.log(
    `bench:smtp — node ${process.version}, ${os.cpus().length} cores, ${sampleSize}-byte MIME messages, ` +
      `${WARMUP_SECONDS} s warm-up + ${MEASURE_SECONDS} s measured per target and sender`
  )
  const results: Record<TargetName, Array<Measurement>> = {
    bare: [],
    durable: [],
    "durable-noindex": [],
    embedded: [],
    smtp: [],
    "smtp-enforcing": [],
    "smtp-unverified": []
  }
  let failure: unknown
  try {
    if (TARGETS.has("bare")) results.bare = await benchBare()
    const names = await startDnsServer()
    onCleanup(() => names.close())
    publishSender(names)
    for (const label of ["durable", "durable-noindex", "embedded"] as const) {
      if (TARGETS.has(label) && !interrupted) results[label] = await benchMailroom(label, true, names.address)
    }
    for (const label of ["smtp", "smtp-enforcing", "smtp-unverified"] as const) {
      if (TARGETS.has(label) && !interrupted) results[label] = await benchSmtpNode(label, names)
    }
  } catch (error) {
    failure = error
    console.log("")
  } finally {
    await cleanUp()
  }

  const find = (target: TargetName, sender: "a" | "b") => results[target].find((m) => m.sender === sender)
  const targets = ["bare", "durable", "durable-noindex", "embedded", "smtp", "smtp-enforcing", "smtp-unverified"] as const
  console.log("")
  console.log(
    `${"target".padEnd(16)}${"sender".padEnd(32)}${"accepted/s".padStart(11)}${"p50 ms".padStart(9)}${"p99 ms".padStart(9)}` +
      `${"errors".padStart(7)}${"ingest/s".padStart(10)}${"lag".padStart(7)}${"drained".padStart(10)}` +
      `${"index/s".padStart(9)}${"lag".padStart(7)}${"drained".padStart(19)}`
  )
  for (const target of targets) {
    for (const sender of ["a", "b"] as const) {
      const m = find(target, sender)
      const head = `${target.padEnd(16)}${senderLabels[sender].padEnd(32)}`
      if (!m) {
        console.log(`${head}${"not measured".padStart(12)}`)
        continue
      }
      const stage = (report: StageReport | undefined, width: number) =>
        report === undefined
          ? `${"off".padStart(9)}${"".padStart(7)}${"".padStart(width)}`
          : `${fmtInt(report.rate).padStart(9)}${fmtInt(report.lagAtEnd).padStart(7)}${drainedText(report).padStart(width)}`
      console.log(
        `${head}${fmtInt(m.rate).padStart(11)}${fmtMs(m.p50).padStart(9)}${fmtMs(m.p99).padStart(9)}${String(m.errorCount).padStart(7)}` +
          (m.stages ? ` ${stage(m.stages.ingest, 10)}${stage(m.stages.index, 19)}` : "")
      )
    }
  }
  console.log(
    "  latency: (a) MAIL written -> final 250; (b) connect -> final 250 (includes smtp-server's 100 ms wait before each greeting)\n" +
      "  accepted/s: 250s in the measured period; ingest/s, index/s: emails stored, indexed in the measured period;\n" +
      "  lag: accepted but not stored (ingest), stored but not indexed (index) when the measured period ended;\n" +
      `  drained: when the stage had finished everything, after the last 250 (index waited for up to ${INDEX_DRAIN_SECONDS} s)`
  )

  const all = targets.flatMap((target) => results[target].map((m) => [target, m] as const))
  if (all.length > 0) {
    console.log("\nCPU over each measured period, % of one core:")
    for (const [target, m] of all) {
      console.log(`  ${target} ${senderLabels[m.sender]}: ${m.cpu.map((c) => `${c.label} ${c.percent.toFixed(0)}%`).join(", ")}`)
    }
  }

  let errors = 0
  for (const [target, m] of all) {
    if (m.errorCount === 0) continue
    errors += m.errorCount
    console.log(`\nerrors, ${target} ${senderLabels[m.sender]}:`)
    for (const [error, n] of [...m.errors].sort((x, y) => y[1] - x[1])) console.log(`  ${String(n).padStart(6)} x ${error}`)
  }

  console.log("")
  const ratioOf = (over: TargetName, under: TargetName, sender: "a" | "b") => {
    const a = find(over, sender)
    const b = find(under, sender)
    return a && b ? a.rate / b.rate : undefined
  }
  const fmtRatio = (r: number | undefined) => (r === undefined ? "-" : r.toFixed(3))
  for (const [over, under, what] of [
    ["durable", "bare", "durable/bare"],
    ["durable-noindex", "bare", "durable without indexing/bare"],
    ["durable", "durable-noindex", "indexing on/off (durable)"],
    ["embedded", "bare", "embedded/bare"]
  ] as const) {
    const ra = ratioOf(over, under, "a")
    const rb = ratioOf(over, under, "b")
    if (ra !== undefined || rb !== undefined) console.log(`ratio ${what} (accepted/s): (a) ${fmtRatio(ra)}   (b) ${fmtRatio(rb)}`)
  }
  const ra = ratioOf("durable", "bare", "a")
  const rb = ratioOf("durable", "bare", "b")
  // What the SPF/DKIM/DMARC/ARC checks cost: the same path with and without them, in this run.
  const mailroomCpu = (m: Measurement) => m.cpu.find((c) => c.label.startsWith("mailroom process"))?.percent
  for (const [checking, what] of [["smtp-enforcing", "checks' cost"], ["smtp", "checks left to ingest"]] as const) {
    for (const sender of ["a", "b"] as const) {
      const checked = find(checking, sender)
      const unchecked = find("smtp-unverified", sender)
      if (!checked || !unchecked) continue
      // CPU time of the Mailroom process per accepted message, in microseconds.
      const perMessage = (m: Measurement) => ((mailroomCpu(m) ?? Number.NaN) / 100 / m.rate) * 1e6
      console.log(
        `${what} ${senderLabels[sender]}: ${checking}/smtp-unverified msgs/s ${(checked.rate / unchecked.rate).toFixed(3)} ` +
          `(${fmtInt(checked.rate)} vs ${fmtInt(unchecked.rate)}); Mailroom CPU per accepted message ` +
          `${fmtInt(perMessage(checked))} µs vs ${fmtInt(perMessage(unchecked))} µs (+${fmtInt(perMessage(checked) - perMessage(unchecked))} µs)`
      )
    }
  }
  let missed = false
  const durableA = find("durable", "a")
  if (durableA) {
    const ok = durableA.rate >= 1_000
    missed ||= !ok
    console.log(`target (a) durable >= 1,000 msgs/s:  ${ok ? "PASS" : "FAIL"} (${fmtInt(durableA.rate)})`)
  }
  if (ra !== undefined) {
    missed ||= ra < 0.5
    console.log(`target (a) durable >= 0.5 x bare:    ${ra >= 0.5 ? "PASS" : "FAIL"} (${ra.toFixed(3)})`)
  }
  if (rb !== undefined) {
    missed ||= rb < 0.9
    console.log(`target (b) durable >= 0.9 x bare:    ${rb >= 0.9 ? "PASS" : "FAIL"} (${rb.toFixed(3)})`)
  }
  // Accepting must not slow down because indexing is busy.
  for (const sender of ["a", "b"] as const) {
    const r = ratioOf("durable", "durable-noindex", sender)
    if (r === undefined) continue
    missed ||= r < 0.8
    console.log(`target (${sender}) indexing on >= 0.8 x off: ${r >= 0.8 ? "PASS" : "FAIL"} (${r.toFixed(3)})`)
  }
  if (ra === undefined && rb === undefined && !durableA) console.log("targets: not judged (both targets are needed)")

  if (failure !== undefined) {
    console.error(`\nbench:smtp FAILED: ${failure instanceof BenchError ? failure.message : String(failure instanceof Error ? failure.stack : failure)}`)
    process.exitCode = 1
  } else if (interrupted) {
    process.exitCode = 130
  } else if (errors > 0) {
    console.error(`\nbench:smtp INVALID: ${errors} replies other than the expected ones (listed above)`)
    process.exitCode = 1
  } else if (missed) {
    process.exitCode = 2
  }
}

// `on`, not `once`: tsx repeats a signal it did not see handled at once, and a signal with no
// listener left would end the process before the database is dropped.
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    if (interrupted) return
    interrupted = true
    console.error(`\n${signal}: stopping the senders and servers, dropping the bench database and streams`)
    void cleanUp().finally(() => process.exit(130))
  })
}

await main()
