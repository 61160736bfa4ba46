/**
 * What an operator reads during a database outage (issue 14, "Logs during outages"): the outage is
 * logged once when it starts and once when it ends, with how long it lasted and how many operations
 * failed meanwhile; no stack trace for it, and webhook backpressure (an endpoint at its in-flight
 * limit) is flow control, never a warning. Mail accepted before the outage is still delivered.
 *
 * PostgreSQL sits behind a TCP proxy the test cuts for ~10 s while mail keeps arriving and webhooks
 * are being delivered. The server runs at LOG_LEVEL=debug, so that the test sees backpressure being
 * met (at debug) as well as what an operator at the usual warn level reads. The private nats-server is
 * stopped (connections lost) and frozen (SIGSTOP: connections open, pulls unanswered).
 * Runs once per CI, in the PostgreSQL mode (the fragile backend uses the machine's PostgreSQL and a
 * private nats-server in either mode, so the embedded run would repeat it).
 */
import nodemailer from "nodemailer"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createFragileBackend, type FragileBackend } from "../support/fragile-backend.ts"
import { fresh, newBox } from "../support/mailboxes.ts"
import { type Receiver, startReceiver } from "../support/receiver.ts"
import { sendMail } from "../support/send-mail.ts"
import { startServer, type Server } from "../support/server.ts"
import { mode } from "../support/services.ts"
import { withKey } from "../support/typed-client.ts"
import { sleep, until } from "../support/wait.ts"

interface Entry {
  readonly level: string
  readonly message: string
  /** The header line and the lines under it (annotations, causes). */
  readonly text: string
}

