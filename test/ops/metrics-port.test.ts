/**
 * `/metrics` of processes without the api role, on `METRICS_PORT`: an SMTP-only node counts the
 * mail it took, a worker (and indexer) node the messages its consumers handled, each only its own;
 * `/healthz` and `/readyz` answer there as on the API. Separate
 * processes need PostgreSQL and NATS, so this suite runs in the services mode only (the all-roles
 * process is covered by observability.test.ts in both modes).
 */
import * as os from "node:os"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type FakeOpenAi, fakeOpenAiEnv, startFakeOpenAi } from "../support/fake-openai.ts"
import { type FakeQdrant, startFakeQdrant } from "../support/fake-qdrant.ts"
import { type Box, DOMAIN, fresh, newBox } from "../support/mailboxes.ts"
import { scrape } from "../support/metrics.ts"
import { type Backend, createBackend, freePort, type Server, startServer } from "../support/server.ts"
import { mode } from "../support/services.ts"
import { connectSmtp, envelope } from "../support/smtp-client.ts"
import { until } from "../support/wait.ts"

let backend: Backend
let qdrant: FakeQdrant
let openai: FakeOpenAi
const servers: Array<Server> = []
let api: Server
let smtp: Server
let worker: Server
let smtpMetrics: string
let workerMetrics: string
let box: Box

/** A process without HTTP is ready once its metrics answer. */
const metricsUp = (server: Server, url: string) =>
  until(() => `metrics of a node not up:\n${server.output()}`, async () => {
    if (server.process.exitCode !== null) throw new Error(`exited with ${server.process.exitCode}:\n${server.output()}`)
    return fetch(url).then((reply) => (reply.status === 200 ? true : undefined), () => undefined)
  }, 90_000, 200)

