/**
 * Relay mode (issue 16): with SMTP_RELAY_URL every outbound message goes through that server, logged
 * in with the URL's user and password, whatever the recipients' MX records say. A relay that refuses
 * the login leaves the delivery deferred, never lost; one that stops answering mid-delivery does not hold a
 * shutdown, and the message goes out after the restart.
 */
import { simpleParser } from "mailparser"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createClient } from "../../packages/client/src/fetch-client.ts"
import { signUp, withApiKey } from "../support/accounts.ts"
import { newBox } from "../support/mailboxes.ts"
import { type MxServer, startMxServer } from "../support/mx-server.ts"
import { type Backend, createBackend, type Server, startServer } from "../support/server.ts"
import { anonymous } from "../support/typed-client.ts"
import { until } from "../support/wait.ts"

let relay: MxServer
let backend: Backend
let server: Server
let serverEnv: Record<string, string>

beforeAll(async () => {
  relay = await startMxServer({ auth: { user: "mailroom", pass: "s3cret/with:odd@chars" } })
  backend = await createBackend()
  // The password percent-encoded, as a URL must carry it.
  serverEnv = {
    ...backend.env,
    SMTP_RELAY_URL: `smtp://mailroom:${encodeURIComponent("s3cret/with:odd@chars")}@127.0.0.1:${relay.port}`,
    OUTBOUND_RETRY_DELAYS: "200ms"
  }
  server = await startServer(serverEnv)
})

afterAll(async () => {
  await server?.stop()
  await backend?.dispose()
  await relay?.close()
})

