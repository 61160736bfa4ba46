/**
 * The webhook routes (SPEC "Webhooks") as a production server runs them: private targets refused
 * (WEBHOOK_ALLOW_PRIVATE unset), names resolved by a DNS server the test runs (DNS_SERVERS), and a
 * hostname that is later pointed at a private address refused again at delivery time.
 */
import * as net from "node:net"
import nodemailer from "nodemailer"
import { afterAll, describe, expect, it } from "vitest"
import { upgrade } from "../support/billing.ts"
import { type DnsServer, startDnsServer } from "../support/dns-server.ts"
import { client, type Client, isoMillis, withApiKey } from "../support/http.ts"
import { newBox } from "../support/mailboxes.ts"
import { type SuiteServer, useSuiteServer } from "../support/server.ts"
import { until } from "../support/wait.ts"

const PUBLIC_IP = "93.184.216.34"

const dns: DnsServer = await startDnsServer()
dns.set("hooks.example.test", { A: [PUBLIC_IP] })
dns.set("internal.example.test", { A: ["127.0.0.1"] })
dns.set("mixed.example.test", { A: [PUBLIC_IP, "10.1.2.3"] })
dns.set("v6private.example.test", { AAAA: ["fd00::5"] })
afterAll(() => dns.close())

let suite: SuiteServer
let api: Client
useSuiteServer((s) => {
  suite = s
  api = client(s.url)
}, { DNS_SERVERS: dns.address })

const URL_OK = "https://hooks.example.test/mailroom"

const create = (apiKey: string, body: unknown) => api.post("/v1/api/webhooks", { apiKey, body })

