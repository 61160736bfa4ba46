/**
 * API keys limited to some mailboxes (`mailboxIds`), over real HTTP: such a key sees an account that
 * holds its mailboxes only. Lists, search, webhooks, the event stream and MCP show their mail alone;
 * an email, conversation, webhook or mailbox of another mailbox answers the 404 an unknown one
 * answers; routes about the whole account answer 403 FORBIDDEN. Which route reaches mailboxes how is src/http/reach.ts's table, which must decide
 * every `/v1` route of the contract (checked in process, below).
 */
import { OpenApi } from "@effect/platform"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { beforeAll, describe, expect, it } from "vitest"
import { MailroomApi } from "../../src/http/api.ts"
import { routeReach } from "../../src/http/reach.ts"
import { signUp, withApiKey } from "../support/accounts.ts"
import { upgrade } from "../support/billing.ts"
import { type Box, newBox } from "../support/mailboxes.ts"
import { sendMail } from "../support/send-mail.ts"
import { startReceiver } from "../support/receiver.ts"
import { type SuiteServer, useSuiteServer } from "../support/server.ts"
import { openEvents } from "../support/sse.ts"
import { offContract, withKey, withToken } from "../support/typed-client.ts"
import { until } from "../support/wait.ts"

let suite: SuiteServer

// Webhooks to an address on this machine (nothing listens: no event is delivered in this suite).
useSuiteServer((s) => {
  suite = s
}, { WEBHOOK_ALLOW_PRIVATE: "true" })

const notFound = (details: Record<string, unknown>) => ({
  success: false,
  error: { code: "NOT_FOUND", message: expect.any(String), details }
})

describe("every /v1 route is decided for limited keys", () => {
  it("names each route of the contract in src/http/reach.ts's table, and nothing else", () => {
    const spec = OpenApi.fromApi(MailroomApi)
    const routes = Object.entries(spec.paths).flatMap(([path, operations]) =>
      Object.entries(operations as Record<string, { security?: ReadonlyArray<unknown> }>)
        .filter(([method, operation]) => ["get", "post", "patch", "put", "delete"].includes(method) && (operation.security?.length ?? 0) > 0)
        .map(([method]) => `${method.toUpperCase()} ${path.replace(/\{([^}]+)\}/g, ":$1")}`)
        .filter((route) => route.split(" ")[1]!.startsWith("/v1"))
    )
    expect(routes.length).toBeGreaterThan(50)
    expect(Object.keys(routeReach).sort()).toEqual(routes.sort())
  })
})

