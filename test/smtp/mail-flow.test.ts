/**
 * The inbound path as senders and agents meet it: real SMTP (nodemailer, or the bare client where
 * every reply matters), then the reading API over HTTP. Runs in both modes.
 */
import { createHash, randomBytes } from "node:crypto"
import nodemailer from "nodemailer"
import MailComposer from "nodemailer/lib/mail-composer"
import pg from "pg"
import { describe, expect, it } from "vitest"
import { type Client, client, isoMillis, withApiKey } from "../support/http.ts"
import { type Server, useSuiteServer } from "../support/server.ts"
import { mode } from "../support/services.ts"
import { connectSmtp, envelope } from "../support/smtp-client.ts"

const DOMAIN = "agents.localhost"
const SENDER = "sender@example.com"

let server: Server
let api: Client
let databaseUrl: string | undefined

useSuiteServer((suite) => {
  server = suite.server
  api = client(suite.url)
  databaseUrl = suite.backend.env.DATABASE_URL
})

type User = Awaited<ReturnType<typeof withApiKey>>
interface Box {
  readonly user: User
  readonly id: string
  readonly address: string
}

let counter = 0
const fresh = (prefix: string) => `${prefix}${Date.now().toString(36)}${counter++}${randomBytes(2).toString("hex")}`

const newBox = async (user?: User): Promise<Box> => {
  const owner = user ?? (await withApiKey(api))
  const created = await api.post("/v1/api/mailboxes", { apiKey: owner.apiKey, body: { local_part: fresh("agent"), domain: DOMAIN } })
  expect(created.status).toBe(201)
  return { user: owner, id: created.body.mailbox.mailbox_id, address: created.body.mailbox.email_address }
}

const transport = () => nodemailer.createTransport({ host: "127.0.0.1", port: server.smtpPort, secure: false, ignoreTLS: true })

/** Build a message with nodemailer's own composer, so the exact bytes sent are known. */
const compose = (mail: ConstructorParameters<typeof MailComposer>[0]) => new MailComposer(mail).compile().build()

const sendRaw = async (to: ReadonlyArray<string>, raw: Buffer) => {
  const mailer = transport()
  try {
    return await mailer.sendMail({ envelope: { from: SENDER, to: [...to] }, raw })
  } finally {
    mailer.close()
  }
}

/** Poll a mailbox's list until it holds `count` emails (politely: the free plan allows 20 requests a minute). */
const waitForEmails = async (box: Box, count: number, timeoutMs = 30_000) => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const reply = await api.get(`/v1/api/mailboxes/${box.id}/emails`, { apiKey: box.user.apiKey })
    if (reply.status === 200 && reply.body.meta.total >= count) return reply.body
    if (reply.status !== 200 && reply.status !== 429) throw new Error(`list answered ${reply.status}: ${reply.text}`)
    if (Date.now() > deadline) throw new Error(`${box.address} did not reach ${count} emails in time`)
    await new Promise((resolve) => setTimeout(resolve, reply.status === 429 ? 3_000 : 600))
  }
}

const notFound = { success: false, error: { code: "NOT_FOUND", message: expect.any(String), details: expect.any(Object) } }

