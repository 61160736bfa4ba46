/**
 * Checkout and portal (SPEC "Billing") on the local payment provider: free → checkout → confirm →
 * pro, with the limits changing at once.
 */
import { describe, expect, it } from "vitest"
import { withApiKey } from "../support/accounts.ts"
import { upgrade } from "../support/billing.ts"
import { fresh } from "../support/mailboxes.ts"
import { type Server, useSuiteServer } from "../support/server.ts"
import { connectSmtp } from "../support/smtp-client.ts"
import { anonymous, offContract, rawJsonBody, withKey } from "../support/typed-client.ts"

let server: Server

useSuiteServer((suite) => {
  server = suite.server
})

const urls = { successUrl: "https://agent.example/billing/done", cancelUrl: "https://agent.example/billing/cancel" }

const checkout = (user: { apiKey: string }, plan: "pro" | "enterprise") =>
  withKey(server.url, user).POST("/v1/billing/checkout", { body: { plan, ...urls } })

/** The local provider's hosted page for a link the API answered: raw HTML and forms, outside the contract. */
const pageOf = (url: string) => `${server.url}${new URL(url).pathname}`

describe("a plan change applies at once everywhere", () => {
  it("free → pro: the mailbox quota (3 → 100) and the SMTP size limit (10 MB → 25 MB) follow at once", async () => {
    const user = await withApiKey(server.url)
    const locals = Array.from({ length: 4 }, () => fresh("quota"))
    const create = (local: string) => withKey(server.url, user).POST("/v1/api/mailboxes", { body: { local_part: local, domain: "agents.localhost" } })
    for (const local of locals.slice(0, 3)) expect((await create(local)).response.status).toBe(201)
    const fourth = await create(locals[3]!)
    expect(fourth.response.status).toBe(403)
    expect(fourth.error?.error).toMatchObject({ code: "MAILBOX_QUOTA", details: { count: 3, limit: 3, plan: "free" } })

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

    await upgrade(server.url, user.apiKey, "pro")
    expect((await create(locals[3]!)).response.status).toBe(201)
    expect((await rcptWithSize(twentyMb)).code).toBe(250)
    expect((await rcptWithSize(26 * 1024 * 1024)).code).toBe(552)
  })
})

describe("POST /v1/billing/webhook on local billing", () => {
  it("is not found: no provider calls back", async () => {
    const reply = await anonymous(server.url).POST("/v1/billing/webhook", { ...rawJsonBody("{}"), headers: { "stripe-signature": "t=1,v1=00" } })
    expect(reply.response.status).toBe(404)
    expect(reply.error).toEqual({ success: false, error: { code: "NOT_FOUND", message: "No payment provider webhook is configured (local billing)" } })
  })
})