describe("a key limited to some mailboxes", () => {
  let user: Awaited<ReturnType<typeof withApiKey>>
  let mine: Box
  let other: Box
  let limited: ReturnType<typeof withKey>
  let full: ReturnType<typeof withKey>
  let keyId: string
  let limitedKey: string
  let myEmail: { email_id: string; thread_id: string }
  let otherEmail: { email_id: string; thread_id: string }

  const arrived = async (box: Box, subject: string) => {
    await sendMail(suite.server.smtpPort, { to: box.address, from: "sender@example.com", subject, text: `About ${subject}: quarterly invoice reconciliation` })
    return until(`${subject} listed`, async () => {
      const { data } = await full.GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId: box.mailboxId } } })
      return data?.data.find((email) => email.subject === subject)
    }, 30_000, 100, 500)
  }

  beforeAll(async () => {
    // Pro (100 requests a minute): the suite makes more than free's 20.
    user = await withApiKey(suite.url)
    await upgrade(suite.url, user.apiKey, "pro")
    full = withKey(suite.url, user)
    mine = await newBox(suite.url, { user })
    other = await newBox(suite.url, { user })
    myEmail = await arrived(mine, "Mine")
    otherEmail = await arrived(other, "Theirs")
    const created = await withToken(suite.url, user).POST("/v1/api-keys", { body: { name: "agent one", mailboxIds: [mine.mailboxId] } })
    expect(created.response.status).toBe(201)
    expect(created.data?.data.mailboxIds).toEqual([mine.mailboxId])
    keyId = created.data!.data.keyId
    limitedKey = created.data!.data.apiKey
    limited = withKey(suite.url, { apiKey: limitedKey })
  })

  it("is listed with its mailboxes; a key without a limit with null", async () => {
    const { data } = await withToken(suite.url, user).GET("/v1/api-keys")
    expect(data?.data.find((key) => key.keyId === keyId)?.mailboxIds).toEqual([mine.mailboxId])
    expect(data?.data.find((key) => key.keyId === user.keyId)?.mailboxIds).toBeNull()
  })

  it("sees its mailboxes only, in the mailbox list and by id", async () => {
    const listed = await limited.GET("/v1/api/mailboxes")
    expect(listed.data?.mailboxes.map((box) => box.mailbox_id)).toEqual([mine.mailboxId])
    expect(listed.data?.meta.total).toBe(1)
    expect((await limited.GET("/v1/api/mailboxes/{mailboxId}", { params: { path: { mailboxId: mine.mailboxId } } })).response.status).toBe(200)
    const hidden = await limited.GET("/v1/api/mailboxes/{mailboxId}", { params: { path: { mailboxId: other.mailboxId } } })
    expect(hidden.response.status).toBe(404)
    expect(hidden.error).toEqual(notFound({ mailbox_id: other.mailboxId }))
    const emails = await limited.GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId: other.mailboxId } } })
    expect(emails.response.status).toBe(404)
    expect(emails.error).toEqual(notFound({ mailbox_id: other.mailboxId }))
  })

  it("lists the mail, conversations and drafts of its mailboxes only", async () => {
    const emails = await limited.GET("/v1/api/emails")
    expect(emails.data?.data.map((email) => email.email_id)).toEqual([myEmail.email_id])
    expect(emails.data?.meta.total).toBe(1)
    const threads = await limited.GET("/v1/api/threads")
    expect(threads.data?.data.map((thread) => thread.thread_id)).toEqual([myEmail.thread_id])
    // A cursor of another mailbox's email is no email of this key's.
    const after = await limited.GET("/v1/api/emails", { params: { query: { after: otherEmail.email_id } } })
    expect(after.response.status).toBe(400)
    expect(after.error?.error.details).toEqual({ after: expect.any(String) })
    // Named, another mailbox is one that does not exist; its own is listed.
    for (const path of ["/v1/api/emails", "/v1/api/threads"] as const) {
      const named = await limited.GET(path, { params: { query: { mailbox_id: other.mailboxId } } })
      expect(named.response.status).toBe(404)
      expect(named.error).toEqual(notFound({ mailbox_id: other.mailboxId }))
      expect((await limited.GET(path, { params: { query: { mailbox_id: mine.mailboxId } } })).data?.meta.total).toBe(1)
    }

    await full.POST("/v1/api/mailboxes/{mailboxId}/drafts", { params: { path: { mailboxId: other.mailboxId } }, body: { to: ["a@example.com"], subject: "theirs" } })
    await full.POST("/v1/api/mailboxes/{mailboxId}/drafts", { params: { path: { mailboxId: mine.mailboxId } }, body: { to: ["a@example.com"], subject: "mine" } })
    const drafts = await limited.GET("/v1/api/drafts")
    expect(drafts.data?.data.map((draft) => draft.subject)).toEqual(["mine"])
    expect((await full.GET("/v1/api/drafts")).data?.data).toHaveLength(2)
  })

  it("reads and changes the mail of its mailboxes; another mailbox's email or conversation is not found", async () => {
    const path = (email: { email_id: string }) => ({ params: { path: { emailId: email.email_id } } })
    expect((await limited.GET("/v1/api/emails/{emailId}", path(myEmail))).response.status).toBe(200)
    expect((await limited.GET("/v1/api/emails/{emailId}/raw", { ...path(myEmail), parseAs: "text" })).response.status).toBe(200)
    for (const reply of [
      await limited.GET("/v1/api/emails/{emailId}", path(otherEmail)),
      await limited.GET("/v1/api/emails/{emailId}/raw", { ...path(otherEmail), parseAs: "text" }),
      await limited.PATCH("/v1/api/emails/{emailId}", { ...path(otherEmail), body: { add_labels: ["seen"] } }),
      await limited.DELETE("/v1/api/emails/{emailId}", path(otherEmail)),
      await limited.POST("/v1/api/emails/{emailId}/reply", { ...path(otherEmail), body: { text: "hello" } })
    ]) {
      expect(reply.response.status).toBe(404)
      expect(reply.error).toEqual(notFound({ email_id: otherEmail.email_id }))
    }
    const thread = await limited.GET("/v1/api/threads/{threadId}", { params: { path: { threadId: otherEmail.thread_id } } })
    expect(thread.response.status).toBe(404)
    expect(thread.error).toEqual(notFound({ thread_id: otherEmail.thread_id }))
    expect((await limited.GET("/v1/api/threads/{threadId}", { params: { path: { threadId: myEmail.thread_id } } })).response.status).toBe(200)
    // The email is still there, unchanged, for a key of the whole account.
    const kept = await full.GET("/v1/api/emails/{emailId}", path(otherEmail))
    expect(kept.data?.data.labels).not.toContain("seen")
    // With a bad body too, another mailbox's email and no email at all answer alike: which ids exist is not told.
    for (const emailId of [otherEmail.email_id, "eml_000000000000000000000000"]) {
      const bad = await limited.POST("/v1/api/emails/{emailId}/reply", { params: { path: { emailId } }, body: offContract({ txt: 1 }) })
      expect([bad.response.status, bad.error], emailId).toEqual([404, notFound({ email_id: emailId })])
    }
  })

  it("changes a batch only when every email is in its mailboxes: all or none", async () => {
    const batch = await limited.POST("/v1/api/emails/batch-update", {
      body: { email_ids: [myEmail.email_id, otherEmail.email_id], add_labels: ["triaged"] }
    })
    expect(batch.response.status).toBe(404)
    expect(batch.error).toEqual(notFound({ email_id: otherEmail.email_id }))
    const mineNow = await full.GET("/v1/api/emails/{emailId}", { params: { path: { emailId: myEmail.email_id } } })
    expect(mineNow.data?.data.labels).not.toContain("triaged")
    const deleted = await limited.POST("/v1/api/emails/batch-delete", { body: { email_ids: [otherEmail.email_id] } })
    expect(deleted.error).toEqual(notFound({ email_id: otherEmail.email_id }))
    const ok = await limited.POST("/v1/api/emails/batch-update", { body: { email_ids: [myEmail.email_id], add_labels: ["triaged"] } })
    expect(ok.data?.data.updated).toBe(1)
  })

  it("changes or deletes a batch of conversations only when every one is in its mailboxes", async () => {
    const both = [myEmail.thread_id, otherEmail.thread_id]
    const batch = await limited.POST("/v1/api/threads/batch-update", { body: { thread_ids: both, add_labels: ["sorted"] } })
    expect(batch.response.status).toBe(404)
    expect(batch.error).toEqual(notFound({ thread_id: otherEmail.thread_id }))
    const deleted = await limited.POST("/v1/api/threads/batch-delete", { body: { thread_ids: both } })
    expect(deleted.response.status).toBe(404)
    expect(deleted.error).toEqual(notFound({ thread_id: otherEmail.thread_id }))
    const mine = await full.GET("/v1/api/threads/{threadId}", { params: { path: { threadId: myEmail.thread_id } } })
    expect(mine.data?.data.emails.map((email) => email.labels.includes("sorted"))).toEqual([false])
    const ok = await limited.POST("/v1/api/threads/batch-update", { body: { thread_ids: [myEmail.thread_id], add_labels: ["sorted"] } })
    expect(ok.data?.data.updated).toBe(1)
  })

  it("searches its mailboxes' mail only", async () => {
    const everything = await until("both emails searchable", async () => {
      const { data } = await full.POST("/v1/search", { body: { query: "quarterly invoice reconciliation", mode: "text" } })
      return data && data.data.length === 2 ? data.data : undefined
    }, 30_000, 200, 1_000)
    expect(everything).toHaveLength(2)
    const { data } = await limited.POST("/v1/search", { body: { query: "quarterly invoice reconciliation", mode: "text" } })
    expect(data?.data.map((hit) => hit.email_id)).toEqual([myEmail.email_id])
  })

  it("sends from its mailboxes only", async () => {
    const sent = await limited.POST("/v1/api/mailboxes/{mailboxId}/send", {
      params: { path: { mailboxId: mine.mailboxId } },
      body: { to: [other.address], subject: "Hello", text: "From a limited key" }
    })
    expect(sent.response.status).toBe(202)
    const refused = await limited.POST("/v1/api/mailboxes/{mailboxId}/send", {
      params: { path: { mailboxId: other.mailboxId } },
      body: { to: [mine.address], subject: "Hello", text: "Not mine to send from" }
    })
    expect(refused.response.status).toBe(404)
    expect(refused.error).toEqual(notFound({ mailbox_id: other.mailboxId }))
  })

  it("is refused routes about the whole account: 403 FORBIDDEN naming its mailboxes", async () => {
    const forbidden = { success: false, error: { code: "FORBIDDEN", message: expect.stringMatching(/limited/), details: { mailboxIds: [mine.mailboxId] } } }
    for (const reply of [
      await limited.POST("/v1/api/mailboxes", { body: { local_part: "another", domain: "agents.localhost" } }),
      await limited.GET("/v1/api-keys"),
      await limited.POST("/v1/api-keys", { body: { name: "wider" } }),
      await limited.GET("/v1/api/domains"),
      await limited.GET("/v1/billing/subscription"),
      await limited.GET("/v1/api/lists/{list}", { params: { path: { list: "block" } } }),
      await limited.GET("/v1/api/suppressions")
    ]) {
      expect(reply.response.status).toBe(403)
      expect(reply.error).toEqual(forbidden)
    }
  })

  it("manages the webhooks of its mailboxes only; one it makes listens to its mailboxes", async () => {
    const hook = { url: "http://127.0.0.1:9/mailroom", events: ["email.received" as const] }
    const own = await limited.POST("/v1/api/webhooks", { body: hook })
    expect(own.response.status).toBe(201)
    expect(own.data?.data.mailbox_ids).toEqual([mine.mailboxId])
    // Events about no mailbox alone would never reach a webhook that listens to its mailboxes: refused, not kept silent.
    const deaf = await limited.POST("/v1/api/webhooks", { body: { ...hook, events: ["api_key.created"] } })
    expect(deaf.response.status).toBe(400)
    expect(deaf.error?.error).toMatchObject({
      code: "VALIDATION_ERROR",
      details: {
        events: "would never be sent any of these events: api_key.created is about no mailbox, and the webhook is narrowed to mailbox_ids (as a key limited to mailboxes narrows it)"
      }
    })
    const everywhere = await full.POST("/v1/api/webhooks", { body: hook })
    const theirs = await full.POST("/v1/api/webhooks", { body: { ...hook, mailbox_ids: [other.mailboxId] } })
    const listed = await limited.GET("/v1/api/webhooks")
    expect(listed.data?.data.map((webhook) => webhook.webhook_id)).toEqual([own.data!.data.webhook_id])
    expect(listed.data?.meta.total).toBe(1)
    expect((await full.GET("/v1/api/webhooks")).data?.meta.total).toBe(3)
    for (const id of [everywhere.data!.data.webhook_id, theirs.data!.data.webhook_id]) {
      const path = { params: { path: { id } } }
      for (const reply of [
        await limited.GET("/v1/api/webhooks/{id}", path),
        await limited.PATCH("/v1/api/webhooks/{id}", { ...path, body: { active: false } }),
        await limited.DELETE("/v1/api/webhooks/{id}", path),
        await limited.GET("/v1/api/webhooks/{id}/deliveries", path)
      ]) {
        expect(reply.response.status).toBe(404)
        expect(reply.error).toEqual(notFound({ webhook_id: id }))
      }
    }
    expect((await full.GET("/v1/api/webhooks/{id}", { params: { path: { id: everywhere.data!.data.webhook_id } } })).data?.data.active).toBe(true)
    // Never wider than its mailboxes: not every mailbox (null), not another one.
    const refusals: Array<[Array<string> | null, unknown]> = [
      [null, expect.stringMatching(/this key's mailboxes/)],
      [[mine.mailboxId, other.mailboxId], `not a mailbox of this account: ${other.mailboxId}`]
    ]
    for (const [mailbox_ids, message] of refusals) {
      const made = await limited.POST("/v1/api/webhooks", { body: { ...hook, mailbox_ids } })
      expect(made.response.status).toBe(400)
      expect(made.error?.error).toEqual({ code: "VALIDATION_ERROR", message: expect.any(String), details: { mailbox_ids: message } })
      const changed = await limited.PATCH("/v1/api/webhooks/{id}", { params: { path: { id: own.data!.data.webhook_id } }, body: { mailbox_ids } })
      expect(changed.response.status).toBe(400)
      expect(changed.error?.error.details).toEqual({ mailbox_ids: message })
    }
  })

  it("sees and sends again only the deliveries about its mailboxes of a webhook a full key narrowed to them", async () => {
    const receiver = await startReceiver()
    try {
      // A webhook of the whole account logs deliveries about both mailboxes and about no mailbox.
      const made = await full.POST("/v1/api/webhooks", { body: { url: `${receiver.url}/narrowed`, events: ["email.received", "api_key.created"] } })
      const id = made.data!.data.webhook_id
      await arrived(mine, "Hook ours")
      await arrived(other, "Hook other")
      await withToken(suite.url, user).POST("/v1/api-keys", { body: { name: "about no mailbox" } })
      const posted = await receiver.waitFor("/narrowed", 3)
      const aboutMine = posted.find((request) => JSON.parse(request.body).data.mailbox_id === mine.mailboxId)!.headers["webhook-id"]
      const path = { params: { path: { id } } }
      const logged = await until("three deliveries finished", async () => {
        const { data } = await full.GET("/v1/api/webhooks/{id}/deliveries", path)
        return data?.data.filter((delivery) => delivery.status === "succeeded").length === 3 ? data.data : undefined
      }, 20_000, 250)
      const ours = logged.find((delivery) => delivery.event_id === aboutMine)!
      const others = logged.filter((delivery) => delivery !== ours)
      expect(others.map((delivery) => delivery.event).sort()).toEqual(["api_key.created", "email.received"])

      const narrowed = await full.PATCH("/v1/api/webhooks/{id}", { ...path, body: { mailbox_ids: [mine.mailboxId] } })
      expect(narrowed.data?.data.mailbox_ids).toEqual([mine.mailboxId])
      // Its own now, but the deliveries about another mailbox or about the account stay the account's.
      const seen = await limited.GET("/v1/api/webhooks/{id}/deliveries", path)
      expect(seen.response.status).toBe(200)
      expect(seen.data?.data.map((delivery) => delivery.delivery_id)).toEqual([ours.delivery_id])
      expect(seen.data?.meta.total).toBe(1)
      for (const { delivery_id: deliveryId } of others) {
        const resend = await limited.POST("/v1/api/webhooks/{id}/deliveries/{deliveryId}/resend", { params: { path: { id, deliveryId } } })
        expect(resend.response.status).toBe(404)
        expect(resend.error).toEqual(notFound({ delivery_id: deliveryId }))
      }
      expect(receiver.received("/narrowed")).toHaveLength(3)
      const again = await limited.POST("/v1/api/webhooks/{id}/deliveries/{deliveryId}/resend", { params: { path: { id, deliveryId: ours.delivery_id } } })
      expect(again.data?.data).toMatchObject({ delivery_id: ours.delivery_id, status: "succeeded" })
      expect(receiver.received("/narrowed").at(-1)!.headers["webhook-id"]).toBe(aboutMine)
      // The account's full key still sees and resends them all, newest first or (asked) oldest first.
      const newestFirst = (await full.GET("/v1/api/webhooks/{id}/deliveries", path)).data!
      expect(newestFirst.meta.total).toBe(3)
      const oldestFirst = await full.GET("/v1/api/webhooks/{id}/deliveries", { params: { path: { id }, query: { sort: "created_at:asc" } } })
      expect(oldestFirst.data?.data.map((d) => d.delivery_id)).toEqual(newestFirst.data.map((d) => d.delivery_id).reverse())
      const unsortable = await full.GET("/v1/api/webhooks/{id}/deliveries", { params: { path: { id }, query: { sort: "status:asc" } } })
      expect(unsortable.error?.error).toEqual({
        code: "VALIDATION_ERROR",
        message: expect.any(String),
        details: { sort: "must be <field>:<asc|desc> with field one of created_at" }
      })
      const theirs = await full.POST("/v1/api/webhooks/{id}/deliveries/{deliveryId}/resend", { params: { path: { id, deliveryId: others[0]!.delivery_id } } })
      expect(theirs.response.status).toBe(200)
      await full.DELETE("/v1/api/webhooks/{id}", path)
    } finally {
      await receiver.close()
    }
  })

  it("organizes meetings from its mailboxes only; another mailbox's meeting is not found", async () => {
    const meeting = { summary: "Sync", start: { date_time: "2026-12-03T10:00:00Z" }, end: { date_time: "2026-12-03T11:00:00Z" }, attendees: ["a@example.com"] }
    const own = await limited.POST("/v1/api/mailboxes/{mailboxId}/meetings", { params: { path: { mailboxId: mine.mailboxId } }, body: meeting })
    expect(own.response.status).toBe(201)
    const refused = await limited.POST("/v1/api/mailboxes/{mailboxId}/meetings", { params: { path: { mailboxId: other.mailboxId } }, body: meeting })
    expect(refused.error).toEqual(notFound({ mailbox_id: other.mailboxId }))
    const theirs = await full.POST("/v1/api/mailboxes/{mailboxId}/meetings", { params: { path: { mailboxId: other.mailboxId } }, body: meeting })
    const id = theirs.data!.data.meeting_id
    const path = { params: { path: { meetingId: id } } }
    for (const reply of [
      await limited.GET("/v1/api/meetings/{meetingId}", path),
      await limited.PATCH("/v1/api/meetings/{meetingId}", { ...path, body: { summary: "Mine now" } }),
      await limited.POST("/v1/api/meetings/{meetingId}/cancel", path)
    ]) expect(reply.error).toEqual(notFound({ meeting_id: id }))
    expect((await limited.GET("/v1/api/meetings/{meetingId}", { params: { path: { meetingId: own.data!.data.meeting_id } } })).response.status).toBe(200)
    expect((await full.GET("/v1/api/meetings/{meetingId}", path)).data?.data).toMatchObject({ summary: "Sync", status: "confirmed" })
    // Its mailbox's schedule, not another's.
    const december = { from: "2026-12-01T00:00:00Z", to: "2026-12-31T00:00:00Z" }
    const schedule = await limited.GET("/v1/api/mailboxes/{mailboxId}/schedule", { params: { path: { mailboxId: mine.mailboxId }, query: december } })
    expect(schedule.data?.data.map((o) => [o.summary, o.role])).toEqual([["Sync", "organizer"]])
    const theirSchedule = await limited.GET("/v1/api/mailboxes/{mailboxId}/schedule", { params: { path: { mailboxId: other.mailboxId }, query: december } })
    expect(theirSchedule.error).toEqual(notFound({ mailbox_id: other.mailboxId }))
    // Several at once: its own, not with another's, whichever way round.
    const ownTogether = await limited.GET("/v1/api/schedule", { params: { query: { mailbox_ids: mine.mailboxId, ...december } } })
    expect(ownTogether.data?.data.map((o) => [o.mailbox_id, o.summary])).toEqual([[mine.mailboxId, "Sync"]])
    for (const mailbox_ids of [`${mine.mailboxId},${other.mailboxId}`, `${other.mailboxId},${mine.mailboxId}`]) {
      expect((await limited.GET("/v1/api/schedule", { params: { query: { mailbox_ids, ...december } } })).error).toEqual(notFound({ mailbox_id: other.mailboxId }))
      expect((await limited.GET("/v1/api/availability", { params: { query: { mailbox_ids } } })).error).toEqual(notFound({ mailbox_id: other.mailboxId }))
    }
  })

  it("hears the events of its mailboxes only on the event stream", async () => {
    const headers = { "x-api-key": limitedKey }
    const refused = await openEvents(`${suite.url}/v1/events?mailbox_id=${other.mailboxId}`, headers)
    expect(refused.status).toBe(404)
    expect(refused.body).toEqual(notFound({ mailbox_id: other.mailboxId }))
    // Another mailbox's event is no resume point of its: answered as one that does not exist.
    for (const after of [`email.received:${otherEmail.email_id}`, "email.received:eml_000000000000000000000000"]) {
      const resumed = await openEvents(`${suite.url}/v1/events?after=${after}`, headers)
      expect(resumed.status).toBe(400)
      expect(resumed.body).toMatchObject({ error: { code: "VALIDATION_ERROR", details: { after: expect.stringMatching(/^is not an event of this account/) } } })
    }
    // Its events are about its mailboxes: a stream of events about no mailbox would hear nothing, as such a webhook would.
    const deaf = await openEvents(`${suite.url}/v1/events?types=api_key.created`, headers)
    expect(deaf.status).toBe(400)
    expect(deaf.body).toMatchObject({
      success: false,
      error: {
        code: "VALIDATION_ERROR",
        details: { types: "would never be sent any of these events: api_key.created is about no mailbox, and the stream is narrowed to the key's mailboxes" }
      }
    })
    const stream = await openEvents(`${suite.url}/v1/events?types=email.received`, headers)
    try {
      expect(stream.status).toBe(200)
      await sendMail(suite.server.smtpPort, { to: other.address, from: "sender@example.com", subject: "Not for the ops agent", text: "x" })
      await sendMail(suite.server.smtpPort, { to: mine.address, from: "sender@example.com", subject: "For the ops agent", text: "y" })
      const heard = JSON.parse((await stream.next(30_000)).data!)
      expect(heard.data).toMatchObject({ mailbox_id: mine.mailboxId, subject: "For the ops agent" })
      expect(await stream.drain(500)).toEqual([])
    } finally {
      stream.close()
    }
  })

  it("suggests its mailboxes' subjects, never the account's past queries", async () => {
    await full.POST("/v1/search", { body: { query: "Theirs and nobody else's", mode: "text" } })
    const { data } = await limited.GET("/v1/search/suggestions", { params: { query: { q: "the" } } })
    expect(data?.data).toEqual([])
    const mineOnly = await limited.GET("/v1/search/suggestions", { params: { query: { q: "mi" } } })
    expect(mineOnly.data?.data).toEqual(["Mine"])
    expect((await full.GET("/v1/search/suggestions", { params: { query: { q: "the" } } })).data?.data).toContain("Theirs and nobody else's")
  })

  it("counts its mailboxes' mail in the stats, as a key of the whole account counts that mailbox's", async () => {
    const own = await limited.GET("/v1/api/stats")
    expect(own.response.status).toBe(200)
    const mailbox = await full.GET("/v1/api/stats", { params: { query: { mailbox_id: mine.mailboxId } } })
    // Recipients' fates may move between the two answers (the send above is delivered in the background).
    const counts = (data: { received: number; sent: number; from: string; to: string }) => [data.received, data.sent, data.from, data.to]
    expect(counts(own.data!.data)).toEqual(counts(mailbox.data!.data))
    expect(own.data!.data.mailbox_id).toBeNull()
    const everything = await full.GET("/v1/api/stats")
    expect(own.data!.data.received).toBeGreaterThan(0)
    expect(everything.data!.data.received).toBeGreaterThan(own.data!.data.received)
    const hidden = await limited.GET("/v1/api/stats", { params: { query: { mailbox_id: other.mailboxId } } })
    expect(hidden.response.status).toBe(404)
    expect(hidden.error).toEqual(notFound({ mailbox_id: other.mailboxId }))
    const wrong = await full.GET("/v1/api/stats", { params: { query: { days: offContract("0") } } })
    expect(wrong.response.status).toBe(400)
    expect(wrong.error?.error).toMatchObject({ code: "VALIDATION_ERROR", details: { days: "must be an integer from 1 to 90" } })
  })

  it("uses MCP's tools over its mailboxes only: the account's tools are not listed, another mailbox is not found", async () => {
    const mcp = new Client({ name: "limited-key-test", version: "1.0.0" })
    await mcp.connect(new StreamableHTTPClientTransport(new URL(`${suite.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${limitedKey}` } } }))
    try {
      const call = async (name: string, args: Record<string, unknown>) => {
        const answer = (await mcp.callTool({ name, arguments: args })) as unknown as { isError?: boolean; content: Array<{ text: string }> }
        return { isError: answer.isError === true, value: JSON.parse(answer.content[0]!.text) }
      }
      const { tools } = await mcp.listTools()
      expect(tools.map((tool) => tool.name)).not.toContain("create_mailbox")
      expect(tools.map((tool) => tool.name)).toContain("send_email")
      expect((await call("list_mailboxes", {})).value.mailboxes.map((box: { mailbox_id: string }) => box.mailbox_id)).toEqual([mine.mailboxId])
      const threads = await call("list_threads", {})
      expect(threads.value.threads.map((thread: { thread_id: string }) => thread.thread_id)).toContain(myEmail.thread_id)
      expect(threads.value.threads.map((thread: { thread_id: string }) => thread.thread_id)).not.toContain(otherEmail.thread_id)
      expect((await call("get_email", { email_id: myEmail.email_id })).isError).toBe(false)
      for (const [name, args, details] of [
        ["get_email", { email_id: otherEmail.email_id }, { email_id: otherEmail.email_id }],
        ["delete_emails", { email_ids: [otherEmail.email_id] }, { email_id: otherEmail.email_id }],
        ["get_thread", { thread_id: otherEmail.thread_id }, { thread_id: otherEmail.thread_id }],
        ["update_threads_labels", { thread_ids: [myEmail.thread_id, otherEmail.thread_id], add_labels: ["x"] }, { thread_id: otherEmail.thread_id }],
        ["delete_threads", { thread_ids: [myEmail.thread_id, otherEmail.thread_id] }, { thread_id: otherEmail.thread_id }],
        ["list_emails", { mailbox_id: other.mailboxId }, { mailbox_id: other.mailboxId }],
        ["find_free_time", { mailbox_id: mine.mailboxId, with_mailbox_ids: [other.mailboxId] }, { mailbox_id: other.mailboxId }],
        ["send_email", { mailbox_id: other.mailboxId, to: ["a@example.com"], subject: "x", text: "x" }, { mailbox_id: other.mailboxId }]
      ] as const) {
        const answer = await call(name, args)
        expect(answer, name).toEqual({ isError: true, value: { error: { code: "NOT_FOUND", message: expect.any(String), details } } })
      }
      for (const [name, args] of [["create_mailbox", { local_part: "another" }], ["block_sender", { entry: "spam@example.com" }]] as const) {
        const answer = await call(name, args)
        expect(answer, name).toEqual({ isError: true, value: { error: { code: "FORBIDDEN", message: expect.any(String), details: { mailboxIds: [mine.mailboxId] } } } })
      }
      expect((await call("block_sender", { entry: "spam@example.com", mailbox_id: mine.mailboxId })).isError).toBe(false)
    } finally {
      await mcp.close()
    }
  })
})

describe("creating a limited key", () => {
  it.each([
    ["an empty list", () => [], "must list at least one mailbox id (left out: the whole account)"],
    ["an unknown mailbox", () => ["mbx_unknown"], "not a mailbox of this account: mbx_unknown"]
  ])("refuses %s with 400 VALIDATION_ERROR on mailboxIds", async (_name, ids, message) => {
    const user = await signUp(suite.url)
    const reply = await withToken(suite.url, user).POST("/v1/api-keys", { body: { name: "agent", mailboxIds: ids() } })
    expect(reply.response.status).toBe(400)
    expect(reply.error).toEqual({ success: false, error: { code: "VALIDATION_ERROR", message: expect.any(String), details: { mailboxIds: message } } })
  })

  it("refuses another account's mailbox as it refuses an unknown one", async () => {
    const stranger = await newBox(suite.url)
    const user = await signUp(suite.url)
    const reply = await withToken(suite.url, user).POST("/v1/api-keys", { body: { name: "agent", mailboxIds: [stranger.mailboxId] } })
    expect(reply.response.status).toBe(400)
    expect(reply.error?.error.details).toEqual({ mailboxIds: `not a mailbox of this account: ${stranger.mailboxId}` })
  })
})