describe("POST /v1/api/webhooks", () => {
  it("creates an active webhook and shows its generated secret in full, this once", async () => {
    const user = await withApiKey(api)
    const reply = await create(user.apiKey, { url: URL_OK, events: ["email.received", "api_key.created"] })
    expect(reply.status).toBe(201)
    expect(reply.body).toEqual({
      success: true,
      data: {
        webhook_id: expect.stringMatching(/^whk_[0-9a-f]{24}$/),
        url: URL_OK,
        events: ["email.received", "api_key.created"],
        secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]{43}=$/),
        secret_masked: expect.any(String),
        active: true,
        created_at: expect.stringMatching(isoMillis)
      }
    })
    const { secret, secret_masked } = reply.body.data
    expect(secret_masked).toBe(`whsec_********${secret.slice(-4)}`)
    expect(secret_masked).not.toContain(secret.slice(6, 20))
  })

  it("keeps a secret the caller chose, and lists each event kind once", async () => {
    const user = await withApiKey(api)
    const reply = await create(user.apiKey, {
      url: "https://8.8.8.8/hook",
      events: ["email.processed", "email.processed", "email.received"],
      secret: "my-signing-secret-0001"
    })
    expect(reply.status).toBe(201)
    expect(reply.body.data).toMatchObject({
      url: "https://8.8.8.8/hook",
      events: ["email.processed", "email.received"],
      secret: "my-signing-secret-0001",
      secret_masked: "********0001"
    })
  })

  it.each([
    [{}, { url: "is required", events: "is required" }],
    [{ url: URL_OK }, { events: "is required" }],
    [{ url: URL_OK, events: [] }, { events: "must list at least one of email.received, email.processed, email.labels_changed, email.sent, email.delivery_delayed, email.bounced, email.failed, api_key.created" }],
    [{ url: URL_OK, events: ["email.received", "email.deleted"] }, {
      events: "\"email.deleted\" is not an event kind; supported: email.received, email.processed, email.labels_changed, email.sent, email.delivery_delayed, email.bounced, email.failed, api_key.created"
    }],
    [{ url: URL_OK, events: "email.received" }, { events: expect.any(String) }],
    [{ url: 42, events: ["email.received"] }, { url: expect.any(String) }],
    [{ url: URL_OK, events: ["email.received"], secret: "short" }, { secret: "must be 8-256 printable ASCII characters without spaces" }],
    [{ url: URL_OK, events: ["email.received"], secret: "has a space in it" }, {
      secret: "must be 8-256 printable ASCII characters without spaces"
    }],
    [{ url: "http://hooks.example.test/mailroom", events: ["email.received"] }, { url: "must use https" }],
    [{ url: "ftp://hooks.example.test/", events: ["email.received"] }, { url: "must use https" }],
    [{ url: "hooks.example.test/mailroom", events: ["email.received"] }, { url: "must be an absolute URL, such as https://example.com/webhooks" }]
  ])("refuses %j: 400 VALIDATION_ERROR with details %j", async (body, details) => {
    const user = await withApiKey(api)
    const reply = await create(user.apiKey, body)
    expect(reply.status).toBe(400)
    expect(reply.body).toEqual({ success: false, error: { code: "VALIDATION_ERROR", message: expect.any(String), details } })
  })

  it("refuses a body that is not a JSON object", async () => {
    const user = await withApiKey(api)
    for (const raw of ["", "null", "[1]", "{not json"]) {
      const reply = await api.post("/v1/api/webhooks", { apiKey: user.apiKey, raw, headers: { "content-type": "application/json" } })
      expect(reply.status, raw).toBe(400)
      expect(["VALIDATION_ERROR", "BAD_REQUEST"]).toContain(reply.body.error.code)
    }
  })

  it.each([
    ["https://127.0.0.1/hook", "127.0.0.1 is a loopback address; webhooks are delivered to public addresses only"],
    ["https://10.0.0.1/hook", "10.0.0.1 is a private address; webhooks are delivered to public addresses only"],
    ["https://192.168.0.10:8443/hook", "192.168.0.10 is a private address; webhooks are delivered to public addresses only"],
    ["https://169.254.169.254/latest/meta-data/", "169.254.169.254 is a link-local address; webhooks are delivered to public addresses only"],
    ["https://[::1]/hook", "::1 is a loopback address; webhooks are delivered to public addresses only"],
    ["https://[fd00::1]/hook", "fd00::1 is a unique-local address; webhooks are delivered to public addresses only"],
    ["https://[::ffff:127.0.0.1]/hook", "::ffff:7f00:1 is a loopback address; webhooks are delivered to public addresses only"],
    ["https://localhost/hook", "localhost resolves to 127.0.0.1, a loopback address; webhooks are delivered to public addresses only"],
    ["https://internal.example.test/hook", "internal.example.test resolves to 127.0.0.1, a loopback address; webhooks are delivered to public addresses only"],
    ["https://mixed.example.test/hook", "mixed.example.test resolves to 10.1.2.3, a private address; webhooks are delivered to public addresses only"],
    ["https://v6private.example.test/hook", "v6private.example.test resolves to fd00::5, a unique-local address; webhooks are delivered to public addresses only"],
    ["https://nowhere.example.test/hook", "nowhere.example.test does not resolve"],
    ["http://127.0.0.1:8080/hook", "must use https"]
  ])("refuses %s: 400 VALIDATION_ERROR (%s)", async (url, message) => {
    const user = await withApiKey(api)
    const reply = await create(user.apiKey, { url, events: ["email.received"] })
    expect(reply.status).toBe(400)
    expect(reply.body).toEqual({ success: false, error: { code: "VALIDATION_ERROR", message: `url: ${message}`, details: { url: message } } })
  })

  it("holds the plan's endpoint limit: free 1 (403 WEBHOOK_QUOTA), pro 25", async () => {
    const user = await withApiKey(api)
    expect((await create(user.apiKey, { url: URL_OK, events: ["email.received"] })).status).toBe(201)
    const over = await create(user.apiKey, { url: URL_OK, events: ["email.received"] })
    expect(over.status).toBe(403)
    expect(over.body).toEqual({
      success: false,
      error: { code: "WEBHOOK_QUOTA", message: "The free plan allows 1 webhook", details: { count: 1, limit: 1, plan: "free" } }
    })

    await upgrade(suite.url, user.apiKey, "pro")
    const made = await Promise.all(
      Array.from({ length: 26 }, (_, i) => create(user.apiKey, { url: `${URL_OK}/${i}`, events: ["email.received"] }))
    )
    // Concurrent creates cannot overshoot: exactly 24 more fit beside the first.
    expect(made.filter((r) => r.status === 201)).toHaveLength(24)
    const refused = made.filter((r) => r.status === 403)
    expect(refused).toHaveLength(2)
    expect(refused[0]!.body.error).toEqual({
      code: "WEBHOOK_QUOTA",
      message: "The pro plan allows 25 webhooks",
      details: { count: 25, limit: 25, plan: "pro" }
    })
  })

  it("needs a credential: 401 UNAUTHORIZED", async () => {
    const reply = await api.post("/v1/api/webhooks", { body: { url: URL_OK, events: ["email.received"] } })
    expect(reply.status).toBe(401)
    expect(reply.body.error.code).toBe("UNAUTHORIZED")
    const bad = await api.get("/v1/api/webhooks", { bearer: "mr_not-a-real-key" })
    expect(bad.status).toBe(401)
    expect(bad.body.error.code).toBe("UNAUTHORIZED")
  })
})