describe("delivering and reading", () => {
  it("delivers a message with a UTF-8 subject and an attachment; it reads back whole, raw byte-identical", async () => {
    const box = await newBox()
    const attachment = randomBytes(50 * 1024)
    const subject = "Grüße ✓ 日本"
    const raw = await compose({
      from: `Ada Sender <${SENDER}>`,
      to: box.address,
      subject,
      text: "Hello agent, the report is attached.",
      html: "<p>Hello agent, the report is <b>attached</b>.</p>",
      attachments: [{ filename: "report.bin", content: attachment, contentType: "application/octet-stream" }]
    })
    const sent = await sendRaw([box.address], raw)
    expect(sent.response).toMatch(/^250 2\.0\.0 Ok: queued as eml_/)

    const list = await waitForEmails(box, 1)
    expect(list.meta).toEqual({ total: 1, limit: 20, offset: 0, hasMore: false })
    const summary = list.data[0]
    expect(summary).toEqual({
      email_id: expect.stringMatching(/^eml_/),
      message_id: expect.stringMatching(/^<.+>$/),
      subject,
      from: SENDER,
      to: [box.address],
      date: expect.stringMatching(isoMillis),
      mailbox_id: box.id,
      domain: DOMAIN,
      has_attachments: true,
      thread_id: expect.stringMatching(/^thr_/),
      received_at: expect.stringMatching(isoMillis),
      size: raw.length,
      snippet: "Hello agent, the report is attached."
    })

    const email = await api.get(`/v1/api/emails/${summary.email_id}`, { apiKey: box.user.apiKey })
    expect(email.status).toBe(200)
    expect(email.body.data).toMatchObject({
      ...summary,
      text: "Hello agent, the report is attached.",
      html: "<p>Hello agent, the report is <b>attached</b>.</p>",
      headers: expect.objectContaining({ subject, from: `Ada Sender <${SENDER}>`, to: box.address })
    })
    expect(email.body.data.attachments).toEqual([{
      attachment_id: expect.stringMatching(/^att_/),
      filename: "report.bin",
      content_type: "application/octet-stream",
      size: attachment.length,
      checksum: createHash("sha256").update(attachment).digest("hex"),
      content_id: null
    }])

    const rawReply = await fetch(`${server.url}/v1/api/emails/${summary.email_id}/raw`, { headers: { "x-api-key": box.user.apiKey } })
    expect(rawReply.status).toBe(200)
    expect(rawReply.headers.get("content-type")).toBe("message/rfc822")
    expect(Buffer.from(await rawReply.arrayBuffer()).equals(raw)).toBe(true)

    const attachmentId = email.body.data.attachments[0].attachment_id
    const bytes = await fetch(`${server.url}/v1/api/emails/${summary.email_id}/attachments/${attachmentId}`, {
      headers: { "x-api-key": box.user.apiKey }
    })
    expect(bytes.status).toBe(200)
    expect(bytes.headers.get("content-type")).toBe("application/octet-stream")
    expect(bytes.headers.get("content-disposition")).toContain('filename="report.bin"')
    expect(Buffer.from(await bytes.arrayBuffer()).equals(attachment)).toBe(true)

    const usage = await api.get("/v1/billing/usage", { apiKey: box.user.apiKey })
    expect(usage.body.data).toMatchObject({ emailsUsed: 1, storageUsed: raw.length })
  })

  it("answers each recipient on its own and delivers only to the known ones, each copy to its owner", async () => {
    const [first, second] = [await newBox(), await newBox()]
    const session = await connectSmtp(server.smtpPort)
    const unknown = `nobody-${fresh("x")}@${DOMAIN}`
    const { replies } = await envelope(session, SENDER, [first.address.toUpperCase(), unknown, second.address])
    expect(replies.map((r) => r.code)).toEqual([250, 550, 250])
    expect(replies[1]!.text).toMatch(/^5\.1\.1 /)
    const data = await session.data(`From: <${SENDER}>\r\nSubject: Two copies\r\n\r\nFor both of you.\r\n`)
    await session.close()
    expect(data.code).toBe(250)

    for (const box of [first, second]) {
      const list = await waitForEmails(box, 1)
      expect(list.data).toHaveLength(1)
      expect(list.data[0].subject).toBe("Two copies")
      // The other owner cannot read this copy.
      const other = box === first ? second : first
      const stolen = await api.get(`/v1/api/emails/${list.data[0].email_id}`, { apiKey: other.user.apiKey })
      expect(stolen.status).toBe(404)
      expect(stolen.body).toEqual(notFound)
    }
  })

  it("refuses the whole transaction's data when no recipient was accepted", async () => {
    const session = await connectSmtp(server.smtpPort)
    const { replies } = await envelope(session, SENDER, [`ghost-${fresh("x")}@${DOMAIN}`, `ghost@elsewhere.example`])
    expect(replies.map((r) => r.code)).toEqual([550, 550])
    const data = await session.data("Subject: nobody\r\n\r\nbody\r\n")
    await session.close()
    expect(data.code).toBeGreaterThanOrEqual(500)
  })
})

