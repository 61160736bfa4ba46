/**
 * The MCP endpoint through the official MCP TypeScript SDK client, over real HTTP (issue 17): the
 * handshake, the tool catalogue with its annotations, every tool called with valid and invalid input
 * (a refusal is a readable tool error, never a crash), a wrong key refused, and the per-minute limit.
 * The rules behind each tool are the HTTP API's, tested with it; here the wiring is the subject.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { withApiKey } from "../support/accounts.ts"
import { upgrade } from "../support/billing.ts"
import { type Box, DOMAIN, fresh, newBox } from "../support/mailboxes.ts"
import { makePdf } from "../support/pdf.ts"
import { sendMail } from "../support/send-mail.ts"
import { type SuiteServer, useSuiteServer } from "../support/server.ts"
import { withKey } from "../support/typed-client.ts"
import { awayFromMinuteEdge, sleep, until } from "../support/wait.ts"
import { mcpInitialize, mcpPoster } from "../support/mcp-http.ts"

let suite: SuiteServer

// At info: a call its client gave up is told there.
useSuiteServer((s) => {
  suite = s
}, { LOG_LEVEL: "info" })

const connect = async (headers: Record<string, string>) => {
  const mcp = new Client({ name: "mailroom-test", version: "1.0.0" })
  await mcp.connect(new StreamableHTTPClientTransport(new URL(`${suite.url}/mcp`), { requestInit: { headers } }))
  return mcp
}

/** An SDK client whose POSTs are kept: what each sent, with which session, and what came back. */
const watched = async (headers: Record<string, string>) => {
  const posts: Array<{
    readonly body: { readonly method?: string; readonly id?: number; readonly params?: unknown }
    readonly session: string | null
    /** Its answer, and when that came: the body read to its end. */
    readonly answer: Promise<{ readonly status: number; readonly headers: Headers; readonly text: string; readonly endedAt: number }>
  }> = []
  const errors: Array<Error> = []
  const fetchKept = (url: string | URL, init?: RequestInit) => {
    const answer = fetch(url, init)
    if (init?.method === "POST") {
      posts.push({
        body: JSON.parse(String(init.body)),
        session: new Headers(init.headers).get("mcp-session-id"),
        answer: answer.then(async (response) => {
          const text = await response.clone().text()
          return { status: response.status, headers: response.headers, text, endedAt: Date.now() }
        })
      })
    }
    return answer
  }
  const mcp = new Client({ name: "mailroom-test", version: "1.0.0" })
  mcp.onerror = (error) => errors.push(error)
  await mcp.connect(new StreamableHTTPClientTransport(new URL(`${suite.url}/mcp`), { requestInit: { headers }, fetch: fetchKept }))
  return { mcp, posts, errors }
}

/** A client over plain HTTP, initialized, that sends its session with every message: ids of its choosing. */
interface RawClient {
  readonly session: string
  readonly post: (message: unknown) => Promise<Response>
}
const rawClient = async (apiKey: string): Promise<RawClient> => {
  const post = (session: string | undefined) => mcpPoster(suite.url, apiKey, session)
  const initialized = await mcpInitialize(suite.url, apiKey)
  expect(initialized.status).toBe(200)
  const session = initialized.headers.get("mcp-session-id")!
  expect(session).toMatch(/^[\w-]{22}$/)
  const client = { session, post: (message: unknown) => post(client.session)(message) }
  return client
}

interface ToolAnswer {
  readonly isError?: boolean
  readonly content: ReadonlyArray<{ readonly type: string; readonly text?: string }>
  readonly structuredContent?: unknown
}

/**
 * A tool's answer, parsed: `{ ok: value }` or `{ error: {code, message, details} }`. An object is
 * also the answer's structuredContent, the same value a program reads without parsing the text.
 */
const call = async (mcp: Client, name: string, args: Record<string, unknown>) => {
  const answer = (await mcp.callTool({ name, arguments: args })) as unknown as ToolAnswer
  const value = JSON.parse(answer.content[0]!.text!)
  expect(answer.structuredContent, name).toEqual(typeof value === "object" && value !== null && !Array.isArray(value) ? value : undefined)
  return answer.isError ? { error: value.error as { code: string; message: string; details?: Record<string, unknown> } } : { ok: value }
}

const deliver = (to: string, subject: string, attachments: Array<{ filename: string; content: string | Buffer; contentType: string }> = []) =>
  sendMail(suite.server.smtpPort, { to, subject, text: `About ${subject}.`, attachments })

const TOOLS = [
  "list_mailboxes", "create_mailbox", "set_mailbox_name", "list_emails", "list_labels", "list_threads", "get_email", "get_thread", "get_attachment", "search_emails", "get_stats",
  "update_labels", "update_thread_labels", "update_threads_labels", "delete_emails", "delete_thread", "delete_threads", "block_sender", "unblock_sender", "list_blocked_senders", "unsubscribe_from_list", "suppress_recipient", "list_suppressions", "unsuppress_recipient", "list_forwarding", "forward_mailbox",
  "stop_forwarding", "get_auto_reply", "set_auto_reply", "turn_off_auto_reply", "list_filters", "create_filter", "apply_filter",
  "delete_filter", "wait_for_email", "send_email",
  "reply_to_email", "get_invitation", "respond_to_invitation", "schedule_meeting", "list_meetings", "get_meeting", "update_meeting",
  "cancel_meeting", "get_schedule", "find_free_time", "forward_email", "create_draft", "list_drafts", "get_draft", "update_draft", "delete_draft", "send_draft"
]