describe.skipIf(mode !== "postgres")("METRICS_PORT", () => {
  beforeAll(async () => {
    backend = await createBackend()
    qdrant = await startFakeQdrant()
    openai = await startFakeOpenAi()
    const env = { ...backend.env, QDRANT_URL: qdrant.url, QDRANT_PREFIX: "node_", ...fakeOpenAiEnv(openai) }
    api = await startServer({ ...env, ROLES: "api" })
    servers.push(api)
    const [smtpPort, workerPort] = [await freePort(), await freePort()]
    smtp = await startServer({ ...env, ROLES: "smtp", METRICS_PORT: String(smtpPort), LOG_LEVEL: "info" }, { ready: "none" })
    worker = await startServer({ ...env, ROLES: "worker,indexer", METRICS_PORT: String(workerPort) }, { ready: "none" })
    servers.push(smtp, worker)
    smtpMetrics = `http://127.0.0.1:${smtpPort}/metrics`
    workerMetrics = `http://127.0.0.1:${workerPort}/metrics`
    await Promise.all([metricsUp(smtp, smtpMetrics), metricsUp(worker, workerMetrics)])
    box = await newBox(api.url)
  }, 120_000)

  afterAll(async () => {
    await Promise.all(servers.map((server) => server.stop()))
    await qdrant?.close()
    await openai?.close()
    await backend?.dispose()
  })

  it("an SMTP node and a worker node each count their own part of one message", async () => {
    const smtpBefore = await scrape(smtpMetrics)
    const workerBefore = await scrape(workerMetrics)
    // Counters are exported from 0 as each part starts, before it has anything to count: a rate, or an
    // alert on the first failure, needs the series before its first increase.
    expect(smtpBefore.exported("mailroom_smtp_connections_total")).toBe(true)
    for (const consumer of ["ingest", "index", "webhooks"]) expect(workerBefore.exported("mailroom_consumer_failed_total", { consumer }), consumer).toBe(true)
    expect(workerBefore.exported("mailroom_index_abandoned_total")).toBe(true)
    expect(workerBefore.exported("mailroom_webhook_attempts_total", { outcome: "network_error" })).toBe(true)

    const session = await until("the SMTP node to greet", async () => connectSmtp(smtp.smtpPort).catch(() => undefined), 30_000)
    const { replies } = await envelope(session, `${fresh("s")}@example.org`, [box.address, `nobody-${fresh("x")}@${DOMAIN}`])
    expect(replies.map((reply) => reply.code)).toEqual([250, 550])
    const message = `Subject: metrics\r\nTo: <${box.address}>\r\n\r\nhello\r\n`
    expect((await session.data(message)).code).toBe(250)
    await session.close()

    const smtpAfter = await scrape(smtpMetrics)
    expect(smtpAfter.value("mailroom_smtp_connections_total") - smtpBefore.value("mailroom_smtp_connections_total")).toBe(1)
    // Each reply under the command it answered: the transaction is its one DATA 250, whatever its recipients.
    const answered = (phase: string, code: string) =>
      smtpAfter.value("mailroom_smtp_replies_total", { phase, code }) - smtpBefore.value("mailroom_smtp_replies_total", { phase, code })
    expect(answered("rcpt", "250")).toBe(1)
    expect(answered("rcpt", "550")).toBe(1)
    expect(answered("data", "250")).toBe(1)
    // The runbook's alert on DATA's 451 has its series before the first one.
    expect(smtpBefore.exported("mailroom_smtp_replies_total", { phase: "data", code: "451" })).toBe(true)
    expect(smtpAfter.value("mailroom_smtp_data_bytes_total") - smtpBefore.value("mailroom_smtp_data_bytes_total")).toBe(Buffer.byteLength(message))
    // Only its own roles, and what every process has (the pipeline's stages, the sent mail waiting and
    // the outbox's announcements that it samples, its database pool, the process's own figures): no
    // consumer, no HTTP.
    expect(smtpAfter.families.map((family) => family.name).filter((name) => !/^(mailroom_(smtp|stage|db_pool|event_loop|outbound_waiting|outbound_oldest|outbox_waiting|outbox_oldest|node_info)_?|process_|nodejs_)/.test(name)))
      .toEqual([])
    // Each node says which process and roles answered, as its log lines name them (host:pid).
    const nodeInfo = (scrape: typeof smtpAfter) => scrape.families.find((family) => family.name === "mailroom_node_info")?.metrics
    expect(nodeInfo(smtpAfter)).toEqual([{ labels: { node: `${os.hostname()}:${smtp.process.pid}`, roles: "smtp" }, value: "1" }])
    expect(smtpAfter.value("process_cpu_seconds_total")).toBeGreaterThan(0)
    expect(smtpAfter.value("mailroom_stage_handled_total", { stage: "accept" }) - smtpBefore.value("mailroom_stage_handled_total", { stage: "accept" })).toBe(1)

    const workerAfter = await until("the worker to count the message", async () => {
      const now = await scrape(workerMetrics)
      const handled = (consumer: string) =>
        now.value("mailroom_consumer_processed_total", { consumer }) - workerBefore.value("mailroom_consumer_processed_total", { consumer })
      return handled("ingest") === 1 && handled("index") === 1 ? now : undefined
    })
    expect(workerAfter.value("mailroom_consumer_failed_total")).toBe(0)
    // Indexed into this deployment's own collection, under QDRANT_PREFIX.
    expect([...qdrant.collections.keys()]).toEqual([expect.stringMatching(/^node_emails_/)])
    expect(workerAfter.families.some((family) => family.name.startsWith("mailroom_smtp_") || family.name.startsWith("mailroom_http_"))).toBe(false)
    expect(nodeInfo(workerAfter)).toEqual([{ labels: { node: `${os.hostname()}:${worker.process.pid}`, roles: "worker,indexer" }, value: "1" }])

    const other = await fetch(smtpMetrics.replace("/metrics", "/api-keys"))
    expect(other.status).toBe(404)
    expect(await other.json()).toEqual({ success: false, error: { code: "NOT_FOUND", message: "Only /metrics, /healthz and /readyz are served here" } })
  }, 60_000)

  it("names a node's roles on each line of its log, so that nodes sharing a terminal are told apart", () => {
    expect(smtp.output()).toMatch(/^\[[\d:.]+\] INFO \(#\d+\): \[smtp\] SMTP listening on /m)
    expect(smtp.output()).toMatch(/^\[[\d:.]+\] INFO \(#\d+\): \[smtp\] Metrics on http:/m)
  })

  it("gives a node without the api role the API's probes beside its metrics: /healthz, and /readyz with the stages", async () => {
    for (const metrics of [smtpMetrics, workerMetrics]) {
      const live = await fetch(metrics.replace("/metrics", "/healthz"))
      expect(live.status).toBe(200)
      expect(await live.json()).toEqual({ success: true, data: { status: "ok" } })
      const ready = await fetch(metrics.replace("/metrics", "/readyz"))
      expect(ready.status).toBe(200)
      const { data } = await ready.json() as { data: Record<string, unknown> & { stages: Record<string, unknown> } }
      expect(data).toMatchObject({ status: "ok", database: "ok", bus: "ok" })
      expect(Object.keys(data.stages)).toEqual(["accept", "ingest", "words", "index"])
      // Only a node that searches (here the indexer) has a vector index to tell of.
      expect(data.vector_index, metrics).toBe(metrics === workerMetrics ? "ok" : undefined)
    }
  })

  it("tells a vector index that does not answer in /readyz and stays ready (200): only search waits for it", async () => {
    const readiness = async () => {
      const reply = await fetch(`${api.url}/readyz`)
      return { status: reply.status, data: (await reply.json() as { data: { vector_index?: string } }).data }
    }
    expect(await readiness()).toMatchObject({ status: 200, data: { vector_index: "ok" } })
    // Refused four times: the first try and the adapter's three retries of a transient failure.
    for (let i = 0; i < 4; i++) qdrant.failNext({ method: "GET", path: /^\/collections$/, status: 503, error: "Service Unavailable" })
    expect(await readiness()).toMatchObject({ status: 200, data: { status: "ok", database: "ok", bus: "ok", vector_index: "unreachable" } })
    expect(await readiness()).toMatchObject({ status: 200, data: { vector_index: "ok" } })
  })
})