describe("reading, updating and deleting", () => {
  it("lists with secret_masked only and spells the time createdAt; get spells it created_at", async () => {
    const user = await withApiKey(api)
    await upgrade(suite.url, user.apiKey, "pro")
    const first = (await create(user.apiKey, { url: `${URL_OK}/1`, events: ["email.received"] })).body.data
    const second = (await create(user.apiKey, { url: `${URL_OK}/2`, events: ["api_key.created"] })).body.data

    const list = await api.get("/v1/api/webhooks", { bearer: user.apiKey })
    expect(list.status).toBe(200)
    const item = (w: typeof first) => ({
      webhook_id: w.webhook_id,
      url: w.url,
      events: w.events,
      secret_masked: w.secret_masked,
      active: true,
      createdAt: w.created_at
    })
    expect(list.body).toEqual({
      success: true,
      data: [item(second), item(first)],
      meta: { total: 2, limit: 20, offset: 0, hasMore: false }
    })
    expect(list.text).not.toContain(first.secret)

    const paged = await api.get("/v1/api/webhooks?limit=1&offset=1&sort=createdAt:asc", { apiKey: user.apiKey })
    expect(paged.body).toEqual({ success: true, data: [item(second)], meta: { total: 2, limit: 1, offset: 1, hasMore: false } })
    const past = await api.get("/v1/api/webhooks?offset=5", { apiKey: user.apiKey })
    expect(past.body).toEqual({ success: true, data: [], meta: { total: 2, limit: 20, offset: 5, hasMore: false } })
    const byUrl = await api.get("/v1/api/webhooks?sort=url:desc", { apiKey: user.apiKey })
    expect(byUrl.body.data.map((w: { url: string }) => w.url)).toEqual([second.url, first.url])
    const bad = await api.get("/v1/api/webhooks?limit=0&sort=secret:asc", { apiKey: user.apiKey })
    expect(bad.status).toBe(400)
    expect(bad.body.error.code).toBe("VALIDATION_ERROR")
    expect(Object.keys(bad.body.error.details).sort()).toEqual(["limit", "sort"])

    const got = await api.get(`/v1/api/webhooks/${first.webhook_id}`, { bearer: user.apiKey })
    expect(got.status).toBe(200)
    expect(got.body).toEqual({
      success: true,
      data: {
        webhook_id: first.webhook_id,
        url: first.url,
        events: ["email.received"],
        secret_masked: first.secret_masked,
        active: true,
        created_at: first.created_at
      }
    })
  })

  it("updates url, events and active without showing the secret; a new secret is shown in full once", async () => {
    const user = await withApiKey(api)
    const webhook = (await create(user.apiKey, { url: URL_OK, events: ["email.received"] })).body.data
    const path = `/v1/api/webhooks/${webhook.webhook_id}`

    const changed = await api.patch(path, {
      bearer: user.apiKey,
      body: { url: "https://hooks.example.test/v2", events: ["email.processed", "api_key.created"], active: false }
    })
    expect(changed.status).toBe(200)
    expect(changed.body).toEqual({
      success: true,
      data: {
        webhook_id: webhook.webhook_id,
        url: "https://hooks.example.test/v2",
        events: ["email.processed", "api_key.created"],
        secret_masked: webhook.secret_masked,
        active: false,
        created_at: webhook.created_at
      }
    })

    const unchanged = await api.patch(path, { bearer: user.apiKey, body: {} })
    expect(unchanged.status).toBe(200)
    expect(unchanged.body.data).toEqual(changed.body.data)

    const rotated = await api.patch(path, { bearer: user.apiKey, body: { secret: "a-brand-new-secret-9876" } })
    expect(rotated.status).toBe(200)
    expect(rotated.body.data).toEqual({ ...changed.body.data, secret: "a-brand-new-secret-9876", secret_masked: "********9876" })

    const after = await api.get(path, { bearer: user.apiKey })
    expect(after.body.data).toEqual({ ...changed.body.data, secret_masked: "********9876" })
    expect(after.text).not.toContain("a-brand-new-secret")
  })

  it.each([
    [{ url: "https://10.0.0.1/x" }, { url: "10.0.0.1 is a private address; webhooks are delivered to public addresses only" }],
    [{ url: "http://hooks.example.test/x" }, { url: "must use https" }],
    [{ events: [] }, { events: "must list at least one of email.received, email.processed, email.labels_changed, email.sent, email.delivery_delayed, email.bounced, email.failed, api_key.created" }],
    [{ active: "no" }, { active: expect.any(String) }],
    [{ secret: "tiny" }, { secret: "must be 8-256 printable ASCII characters without spaces" }]
  ])("refuses the update %j: 400 VALIDATION_ERROR with details %j, and changes nothing", async (body, details) => {
    const user = await withApiKey(api)
    const webhook = (await create(user.apiKey, { url: URL_OK, events: ["email.received"] })).body.data
    const path = `/v1/api/webhooks/${webhook.webhook_id}`
    const reply = await api.patch(path, { bearer: user.apiKey, body })
    expect(reply.status).toBe(400)
    expect(reply.body).toEqual({ success: false, error: { code: "VALIDATION_ERROR", message: expect.any(String), details } })
    const { secret: _, ...stored } = webhook
    expect((await api.get(path, { bearer: user.apiKey })).body.data).toEqual(stored)
  })

  it("deletes: data.message, then the webhook is gone", async () => {
    const user = await withApiKey(api)
    const webhook = (await create(user.apiKey, { url: URL_OK, events: ["email.received"] })).body.data
    const path = `/v1/api/webhooks/${webhook.webhook_id}`
    const removed = await api.delete(path, { bearer: user.apiKey })
    expect(removed.status).toBe(200)
    expect(removed.body).toEqual({ success: true, data: { message: `Webhook ${webhook.webhook_id} deleted` } })
    const notFound = { success: false, error: { code: "NOT_FOUND", message: "Webhook not found", details: { webhook_id: webhook.webhook_id } } }
    expect((await api.get(path, { bearer: user.apiKey })).body).toEqual(notFound)
    expect((await api.delete(path, { bearer: user.apiKey })).body).toEqual(notFound)
    expect((await api.get("/v1/api/webhooks", { bearer: user.apiKey })).body.data).toEqual([])
    // The slot is free again.
    expect((await create(user.apiKey, { url: URL_OK, events: ["email.received"] })).status).toBe(201)
  })

  it("someone else's webhook is not found, whatever the route", async () => {
    const owner = await withApiKey(api)
    const stranger = await withApiKey(api)
    const webhook = (await create(owner.apiKey, { url: URL_OK, events: ["email.received"] })).body.data
    const path = `/v1/api/webhooks/${webhook.webhook_id}`
    const replies = [
      await api.get(path, { bearer: stranger.apiKey }),
      await api.patch(path, { bearer: stranger.apiKey, body: { active: false } }),
      await api.patch(path, { bearer: stranger.apiKey, body: { url: "https://10.0.0.1/" } }),
      await api.delete(path, { bearer: stranger.apiKey }),
      await api.get(`${path}/deliveries`, { bearer: stranger.apiKey })
    ]
    for (const reply of replies) {
      expect(reply.status).toBe(404)
      expect(reply.body).toEqual({ success: false, error: { code: "NOT_FOUND", message: "Webhook not found", details: { webhook_id: webhook.webhook_id } } })
    }
    expect((await api.get("/v1/api/webhooks", { bearer: stranger.apiKey })).body.data).toEqual([])
    // Untouched by any of it.
    expect((await api.get(path, { bearer: owner.apiKey })).body.data).toMatchObject({ active: true })
  })
})

