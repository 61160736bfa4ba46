/**
 * The webhook routes (SPEC "Webhooks") as a production server runs them: private targets refused
 * (WEBHOOK_ALLOW_PRIVATE unset), names resolved by a DNS server the test runs (DNS_SERVERS), and a
 * hostname that is later pointed at a private address refused again at delivery time.
 */
import * as net from "node:net"
import nodemailer from "nodemailer"
import { afterAll, describe, expect, it } from "vitest"
import type { components } from "../../packages/client/src/fetch-client.ts"
import { isoMillis, withApiKey } from "../support/accounts.ts"
import { upgrade } from "../support/billing.ts"
import { type DnsServer, startDnsServer } from "../support/dns-server.ts"
import { newBox } from "../support/mailboxes.ts"
import { type SuiteServer, useSuiteServer } from "../support/server.ts"
import { anonymous, offContract, rawJsonBody, withKey, withToken } from "../support/typed-client.ts"
import { until } from "../support/wait.ts"

const PUBLIC_IP = "93.184.216.34"

const dns: DnsServer = await startDnsServer()
dns.set("hooks.example.test", { A: [PUBLIC_IP] })
dns.set("internal.example.test", { A: ["127.0.0.1"] })
dns.set("mixed.example.test", { A: [PUBLIC_IP, "10.1.2.3"] })
dns.set("v6private.example.test", { AAAA: ["fd00::5"] })
afterAll(() => dns.close())

let suite: SuiteServer
useSuiteServer((s) => {
  suite = s
}, { DNS_SERVERS: dns.address })

const URL_OK = "https://hooks.example.test/mailroom"

type CreateInput = components["schemas"]["CreateWebhookInput"]

const keyed = (apiKey: string) => withKey(suite.url, { apiKey })
/** The API key sent as a bearer token, which the routes take as well. */
const bearer = (apiKey: string) => withToken(suite.url, { accessToken: apiKey })
const create = (apiKey: string, body: CreateInput) => keyed(apiKey).POST("/v1/api/webhooks", { body })
const webhookPath = (id: string) => ({ params: { path: { id } } })