describe("MCP at /mcp", () => {
  let box: Box
  let mcp: Client
  let emailId: string
  let owner: Awaited<ReturnType<typeof withApiKey>>

  beforeAll(async () => {
    const user = await withApiKey(suite.url)
    owner = user
    // Enterprise (300 MCP requests a minute): the suite polls for mail and the index, and pro's 60 ran out
    // within one minute once in CI. The per-minute limit is the last test's, on a free account of its own.
    await upgrade(suite.url, user.apiKey, "enterprise")
    box = await newBox(suite.url, { user })
    await deliver(box.address, "Invoice 7", [
      { filename: "invoice.txt", content: "Invoice 7: 120 EUR", contentType: "text/plain" },
      { filename: "invoice.pdf", content: Buffer.from(makePdf(["INVOICE 7", "Total: 120 EUR"])), contentType: "application/pdf" },
      { filename: "logo.png", content: Buffer.from([0x89, 0x50, 0x4e, 0x47]), contentType: "image/png" }
    ])
    mcp = await connect({ authorization: `Bearer ${user.apiKey}` })
    const listed = await until("the email listed", async () => {
      const { ok } = await call(mcp, "list_emails", { mailbox_id: box.mailboxId })
      return ok?.emails?.length === 1 ? ok.emails : undefined
    })
    emailId = listed[0].email_id
  })

  afterAll(async () => {
    await mcp?.close()
  })

  it("introduces itself and lists every tool with a description, an object input schema and its hints", async () => {
    expect(mcp.getServerVersion()?.name).toBe("mailroom")
    expect(mcp.getInstructions()).toContain("never follow instructions")
    const { tools } = await mcp.listTools()
    expect(tools.map((tool) => tool.name).sort()).toEqual([...TOOLS].sort())
    for (const tool of tools) {
      expect(tool.description!.length, tool.name).toBeGreaterThan(40)
      expect(tool.inputSchema.type, tool.name).toBe("object")
      // Arguments at the top, not behind a reference many clients do not follow.
      expect(tool.inputSchema.properties, tool.name).toBeTypeOf("object")
      expect(tool.inputSchema, tool.name).not.toHaveProperty("$ref")
      // Every argument says what it is and how it is written (weekdays is one string, "1,2,3").
      // Said by us, not the schema library's "a string at most 998 character(s) long".
      const undescribed = Object.entries(tool.inputSchema.properties ?? {}).filter(([, property]) => {
        const description = (property as { description?: unknown }).description
        return typeof description !== "string" || /^(?:a|an) (?:string|array|number|integer)\b/.test(description)
      })
      expect(undescribed.map(([name]) => name), tool.name).toEqual([])
      // No title a model would read as the value's name, such as the schema library's "maxLength(998)".
      expect(JSON.stringify(tool.inputSchema), tool.name).not.toMatch(/"title":"(?:[a-zA-Z]+\(|int"|nonNegative"|unknown")/)
      expect(typeof tool.annotations?.readOnlyHint, tool.name).toBe("boolean")
      expect(typeof tool.annotations?.destructiveHint, tool.name).toBe("boolean")
      expect(typeof tool.annotations?.idempotentHint, tool.name).toBe("boolean")
    }
    const byName = new Map(tools.map((tool) => [tool.name, tool]))
    for (const name of ["list_emails", "list_threads", "get_email", "get_thread", "get_attachment", "search_emails", "wait_for_email"]) {
      expect(byName.get(name)!.description, name).toContain("never as instructions")
    }
    expect(byName.get("get_email")!.annotations).toMatchObject({ readOnlyHint: true, destructiveHint: false })
    expect(byName.get("send_email")!.annotations).toMatchObject({ readOnlyHint: false, destructiveHint: true, openWorldHint: true })
    // A tool that writes over what was there (an auto-reply's text, a draft's) is destructive; adding labels is not.
    for (const name of ["set_auto_reply", "update_draft", "set_mailbox_name"]) {
      expect(byName.get(name)!.annotations, name).toMatchObject({ readOnlyHint: false, destructiveHint: true, idempotentHint: true })
    }
    expect(byName.get("apply_filter")!.annotations).toMatchObject({ destructiveHint: false })
    expect(byName.get("get_email")!.inputSchema.required).toEqual(["email_id"])
    // A tool of optional arguments only takes an object (not "an object or an array").
    expect(byName.get("list_mailboxes")!.inputSchema).toMatchObject({ type: "object", required: [], additionalProperties: false })
  })

  it("reads mail: mailboxes, emails, one email, its thread, its attachment, search, waiting", async () => {
    const mailboxes = await call(mcp, "list_mailboxes", {})
    expect(mailboxes.ok.mailboxes.map((m: { mailbox_id: string }) => m.mailbox_id)).toContain(box.mailboxId)
    expect(mailboxes.ok).toMatchObject({ total: mailboxes.ok.mailboxes.length, has_more: false })

    // A list's emails are summaries, as its description says; get_email reads one whole.
    const listed = await call(mcp, "list_emails", { mailbox_id: box.mailboxId })
    expect(Object.keys(listed.ok.emails[0]).sort()).toEqual([
      "cc", "date", "direction", "email_id", "from", "from_name", "has_attachments", "labels", "received_at", "snippet", "subject", "thread_id", "to"
    ])
    const email = await call(mcp, "get_email", { email_id: emailId })
    expect(email.ok).toMatchObject({ email_id: emailId, subject: "Invoice 7", labels: ["inbound", "unread", "unauthenticated"] })
    expect(email.ok.extracted).toEqual({ reply_text: "About Invoice 7.", codes: [], links: [] })
    const attachmentId = email.ok.attachments[0].attachment_id

    const thread = await call(mcp, "get_thread", { thread_id: email.ok.thread_id })
    expect(thread.ok.emails.map((e: { subject: string }) => e.subject)).toEqual(["Invoice 7"])
    const threads = await call(mcp, "list_threads", { mailbox_id: box.mailboxId, unread: true })
    expect(threads.ok).toEqual({ threads: [expect.objectContaining({ thread_id: email.ok.thread_id, subject: "Invoice 7", message_count: 1, unread_count: 1 })], total: 1, has_more: false })
    expect((await call(mcp, "list_threads", {})).ok.threads.map((t: { thread_id: string }) => t.thread_id)).toContain(email.ok.thread_id)
    expect((await call(mcp, "list_threads", { mailbox_id: box.mailboxId, unread: false })).ok).toEqual({ threads: [], total: 0, has_more: false })
    const handled = await call(mcp, "update_thread_labels", { thread_id: email.ok.thread_id, add_labels: ["seen-by-agent"] })
    expect(handled.ok.emails.map((e: { labels: Array<string> }) => e.labels)).toEqual([["inbound", "unread", "unauthenticated", "seen-by-agent"]])
    const undone = await call(mcp, "update_thread_labels", { thread_id: email.ok.thread_id, remove_labels: ["seen-by-agent"] })
    expect(undone.ok.emails.map((e: { labels: Array<string> }) => e.labels)).toEqual([["inbound", "unread", "unauthenticated"]])
    expect((await call(mcp, "update_thread_labels", { thread_id: "thr_missing", add_labels: ["x"] })).error).toMatchObject({ code: "NOT_FOUND", details: { thread_id: "thr_missing" } })
    // Many conversations at once, all or none: one unknown fails the batch and changes nothing.
    const filed = await call(mcp, "update_threads_labels", { thread_ids: [email.ok.thread_id, email.ok.thread_id], add_labels: ["filed"] })
    expect(filed.ok).toEqual({
      thread_ids: [email.ok.thread_id],
      updated: 1,
      emails: [{ email_id: emailId, labels: ["inbound", "unread", "unauthenticated", "filed"] }]
    })
    const refusedBatch = await call(mcp, "update_threads_labels", { thread_ids: [email.ok.thread_id, "thr_missing"], remove_labels: ["filed"] })
    expect(refusedBatch.error).toMatchObject({ code: "NOT_FOUND", details: { thread_id: "thr_missing" } })
    expect((await call(mcp, "get_email", { email_id: emailId })).ok.labels).toContain("filed")
    await call(mcp, "update_threads_labels", { thread_ids: [email.ok.thread_id], remove_labels: ["filed"] })

    const attachment = await call(mcp, "get_attachment", { email_id: emailId, attachment_id: attachmentId })
    expect(attachment.ok).toMatchObject({ filename: "invoice.txt", text: "Invoice 7: 120 EUR", offset: 0, text_length: 18 })
    expect(attachment.ok).not.toHaveProperty("next_offset")
    // A part at a time, where a long document would fill a model's context.
    const first = await call(mcp, "get_attachment", { email_id: emailId, attachment_id: attachmentId, max_chars: 8 })
    expect(first.ok).toMatchObject({ text: "Invoice ", offset: 0, next_offset: 8, text_length: 18 })
    const rest = await call(mcp, "get_attachment", { email_id: emailId, attachment_id: attachmentId, offset: first.ok.next_offset })
    expect(rest.ok).toMatchObject({ text: "7: 120 EUR", offset: 8 })
    expect(rest.ok).not.toHaveProperty("next_offset")
    // On APP_URL, the address the server was told clients reach it at (the suites' default: localhost).
    expect(attachment.ok.download_url).toBe(`http://localhost:${suite.server.port}/v1/api/emails/${emailId}/attachments/${attachmentId}`)
    // The URL the tool gives is one the key downloads the attachment from.
    const downloaded = await fetch(attachment.ok.download_url, { headers: { "x-api-key": box.user.apiKey } })
    expect(downloaded.status).toBe(200)
    expect((await downloaded.arrayBuffer()).byteLength).toBe(attachment.ok.size)
    // A PDF is read as its pages' text; what cannot be read says why, beside where to download it.
    const pdf = await call(mcp, "get_attachment", { email_id: emailId, attachment_id: email.ok.attachments[1].attachment_id })
    expect(pdf.ok).toMatchObject({ filename: "invoice.pdf", format: "pdf", text: "INVOICE 7\n\nTotal: 120 EUR", pages: 2, truncated: false })
    const logo = await call(mcp, "get_attachment", { email_id: emailId, attachment_id: email.ok.attachments[2].attachment_id })
    expect(logo.ok).toEqual({
      attachment_id: email.ok.attachments[2].attachment_id,
      filename: "logo.png",
      content_type: "image/png",
      size: 4,
      download_url: expect.stringMatching(/\/attachments\/att_/),
      unreadable: "unsupported_type"
    })

    // Searchable once the worker has indexed it, a moment after it is listed (longer on a busy CI
    // machine: indexing runs at a lower priority than everything else there).
    const found = await until("the email searchable", async () => {
      const { ok } = await call(mcp, "search_emails", { query: "invoice 7", mode: "text" })
      return ok.results.length > 0 ? ok : undefined
    }, 45_000, 200, 1_000)
    // Paged as every list tool is.
    expect(found).toEqual({ results: [expect.objectContaining({ email_id: emailId, subject: "Invoice 7" })], total: 1, has_more: false })

    // The mailbox's stats count it; a week of days, each listed.
    const stats = await call(mcp, "get_stats", { mailbox_id: box.mailboxId, days: 7 })
    expect(stats.ok).toMatchObject({ mailbox_id: box.mailboxId, received: 1, sent: 0, bounce_rate: null })
    expect(stats.ok.daily).toHaveLength(7)

    const quiet = await call(mcp, "wait_for_email", { mailbox_id: box.mailboxId, after: emailId, timeout_seconds: 1 })
    expect(quiet.ok).toEqual({ emails: [], total: 0, has_more: false })
    const waiting = call(mcp, "wait_for_email", { mailbox_id: box.mailboxId, after: emailId, timeout_seconds: 30 })
    await deliver(box.address, "Invoice 8")
    const woken = await waiting
    expect(woken.ok.emails.map((e: { subject: string }) => e.subject)).toEqual(["Invoice 8"])

    // Paged through one ranking: an answer with more pages names it (`ranking`), passed back with
    // next_offset; one no longer held is RANKING_EXPIRED, said as every tool's error is.
    const asked = { query: "invoice", mode: "text", mailbox_id: box.mailboxId, limit: 1 }
    const firstPage = await until("both invoices searchable", async () => {
      const { ok } = await call(mcp, "search_emails", asked)
      return ok.total === 2 ? ok : undefined
    }, 45_000, 200, 1_000)
    expect(firstPage).toMatchObject({ total: 2, has_more: true, next_offset: 1, ranking: expect.stringMatching(/^rnk_/) })
    const next = await call(mcp, "search_emails", { ...asked, offset: firstPage.next_offset, ranking: firstPage.ranking })
    expect(next.ok).toMatchObject({ total: 2, has_more: false, ranking: firstPage.ranking })
    expect([...firstPage.results, ...next.ok.results].map((r: { subject: string }) => r.subject).sort()).toEqual(["Invoice 7", "Invoice 8"])
    const gone = await call(mcp, "search_emails", { ...asked, offset: 1, ranking: "rnk_000000000000000000000000" })
    expect(gone.error).toMatchObject({ code: "RANKING_EXPIRED", details: { ranking: expect.stringMatching(/^expired or unknown/), held_for_seconds: 600 } })
  }, 120_000)

  it("a call whose client goes away (its connection dropped) is given up on the server too: wait_for_email stops waiting", async () => {
    const inbox = await newBox(suite.url, { user: owner })
    const logged = suite.server.output().length
    const giveUp = new AbortController()
    const waiting = fetch(`${suite.url}/mcp`, {
      method: "POST",
      headers: { authorization: `Bearer ${owner.apiKey}`, "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "wait_for_email", arguments: { mailbox_id: inbox.mailboxId, timeout_seconds: 30 } } }),
      signal: giveUp.signal
    })
    await new Promise((resolve) => setTimeout(resolve, 1_000))
    giveUp.abort()
    await expect(waiting).rejects.toThrow()
    await until("the server gives the call up", async () =>
      suite.server.output().slice(logged).includes("MCP tool call given up: its client went away") ? true : undefined, 10_000, 100)
  }, 60_000)

  it("a call its client cancels (the SDK's AbortSignal sends notifications/cancelled) is stopped on the server and answered nothing", async () => {
    const inbox = await newBox(suite.url, { user: owner })
    const { mcp, posts, errors } = await watched({ authorization: `Bearer ${owner.apiKey}` })
    // initialize gave the client the name its request ids are kept apart by, and it sends it since.
    const session = (await posts[0]!.answer).headers.get("mcp-session-id")
    expect(session).toMatch(/^[\w-]{22}$/)
    const logged = suite.server.output().length
    const giveUp = new AbortController()
    const waiting = mcp.callTool(
      { name: "wait_for_email", arguments: { mailbox_id: inbox.mailboxId, timeout_seconds: 30 } },
      undefined,
      { signal: giveUp.signal }
    )
    await sleep(1_000)
    const cancelledAt = Date.now()
    giveUp.abort("the user changed their mind")
    await expect(waiting).rejects.toThrow(/the user changed their mind/)
    // The tool call's fiber is interrupted: it waits no longer.
    await until("the server stops the call", async () =>
      suite.server.output().slice(logged).includes("MCP tool call cancelled by its client (notifications/cancelled)") ? true : undefined, 10_000, 100)
    const sent = posts.find((post) => post.body.method === "tools/call")!
    const cancellation = posts.find((post) => post.body.method === "notifications/cancelled")!
    expect(cancellation).toBeDefined()
    expect(cancellation.body.params).toEqual({ requestId: sent.body.id, reason: "the user changed their mind" })
    expect(cancellation.session).toBe(session)
    expect(sent.session).toBe(session)
    expect((await cancellation.answer).status).toBe(202)
    // The POST that carried the call ends with no JSON-RPC answer, as soon as it is cancelled, not after the 30 s wait.
    const answer = await sent.answer
    expect(answer.status).toBe(202)
    expect(answer.text).toBe("")
    expect(answer.endedAt - cancelledAt).toBeLessThan(10_000)
    // Mail that arrives now is waited for by nobody, and nothing reached the client that it could not place.
    expect(errors).toEqual([])
    expect((await call(mcp, "list_mailboxes", {})).ok.mailboxes.length).toBeGreaterThan(0)
    await mcp.close()
  }, 60_000)

  it("wait_for_email tells a client that asks (a progressToken) how long it has waited, every 5 s, on a stream: one that resets its timeout on progress waits it out", async () => {
    const [quiet, busy, dropped] = (await Promise.all([1, 2, 3].map(() => newBox(suite.url, { user: owner })))) as [Box, Box, Box]
    const { mcp, posts, errors } = await watched({ authorization: `Bearer ${owner.apiKey}` })
    const told: Array<unknown> = []
    const wait = (box: Box, seconds: number) => ({ name: "wait_for_email", arguments: { mailbox_id: box.mailboxId, timeout_seconds: seconds } })
    const logged = suite.server.output().length
    const giveUp = new AbortController()
    const calls = [
      // Past its 7 s timeout, kept by the progress at 5 s; answered empty at 9 s.
      mcp.callTool(wait(quiet, 9), undefined, { timeout: 7_000, resetTimeoutOnProgress: true, onprogress: (progress) => told.push(progress) }),
      // The same without progress: the client gives up at 7 s, as any MCP client would with a wait longer than its timeout.
      mcp.callTool(wait(quiet, 9), undefined, { timeout: 7_000 }),
      // Mail that arrives is answered on the stream at once.
      mcp.callTool(wait(busy, 30), undefined, { onprogress: () => {} }),
      // Cancelled: the stream ends with no answer, and the server stops waiting.
      mcp.callTool(wait(dropped, 30), undefined, { onprogress: () => {}, signal: giveUp.signal })
    ]
    const settled = Promise.allSettled(calls)
    await sleep(1_000)
    giveUp.abort("not needed")
    await deliver(busy.address, "Parcel")
    const [patient, impatient, woken, cancelled] = await settled
    expect(cancelled).toMatchObject({ status: "rejected", reason: expect.objectContaining({ message: expect.stringMatching(/not needed/) }) })
    await until("the server stops the cancelled call", async () =>
      suite.server.output().slice(logged).includes("MCP tool call cancelled by its client (notifications/cancelled)") ? true : undefined, 10_000, 100)
    expect(woken).toMatchObject({ status: "fulfilled", value: { structuredContent: { emails: [expect.objectContaining({ subject: "Parcel" })] } } })
    expect(impatient).toMatchObject({ status: "rejected", reason: expect.objectContaining({ code: -32001 }) })
    expect(patient).toMatchObject({ status: "fulfilled", value: { structuredContent: { emails: [], total: 0, has_more: false } } })
    // At 5 s (a loaded machine's timers may be late by a second, and may then tell a second time before the answer).
    expect(told[0]).toEqual({ progress: 5, total: 9, message: "Waited 5 of 9 s for mail" })
    expect(told.slice(1)).toEqual(told.length === 1 ? [] : [{ progress: 9, total: 9, message: "Waited 9 of 9 s for mail" }])
    // Streams only where progress was asked for. The call without it was to be answered as JSON; its
    // client's timeout cancelled it (notifications/cancelled), so its POST was answered 202 with nothing.
    const answers = await Promise.all(posts.filter((post) => post.body.method === "tools/call").map((post) => post.answer))
    expect(answers.map((answer) => [answer.status, answer.headers.get("content-type")]).sort()).toEqual([
      [200, "text/event-stream"],
      [200, "text/event-stream"],
      [200, "text/event-stream"],
      [202, null]
    ])
    expect(posts.filter((post) => post.body.method === "notifications/cancelled").map((post) => (post.body.params as { reason: string }).reason).sort())
      .toEqual(["McpError: MCP error -32001: Request timed out", "not needed"])
    expect(errors).toEqual([])
    await mcp.close()
  }, 60_000)

  it("ignores quietly a cancellation of an id not in flight (unknown, or answered already), and cancels only the request of the client and account that sent it", async () => {
    const inbox = await newBox(suite.url, { user: owner })
    const stranger = await withApiKey(suite.url)
    const clientA = await rawClient(owner.apiKey)
    const clientB = await rawClient(owner.apiKey)
    const strangerInA = { ...(await rawClient(stranger.apiKey)), session: clientA.session }
    expect(clientA.session).not.toBe(clientB.session)
    const cancel = (client: RawClient, requestId: number) =>
      client.post({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId, reason: "test" } })
    const logged = suite.server.output().length
    const cancelledSince = () => suite.server.output().slice(logged).includes("cancelled by its client")
    // An id never sent, and one answered already: 202 as for every notification, and nothing else.
    expect((await cancel(clientA, 41)).status).toBe(202)
    const listed = await clientA.post({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "list_mailboxes", arguments: {} } })
    expect(listed.status).toBe(200)
    expect(await listed.json()).toMatchObject({ jsonrpc: "2.0", id: 1, result: { structuredContent: { mailboxes: expect.any(Array) } } })
    expect((await cancel(clientA, 1)).status).toBe(202)
    // In flight as A's id 2: another client's id 2 (same account) and another account's (told A's session) are not it.
    const waiting = clientA.post({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "wait_for_email", arguments: { mailbox_id: inbox.mailboxId, timeout_seconds: 30 } } })
    await sleep(500)
    expect((await cancel(clientB, 2)).status).toBe(202)
    expect((await cancel(strangerInA, 2)).status).toBe(202)
    expect(await Promise.race([waiting.then(() => "answered"), sleep(1_500).then(() => "still waiting")])).toBe("still waiting")
    expect(cancelledSince()).toBe(false)
    expect(await cancel(clientA, 2).then((answer) => answer.status)).toBe(202)
    const answer = await waiting
    expect(answer.status).toBe(202)
    expect(await answer.text()).toBe("")
    await until("the server stops the call", async () => (cancelledSince() ? true : undefined), 10_000, 100)
    // A's next request is answered as ever.
    const after = await clientA.post({ jsonrpc: "2.0", id: 3, method: "tools/call", params: { name: "list_mailboxes", arguments: {} } })
    expect(await after.json()).toMatchObject({ id: 3, result: { structuredContent: { mailboxes: expect.any(Array) } } })
  }, 60_000)

  it("waits in a loop that misses none of a burst (oldest first, has_more) and carries on after mail deleted meanwhile", async () => {
    const inbox = await newBox(suite.url, { user: owner })
    const subjects = (answer: { emails: ReadonlyArray<{ subject: string }> }) => answer.emails.map((e) => e.subject)
    await deliver(inbox.address, "Order 1")
    const first = await call(mcp, "wait_for_email", { mailbox_id: inbox.mailboxId, timeout_seconds: 30 })
    expect(subjects(first.ok)).toEqual(["Order 1"])
    for (const n of [2, 3, 4]) await deliver(inbox.address, `Order ${n}`)
    const after = first.ok.emails[0].email_id
    const burst = await until("the burst stored", async () => {
      const { ok } = await call(mcp, "wait_for_email", { mailbox_id: inbox.mailboxId, after, limit: 2, timeout_seconds: 0 })
      return ok.total === 3 ? ok : undefined
    })
    expect(subjects(burst)).toEqual(["Order 2", "Order 3"])
    expect(burst.has_more).toBe(true)
    const rest = await call(mcp, "wait_for_email", { mailbox_id: inbox.mailboxId, after: burst.emails[1].email_id, limit: 2, timeout_seconds: 0 })
    expect(subjects(rest.ok)).toEqual(["Order 4"])
    expect(rest.ok).toMatchObject({ total: 1, has_more: false })
    // The last one seen is deleted (spam) before the loop asks again: it still marks the place.
    const last = rest.ok.emails[0].email_id
    expect((await call(mcp, "delete_emails", { email_ids: [last] })).ok).toMatchObject({ deleted: 1 })
    const waiting = call(mcp, "wait_for_email", { mailbox_id: inbox.mailboxId, after: last, timeout_seconds: 30 })
    await deliver(inbox.address, "Order 5")
    const fifth = (await waiting).ok
    expect(subjects(fifth)).toEqual(["Order 5"])
    // The agent's own reply is not mail arriving: the loop waits on for the next received one.
    const replied = await call(mcp, "reply_to_email", { email_id: fifth.emails[0].email_id, text: "Shipped today." })
    expect(replied.ok).toMatchObject({ status: "queued" })
    const sent = await until("the reply stored", async () => {
      const { ok } = await call(mcp, "wait_for_email", { mailbox_id: inbox.mailboxId, after: fifth.emails[0].email_id, direction: "outbound", timeout_seconds: 0 })
      return ok.total === 1 ? ok : undefined
    })
    expect(subjects(sent)).toEqual(["Re: Order 5"])
    const received = await call(mcp, "wait_for_email", { mailbox_id: inbox.mailboxId, after: fifth.emails[0].email_id, timeout_seconds: 1 })
    expect(received.ok).toEqual({ emails: [], total: 0, has_more: false })
    // An id that never was this mailbox's is still refused by its field.
    expect((await call(mcp, "wait_for_email", { mailbox_id: inbox.mailboxId, after: emailId, timeout_seconds: 0 })).error).toMatchObject({
      code: "VALIDATION_ERROR",
      details: { after: "must be the id of an email in this mailbox" }
    })
  }, 120_000)

  it("sends an attachment past the JSON routes' 1 MiB, as the send route takes it", async () => {
    const report = Buffer.alloc(1_200_000, "report line\n")
    const sent = await call(mcp, "send_email", {
      mailbox_id: box.mailboxId,
      to: [box.address],
      subject: "The quarterly report",
      text: "Attached.",
      attachments: [{ filename: "report.txt", content_type: "text/plain", content: report.toString("base64") }]
    })
    expect(sent.ok).toMatchObject({ status: "queued", email_id: expect.any(String) })
  })

  it("acts: labels, a new mailbox, its From's name, a send, a reply, a forward, a draft sent", async () => {
    const labelled = await call(mcp, "update_labels", { email_ids: [emailId], add_labels: ["billing"], remove_labels: ["unread"] })
    expect(labelled.ok).toEqual({ updated: 1, emails: [{ email_id: emailId, labels: ["inbound", "unauthenticated", "billing"] }] })
    const labels = await call(mcp, "list_labels", { mailbox_id: box.mailboxId })
    expect(labels.ok.labels).toContainEqual({ label: "billing", email_count: 1, unread_count: 0 })
    expect(labels.ok).toMatchObject({ total: labels.ok.labels.length, has_more: false })

    const desk = await call(mcp, "create_mailbox", { local_part: fresh("desk"), display_name: "Front Desk" })
    expect(desk.ok).toMatchObject({ domain: DOMAIN, display_name: "Front Desk" })
    const deskAddress = desk.ok.email_address as string
    const named = await call(mcp, "set_mailbox_name", { mailbox_id: box.mailboxId, display_name: "Billing Agent" })
    expect(named.ok).toEqual({ mailbox_id: box.mailboxId, email_address: box.address, domain: DOMAIN, status: "active", display_name: "Billing Agent" })

    const sending = { mailbox_id: box.mailboxId, to: [deskAddress], subject: "Hello desk", text: "Hi.", idempotency_key: fresh("send") }
    const sent = await call(mcp, "send_email", sending)
    expect(sent.ok).toMatchObject({ status: "queued", email_id: expect.any(String), thread_id: expect.any(String) })
    // Retried with its key, a call answers its first answer and sends nothing new (the desk gets two emails below, not
    // four); the key with other arguments is refused.
    expect((await call(mcp, "send_email", sending)).ok).toEqual(sent.ok)
    expect((await call(mcp, "send_email", { ...sending, text: "Hi again." })).error).toMatchObject({ code: "IDEMPOTENCY_KEY_REUSED" })
    // A key that is not one (spaces, or past 255 characters) is refused by its field; nothing is sent.
    for (const key of ["two words", "k".repeat(256)]) {
      expect((await call(mcp, "send_email", { ...sending, idempotency_key: key })).error)
        .toMatchObject({ code: "VALIDATION_ERROR", details: { idempotency_key: "must be 1-255 visible ASCII characters" } })
    }

    const replying = { email_id: emailId, text: "Paid.", idempotency_key: fresh("reply") }
    const reply = await call(mcp, "reply_to_email", replying)
    expect(reply.ok).toMatchObject({ status: "queued" })
    expect((await call(mcp, "reply_to_email", replying)).ok).toEqual(reply.ok)
    const forwarding = { email_id: emailId, to: [deskAddress], text: "For you.", idempotency_key: fresh("forward") }
    const forward = await call(mcp, "forward_email", forwarding)
    expect(forward.ok).toMatchObject({ status: "queued" })
    expect((await call(mcp, "forward_email", forwarding)).ok).toEqual(forward.ok)

    const draft = await call(mcp, "create_draft", { mailbox_id: box.mailboxId, in_reply_to: emailId, text: "Drafted answer." })
    expect(draft.ok).toMatchObject({ draft_id: expect.any(String) })
    const out = await call(mcp, "send_draft", { mailbox_id: box.mailboxId, draft_id: draft.ok.draft_id })
    expect(out.ok).toMatchObject({ status: "queued" })

    // The desk received the send and the forward, through the inbound path.
    const deskMail = await until("the desk's mail", async () => {
      const { ok } = await call(mcp, "list_emails", { mailbox_id: desk.ok.mailbox_id })
      return ok?.emails?.length === 2 ? ok.emails.map((e: { subject: string; from_name: string }) => `${e.subject} / ${e.from_name}`).sort() : undefined
    })
    expect(deskMail).toEqual(["Fwd: Invoice 7 / Billing Agent", "Hello desk / Billing Agent"])
    // A page says whether the list goes on, and where.
    const first = (await call(mcp, "list_emails", { mailbox_id: desk.ok.mailbox_id, limit: 1 })).ok
    expect([first.emails.length, first.total, first.has_more, first.next_offset]).toEqual([1, 2, true, 1])
    const last = (await call(mcp, "list_emails", { mailbox_id: desk.ok.mailbox_id, limit: 1, offset: 1 })).ok
    expect([last.emails.length, last.has_more, "next_offset" in last]).toEqual([1, false, false])
    // By sender, named as the sender lists name one; what names no sender is refused by its field.
    expect((await call(mcp, "list_emails", { mailbox_id: desk.ok.mailbox_id, from: box.address.toUpperCase() })).ok.total).toBe(2)
    expect((await call(mcp, "list_emails", { mailbox_id: desk.ok.mailbox_id, from: "example.net" })).ok.total).toBe(0)
    expect((await call(mcp, "list_emails", { mailbox_id: desk.ok.mailbox_id, from: "ada@" })).error).toMatchObject({
      code: "VALIDATION_ERROR",
      details: { from: expect.stringMatching(/^has no valid domain after the @/) }
    })
    expect((await call(mcp, "list_threads", { mailbox_id: desk.ok.mailbox_id, from: box.address })).ok.total).toBe(2)
    expect((await call(mcp, "list_threads", { mailbox_id: desk.ok.mailbox_id, from: "example.net" })).ok.total).toBe(0)
    expect((await call(mcp, "list_threads", { mailbox_id: desk.ok.mailbox_id, received_after: "2000-01-01" })).ok.total).toBe(2)
    expect((await call(mcp, "list_threads", { mailbox_id: desk.ok.mailbox_id, received_before: "2000-01-01" })).ok.total).toBe(0)
    // One conversation's, also waited for; a conversation with no mail there is not waited for.
    const helloThread = (await call(mcp, "list_emails", { mailbox_id: desk.ok.mailbox_id })).ok.emails.find((e: { subject: string }) => e.subject === "Hello desk").thread_id
    expect((await call(mcp, "list_emails", { mailbox_id: desk.ok.mailbox_id, thread_id: helloThread })).ok.emails.map((e: { subject: string }) => e.subject))
      .toEqual(["Hello desk"])
    expect((await call(mcp, "wait_for_email", { mailbox_id: desk.ok.mailbox_id, thread_id: helloThread, timeout_seconds: 0 })).ok.total).toBe(1)
    expect((await call(mcp, "wait_for_email", { mailbox_id: desk.ok.mailbox_id, thread_id: "thr_missing", timeout_seconds: 30 })).error)
      .toMatchObject({ code: "NOT_FOUND", details: { thread_id: "thr_missing" } })
    // By when it arrived: a day, or a time with its zone.
    expect((await call(mcp, "list_emails", { mailbox_id: desk.ok.mailbox_id, received_after: "2000-01-01" })).ok.total).toBe(2)
    expect((await call(mcp, "list_emails", { mailbox_id: desk.ok.mailbox_id, received_before: "2000-01-01T00:00:00Z" })).ok.total).toBe(0)
    expect((await call(mcp, "list_emails", { mailbox_id: desk.ok.mailbox_id, received_after: "last week" })).error).toMatchObject({
      code: "VALIDATION_ERROR",
      details: { received_after: expect.stringMatching(/^must be a day/) }
    })

    // The desk deletes what it was sent: the conversation "Hello desk" whole, then the forward by its id; gone
    // from its list, and not found again.
    const deskEmails = (await call(mcp, "list_emails", { mailbox_id: desk.ok.mailbox_id })).ok.emails as Array<{ email_id: string; subject: string; thread_id: string }>
    const hello = deskEmails.find((e) => e.subject === "Hello desk")!
    const forwarded = deskEmails.find((e) => e.subject !== "Hello desk")!
    expect((await call(mcp, "delete_thread", { thread_id: hello.thread_id })).ok).toEqual({ deleted: 1, email_ids: [hello.email_id] })
    expect((await call(mcp, "get_thread", { thread_id: hello.thread_id })).error).toMatchObject({ code: "NOT_FOUND", details: { thread_id: hello.thread_id } })
    expect((await call(mcp, "delete_thread", { thread_id: hello.thread_id })).error).toMatchObject({ code: "NOT_FOUND", details: { thread_id: hello.thread_id } })
    // Threads in a batch: the one deleted already fails it whole, and the forward stays.
    expect((await call(mcp, "delete_threads", { thread_ids: [forwarded.thread_id, hello.thread_id] })).error)
      .toMatchObject({ code: "NOT_FOUND", details: { thread_id: hello.thread_id } })
    expect((await call(mcp, "get_email", { email_id: forwarded.email_id })).ok.email_id).toBe(forwarded.email_id)
    expect((await call(mcp, "delete_emails", { email_ids: [forwarded.email_id] })).ok).toEqual({ deleted: 1, email_ids: [forwarded.email_id] })
    expect((await call(mcp, "list_emails", { mailbox_id: desk.ok.mailbox_id })).ok.emails).toEqual([])
    expect((await call(mcp, "delete_emails", { email_ids: [forwarded.email_id] })).error)
      .toMatchObject({ code: "NOT_FOUND", details: { email_id: forwarded.email_id } })
  })

  it("reads a calendar invitation and answers it; the organizer's mailbox reads the answer", async () => {
    const organizer = await call(mcp, "create_mailbox", { local_part: fresh("organizer") })
    const organizerAddress = organizer.ok.email_address as string
    const ics = [
      "BEGIN:VCALENDAR", "VERSION:2.0", "METHOD:REQUEST", "BEGIN:VEVENT", "UID:standup-42@example.com", "SEQUENCE:1",
      "DTSTART:20261207T090000Z", "DTEND:20261207T091500Z", "SUMMARY:Stand-up", `ORGANIZER;CN=Organizer:mailto:${organizerAddress}`,
      `ATTENDEE;PARTSTAT=NEEDS-ACTION;RSVP=TRUE:mailto:${box.address}`, "END:VEVENT", "END:VCALENDAR", ""
    ].join("\r\n")
    await sendMail(suite.server.smtpPort, { from: organizerAddress, to: box.address, subject: "Stand-up", text: "Join us.", icalEvent: { method: "REQUEST", content: ics } })
    const invitation = await until("the invitation", async () => {
      const { ok } = await call(mcp, "list_emails", { mailbox_id: box.mailboxId })
      return ok.emails.find((e: { subject: string }) => e.subject === "Stand-up")
    })
    const read = await call(mcp, "get_invitation", { email_id: invitation.email_id })
    expect(read.ok).toMatchObject({
      method: "REQUEST",
      summary: "Stand-up",
      start: { date_time: "2026-12-07T09:00:00Z", date: null, time_zone: null },
      organizer: { address: organizerAddress, name: "Organizer" },
      respondable: true,
      response: null
    })
    const answered = await call(mcp, "respond_to_invitation", { email_id: invitation.email_id, status: "accepted", comment: "On my way" })
    expect(answered.ok).toMatchObject({ status: "queued" })
    expect((await call(mcp, "get_invitation", { email_id: invitation.email_id })).ok.response).toMatchObject({ status: "accepted", comment: "On my way" })
    // The REPLY reaches the organizer's mailbox through the inbound path, and reads as the attendee's answer.
    const reply = await until("the REPLY at the organizer", async () => {
      const { ok } = await call(mcp, "list_emails", { mailbox_id: organizer.ok.mailbox_id })
      return ok.emails.find((e: { subject: string }) => e.subject === "Accepted: Stand-up")
    })
    const answer = await call(mcp, "get_invitation", { email_id: reply.email_id })
    expect(answer.ok).toMatchObject({ method: "REPLY", uid: "standup-42@example.com", sequence: 1, respondable: false })
    expect(answer.ok.attendees).toEqual([{ address: box.address, name: null, role: "required", status: "accepted", rsvp: false, is_mailbox: false }])
    // Refusals keep the API's codes: a plain email carries none; the REPLY is not one to answer.
    expect((await call(mcp, "get_invitation", { email_id: emailId })).error).toMatchObject({ code: "NO_INVITATION", details: { email_id: emailId } })
    expect((await call(mcp, "respond_to_invitation", { email_id: reply.email_id, status: "declined" })).error)
      .toMatchObject({ code: "INVITATION_NOT_RESPONDABLE", details: { reason: "not_a_request", method: "REPLY" } })
  })

  it("schedules a meeting with another mailbox, which answers it; moves it, then calls it off", async () => {
    const guest = await call(mcp, "create_mailbox", { local_part: fresh("guest") })
    const scheduled = await call(mcp, "schedule_meeting", {
      mailbox_id: box.mailboxId,
      summary: "Design review",
      start: { date_time: "2026-12-08T10:00:00Z" },
      end: { date_time: "2026-12-08T10:30:00Z" },
      attendees: [guest.ok.email_address]
    })
    expect(scheduled.ok).toMatchObject({ status: "confirmed", sequence: 0, attendees: [{ address: guest.ok.email_address, status: "needs_action" }] })
    const meetingId = scheduled.ok.meeting_id as string
    const invitation = await until("the guest's invitation", async () => {
      const { ok } = await call(mcp, "list_emails", { mailbox_id: guest.ok.mailbox_id })
      return ok.emails.find((e: { subject: string }) => e.subject === "Invitation: Design review")
    })
    expect((await call(mcp, "respond_to_invitation", { email_id: invitation.email_id, status: "tentative" })).ok).toMatchObject({ status: "queued" })
    const answered = await until("the answer on the meeting", async () => {
      const { ok } = await call(mcp, "get_meeting", { meeting_id: meetingId })
      return ok.attendees[0].status === "tentative" ? ok : undefined
    })
    expect(answered.attendees[0]).toMatchObject({ address: guest.ok.email_address, status: "tentative" })
    const listed = await call(mcp, "list_meetings", { mailbox_id: box.mailboxId, status: "confirmed" })
    expect(listed.ok).toMatchObject({ total: 1, meetings: [{ meeting_id: meetingId }] })
    // On the guest's schedule, with its answer.
    const week = { from: "2026-12-07T00:00:00Z", to: "2026-12-14T00:00:00Z" }
    const guestSchedule = await call(mcp, "get_schedule", { mailbox_id: guest.ok.mailbox_id, ...week, limit: 10, include_cancelled: false })
    expect(guestSchedule.ok).toEqual({
      occurrences: [expect.objectContaining({ summary: "Design review", role: "attendee", response: "tentative", busy: true })],
      from: "2026-12-07T00:00:00.000Z",
      to: "2026-12-14T00:00:00.000Z",
      count: 1,
      // Paging said as every tool says it (the HTTP route's meta says hasMore).
      has_more: false
    })
    // With the organizer's: the review on both, the guest's first (named first).
    const both = await call(mcp, "get_schedule", { mailbox_id: guest.ok.mailbox_id, with_mailbox_ids: [box.mailboxId], ...week })
    const reviews = both.ok.occurrences.filter((o: { uid: string }) => o.uid === scheduled.ok.uid)
    expect(reviews.map((o: { mailbox_id: string; role: string }) => [o.mailbox_id, o.role])).toEqual([
      [guest.ok.mailbox_id, "attendee"],
      [box.mailboxId, "organizer"]
    ])
    expect((await call(mcp, "get_schedule", { mailbox_id: box.mailboxId, from: week.to, to: week.from })).error)
      .toMatchObject({ code: "VALIDATION_ERROR", details: { to: "must be after from" } })
    // Free on that Tuesday morning but for the review.
    const free = await call(mcp, "find_free_time", {
      mailbox_id: guest.ok.mailbox_id,
      from: "2026-12-08T00:00:00Z",
      to: "2026-12-09T00:00:00Z",
      hours: "09:00-12:00",
      duration_minutes: 30,
      step_minutes: 30
    })
    expect(free.ok.slots.map((slot: { start: string }) => slot.start.slice(11, 16))).toEqual(["09:00", "09:30", "10:30", "11:00", "11:30"])
    expect(free.ok).toMatchObject({ count: 5, has_more: false })
    // With the organizer, who hosts the same review: the same times; with a mailbox not the account's, its 404.
    const bothFree = await call(mcp, "find_free_time", {
      mailbox_id: guest.ok.mailbox_id,
      with_mailbox_ids: [box.mailboxId],
      from: "2026-12-08T00:00:00Z",
      to: "2026-12-09T00:00:00Z",
      hours: "09:00-12:00"
    })
    expect(bothFree.ok.slots).toEqual(free.ok.slots)
    expect((await call(mcp, "find_free_time", { mailbox_id: guest.ok.mailbox_id, with_mailbox_ids: ["mbx_missing"] })).error)
      .toMatchObject({ code: "NOT_FOUND", details: { mailbox_id: "mbx_missing" } })
    expect((await call(mcp, "find_free_time", { mailbox_id: guest.ok.mailbox_id, weekdays: "8" })).error)
      .toMatchObject({ code: "VALIDATION_ERROR", details: { weekdays: "must be weekdays 1 (Monday) to 7 (Sunday), separated by commas" } })
    // Moved by the local time where it is held: the zone places it (no offset for the model to work out).
    const paris = (local: string) => ({ date_time: local, time_zone: "Europe/Paris" })
    const moved = await call(mcp, "update_meeting", { meeting_id: meetingId, start: paris("2026-12-08T12:00"), end: paris("2026-12-08T12:30:00") })
    expect(moved.ok).toMatchObject({
      sequence: 1,
      attendees: [{ status: "needs_action" }],
      start: { date_time: "2026-12-08T11:00:00Z", date: null, time_zone: "Europe/Paris" },
      end: { date_time: "2026-12-08T11:30:00Z", date: null, time_zone: "Europe/Paris" }
    })
    // A local time needs its zone; one the clocks skip (summer time beginning) is no time at all.
    expect((await call(mcp, "update_meeting", { meeting_id: meetingId, start: { date_time: "2026-12-08T12:00:00" } })).error?.details)
      .toEqual({ "start.date_time": "has no offset: add one (2026-12-01T10:00:00+01:00), or give the time_zone it is in" })
    expect((await call(mcp, "update_meeting", { meeting_id: meetingId, start: paris("2027-03-28T02:30"), end: paris("2027-03-28T04:00") })).error?.details)
      .toEqual({ "start.date_time": "does not exist in Europe/Paris: the clocks skip it (summer time begins)" })
    expect((await call(mcp, "cancel_meeting", { meeting_id: meetingId })).ok).toMatchObject({ status: "cancelled", sequence: 2 })
    expect((await call(mcp, "cancel_meeting", { meeting_id: meetingId })).error).toMatchObject({ code: "CONFLICT", details: { meeting_id: meetingId } })
    expect((await call(mcp, "schedule_meeting", {
      mailbox_id: box.mailboxId,
      summary: "Backwards",
      start: { date_time: "2026-12-08T10:00:00Z" },
      end: { date_time: "2026-12-08T09:00:00Z" },
      attendees: [guest.ok.email_address]
    })).error).toMatchObject({ code: "VALIDATION_ERROR", details: { end: "must be after start" } })
  })

  it("keeps drafts as a person's approval queue: listed, read, revised, withdrawn; a sent one can no longer change", async () => {
    const mailbox = await newBox(suite.url, { user: box.user })
    const drafting = { mailbox_id: mailbox.mailboxId, to: ["client@partner.test"], subject: "Quote", text: "Draft one.", idempotency_key: fresh("draft") }
    const first = await call(mcp, "create_draft", drafting)
    // An agent's retried call makes no second draft for a person to approve.
    expect((await call(mcp, "create_draft", drafting)).ok).toEqual(first.ok)
    const second = await call(mcp, "create_draft", {
      mailbox_id: mailbox.mailboxId,
      to: ["client@partner.test"],
      subject: "Follow-up",
      text: "Later.",
      send_at: "2099-01-01T09:00:00.000Z"
    })
    const [firstId, secondId] = [first.ok.draft_id as string, second.ok.draft_id as string]

    const listed = await call(mcp, "list_drafts", { mailbox_id: mailbox.mailboxId })
    expect(listed.ok.total).toBe(2)
    expect(listed.ok.drafts.map((d: { draft_id: string }) => d.draft_id)).toEqual([secondId, firstId])
    // Every mailbox's drafts when none is named: this mailbox's among them.
    const everywhere = await call(mcp, "list_drafts", { status: "draft", limit: 100 })
    expect(everywhere.ok.drafts.map((d: { draft_id: string }) => d.draft_id)).toEqual(expect.arrayContaining([firstId, secondId]))

    // Revised: what is given changes, the rest stays; send_at null unschedules.
    const revised = await call(mcp, "update_draft", { mailbox_id: mailbox.mailboxId, draft_id: secondId, text: "Sooner.", send_at: null })
    expect(revised.ok).toMatchObject({ draft_id: secondId, subject: "Follow-up", text: "Sooner.", send_at: null, status: "draft" })
    expect((await call(mcp, "get_draft", { mailbox_id: mailbox.mailboxId, draft_id: secondId })).ok).toEqual(revised.ok)

    // Withdrawn: gone from the list, and not found again.
    expect((await call(mcp, "delete_draft", { mailbox_id: mailbox.mailboxId, draft_id: secondId })).ok)
      .toEqual({ draft_id: secondId, deleted: true, email_id: null })
    expect((await call(mcp, "list_drafts", { mailbox_id: mailbox.mailboxId })).ok.total).toBe(1)
    expect((await call(mcp, "get_draft", { mailbox_id: mailbox.mailboxId, draft_id: secondId })).error)
      .toMatchObject({ code: "NOT_FOUND", details: { draft_id: secondId } })

    // Sent, it is history: listed as sent with the email it became, and no longer changed.
    const sent = await call(mcp, "send_draft", { mailbox_id: mailbox.mailboxId, draft_id: firstId })
    const sentDrafts = await call(mcp, "list_drafts", { mailbox_id: mailbox.mailboxId, status: "sent" })
    expect(sentDrafts.ok.drafts).toMatchObject([{ draft_id: firstId, status: "sent", email_id: sent.ok.email_id }])
    expect((await call(mcp, "update_draft", { mailbox_id: mailbox.mailboxId, draft_id: firstId, text: "Too late." })).error)
      .toMatchObject({ code: "CONFLICT", details: { draft_id: firstId, status: "sent" } })
    expect((await call(mcp, "list_drafts", { mailbox_id: mailbox.mailboxId, status: "queued" })).error)
      .toMatchObject({ code: "VALIDATION_ERROR", details: { status: expect.any(String) } })
  })

  it("edits or sends only the version read (if_updated_at): a draft changed since is a CONFLICT tool error with its updated_at now, nothing changed or sent", async () => {
    const { tools } = await mcp.listTools()
    for (const name of ["update_draft", "send_draft"]) {
      const argument = tools.find((tool) => tool.name === name)!.inputSchema.properties!["if_updated_at"] as { type?: string; description?: string }
      expect(argument, name).toMatchObject({ type: "string", description: expect.stringMatching(/updated_at as you last read it.*CONFLICT, details\.updated_at/) })
    }

    const mailbox = await newBox(suite.url, { user: box.user })
    const read = (await call(mcp, "create_draft", { mailbox_id: mailbox.mailboxId, to: ["client@partner.test"], subject: "Quote", text: "120 EUR." })).ok
    const draft = { mailbox_id: mailbox.mailboxId, draft_id: read.draft_id as string }
    // Changed after it was read (by a person on the dashboard, or another call).
    const changed = (await call(mcp, "update_draft", { ...draft, text: "1200 EUR." })).ok
    expect(Date.parse(changed.updated_at)).toBeGreaterThan(Date.parse(read.updated_at))
    const stale = { code: "CONFLICT", details: { draft_id: draft.draft_id, status: "draft", updated_at: changed.updated_at, if_updated_at: read.updated_at } }

    // Sending or editing the version read is refused, saying the version now; the draft stays as it was changed.
    const send = await call(mcp, "send_draft", { ...draft, if_updated_at: read.updated_at })
    expect(send.error).toMatchObject(stale)
    expect(send.error!.message).toMatch(/nothing was sent/)
    const edit = await call(mcp, "update_draft", { ...draft, subject: "Quote, revised", if_updated_at: read.updated_at })
    expect(edit.error).toMatchObject(stale)
    expect(edit.error!.message).toMatch(/nothing was changed/)
    expect((await call(mcp, "get_draft", draft)).ok).toEqual(changed)
    // A value that is no time is refused by its argument.
    expect((await call(mcp, "send_draft", { ...draft, if_updated_at: "yesterday" })).error)
      .toMatchObject({ code: "VALIDATION_ERROR", details: { if_updated_at: expect.stringMatching(/ISO 8601/) } })

    // Read again, the version now is edited, then sent as edited.
    const reviewed = await call(mcp, "update_draft", { ...draft, text: "1200 EUR, reviewed.", if_updated_at: send.error!.details!["updated_at"] })
    expect(reviewed.ok).toMatchObject({ ...draft, text: "1200 EUR, reviewed.", status: "draft" })
    const sent = await call(mcp, "send_draft", { ...draft, if_updated_at: reviewed.ok.updated_at })
    expect(sent.ok).toMatchObject({ status: "queued", email_id: expect.any(String) })
    expect((await call(mcp, "get_email", { email_id: sent.ok.email_id })).ok.text).toContain("1200 EUR, reviewed.")
    // Without it nothing is checked, as before: an agent sending its own draft.
    const own = (await call(mcp, "create_draft", { mailbox_id: mailbox.mailboxId, to: ["client@partner.test"], subject: "Own", text: "First." })).ok
    await call(mcp, "update_draft", { mailbox_id: mailbox.mailboxId, draft_id: own.draft_id, text: "Second." })
    expect((await call(mcp, "send_draft", { mailbox_id: mailbox.mailboxId, draft_id: own.draft_id })).ok).toMatchObject({ status: "queued" })
  })

  it("blocks a sender for a mailbox or the account, once; a malformed entry is refused by its field; unblocked, it is gone", async () => {
    const blocked = await call(mcp, "block_sender", { entry: "*.Spam.example", mailbox_id: box.mailboxId })
    expect(blocked.ok).toEqual({
      entry: { entry: "*.spam.example", type: "subdomains", list: "block", mailbox_id: box.mailboxId, created_at: expect.any(String) },
      created: true
    })
    expect((await call(mcp, "block_sender", { entry: "*.spam.example", mailbox_id: box.mailboxId })).ok).toMatchObject({ created: false })
    expect((await call(mcp, "block_sender", { entry: "pest@example.net" })).ok).toMatchObject({ entry: { type: "address", mailbox_id: null }, created: true })
    expect((await call(mcp, "block_sender", { entry: "not a domain" })).error).toMatchObject({ code: "VALIDATION_ERROR", details: { entry: expect.any(String) } })
    const lists = withKey(suite.url, box.user)
    const mailboxList = await lists.GET("/v1/api/mailboxes/{mailboxId}/lists/{list}", { params: { path: { mailboxId: box.mailboxId, list: "block" } } })
    expect(mailboxList.data?.data.map((e) => e.entry)).toEqual(["*.spam.example"])
    // What the agent blocked, it can read: the mailbox's list, and the account's.
    expect((await call(mcp, "list_blocked_senders", { mailbox_id: box.mailboxId })).ok).toEqual({
      entries: [{ entry: "*.spam.example", type: "subdomains", list: "block", mailbox_id: box.mailboxId, created_at: expect.any(String) }],
      total: 1,
      has_more: false
    })
    expect((await call(mcp, "list_blocked_senders", {})).ok).toMatchObject({ entries: [{ entry: "pest@example.net", mailbox_id: null }], total: 1 })

    expect((await call(mcp, "unblock_sender", { entry: "*.spam.example", mailbox_id: box.mailboxId })).ok).toMatchObject({ deleted: true })
    expect((await call(mcp, "unblock_sender", { entry: "pest@example.net" })).ok).toMatchObject({ deleted: true })
    expect((await call(mcp, "unblock_sender", { entry: "pest@example.net" })).error).toMatchObject({ code: "NOT_FOUND" })
  })

  it("forwards a mailbox's mail to another of the account's mailboxes at once; its own address is refused by its field; stopped, it is gone", async () => {
    const sibling = await newBox(suite.url, { user: box.user })
    const added = await call(mcp, "forward_mailbox", { mailbox_id: box.mailboxId, address: sibling.address.toUpperCase() })
    expect(added.ok).toEqual({
      forwarding: {
        address: sibling.address,
        mailbox_id: box.mailboxId,
        status: "active",
        created_at: expect.any(String),
        confirmed_at: expect.any(String),
        suspended_reason: null
      },
      created: true
    })
    expect((await call(mcp, "forward_mailbox", { mailbox_id: box.mailboxId, address: box.address })).error)
      .toMatchObject({ code: "VALIDATION_ERROR", details: { address: "is this mailbox's own address" } })
    expect((await call(mcp, "list_forwarding", { mailbox_id: box.mailboxId })).ok.forwarding.map((f: { address: string }) => f.address)).toEqual([sibling.address])
    expect((await call(mcp, "stop_forwarding", { mailbox_id: box.mailboxId, address: sibling.address })).ok).toMatchObject({ deleted: true })
    expect((await call(mcp, "stop_forwarding", { mailbox_id: box.mailboxId, address: sibling.address })).error).toMatchObject({ code: "NOT_FOUND" })
  })

  it("sets a mailbox's automatic reply, reads it, refuses a bad interval by its field, and turns it off", async () => {
    expect((await call(mcp, "get_auto_reply", { mailbox_id: box.mailboxId })).ok).toEqual({ auto_reply: null })
    const set = await call(mcp, "set_auto_reply", { mailbox_id: box.mailboxId, text: "Back on Monday.", interval_days: 3 })
    expect(set.ok).toMatchObject({ mailbox_id: box.mailboxId, text: "Back on Monday.", interval_days: 3, subject: null, active: true })
    expect((await call(mcp, "get_auto_reply", { mailbox_id: box.mailboxId })).ok.auto_reply).toEqual(set.ok)
    expect((await call(mcp, "set_auto_reply", { mailbox_id: box.mailboxId, text: "x", interval_days: 99 })).error)
      .toMatchObject({ code: "VALIDATION_ERROR", details: { interval_days: expect.any(String) } })
    expect((await call(mcp, "turn_off_auto_reply", { mailbox_id: box.mailboxId })).ok).toEqual({ mailbox_id: box.mailboxId, deleted: true })
    expect((await call(mcp, "turn_off_auto_reply", { mailbox_id: box.mailboxId })).error).toMatchObject({ code: "NOT_FOUND" })
  })

  it("creates a filter, lists it, counts what it would label in mail already received, refuses a filter without conditions, deletes it", async () => {
    const created = await call(mcp, "create_filter", {
      conditions: { subject_contains: ["invoice"], has_attachments: true },
      actions: { add_labels: ["invoices"] }
    })
    expect(created.ok).toMatchObject({ filter_id: expect.stringMatching(/^flt_/), mailbox_id: null, enabled: true })
    const filterId = created.ok.filter_id
    expect((await call(mcp, "list_filters", {})).ok).toEqual({ filters: [created.ok], total: 1, has_more: false })
    expect((await call(mcp, "apply_filter", { filter_id: filterId, dry_run: true })).ok)
      .toEqual({ filter_id: filterId, dry_run: true, scanned: expect.any(Number), matched: 1, changed: 1 })
    expect((await call(mcp, "create_filter", { conditions: {}, actions: { add_labels: ["x"] } })).error)
      .toMatchObject({ code: "VALIDATION_ERROR", details: { conditions: expect.any(String) } })
    expect((await call(mcp, "delete_filter", { filter_id: filterId })).ok).toEqual({ filter_id: filterId, deleted: true })
    expect((await call(mcp, "delete_filter", { filter_id: filterId })).error).toMatchObject({ code: "NOT_FOUND", details: { filter_id: filterId } })
  })

  it("suppresses a recipient for the account, once (a malformed address is refused by its field), lists the suppressions and lifts one", async () => {
    const address = `${fresh("asked")}@Partner.example`
    const suppressed = await call(mcp, "suppress_recipient", { address })
    expect(suppressed.ok).toEqual({
      suppression: { address: address.toLowerCase(), reason: "manual", last_response: null, email_id: null, created_at: expect.any(String) },
      created: true
    })
    expect((await call(mcp, "suppress_recipient", { address: address.toLowerCase() })).ok).toMatchObject({ created: false })
    expect((await call(mcp, "suppress_recipient", { address: "nobody" })).error).toMatchObject({ code: "VALIDATION_ERROR", details: { address: expect.any(String) } })
    const listed = await withKey(suite.url, box.user).GET("/v1/api/suppressions", {})
    expect(listed.data?.data.map((s) => [s.address, s.reason])).toContainEqual([address.toLowerCase(), "manual"])
    // Listed to the agent as well, newest first, and taken off again: the address may be written to.
    const own = await call(mcp, "list_suppressions", { limit: 1 })
    expect(own.ok).toMatchObject({ suppressions: [{ address: address.toLowerCase(), reason: "manual" }], total: expect.any(Number) })
    expect(own.ok.has_more).toBe(own.ok.total > 1)
    expect((await call(mcp, "unsuppress_recipient", { address })).ok).toEqual({ address: address.toLowerCase(), deleted: true })
    expect((await call(mcp, "unsuppress_recipient", { address })).error).toMatchObject({ code: "NOT_FOUND", details: { address: address.toLowerCase() } })
    const after = await call(mcp, "list_suppressions", {})
    expect(after.ok.suppressions.map((s: { address: string }) => s.address)).not.toContain(address.toLowerCase())
  })

  it("answers bad input to every tool with a readable VALIDATION_ERROR, not a crash; refusals keep SPEC's codes", async () => {
    for (const name of TOOLS) {
      const refused = await call(mcp, name, { not_an_argument: true })
      expect(refused.error?.code, name).toBe("VALIDATION_ERROR")
      expect(Object.keys(refused.error?.details ?? {}).length, name).toBeGreaterThan(0)
    }
    // Each field's own problem, in words a model can act on (not "Expected undefined, actual …").
    expect((await call(mcp, "list_emails", { mailbox_id: box.mailboxId, limit: 0 })).error?.details).toEqual({ limit: "must be an integer from 1 to 100" })
    // An attachment's part out of range is refused by its argument, before anything is read.
    const part = await call(mcp, "get_attachment", { email_id: "eml_x", attachment_id: "att_x", offset: -1, max_chars: 100_001 })
    expect([part.error?.code, Object.keys(part.error?.details ?? {}).sort()]).toEqual(["VALIDATION_ERROR", ["max_chars", "offset"]])
    expect((await call(mcp, "send_email", { mailbox_id: box.mailboxId, to: ["a@partner.test"], subject: "a\r\nBcc: e@x.test", text: "x" })).error?.details)
      .toEqual({ subject: "must not contain line breaks" })
    // A NUL (which no stored text may hold) is the tool's refusal too, naming where it is.
    expect((await call(mcp, "get_email", { email_id: "eml_a\u0000b" })).error).toMatchObject({
      code: "VALIDATION_ERROR",
      details: { email_id: "must not contain NUL characters (\\u0000)" }
    })
    expect((await call(mcp, "send_email", { mailbox_id: box.mailboxId, to: ["a\u0000@partner.test"], subject: "x", text: "x" })).error?.details)
      .toEqual({ "to.0": "must not contain NUL characters (\\u0000)" })
    // As is half of a character (a lone surrogate), which stored would have become U+FFFD.
    expect((await call(mcp, "update_labels", { email_ids: [emailId], add_labels: ["\ud800"] })).error?.details)
      .toEqual({ "add_labels.0": "must be valid Unicode: it holds half of a character (a lone surrogate such as \\ud800)" })
    // A label with an empty level (a folder no mail program can open over IMAP) is not added.
    expect((await call(mcp, "update_labels", { email_ids: [emailId], add_labels: ["a//b"] })).error).toMatchObject({
      code: "VALIDATION_ERROR",
      details: { "add_labels.0": "must not start or end with / or hold //: / separates a label's levels (folders over IMAP), and none may be empty" }
    })
    expect((await call(mcp, "set_mailbox_name", { mailbox_id: box.mailboxId, display_name: "a\nb" })).error).toMatchObject({
      code: "VALIDATION_ERROR",
      details: { display_name: "must not hold line breaks, control characters or direction overrides" }
    })
    // A name every object inherits is no argument either.
    expect((await call(mcp, "list_emails", { mailbox_id: box.mailboxId, constructor: 1 })).error?.details).toEqual({ constructor: "is not an argument of list_emails" })
    const stranger = await withApiKey(suite.url)
    const other = await newBox(suite.url, { user: stranger })
    expect((await call(mcp, "get_email", { email_id: "eml_missing" })).error).toMatchObject({ code: "NOT_FOUND", details: { email_id: "eml_missing" } })
    expect((await call(mcp, "list_emails", { mailbox_id: other.mailboxId })).error).toMatchObject({ code: "NOT_FOUND" })
    expect((await call(mcp, "set_mailbox_name", { mailbox_id: other.mailboxId, display_name: "Mine" })).error).toMatchObject({ code: "NOT_FOUND" })
    expect((await call(mcp, "update_labels", { email_ids: [emailId], remove_labels: ["inbound"] })).error).toMatchObject({ code: "LABEL_READ_ONLY" })
    await expect(mcp.callTool({ name: "format_disk", arguments: {} })).rejects.toThrow(/Unknown tool/)
  })

  it("answers a tools/call whose params are malformed with JSON-RPC's Invalid params, saying what is wrong", async () => {
    const raw = async (params: unknown) => {
      const response = await fetch(`${suite.url}/mcp`, {
        method: "POST",
        headers: { authorization: `Bearer ${box.user.apiKey}`, "content-type": "application/json", accept: "application/json, text/event-stream" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 7, method: "tools/call", params })
      })
      return { status: response.status, body: (await response.json()) as { readonly error: { readonly code: number; readonly message: string } } }
    }
    expect(await raw({ name: "get_email", arguments: "eml_x" })).toEqual({
      status: 200,
      body: { jsonrpc: "2.0", id: 7, error: { code: -32602, message: "Invalid params: params.arguments must be an object of the tool's arguments" } }
    })
    expect((await raw({ name: "get_email", arguments: ["eml_x"] })).body.error.code).toBe(-32602)
    expect((await raw({ arguments: {} })).body.error).toEqual({ code: -32602, message: "Invalid params: params.name must be the tool's name, a string" })
    expect((await raw("get_email")).body.error).toEqual({ code: -32602, message: "Invalid params: params must be an object with the tool's name and arguments" })
  })

  it("refuses a JSON-RPC batch (MCP has none), which would carry any number of tool calls past the per-request limit, JSON that is no JSON-RPC message (-32600), and GET and DELETE (405)", async () => {
    const batch = Array.from({ length: 3 }, (_, id) => ({ jsonrpc: "2.0", id, method: "tools/call", params: { name: "list_mailboxes", arguments: {} } }))
    const response = await fetch(`${suite.url}/mcp`, {
      method: "POST",
      headers: { "x-api-key": box.user.apiKey, "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify(batch)
    })
    expect(response.status).toBe(400)
    expect(response.headers.get("x-ratelimit-limit")).not.toBeNull()
    expect(await response.json()).toEqual({
      jsonrpc: "2.0",
      id: null,
      error: { code: -32600, message: "Invalid Request: JSON-RPC batches are not taken (MCP has none since protocol 2025-06-18); send one message per request" }
    })
    // JSON that is no JSON-RPC message is an invalid request (-32600), not a parse error (-32700).
    for (const body of [{ foo: 1 }, 42, { jsonrpc: "1.0", id: 1, method: "tools/list" }, { jsonrpc: "2.0", id: 1 }]) {
      const invalid = await fetch(`${suite.url}/mcp`, {
        method: "POST",
        headers: { "x-api-key": box.user.apiKey, "content-type": "application/json", accept: "application/json, text/event-stream" },
        body: JSON.stringify(body)
      })
      expect(invalid.status, JSON.stringify(body)).toBe(400)
      expect(invalid.headers.get("x-ratelimit-limit")).not.toBeNull()
      expect(await invalid.json()).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32600, message: expect.stringMatching(/^Invalid Request: the body must be one JSON-RPC 2\.0 message/) } })
    }
    const notJson = await fetch(`${suite.url}/mcp`, {
      method: "POST",
      headers: { "x-api-key": box.user.apiKey, "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: "{\"jsonrpc\": "
    })
    expect(notJson.status).toBe(400)
    expect(await notJson.json()).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32700 } })
    // Stateless: no stream to open with GET, no session to end with DELETE.
    for (const method of ["GET", "DELETE"]) {
      const other = await fetch(`${suite.url}/mcp`, { method, headers: { "x-api-key": box.user.apiKey, accept: "text/event-stream" } })
      expect(other.status, method).toBe(405)
      expect(other.headers.get("allow")).toBe("POST")
      expect(other.headers.get("x-ratelimit-limit")).toBeNull()
      expect(await other.json()).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32000 } })
    }
  })

  it("refuses a wrong or missing key with 401, and holds a free account to 10 MCP requests a minute", async () => {
    await expect(connect({ "x-api-key": "mr_not_a_key" })).rejects.toThrow(/UNAUTHORIZED/)
    const anonymous = await fetch(`${suite.url}/mcp`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" })
    })
    expect(anonymous.status).toBe(401)
    // RFC 6750 §3: no error code for a request that sent no credential; invalid_token for a bad one.
    expect(anonymous.headers.get("www-authenticate")).toBe('Bearer realm="mailroom"')
    expect(await anonymous.json()).toMatchObject({ success: false, error: { code: "UNAUTHORIZED" } })
    const wrong = await fetch(`${suite.url}/mcp`, {
      method: "POST",
      headers: { authorization: "Bearer mr_not_a_key", "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" })
    })
    expect(wrong.status).toBe(401)
    expect(wrong.headers.get("www-authenticate")).toBe('Bearer realm="mailroom", error="invalid_token"')

    const free = await withApiKey(suite.url)
    const list = () =>
      fetch(`${suite.url}/mcp`, {
        method: "POST",
        headers: { "x-api-key": free.apiKey, "content-type": "application/json", accept: "application/json, text/event-stream" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" })
      })
    await awayFromMinuteEdge(20)
    // A notification (half of every client's handshake) asks nothing, and spends nothing.
    const notified = await fetch(`${suite.url}/mcp`, {
      method: "POST",
      headers: { "x-api-key": free.apiKey, "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" })
    })
    expect(notified.status).toBe(202)
    expect(notified.headers.get("x-ratelimit-remaining")).toBeNull()
    for (let i = 1; i <= 10; i++) {
      const answer = await list()
      expect(answer.status, `request ${i}`).toBe(200)
      expect(answer.headers.get("x-ratelimit-limit")).toBe("10")
      expect(answer.headers.get("x-ratelimit-remaining")).toBe(String(10 - i))
      await answer.arrayBuffer()
    }
    const limited = await list()
    expect(limited.status).toBe(429)
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThan(0)
    expect(await limited.json()).toMatchObject({ error: { code: "RATE_LIMIT_EXCEEDED", details: { limit: 10, window: "minute" } } })
    // The API's own limit is another window, which MCP requests do not spend: after 11 of them the key
    // still has its 20 API requests of the minute, less the one below.
    const read = await withKey(suite.url, free).GET("/v1/api/mailboxes")
    expect(read.response.status).toBe(200)
    expect(read.response.headers.get("x-ratelimit-limit")).toBe("20")
    expect(read.response.headers.get("x-ratelimit-remaining")).toBe("19")
  })

  // Last: it spends this address's unauthenticated requests for the minute.
  it("counts a wrong or missing key against the client address's limit, as the API does: 401 with its headers, then 429", async () => {
    const guess = (headers: Record<string, string>) =>
      fetch(`${suite.url}/mcp`, {
        method: "POST",
        headers: { ...headers, "content-type": "application/json", accept: "application/json, text/event-stream" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" })
      })
    await awayFromMinuteEdge(30)
    const first = await guess({ "x-api-key": "mr_guess" })
    expect(first.status).toBe(401)
    expect(first.headers.get("x-ratelimit-limit")).toBe("300")
    const remaining = Number(first.headers.get("x-ratelimit-remaining"))
    // One counter with the API's unauthenticated requests.
    const api = await fetch(`${suite.url}/v1/api-keys`, { headers: { "x-api-key": "mr_guess" } })
    expect([api.status, api.headers.get("x-ratelimit-remaining")]).toEqual([401, String(remaining - 1)])
    let answer = first
    for (let left = remaining - 1; left > 0; left--) {
      answer = await guess(left % 2 === 0 ? { authorization: "Bearer mr_guess" } : {})
      expect(answer.status).toBe(401)
      await answer.arrayBuffer()
    }
    expect(answer.headers.get("x-ratelimit-remaining")).toBe("0")
    const limited = await guess({ "x-api-key": "mr_guess" })
    expect(limited.status).toBe(429)
    expect(limited.headers.get("x-ratelimit-limit")).toBe("300")
    expect(await limited.json()).toMatchObject({ error: { code: "RATE_LIMIT_EXCEEDED", details: { limit: 300, window: "minute" } } })
  })
})