describe("POST /v1/billing/checkout", () => {
  it("returns a hosted page; confirming it activates pro and the limits change at once", async () => {
    const user = await withApiKey(server.url)
    const reply = await checkout(user, "pro")
    expect(reply.response.status).toBe(200)
    expect(reply.data).toEqual({ success: true, data: { url: expect.stringMatching(/\/billing\/checkout\/pay_co_[0-9a-f]+$/) } })
    const local = pageOf(reply.data!.data.url)

    const page = await fetch(local)
    expect(page.status).toBe(200)
    const html = await page.text()
    expect(html).toContain("Upgrade to Pro")
    expect(html).toContain(urls.cancelUrl)

    const confirm = await fetch(local, { method: "POST", redirect: "manual" })
    expect(confirm.status).toBe(303)
    expect(confirm.headers.get("location")).toBe(urls.successUrl)

    const mailroom = withKey(server.url, user)
    const subscription = await mailroom.GET("/v1/billing/subscription")
    expect(subscription.data?.data).toMatchObject({ plan: "pro", status: "active", cancelAtPeriodEnd: false })
    const keys = await mailroom.GET("/v1/api-keys")
    expect(keys.response.headers.get("x-ratelimit-limit")).toBe("100")
    expect(keys.data?.data[0]).toMatchObject({ plan: "pro", rateLimit: 100 })
    const usage = await mailroom.GET("/v1/billing/usage")
    expect(usage.data?.data).toMatchObject({ emailsLimit: 10000, searchesLimit: 5000, storageLimit: 50 * 1073741824 })

    // A completed checkout cannot be replayed: pressed again or opened again, the link says it was paid.
    const replay = await fetch(local, { method: "POST", redirect: "manual" })
    expect(replay.status).toBe(409)
    expect(await replay.text()).toMatch(/Already paid[^]*This purchase of the <strong>Pro<\/strong> plan was completed on [^:]+:\d\d:\d\d GMT: nothing more was charged/)
    const reopened = await fetch(local)
    expect([reopened.status, (await reopened.text()).includes(`href="${urls.successUrl}"`)]).toEqual([200, true])
    expect((await mailroom.GET("/v1/billing/subscription")).data?.data.plan).toBe("pro")
  })

  it.each([
    [{ plan: "platinum", ...urls }, ["plan"]],
    [{ plan: "pro", successUrl: "not a url", cancelUrl: "javascript:alert(1)" }, ["successUrl", "cancelUrl"]],
    [{ plan: "free", ...urls }, ["plan"]],
    [{}, ["plan", "successUrl", "cancelUrl"]]
  ])("refuses %j with 400 VALIDATION_ERROR on %j", async (body, fields) => {
    const user = await withApiKey(server.url)
    const reply = await withKey(server.url, user).POST("/v1/billing/checkout", { body: offContract(body) })
    expect(reply.response.status).toBe(400)
    expect(reply.error?.error.code).toBe("VALIDATION_ERROR")
    expect(Object.keys(reply.error?.error.details ?? {}).sort()).toEqual([...fields].sort())
  })

  it("refuses a checkout for the plan already held with 409 CONFLICT; a second link of it changes nothing, nor does its period", async () => {
    const user = await withApiKey(server.url)
    const first = await checkout(user, "pro")
    // Two links asked for while on free: the second confirmed once the first made the account pro.
    const second = await checkout(user, "pro")
    await fetch(pageOf(first.data!.data.url), { method: "POST", redirect: "manual" })
    const again = await checkout(user, "pro")
    expect(again.response.status).toBe(409)
    expect(again.error?.error).toEqual({ code: "CONFLICT", message: "Already on the pro plan", details: { plan: "pro", status: "active" } })

    const mailroom = withKey(server.url, user)
    const before = (await mailroom.GET("/v1/billing/subscription")).data!.data
    const shown = await fetch(pageOf(second.data!.data.url))
    expect(shown.status).toBe(409)
    expect(await shown.text()).toContain("on the <strong>Pro</strong> plan already")
    const confirmed = await fetch(pageOf(second.data!.data.url), { method: "POST", redirect: "manual" })
    expect(confirmed.status).toBe(409)
    expect((await mailroom.GET("/v1/billing/subscription")).data!.data).toEqual(before)

    // pro → enterprise keeps the period (and what it counted), as a provider's upgrade does.
    await fetch(pageOf((await checkout(user, "enterprise")).data!.data.url), { method: "POST", redirect: "manual" })
    const upgraded = (await mailroom.GET("/v1/billing/subscription")).data!.data
    expect(upgraded).toMatchObject({ plan: "enterprise", currentPeriodStart: before.currentPeriodStart, currentPeriodEnd: before.currentPeriodEnd })
  })

  it("five links of one purchase confirmed at once: one is paid; the four refused say so ever after (on Pro already, nothing charged), never 'Already paid'", async () => {
    const user = await withApiKey(server.url)
    const links = await Promise.all([1, 2, 3, 4, 5].map(() => checkout(user, "pro")))
    const pages = links.map((link) => pageOf(link.data!.data.url))
    const confirmed = await Promise.all(pages.map((local) => fetch(local, { method: "POST", redirect: "manual" })))
    expect(confirmed.map((r) => r.status).sort()).toEqual([303, 409, 409, 409, 409])
    const refused = pages.filter((_, i) => confirmed[i]!.status === 409)
    for (const local of refused) {
      for (const method of ["GET", "POST"]) {
        const again = await fetch(local, { method, redirect: "manual" })
        const html = await again.text()
        expect([method, again.status, html.includes("Already paid")]).toEqual([method, 409, false])
        expect(html).toContain("This account is on the <strong>Pro</strong> plan already: nothing was charged or changed.")
      }
    }
    expect((await withKey(server.url, user).GET("/v1/billing/subscription")).data?.data.plan).toBe("pro")
  })

  it("links made on free for pro and enterprise, confirmed one after another: the first is paid, the others made before that change are refused with 409 and change nothing", async () => {
    const user = await withApiKey(server.url)
    const plans = ["pro", "enterprise", "pro", "enterprise"] as const
    const pages: Array<string> = []
    for (const plan of plans) pages.push(pageOf((await checkout(user, plan)).data!.data.url))
    const mailroom = withKey(server.url, user)

    expect((await fetch(pages[0]!, { method: "POST", redirect: "manual" })).status).toBe(303)
    const paid = (await mailroom.GET("/v1/billing/subscription")).data!.data
    expect(paid.plan).toBe("pro")
    // Still open, the enterprise link made on free says it can no longer be used, and offers no button.
    const shown = await fetch(pages[1]!)
    const shownHtml = await shown.text()
    expect([shown.status, shownHtml.includes("<form")]).toEqual([409, false])
    expect(shownHtml).toContain("This link was made while the account was on the <strong>Free</strong> plan; it is on the <strong>Pro</strong> plan now")
    for (const local of pages.slice(1)) {
      const confirmed = await fetch(local, { method: "POST", redirect: "manual" })
      expect([local, confirmed.status]).toEqual([local, 409])
      expect(await confirmed.text()).toContain("nothing was charged or changed")
    }
    expect((await mailroom.GET("/v1/billing/subscription")).data!.data).toEqual(paid)
    const reopened = await fetch(pages[3]!)
    const reopenedHtml = await reopened.text()
    expect([reopened.status, reopenedHtml.includes("Already paid")]).toEqual([409, false])
    expect(reopenedHtml).toContain("Plan changed since")
    expect(reopenedHtml).toContain(urls.cancelUrl)
  })

  it("needs a credential", async () => {
    const reply = await anonymous(server.url).POST("/v1/billing/checkout", { body: { plan: "pro", ...urls } })
    expect(reply.response.status).toBe(401)
  })
})