describe("POST /v1/api/webhooks", () => {
  it("creates an active webhook and shows its generated secret in full, this once", async () => {
    const user = await withApiKey(suite.url)
    const reply = await create(user.apiKey, { url: URL_OK, events: ["email.received", "api_key.created"] })
    expect(reply.response.status).toBe(201)
    expect(reply.data).toEqual({
      success: true,
      data: {
        webhook_id: expect.stringMatching(/^whk_[0-9a-f]{24}$/),
        url: URL_OK,
        events: ["email.received", "api_key.created"],
        secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]{43}=$/),
        secret_masked: expect.any(String),
        active: true,
        created_at: expect.stringMatching(isoMillis),
        mailbox_ids: null,
        labels: null,
        held_by_plan: false
      }
    })
    const { secret, secret_masked } = reply.data!.data
    expect(secret_masked).toBe(`whsec_********${secret.slice(-4)}`)
    expect(secret_masked).not.toContain(secret.slice(6, 20))
  })

  it("keeps a secret the caller chose, and lists each event kind once", async () => {
    const user = await withApiKey(suite.url)
    const reply = await create(user.apiKey, {
      url: "https://8.8.8.8/hook",
      events: ["email.processed", "email.processed", "email.received"],
      secret: "my-signing-secret-0001"
    })
    expect(reply.response.status).toBe(201)
    expect(reply.data?.data).toMatchObject({
      url: "https://8.8.8.8/hook",
      events: ["email.processed", "email.received"],
      secret: "my-signing-secret-0001",
      secret_masked: "********0001"
    })
  })

  it.each([
    [{}, { url: "is required", events: "is required" }],
    [{ url: URL_OK }, { events: "is required" }],
    [{ url: URL_OK, events: [] }, { events: "must list at least one of email.received, email.processed, email.labels_changed, email.deleted, email.sent, email.delivery_delayed, email.bounced, email.failed, email.unsubscribed, email.complained, meeting.answered, invitation.received, schedule.reminder, api_key.created" }],
    [{ url: URL_OK, events: ["email.received", "email.archived"] }, {
      events: "\"email.archived\" is not an event kind; supported: email.received, email.processed, email.labels_changed, email.deleted, email.sent, email.delivery_delayed, email.bounced, email.failed, email.unsubscribed, email.complained, meeting.answered, invitation.received, schedule.reminder, api_key.created"
    }],
    [{ url: URL_OK, events: "email.received" }, { events: expect.any(String) }],
    [{ url: 42, events: ["email.received"] }, { url: expect.any(String) }],
    [{ url: URL_OK, events: ["email.received"], secret: "short" }, { secret: "must be 8-256 printable ASCII characters without spaces" }],
    [{ url: URL_OK, events: ["email.received"], secret: "has a space in it" }, {
      secret: "must be 8-256 printable ASCII characters without spaces"
    }],
    // The Standard Webhooks signature is keyed with what a whsec_ secret's base64 stands for: here 1 byte.
    [{ url: URL_OK, events: ["email.received"], secret: "whsec_AA" }, {
      secret: "must stand for at least 24 bytes when written whsec_<base64> (this one stands for 1); leave it out to have one generated"
    }],
    [{ url: "http://hooks.example.test/mailroom", events: ["email.received"] }, { url: "must use https" }],
    [{ url: "ftp://hooks.example.test/", events: ["email.received"] }, { url: "must use https" }],
    [{ url: "hooks.example.test/mailroom", events: ["email.received"] }, { url: "must be an absolute URL, such as https://example.com/webhooks" }],
    [{ url: URL_OK, events: ["email.received"], labels: [] }, { labels: "must list at least one label (null: mail with any labels)" }],
    [{ url: URL_OK, events: ["email.received"], labels: ["billing", "a,b"] }, { "labels.1": "must not contain a comma" }],
    [{ url: URL_OK, events: ["email.received"], labels: "billing" }, { labels: expect.any(String) }],
    // An endpoint that would never be sent any event it asks for: those events carry no labels to match.
    [{ url: URL_OK, events: ["email.sent", "email.bounced"], labels: ["billing"] }, {
      events: "would never be sent any of these events: email.sent carries no labels; email.bounced carries no labels, and the webhook is narrowed to labels"
    }],
    // A misspelt field (the keys' camelCase) is refused, not dropped: dropped, this webhook would get every mailbox's mail.
    [{ url: URL_OK, events: ["email.received"], mailboxIds: ["mbx_x"] }, { mailboxIds: expect.stringMatching(/^is not a field here; the fields are .*mailbox_ids/) }]
  ])("refuses %j: 400 VALIDATION_ERROR with details %j", async (body, details) => {
    const user = await withApiKey(suite.url)
    const reply = await create(user.apiKey, offContract(body))
    expect(reply.response.status).toBe(400)
    expect(reply.error).toEqual({ success: false, error: { code: "VALIDATION_ERROR", message: expect.any(String), details } })
  })

  it("refuses a body that is not a JSON object", async () => {
    const user = await withApiKey(suite.url)
    for (const raw of ["", "null", "[1]", "{not json"]) {
      const reply = await keyed(user.apiKey).POST("/v1/api/webhooks", rawJsonBody(raw))
      expect(reply.response.status, raw).toBe(400)
      expect(["VALIDATION_ERROR", "BAD_REQUEST"]).toContain(reply.error?.error.code)
    }
  })

  it.each([
    ["https://127.0.0.1/hook", "127.0.0.1 is a loopback address; webhooks are delivered to public addresses only"],
    ["https://10.0.0.1/hook", "10.0.0.1 is a private address; webhooks are delivered to public addresses only"],
    ["https://192.168.0.10:8443/hook", "192.168.0.10 is a private address; webhooks are delivered to public addresses only"],
    ["https://169.254.169.254/latest/meta-data/", "169.254.169.254 is a link-local address; webhooks are delivered to public addresses only"],
    ["https://[::1]/hook", "::1 is a loopback address; webhooks are delivered to public addresses only"],
    ["https://[fd00::1]/hook", "fd00::1 is a unique-local address; webhooks are delivered to public addresses only"],
    ["https://0.0.0.0/hook", "0.0.0.0 is an unspecified address; webhooks are delivered to public addresses only"],
    ["https://[::ffff:127.0.0.1]/hook", "::ffff:7f00:1 is a loopback address; webhooks are delivered to public addresses only"],
    ["https://localhost/hook", "localhost resolves to 127.0.0.1, a loopback address; webhooks are delivered to public addresses only"],
    ["https://internal.example.test/hook", "internal.example.test resolves to 127.0.0.1, a loopback address; webhooks are delivered to public addresses only"],
    ["https://mixed.example.test/hook", "mixed.example.test resolves to 10.1.2.3, a private address; webhooks are delivered to public addresses only"],
    ["https://v6private.example.test/hook", "v6private.example.test resolves to fd00::5, a unique-local address; webhooks are delivered to public addresses only"],
    ["https://nowhere.example.test/hook", "nowhere.example.test does not resolve"],
    ["http://127.0.0.1:8080/hook", "must use https"]
  ])("refuses %s: 400 VALIDATION_ERROR (%s)", async (url, message) => {
    const user = await withApiKey(suite.url)
    const reply = await create(user.apiKey, { url, events: ["email.received"] })
    expect(reply.response.status).toBe(400)
    expect(reply.error).toEqual({ success: false, error: { code: "VALIDATION_ERROR", message: `url: ${message}`, details: { url: message } } })
  })

  it("holds the plan's endpoint limit: free 1 (403 WEBHOOK_QUOTA), pro 25", async () => {
    const user = await withApiKey(suite.url)
    expect((await create(user.apiKey, { url: URL_OK, events: ["email.received"] })).response.status).toBe(201)
    const over = await create(user.apiKey, { url: URL_OK, events: ["email.received"] })
    expect(over.response.status).toBe(403)
    expect(over.error).toEqual({
      success: false,
      error: { code: "WEBHOOK_QUOTA", message: "The free plan allows 1 webhook", details: { count: 1, limit: 1, plan: "free" } }
    })

    await upgrade(suite.url, user.apiKey, "pro")
    const made = await Promise.all(
      Array.from({ length: 26 }, (_, i) => create(user.apiKey, { url: `${URL_OK}/${i}`, events: ["email.received"] }))
    )
    // Concurrent creates cannot overshoot: exactly 24 more fit beside the first.
    expect(made.filter((r) => r.response.status === 201)).toHaveLength(24)
    const refused = made.filter((r) => r.response.status === 403)
    expect(refused).toHaveLength(2)
    expect(refused[0]!.error?.error).toEqual({
      code: "WEBHOOK_QUOTA",
      message: "The pro plan allows 25 webhooks",
      details: { count: 25, limit: 25, plan: "pro" }
    })
  })

  it("needs a credential: 401 UNAUTHORIZED", async () => {
    const reply = await anonymous(suite.url).POST("/v1/api/webhooks", { body: { url: URL_OK, events: ["email.received"] } })
    expect(reply.response.status).toBe(401)
    expect(reply.error?.error.code).toBe("UNAUTHORIZED")
    const bad = await bearer("mr_not-a-real-key").GET("/v1/api/webhooks")
    expect(bad.response.status).toBe(401)
    expect(bad.error?.error.code).toBe("UNAUTHORIZED")
  })
})

