/**
 * What an operator sees of a whole session, run as a user would (register, log in, create a key,
 * a mailbox and a webhook, receive a mail over SMTP, the webhook delivered, a few API calls):
 *
 * - `/metrics` on the API port, read with a Prometheus text-format parser, moved by exactly what
 *   was done (SMTP connections, replies by code, DATA bytes, accept latency, consumers, webhook
 *   attempts, HTTP requests by route template);
 * - with `LOG_LEVEL=debug LOG_FORMAT=json`, every line is one JSON object with level, time, message,
 *   role and node; the transaction, delivery, webhook attempt and shutdown are each told; the 550
 *   is no error; and no line holds a password, token, API key, webhook secret or message body
 *   (nor, at info and above, an address).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { withApiKey } from "../support/accounts.ts"
import { DOMAIN, fresh, newBox } from "../support/mailboxes.ts"
import { type Scrape, scrape } from "../support/metrics.ts"
import { type Receiver, startReceiver } from "../support/receiver.ts"
import { type SuiteServer, useSuiteServer } from "../support/server.ts"
import { connectSmtp, envelope } from "../support/smtp-client.ts"
import { withKey } from "../support/typed-client.ts"
import { until } from "../support/wait.ts"

let suite: SuiteServer
let receiver: Receiver

useSuiteServer((s) => {
  suite = s
}, { LOG_LEVEL: "debug", LOG_FORMAT: "json", WEBHOOK_ALLOW_PRIVATE: "true" })

beforeAll(async () => {
  receiver = await startReceiver()
})
afterAll(async () => {
  await receiver?.close()
})

/** What the session used that must never be logged. */
const secrets: Array<string> = []
let senderAddress = ""
let recipientAddress = ""
let sentToAddress = ""
let emailId = ""

