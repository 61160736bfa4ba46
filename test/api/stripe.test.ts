/**
 * The Stripe payment provider against a local HTTP server standing in for Stripe's API (it records
 * what the official SDK sends), and Stripe's webhooks signed with the SDK's own test-header helper.
 */
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import Stripe from "stripe"
import { afterAll, describe, expect, it } from "vitest"
import { signUp, withApiKey } from "../support/accounts.ts"
import { arrivedIn, emailChangeToken, fresh, newBox } from "../support/mailboxes.ts"
import { type SuiteServer, useSuiteServer } from "../support/server.ts"
import { anonymous, rawJsonBody, withKey, withToken } from "../support/typed-client.ts"

const WEBHOOK_SECRET = "whsec_test_mailroom_0123456789"
const PRICES = { pro: "price_pro_test", enterprise: "price_enterprise_test" }

interface StripeRequest {
  readonly method: string
  readonly path: string
  readonly authorization: string | undefined
  readonly form: URLSearchParams
}

/**
 * Stripe's API as far as Mailroom uses it: customers (made, given a new email and deleted), checkout sessions, billing portal sessions, and
 * reading the subscriptions a test puts in `subscriptions`.
 */
const fakeStripe = async () => {
  const requests: Array<StripeRequest> = []
  const subscriptions = new Map<string, unknown>()
  /** Paths answered 500, as Stripe answers when it is having a bad day. */
  const failing = new Set<string>()
  let counter = 0
  const server = http.createServer((req, res) => {
    let body = ""
    req.on("data", (chunk) => (body += chunk))
    req.on("end", () => {
      const form = new URLSearchParams(body)
      const path = (req.url ?? "").split("?")[0]!
      requests.push({ method: req.method ?? "", path, authorization: req.headers.authorization, form })
      const n = ++counter
      const reply = (status: number, json: unknown) => {
        res.writeHead(status, { "content-type": "application/json", "request-id": `req_${n}` })
        res.end(JSON.stringify(json))
      }
      if (failing.has(path)) return reply(500, { error: { type: "api_error", message: "Something went wrong on Stripe's end" } })
      if (path === "/v1/customers") return reply(200, { id: `cus_test_${n}`, object: "customer", email: form.get("email") })
      const customer = /^\/v1\/customers\/([^/]+)$/.exec(path)
      if (customer && req.method === "DELETE") return reply(200, { id: decodeURIComponent(customer[1]!), object: "customer", deleted: true })
      if (customer && req.method === "POST") return reply(200, { id: decodeURIComponent(customer[1]!), object: "customer", email: form.get("email") })
      if (path === "/v1/checkout/sessions") {
        return reply(200, { id: `cs_test_${n}`, object: "checkout.session", mode: form.get("mode"), url: `https://checkout.stripe.test/c/${n}` })
      }
      const subscription = /^\/v1\/subscriptions\/([^/]+)$/.exec(path)
      if (subscription && req.method === "GET") {
        const found = subscriptions.get(decodeURIComponent(subscription[1]!))
        return found
          ? reply(200, found)
          : reply(404, { error: { type: "invalid_request_error", code: "resource_missing", message: `No such subscription: '${subscription[1]}'` } })
      }
      if (path === "/v1/billing_portal/sessions") {
        return reply(200, { id: `bps_test_${n}`, object: "billing_portal.session", url: `https://billing.stripe.test/p/${n}` })
      }
      reply(404, { error: { type: "invalid_request_error", message: `Unrecognized request URL (${req.method}: ${path})` } })
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    subscriptions,
    failing,
    close: () => new Promise<void>((resolve) => server.close(() => resolve()))
  }
}

const stripeApi = await fakeStripe()
afterAll(() => stripeApi.close())

let suite: SuiteServer
useSuiteServer((s) => {
  suite = s
}, {
  STRIPE_SECRET_KEY: "sk_test_mailroom",
  STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET,
  STRIPE_PRICE_PRO: PRICES.pro,
  STRIPE_PRICE_ENTERPRISE: PRICES.enterprise,
  STRIPE_API_URL: stripeApi.url
})

const urls = { successUrl: "https://agent.example.com/billing/done", cancelUrl: "https://agent.example.com/billing/cancel" }
const sdk = new Stripe("sk_test_unused")

let eventCounter = 0
const event = (type: string, object: Record<string, unknown>, created: number, id = `evt_test_${Date.now()}_${eventCounter++}`) => ({
  id,
  object: "event",
  api_version: "2026-10-28.endive",
  created,
  livemode: false,
  pending_webhooks: 1,
  request: { id: null, idempotency_key: null },
  type,
  data: { object }
})

const deliver = (payload: unknown, signature?: string) => {
  const body = JSON.stringify(payload)
  const header = signature ?? sdk.webhooks.generateTestHeaderString({ payload: body, secret: WEBHOOK_SECRET })
  return anonymous(suite.url).POST("/v1/billing/webhook", { ...rawJsonBody(body), headers: { "stripe-signature": header } })
}

const subscriptionObject = (options: {
  readonly id?: string
  readonly userId: string
  readonly customer: string
  readonly status: string
  readonly price: string
  readonly start: number
  readonly end: number
  readonly cancelAtPeriodEnd?: boolean
}) => ({
  id: options.id ?? `sub_${options.userId}`,
  object: "subscription",
  customer: options.customer,
  status: options.status,
  cancel_at_period_end: options.cancelAtPeriodEnd ?? false,
  metadata: { userId: options.userId },
  items: {
    object: "list",
    data: [{ id: "si_1", object: "subscription_item", price: { id: options.price, object: "price" }, current_period_start: options.start, current_period_end: options.end }]
  }
})

const keyed = (apiKey: string) => withKey(suite.url, { apiKey })
const state = async (apiKey: string) => (await keyed(apiKey).GET("/v1/billing/subscription")).data!.data

describe("checkout and portal on Stripe", () => {
  it("opens a subscription-mode Checkout Session for the plan's price, with one Stripe customer per user", async () => {
    const user = await withApiKey(suite.url)
    const before = stripeApi.requests.length
    const reply = await keyed(user.apiKey).POST("/v1/billing/checkout", { body: { plan: "pro", ...urls } })
    expect(reply.response.status).toBe(200)
    expect(reply.data).toEqual({ success: true, data: { url: expect.stringMatching(/^https:\/\/checkout\.stripe\.test\/c\/\d+$/) } })

    const sent = stripeApi.requests.slice(before)
    expect(sent.map((r) => `${r.method} ${r.path}`)).toEqual(["POST /v1/customers", "POST /v1/checkout/sessions"])
    for (const request of sent) expect(request.authorization).toBe("Bearer sk_test_mailroom")
    expect(sent[0]!.form.get("email")).toBe(user.email)
    expect(sent[0]!.form.get("metadata[userId]")).toBe(user.userId)
    const session = sent[1]!.form
    const customer = session.get("customer")
    expect(customer).toMatch(/^cus_test_\d+$/)
    expect(Object.fromEntries(session)).toMatchObject({
      mode: "subscription",
      customer,
      "line_items[0][price]": PRICES.pro,
      "line_items[0][quantity]": "1",
      success_url: urls.successUrl,
      cancel_url: urls.cancelUrl,
      client_reference_id: user.userId,
      "metadata[plan]": "pro",
      "subscription_data[metadata][userId]": user.userId
    })

    // The same customer for every later session: no second customer.
    const enterprise = await keyed(user.apiKey).POST("/v1/billing/checkout", { body: { plan: "enterprise", ...urls } })
    expect(enterprise.response.status).toBe(200)
    const portal = await keyed(user.apiKey).POST("/v1/billing/portal", { body: { returnUrl: "https://agent.example.com/account" } })
    expect(portal.data).toEqual({ success: true, data: { url: expect.stringMatching(/^https:\/\/billing\.stripe\.test\/p\/\d+$/) } })
    const later = stripeApi.requests.slice(before + 2)
    expect(later.map((r) => `${r.method} ${r.path}`)).toEqual(["POST /v1/checkout/sessions", "POST /v1/billing_portal/sessions"])
    expect(later[0]!.form.get("line_items[0][price]")).toBe(PRICES.enterprise)
    expect(later[0]!.form.get("customer")).toBe(customer)
    expect(Object.fromEntries(later[1]!.form)).toEqual({ customer, return_url: "https://agent.example.com/account" })

    // Stripe hosts the pages: the local provider's are not served.
    expect((await fetch(`${suite.url}/billing/checkout/pay_co_123`)).status).toBe(404)
  })
})

describe("the account's email on Stripe", () => {
  it("a confirmed change of email is given to the customer; when Stripe failed then, at the next portal visit", async () => {
    // The person's addresses are mailboxes of this server, where the confirmation links are read.
    const [first, second, third] = await Promise.all(["first", "second", "third"].map((name) => newBox(suite.url, { localPart: fresh(name) })))
    const person = await withApiKey(suite.url, { email: first!.address })
    await keyed(person.apiKey).POST("/v1/billing/checkout", { body: { plan: "pro", ...urls } })
    const customer = stripeApi.requests.filter((r) => r.path === "/v1/checkout/sessions").at(-1)!.form.get("customer")!
    const moveTo = async (box: typeof first) => {
      const asked = await withToken(suite.url, person).POST("/api/auth/email", { body: { newEmail: box!.address, password: person.password } })
      expect(asked.response.status).toBe(202)
      const link = await arrivedIn(suite.url, box!, "Confirm your new Mailroom email")
      const done = await anonymous(suite.url).POST("/api/auth/email/confirm", { body: { token: emailChangeToken(link.text) } })
      expect(done.response.status).toBe(200)
    }
    const sentSince = (before: number) => stripeApi.requests.slice(before).map((r) => `${r.method} ${r.path} ${r.form.get("email") ?? ""}`.trim())

    let before = stripeApi.requests.length
    await moveTo(second)
    expect(sentSince(before)).toEqual([`POST /v1/customers/${customer} ${second!.address}`])

    // Stripe down while the account moves: the move is made, and Stripe is told at the next billing visit, once.
    stripeApi.failing.add(`/v1/customers/${customer}`)
    await moveTo(third).finally(() => stripeApi.failing.delete(`/v1/customers/${customer}`))
    before = stripeApi.requests.length
    const portal = () => keyed(person.apiKey).POST("/v1/billing/portal", { body: { returnUrl: "https://agent.example.com/account" } })
    expect((await portal()).response.status).toBe(200)
    expect((await portal()).response.status).toBe(200)
    expect(sentSince(before)).toEqual([
      `POST /v1/customers/${customer} ${third!.address}`,
      "POST /v1/billing_portal/sessions",
      "POST /v1/billing_portal/sessions"
    ])
  })
})

describe("deleting an account on Stripe", () => {
  it("deletes its Stripe customer, which ends its subscription; while Stripe fails, 503 and the account stays", async () => {
    const user = await withApiKey(suite.url)
    await keyed(user.apiKey).POST("/v1/billing/checkout", { body: { plan: "pro", ...urls } })
    const customer = stripeApi.requests.filter((r) => r.path === "/v1/checkout/sessions").at(-1)!.form.get("customer")!
    const remove = () => withToken(suite.url, user).DELETE("/api/auth/account", { body: { password: user.password } })

    stripeApi.failing.add(`/v1/customers/${customer}`)
    const refused = await remove().finally(() => stripeApi.failing.delete(`/v1/customers/${customer}`))
    expect(refused.response.status).toBe(503)
    expect(refused.error?.error).toMatchObject({ code: "SERVICE_UNAVAILABLE", message: expect.stringMatching(/payment provider/) })
    expect((await keyed(user.apiKey).GET("/v1/billing/subscription")).response.status).toBe(200)

    const before = stripeApi.requests.length
    const deleted = await remove()
    expect(deleted.response.status).toBe(200)
    const sent = stripeApi.requests.slice(before).map((r) => `${r.method} ${r.path}`)
    expect(sent).toEqual([`DELETE /v1/customers/${customer}`])
    expect((await keyed(user.apiKey).GET("/v1/billing/subscription")).response.status).toBe(401)
  })

  it("an account that never paid asks nothing of Stripe", async () => {
    const user = await signUp(suite.url)
    const before = stripeApi.requests.length
    const deleted = await withToken(suite.url, user).DELETE("/api/auth/account", { body: { password: user.password } })
    expect(deleted.response.status).toBe(200)
    expect(stripeApi.requests.length).toBe(before)
  })
})

describe("POST /v1/billing/webhook", () => {
  it("refuses a wrong or missing signature with 400 and applies nothing", async () => {
    const payload = event("checkout.session.completed", { object: "checkout.session", mode: "subscription", metadata: { plan: "pro" } }, Math.floor(Date.now() / 1000))
    const wrong = await deliver(payload, "t=1700000000,v1=deadbeef")
    expect(wrong.response.status).toBe(400)
    expect(wrong.error?.error.code).toBe("INVALID_SIGNATURE")
    const other = sdk.webhooks.generateTestHeaderString({ payload: JSON.stringify(payload), secret: "whsec_someone_else" })
    expect((await deliver(payload, other)).response.status).toBe(400)
    const none = await anonymous(suite.url).POST("/v1/billing/webhook", rawJsonBody(JSON.stringify(payload)))
    expect(none.response.status).toBe(400)
    expect(none.error?.error.code).toBe("INVALID_SIGNATURE")
  })

  it("refuses a signed body that is no Stripe event with 400 BAD_REQUEST, saying so (not a signature failure), and applies nothing", async () => {
    const signedRaw = (body: string) =>
      anonymous(suite.url).POST("/v1/billing/webhook", {
        ...rawJsonBody(body),
        headers: { "stripe-signature": sdk.webhooks.generateTestHeaderString({ payload: body, secret: WEBHOOK_SECRET }) }
      })
    const notJson = await signedRaw(`{"id":"evt_bad"`)
    expect(notJson.response.status).toBe(400)
    expect(notJson.error?.error).toEqual({ code: "BAD_REQUEST", message: "The signed body is not JSON" })
    const list = await signedRaw("[]")
    expect(list.response.status).toBe(400)
    expect(list.error?.error).toEqual({ code: "BAD_REQUEST", message: "The signed event lacks fields Mailroom reads; it was not applied" })
    // The envelope of an event, but not the object its type has (a subscription without items).
    const hollow = await deliver(event("customer.subscription.deleted", { object: "subscription", id: "sub_hollow" }, Math.floor(Date.now() / 1000)))
    expect(hollow.response.status).toBe(400)
    expect(hollow.error?.error).toEqual({
      code: "BAD_REQUEST",
      message: "The signed event (customer.subscription.deleted) lacks fields Mailroom reads; it was not applied"
    })
  })

  it("checkout completed → pro at once; a replayed event has no second effect; newer states win over older ones; deleted → free", async () => {
    const user = await withApiKey(suite.url)
    await keyed(user.apiKey).POST("/v1/billing/checkout", { body: { plan: "pro", ...urls } })
    const customer = stripeApi.requests.filter((r) => r.path === "/v1/checkout/sessions").at(-1)!.form.get("customer")!
    const t0 = Math.floor(Date.now() / 1000)

    const completed = event("checkout.session.completed", {
      id: "cs_test_done",
      object: "checkout.session",
      mode: "subscription",
      customer,
      subscription: `sub_${user.userId}`,
      client_reference_id: user.userId,
      metadata: { userId: user.userId, plan: "pro" }
    }, t0)
    const first = await deliver(completed)
    expect(first.response.status).toBe(200)
    expect(first.data).toEqual({ success: true, data: { received: true } })
    const pro = await state(user.apiKey)
    expect(pro).toMatchObject({ plan: "pro", status: "active", cancelAtPeriodEnd: false })
    const keys = await keyed(user.apiKey).GET("/v1/api-keys")
    expect(keys.response.headers.get("x-ratelimit-limit")).toBe("100")
    expect(keys.data?.data[0]).toMatchObject({ plan: "pro", rateLimit: 100 })

    // Stripe delivers an event again: nothing moves (a second application would restart the period).
    await new Promise((resolve) => setTimeout(resolve, 1100))
    expect((await deliver(completed)).response.status).toBe(200)
    expect(await state(user.apiKey)).toEqual(pro)

    // The subscription as Stripe has it, then an older state arriving late: the newer one stays.
    const start = t0 - 60
    const end = t0 + 30 * 86400
    const newer = event("customer.subscription.updated", subscriptionObject({
      userId: user.userId, customer, status: "past_due", price: PRICES.pro, start, end, cancelAtPeriodEnd: true
    }), t0 + 20)
    const older = event("customer.subscription.updated", subscriptionObject({
      userId: user.userId, customer, status: "active", price: PRICES.enterprise, start, end
    }), t0 + 10)
    expect((await deliver(newer)).response.status).toBe(200)
    expect((await deliver(older)).response.status).toBe(200)
    expect(await state(user.apiKey)).toEqual({
      plan: "pro",
      status: "past_due",
      currentPeriodStart: new Date(start * 1000).toISOString(),
      currentPeriodEnd: new Date(end * 1000).toISOString(),
      cancelAtPeriodEnd: true
    })

    // A failed renewal keeps past_due; the end of the subscription brings the free plan back at once.
    const failed = event("invoice.payment_failed", { object: "invoice", customer, parent: { subscription_details: { subscription: `sub_${user.userId}`, metadata: { userId: user.userId } } } }, t0 + 30)
    expect((await deliver(failed)).response.status).toBe(200)
    expect((await state(user.apiKey)).status).toBe("past_due")
    const deleted = event("customer.subscription.deleted", subscriptionObject({
      userId: user.userId, customer, status: "canceled", price: PRICES.pro, start, end
    }), t0 + 40)
    expect((await deliver(deleted)).response.status).toBe(200)
    expect(await state(user.apiKey)).toMatchObject({ plan: "free", status: "canceled", cancelAtPeriodEnd: false })
    const after = await keyed(user.apiKey).GET("/v1/api-keys")
    expect(after.response.headers.get("x-ratelimit-limit")).toBe("20")
  })

  it("events in Stripe's API shape before 2025-03-31 (the period on the subscription, the invoice's subscription at its top level) are applied; one without a period is 400", async () => {
    const user = await withApiKey(suite.url)
    await keyed(user.apiKey).POST("/v1/billing/checkout", { body: { plan: "pro", ...urls } })
    const customer = stripeApi.requests.filter((r) => r.path === "/v1/checkout/sessions").at(-1)!.form.get("customer")!
    const t0 = Math.floor(Date.now() / 1000)
    const start = t0 - 60
    const end = t0 + 30 * 86400
    const { items, ...current } = subscriptionObject({ userId: user.userId, customer, status: "active", price: PRICES.pro, start, end, cancelAtPeriodEnd: true })
    const item = { id: "si_1", object: "subscription_item", price: { id: PRICES.pro, object: "price" } }
    const older = { ...current, current_period_start: start, current_period_end: end, items: { ...items, data: [item] } }
    const updated = await deliver(event("customer.subscription.updated", older, t0))
    expect(updated.response.status).toBe(200)
    expect(await state(user.apiKey)).toEqual({
      plan: "pro",
      status: "active",
      currentPeriodStart: new Date(start * 1000).toISOString(),
      currentPeriodEnd: new Date(end * 1000).toISOString(),
      cancelAtPeriodEnd: true
    })
    const failedInvoice = (subscription: string, at: number) =>
      event("invoice.payment_failed", { object: "invoice", customer, subscription, subscription_details: { metadata: { userId: user.userId } } }, at)
    // An invoice of a subscription the account left changes nothing: the invoice's subscription is read.
    expect((await deliver(failedInvoice("sub_left", t0 + 5))).response.status).toBe(200)
    expect((await state(user.apiKey)).status).toBe("active")
    const failed = await deliver(failedInvoice(current.id, t0 + 10))
    expect(failed.response.status).toBe(200)
    expect((await state(user.apiKey)).status).toBe("past_due")

    const timeless = await deliver(event("customer.subscription.updated", { ...current, items: { ...items, data: [item] } }, t0 + 20))
    expect(timeless.response.status).toBe(400)
    expect(timeless.error?.error).toEqual({
      code: "BAD_REQUEST",
      message: "The signed event (customer.subscription.updated) lacks fields Mailroom reads; it was not applied"
    })
    expect(await state(user.apiKey)).toMatchObject({ plan: "pro", status: "past_due" })
  })

  it("acknowledges events it does not act on, and events for customers it does not know", async () => {
    const ignored = await deliver(event("charge.succeeded", { object: "charge", id: "ch_1" }, Math.floor(Date.now() / 1000)))
    expect(ignored.response.status).toBe(200)
    const stranger = await deliver(event("customer.subscription.updated", subscriptionObject({
      userId: "usr_nobody", customer: "cus_nobody", status: "active", price: PRICES.pro, start: 1, end: 2
    }), Math.floor(Date.now() / 1000)))
    expect(stranger.response.status).toBe(200)
  })
})

describe("a paying account's change of plan", () => {
  /** A checkout for `plan`, paid: Stripe's checkout.session.completed for `subscription`. The customer's id. */
  const paidCheckout = async (user: { apiKey: string; userId: string }, plan: "pro" | "enterprise", subscription: string, at: number) => {
    await keyed(user.apiKey).POST("/v1/billing/checkout", { body: { plan, ...urls } })
    const customer = stripeApi.requests.filter((r) => r.path === "/v1/checkout/sessions").at(-1)!.form.get("customer")!
    const completed = event("checkout.session.completed", {
      object: "checkout.session",
      mode: "subscription",
      customer,
      subscription,
      client_reference_id: user.userId,
      metadata: { userId: user.userId, plan }
    }, at)
    expect((await deliver(completed)).response.status).toBe(200)
    return customer
  }

  it("opens Stripe's page that changes the price of the subscription it pays (with the proration), never a second subscription", async () => {
    const user = await withApiKey(suite.url)
    const t0 = Math.floor(Date.now() / 1000)
    const period = { start: t0, end: t0 + 30 * 86400 }
    const customer = await paidCheckout(user, "pro", `sub_${user.userId}`, t0)
    stripeApi.subscriptions.set(`sub_${user.userId}`, subscriptionObject({ userId: user.userId, customer, status: "active", price: PRICES.pro, ...period }))

    const before = stripeApi.requests.length
    const reply = await keyed(user.apiKey).POST("/v1/billing/checkout", { body: { plan: "enterprise", ...urls } })
    expect(reply.data).toEqual({ success: true, data: { url: expect.stringMatching(/^https:\/\/billing\.stripe\.test\/p\/\d+$/) } })
    const sent = stripeApi.requests.slice(before)
    expect(sent.map((r) => `${r.method} ${r.path}`)).toEqual([`GET /v1/subscriptions/sub_${user.userId}`, "POST /v1/billing_portal/sessions"])
    expect(Object.fromEntries(sent[1]!.form)).toEqual({
      customer,
      return_url: urls.cancelUrl,
      "flow_data[type]": "subscription_update_confirm",
      "flow_data[subscription_update_confirm][subscription]": `sub_${user.userId}`,
      "flow_data[subscription_update_confirm][items][0][id]": "si_1",
      "flow_data[subscription_update_confirm][items][0][price]": PRICES.enterprise,
      "flow_data[subscription_update_confirm][items][0][quantity]": "1",
      "flow_data[after_completion][type]": "redirect",
      "flow_data[after_completion][redirect][return_url]": urls.successUrl
    })

    // Confirmed on Stripe's page: the subscription's new price is the account's plan.
    const confirmed = event("customer.subscription.updated", subscriptionObject({
      userId: user.userId, customer, status: "active", price: PRICES.enterprise, ...period
    }), t0 + 10)
    expect((await deliver(confirmed)).response.status).toBe(200)
    expect(await state(user.apiKey)).toMatchObject({ plan: "enterprise", status: "active" })
  })

  it("refuses its own plan with 409 even with a payment past due, pointing at the portal; Stripe down is 503", async () => {
    const user = await withApiKey(suite.url)
    const t0 = Math.floor(Date.now() / 1000)
    const customer = await paidCheckout(user, "pro", `sub_${user.userId}`, t0)
    const pastDue = event("customer.subscription.updated", subscriptionObject({
      userId: user.userId, customer, status: "past_due", price: PRICES.pro, start: t0, end: t0 + 30 * 86400
    }), t0 + 10)
    expect((await deliver(pastDue)).response.status).toBe(200)
    const before = stripeApi.requests.length
    const same = await keyed(user.apiKey).POST("/v1/billing/checkout", { body: { plan: "pro", ...urls } })
    expect([same.response.status, same.error?.error]).toEqual([409, {
      code: "CONFLICT",
      message: "Already on the pro plan, with a payment past due: pay it or change the card in the billing portal",
      details: { plan: "pro", status: "past_due" }
    }])
    expect(stripeApi.requests.length).toBe(before)
    // Stripe cannot say what the subscription is: nothing is opened, the caller retries.
    stripeApi.failing.add(`/v1/subscriptions/sub_${user.userId}`)
    const down = await keyed(user.apiKey).POST("/v1/billing/checkout", { body: { plan: "enterprise", ...urls } })
    stripeApi.failing.clear()
    expect(down.response.status).toBe(503)
    expect(down.error?.error.code).toBe("SERVICE_UNAVAILABLE")
    expect(stripeApi.requests.slice(before).some((r) => r.path === "/v1/checkout/sessions" || r.path === "/v1/billing_portal/sessions")).toBe(false)

    // Another plan: no price change while an invoice is open (it would be paid beside the new price), nor a
    // second subscription; 409, to the portal. A plan lapsed to free with the subscription still billed is
    // refused the same way (test/domain/billing-lapsed.test.ts).
    stripeApi.subscriptions.set(`sub_${user.userId}`, subscriptionObject({
      userId: user.userId, customer, status: "past_due", price: PRICES.pro, start: t0, end: t0 + 30 * 86400
    }))
    const other = await keyed(user.apiKey).POST("/v1/billing/checkout", { body: { plan: "enterprise", ...urls } })
    expect([other.response.status, other.error?.error]).toEqual([409, {
      code: "CONFLICT",
      message: "The account's subscription has a payment past due, and Stripe still bills it: pay it or change the card " +
        "in the billing portal, or cancel that subscription there, before buying a plan",
      details: { plan: "enterprise", status: "past_due" }
    }])
    expect(stripeApi.requests.slice(before).some((r) => r.path === "/v1/checkout/sessions" || r.path === "/v1/billing_portal/sessions")).toBe(false)
  })

  it("opens a new Checkout Session when Stripe says the subscription on record has ended, or has it no more", async () => {
    const user = await withApiKey(suite.url)
    const t0 = Math.floor(Date.now() / 1000)
    const customer = await paidCheckout(user, "pro", `sub_${user.userId}`, t0)
    stripeApi.subscriptions.set(`sub_${user.userId}`, subscriptionObject({
      userId: user.userId, customer, status: "canceled", price: PRICES.pro, start: t0, end: t0 + 30 * 86400
    }))
    for (const gone of [false, true]) {
      if (gone) stripeApi.subscriptions.delete(`sub_${user.userId}`)
      const before = stripeApi.requests.length
      const reply = await keyed(user.apiKey).POST("/v1/billing/checkout", { body: { plan: "enterprise", ...urls } })
      expect(reply.data, `gone: ${gone}`).toEqual({ success: true, data: { url: expect.stringMatching(/^https:\/\/checkout\.stripe\.test\/c\/\d+$/) } })
      expect(stripeApi.requests.slice(before).map((r) => `${r.method} ${r.path}`)).toEqual([`GET /v1/subscriptions/sub_${user.userId}`, "POST /v1/checkout/sessions"])
    }
  })

  it("the events of a subscription the account has left (two checkouts paid) change nothing", async () => {
    const user = await withApiKey(suite.url)
    const t0 = Math.floor(Date.now() / 1000)
    const period = { start: t0, end: t0 + 30 * 86400 }
    const customer = await paidCheckout(user, "pro", "sub_first", t0)
    await paidCheckout(user, "enterprise", "sub_second", t0 + 10)
    const enterprise = await state(user.apiKey)
    expect(enterprise).toMatchObject({ plan: "enterprise", status: "active" })

    const first = { id: "sub_first", userId: user.userId, customer, price: PRICES.pro, ...period }
    for (const [kind, object, at] of [
      ["customer.subscription.updated", subscriptionObject({ ...first, status: "active" }), t0 + 20],
      ["invoice.payment_failed", { object: "invoice", customer, parent: { subscription_details: { subscription: "sub_first", metadata: { userId: user.userId } } } }, t0 + 30],
      ["customer.subscription.deleted", subscriptionObject({ ...first, status: "canceled" }), t0 + 40]
    ] as const) {
      expect((await deliver(event(kind, object, at))).response.status).toBe(200)
      expect(await state(user.apiKey), kind).toEqual(enterprise)
    }
    // The subscription it pays still moves it.
    const ended = event("customer.subscription.deleted", subscriptionObject({ ...first, id: "sub_second", price: PRICES.enterprise, status: "canceled" }), t0 + 50)
    expect((await deliver(ended)).response.status).toBe(200)
    expect(await state(user.apiKey)).toMatchObject({ plan: "free", status: "canceled" })
  })
})
