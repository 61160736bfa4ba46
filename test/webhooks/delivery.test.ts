/**
 * Deliveries as a receiver meets them: mail sent over SMTP becomes one signed `email.received` POST,
 * retried exactly as SPEC says, cut at 10 s, logged attempt by attempt, never sent to an inactive
 * endpoint or to another account's, and not lost when the worker dies in the middle.
 * The receiver is a real HTTP server on loopback, so the server runs with WEBHOOK_ALLOW_PRIVATE.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as https from "node:https"
import type { AddressInfo } from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import nodemailer from "nodemailer"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { components } from "../../packages/client/src/fetch-client.ts"
import { verifyWebhook } from "../../services/webhooks/signatures.ts"
import { upgrade } from "../support/billing.ts"
import { type FakeQdrant, startFakeQdrant } from "../support/fake-qdrant.ts"
import { type Box, fresh, newBox } from "../support/mailboxes.ts"
import { type Received, type Receiver, startReceiver } from "../support/receiver.ts"
import { type Backend, createBackend, type Server, startServer } from "../support/server.ts"
import { mode } from "../support/services.ts"
import { withKey, withToken } from "../support/typed-client.ts"
import { sleep, until } from "../support/wait.ts"

interface Certificate {
  readonly key: Buffer
  readonly cert: Buffer
  readonly certFile: string
}

const tlsDir = fs.mkdtempSync(path.join(os.tmpdir(), "mailroom-tls-"))

/** A self-signed certificate for `localhost`, made with openssl. */
const certificate = (name: string): Certificate => {
  const keyFile = path.join(tlsDir, `${name}.key`)
  const certFile = path.join(tlsDir, `${name}.pem`)
  execFileSync("openssl", [
    "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
    "-addext", "subjectAltName=DNS:localhost", "-keyout", keyFile, "-out", certFile
  ], { stdio: "ignore" })
  return { key: fs.readFileSync(keyFile), cert: fs.readFileSync(certFile), certFile }
}

// The server trusts one of them (as a receiver's real certificate would be), not the other.
const trusted = certificate("trusted")
const untrusted = certificate("untrusted")

let backend: Backend
let server: Server
let receiver: Receiver

const env = { WEBHOOK_ALLOW_PRIVATE: "true", NODE_EXTRA_CA_CERTS: trusted.certFile }

beforeAll(async () => {
  receiver = await startReceiver()
  backend = await createBackend()
  server = await startServer({ ...backend.env, ...env })
})

afterAll(async () => {
  await receiver?.close()
  await server?.stop()
  await backend?.dispose()
  fs.rmSync(tlsDir, { recursive: true, force: true })
})

const send = async (to: string, subject: string, text = "Hello from the test.") => {
  const transport = nodemailer.createTransport({ host: "127.0.0.1", port: server.smtpPort, secure: false, ignoreTLS: true })
  const info = await transport.sendMail({ from: "sender@example.com", to, subject, text })
  transport.close()
  return info
}

/** `box`'s owner's caller, on the server as it is now (a test restarts it). */
const keyed = (box: Box) => withKey(server.url, box.user)
const webhookPath = (id: string) => ({ params: { path: { id } } })

/** A webhook for `box`'s owner, delivering `events` to a fresh path on the receiver. */
const hook = async (
  box: Box,
  options: {
    readonly events?: components["schemas"]["CreateWebhookInput"]["events"]
    readonly path?: string
    readonly mailboxIds?: ReadonlyArray<string>
    readonly labels?: ReadonlyArray<string>
  } = {}
) => {
  const path = options.path ?? `/${fresh("hook")}`
  const reply = await keyed(box).POST("/v1/api/webhooks", {
    body: {
      url: `${receiver.url}${path}`,
      events: options.events ?? ["email.received"],
      ...(options.mailboxIds ? { mailbox_ids: [...options.mailboxIds] } : {}),
      ...(options.labels ? { labels: [...options.labels] } : {})
    }
  })
  if (reply.response.status !== 201 || !reply.data) throw new Error(`webhook not created: ${reply.response.status} ${JSON.stringify(reply.error)}`)
  return { ...reply.data.data, path }
}

const deliveries = async (box: Box, webhookId: string) => {
  const reply = await keyed(box).GET("/v1/api/webhooks/{id}/deliveries", webhookPath(webhookId))
  if (reply.response.status !== 200 || !reply.data) throw new Error(`delivery log: ${reply.response.status} ${JSON.stringify(reply.error)}`)
  return reply.data
}