describe("addresses that change", () => {
  it("rename keeps mailbox_id and mail, re-routes new mail, and refuses the old address", async () => {
    const box = await newBox()
    await sendRaw([box.address], await compose({ from: SENDER, to: box.address, subject: "Before rename", text: "one" }))
    await waitForEmails(box, 1)

    const newLocal = fresh("renamed")
    const renamed = await api.patch(`/v1/api/mailboxes/${box.id}`, { apiKey: box.user.apiKey, body: { local_part: newLocal, domain: DOMAIN } })
    expect(renamed.status).toBe(200)
    expect(renamed.body.data.mailbox.mailbox_id).toBe(box.id)
    const newAddress = `${newLocal}@${DOMAIN}`

    const session = await connectSmtp(server.smtpPort)
    const { replies } = await envelope(session, SENDER, [box.address, newAddress])
    expect(replies.map((r) => r.code)).toEqual([550, 250])
    expect(replies[0]!.text).toMatch(/^5\.1\.1 /)
    expect((await session.data(`Subject: After rename\r\n\r\ntwo\r\n`)).code).toBe(250)
    await session.close()

    const list = await waitForEmails(box, 2)
    expect(list.data.map((e: { subject: string }) => e.subject)).toEqual(["After rename", "Before rename"])
  })

  it("delete refuses a wrong confirmation (mail still flows), then refuses mail and hides every email", async () => {
    const box = await newBox()
    await sendRaw([box.address], await compose({
      from: SENDER,
      to: box.address,
      subject: "Doomed",
      text: "soon gone",
      attachments: [{ filename: "a.txt", content: "attached" }]
    }))
    const [email] = (await waitForEmails(box, 1)).data
    const full = await api.get(`/v1/api/emails/${email.email_id}`, { apiKey: box.user.apiKey })
    const attachmentId = full.body.data.attachments[0].attachment_id

    const wrong = await api.delete(`/v1/api/mailboxes/${box.id}`, { apiKey: box.user.apiKey, body: { confirm_email_address: "someone@else.example" } })
    expect(wrong.status).toBe(400)
    expect(wrong.body.error.code).toBe("VALIDATION_ERROR")
    expect(wrong.body.error.details).toEqual({ confirm_email_address: expect.any(String) })
    const stillOpen = await connectSmtp(server.smtpPort)
    expect((await envelope(stillOpen, SENDER, [box.address])).replies[0]!.code).toBe(250)
    await stillOpen.close()

    const deleted = await api.delete(`/v1/api/mailboxes/${box.id}`, { apiKey: box.user.apiKey, body: { confirm_email_address: box.address } })
    expect(deleted.status).toBe(200)

    const session = await connectSmtp(server.smtpPort)
    const { replies } = await envelope(session, SENDER, [box.address])
    await session.close()
    expect(replies[0]!.code).toBe(550)
    expect(replies[0]!.text).toMatch(/^5\.1\.1 /)

    for (const route of [
      `/v1/api/mailboxes/${box.id}/emails`,
      `/v1/api/emails/${email.email_id}`,
      `/v1/api/emails/${email.email_id}/raw`,
      `/v1/api/emails/${email.email_id}/attachments/${attachmentId}`,
      `/v1/api/threads/${email.thread_id}`
    ]) {
      const reply = await api.get(route, { apiKey: box.user.apiKey })
      expect(reply.status, route).toBe(404)
      expect(reply.body, route).toEqual(notFound)
    }
  })
})