describe("POST /v1/billing/portal", () => {
  it("returns a portal page where a paid plan can be cancelled at period end and resumed", async () => {
    const user = await withApiKey(server.url)
    const mailroom = withKey(server.url, user)
    const paid = await checkout(user, "enterprise")
    await fetch(pageOf(paid.data!.data.url), { method: "POST", redirect: "manual" })

    const reply = await mailroom.POST("/v1/billing/portal", { body: { returnUrl: "https://agent.example/settings" } })
    expect(reply.response.status).toBe(200)
    const local = pageOf(reply.data!.data.url)
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
    expect((await mailroom.GET("/v1/billing/subscription")).data?.data.cancelAtPeriodEnd).toBe(true)
    await fetch(local, { method: "POST", body: "action=resume", headers: { "content-type": "application/x-www-form-urlencoded" }, redirect: "manual" })
    expect((await mailroom.GET("/v1/billing/subscription")).data?.data.cancelAtPeriodEnd).toBe(false)

    // From Enterprise, Pro's checkout is a change, not an upgrade.
    const lower = await (await fetch(pageOf((await checkout(user, "pro")).data!.data.url))).text()
    expect(lower).toContain("Change to Pro")
    expect(lower).not.toContain("Upgrade")
  })

  it("a free account has nothing to cancel: the portal's cancel changes nothing", async () => {
    const user = await withApiKey(server.url)
    const mailroom = withKey(server.url, user)
    const local = pageOf((await mailroom.POST("/v1/billing/portal", { body: { returnUrl: "https://agent.example/settings" } })).data!.data.url)
    expect(await (await fetch(local)).text()).not.toContain("Cancel at period end")
    const cancel = await fetch(local, { method: "POST", body: "action=cancel", headers: { "content-type": "application/x-www-form-urlencoded" }, redirect: "manual" })
    expect(cancel.status).toBe(303)
    expect((await mailroom.GET("/v1/billing/subscription")).data?.data).toMatchObject({ plan: "free", cancelAtPeriodEnd: false })
  })

  it("refuses a returnUrl that is not a URL", async () => {
    const user = await withApiKey(server.url)
    const reply = await withKey(server.url, user).POST("/v1/billing/portal", { body: { returnUrl: "back" } })
    expect(reply.response.status).toBe(400)
    expect(reply.error?.error).toEqual({ code: "VALIDATION_ERROR", message: expect.any(String), details: { returnUrl: "must be a valid URL" } })
  })

  it("an unknown page link is a 404 page that says so", async () => {
    for (const path of ["/billing/checkout/pay_co_unknown", "/billing/portal/pay_po_unknown"]) {
      const response = await fetch(`${server.url}${path}`)
      expect([response.status, (await response.text()).includes("No such payment link")], path).toEqual([404, true])
    }
  })
})