describe("delivery-time checks", () => {
  it("a host re-pointed at a loopback address after it was saved gets no connection; the refusals are logged", async () => {
    // Anything that connects here would be the webhook reaching inside our network.
    let connections = 0
    const inside = net.createServer((socket) => {
      connections++
      socket.destroy()
    })
    await new Promise<void>((resolve) => inside.listen(0, "127.0.0.1", () => resolve()))
    const port = (inside.address() as net.AddressInfo).port
    try {
      const name = `rebind-${Date.now()}.example.test`
      dns.set(name, { A: [PUBLIC_IP] })
      const box = await newBox(api.url)
      const webhook = (await create(box.user.apiKey, { url: `https://${name}:${port}/hook`, events: ["email.received"] })).body.data
      expect(webhook.webhook_id).toBeDefined()

      dns.set(name, { A: ["127.0.0.1"] })
      const transport = nodemailer.createTransport({ host: "127.0.0.1", port: suite.server.smtpPort, secure: false, ignoreTLS: true })
      await transport.sendMail({ from: "sender@example.com", to: box.address, subject: "Rebound", text: "Where does this go?" })

      const delivery = await until("a failed delivery", async () => {
        const log = await api.get(`/v1/api/webhooks/${webhook.webhook_id}/deliveries`, { apiKey: box.user.apiKey })
        return log.body.data[0]?.status === "failed" ? log.body.data[0] : undefined
      })
      const refusal = `${name} resolves to 127.0.0.1, a loopback address; webhooks are delivered to public addresses only`
      expect(delivery).toMatchObject({ event: "email.received", status: "failed" })
      expect(delivery.attempts.map((a: { attempt: number; status_code: number | null; error: string }) => [a.attempt, a.status_code, a.error])).toEqual([
        [1, null, refusal],
        [2, null, refusal],
        [3, null, refusal]
      ])
      expect(connections).toBe(0)
      expect(dns.questions()).toContain(`A ${name} udp`)
    } finally {
      inside.close()
    }
  })
})