describe("reading", () => {
  it("pages and sorts a mailbox's list, newest first by default; bad parameters are 400 VALIDATION_ERROR", async () => {
    const box = await newBox()
    const mailer = transport()
    for (const subject of ["Charlie", "Alpha", "Bravo"]) {
      await mailer.sendMail({ from: SENDER, to: box.address, subject, text: subject })
    }
    mailer.close()
    await waitForEmails(box, 3)

    const page = await api.get(`/v1/api/mailboxes/${box.id}/emails?limit=2`, { apiKey: box.user.apiKey })
    expect(page.body.meta).toEqual({ total: 3, limit: 2, offset: 0, hasMore: true })
    expect(page.body.data.map((e: { subject: string }) => e.subject)).toEqual(["Bravo", "Alpha"])
    const rest = await api.get(`/v1/api/mailboxes/${box.id}/emails?limit=2&offset=2`, { apiKey: box.user.apiKey })
    expect(rest.body.meta).toEqual({ total: 3, limit: 2, offset: 2, hasMore: false })
    expect(rest.body.data.map((e: { subject: string }) => e.subject)).toEqual(["Charlie"])
    const sorted = await api.get(`/v1/api/mailboxes/${box.id}/emails?sort=subject:asc`, { apiKey: box.user.apiKey })
    expect(sorted.body.data.map((e: { subject: string }) => e.subject)).toEqual(["Alpha", "Bravo", "Charlie"])

    const badSort = await api.get(`/v1/api/mailboxes/${box.id}/emails?sort=size:up`, { apiKey: box.user.apiKey })
    expect(badSort.status).toBe(400)
    expect(badSort.body.error).toMatchObject({ code: "VALIDATION_ERROR", details: { sort: expect.any(String) } })
    const badLimit = await api.get(`/v1/api/mailboxes/${box.id}/emails?limit=0`, { apiKey: box.user.apiKey })
    expect(badLimit.status).toBe(400)
    expect(badLimit.body.error).toMatchObject({ code: "VALIDATION_ERROR", details: { limit: expect.any(String) } })
  })

  it("keeps mail to its owner: others get 404 NOT_FOUND, no key gets 401", async () => {
    const box = await newBox()
    await sendRaw([box.address], await compose({ from: SENDER, to: box.address, subject: "Private", text: "mine", attachments: [{ filename: "x.txt", content: "x" }] }))
    const [email] = (await waitForEmails(box, 1)).data
    const full = await api.get(`/v1/api/emails/${email.email_id}`, { apiKey: box.user.apiKey })
    const attachmentId = full.body.data.attachments[0].attachment_id
    const stranger = await withApiKey(api)
    for (const route of [
      `/v1/api/mailboxes/${box.id}/emails`,
      `/v1/api/emails/${email.email_id}`,
      `/v1/api/emails/${email.email_id}/raw`,
      `/v1/api/emails/${email.email_id}/attachments/${attachmentId}`,
      `/v1/api/threads/${email.thread_id}`,
      `/v1/api/emails/eml_doesnotexist`
    ]) {
      const reply = await api.get(route, { apiKey: stranger.apiKey })
      expect(reply.status, route).toBe(404)
      expect(reply.body, route).toEqual(notFound)
    }
    const anonymous = await api.get(`/v1/api/emails/${email.email_id}`)
    expect(anonymous.status).toBe(401)
    expect(anonymous.body.error.code).toBe("UNAUTHORIZED")
  })

  it("threads replies by References / In-Reply-To and by subject; unrelated mail is its own thread", async () => {
    const box = await newBox()
    const mailer = transport()
    const original = await mailer.sendMail({ from: SENDER, to: box.address, subject: "Quarterly plan", text: "first", messageId: `<plan-${fresh("m")}@example.com>` })
    await waitForEmails(box, 1)
    await mailer.sendMail({ from: SENDER, to: box.address, subject: "Totally different words", text: "reply", inReplyTo: original.messageId, references: [original.messageId] })
    await mailer.sendMail({ from: SENDER, to: box.address, subject: "RE: Fwd: quarterly   PLAN", text: "by subject" })
    await mailer.sendMail({ from: SENDER, to: box.address, subject: "Lunch?", text: "unrelated" })
    mailer.close()
    const list = await waitForEmails(box, 4)
    const threadOf = (subject: string) => list.data.find((e: { subject: string }) => e.subject === subject).thread_id
    const plan = threadOf("Quarterly plan")
    expect(threadOf("Totally different words")).toBe(plan)
    expect(threadOf("RE: Fwd: quarterly   PLAN")).toBe(plan)
    expect(threadOf("Lunch?")).not.toBe(plan)

    const thread = await api.get(`/v1/api/threads/${plan}`, { apiKey: box.user.apiKey })
    expect(thread.status).toBe(200)
    expect(thread.body.data).toMatchObject({ thread_id: plan, mailbox_id: box.id, subject: "Quarterly plan", message_count: 3 })
    expect(thread.body.data.emails.map((e: { subject: string }) => e.subject)).toEqual([
      "Quarterly plan",
      "Totally different words",
      "RE: Fwd: quarterly   PLAN"
    ])
  })
})

