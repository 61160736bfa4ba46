/**
 * Checkout and portal (SPEC "Billing") on the local payment provider: free → checkout → confirm →
 * pro, with the limits changing at once.
 */
import { describe, expect, it } from "vitest"
import { type Server, useSuiteServer } from "../support/server.ts"
import { upgrade } from "../support/billing.ts"
import { type Client, client, withApiKey } from "../support/http.ts"
import { fresh } from "../support/mailboxes.ts"
import { connectSmtp } from "../support/smtp-client.ts"

let server: Server
let api: Client

useSuiteServer((suite) => {
  server = suite.server
  api = client(suite.url)
})

const urls = { successUrl: "https://agent.example/billing/done", cancelUrl: "https://agent.example/billing/cancel" }

describe("a plan change applies at once everywhere", () => {
  it("free → pro: the mailbox quota (3 → 100) and the SMTP size limit (10 MB → 25 MB) follow at once", async () => {
    const user = await withApiKey(api)
    const locals = Array.from({ length: 4 }, () => fresh("quota"))
    const create = (local: string) => api.post("/v1/api/mailboxes", { apiKey: user.apiKey, body: { local_part: local, domain: "agents.localhost" } })
    for (const local of locals.slice(0, 3)) expect((await create(local)).status).toBe(201)
    const fourth = await create(locals[3]!)
    expect(fourth.status).toBe(403)
    expect(fourth.body.error).toMatchObject({ code: "MAILBOX_QUOTA", details: { count: 3, limit: 3, plan: "free" } })

    const rcptWithSize = async (bytes: number) => {
      const session = await connectSmtp(server.smtpPort)
      await session.command("EHLO test.example")
      await session.command(`MAIL FROM:<sender@example.com> SIZE=${bytes}`)
      const reply = await session.command(`RCPT TO:<${locals[0]}@agents.localhost>`)
      await session.close()
      return reply
    }
    const twentyMb = 20 * 1024 * 1024
    expect((await rcptWithSize(twentyMb)).code).toBe(552)

    await upgrade(api, server.url, user.apiKey, "pro")
    expect((await create(locals[3]!)).status).toBe(201)
    expect((await rcptWithSize(twentyMb)).code).toBe(250)
    expect((await rcptWithSize(26 * 1024 * 1024)).code).toBe(552)
  })
})

describe("POST /v1/billing/webhook on local billing", () => {
  it("is not found: no provider calls back", async () => {
    const reply = await api.post("/v1/billing/webhook", { raw: "{}", headers: { "content-type": "application/json", "stripe-signature": "t=1,v1=00" } })
    expect(reply.status).toBe(404)
    expect(reply.body).toEqual({ success: false, error: { code: "NOT_FOUND", message: "No payment provider webhook is configured (local billing)" } })
  })
})

