/**
 * Traces over OTLP (issue 22): with OTEL_EXPORTER_OTLP_ENDPOINT pointing at a collector this test
 * runs (an HTTP server taking OTLP/HTTP JSON), one inbound message is one trace, from the SMTP
 * accept through ingest, indexing and the webhook delivery, each a child of the span that published
 * its message on the bus; an API request is a server span of its own trace, and a send made over the
 * API is one trace with the mta's delivery of it. Without the endpoint,
 * nothing is sent (every other suite runs so).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { withApiKey } from "../support/accounts.ts"
import { newBox } from "../support/mailboxes.ts"
import { type Receiver, startReceiver } from "../support/receiver.ts"
import { type SuiteServer, useSuiteServer } from "../support/server.ts"
import { connectSmtp, envelope } from "../support/smtp-client.ts"
import { withKey } from "../support/typed-client.ts"
import { until } from "../support/wait.ts"

interface Span {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId?: string
  readonly name: string
  readonly kind: number
  readonly attributes: ReadonlyArray<{ readonly key: string; readonly value: Record<string, unknown> }>
}

let collector: Receiver
let suite: SuiteServer

beforeAll(async () => {
  collector = await startReceiver()
})
afterAll(async () => {
  await collector?.close()
})

useSuiteServer((s) => {
  suite = s
}, {
  // The collector's address is known only once it listens: the server reads it through a getter.
  get OTEL_EXPORTER_OTLP_ENDPOINT() {
    return collector.url
  },
  OTEL_SERVICE_NAME: "mailroom-test",
  OTEL_BSP_SCHEDULE_DELAY: "200",
  WEBHOOK_ALLOW_PRIVATE: "true"
} as Record<string, string>)

/** Every span exported so far, with its resource's service name. */
const exported = () =>
  collector.received("/v1/traces").flatMap((request) => {
    const body = JSON.parse(request.body) as {
      resourceSpans: ReadonlyArray<{
        resource: { attributes: ReadonlyArray<{ key: string; value: { stringValue?: string } }> }
        scopeSpans: ReadonlyArray<{ spans: ReadonlyArray<Span> }>
      }>
    }
    return body.resourceSpans.flatMap((resource) => {
      const service = resource.resource.attributes.find((a) => a.key === "service.name")?.value.stringValue
      return resource.scopeSpans.flatMap((scope) => scope.spans.map((span) => ({ ...span, service })))
    })
  })

describe("traces over OTLP", () => {
  it("follow one inbound message from the SMTP accept through ingest, indexing and the webhook, as one trace", async () => {
    const user = await withApiKey(suite.url)
    const box = await newBox(suite.url, { user })
    const hook = await withKey(suite.url, user).POST("/v1/api/webhooks", { body: { url: `${collector.url}/hook`, events: ["email.received"] } })
    expect(hook.response.status).toBe(201)

    const session = await connectSmtp(suite.server.smtpPort)
    const { replies } = await envelope(session, "sender@example.org", [box.address])
    expect(replies.map((reply) => reply.code)).toEqual([250])
    const data = await session.data(["From: <sender@example.org>", `To: <${box.address}>`, "Subject: traced", "", "Follow me.", ""].join("\r\n"))
    expect(data.code).toBe(250)
    await session.close()
    await collector.waitFor("/hook", 1, 60_000)

    // The accept's trace, once every stage's span of it has been exported.
    const trace = await until("the message's trace is exported", async () => {
      const spans = exported()
      const root = spans.find((span) => span.name === "smtp.accept")
      if (root === undefined) return undefined
      const mine = spans.filter((span) => span.traceId === root.traceId)
      const names = new Set(mine.map((span) => span.name))
      return ["consume ingest", "consume index", "consume webhooks"].every((name) => names.has(name)) ? { root, mine } : undefined
    }, 30_000, 200)

    expect(trace.root.traceId).toMatch(/^[0-9a-f]{32}$/)
    expect(trace.root.parentSpanId ?? "").toBe("")
    expect(exported().find((span) => span.name === "smtp.accept")).toMatchObject({ service: "mailroom-test" })
    const byId = new Map(trace.mine.map((span) => [span.spanId, span]))
    // Ingest continues the accept; indexing and the webhook continue what ingest published.
    const ingest = trace.mine.find((span) => span.name === "consume ingest")!
    expect(ingest.parentSpanId).toBe(trace.root.spanId)
    expect(ingest.kind).toBe(5) // CONSUMER
    for (const name of ["consume index", "consume webhooks"]) {
      const span = trace.mine.find((s) => s.name === name)!
      // Its parent is a span of the ingest (the publish happened inside it).
      let ancestor = byId.get(span.parentSpanId ?? "")
      while (ancestor !== undefined && ancestor.spanId !== ingest.spanId) ancestor = byId.get(ancestor.parentSpanId ?? "")
      expect({ name, underIngest: ancestor?.spanId === ingest.spanId }).toEqual({ name, underIngest: true })
    }
  })

  it("follow a send made over the API through the mta's delivery, as one trace", async () => {
    const user = await withApiKey(suite.url)
    const from = await newBox(suite.url, { user })
    const to = await newBox(suite.url, { user })
    const sent = await withKey(suite.url, user).POST("/v1/api/mailboxes/{mailboxId}/send", {
      params: { path: { mailboxId: from.mailboxId } },
      body: { to: [to.address], subject: "traced send", text: "Through the mta." }
    })
    expect(sent.response.status).toBe(202)
    const trace = await until("the send's trace is exported", async () => {
      const spans = exported()
      const request = spans.find((span) =>
        span.kind === 2 && span.attributes.some((a) => String(a.value.stringValue ?? "").includes(`/v1/api/mailboxes/${from.mailboxId}/send`))
      )
      if (request === undefined) return undefined
      const mine = spans.filter((span) => span.traceId === request.traceId)
      const delivery = mine.find((span) => span.name === "consume mta")
      return delivery === undefined ? undefined : { request, delivery, mine }
    }, 30_000, 200)
    // The mta's handling descends from the request that published the job.
    const byId = new Map(trace.mine.map((span) => [span.spanId, span]))
    let ancestor = byId.get(trace.delivery.parentSpanId ?? "")
    while (ancestor !== undefined && ancestor.spanId !== trace.request.spanId) ancestor = byId.get(ancestor.parentSpanId ?? "")
    expect(ancestor?.spanId).toBe(trace.request.spanId)
    expect(trace.delivery.kind).toBe(5) // CONSUMER
  })

  it("give an API request a server span of its own trace", async () => {
    const user = await withApiKey(suite.url)
    expect((await withKey(suite.url, user).GET("/v1/api-keys")).response.status).toBe(200)
    const span = await until("the request's span is exported", async () =>
      exported().find((s) => s.kind === 2 && s.attributes.some((a) => a.key === "http.request.method" && a.value.stringValue === "GET") &&
        s.attributes.some((a) => String(a.value.stringValue ?? "").includes("/v1/api-keys"))), 30_000, 200)
    expect(span.traceId).toMatch(/^[0-9a-f]{32}$/)
  })
})