const finished = (box: Box, webhookId: string, count = 1) =>
  until(`${count} finished deliveries`, async () => {
    const log = await deliveries(box, webhookId)
    const done = log.data.filter((d) => d.status !== "pending")
    return done.length >= count ? log : undefined
    // A free plan's key has 20 requests a minute: poll gently.
  }, 40_000, 500)

const payloadOf = (request: Received) => JSON.parse(request.body)

describe("email.received", () => {
  it("mail sent over SMTP reaches the endpoint once, signed, with SPEC's payload", async () => {
    const box = await newBox(server.url)
    const webhook = await hook(box)
    await send(box.address, "Quarterly invoice", "Please find the invoice attached.")

    const [request] = await receiver.waitFor(webhook.path, 1)
    expect(verifyWebhook({ secret: webhook.secret, body: request!.body, headers: request!.headers })).toBe(true)
    expect(request!.headers["content-type"]).toBe("application/json")
    expect(request!.headers["x-service-signature"]).toMatch(/^sha256=[0-9a-f]{64}$/)
    expect(request!.headers["webhook-signature"]).toMatch(/^v1,[A-Za-z0-9+/]+=*$/)

    const payload = payloadOf(request!)
    expect(Object.keys(payload).sort()).toEqual(["data", "event", "timestamp"])
    expect(payload.event).toBe("email.received")
    expect(payload.timestamp).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)
    expect(Object.keys(payload.data).sort()).toEqual(
      ["authentication", "authentication_results", "cc", "date", "direction", "domain", "email_id", "extracted", "from", "from_name", "has_attachments", "labels", "mailbox_id", "message_id", "reply_to", "spam", "subject", "thread_id", "to"]
    )
    // The same email the API serves.
    const email = (await keyed(box).GET("/v1/api/emails/{emailId}", { params: { path: { emailId: payload.data.email_id } } })).data!.data
    expect(payload.data).toEqual({
      email_id: email.email_id,
      direction: "inbound",
      message_id: email.message_id,
      subject: "Quarterly invoice",
      from: "sender@example.com",
      from_name: null,
      to: [box.address],
      cc: [],
      reply_to: [],
      date: email.date,
      mailbox_id: box.mailboxId,
      domain: "agents.localhost",
      has_attachments: false,
      thread_id: email.thread_id,
      // Nothing vouches for example.com's mail from 127.0.0.1 (issue 20).
      labels: ["inbound", "unread", "unauthenticated"],
      authentication: email.authentication,
      authentication_results: email.authentication_results,
      // No RSPAMD_URL: nothing scored it.
      spam: null,
      extracted: { reply_text: "Please find the invoice attached.", codes: [], links: [] }
    })
    expect(payload.data.extracted).toEqual(email.extracted)
    expect(payload.data.authentication.spf.domain).toBe("example.com")
    expect(request!.headers["webhook-id"]).toBe(`email.received:${email.email_id}`)

    const log = await finished(box, webhook.webhook_id)
    expect(log.data).toEqual([{
      delivery_id: expect.stringMatching(/^dlv_/),
      webhook_id: webhook.webhook_id,
      event_id: `email.received:${email.email_id}`,
      event: "email.received",
      status: "succeeded",
      attempts: [{ attempt: 1, status_code: 200, duration_ms: expect.any(Number), error: null, attempted_at: expect.any(String) }],
      created_at: expect.any(String),
      completed_at: expect.any(String)
    }])
    expect(log.meta).toEqual({ total: 1, limit: 20, offset: 0, hasMore: false })
    const past = await keyed(box).GET("/v1/api/webhooks/{id}/deliveries", {
      params: { path: { id: webhook.webhook_id }, query: { limit: 1, offset: 1 } }
    })
    expect(past.data).toEqual({ success: true, data: [], meta: { total: 1, limit: 1, offset: 1, hasMore: false } })
    // Exactly once: nothing more arrives.
    await new Promise((resolve) => setTimeout(resolve, 1000))
    expect(receiver.received(webhook.path)).toHaveLength(1)
  })

  it("goes only to the account's active endpoints subscribed to it; deactivating stops deliveries, reactivating resumes them", async () => {
    const owner = await newBox(server.url)
    await upgrade(server.url, owner.user.apiKey, "pro")
    const subscribed = await hook(owner)
    const inactive = await hook(owner)
    const otherKind = await hook(owner, { events: ["api_key.created"] })
    const strangerBox = await newBox(server.url)
    const stranger = await hook(strangerBox)
    const off = await keyed(owner).PATCH("/v1/api/webhooks/{id}", { ...webhookPath(inactive.webhook_id), body: { active: false } })
    expect(off.data?.data.active).toBe(false)

    // Both accounts' events at once: the endpoints of the events dispatched together are looked up together.
    await Promise.all([send(owner.address, "First"), send(strangerBox.address, "Elsewhere")])
    await receiver.waitFor(subscribed.path, 1)
    await receiver.waitFor(stranger.path, 1)
    await finished(owner, subscribed.webhook_id)
    await new Promise((resolve) => setTimeout(resolve, 500))
    expect(receiver.received(subscribed.path).map((r) => payloadOf(r).data.subject)).toEqual(["First"])
    expect(receiver.received(stranger.path).map((r) => payloadOf(r).data.subject)).toEqual(["Elsewhere"])
    expect(receiver.received(inactive.path)).toHaveLength(0)
    expect(receiver.received(otherKind.path)).toHaveLength(0)
    expect((await deliveries(owner, inactive.webhook_id)).data).toEqual([])

    const on = await keyed(owner).PATCH("/v1/api/webhooks/{id}", { ...webhookPath(inactive.webhook_id), body: { active: true } })
    expect(on.data?.data.active).toBe(true)
    await send(owner.address, "Second")
    const [resumed] = await receiver.waitFor(inactive.path, 1)
    expect(payloadOf(resumed!).data.subject).toBe("Second")
    await receiver.waitFor(subscribed.path, 2)
    expect(receiver.received(stranger.path)).toHaveLength(1)
  })

  it("a webhook for some mailboxes gets only their events (not events about no mailbox); widened to every mailbox, it gets all", async () => {
    const support = await newBox(server.url)
    await upgrade(server.url, support.user.apiKey, "pro")
    const sales = await newBox(server.url, { user: support.user })
    const narrow = await hook(support, { events: ["email.received", "api_key.created"], mailboxIds: [support.mailboxId] })
    expect(narrow.mailbox_ids).toEqual([support.mailboxId])
    await withToken(server.url, support.user).POST("/v1/api-keys", { body: { name: "not about a mailbox" } })
    await send(sales.address, "For sales")
    await send(support.address, "For support")
    const [first] = await receiver.waitFor(narrow.path, 1)
    expect(payloadOf(first!).data).toMatchObject({ subject: "For support", mailbox_id: support.mailboxId })

    const widened = await keyed(support).PATCH("/v1/api/webhooks/{id}", { ...webhookPath(narrow.webhook_id), body: { mailbox_ids: null } })
    expect(widened.data?.data.mailbox_ids).toBeNull()
    await send(sales.address, "For sales again")
    await receiver.waitFor(narrow.path, 2)
    await new Promise((resolve) => setTimeout(resolve, 500))
    expect(receiver.received(narrow.path).map((r) => payloadOf(r).data.subject)).toEqual(["For support", "For sales again"])
  })

  it("a webhook for some labels gets only events about mail carrying one (a filter's billing); not events that carry none", async () => {
    const box = await newBox(server.url)
    await upgrade(server.url, box.user.apiKey, "pro")
    const filter = await keyed(box).POST("/v1/api/filters", {
      body: { conditions: { subject_contains: ["invoice"] }, actions: { add_labels: ["billing"] } }
    })
    expect(filter.response.status).toBe(201)
    const billing = await hook(box, { events: ["email.received", "email.labels_changed", "api_key.created"], labels: ["billing", "urgent"] })
    expect(billing.labels).toEqual(["billing", "urgent"])
    await withToken(server.url, box.user).POST("/v1/api-keys", { body: { name: "carries no labels" } })
    await send(box.address, "Lunch on Friday?")
    await send(box.address, "Invoice 9")
    const [first] = await receiver.waitFor(billing.path, 1)
    expect(payloadOf(first!)).toMatchObject({ event: "email.received", data: { subject: "Invoice 9", labels: expect.arrayContaining(["inbound", "billing"]) } })

    // Labelled by hand: the change is about mail that now carries one.
    const lunch = await until("lunch listed", async () => {
      const { data } = await keyed(box).GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId: box.mailboxId } } })
      return data?.data.find((e) => e.subject === "Lunch on Friday?")
    })
    await keyed(box).PATCH("/v1/api/emails/{emailId}", { params: { path: { emailId: lunch.email_id } }, body: { add_labels: ["urgent"] } })
    const [, second] = await receiver.waitFor(billing.path, 2)
    expect(payloadOf(second!)).toMatchObject({ event: "email.labels_changed", data: { subject: "Lunch on Friday?", added: ["urgent"] } })
    await new Promise((resolve) => setTimeout(resolve, 500))
    expect(receiver.received(billing.path)).toHaveLength(2)

    const widened = await keyed(box).PATCH("/v1/api/webhooks/{id}", { ...webhookPath(billing.webhook_id), body: { labels: null } })
    expect(widened.data?.data.labels).toBeNull()
  })

  it("api_key.created reaches endpoints subscribed to it", async () => {
    const box = await newBox(server.url)
    const webhook = await hook(box, { events: ["api_key.created"] })
    const created = await withToken(server.url, box.user).POST("/v1/api-keys", { body: { name: "ci key" } })
    expect(created.response.status).toBe(201)
    // The account's first key (made with it, just before the endpoint) may be told to it first: its
    // event can still be on its way when the endpoint is added, and goes to the endpoints there are then.
    const request = await until("ci key's event", async () =>
      receiver.received(webhook.path).find((r) => payloadOf(r).data?.keyId === created.data!.data.keyId))
    expect(verifyWebhook({ secret: webhook.secret, body: request!.body, headers: request!.headers })).toBe(true)
    expect(payloadOf(request!)).toMatchObject({ event: "api_key.created", data: { keyId: created.data!.data.keyId, name: "ci key" } })
    expect(request!.body).not.toContain(created.data!.data.apiKey)
  })
})