describe("limits", () => {
  it("announces SIZE 52428800, 8BITMIME, SMTPUTF8 and PIPELINING, and no STARTTLS without a certificate", async () => {
    const session = await connectSmtp(server.smtpPort)
    const ehlo = await session.command("EHLO client.test")
    await session.close()
    const features = ehlo.text.split("\n").slice(1)
    expect(features).toEqual(expect.arrayContaining(["PIPELINING", "8BITMIME", "SMTPUTF8", "SIZE 52428800"]))
    expect(features).not.toContain("STARTTLS")
  })

  it("refuses mail over the free plan's 10 MB: declared at RCPT, and sent anyway at the end of DATA (552 5.3.4)", async () => {
    const box = await newBox()
    const declared = await connectSmtp(server.smtpPort)
    await declared.command("EHLO client.test")
    expect((await declared.command(`MAIL FROM:<${SENDER}> SIZE=${10 * 1024 * 1024 + 1}`)).code).toBe(250)
    const rcpt = await declared.command(`RCPT TO:<${box.address}>`)
    await declared.close()
    expect(rcpt.code).toBe(552)
    expect(rcpt.text).toMatch(/^5\.3\.4 /)

    const session = await connectSmtp(server.smtpPort)
    expect((await envelope(session, SENDER, [box.address])).replies[0]!.code).toBe(250)
    const line = `${"x".repeat(998)}\r\n`
    const big = `Subject: too big\r\n\r\n${line.repeat(Math.ceil((10 * 1024 * 1024 + 1024) / line.length))}`
    const data = await session.data(big)
    await session.close()
    expect(data.code).toBe(552)
    expect(data.text).toMatch(/^5\.3\.4 /)

    const list = await api.get(`/v1/api/mailboxes/${box.id}/emails`, { apiKey: box.user.apiKey })
    expect(list.body.meta.total).toBe(0)
  })

  it("takes a free account's 100 emails of the day, then refuses the 101st at RCPT with 452 4.2.2", async () => {
    const box = await newBox()
    const session = await connectSmtp(server.smtpPort)
    await session.command("EHLO client.test")
    for (let i = 0; i < 100; i++) {
      expect((await session.command(`MAIL FROM:<${SENDER}>`)).code).toBe(250)
      expect((await session.command(`RCPT TO:<${box.address}>`)).code).toBe(250)
      expect((await session.data(`Subject: number ${i}\r\n\r\nbody ${i}\r\n`)).code).toBe(250)
    }
    expect((await session.command(`MAIL FROM:<${SENDER}>`)).code).toBe(250)
    const refused = await session.command(`RCPT TO:<${box.address}>`)
    await session.close()
    expect(refused.code).toBe(452)
    expect(refused.text).toMatch(/^4\.2\.2 /)

    const list = await waitForEmails(box, 100, 60_000)
    expect(list.meta.total).toBe(100)
    const usage = await api.get("/v1/billing/usage", { apiKey: box.user.apiKey })
    expect(usage.body.data).toMatchObject({ emailsUsed: 100, emailsLimit: 100 })
    expect(usage.body.data.storageUsed).toBeGreaterThan(0)
  })

  // The monthly limit only shows when earlier days of the period used it up; that history is written
  // straight into PostgreSQL (an embedded database belongs to its server process alone).
  it.skipIf(mode !== "postgres")("refuses at RCPT with 552 5.2.2 once the period's 100 emails are used, on a fresh day", async () => {
    const box = await newBox()
    const db = new pg.Client({ connectionString: databaseUrl })
    await db.connect()
    try {
      const updated = await db.query(
        `INSERT INTO usage_counters (user_id, period_start, emails)
         SELECT user_id, current_period_start, 100 FROM subscriptions WHERE user_id = $1
         ON CONFLICT (user_id, period_start) DO UPDATE SET emails = 100`,
        [box.user.userId]
      )
      expect(updated.rowCount).toBe(1)
    } finally {
      await db.end()
    }
    const session = await connectSmtp(server.smtpPort)
    const { replies } = await envelope(session, SENDER, [box.address])
    await session.close()
    expect(replies[0]!.code).toBe(552)
    expect(replies[0]!.text).toMatch(/^5\.2\.2 /)
    const usage = await api.get("/v1/billing/usage", { apiKey: box.user.apiKey })
    expect(usage.body.data).toMatchObject({ emailsUsed: 100, emailsLimit: 100 })
  })
})