describe("an operator's view of one session", () => {
  let before: Scrape
  let after: Scrape
  let messageBytes = 0

  it("counts SMTP, consumers, webhooks and HTTP requests by what they did", async () => {
    const password = `pw-${fresh("secret")}-horse`
    const user = await withApiKey(suite.url, { password })
    const box = await newBox(suite.url, { user })
    const hook = await withKey(suite.url, user).POST("/v1/api/webhooks", {
      body: { url: `${receiver.url}/hook`, events: ["email.received"] }
    })
    expect(hook.response.status).toBe(201)
    secrets.push(password, user.apiKey, user.accessToken, user.refreshToken, hook.data!.data.secret)
    const cookie = /=([^;]+)/.exec(user.cookie)?.[1]
    if (cookie) secrets.push(cookie)
    recipientAddress = box.address
    senderAddress = `${fresh("sender")}@example.org`

    before = await scrape(`${suite.url}/metrics`)

    const bodyMarker = `BODY-${fresh("confidential")}`
    secrets.push(bodyMarker)
    const message = [
      `From: <${senderAddress}>`,
      `To: <${recipientAddress}>`,
      `Subject: quarterly numbers`,
      `Message-ID: <${fresh("m")}@example.org>`,
      "",
      `The numbers are ${bodyMarker}.`,
      ""
    ].join("\r\n")
    const session = await connectSmtp(suite.server.smtpPort)
    const { replies } = await envelope(session, senderAddress, [recipientAddress, `nobody-${fresh("x")}@${DOMAIN}`])
    expect(replies.map((reply) => reply.code)).toEqual([250, 550])
    const data = await session.data(message)
    expect(data.code).toBe(250)
    emailId = /queued as (\S+)/.exec(data.text)![1]!
    await session.command("QUIT")
    await session.close()
    messageBytes = Buffer.byteLength(message)

    const [delivered] = await receiver.waitFor("/hook", 1)
    expect(JSON.parse(delivered!.body).data.email_id).toBe(emailId)
    // A test event sent by hand is a POST too, and counts as one.
    const tried = await withKey(suite.url, user).POST("/v1/api/webhooks/{id}/test", { params: { path: { id: hook.data!.data.webhook_id } } })
    expect(tried.data?.data.succeeded).toBe(true)

    const mailroom = withKey(suite.url, user)
    for (let i = 0; i < 3; i++) expect((await mailroom.GET("/v1/api/mailboxes")).response.status).toBe(200)
    expect((await mailroom.GET("/v1/api/emails/{emailId}", { params: { path: { emailId: `eml_${"0".repeat(24)}` } } })).response.status).toBe(404)
    expect((await mailroom.GET("/v1/api/emails/{emailId}", { params: { path: { emailId } } })).response.status).toBe(200)
    // A route the contract does not have, so plain fetch.
    expect((await fetch(`${suite.url}/no/such/page`)).status).toBe(404)
    // Pages outside the contract, and a GET route asked with HEAD, are named as their routes, not unmatched.
    expect((await fetch(`${suite.url}/`)).status).toBe(200)
    expect((await fetch(`${suite.url}/healthz`, { method: "HEAD" })).status).toBe(200)

    // The indexer and the webhook consumer finish after the webhook's POST is answered; the indexer's
    // first email waits for the embedding model to load in its low-priority process (30 s on a busy machine).
    after = await until("the consumers to count the mail", async () => {
      const now = await scrape(`${suite.url}/metrics`)
      const done = (consumer: string) =>
        now.value("mailroom_consumer_processed_total", { consumer }) - before.value("mailroom_consumer_processed_total", { consumer })
      return done("ingest") >= 1 && done("index") >= 1 && done("webhooks") >= 2 ? now : undefined
    }, 60_000, 100, 1_000)
    const delta = (name: string, labels?: Record<string, string>) => after.value(name, labels) - before.value(name, labels)
    const deltaCount = (name: string, labels?: Record<string, string>) => after.count(name, labels) - before.count(name, labels)

    expect(delta("mailroom_smtp_connections_total")).toBe(1)
    // Each reply under the command it answered: one transaction is one DATA 250, whatever its recipients.
    expect(delta("mailroom_smtp_replies_total", { phase: "rcpt", code: "250" })).toBe(1)
    expect(delta("mailroom_smtp_replies_total", { phase: "rcpt", code: "550" })).toBe(1)
    expect(delta("mailroom_smtp_replies_total", { phase: "data", code: "250" })).toBe(1)
    // DATA bytes as they came off the wire: the message, with the dot-stuffing and final dot removed.
    expect(delta("mailroom_smtp_data_bytes_total")).toBe(messageBytes)
    expect(deltaCount("mailroom_smtp_accept_duration_seconds")).toBe(1)

    expect(delta("mailroom_consumer_processed_total", { consumer: "ingest" })).toBe(1)
    expect(delta("mailroom_consumer_processed_total", { consumer: "index" })).toBe(1)
    // email.received and email.processed.
    expect(delta("mailroom_consumer_processed_total", { consumer: "webhooks" })).toBe(2)
    expect(delta("mailroom_consumer_failed_total")).toBe(0)
    expect(delta("mailroom_webhook_attempts_total", { outcome: "success" })).toBe(2)
    expect(delta("mailroom_webhook_attempts_total", { outcome: "http_error" })).toBe(0)
    expect(deltaCount("mailroom_webhook_attempt_duration_seconds")).toBe(2)
    expect(deltaCount("mailroom_embedder_batch_duration_seconds")).toBeGreaterThanOrEqual(1)

    const http = (route: string, status: string) => delta("mailroom_http_requests_total", { route, method: "GET", status })
    expect(http("/v1/api/mailboxes", "200")).toBe(3)
    expect(http("/v1/api/emails/:emailId", "404")).toBe(1)
    expect(http("/v1/api/emails/:emailId", "200")).toBe(1)
    expect(http("unmatched", "404")).toBe(1)
    expect(http("/", "200")).toBe(1)
    expect(delta("mailroom_http_requests_total", { route: "/healthz", method: "HEAD", status: "200" })).toBe(1)
    expect(http("/metrics", "200")).toBeGreaterThanOrEqual(1)
    expect(deltaCount("mailroom_http_request_duration_seconds", { route: "/v1/api/mailboxes", method: "GET" })).toBe(3)

    // Gauges: the database pool holds its connections (the embedded database's one, or PostgreSQL's),
    // and the email the indexer embedded has left the embedder's queue.
    const family = (name: string) => after.families.find((f) => f.name === name)
    expect(family("mailroom_db_pool_connections")?.type).toBe("GAUGE")
    expect(after.value("mailroom_db_pool_connections", { state: "in_use" }) + after.value("mailroom_db_pool_connections", { state: "idle" }))
      .toBeGreaterThanOrEqual(1)
    expect(family("mailroom_db_pool_waiting")?.type).toBe("GAUGE")
    expect(after.value("mailroom_db_pool_waiting")).toBeGreaterThanOrEqual(0)
    expect(family("mailroom_embedder_queue_emails")?.type).toBe("GAUGE")
    expect(after.value("mailroom_embedder_queue_emails")).toBe(0)
  }, 120_000)

  it("labels no series with an id or an address, and names every family by the conventions", () => {
    for (const family of after.families) {
      // The process's own keep the names every Prometheus client gives them (src/runtime-metrics.ts).
      expect(family.name).toMatch(/^(mailroom|process|nodejs)_[a-z0-9_]+$/)
      expect(family.help.length).toBeGreaterThan(0)
      if (family.type === "COUNTER") expect(family.name).toMatch(/_total$/)
      if (family.type === "HISTOGRAM") expect(family.name).toMatch(/_seconds$/)
    }
    expect(after.text).not.toContain(emailId)
    expect(after.text).not.toContain(recipientAddress)
    expect(after.text).not.toMatch(/(usr|mbx|eml|whk|key)_[0-9a-f]{24}/)
  })

  it("tells the process's own CPU, memory, file descriptors, event-loop delay and garbage collections", async () => {
    const start = await scrape(`${suite.url}/metrics`)
    for (let i = 0; i < 50; i++) expect((await fetch(`${suite.url}/healthz`)).status).toBe(200)
    const end = await scrape(`${suite.url}/metrics`)
    const type = (name: string) => end.families.find((family) => family.name === name)?.type
    const grew = (name: string) => end.value(name) - start.value(name)

    for (const name of ["process_cpu_seconds_total", "process_cpu_user_seconds_total", "process_cpu_system_seconds_total", "mailroom_event_loop_busy_seconds_total"]) {
      expect(type(name)).toBe("COUNTER")
    }
    expect(grew("process_cpu_seconds_total")).toBeGreaterThan(0)
    expect(end.value("process_cpu_seconds_total")).toBeCloseTo(end.value("process_cpu_user_seconds_total") + end.value("process_cpu_system_seconds_total"), 5)
    // Fifty answers kept the loop busy for a while, and for less than the time between the scrapes.
    expect(grew("mailroom_event_loop_busy_seconds_total")).toBeGreaterThan(0)
    expect(grew("mailroom_event_loop_busy_seconds_total")).toBeLessThan(grew("process_cpu_seconds_total") + 1)

    const startedAt = end.value("process_start_time_seconds")
    expect(startedAt).toBeLessThan(Date.now() / 1000)
    expect(startedAt).toBeGreaterThan(Date.now() / 1000 - 3600)
    expect(end.value("process_resident_memory_bytes")).toBeGreaterThan(10 * 1024 * 1024)
    expect(end.value("nodejs_heap_size_used_bytes")).toBeGreaterThan(0)
    expect(end.value("nodejs_heap_size_used_bytes")).toBeLessThanOrEqual(end.value("nodejs_heap_size_total_bytes"))
    expect(end.value("nodejs_external_memory_bytes")).toBeGreaterThan(0)
    // The server's sockets and files, at least the listening socket and this connection.
    expect(end.value("process_open_fds")).toBeGreaterThanOrEqual(2)
    expect(end.value("process_open_fds")).toBeLessThan(end.value("process_max_fds"))

    // Delays since the previous scrape, without the sampling timer's own 10 ms.
    const lag = (figure: string) => end.value(`nodejs_eventloop_lag_${figure}_seconds`)
    expect(type("nodejs_eventloop_lag_p99_seconds")).toBe("GAUGE")
    expect(lag("min")).toBeGreaterThanOrEqual(0)
    expect(lag("min")).toBeLessThanOrEqual(lag("p50"))
    expect(lag("p50")).toBeLessThanOrEqual(lag("p90"))
    expect(lag("p90")).toBeLessThanOrEqual(lag("p99"))
    expect(lag("p99")).toBeLessThanOrEqual(lag("max"))
    // Without the timer's 10 ms the shortest delay is near nothing, busy machine or not (with it, 10 ms or more).
    expect(lag("min")).toBeLessThan(0.009)

    expect(type("nodejs_gc_duration_seconds")).toBe("HISTOGRAM")
    for (const kind of ["minor", "major", "incremental", "weakcb"]) {
      expect(end.text).toContain(`nodejs_gc_duration_seconds_count{kind="${kind}"}`)
    }
    const [major, minor, patch] = process.versions.node.split(".")
    expect(end.families.find((family) => family.name === "nodejs_version_info")?.metrics).toEqual([
      { labels: { version: process.version, major, minor, patch }, value: "1" }
    ])
  })

  it("searches are timed by mode", async () => {
    const user = await withApiKey(suite.url)
    const searchOnce = async (mode: "hybrid" | "text" | "vector") =>
      expect((await withKey(suite.url, user).POST("/v1/search", { body: { query: "numbers", mode } })).response.status).toBe(200)
    const start = await scrape(`${suite.url}/metrics`)
    await searchOnce("text")
    await searchOnce("text")
    await searchOnce("hybrid")
    const end = await scrape(`${suite.url}/metrics`)
    const searches = (mode: string) =>
      end.count("mailroom_search_duration_seconds", { mode }) - start.count("mailroom_search_duration_seconds", { mode })
    expect(searches("text")).toBe(2)
    expect(searches("hybrid")).toBe(1)
    expect(searches("vector")).toBe(0)
  })

  it("delivers mail sent over the API to another mailbox (its log, below, names no address)", async () => {
    const user = await withApiKey(suite.url)
    const box = await newBox(suite.url, { user })
    const colleague = await newBox(suite.url, { user })
    sentToAddress = colleague.address
    const sent = await withKey(suite.url, user).POST("/v1/api/mailboxes/{mailboxId}/send", {
      params: { path: { mailboxId: box.mailboxId } },
      body: { to: [colleague.address], subject: "handover", text: "Over to you." }
    })
    expect(sent.response.status).toBe(202)
    await until("the sent mail to arrive", async () => {
      const list = await withKey(suite.url, user).GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId: colleague.mailboxId } } })
      return list.data?.meta.total === 1 ? true : undefined
    })
  })
})