// How an endpoint is retried, timed out and reached over TLS is the worker's HTTP client at work, the
// same over either database and bus (the deliveries above log their attempts through the same
// statements in both runs): proved once, in the embedded run.
describe.skipIf(mode !== "embedded")("retries", () => {
  it("500, 500, 200: exactly three attempts, at once, +500 ms, +1000 ms, the same signed body each time", async () => {
    const box = await newBox(server.url)
    const webhook = await hook(box)
    receiver.script(webhook.path, [500, 500, 200])
    await send(box.address, "Retry me")

    const requests = await receiver.waitFor(webhook.path, 3)
    const [first, second, third] = requests
    const gap1 = second!.at - first!.at
    const gap2 = third!.at - second!.at
    expect(gap1).toBeGreaterThanOrEqual(480)
    expect(gap1).toBeLessThan(1000)
    expect(gap2).toBeGreaterThanOrEqual(980)
    expect(gap2).toBeLessThan(1600)
    expect(new Set(requests.map((r) => r.body)).size).toBe(1)
    expect(new Set(requests.map((r) => r.headers["webhook-id"])).size).toBe(1)
    expect(new Set(requests.map((r) => r.headers["x-service-signature"])).size).toBe(1)
    expect(requests.map((r) => r.headers["x-mailroom-attempt"])).toEqual(["1", "2", "3"])
    for (const request of requests) {
      expect(verifyWebhook({ secret: webhook.secret, body: request.body, headers: request.headers })).toBe(true)
    }

    const log = await finished(box, webhook.webhook_id)
    expect(log.data[0]?.status).toBe("succeeded")
    expect(log.data[0]?.attempts.map((a) => [a.status_code, a.error])).toEqual([
      [500, "HTTP 500"],
      [500, "HTTP 500"],
      [200, null]
    ])
    await new Promise((resolve) => setTimeout(resolve, 1000))
    expect(receiver.received(webhook.path)).toHaveLength(3)
  })

  it("500 forever: three attempts, then the failure is in the delivery log and the webhook stays active", async () => {
    const box = await newBox(server.url)
    const webhook = await hook(box)
    receiver.script(webhook.path, [500])
    await send(box.address, "Never accepted")

    await receiver.waitFor(webhook.path, 3)
    const log = await finished(box, webhook.webhook_id)
    expect(log.data[0]).toMatchObject({ status: "failed", completed_at: expect.any(String) })
    expect(log.data[0]?.attempts.map((a) => [a.attempt, a.status_code, a.error])).toEqual([
      [1, 500, "HTTP 500"],
      [2, 500, "HTTP 500"],
      [3, 500, "HTTP 500"]
    ])
    await new Promise((resolve) => setTimeout(resolve, 2500))
    expect(receiver.received(webhook.path)).toHaveLength(3)
    const after = await keyed(box).GET("/v1/api/webhooks/{id}", webhookPath(webhook.webhook_id))
    expect(after.data?.data.active).toBe(true)

    // Fixed, the endpoint gets the failed delivery sent again by hand: the same body and webhook-id, attempt 4.
    receiver.script(webhook.path, [200])
    const deliveryId = log.data[0]!.delivery_id
    const resent = await keyed(box).POST("/v1/api/webhooks/{id}/deliveries/{deliveryId}/resend", {
      params: { path: { id: webhook.webhook_id, deliveryId } }
    })
    expect(resent.response.status).toBe(200)
    expect(resent.data?.data).toMatchObject({ delivery_id: deliveryId, status: "succeeded" })
    expect(resent.data?.data.attempts.map((a) => [a.attempt, a.status_code])).toEqual([[1, 500], [2, 500], [3, 500], [4, 200]])
    const [firstTry, , , again] = receiver.received(webhook.path)
    expect(again!.body).toBe(firstTry!.body)
    expect([again!.headers["webhook-id"], again!.headers["x-mailroom-attempt"]]).toEqual([firstTry!.headers["webhook-id"], "4"])
    expect(verifyWebhook({ secret: webhook.secret, headers: again!.headers, body: again!.body })).toBe(true)
  })

  it("a test event reaches the endpoint signed, and the answer says what it answered; bad asks are refused", async () => {
    const box = await newBox(server.url)
    const webhook = await hook(box, { events: ["email.received", "email.sent"] })
    const tested = await keyed(box).POST("/v1/api/webhooks/{id}/test", { params: { path: { id: webhook.webhook_id }, query: { event: "email.sent" } } })
    expect(tested.response.status).toBe(200)
    expect(tested.data?.data).toMatchObject({ event: "email.sent", succeeded: true, status_code: 200, error: null })
    const [request] = await receiver.waitFor(webhook.path, 1)
    expect(payloadOf(request!)).toEqual(tested.data?.data.payload)
    expect(request!.headers["webhook-id"]).toBe(tested.data?.data.event_id)
    expect(verifyWebhook({ secret: webhook.secret, headers: request!.headers, body: request!.body })).toBe(true)

    receiver.script(webhook.path, [500])
    // No body needed: the webhook's first kind.
    const failing = await keyed(box).POST("/v1/api/webhooks/{id}/test", webhookPath(webhook.webhook_id))
    expect(failing.data?.data).toMatchObject({ event: "email.received", succeeded: false, status_code: 500, error: "HTTP 500" })
    // A test is no delivery: the log stays empty.
    expect((await deliveries(box, webhook.webhook_id)).data).toEqual([])

    const unknownKind = await keyed(box).POST("/v1/api/webhooks/{id}/test", {
      params: { path: { id: webhook.webhook_id }, query: { event: "email.nope" as "email.sent" } }
    })
    expect(unknownKind.response.status).toBe(400)
    expect(unknownKind.error).toMatchObject({ success: false, error: { code: "VALIDATION_ERROR", details: { event: expect.any(String) } } })

    // The kind asked in a JSON body, as a client that posts JSON asks it.
    receiver.script(webhook.path, [200])
    const posted = (body: string, query = "") =>
      fetch(`${server.url}/v1/api/webhooks/${webhook.webhook_id}/test${query}`, {
        method: "POST",
        headers: { "x-api-key": box.user.apiKey, "content-type": "application/json" },
        body
      }).then(async (reply) => ({ status: reply.status, json: await reply.json() }))
    expect(await posted(JSON.stringify({ event: "email.sent" }))).toMatchObject({ status: 200, json: { data: { event: "email.sent", succeeded: true } } })
    expect(await posted(JSON.stringify({ event: "email.sent" }), "?event=email.sent")).toMatchObject({ status: 200 })
    const refusedBodies: Array<[string, string, Record<string, unknown>]> = [
      [JSON.stringify({ event: "email.sent" }), "?event=email.received", { event: "?event=email.received and the body's email.sent differ: name one" }],
      [JSON.stringify({ kind: "email.sent" }), "", { kind: expect.stringMatching(/^is not a field here/) }],
      ["[1]", "", { body: "must be a JSON object" }]
    ]
    for (const [body, query, details] of refusedBodies) {
      expect(await posted(body, query), body).toEqual({ status: 400, json: { success: false, error: { code: "VALIDATION_ERROR", message: expect.any(String), details } } })
    }
    const missing = await keyed(box).POST("/v1/api/webhooks/{id}/deliveries/{deliveryId}/resend", {
      params: { path: { id: webhook.webhook_id, deliveryId: "dlv_missing" } }
    })
    expect(missing.response.status).toBe(404)
    expect(missing.error).toMatchObject({ error: { code: "NOT_FOUND", details: { delivery_id: "dlv_missing" } } })
  })

  it("an endpoint that never answers is cut at 10 s, holds at most 16 deliveries at once, and never delays another endpoint", async () => {
    const slow = await newBox(server.url)
    const slowHook = await hook(slow)
    receiver.script(slowHook.path, ["hang"])
    const fast = await newBox(server.url)
    const fastHook = await hook(fast)

    // More events than one endpoint may hold in flight (16): the rest wait on the bus, not in the way.
    for (let i = 0; i < 20; i++) await send(slow.address, `Slow ${i}`)
    await receiver.waitFor(slowHook.path, 16)
    const sentAt = performance.now()
    await send(fast.address, "Fast")
    const [fastRequest] = await receiver.waitFor(fastHook.path, 1)
    expect(fastRequest!.at - sentAt).toBeLessThan(3000)
    // A 17th delivery may start only once one of the first 16 is cut, 10 s after it began: none arrives
    // before that. (Counting all arrivals instead fails on a loaded machine, where sending the 20
    // messages alone can take longer than the 10 s after which the cut ones free their places.)
    const slowOnes = receiver.received(slowHook.path)
    expect(slowOnes.filter((r) => r.at < slowOnes[0]!.at + 9_900).length).toBeLessThanOrEqual(16)

    const attempt = await until("the first attempt's time-out", async () => {
      const log = await deliveries(slow, slowHook.webhook_id)
      const attempts = log.data.flatMap((d) => d.attempts)
      return attempts[0]
    }, 20_000, 1000)
    expect(attempt.status_code).toBeNull()
    expect(attempt.error).toBe("no answer within 10 s")
    expect(attempt.duration_ms).toBeGreaterThanOrEqual(9_900)
    expect(attempt.duration_ms).toBeLessThan(11_500)
    // Stop the rest of the slow deliveries: deleting the endpoint ends them after their attempt.
    await keyed(slow).DELETE("/v1/api/webhooks/{id}", webhookPath(slowHook.webhook_id))
  })
})

