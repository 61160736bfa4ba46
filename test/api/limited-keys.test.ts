/**
 * API keys limited to some mailboxes (`mailboxIds`), over real HTTP: such a key sees an account that
 * holds its mailboxes only. Lists and search show their mail alone; an email, conversation or mailbox
 * of another mailbox answers the 404 an unknown one answers; routes about the whole account answer
 * 403 FORBIDDEN. Which route reaches mailboxes how is src/http/reach.ts's table, which must decide
 * every `/v1` route of the contract (checked in process, below).
 */
import { OpenApi } from "@effect/platform"
import { beforeAll, describe, expect, it } from "vitest"
import { MailroomApi } from "../../src/http/api.ts"
import { routeReach } from "../../src/http/reach.ts"
import { signUp, withApiKey } from "../support/accounts.ts"
import { upgrade } from "../support/billing.ts"
import { type Box, newBox } from "../support/mailboxes.ts"
import { sendMail } from "../support/send-mail.ts"
import { type SuiteServer, useSuiteServer } from "../support/server.ts"
import { withKey, withToken } from "../support/typed-client.ts"
import { until } from "../support/wait.ts"

let suite: SuiteServer

useSuiteServer((s) => {
  suite = s
})

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
      await limited.GET("/v1/api/webhooks"),
      await limited.GET("/v1/api/domains"),
      await limited.GET("/v1/billing/subscription"),
      await limited.GET("/v1/api/lists/{list}", { params: { path: { list: "block" } } }),
      await limited.GET("/v1/api/suppressions")
    ]) {
      expect(reply.response.status).toBe(403)
      expect(reply.error).toEqual(forbidden)
    }
  })

  it("is refused MCP, whose tools reach every mailbox", async () => {
    const reply = await fetch(`${suite.url}/mcp`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream", authorization: `Bearer ${limitedKey}` },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" })
    })
    expect(reply.status).toBe(403)
    expect(((await reply.json()) as { error: unknown }).error).toEqual({ code: "FORBIDDEN", message: expect.stringMatching(/limited/), details: { mailboxIds: [mine.mailboxId] } })
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