describe("the log of that session (LOG_LEVEL=debug, LOG_FORMAT=json)", () => {
  it("is one JSON object per line, tells each step, and holds no secret", async () => {
    expect(await suite.server.stop()).toBe(0)
    const lines = suite.server.output().split("\n").filter((line) => line.length > 0)
    const entries = lines.map((line) => {
      try {
        return JSON.parse(line) as Record<string, unknown>
      } catch {
        throw new Error(`not a JSON line: ${line}`)
      }
    })
    for (const entry of entries) {
      expect(Object.keys(entry)).toEqual(expect.arrayContaining(["level", "time", "message", "role", "node"]))
      expect(entry.role).toBe("api,smtp,worker,indexer,mta")
      expect(entry.time).toMatch(/^\d{4}-\d{2}-\d{2}T/)
    }
    const said = (message: string | RegExp) => entries.filter((entry) => typeof entry.message === "string" && entry.message.match(message))

    const transaction = said("SMTP transaction answered 250")
    expect(transaction).toHaveLength(1)
    expect(transaction[0]).toMatchObject({ level: "info", code: 250, email_ids: emailId, recipients: 1 })
    expect(said("RCPT TO refused 550")).toHaveLength(1)
    expect(said("RCPT TO refused 550")[0]!.level).toBe("debug")
    expect(said("Email delivered to its mailbox").find((entry) => entry.email_id === emailId)).toMatchObject({ level: "info" })
    expect(said("Delivery attempt")[0]).toMatchObject({ level: "info", outcomes: "1 sent" })
    expect(said("Webhook attempt delivered")[0]).toMatchObject({ level: "info", status_code: 200, attempt: 1 })
    expect(said(/^Embedding model .* ready/).length).toBeGreaterThanOrEqual(1)
    expect(said(/^SIGTERM: shutting down/)).toHaveLength(1)
    expect(said("Shutdown complete")).toHaveLength(1)

    // A refused recipient is the protocol working, not a failure.
    for (const entry of entries) {
      expect(["error", "fatal"], JSON.stringify(entry)).not.toContain(entry.level)
      expect(JSON.stringify(entry)).not.toMatch(/unhandled error|UnknownRecipient/)
    }
    for (const line of lines) {
      for (const secret of secrets) expect(line, `a log line holds a secret: ${line}`).not.toContain(secret)
    }
    for (const entry of entries.filter((entry) => entry.level !== "debug" && entry.level !== "trace")) {
      const line = JSON.stringify(entry)
      expect(line).not.toContain(senderAddress)
      expect(line).not.toContain(recipientAddress)
      expect(line).not.toContain(sentToAddress)
    }
  }, 40_000)
})