describe.skipIf(mode !== "embedded")("https", () => {
  const tlsServer = async (certificate: Certificate) => {
    const server = https.createServer({ key: certificate.key, cert: certificate.cert }, (request, response) => {
      const chunks: Array<Buffer> = []
      request.on("data", (chunk: Buffer) => chunks.push(chunk))
      request.on("end", () => {
        tlsReceived.push({ headers: request.headers, body: Buffer.concat(chunks).toString("utf8") })
        response.end("ok")
      })
    })
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()))
    return { server, port: (server.address() as AddressInfo).port }
  }
  const tlsReceived: Array<{ headers: Record<string, string | Array<string> | undefined>; body: string }> = []

  it("delivers over TLS to the checked address, verifying the certificate against the URL's host", async () => {
    const { server: tls, port } = await tlsServer(trusted)
    try {
      const box = await newBox(server.url)
      const webhook = await hook(box, { path: "/unused" })
      await keyed(box).PATCH("/v1/api/webhooks/{id}", { ...webhookPath(webhook.webhook_id), body: { url: `https://localhost:${port}/hook` } })
      await send(box.address, "Over TLS")
      const log = await finished(box, webhook.webhook_id)
      expect(log.data[0]).toMatchObject({ status: "succeeded", attempts: [{ status_code: 200, error: null }] })
      expect(tlsReceived).toHaveLength(1)
      expect(verifyWebhook({ secret: webhook.secret, body: tlsReceived[0]!.body, headers: tlsReceived[0]!.headers })).toBe(true)
    } finally {
      tls.close()
    }
  })

  it.each([
    ["a self-signed certificate", () => untrusted, "localhost", /self[- ]signed certificate/i],
    ["a certificate for another name", () => trusted, "127.0.0.1", /does not match certificate's altnames/i]
  ])("refuses %s: no payload is sent, and the log says why", async (_, certificate, host, error) => {
    const { server: tls, port } = await tlsServer(certificate())
    const before = tlsReceived.length
    try {
      const box = await newBox(server.url)
      const webhook = await hook(box, { path: "/unused" })
      await keyed(box).PATCH("/v1/api/webhooks/{id}", { ...webhookPath(webhook.webhook_id), body: { url: `https://${host}:${port}/hook` } })
      await send(box.address, "Over bad TLS")
      const log = await finished(box, webhook.webhook_id)
      expect(log.data[0]?.status).toBe("failed")
      expect(log.data[0]?.attempts).toHaveLength(3)
      for (const attempt of log.data[0]!.attempts) {
        expect(attempt.status_code).toBeNull()
        expect(attempt.error).toMatch(error)
      }
      expect(tlsReceived.length).toBe(before)
    } finally {
      tls.close()
    }
  })
})