/** The server's log (the pretty logger: `[12:00:00.000] WARN (#12): message`, then indented lines). */
const entries = (output: string): Array<Entry> => {
  const found: Array<{ level: string; message: string; lines: Array<string> }> = []
  for (const line of output.split("\n")) {
    const header = /^\[\d{2}:\d{2}:\d{2}\.\d{3}\] ([A-Z]+) \(#\d+\): (.*)$/.exec(line)
    if (header) found.push({ level: header[1]!, message: header[2]!, lines: [line] })
    else if (line.trim() !== "") found.at(-1)?.lines.push(line) ?? found.push({ level: "?", message: line, lines: [line] })
  }
  return found.map(({ level, message, lines }) => ({ level, message, text: lines.join("\n") }))
}

/** Mail accepted before the cut: more than one endpoint's 16 deliveries in flight, so some wait. */
const BEFORE = 40
const OUTAGE_MS = 10_000

let backend: FragileBackend
let server: Server
let receiver: Receiver

describe.skipIf(mode !== "postgres")("logs during outages", () => {
  beforeAll(async () => {
    backend = await createFragileBackend()
    receiver = await startReceiver()
    server = await startServer({ ...backend.env, WEBHOOK_ALLOW_PRIVATE: "true", LOG_LEVEL: "debug" })
  })

  afterAll(async () => {
    await server?.stop()
    await receiver?.close()
    await backend?.dispose()
  })

  /** A user's mailbox whose email.received events go to a path of the receiver's own. */
  const boxWithWebhook = async () => {
    const box = await newBox(server.url)
    const mailroom = withKey(server.url, box.user)
    const path = `/${fresh("hook")}`
    const hook = await mailroom.POST("/v1/api/webhooks", {
      body: { url: `${receiver.url}${path}`, events: ["email.received"] }
    })
    expect(hook.response.status).toBe(201)
    return { mailroom, box, path }
  }

  it("says once that PostgreSQL is gone and once that it is back, with counts, and loses no mail", async () => {
    const { mailroom, box, path } = await boxWithWebhook()
    // The first deliveries hang until their 10 s time-out: the endpoint sits at its in-flight limit
    // through the outage, so the events behind them meet backpressure.
    receiver.script(path, [...Array.from({ length: 16 }, () => "hang" as const), 200])

    const since = server.output().length
    const transport = nodemailer.createTransport({
      host: "127.0.0.1",
      port: server.smtpPort,
      secure: false,
      ignoreTLS: true,
      pool: true,
      maxConnections: 5
    })
    const subjects = Array.from({ length: BEFORE }, (_, i) => `Before the outage ${i}`)
    await Promise.all(subjects.map((subject) => transport.sendMail({ from: "sender@example.com", to: box.address, subject, text: subject })))

    // Cut once the endpoint is at its limit of deliveries in flight and an event behind them has met
    // that limit (the SMTP node answers before the checks, so all 40 are accepted at once and how far
    // ingest has got by the 16th delivery varies), while the worker is still delivering.
    await receiver.waitFor(path, 16, 30_000)
    const busy = /EndpointsBusy|at their limit/
    await until("an email.received event held back by the busy endpoint", async () => (busy.test(server.output().slice(since)) ? true : undefined), 30_000, 50)
    await backend.proxy.cut()
    const cutAt = Date.now()
    let refused = 0
    const statuses: Array<number> = []
    try {
      // Load during the outage: senders retrying (each refused with 451) and API clients (503).
      while (Date.now() - cutAt < OUTAGE_MS) {
        const attempt = transport
          .sendMail({ from: "sender@example.com", to: box.address, subject: "During the outage", text: "451 expected" })
          .then(() => undefined, () => void refused++)
        const read = mailroom.GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId: box.mailboxId } } })
          .then((reply) => void statuses.push(reply.response.status))
        await Promise.all([attempt, read, sleep(500)])
      }
    } finally {
      await backend.proxy.restore()
    }
    expect(refused).toBeGreaterThan(0)
    expect(statuses).toContain(503)

    // Every email accepted before the outage reaches the endpoint afterwards.
    await until("every email accepted before the outage delivered", async () => {
      const delivered = new Set(receiver.received(path).map((r) => JSON.parse(r.body).data.subject as string))
      return subjects.every((subject) => delivered.has(subject)) ? true : undefined
    }, 60_000, 250)
    transport.close()
    // The end is logged once the database answers again; give it a moment, and let the assertions say what was seen.
    await until("the end of the outage logged", async () => (/PostgreSQL reachable again/.test(server.output()) ? true : undefined), 10_000)
      .catch(() => undefined)

    const logged = server.output().slice(since)
    if (process.env.OUTAGE_LOG_DUMP) (await import("node:fs")).writeFileSync(process.env.OUTAGE_LOG_DUMP, logged)
    const all = entries(logged)
    const warnings = all.filter((entry) => entry.level !== "DEBUG" && entry.level !== "INFO" && entry.level !== "TRACE")
    const report = `${all.length} entries, ${warnings.length} at warn or above, ${logged.length} bytes:\n${
      warnings.slice(0, 20).map((entry) => entry.text).join("\n")
    }`
    // Backpressure was met (the endpoint held 16 deliveries), and said so at debug only.
    expect(all.filter((entry) => entry.level === "DEBUG" && busy.test(entry.text)).length, report).toBeGreaterThan(0)
    expect(warnings.filter((entry) => busy.test(entry.text)), report).toEqual([])
    // No stack traces, at any level: an unreachable database is an expected condition.
    expect(logged.split("\n").filter((line) => /^\s+at /.test(line)), report).toEqual([])
    // One line when it starts, one when it ends (with how long and how many operations failed).
    expect(warnings.filter((entry) => /PostgreSQL unreachable: \S/.test(entry.message)), report).toHaveLength(1)
    const ended = warnings.filter((entry) => /PostgreSQL reachable again/.test(entry.message))
    expect(ended, report).toHaveLength(1)
    const [, seconds, failed] = /reachable again after ([\d.]+) s \(([\d,]+) operations? failed\)$/.exec(ended[0]!.message) ?? []
    expect(Number(seconds), ended[0]!.message).toBeGreaterThanOrEqual(OUTAGE_MS / 1000 - 2)
    expect(Number(failed?.replace(/,/g, "")), ended[0]!.message).toBeGreaterThan(refused)
    // The two lines stand alone: no annotations of whichever operation met the outage first.
    for (const entry of [...warnings.filter((entry) => /PostgreSQL/.test(entry.message))]) {
      expect(entry.text.split("\n"), entry.text).toHaveLength(1)
    }
    // And nothing else an operator would have to read.
    expect(warnings, report).toHaveLength(2)
  }, 120_000)

  it("says once that NATS is gone and once that it is back, without stack traces", async () => {
    const { box, path } = await boxWithWebhook()
    const transport = nodemailer.createTransport({ host: "127.0.0.1", port: server.smtpPort, secure: false, ignoreTLS: true })
    await transport.sendMail({ from: "sender@example.com", to: box.address, subject: "Before", text: "before" })
    await receiver.waitFor(path, 1, 30_000)

    const since = server.output().length
    await backend.nats.stop()
    const stoppedAt = Date.now()
    let refused = 0
    try {
      while (Date.now() - stoppedAt < 5_000) {
        await transport.sendMail({ from: "sender@example.com", to: box.address, subject: "During", text: "451 expected" })
          .then(() => undefined, () => void refused++)
        await sleep(250)
      }
    } finally {
      await backend.nats.start()
    }
    expect(refused).toBeGreaterThan(0)
    await until("the end of the bus outage logged", async () => (/NATS reachable again/.test(server.output().slice(since)) ? true : undefined), 30_000)
    await transport.sendMail({ from: "sender@example.com", to: box.address, subject: "After", text: "after" })
    await until("mail sent after the outage delivered", async () =>
      receiver.received(path).some((r) => JSON.parse(r.body).data.subject === "After") ? true : undefined, 30_000, 250)
    transport.close()

    const logged = server.output().slice(since)
    const warnings = entries(logged).filter((entry) => entry.level === "WARN" || entry.level === "ERROR")
    const report = `${warnings.length} at warn or above:\n${warnings.slice(0, 20).map((entry) => entry.text).join("\n")}`
    expect(logged.split("\n").filter((line) => /^\s+at /.test(line)), report).toEqual([])
    expect(warnings.filter((entry) => /^NATS unreachable: \S/.test(entry.message)), report).toHaveLength(1)
    const ended = warnings.filter((entry) => /^NATS reachable again after [\d.]+ s \([\d,]+ operations? failed\)$/.test(entry.message))
    expect(ended, report).toHaveLength(1)
    expect(warnings, report).toHaveLength(2)
  }, 90_000)

  it("sends a pull the NATS server left unanswered again, at debug, and says it is unreachable only at the second in a row", async () => {
    const { box, path } = await boxWithWebhook()
    // Nothing moving: the earlier tests' mail indexed and announced (a publish during the freeze would
    // be an outage of its own), which the log going quiet for 2 s tells.
    let heard = { length: -1, at: Date.now() }
    await until("the server quiet for 2 s", async () => {
      const length = server.output().length
      if (length !== heard.length) heard = { length, at: Date.now() }
      return Date.now() - heard.at >= 2_000 ? true : undefined
    }, 30_000, 100)
    const since = server.output().length
    // Frozen, its connections open: a waiting pull misses its two idle heartbeats 5 to 15 s in,
    // whatever its phase, and the one sent again 10 s later, before the server runs again at 26 s.
    backend.nats.pause()
    try {
      await sleep(26_000)
    } finally {
      backend.nats.resume()
    }
    await until("the end of the silence logged", async () => (/NATS reachable again/.test(server.output().slice(since)) ? true : undefined), 15_000)
    await sendMail(server.smtpPort, { to: box.address, subject: "After the freeze", text: "after" })
    await until("mail sent after the freeze delivered", async () =>
      receiver.received(path).some((r) => JSON.parse(r.body).data.subject === "After the freeze") ? true : undefined, 30_000, 250)

    const all = entries(server.output().slice(since))
    const warnings = all.filter((entry) => entry.level === "WARN" || entry.level === "ERROR")
    const report = warnings.map((entry) => entry.text).join("\n")
    // The silence said once, and its end once.
    expect(warnings, report).toHaveLength(2)
    expect(warnings[0]!.message, report).toMatch(/^NATS unreachable: \S/)
    expect(warnings[1]!.message, report).toMatch(/^NATS reachable again after [\d.]+ s \([\d,]+ operations? failed\)$/)
    // The first pulls left unanswered were sent again, at debug.
    const resent = (pull: string) => all.findIndex((entry) => entry.level === "DEBUG" && entry.message === `A pull from ${pull} went unanswered (heartbeats missed); pulling again`)
    expect(all.some((entry) => entry.level === "DEBUG" && /^A pull from \S+ went unanswered/.test(entry.message)), report).toBe(true)
    // Said by a consumer's second in a row, after its first (or, when a handler's acknowledgement met
    // the freeze before any, by that: the log's quiet does not rule out a handler with nothing to log).
    const [, pull] = /^NATS unreachable: Pulling from (\S+) failed: heartbeats missed$/.exec(warnings[0]!.message) ?? []
    if (pull !== undefined) {
      const first = resent(pull)
      expect(first, report).toBeGreaterThanOrEqual(0)
      expect(first, report).toBeLessThan(all.indexOf(warnings[0]!))
    }
  }, 90_000)
})