describe("reading, updating and deleting", () => {
  it("lists with secret_masked only and spells the time createdAt; get spells it created_at", async () => {
    const user = await withApiKey(suite.url)
    await upgrade(suite.url, user.apiKey, "pro")
    const first = (await create(user.apiKey, { url: `${URL_OK}/1`, events: ["email.received"] })).data!.data
    const second = (await create(user.apiKey, { url: `${URL_OK}/2`, events: ["api_key.created"] })).data!.data

    const list = await bearer(user.apiKey).GET("/v1/api/webhooks")
    expect(list.response.status).toBe(200)
    const item = (w: typeof first) => ({
      webhook_id: w.webhook_id,
      url: w.url,
      events: w.events,
      secret_masked: w.secret_masked,
      active: true,
      createdAt: w.created_at,
      mailbox_ids: null,
      labels: null,
      held_by_plan: false
    })
    expect(list.data).toEqual({
      success: true,
      data: [item(second), item(first)],
      meta: { total: 2, limit: 20, offset: 0, hasMore: false }
    })
    expect(JSON.stringify(list.data)).not.toContain(first.secret)

    const listed = (query: { limit?: number; offset?: number; sort?: string }) => keyed(user.apiKey).GET("/v1/api/webhooks", { params: { query } })
    const paged = await listed({ limit: 1, offset: 1, sort: "created_at:asc" })
    expect(paged.data).toEqual({ success: true, data: [item(second)], meta: { total: 2, limit: 1, offset: 1, hasMore: false } })
    // The field as a webhook names it (created_at), or as these lists first took it (createdAt).
    expect((await listed({ sort: "createdAt:asc" })).data?.data).toEqual([item(first), item(second)])
    expect((await listed({ sort: "created_at:desc" })).data?.data).toEqual([item(second), item(first)])
    const past = await listed({ offset: 5 })
    expect(past.data).toEqual({ success: true, data: [], meta: { total: 2, limit: 20, offset: 5, hasMore: false } })
    const byUrl = await listed({ sort: "url:desc" })
    expect(byUrl.data?.data.map((w) => w.url)).toEqual([second.url, first.url])
    const bad = await listed({ limit: 0, sort: "secret:asc" })
    expect(bad.response.status).toBe(400)
    expect(bad.error?.error.code).toBe("VALIDATION_ERROR")
    expect(Object.keys(bad.error?.error.details ?? {}).sort()).toEqual(["limit", "sort"])
    expect(bad.error?.error.details?.sort).toBe("must be <field>:<asc|desc> with field one of created_at, url")

    const got = await bearer(user.apiKey).GET("/v1/api/webhooks/{id}", webhookPath(first.webhook_id))
    expect(got.response.status).toBe(200)
    expect(got.data).toEqual({
      success: true,
      data: {
        webhook_id: first.webhook_id,
        url: first.url,
        events: ["email.received"],
        secret_masked: first.secret_masked,
        active: true,
        created_at: first.created_at,
        mailbox_ids: null,
        labels: null,
        held_by_plan: false
      }
    })
  })

  it("updates url, events and active without showing the secret; a new secret is shown in full once", async () => {
    const user = await withApiKey(suite.url)
    const webhook = (await create(user.apiKey, { url: URL_OK, events: ["email.received"] })).data!.data
    const path = webhookPath(webhook.webhook_id)

    const changed = await bearer(user.apiKey).PATCH("/v1/api/webhooks/{id}", {
      ...path,
      body: { url: "https://hooks.example.test/v2", events: ["email.processed", "api_key.created"], active: false }
    })
    expect(changed.response.status).toBe(200)
    expect(changed.data).toEqual({
      success: true,
      data: {
        webhook_id: webhook.webhook_id,
        url: "https://hooks.example.test/v2",
        events: ["email.processed", "api_key.created"],
        secret_masked: webhook.secret_masked,
        active: false,
        created_at: webhook.created_at,
        mailbox_ids: null,
        labels: null,
        held_by_plan: false
      }
    })

    const unchanged = await bearer(user.apiKey).PATCH("/v1/api/webhooks/{id}", { ...path, body: {} })
    expect(unchanged.response.status).toBe(200)
    expect(unchanged.data?.data).toEqual(changed.data?.data)

    const rotated = await bearer(user.apiKey).PATCH("/v1/api/webhooks/{id}", { ...path, body: { secret: "a-brand-new-secret-9876" } })
    expect(rotated.response.status).toBe(200)
    expect(rotated.data?.data).toEqual({ ...changed.data?.data, secret: "a-brand-new-secret-9876", secret_masked: "********9876" })

    const after = await bearer(user.apiKey).GET("/v1/api/webhooks/{id}", path)
    expect(after.data?.data).toEqual({ ...changed.data?.data, secret_masked: "********9876" })
    expect(JSON.stringify(after.data)).not.toContain("a-brand-new-secret")
    // A Standard Webhooks secret of the shortest key it may stand for (24 bytes) is taken.
    const standard = `whsec_${Buffer.alloc(24, 9).toString("base64")}`
    const restandardized = await bearer(user.apiKey).PATCH("/v1/api/webhooks/{id}", { ...path, body: { secret: standard } })
    expect(restandardized.data?.data.secret).toBe(standard)
  })

  it.each([
    [{ url: "https://10.0.0.1/x" }, { url: "10.0.0.1 is a private address; webhooks are delivered to public addresses only" }],
    [{ url: "http://hooks.example.test/x" }, { url: "must use https" }],
    [{ events: [] }, { events: "must list at least one of email.received, email.processed, email.labels_changed, email.deleted, email.sent, email.delivery_delayed, email.bounced, email.failed, email.unsubscribed, email.complained, meeting.answered, invitation.received, schedule.reminder, api_key.created" }],
    [{ active: "no" }, { active: expect.any(String) }],
    [{ secret: "tiny" }, { secret: "must be 8-256 printable ASCII characters without spaces" }],
    [{ secret: `whsec_${Buffer.alloc(23, 7).toString("base64")}` }, { secret: expect.stringMatching(/at least 24 bytes when written whsec_<base64> \(this one stands for 23\)/) }],
    [{ events: ["email.bounced", "api_key.created"], labels: ["billing"] }, {
      events: "would never be sent any of these events: email.bounced carries no labels; api_key.created carries no labels, and the webhook is narrowed to labels"
    }],
    [{ mailboxIds: null }, { mailboxIds: expect.stringMatching(/^is not a field here; the fields are .*mailbox_ids/) }]
  ])("refuses the update %j: 400 VALIDATION_ERROR with details %j, and changes nothing", async (body, details) => {
    const user = await withApiKey(suite.url)
    const webhook = (await create(user.apiKey, { url: URL_OK, events: ["email.received"] })).data!.data
    const path = webhookPath(webhook.webhook_id)
    const reply = await bearer(user.apiKey).PATCH("/v1/api/webhooks/{id}", { ...path, body: offContract(body) })
    expect(reply.response.status).toBe(400)
    expect(reply.error).toEqual({ success: false, error: { code: "VALIDATION_ERROR", message: expect.any(String), details } })
    const { secret: _, ...stored } = webhook
    expect((await bearer(user.apiKey).GET("/v1/api/webhooks/{id}", path)).data?.data).toEqual(stored)
  })

  it("deletes: data.message, then the webhook is gone", async () => {
    const user = await withApiKey(suite.url)
    const webhook = (await create(user.apiKey, { url: URL_OK, events: ["email.received"] })).data!.data
    const path = webhookPath(webhook.webhook_id)
    const removed = await bearer(user.apiKey).DELETE("/v1/api/webhooks/{id}", path)
    expect(removed.response.status).toBe(200)
    expect(removed.data).toEqual({ success: true, data: { message: `Webhook ${webhook.webhook_id} deleted` } })
    const notFound = { success: false, error: { code: "NOT_FOUND", message: "Webhook not found", details: { webhook_id: webhook.webhook_id } } }
    expect((await bearer(user.apiKey).GET("/v1/api/webhooks/{id}", path)).error).toEqual(notFound)
    expect((await bearer(user.apiKey).DELETE("/v1/api/webhooks/{id}", path)).error).toEqual(notFound)
    expect((await bearer(user.apiKey).GET("/v1/api/webhooks")).data?.data).toEqual([])
    // The slot is free again.
    expect((await create(user.apiKey, { url: URL_OK, events: ["email.received"] })).response.status).toBe(201)
  })

  it("someone else's webhook is not found, whatever the route", async () => {
    const owner = await withApiKey(suite.url)
    const stranger = await withApiKey(suite.url)
    const webhook = (await create(owner.apiKey, { url: URL_OK, events: ["email.received"] })).data!.data
    const path = webhookPath(webhook.webhook_id)
    const intruder = bearer(stranger.apiKey)
    const replies = [
      await intruder.GET("/v1/api/webhooks/{id}", path),
      await intruder.PATCH("/v1/api/webhooks/{id}", { ...path, body: { active: false } }),
      await intruder.PATCH("/v1/api/webhooks/{id}", { ...path, body: { url: "https://10.0.0.1/" } }),
      await intruder.DELETE("/v1/api/webhooks/{id}", path),
      await intruder.GET("/v1/api/webhooks/{id}/deliveries", path)
    ]
    for (const reply of replies) {
      expect(reply.response.status).toBe(404)
      expect(reply.error).toEqual({ success: false, error: { code: "NOT_FOUND", message: "Webhook not found", details: { webhook_id: webhook.webhook_id } } })
    }
    expect((await intruder.GET("/v1/api/webhooks")).data?.data).toEqual([])
    // Untouched by any of it.
    expect((await bearer(owner.apiKey).GET("/v1/api/webhooks/{id}", path)).data?.data).toMatchObject({ active: true })
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
      const box = await newBox(suite.url)
      const webhook = (await create(box.user.apiKey, { url: `https://${name}:${port}/hook`, events: ["email.received"] })).data!.data
      expect(webhook.webhook_id).toBeDefined()

      dns.set(name, { A: ["127.0.0.1"] })
      const transport = nodemailer.createTransport({ host: "127.0.0.1", port: suite.server.smtpPort, secure: false, ignoreTLS: true })
      await transport.sendMail({ from: "sender@example.com", to: box.address, subject: "Rebound", text: "Where does this go?" })

      // Three attempts over 1.5 s after ingest: polled less and less often, since the key is a free
      // plan's (20 requests a minute), which polling every 100 ms would use up first.
      const delivery = await until("a failed delivery", async () => {
        const log = await keyed(box.user.apiKey).GET("/v1/api/webhooks/{id}/deliveries", webhookPath(webhook.webhook_id))
        expect(log.response.status).toBe(200)
        return log.data?.data[0]?.status === "failed" ? log.data.data[0] : undefined
      }, 20_000, 200, 2_000)
      const refusal = `${name} resolves to 127.0.0.1, a loopback address; webhooks are delivered to public addresses only`
      expect(delivery).toMatchObject({ event: "email.received", status: "failed" })
      expect(delivery.attempts.map((a) => [a.attempt, a.status_code, a.error])).toEqual([
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