describe("crash safety", () => {
  it("a worker killed in the middle of a delivery delivers the event after it restarts, under the same webhook-id", async () => {
    const box = await newBox(server.url)
    const webhook = await hook(box)
    receiver.script(webhook.path, ["hang", 200])
    await send(box.address, "Survive the crash")
    const [first] = await receiver.waitFor(webhook.path, 1)

    await server.kill()
    server = await startServer({ ...backend.env, ...env, PORT: String(server.port), SMTP_PORT: String(server.smtpPort) })

    // NATS gives an unacknowledged message back after the consumer's ack wait (20 s); the embedded bus at start.
    const requests = await receiver.waitFor(webhook.path, 2, 40_000)
    expect(requests[1]!.headers["webhook-id"]).toBe(first!.headers["webhook-id"])
    expect(requests[1]!.body).toBe(first!.body)
    const log = await finished(box, webhook.webhook_id)
    expect(log.data).toHaveLength(1)
    expect(log.data[0]?.status).toBe("succeeded")
  }, 90_000)
})

describe.skipIf(mode !== "postgres")("webhooks changed on another node", () => {
  let qdrant: FakeQdrant
  /** A second node, serving the API only: the suite's server (every role) is the worker. */
  let api: Server

  beforeAll(async () => {
    // A node of a cluster needs a vector index every node shares; this PostgreSQL has no pgvector.
    qdrant = await startFakeQdrant()
    api = await startServer({ ...backend.env, ...env, ROLES: "api", QDRANT_URL: qdrant.url })
  })

  afterAll(async () => {
    await api?.stop()
    await qdrant?.close()
  })

  it("endpoints created or changed on an API node receive the worker's very next event (the worker keeps an account's endpoints)", async () => {
    const box = await newBox(api.url)
    await upgrade(api.url, box.user.apiKey, "pro")
    const caller = withKey(api.url, box.user)
    const newHook = async () => {
      const path = `/${fresh("hook")}`
      const reply = await caller.POST("/v1/api/webhooks", { body: { url: `${receiver.url}${path}`, events: ["api_key.created"] } })
      expect(reply.response.status).toBe(201)
      return { id: reply.data!.data.webhook_id, path }
    }
    const newKey = async () => expect((await withToken(api.url, box.user).POST("/v1/api-keys", { body: { name: "k" } })).response.status).toBe(201)

    // The worker looks the account's endpoints up for this event, and keeps them.
    const first = await newHook()
    await newKey()
    await receiver.waitFor(first.path, 1)

    // A second endpoint, made on the API node: the worker's next event reaches both.
    const second = await newHook()
    await newKey()
    await receiver.waitFor(first.path, 2)
    await receiver.waitFor(second.path, 1)

    // Deactivated there: the next event reaches only the first (each event's deliveries run side by side).
    const paused = await caller.PATCH("/v1/api/webhooks/{id}", { ...webhookPath(second.id), body: { active: false } })
    expect(paused.response.status).toBe(200)
    await newKey()
    await receiver.waitFor(first.path, 3)
    await sleep(300)
    expect(receiver.received(second.path)).toHaveLength(1)
  }, 60_000)
})