describe("POST /v1/billing/checkout", () => {
  it("returns a hosted page; confirming it activates pro and the limits change at once", async () => {
    const user = await withApiKey(api)
    const reply = await api.post("/v1/billing/checkout", { apiKey: user.apiKey, body: { plan: "pro", ...urls } })
    expect(reply.status).toBe(200)
    expect(reply.body).toEqual({ success: true, data: { url: expect.stringMatching(/\/billing\/checkout\/pay_co_[0-9a-f]+$/) } })
    const pageUrl = new URL(reply.body.data.url)
    const local = `${server.url}${pageUrl.pathname}`

    const page = await fetch(local)
    expect(page.status).toBe(200)
    const html = await page.text()
    expect(html).toContain("Upgrade to Pro")
    expect(html).toContain(urls.cancelUrl)

    const confirm = await fetch(local, { method: "POST", redirect: "manual" })
    expect(confirm.status).toBe(303)
    expect(confirm.headers.get("location")).toBe(urls.successUrl)

    const subscription = await api.get("/v1/billing/subscription", { apiKey: user.apiKey })
    expect(subscription.body.data).toMatchObject({ plan: "pro", status: "active", cancelAtPeriodEnd: false })
    const keys = await api.get("/v1/api-keys", { apiKey: user.apiKey })
    expect(keys.headers.get("x-ratelimit-limit")).toBe("100")
    expect(keys.body.data[0]).toMatchObject({ plan: "pro", rateLimit: 100 })
    const usage = await api.get("/v1/billing/usage", { apiKey: user.apiKey })
    expect(usage.body.data).toMatchObject({ emailsLimit: 10000, searchesLimit: 5000, storageLimit: 50 * 1073741824 })

    // A completed checkout cannot be replayed.
    const replay = await fetch(local, { method: "POST", redirect: "manual" })
    expect(replay.status).toBe(404)
  })

  it.each([
    [{ plan: "platinum", ...urls }, ["plan"]],
    [{ plan: "pro", successUrl: "not a url", cancelUrl: "javascript:alert(1)" }, ["successUrl", "cancelUrl"]],
    [{ plan: "free", ...urls }, ["plan"]],
    [{}, ["plan", "successUrl", "cancelUrl"]]
  ])("refuses %j with 400 VALIDATION_ERROR on %j", async (body, fields) => {
    const user = await withApiKey(api)
    const reply = await api.post("/v1/billing/checkout", { apiKey: user.apiKey, body })
    expect(reply.status).toBe(400)
    expect(reply.body.error.code).toBe("VALIDATION_ERROR")
    expect(Object.keys(reply.body.error.details).sort()).toEqual([...fields].sort())
  })

  it("refuses a checkout for the plan already held with 409 CONFLICT", async () => {
    const user = await withApiKey(api)
    const first = await api.post("/v1/billing/checkout", { apiKey: user.apiKey, body: { plan: "pro", ...urls } })
    await fetch(`${server.url}${new URL(first.body.data.url).pathname}`, { method: "POST", redirect: "manual" })
    const again = await api.post("/v1/billing/checkout", { apiKey: user.apiKey, body: { plan: "pro", ...urls } })
    expect(again.status).toBe(409)
    expect(again.body.error).toEqual({ code: "CONFLICT", message: "Already on the pro plan", details: { plan: "pro" } })
  })

  it("needs a credential", async () => {
    const reply = await api.post("/v1/billing/checkout", { body: { plan: "pro", ...urls } })
    expect(reply.status).toBe(401)
  })
})

describe("POST /v1/billing/portal", () => {
  it("returns a portal page where a paid plan can be cancelled at period end and resumed", async () => {
    const user = await withApiKey(api)
    const checkout = await api.post("/v1/billing/checkout", { apiKey: user.apiKey, body: { plan: "enterprise", ...urls } })
    await fetch(`${server.url}${new URL(checkout.body.data.url).pathname}`, { method: "POST", redirect: "manual" })

    const reply = await api.post("/v1/billing/portal", { apiKey: user.apiKey, body: { returnUrl: "https://agent.example/settings" } })
    expect(reply.status).toBe(200)
    const local = `${server.url}${new URL(reply.body.data.url).pathname}`
    const html = await (await fetch(local)).text()
    expect(html).toContain("Enterprise")
    expect(html).toContain("https://agent.example/settings")

    const cancel = await fetch(local, {
      method: "POST",
      body: "action=cancel",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      redirect: "manual"
    })
    expect(cancel.status).toBe(303)
    expect((await api.get("/v1/billing/subscription", { apiKey: user.apiKey })).body.data.cancelAtPeriodEnd).toBe(true)
    await fetch(local, { method: "POST", body: "action=resume", headers: { "content-type": "application/x-www-form-urlencoded" }, redirect: "manual" })
    expect((await api.get("/v1/billing/subscription", { apiKey: user.apiKey })).body.data.cancelAtPeriodEnd).toBe(false)
  })

  it("refuses a returnUrl that is not a URL", async () => {
    const user = await withApiKey(api)
    const reply = await api.post("/v1/billing/portal", { apiKey: user.apiKey, body: { returnUrl: "back" } })
    expect(reply.status).toBe(400)
    expect(reply.body.error).toEqual({ code: "VALIDATION_ERROR", message: expect.any(String), details: { returnUrl: "must be a valid URL" } })
  })

  it("an unknown page link is a 404 page", async () => {
    const response = await fetch(`${server.url}/billing/checkout/pay_co_unknown`)
    expect(response.status).toBe(404)
  })
})
