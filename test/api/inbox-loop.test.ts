/**
 * An agent's inbox loop over the wire (issue 17): mail that arrives over SMTP is labelled `inbound`
 * and `unread`, an agent marks it handled with PATCH, lists filter by labels and read state, a batch
 * changes many at once, and a list with `wait` answers as soon as newer mail arrives; what was
 * extracted from a message (its code, links, reply text) shows in the email and in the
 * `email.received` webhook payload. Each refusal answers SPEC's envelope with its code and details.
 * The label rules themselves (composition, fact labels, batches of 100, the event) are
 * test/domain/labels.test.ts's subject; extraction's are test/domain/extraction.test.ts's.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createClient, type MailroomFetchClient } from "../../packages/client/src/fetch-client.ts"
import { withApiKey } from "../support/accounts.ts"
import { upgrade } from "../support/billing.ts"
import { type Receiver, startReceiver } from "../support/receiver.ts"
import { type Box, newBox } from "../support/mailboxes.ts"
import { sendMail } from "../support/send-mail.ts"
import { type SuiteServer, useSuiteServer } from "../support/server.ts"
import { until } from "../support/wait.ts"

let suite: SuiteServer
let hooks: Receiver

beforeAll(async () => {
  hooks = await startReceiver()
})

afterAll(async () => {
  await hooks?.close()
})

// The webhook receiver listens on 127.0.0.1.
useSuiteServer((s) => {
  suite = s
}, { WEBHOOK_ALLOW_PRIVATE: "true" })

const deliver = (to: string, subject: string) => sendMail(suite.server.smtpPort, { to, subject, text: `About ${subject}` })

describe("labels and read state over HTTP", () => {
  let box: Box
  let mailroom: MailroomFetchClient
  let first: string
  let second: string

  const list = (query: { labels?: string; exclude_labels?: string; unread?: string; from?: string; received_after?: string; received_before?: string }) =>
    mailroom.GET("/v1/api/mailboxes/{mailboxId}/emails", {
      params: { path: { mailboxId: box.mailboxId }, query: query as never }
    })

  beforeAll(async () => {
    // Pro (100 requests a minute): waiting for mail polls, and on a busy machine free's 20 ran out.
    const user = await withApiKey(suite.url)
    await upgrade(suite.url, user.apiKey, "pro")
    box = await newBox(suite.url, { user })
    mailroom = createClient({ baseUrl: suite.url, apiKey: box.user.apiKey })
    await deliver(box.address, "First")
    await deliver(box.address, "Second")
    const arrived = await until("both emails listed", async () => {
      const { data } = await list({})
      return data && data.data.length === 2 ? data.data : undefined
    }, 30_000, 100, 500)
    second = arrived[0]!.email_id
    first = arrived[1]!.email_id
  })

  it("arriving mail is inbound and unread; PATCH marks it handled and labels it, and lists filter on both", async () => {
    const before = await mailroom.GET("/v1/api/emails/{emailId}", { params: { path: { emailId: first } } })
    // Nothing vouches for the sender's mail from 127.0.0.1 (issue 20): unauthenticated too.
    expect(before.data?.data.labels).toEqual(["inbound", "unread", "unauthenticated"])

    const patched = await mailroom.PATCH("/v1/api/emails/{emailId}", {
      params: { path: { emailId: first } },
      body: { add_labels: ["billing"], remove_labels: ["unread"] }
    })
    expect(patched.response.status).toBe(200)
    expect(patched.data?.data).toMatchObject({ email_id: first, labels: ["inbound", "unauthenticated", "billing"] })

    const unread = await list({ unread: "true" })
    expect(unread.data?.data.map((email) => email.email_id)).toEqual([second])
    expect(unread.data?.meta.total).toBe(1)
    const billing = await list({ labels: "billing,inbound" })
    expect(billing.data?.data.map((email) => email.email_id)).toEqual([first])
    const others = await list({ exclude_labels: "billing" })
    expect(others.data?.data.map((email) => email.email_id)).toEqual([second])
    // Every mailbox's mail at once takes the same filters (services/mail/emails.ts `listAll` has the rules).
    const everywhere = await mailroom.GET("/v1/api/emails", { params: { query: { labels: "billing" } } })
    expect(everywhere.data?.data.map((email) => [email.email_id, email.mailbox_id])).toEqual([[first, box.mailboxId]])
    const refused = await mailroom.GET("/v1/api/emails", { params: { query: { wait: 5 } } })
    expect(refused.response.status).toBe(400)
    expect(refused.error?.error).toMatchObject({ code: "VALIDATION_ERROR", details: { wait: expect.stringContaining("one mailbox's list") } })
    // Named by mailbox_id, one mailbox's list, as its own route answers (wait too), and its conversations.
    const one = await mailroom.GET("/v1/api/emails", { params: { query: { mailbox_id: box.mailboxId, unread: "true", wait: 5 } } })
    expect(one.data?.data.map((email) => email.email_id)).toEqual([second])
    const threads = await mailroom.GET("/v1/api/threads", { params: { query: { mailbox_id: box.mailboxId, labels: "billing" } } })
    expect(threads.data?.data.map((thread) => thread.mailbox_id)).toEqual([box.mailboxId])
    for (const path of ["/v1/api/emails", "/v1/api/threads"] as const) {
      const unknown = await mailroom.GET(path, { params: { query: { mailbox_id: "mbx_nope" } } })
      expect(unknown.response.status).toBe(404)
      expect(unknown.error?.error).toMatchObject({ code: "NOT_FOUND", details: { mailbox_id: "mbx_nope" } })
    }
  })

  it("a batch update changes every listed email and answers their labels", async () => {
    const batch = await mailroom.POST("/v1/api/emails/batch-update", {
      body: { email_ids: [first, second], add_labels: ["q4"] }
    })
    expect(batch.response.status).toBe(200)
    expect(batch.data?.data.updated).toBe(2)
    expect(Object.fromEntries((batch.data?.data.emails ?? []).map((email) => [email.email_id, email.labels]))).toEqual({
      [first]: ["inbound", "unauthenticated", "billing", "q4"],
      [second]: ["inbound", "unread", "unauthenticated", "q4"]
    })
  })

  it("lists the labels the mail carries, by name, each counted with its unread; of one mailbox too; paged; refusals by field", async () => {
    const labels = await mailroom.GET("/v1/api/labels")
    expect(labels.response.status).toBe(200)
    expect(labels.data).toEqual({
      success: true,
      data: [
        { label: "billing", email_count: 1, unread_count: 0 },
        { label: "inbound", email_count: 2, unread_count: 1 },
        { label: "q4", email_count: 2, unread_count: 1 },
        { label: "unauthenticated", email_count: 2, unread_count: 1 },
        { label: "unread", email_count: 1, unread_count: 1 }
      ],
      meta: { total: 5, limit: 20, offset: 0, hasMore: false }
    })
    const paged = await mailroom.GET("/v1/api/labels", { params: { query: { mailbox_id: box.mailboxId, limit: 2, offset: 1 } } })
    expect(paged.data?.data.map((row) => row.label)).toEqual(["inbound", "q4"])
    expect(paged.data?.meta).toEqual({ total: 5, limit: 2, offset: 1, hasMore: true })
    // Another mailbox of the account has none of it.
    const empty = await newBox(suite.url, { user: box.user })
    expect((await mailroom.GET("/v1/api/labels", { params: { query: { mailbox_id: empty.mailboxId } } })).data?.data).toEqual([])
    const foreign = await createClient({ baseUrl: suite.url, apiKey: (await withApiKey(suite.url)).apiKey })
      .GET("/v1/api/labels", { params: { query: { mailbox_id: box.mailboxId } } })
    expect(foreign.response.status).toBe(404)
    expect(foreign.error?.error).toMatchObject({ code: "NOT_FOUND", details: { mailbox_id: box.mailboxId } })
    const bad = await mailroom.GET("/v1/api/labels", { params: { query: { limit: 0 } } })
    expect(bad.error?.error).toMatchObject({ code: "VALIDATION_ERROR", details: { limit: "must be an integer from 1 to 100" } })
    // Sorted as asked: the most used first (ties by name), or names backwards.
    const sorted = (sort: string) => mailroom.GET("/v1/api/labels", { params: { query: { sort } } }).then(({ data }) => data?.data.map((row) => row.label))
    expect(await sorted("email_count:desc")).toEqual(["inbound", "q4", "unauthenticated", "billing", "unread"])
    expect(await sorted("label:desc")).toEqual(["unread", "unauthenticated", "q4", "inbound", "billing"])
    const unsortable = await mailroom.GET("/v1/api/labels", { params: { query: { sort: "color:asc" } } })
    expect(unsortable.error?.error).toEqual({
      code: "VALIDATION_ERROR",
      message: expect.any(String),
      details: { sort: "must be <field>:<asc|desc> with field one of label, email_count, unread_count" }
    })
  })

  it("refusals: fact labels, bad names, empty and oversized batches, bad filters, someone else's email", async () => {
    const fact = await mailroom.PATCH("/v1/api/emails/{emailId}", {
      params: { path: { emailId: first } },
      body: { remove_labels: ["inbound"] }
    })
    expect(fact.response.status).toBe(400)
    expect(fact.error).toMatchObject({ success: false, error: { code: "LABEL_READ_ONLY", details: { labels: ["inbound"] } } })

    // Blocking is the block lists' (a filter may not block either); removing blocked lets mail through.
    const blocked = await mailroom.PATCH("/v1/api/emails/{emailId}", {
      params: { path: { emailId: first } },
      body: { add_labels: ["blocked"] }
    })
    expect(blocked.response.status).toBe(400)
    expect(blocked.error).toEqual({
      success: false,
      error: {
        code: "VALIDATION_ERROR",
        message: expect.any(String),
        details: { add_labels: "blocked is the block lists' verdict: add the sender to a block list (removing blocked lets a blocked email through)" }
      }
    })

    const badName = await mailroom.PATCH("/v1/api/emails/{emailId}", {
      params: { path: { emailId: first } },
      body: { add_labels: ["a,b", "x".repeat(65)] }
    })
    expect(badName.response.status).toBe(400)
    expect(badName.error?.error.code).toBe("VALIDATION_ERROR")
    expect(JSON.stringify(badName.error?.error.details)).toContain("add_labels")
    // An empty level between slashes would be a folder no mail program can open over IMAP.
    const emptyLevel = "must not start or end with / or hold //: / separates a label's levels (folders over IMAP), and none may be empty"
    for (const label of ["/lead", "trail/", "a//b"]) {
      const badLevels = await mailroom.PATCH("/v1/api/emails/{emailId}", { params: { path: { emailId: first } }, body: { add_labels: ["ok/fine", label] } })
      expect(badLevels.response.status).toBe(400)
      expect(badLevels.error?.error).toEqual({
        code: "VALIDATION_ERROR",
        message: `add_labels: ${JSON.stringify(label)} ${emptyLevel}`,
        details: { add_labels: `${JSON.stringify(label)} ${emptyLevel}` }
      })
    }
    const badThreadLevels = await mailroom.POST("/v1/api/threads/batch-update", { body: { thread_ids: ["thr_x"], add_labels: ["a//b"] } })
    expect(badThreadLevels.error?.error).toMatchObject({ code: "VALIDATION_ERROR", details: { add_labels: `"a//b" ${emptyLevel}` } })
    // One stored before may still be taken off.
    expect((await mailroom.PATCH("/v1/api/emails/{emailId}", { params: { path: { emailId: first } }, body: { remove_labels: ["a//b"] } })).response.status).toBe(200)

    const tooMany = await mailroom.POST("/v1/api/emails/batch-update", {
      body: { email_ids: Array.from({ length: 101 }, (_, i) => `eml_${i}`), add_labels: ["x"] }
    })
    expect(tooMany.response.status).toBe(400)
    expect(JSON.stringify(tooMany.error?.error.details)).toContain("email_ids")

    const badFilter = await list({ unread: "maybe" })
    expect(badFilter.response.status).toBe(400)
    expect(JSON.stringify((badFilter.error as { error?: unknown })?.error)).toContain("unread")

    // from names a sender as the sender lists do (its cases: test/domain/emails.test.ts); what names none is refused by its field.
    expect((await list({ from: "SENDER@example.com" })).data?.data.length).toBeGreaterThanOrEqual(2)
    expect((await list({ from: "example.net" })).data?.meta.total).toBe(0)
    const badSender = await list({ from: "ada@" })
    expect(badSender.response.status).toBe(400)
    expect(badSender.error).toMatchObject({
      error: {
        code: "VALIDATION_ERROR",
        details: { from: "has no valid domain after the @; write an address (ada@example.com), a domain (example.com) or *.domain (*.example.com)" }
      }
    })

    // received_after and received_before bound when mail arrived (their cases: test/domain/emails.test.ts).
    const all = (await list({})).data!.meta.total
    expect((await list({ received_after: "2000-01-01", received_before: "2100-01-01T00:00:00+01:00" })).data?.meta.total).toBe(all)
    expect((await list({ received_before: "2000-01-01" })).data?.meta.total).toBe(0)
    const badTime = await list({ received_after: "2026-12-01 09:00" })
    expect([badTime.response.status, badTime.error?.error]).toEqual([400, expect.objectContaining({
      code: "VALIDATION_ERROR",
      details: { received_after: "must be a day (2026-12-01, from its start in UTC) or an ISO 8601 time with a zone (2026-12-01T09:00:00Z)" }
    })])
    const noSpan = await list({ received_after: "2026-12-02", received_before: "2026-12-01" })
    expect([noSpan.response.status, noSpan.error?.error.details]).toEqual([400, { received_before: "must be later than received_after" }])

    const stranger = createClient({ baseUrl: suite.url, apiKey: (await withApiKey(suite.url)).apiKey })
    const foreign = await stranger.PATCH("/v1/api/emails/{emailId}", {
      params: { path: { emailId: first } },
      body: { add_labels: ["mine"] }
    })
    expect(foreign.response.status).toBe(404)
    expect(foreign.error).toMatchObject({ error: { code: "NOT_FOUND", details: { email_id: first } } })
  })
})

describe("threads over HTTP", () => {
  it("awaits the reply: one conversation's mail after the email sent, waited for, answers the reply and not other mail", async () => {
    const box = await newBox(suite.url)
    await upgrade(suite.url, box.user.apiKey, "pro")
    const mailroom = createClient({ baseUrl: suite.url, apiKey: box.user.apiKey })
    const list = (query: Record<string, string | number>) =>
      mailroom.GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId: box.mailboxId }, query: query as never } })
    const question = await sendMail(suite.server.smtpPort, { to: box.address, from: "ann@example.com", subject: "Offer", text: "Ten?" })
    const asked = await until("the question stored", async () => (await list({})).data?.data[0], 30_000, 100, 500)

    const waiting = list({ thread_id: asked.thread_id, after: asked.email_id, wait: 20 })
    await deliver(box.address, "Unrelated")
    await until("the other mail stored", async () => ((await list({})).data?.meta.total === 2 ? true : undefined), 30_000, 100, 500)
    await sendMail(suite.server.smtpPort, {
      to: box.address,
      from: "ann@example.com",
      subject: "Re: Offer",
      text: "Eleven, then.",
      inReplyTo: question.messageId,
      references: [question.messageId]
    })
    const reply = await waiting
    expect(reply.data?.data.map((email) => [email.subject, email.thread_id])).toEqual([["Re: Offer", asked.thread_id]])
    expect((await list({ thread_id: asked.thread_id })).data?.meta.total).toBe(2)
    const everyMailbox = await mailroom.GET("/v1/api/emails", { params: { query: { thread_id: asked.thread_id } as never } })
    expect(everyMailbox.data?.meta.total).toBe(2)

    // A conversation with no mail here is 404, not a wait for mail that cannot come.
    const other = await newBox(suite.url, { user: box.user })
    for (const [listed, threadId] of [[list({ thread_id: "thr_missing", wait: 5 }), "thr_missing"], [
      mailroom.GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId: other.mailboxId }, query: { thread_id: asked.thread_id } as never } }),
      asked.thread_id
    ]] as const) {
      const refused = await listed
      expect([refused.response.status, refused.error?.error.code, refused.error?.error.details]).toEqual([404, "NOT_FOUND", { thread_id: threadId }])
    }
  })

  it("a reply joins its conversation: the mailbox's and the account's thread lists show it once, newest activity first; refusals answer the envelope", async () => {
    const user = await withApiKey(suite.url)
    await upgrade(suite.url, user.apiKey, "pro")
    const box = await newBox(suite.url, { user })
    const mailroom = createClient({ baseUrl: suite.url, apiKey: box.user.apiKey })
    const threads = (query: Record<string, string> = {}) =>
      mailroom.GET("/v1/api/mailboxes/{mailboxId}/threads", { params: { path: { mailboxId: box.mailboxId }, query: query as never } })

    const question = await sendMail(suite.server.smtpPort, { to: box.address, from: "ann@example.com", subject: "Lunch?", text: "Tuesday?" })
    await deliver(box.address, "Unrelated")
    await until("two emails stored", async () => ((await threads()).data?.meta.total === 2 ? true : undefined), 30_000, 100, 500)
    await sendMail(suite.server.smtpPort, {
      to: box.address,
      from: "bob@example.com",
      subject: "Re: Lunch?",
      text: "Tuesday works.",
      inReplyTo: question.messageId,
      references: [question.messageId]
    })
    const listed = await until("the reply joined its thread", async () => {
      const { data } = await threads()
      return data?.data[0]?.message_count === 2 ? data : undefined
    }, 30_000, 100, 500)
    expect(listed.meta).toEqual({ total: 2, limit: 20, offset: 0, hasMore: false })
    expect(listed.data[0]).toMatchObject({
      mailbox_id: box.mailboxId,
      subject: "Lunch?",
      message_count: 2,
      unread_count: 2,
      labels: expect.arrayContaining(["inbound", "unread"]),
      senders: ["ann@example.com", "bob@example.com"],
      latest: { subject: "Re: Lunch?", from: "bob@example.com", snippet: "Tuesday works." }
    })
    expect(listed.data[1]).toMatchObject({ subject: "Unrelated", message_count: 1 })
    // The conversations with mail from a sender: Bob wrote in one; what names no sender is refused by its field.
    expect((await threads({ from: "BOB@example.com" })).data?.data.map((thread) => thread.subject)).toEqual(["Lunch?"])
    const noSender = await threads({ from: "bob@" })
    expect([noSender.response.status, noSender.error?.error.code, Object.keys(noSender.error?.error.details ?? {})]).toEqual([400, "VALIDATION_ERROR", ["from"]])
    // The conversations with mail that arrived within a span: both today, none tomorrow; a span of no moment is refused.
    const tomorrow = new Date(Date.now() + 86_400_000).toISOString().slice(0, 10)
    expect((await threads({ received_after: "2000-01-01", received_before: tomorrow })).data?.meta.total).toBe(2)
    expect((await threads({ received_after: tomorrow })).data?.data).toEqual([])
    const noSpan = await threads({ received_after: tomorrow, received_before: "2000-01-01" })
    expect([noSpan.response.status, noSpan.error?.error.code, noSpan.error?.error.details]).toEqual([
      400,
      "VALIDATION_ERROR",
      { received_before: "must be later than received_after" }
    ])
    const conversation = await mailroom.GET("/v1/api/threads/{threadId}", { params: { path: { threadId: listed.data[0]!.thread_id } } })
    expect(conversation.data?.data.emails.map((email) => email.subject)).toEqual(["Lunch?", "Re: Lunch?"])

    const all = await mailroom.GET("/v1/api/threads", { params: { query: { sort: "last_received_at:asc", limit: 1 } as never } })
    expect(all.data?.data.map((thread) => thread.subject)).toEqual(["Unrelated"])
    expect(all.data?.meta).toEqual({ total: 2, limit: 1, offset: 0, hasMore: true })
    const read = await mailroom.PATCH("/v1/api/emails/{emailId}", {
      params: { path: { emailId: listed.data[1]!.latest.email_id } },
      body: { remove_labels: ["unread"] }
    })
    expect(read.response.status).toBe(200)
    expect((await threads({ unread: "false" })).data?.data.map((thread) => thread.subject)).toEqual(["Unrelated"])

    // The whole conversation marked handled at once; answered as GET answers it.
    const handled = await mailroom.PATCH("/v1/api/threads/{threadId}", {
      params: { path: { threadId: listed.data[0]!.thread_id } },
      body: { add_labels: ["lunch"], remove_labels: ["unread"] }
    })
    expect(handled.response.status).toBe(200)
    expect(handled.data?.data.emails.map((email) => [email.subject, email.labels.includes("lunch"), email.labels.includes("unread")]))
      .toEqual([["Lunch?", true, false], ["Re: Lunch?", true, false]])
    expect((await threads({ unread: "true" })).data?.meta.total).toBe(0)
    const fact = await mailroom.PATCH("/v1/api/threads/{threadId}", {
      params: { path: { threadId: listed.data[0]!.thread_id } },
      body: { remove_labels: ["inbound"] }
    })
    expect(fact.response.status).toBe(400)
    expect(fact.error).toMatchObject({ error: { code: "LABEL_READ_ONLY", details: { labels: ["inbound"] } } })
    const unknown = await mailroom.PATCH("/v1/api/threads/{threadId}", { params: { path: { threadId: "thr_missing" } }, body: { add_labels: ["x"] } })
    expect(unknown.response.status).toBe(404)
    expect(unknown.error).toMatchObject({ error: { code: "NOT_FOUND", details: { thread_id: "thr_missing" } } })

    const refused = await threads({ sort: "subject:asc", limit: "0", unread: "maybe", labels: "x".repeat(65) })
    expect(refused.response.status).toBe(400)
    expect(refused.error).toMatchObject({
      success: false,
      error: {
        code: "VALIDATION_ERROR",
        details: {
          sort: "must be <field>:<asc|desc> with field one of last_received_at, first_received_at",
          limit: "must be an integer from 1 to 100",
          unread: "must be one of true, false",
          "labels.0": "must be at most 64 characters"
        }
      }
    })

    const stranger = createClient({ baseUrl: suite.url, apiKey: (await withApiKey(suite.url)).apiKey })
    const foreign = await stranger.GET("/v1/api/mailboxes/{mailboxId}/threads", { params: { path: { mailboxId: box.mailboxId } } })
    expect(foreign.response.status).toBe(404)
    expect(foreign.error).toMatchObject({ error: { code: "NOT_FOUND", details: { mailbox_id: box.mailboxId } } })
    expect((await stranger.GET("/v1/api/threads", {})).data?.data).toEqual([])
  })
})

describe("waiting for mail", () => {
  let box: Box
  let mailroom: MailroomFetchClient
  let newest: string

  const waitList = (query: { wait?: number; after?: string }) =>
    mailroom.GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId: box.mailboxId }, query: query as never } })

  beforeAll(async () => {
    box = await newBox(suite.url, { user: await withApiKey(suite.url) })
    mailroom = createClient({ baseUrl: suite.url, apiKey: box.user.apiKey })
    await deliver(box.address, "Already here")
    newest = await until("the first email listed", async () => (await waitList({})).data?.data[0]?.email_id, 30_000)
  })

  it("a list with wait answers as soon as newer mail is stored, with that mail only", async () => {
    const started = Date.now()
    const waiting = waitList({ wait: 20, after: newest })
    await new Promise((resolve) => setTimeout(resolve, 300))
    await deliver(box.address, "Just arrived")
    const accepted = Date.now()
    const { data, response } = await waiting
    const answered = Date.now()
    expect(response.status).toBe(200)
    expect(data?.data.map((email) => email.subject)).toEqual(["Just arrived"])
    expect(data?.meta.total).toBe(1)
    // Answered once the mail was stored and announced, long before the 20 s wait was up.
    console.log(`wait answered ${answered - accepted} ms after the SMTP 250 (${answered - started} ms in all)`)
    expect(answered - accepted).toBeLessThan(5_000)
  })

  it("a list with wait answers as soon as the mailbox sends mail too (its sent mail is its mail)", async () => {
    const latest = (await waitList({})).data!.data[0]!.email_id
    const colleague = await newBox(suite.url, { user: box.user })
    const waiting = waitList({ wait: 20, after: latest })
    await new Promise((resolve) => setTimeout(resolve, 300))
    const sent = await mailroom.POST("/v1/api/mailboxes/{mailboxId}/send", {
      params: { path: { mailboxId: box.mailboxId } },
      body: { to: [colleague.address], subject: "Sent while waiting", text: "Hello" }
    })
    expect(sent.response.status).toBe(202)
    const accepted = Date.now()
    const { data } = await waiting
    expect(data?.data.map((email) => [email.subject, email.direction])).toEqual([["Sent while waiting", "outbound"]])
    expect(Date.now() - accepted).toBeLessThan(5_000)
  })

  it("answers an empty page when the wait ends with nothing newer, and at once when there is", async () => {
    const latest = (await waitList({})).data!.data[0]!.email_id
    const started = Date.now()
    const empty = await waitList({ wait: 1, after: latest })
    const waited = Date.now() - started
    expect(empty.response.status).toBe(200)
    expect(empty.data).toMatchObject({ success: true, data: [], meta: { total: 0, hasMore: false } })
    expect(waited).toBeGreaterThanOrEqual(950)
    expect(waited).toBeLessThan(5_000)

    const immediate = Date.now()
    const ready = await waitList({ wait: 30 })
    expect(ready.data?.data.length).toBeGreaterThan(0)
    expect(Date.now() - immediate).toBeLessThan(5_000)
  })

  it("refuses a wait beyond 60 s and a cursor that is not an email of the mailbox", async () => {
    const long = await waitList({ wait: 61 })
    expect(long.response.status).toBe(400)
    expect(long.error).toMatchObject({ error: { code: "VALIDATION_ERROR" } })
    expect(JSON.stringify(long.error)).toContain("wait")
    const cursor = await waitList({ wait: 1, after: "eml_nope" })
    expect(cursor.response.status).toBe(400)
    expect(cursor.error).toMatchObject({ error: { code: "VALIDATION_ERROR", details: { after: "must be the id of an email in this mailbox" } } })
  })
})

describe("extracted content", () => {
  it("a verification email received over SMTP shows its code, links and reply text over the API and in the email.received payload", async () => {
    const box = await newBox(suite.url, { user: await withApiKey(suite.url) })
    const mailroom = createClient({ baseUrl: suite.url, apiKey: box.user.apiKey })
    const path = `/received-${box.mailboxId}`
    const hook = await mailroom.POST("/v1/api/webhooks", { body: { url: `${hooks.url}${path}`, events: ["email.received"] } })
    expect(hook.response.status, JSON.stringify(hook.error)).toBe(201)

    await sendMail(suite.server.smtpPort, {
      to: box.address,
      subject: "Confirm your Acme account",
      text: "Your verification code is 482913.\n\nOr confirm here: https://acme.example/verify?token=t0k3n\n\nAcme Inc., Springfield, IL 62701",
      html: `<div style="display:none">Welcome to Acme</div><table><tr><td>Your verification code</td></tr><tr><td><b>482913</b></td></tr></table>
        <p><a href="https://acme.example/verify?token=t0k3n">Confirm your email</a></p>
        <p>Acme Inc., Springfield, IL 62701 · <a href="https://acme.example/unsubscribe?u=9">Unsubscribe</a></p>`,
      headers: { "List-Unsubscribe": "<https://acme.example/unsubscribe?u=9>" }
    })
    const listed = await until("the email listed", async () => {
      const { data } = await mailroom.GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId: box.mailboxId } } })
      return data?.data[0]
    }, 30_000)
    // List items are summaries: extracted content is in the email itself.
    expect(listed).not.toHaveProperty("extracted")

    const { data } = await mailroom.GET("/v1/api/emails/{emailId}", { params: { path: { emailId: listed.email_id } } })
    const extracted = data!.data.extracted!
    expect(extracted.codes[0]?.value).toBe("482913")
    expect(extracted.codes).toEqual([{ value: "482913", context: "Your verification code 482913" }])
    expect(extracted.links).toEqual([
      { url: "https://acme.example/verify?token=t0k3n", text: "Confirm your email", kind: "confirmation" },
      { url: "https://acme.example/unsubscribe?u=9", text: "Unsubscribe", kind: "unsubscribe" }
    ])
    expect(extracted.reply_text).toContain("Your verification code is 482913.")

    const [delivery] = await hooks.waitFor(path, 1)
    const payload = JSON.parse(delivery!.body)
    expect(payload.event).toBe("email.received")
    expect(payload.data.email_id).toBe(listed.email_id)
    expect(payload.data.extracted).toEqual(extracted)
  })
})

describe("deleting mail", () => {
  it("DELETE /emails/{id}, POST /emails/batch-delete and DELETE /threads/{id} remove mail for good, announced as email.deleted; refusals answer the envelope", async () => {
    const user = await withApiKey(suite.url)
    // Pro (100 requests a minute): the test polls for mail.
    await upgrade(suite.url, user.apiKey, "pro")
    const box = await newBox(suite.url, { user })
    const mailroom = createClient({ baseUrl: suite.url, apiKey: box.user.apiKey })
    const path = `/deleted-${box.mailboxId}`
    const hook = await mailroom.POST("/v1/api/webhooks", { body: { url: `${hooks.url}${path}`, events: ["email.deleted"] } })
    expect(hook.response.status, JSON.stringify(hook.error)).toBe(201)
    for (const subject of ["Spam one", "Spam two", "Keep me"]) await deliver(box.address, subject)
    const bySubject = await until("three emails listed", async () => {
      const { data } = await mailroom.GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId: box.mailboxId } } })
      return data?.data.length === 3 ? new Map(data.data.map((e) => [e.subject, e])) : undefined
    }, 30_000, 100, 500)
    const one = bySubject.get("Spam one")!
    const two = bySubject.get("Spam two")!
    const keep = bySubject.get("Keep me")!
    const usage = async () => (await mailroom.GET("/v1/billing/usage")).data!.data.storageUsed
    const before = await usage()

    const deleted = await mailroom.DELETE("/v1/api/emails/{emailId}", { params: { path: { emailId: one.email_id } } })
    expect(deleted.response.status).toBe(200)
    expect(deleted.data).toEqual({ success: true, data: { deleted: 1, email_ids: [one.email_id] } })
    const gone = await mailroom.GET("/v1/api/emails/{emailId}", { params: { path: { emailId: one.email_id } } })
    expect(gone.response.status).toBe(404)
    expect(await usage()).toBe(before - one.size)
    const again = await mailroom.DELETE("/v1/api/emails/{emailId}", { params: { path: { emailId: one.email_id } } })
    expect(again.response.status).toBe(404)
    expect(again.error).toMatchObject({ success: false, error: { code: "NOT_FOUND", details: { email_id: one.email_id } } })

    // A deleted email still marks its place for a list's cursor (an agent's loop that deleted the last mail it saw).
    const since = await mailroom.GET("/v1/api/emails", { params: { query: { after: one.email_id, sort: "received_at:asc" } } })
    expect(since.data?.data.map((e) => e.subject)).toEqual(["Spam two", "Keep me"])
    const strangers = createClient({ baseUrl: suite.url, apiKey: (await withApiKey(suite.url)).apiKey })
    const notTheirs = await strangers.GET("/v1/api/emails", { params: { query: { after: one.email_id } } })
    expect(notTheirs.error).toMatchObject({ error: { code: "VALIDATION_ERROR", details: { after: "must be the id of one of your emails" } } })

    const empty = await mailroom.POST("/v1/api/emails/batch-delete", { body: { email_ids: [] } })
    expect(empty.response.status).toBe(400)
    expect(empty.error).toMatchObject({ error: { code: "VALIDATION_ERROR", details: { email_ids: "must list at least one email id" } } })
    const stranger = createClient({ baseUrl: suite.url, apiKey: (await withApiKey(suite.url)).apiKey })
    const foreign = await stranger.POST("/v1/api/emails/batch-delete", { body: { email_ids: [two.email_id] } })
    expect(foreign.response.status).toBe(404)
    expect(foreign.error).toMatchObject({ error: { code: "NOT_FOUND", details: { email_id: two.email_id } } })
    const foreignThread = await stranger.DELETE("/v1/api/threads/{threadId}", { params: { path: { threadId: keep.thread_id } } })
    expect(foreignThread.error).toMatchObject({ error: { code: "NOT_FOUND", details: { thread_id: keep.thread_id } } })

    const batch = await mailroom.POST("/v1/api/emails/batch-delete", { body: { email_ids: [two.email_id] } })
    expect(batch.data?.data).toEqual({ deleted: 1, email_ids: [two.email_id] })
    const thread = await mailroom.DELETE("/v1/api/threads/{threadId}", { params: { path: { threadId: keep.thread_id } } })
    expect(thread.data?.data).toEqual({ deleted: 1, email_ids: [keep.email_id] })
    const left = await mailroom.GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId: box.mailboxId } } })
    expect(left.data?.meta.total).toBe(0)

    const deliveries = await hooks.waitFor(path, 3)
    expect(deliveries.map((d) => JSON.parse(d.body)).map((p) => [p.event, p.data.subject]).sort()).toEqual([
      ["email.deleted", "Keep me"],
      ["email.deleted", "Spam one"],
      ["email.deleted", "Spam two"]
    ])
  })

  it("POST /threads/batch-update and /threads/batch-delete act on whole conversations, all or none; refusals answer the envelope", async () => {
    const user = await withApiKey(suite.url)
    await upgrade(suite.url, user.apiKey, "pro")
    const box = await newBox(suite.url, { user })
    const mailroom = createClient({ baseUrl: suite.url, apiKey: box.user.apiKey })
    await deliver(box.address, "Offsite")
    await sendMail(suite.server.smtpPort, { to: box.address, subject: "Lunch", text: "Noon?" })
    const threads = await until("two threads listed", async () => {
      const { data } = await mailroom.GET("/v1/api/mailboxes/{mailboxId}/threads", { params: { path: { mailboxId: box.mailboxId } } })
      return data?.data.length === 2 ? new Map(data.data.map((t) => [t.subject, t.thread_id])) : undefined
    }, 30_000, 100, 500)
    const offsite = threads.get("Offsite")!
    const lunch = threads.get("Lunch")!

    const updated = await mailroom.POST("/v1/api/threads/batch-update", {
      body: { thread_ids: [offsite, lunch, offsite], add_labels: ["handled"], remove_labels: ["unread"] }
    })
    expect(updated.response.status).toBe(200)
    expect(updated.data?.data.thread_ids).toEqual([offsite, lunch])
    expect(updated.data?.data.updated).toBe(2)
    expect(updated.data?.data.emails.map((email) => email.labels)).toEqual([
      ["inbound", "unauthenticated", "handled"],
      ["inbound", "unauthenticated", "handled"]
    ])
    const unread = await mailroom.GET("/v1/api/mailboxes/{mailboxId}/threads", {
      params: { path: { mailboxId: box.mailboxId }, query: { unread: "true" } }
    })
    expect(unread.data?.meta.total).toBe(0)

    // Refusals: empty and oversized lists, a fact label, a thread of another account (named; the batch changes nothing).
    const empty = await mailroom.POST("/v1/api/threads/batch-update", { body: { thread_ids: [], add_labels: ["x"] } })
    expect(empty.response.status).toBe(400)
    expect(empty.error).toMatchObject({ error: { code: "VALIDATION_ERROR", details: { thread_ids: "must list at least one thread id" } } })
    const tooMany = await mailroom.POST("/v1/api/threads/batch-delete", { body: { thread_ids: Array.from({ length: 101 }, (_, i) => `thr_${i}`) } })
    expect(tooMany.response.status).toBe(400)
    expect(tooMany.error).toMatchObject({ error: { code: "VALIDATION_ERROR", details: { thread_ids: "must list at most 100 thread ids" } } })
    const fact = await mailroom.POST("/v1/api/threads/batch-update", { body: { thread_ids: [lunch], remove_labels: ["inbound"] } })
    expect(fact.response.status).toBe(400)
    expect(fact.error).toMatchObject({ error: { code: "LABEL_READ_ONLY", details: { labels: ["inbound"] } } })
    const stranger = createClient({ baseUrl: suite.url, apiKey: (await withApiKey(suite.url)).apiKey })
    const foreign = await stranger.POST("/v1/api/threads/batch-update", { body: { thread_ids: [offsite], add_labels: ["mine"] } })
    expect(foreign.response.status).toBe(404)
    expect(foreign.error).toMatchObject({ success: false, error: { code: "NOT_FOUND", details: { thread_id: offsite } } })
    const partly = await mailroom.POST("/v1/api/threads/batch-delete", { body: { thread_ids: [offsite, "thr_nobody", "thr_nothing"] } })
    expect(partly.response.status).toBe(404)
    expect(partly.error).toMatchObject({ error: { code: "NOT_FOUND", message: "Threads not found", details: { thread_ids: ["thr_nobody", "thr_nothing"] } } })

    const deleted = await mailroom.POST("/v1/api/threads/batch-delete", { body: { thread_ids: [offsite, lunch] } })
    expect(deleted.response.status).toBe(200)
    expect(deleted.data?.data.deleted).toBe(2)
    expect(deleted.data?.data.email_ids).toHaveLength(2)
    const left = await mailroom.GET("/v1/api/mailboxes/{mailboxId}/threads", { params: { path: { mailboxId: box.mailboxId } } })
    expect(left.data?.meta.total).toBe(0)
    const again = await mailroom.POST("/v1/api/threads/batch-delete", { body: { thread_ids: [lunch] } })
    expect(again.error).toMatchObject({ error: { code: "NOT_FOUND", details: { thread_id: lunch } } })
  })
})