describe("SMTP_RELAY_URL", () => {
  it("sends through the relay, logged in, for a domain that has no MX at all", async () => {
    const box = await newBox(server.url, { user: await withApiKey(server.url) })
    const mailroom = createClient({ baseUrl: server.url, apiKey: box.user.apiKey })
    const sent = await mailroom.POST("/v1/api/mailboxes/{mailboxId}/send", {
      params: { path: { mailboxId: box.mailboxId } },
      body: { to: ["someone@no-such-domain.invalid"], subject: "Via the relay", text: "Hello" }
    })
    expect(sent.response.status).toBe(202)
    const [message] = await relay.waitFor(1)
    expect(message).toMatchObject({
      user: "mailroom",
      mailFrom: expect.stringMatching(new RegExp(`^bounces\\+${sent.data!.data.email_id}-[0-9a-f]{16}@agents\\.localhost$`)),
      rcptTo: ["someone@no-such-domain.invalid"]
    })
    const email = await until("sent", async () => {
      const { data } = await mailroom.GET("/v1/api/emails/{emailId}", { params: { path: { emailId: sent.data!.data.email_id } } })
      return data?.data.delivery?.[0]?.status === "sent" ? data.data : undefined
    })
    expect(email.delivery).toMatchObject([{ recipient: "someone@no-such-domain.invalid", status: "sent", attempts: 1 }])
  })

  it("a relay that refuses the login defers the delivery (nothing bounces or is suppressed), and it goes out once the login works", async () => {
    const box = await newBox(server.url, { user: await withApiKey(server.url) })
    const mailroom = createClient({ baseUrl: server.url, apiKey: box.user.apiKey })
    relay.requireAuth({ user: "mailroom", pass: "rotated" })
    // The mta keeps its logged-in connection from the test above; the relay ends it, so the next
    // message needs a new login.
    relay.dropConnections()
    const before = relay.delivered().length
    const sent = await mailroom.POST("/v1/api/mailboxes/{mailboxId}/send", {
      params: { path: { mailboxId: box.mailboxId } },
      body: { to: ["later@example.org"], subject: "Patience", text: "Hello" }
    })
    const emailId = sent.data!.data.email_id
    const deferred = await until("deferred", async () => {
      const { data } = await mailroom.GET("/v1/api/emails/{emailId}", { params: { path: { emailId } } })
      return data?.data.delivery?.[0]?.status === "deferred" ? data.data.delivery[0] : undefined
    })
    expect(deferred.last_response).toMatch(/^451 4\.7\.0 127\.0\.0\.1 refused the login: 535/)
    relay.requireAuth({ user: "mailroom", pass: "s3cret/with:odd@chars" })
    await relay.waitFor(before + 1)
    const email = await until("sent", async () => {
      const { data } = await mailroom.GET("/v1/api/emails/{emailId}", { params: { path: { emailId } } })
      return data?.data.delivery?.[0]?.status === "sent" ? data.data : undefined
    })
    expect(email.delivery![0]!.attempts).toBeGreaterThanOrEqual(2)
    const suppressed = await mailroom.GET("/v1/api/suppressions", {})
    expect(suppressed.data?.meta.total).toBe(0)
  })

  it("a relay's refusal of the sender or of the message bounces the mail but suppresses no address; each recipient keeps its own answer", async () => {
    const box = await newBox(server.url, { user: await withApiKey(server.url) })
    const mailroom = createClient({ baseUrl: server.url, apiKey: box.user.apiKey })
    const deliveryOf = (emailId: string, settled: number) =>
      until("bounced", async () => {
        const { data } = await mailroom.GET("/v1/api/emails/{emailId}", { params: { path: { emailId } } })
        const delivery = data?.data.delivery ?? []
        return delivery.filter((d) => d.status === "bounced").length === settled ? delivery : undefined
      })
    const send = async (to: Array<string>, subject: string) => {
      const sent = await mailroom.POST("/v1/api/mailboxes/{mailboxId}/send", { params: { path: { mailboxId: box.mailboxId } }, body: { to, subject, text: "Hello" } })
      expect(sent.response.status, JSON.stringify(sent.error)).toBe(202)
      return sent.data!.data.email_id
    }
    // The relay does not take our sender (SES before the address is verified).
    relay.refuse("MAIL FROM", { code: 554, text: "5.7.1 Email address is not verified" })
    try {
      const refused = await deliveryOf(await send(["ann@example.org", "bob@example.net"], "Unverified sender"), 2)
      expect(refused.map((d) => [d.recipient, d.status, d.last_response])).toEqual([
        ["ann@example.org", "bounced", "554 5.7.1 Email address is not verified"],
        ["bob@example.net", "bounced", "554 5.7.1 Email address is not verified"]
      ])
    } finally {
      relay.refuse("MAIL FROM", undefined)
    }
    // The relay refuses one recipient at RCPT (its own policy) and the message's content at DATA.
    relay.script("cid@example.org", [554])
    relay.refuse("DATA", { code: 554, text: "5.7.1 Message content rejected" })
    try {
      const rejected = await deliveryOf(await send(["cid@example.org", "dee@example.org"], "Rejected content"), 2)
      expect(Object.fromEntries(rejected.map((d) => [d.recipient, d.last_response]))).toEqual({
        "cid@example.org": "554 5.0.0 Refused",
        "dee@example.org": "554 5.7.1 Message content rejected"
      })
    } finally {
      relay.refuse("DATA", undefined)
    }
    // None of it says an address takes no mail: nothing is suppressed, and the next send to them goes.
    const suppressions = await mailroom.GET("/v1/api/suppressions")
    expect(suppressions.data?.data).toEqual([])
    const before = relay.delivered().length
    await send(["ann@example.org", "dee@example.org"], "Verified now")
    await until("delivered", async () => (relay.delivered().length > before ? true : undefined))
  })

  it("a password reset link goes out through it too, from no-reply@, signed, and waits out a refusal", async () => {
    const person = await signUp(server.url, { email: `forgetful-${Date.now().toString(36)}@elsewhere.example` })
    relay.script(person.email, [451, 250])
    const before = relay.delivered().length
    const asked = await anonymous(server.url).POST("/api/auth/password-reset", { body: { email: person.email } })
    expect(asked.response.status).toBe(202)
    const delivered = (await relay.waitFor(before + 1)).at(-1)!
    expect(delivered).toMatchObject({ user: "mailroom", mailFrom: "no-reply@agents.localhost", rcptTo: [person.email] })
    // Refused once (451), then taken on the retry.
    expect(relay.attempts(person.email)).toHaveLength(2)
    const raw = delivered.raw.toString()
    expect(raw).toMatch(/^DKIM-Signature: .*d=agents\.localhost;/m)
    const { text } = await simpleParser(delivered.raw)
    const token = /#\/reset-password\/(mrp_[A-Za-z0-9_-]+)/.exec(text ?? "")![1]!
    const done = await anonymous(server.url).POST("/api/auth/password-reset/confirm", { body: { token, password: "chosen by mail" } })
    expect(done.response.status).toBe(200)
  })

  it("a relay that stops answering mid-delivery does not hold a shutdown: the attempt is left unrecorded and goes out after the restart", async () => {
    const box = await newBox(server.url, { user: await withApiKey(server.url) })
    const mailroom = createClient({ baseUrl: server.url, apiKey: box.user.apiKey })
    const before = relay.delivered().length
    relay.hold(true)
    const sent = await mailroom.POST("/v1/api/mailboxes/{mailboxId}/send", {
      params: { path: { mailboxId: box.mailboxId } },
      body: { to: ["patient@example.org"], subject: "Held", text: "Hello" }
    })
    expect(sent.response.status).toBe(202)
    await until("the message read and never answered", async () => (relay.held() > 0 ? true : undefined))
    // Meanwhile its delivery reads as tried now: not yet an attempt, but one under way.
    const during = await mailroom.GET("/v1/api/emails/{emailId}", { params: { path: { emailId: sent.data!.data.email_id } } })
    expect(during.data!.data.delivery).toMatchObject([{ recipient: "patient@example.org", status: "queued", attempts: 0, attempting: true }])
    // The mta waits on the relay's answer for up to a minute; the shutdown waits 5 s for it, not SHUTDOWN_TIMEOUT's 30.
    const stopping = Date.now()
    expect(await server.stop()).toBe(0)
    expect(Date.now() - stopping).toBeLessThan(20_000)
    expect(server.output()).not.toMatch(/SHUTDOWN_TIMEOUT/)
    relay.hold(false)
    server = await startServer(serverEnv)
    await relay.waitFor(before + 1, 30_000)
    const restarted = createClient({ baseUrl: server.url, apiKey: box.user.apiKey })
    const email = await until("sent", async () => {
      const { data } = await restarted.GET("/v1/api/emails/{emailId}", { params: { path: { emailId: sent.data!.data.email_id } } })
      return data?.data.delivery?.[0]?.status === "sent" ? data.data : undefined
    })
    // The attempt cut short was not one: nothing was recorded of it.
    expect(email.delivery).toMatchObject([{ recipient: "patient@example.org", status: "sent", attempts: 1, attempting: false }])
  }, 90_000)
})
