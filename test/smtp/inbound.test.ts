/**
 * Inbound mail as users meet it (SPEC "Mailboxes", "Errors", "Limits"; DESIGN.md §4 "reading mail",
 * "email record fields", "SMTP refusals", "deleted mailbox"): senders talk SMTP to the server,
 * agents read what arrived over the API. One server per suite; every test makes its own users
 * (the free plan allows 20 API requests a minute per user), so polling stays cheap.
 */
import iconv from "iconv-lite"
import { createHash, randomBytes } from "node:crypto"
import nodemailer from "nodemailer"
import type Mail from "nodemailer/lib/mailer"
import MailComposer from "nodemailer/lib/mail-composer"
import pg from "pg"
import { describe, expect, it } from "vitest"
import { isoMillis, withApiKey } from "../support/accounts.ts"
import { upgrade } from "../support/billing.ts"
import { useCertificate } from "../support/certificate.ts"
import { type SuiteServer, useSuiteServer } from "../support/server.ts"
import { mode } from "../support/services.ts"
import { type Box, DOMAIN, fresh as freshName, newBox as newUserBox, type User } from "../support/mailboxes.ts"
import { connectSmtp, type SmtpReply } from "../support/smtp-client.ts"
import { anonymous, type MailroomFetchClient, withKey } from "../support/typed-client.ts"
import { sleep } from "../support/wait.ts"

const SENDER = "sender@example.com"
const MB = 1024 * 1024
/** The free plan's largest message (SPEC "Limits": 10 MB, binary units as DESIGN.md §4 says). */
const FREE_MAX_BYTES = 10 * MB
/** What EHLO announces: the largest plan's limit (enterprise, 50 MB). */
const ANNOUNCED_SIZE = 52_428_800

// ---------------------------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------------------------

let suite: SuiteServer


const fresh = (prefix = "inbound") => freshName(prefix)

const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex")

/** A request with a user's key. A 429 (never expected, but the free plan allows 20 a minute) waits for Retry-After. */
const patiently = async <R extends { readonly response: Response }>(request: () => Promise<R>): Promise<R> => {
  for (let attempt = 0;; attempt++) {
    const reply = await request()
    if (reply.response.status !== 429 || attempt >= 2) return reply
    await sleep(Math.min(65, Number(reply.response.headers.get("retry-after") ?? 5)) * 1000)
  }
}

interface MailIds {
  readonly email: string
  readonly attachment: string
  readonly thread: string
  readonly mailbox: string
}

type Read = () => Promise<{ readonly response: Response; readonly error?: unknown }>

/** The routes that read mail, each as its path and a request for it with `mailroom`; raw and attachment read as bytes. */
const mailReads = (mailroom: MailroomFetchClient, ids: MailIds): ReadonlyArray<readonly [string, Read]> => [
  [`/v1/api/emails/${ids.email}`, () => mailroom.GET("/v1/api/emails/{emailId}", { params: { path: { emailId: ids.email } } })],
  [`/v1/api/emails/${ids.email}/raw`, () => mailroom.GET("/v1/api/emails/{emailId}/raw", { params: { path: { emailId: ids.email } }, parseAs: "arrayBuffer" })],
  [
    `/v1/api/emails/${ids.email}/attachments/${ids.attachment}`,
    () =>
      mailroom.GET("/v1/api/emails/{emailId}/attachments/{attachmentId}", {
        params: { path: { emailId: ids.email, attachmentId: ids.attachment } },
        parseAs: "arrayBuffer"
      })
  ],
  [`/v1/api/threads/${ids.thread}`, () => mailroom.GET("/v1/api/threads/{threadId}", { params: { path: { threadId: ids.thread } } })],
  [`/v1/api/mailboxes/${ids.mailbox}/emails`, () => mailroom.GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId: ids.mailbox } } })]
]

const keyed = (user: User) => withKey(suite.url, user)
const emailOf = (user: User, emailId: string) => patiently(() => keyed(user).GET("/v1/api/emails/{emailId}", { params: { path: { emailId } } }))
const threadOf = (user: User, threadId: string) => patiently(() => keyed(user).GET("/v1/api/threads/{threadId}", { params: { path: { threadId } } }))
/** The raw message as sent, as bytes. */
const rawOf = (user: User, emailId: string) =>
  patiently(() => keyed(user).GET("/v1/api/emails/{emailId}/raw", { params: { path: { emailId } }, parseAs: "arrayBuffer" }))
/** The mailbox's list with the query as a URL would carry it ("?limit=2&offset=2"). */
const listOf = (box: Box, query = "") =>
  patiently(() =>
    keyed(box.user).GET("/v1/api/mailboxes/{mailboxId}/emails", {
      params: { path: { mailboxId: box.mailboxId }, query: Object.fromEntries(new URLSearchParams(query)) }
    })
  )

/** A mailbox on the shared domain for `user` (a new user with an API key when none is given). */
const newBox = (user?: User, local = fresh()) => newUserBox(suite.url, { ...(user ? { user } : {}), localPart: local })

/**
 * The exact bytes nodemailer sends for `mail`. MailComposer leaves a body's own line breaks bare
 * (LF); SMTP lines end in CRLF, and nodemailer's transport converts them on the wire.
 */
const compose = async (mail: Mail.Options): Promise<Buffer> => {
  const built = await new MailComposer(mail).compile().build()
  return Buffer.from(built.toString("latin1").replace(/\r?\n/g, "\r\n"), "latin1")
}

/** A message with just what threading and sorting need. */
const simple = (to: string, subject: string, extra: Mail.Options = {}) =>
  compose({ from: `Sender <${SENDER}>`, to, subject, text: `Body of "${subject}".`, messageId: `<${fresh("msg")}@example.com>`, ...extra })

/** Send `raw` unchanged with nodemailer (one connection per message); resolves with nodemailer's info. */
const sendRaw = async (to: string | ReadonlyArray<string>, raw: Buffer, from = SENDER, options: Record<string, unknown> = {}) => {
  const transport = nodemailer.createTransport({ host: "127.0.0.1", port: suite.server.smtpPort, secure: false, ignoreTLS: true, ...options })
  try {
    return await transport.sendMail({ envelope: { from, to: typeof to === "string" ? [to] : [...to] }, raw })
  } finally {
    transport.close()
  }
}

/** One transaction with the bare client on a fresh connection: every RCPT's reply, and DATA's when one was accepted. */
const transaction = async (recipients: ReadonlyArray<string>, message?: string | Uint8Array, mailFrom = `<${SENDER}>`) => {
  const session = await connectSmtp(suite.server.smtpPort)
  try {
    const ehlo = await session.command("EHLO client.test")
    expect(ehlo.code).toBe(250)
    const mail = await session.command(`MAIL FROM:${mailFrom}`)
    expect(mail.code, mail.text).toBe(250)
    const replies: Array<SmtpReply> = []
    for (const recipient of recipients) replies.push(await session.command(`RCPT TO:<${recipient}>`))
    const data = message !== undefined && replies.some((reply) => reply.code === 250) ? await session.data(message) : undefined
    return { replies, data }
  } finally {
    await session.close()
  }
}

/** The email ids a 250 to DATA names ("2.0.0 Ok: queued as eml_a,eml_b"). */
const queuedIds = (reply: SmtpReply | string) => /queued as (\S+)/.exec(typeof reply === "string" ? reply : reply.text)?.[1]?.split(",") ?? []

/**
 * Poll a mailbox's list (newest first, up to 100) until it holds at least `count` emails. The pause
 * starts at 300 ms and grows by half up to 2 s, so a slow worker costs few of the user's requests.
 */
const waitForEmails = async (box: Box, count: number, timeoutMs = 60_000) => {
  const deadline = Date.now() + timeoutMs
  let pause = 300
  for (;;) {
    const reply = await listOf(box, "?limit=100")
    expect(reply.response.status, JSON.stringify(reply.error)).toBe(200)
    const page = reply.data!
    // Every page agrees with its own meta, even while emails are arriving.
    expect(page.data.length, `a page of ${page.data.length} emails with meta ${JSON.stringify(page.meta)}`).toBe(
      Math.min(page.meta.total, 100)
    )
    if (page.meta.total >= count) return page
    if (Date.now() > deadline) throw new Error(`mailbox ${box.mailboxId}: ${page.meta.total} of ${count} emails within ${timeoutMs} ms`)
    await sleep(pause)
    pause = Math.min(2_000, pause * 1.5)
  }
}

const usage = async (user: User) => {
  const reply = await patiently(() => keyed(user).GET("/v1/billing/usage"))
  expect(reply.response.status, JSON.stringify(reply.error)).toBe(200)
  return reply.data!.data
}

const notFound = { success: false, error: expect.objectContaining({ code: "NOT_FOUND", message: expect.any(String) }) }

/** The list/thread shape of an email: the full record without bodies, headers and attachments. */
const summaryOf = <
  E extends { text: unknown; html: unknown; headers: unknown; attachments: unknown; extracted: unknown; forwarded?: unknown; delivered_to?: unknown }
>(email: E) => {
  const {
    text: _text,
    html: _html,
    headers: _headers,
    attachments: _attachments,
    extracted: _extracted,
    forwarded: _forwarded,
    delivered_to: _deliveredTo,
    ...summary
  } = email
  return summary
}

const expectRefused = (reply: SmtpReply | undefined, code: number, enhanced: string) => {
  expect(reply, "no reply").toBeDefined()
  expect({ code: reply!.code, enhanced: reply!.text.split(" ")[0] }, reply!.text).toEqual({ code, enhanced })
}

// ---------------------------------------------------------------------------------------------
// Plain SMTP (no certificate configured)
// ---------------------------------------------------------------------------------------------

/** The operator's mailbox for the shared domain's postmaster@ and abuse@ (made by the test that needs it). */
const OPERATOR_DESK = `operator-desk@${DOMAIN}`

describe("inbound SMTP and reading mail", () => {
  useSuiteServer((s) => {
    suite = s
  }, { POSTMASTER_MAILBOX: OPERATOR_DESK.toUpperCase() })

  describe("a message with an attachment and a UTF-8 subject", () => {
    it("is readable over the API: decoded fields, attachment metadata, byte-identical raw, attachment bytes, list and thread", async () => {
      const box = await newBox()
      const attachment = randomBytes(50 * 1024)
      const subject = "Grüße ✓ 日本"
      const text = "Hello agent,\nthe numbers are attached.\n— Sender"
      const html = "<p>Hello agent,</p><p>the numbers are <b>attached</b>.</p>"
      const messageId = `<${fresh("first")}@example.com>`
      const raw = await compose({
        from: `Sënder Ünicode <${SENDER}>`,
        to: box.address,
        // A name with a comma (sent encoded), a group, an internationalized domain (sent as punycode).
        cc: ["\"Höpper, Grace\" <grace@example.org>", "Team: ada@bücher.example;"],
        replyTo: "Desk <desk@example.com>",
        subject,
        text,
        html,
        messageId,
        date: new Date("2026-01-02T03:04:05.000Z"),
        // A name with directories in it: kept as the sender wrote it, never handed to a client to save as.
        attachments: [{ filename: "../../noise.png", content: attachment, contentType: "image/png" }]
      })
      const sent = await sendRaw(box.address, raw)
      expect(sent.accepted).toEqual([box.address])
      expect(sent.response).toMatch(/^250 2\.0\.0 /)
      const [emailId] = queuedIds(sent.response)

      const listed = await waitForEmails(box, 1)
      expect(listed.meta).toEqual({ total: 1, limit: 100, offset: 0, hasMore: false })
      expect(listed.data[0]!.email_id).toBe(emailId)

      const reply = await emailOf(box.user, emailId!)
      expect(reply.response.status, JSON.stringify(reply.error)).toBe(200)
      expect(reply.data?.success).toBe(true)
      const email = reply.data!.data
      expect(email).toEqual({
        email_id: emailId,
        direction: "inbound",
        message_id: messageId,
        subject,
        from: SENDER,
        from_name: "Sënder Ünicode",
        to: [box.address],
        cc: ["grace@example.org", "ada@bücher.example"],
        reply_to: ["desk@example.com"],
        date: "2026-01-02T03:04:05.000Z",
        mailbox_id: box.mailboxId,
        domain: DOMAIN,
        has_attachments: true,
        thread_id: expect.stringMatching(/^thr_/),
        // Nothing vouches for example.com's mail from 127.0.0.1 (no DKIM; its SPF cannot allow us).
        labels: ["inbound", "unread", "unauthenticated"],
        authentication: expect.objectContaining({
          spf: expect.objectContaining({ domain: "example.com", aligned: true }),
          dkim: [],
          dmarc: expect.objectContaining({ domain: "example.com" })
        }),
        authentication_results: expect.stringMatching(/^mx\.agents\.localhost; spf=\w+ smtp\.mailfrom=example\.com; dkim=none; dmarc=/),
        // No RSPAMD_URL: nothing scored it, and nothing pretends to have.
        spam: null,
        // Read from the text part when the message was stored (test/domain/extraction.test.ts has the rules).
        extracted: { reply_text: text, codes: [], links: [] },
        received_at: expect.stringMatching(isoMillis),
        size: raw.byteLength,
        snippet: text,
        text,
        html,
        headers: expect.objectContaining({ subject, "message-id": messageId, to: box.address, "mime-version": "1.0" }),
        attachments: [{
          attachment_id: expect.any(String),
          filename: "../../noise.png",
          content_type: "image/png",
          size: attachment.byteLength,
          checksum: sha256(attachment),
          content_id: null
        }],
        // The mailbox forwards nowhere (test/outbound/forwarding.test.ts).
        forwarded: [],
        delivered_to: box.address
      })
      expect(email.headers.from).toContain(SENDER)
      expect(Date.now() - Date.parse(email.received_at)).toBeLessThan(5 * 60_000)

      const rawReply = await rawOf(box.user, emailId!)
      expect(rawReply.response.status).toBe(200)
      expect(rawReply.response.headers.get("content-type")).toMatch(/^message\/rfc822/)
      expect(Buffer.from(rawReply.data!).equals(raw), "raw differs from what was sent").toBe(true)

      const file = await patiently(() =>
        keyed(box.user).GET("/v1/api/emails/{emailId}/attachments/{attachmentId}", {
          params: { path: { emailId: emailId!, attachmentId: email.attachments[0]!.attachment_id } },
          parseAs: "arrayBuffer"
        })
      )
      expect(file.response.status).toBe(200)
      expect(file.response.headers.get("content-type")).toBe("image/png")
      expect(file.response.headers.get("content-disposition")).toBe(`attachment; filename="noise.png"; filename*=UTF-8''noise.png`)
      expect(Buffer.from(file.data!).equals(attachment), "attachment bytes differ").toBe(true)

      expect(listed.data).toEqual([summaryOf(email)])

      const thread = await threadOf(box.user, email.thread_id)
      expect(thread.response.status).toBe(200)
      expect(thread.data).toEqual({
        success: true,
        data: {
          thread_id: email.thread_id,
          mailbox_id: box.mailboxId,
          subject,
          message_count: 1,
          unread_count: 1,
          has_attachments: true,
          labels: [...email.labels].sort(),
          senders: [email.from],
          first_received_at: email.received_at,
          last_received_at: email.received_at,
          // Each email with its new text (here the whole of it: it quotes nothing).
          emails: [{ ...summaryOf(email), reply_text: email.extracted!.reply_text }]
        }
      })
    })
  })

  describe("mail in the 7-bit charsets HZ (RFC 1843) and ISO-2022-KR (RFC 1557)", () => {
    // Each character's GB2312 or KS C 5601 bytes without their high bits, as the two charsets carry them.
    const sevenBit = (text: string, charset: string) => Buffer.from(iconv.encode(text, charset).map((byte) => byte & 0x7f)).toString("latin1")
    const charsets = [
      { charset: "HZ-GB-2312", shifted: (text: string) => `~{${sevenBit(text, "gb2312")}~}`, subject: "季度报告", name: "王小明", body: ["会议改到明天", "请带上"], file: "报告" },
      {
        charset: "ISO-2022-KR",
        shifted: (text: string) => `\x1b$)C\x0e${sevenBit(text, "euc-kr")}\x0f`,
        subject: "분기 보고서",
        name: "김민준",
        body: ["회의는 내일로", "슬라이드를"],
        file: "보고서"
      }
    ] as const

    it.each(charsets)("$charset: subject and sender's name (encoded words), text, attachment name (RFC 2231) and attachment text read as their characters", async (
      { body, charset, file, name, shifted, subject }
    ) => {
      const box = await newBox()
      const word = (text: string) => `=?${charset}?B?${Buffer.from(shifted(text), "latin1").toString("base64")}?=`
      // Line ends in the body close each line's shift (as both RFCs have it); the designation leads ISO-2022-KR's text.
      // HZ writes a tilde ~~.
      const tilde = charset === "HZ-GB-2312" ? "~~" : "~"
      const lines = `${charset === "ISO-2022-KR" ? "\x1b$)C\r\n" : ""}${shifted(body[0])} at 10, room ${tilde}3.\r\n${shifted(body[1])} slides.\r\n`
      const raw = Buffer.from(
        `From: ${word(name)} <${SENDER}>\r\nTo: ${box.address}\r\nSubject: ${word(subject)} Q3\r\nMessage-ID: <${fresh("seven")}@example.com>\r\n` +
          `Date: Mon, 07 Dec 2026 10:00:00 +0000\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary="b"\r\n\r\n` +
          `--b\r\nContent-Type: text/plain; charset=${charset}\r\nContent-Transfer-Encoding: 7bit\r\n\r\n${lines}` +
          `--b\r\nContent-Type: text/plain; charset=${charset}\r\nContent-Transfer-Encoding: base64\r\n` +
          `Content-Disposition: attachment; filename*=${charset.toLowerCase()}''${encodeURIComponent(shifted(file))}.txt\r\n\r\n` +
          `${Buffer.from(lines, "latin1").toString("base64")}\r\n--b--\r\n`,
        "latin1"
      )
      const sent = await sendRaw(box.address, raw)
      expect(sent.response).toMatch(/^250 2\.0\.0 /)
      const [emailId] = queuedIds(sent.response)
      await waitForEmails(box, 1)

      const reply = await emailOf(box.user, emailId!)
      expect(reply.response.status, JSON.stringify(reply.error)).toBe(200)
      const email = reply.data!.data
      const text = `${body[0]} at 10, room ~3.\n${body[1]} slides.`
      expect({ subject: email.subject, from_name: email.from_name, text: email.text.trim(), filename: email.attachments[0]?.filename }).toEqual({
        subject: `${subject} Q3`,
        from_name: name,
        text,
        filename: `${file}.txt`
      })
      expect(email.headers.subject).toBe(`${subject} Q3`)

      const attachmentText = await patiently(() =>
        keyed(box.user).GET("/v1/api/emails/{emailId}/attachments/{attachmentId}/text", {
          params: { path: { emailId: emailId!, attachmentId: email.attachments[0]!.attachment_id } }
        })
      )
      expect(attachmentText.response.status, JSON.stringify(attachmentText.error)).toBe(200)
      expect(attachmentText.data!.data).toMatchObject({ filename: `${file}.txt`, format: "text" })
      expect(attachmentText.data!.data.text.replace(/\r\n/g, "\n").trim()).toBe(text)
    })
  })

  describe("RCPT TO", () => {
    it("refuses an unknown address with 550 5.1.1 and accepts a known one in any case", async () => {
      const box = await newBox()
      const unknown = await transaction([`nobody-${fresh()}@${DOMAIN}`])
      expectRefused(unknown.replies[0], 550, "5.1.1")

      const upper = box.address.toUpperCase()
      const { replies, data } = await transaction([upper], await simple(upper, "Shouting"))
      expect(replies.map((r) => r.code)).toEqual([250])
      expect(data?.code, data?.text).toBe(250)
      const listed = await waitForEmails(box, 1)
      expect(listed.data.map((e) => [e.email_id, e.subject, e.mailbox_id])).toEqual([[queuedIds(data!)[0], "Shouting", box.mailboxId]])
    })

    it("answers each recipient of one transaction on its own; the message goes to the known one only", async () => {
      const box = await newBox()
      const unknown = `ghost-${fresh()}@${DOMAIN}`
      const { replies, data } = await transaction([box.address, unknown], await simple(`${box.address}, ${unknown}`, "Two recipients"))
      expect(replies[0]!.code).toBe(250)
      expectRefused(replies[1], 550, "5.1.1")
      expect(replies[1]!.text).toContain(unknown)
      expect(data?.code, data?.text).toBe(250)
      expect(queuedIds(data!)).toHaveLength(1)

      const listed = await waitForEmails(box, 1)
      expect(listed.data.map((e) => e.email_id)).toEqual(queuedIds(data!))
      expect(listed.data[0]!.to).toEqual([box.address, unknown])
      expect((await usage(box.user)).emailsUsed).toBe(1)
    })

    it("takes postmaster@ and abuse@ the shared domain, and a bare postmaster, for the operator's mailbox (POSTMASTER_MAILBOX), refused until it exists", async () => {
      expectRefused((await transaction([`postmaster@${DOMAIN}`])).replies[0], 550, "5.1.1")
      const desk = await newBox(undefined, "operator-desk")
      expect(desk.address).toBe(OPERATOR_DESK)

      const { replies, data } = await transaction(
        [`Postmaster@${DOMAIN.toUpperCase()}`, `abuse@${DOMAIN}`, `webmaster@${DOMAIN}`],
        await simple(`postmaster@${DOMAIN}, abuse@${DOMAIN}`, "Your server sent us spam")
      )
      expect(replies.map((r) => r.code)).toEqual([250, 250, 550])
      // One copy: both addresses are one mailbox's.
      expect(queuedIds(data!)).toHaveLength(1)
      const bare = await transaction(["postmaster"], await simple("postmaster", "Hello, postmaster"))
      expect(bare.replies.map((r) => r.code)).toEqual([250])
      expect(bare.data?.code, bare.data?.text).toBe(250)

      const listed = await waitForEmails(desk, 2)
      expect(listed.data.map((e) => e.subject).sort()).toEqual(["Hello, postmaster", "Your server sent us spam"])
      const report = await emailOf(desk.user, listed.data.find((e) => e.subject === "Your server sent us spam")!.email_id)
      expect(report.data!.data.delivered_to).toBe(`Postmaster@${DOMAIN.toUpperCase()}`)
    })

    it("delivers a copy to each known mailbox of different users, each readable only by its owner", async () => {
      const alice = await newBox()
      const bob = await newBox()
      const { replies, data } = await transaction([alice.address, bob.address], await simple(`${alice.address}, ${bob.address}`, "For both of you"))
      expect(replies.map((r) => r.code)).toEqual([250, 250])
      expect(data?.code, data?.text).toBe(250)
      expect(queuedIds(data!)).toHaveLength(2)

      const [aliceList, bobList] = await Promise.all([waitForEmails(alice, 1), waitForEmails(bob, 1)])
      const aliceEmail = aliceList.data[0]!
      const bobEmail = bobList.data[0]!
      expect(aliceList.meta.total).toBe(1)
      expect(bobList.meta.total).toBe(1)
      expect(aliceEmail.email_id).not.toBe(bobEmail.email_id)
      expect([aliceEmail.email_id, bobEmail.email_id].sort()).toEqual([...queuedIds(data!)].sort())
      expect(aliceEmail).toMatchObject({ mailbox_id: alice.mailboxId, subject: "For both of you", message_id: bobEmail.message_id })
      expect(bobEmail.mailbox_id).toBe(bob.mailboxId)

      expect((await emailOf(alice.user, aliceEmail.email_id)).response.status).toBe(200)
      expect((await emailOf(bob.user, bobEmail.email_id)).response.status).toBe(200)
      const crossed = await emailOf(alice.user, bobEmail.email_id)
      expect(crossed.response.status).toBe(404)
      expect(crossed.error).toMatchObject(notFound)
      expect((await emailOf(bob.user, aliceEmail.email_id)).response.status).toBe(404)
    })
  })

  describe("rename", () => {
    it("keeps mailbox_id and the emails received; mail to the new address arrives there, the old one is 550 5.1.1", async () => {
      const box = await newBox()
      const before = await transaction([box.address], await simple(box.address, "Before the rename"))
      expect(before.data?.code).toBe(250)
      await waitForEmails(box, 1)

      const next = fresh("renamed")
      const renamed = await keyed(box.user).PATCH("/v1/api/mailboxes/{mailboxId}", {
        params: { path: { mailboxId: box.mailboxId } },
        body: { local_part: next, domain: DOMAIN }
      })
      expect(renamed.response.status, JSON.stringify(renamed.error)).toBe(200)
      expect(renamed.data?.data).toEqual({
        previous_email_address: box.address,
        mailbox: { mailbox_id: box.mailboxId, email_address: `${next}@${DOMAIN}`, domain: DOMAIN, status: "active", display_name: null }
      })
      const newAddress = `${next}@${DOMAIN}`

      const old = await transaction([box.address])
      expectRefused(old.replies[0], 550, "5.1.1")
      const after = await transaction([newAddress], await simple(newAddress, "After the rename"))
      expect(after.replies[0]!.code).toBe(250)
      expect(after.data?.code, after.data?.text).toBe(250)

      const listed = await waitForEmails(box, 2)
      expect(listed.meta.total).toBe(2)
      expect(listed.data.map((e) => [e.email_id, e.subject, e.mailbox_id])).toEqual([
        [queuedIds(after.data!)[0], "After the rename", box.mailboxId],
        [queuedIds(before.data!)[0], "Before the rename", box.mailboxId]
      ])
      expect(listed.data[0]!.to).toEqual([newAddress])
    })
  })

  describe("delete", () => {
    it("a wrong confirmation changes nothing; after the delete the address is 550 5.1.1 and every read is 404", async () => {
      const box = await newBox()
      const first = await sendRaw(box.address, await compose({
        from: SENDER,
        to: box.address,
        subject: "Keep this",
        text: "With a file.",
        attachments: [{ filename: "data.bin", content: randomBytes(1024) }]
      }))
      const [emailId] = queuedIds(first.response)
      await waitForEmails(box, 1)
      const email = (await emailOf(box.user, emailId!)).data!.data
      expect(email.attachments).toHaveLength(1)

      const route = { params: { path: { mailboxId: box.mailboxId } } }
      const wrong = await keyed(box.user).DELETE("/v1/api/mailboxes/{mailboxId}", { ...route, body: { confirm_email_address: `x${box.address}` } })
      expect(wrong.response.status).toBe(400)
      expect(wrong.error).toEqual({
        success: false,
        error: { code: "VALIDATION_ERROR", message: expect.any(String), details: { confirm_email_address: expect.any(String) } }
      })
      const still = await transaction([box.address], await simple(box.address, "Still flowing"))
      expect(still.data?.code, still.data?.text).toBe(250)
      await waitForEmails(box, 2)

      const deleted = await keyed(box.user).DELETE("/v1/api/mailboxes/{mailboxId}", { ...route, body: { confirm_email_address: box.address } })
      expect(deleted.response.status).toBe(200)
      expect(deleted.data).toEqual({ success: true, data: { deleted: true } })

      const refused = await transaction([box.address])
      expectRefused(refused.replies[0], 550, "5.1.1")

      const ids = { email: emailId!, attachment: email.attachments[0]!.attachment_id, thread: email.thread_id, mailbox: box.mailboxId }
      for (const [path, read] of mailReads(keyed(box.user), ids)) {
        const reply = await patiently(read)
        expect({ path, status: reply.response.status, body: reply.error }).toEqual({ path, status: 404, body: expect.objectContaining(notFound) })
      }
    })
  })

  describe("ownership and credentials", () => {
    it("other users get 404 NOT_FOUND for an email, its raw, attachment, thread and mailbox list, as for ids that do not exist", async () => {
      const owner = await newBox()
      const stranger = await withApiKey(suite.url)
      const sent = await sendRaw(owner.address, await compose({
        from: SENDER,
        to: owner.address,
        subject: "Private",
        text: "Not for you.",
        attachments: [{ filename: "secret.txt", content: "secret" }]
      }))
      const [emailId] = queuedIds(sent.response)
      await waitForEmails(owner, 1)
      const email = (await emailOf(owner.user, emailId!)).data!.data
      const attachmentId = email.attachments[0]!.attachment_id

      const real = { email: emailId!, attachment: attachmentId, thread: email.thread_id, mailbox: owner.mailboxId }
      const made = { email: "eml_doesnotexist0000", attachment: "att_doesnotexist0000", thread: "thr_doesnotexist0000", mailbox: "mbx_doesnotexist0000" }
      const swap = (body: unknown) => {
        let text = JSON.stringify(body)
        for (const key of Object.keys(made) as Array<keyof typeof made>) text = text.split(made[key]).join(real[key])
        return JSON.parse(text)
      }
      const theirs = mailReads(keyed(stranger), real)
      const unknown = mailReads(keyed(stranger), made)
      for (let i = 0; i < theirs.length; i++) {
        const [theirPath, readTheirs] = theirs[i]!
        const [unknownPath, readUnknown] = unknown[i]!
        const foreign = await patiently(readTheirs)
        const missing = await patiently(readUnknown)
        expect({ path: theirPath, status: foreign.response.status, body: foreign.error }).toEqual({ path: theirPath, status: 404, body: expect.objectContaining(notFound) })
        expect({ path: unknownPath, status: missing.response.status }).toEqual({ path: unknownPath, status: 404 })
        // Nothing tells a stranger that the resource exists: the reply is the one for a made-up id.
        expect(foreign.error).toEqual(swap(missing.error))
      }
      // The owner, for contrast, reads the attachment of a real email but not one under another email's id.
      const mixed = await patiently(mailReads(keyed(owner.user), { ...real, email: made.email })[2]![1])
      expect(mixed.response.status).toBe(404)
      expect(mixed.error).toMatchObject(notFound)
    })

    it("a call without a key is 401 UNAUTHORIZED, and so is an invalid key", async () => {
      const reads = mailReads(anonymous(suite.url), { email: "eml_x", attachment: "att_x", thread: "thr_x", mailbox: "mbx_x" })
      for (const [route, read] of reads.filter(([route]) => !route.includes("/attachments/"))) {
        const reply = await read()
        expect({ route, status: reply.response.status, body: reply.error }).toEqual({
          route,
          status: 401,
          body: { success: false, error: expect.objectContaining({ code: "UNAUTHORIZED", message: expect.any(String) }) }
        })
      }
      const invalid = await withKey(suite.url, { apiKey: "mr_not_a_key" }).GET("/v1/api/emails/{emailId}", { params: { path: { emailId: "eml_x" } } })
      expect(invalid.response.status).toBe(401)
      expect(invalid.error?.error.code).toBe("UNAUTHORIZED")
    })
  })

  describe("the mailbox's email list", () => {
    it("pages with limit/offset (meta total, limit, offset, hasMore), newest first by default, and sorts by subject and date", async () => {
      const box = await newBox()
      // Sent in this order, so received_at orders them; subjects and Date headers order them differently.
      const sent: Array<[string, string]> = [["Charlie", "2025-03-01T00:00:00.000Z"], ["Alpha", "2025-03-03T00:00:00.000Z"], ["Bravo", "2025-03-02T00:00:00.000Z"]]
      for (const [subject, date] of sent) {
        const { data } = await transaction([box.address], await simple(box.address, subject, { date: new Date(date) }))
        expect(data?.code, data?.text).toBe(250)
      }
      await waitForEmails(box, 3)
      const list = async (query: string) => {
        const reply = await listOf(box, query)
        expect(reply.response.status, JSON.stringify(reply.error)).toBe(200)
        expect(reply.data?.success).toBe(true)
        return { subjects: reply.data!.data.map((e) => e.subject), meta: reply.data!.meta }
      }
      expect(await list("")).toEqual({ subjects: ["Bravo", "Alpha", "Charlie"], meta: { total: 3, limit: 20, offset: 0, hasMore: false } })
      expect(await list("?limit=2")).toEqual({ subjects: ["Bravo", "Alpha"], meta: { total: 3, limit: 2, offset: 0, hasMore: true } })
      expect(await list("?limit=2&offset=2")).toEqual({ subjects: ["Charlie"], meta: { total: 3, limit: 2, offset: 2, hasMore: false } })
      expect(await list("?offset=5")).toEqual({ subjects: [], meta: { total: 3, limit: 20, offset: 5, hasMore: false } })
      expect((await list("?sort=subject:asc")).subjects).toEqual(["Alpha", "Bravo", "Charlie"])
      expect((await list("?sort=date:asc&limit=3")).subjects).toEqual(["Charlie", "Bravo", "Alpha"])
      expect((await list("?sort=received_at:asc")).subjects).toEqual(["Charlie", "Alpha", "Bravo"])
    })

    it("a message sent again (a sender's retry: the same Message-ID, From and Date) is answered 250 and listed once", async () => {
      const box = await newBox()
      const message = await simple(box.address, "Minutes", { messageId: `<${fresh("minutes")}@example.com>`, date: new Date("2026-12-03T10:00:00Z") })
      const first = await transaction([box.address], message)
      expect(first.data?.code, first.data?.text).toBe(250)
      await waitForEmails(box, 1)
      const again = await transaction([box.address], message)
      expect(again.data?.code, again.data?.text).toBe(250)
      const marker = await transaction([box.address], await simple(box.address, "After the retry"))
      expect(marker.data?.code, marker.data?.text).toBe(250)
      await waitForEmails(box, 2)
      // The retry was taken before the marker; given a moment more, it is still not stored.
      await sleep(1500)
      expect((await listOf(box)).data!.data.map((e) => e.subject)).toEqual(["After the retry", "Minutes"])
      expect((await emailOf(box.user, queuedIds(again.data!)[0]!)).response.status).toBe(404)
    })

    it.each([
      ["sort=size:asc", "sort"],
      ["sort=subject:sideways", "sort"],
      ["limit=0", "limit"],
      ["limit=101", "limit"],
      ["offset=-1", "offset"]
    ])("refuses ?%s with 400 VALIDATION_ERROR whose details name %s", async (query, field) => {
      const box = await newBox()
      const reply = await listOf(box, `?${query}`)
      expect(reply.response.status).toBe(400)
      expect(reply.error).toEqual({
        success: false,
        error: { code: "VALIDATION_ERROR", message: expect.any(String), details: { [field]: expect.any(String) } }
      })
    })
  })

  describe("threads", () => {
    it("a reply by In-Reply-To/References and its sender's 'Re:' of the subject join the thread; another subject, or the subject from someone else, does not", async () => {
      const box = await newBox()
      const helloId = `<${fresh("hello")}@example.com>`
      const steps: Array<[string, Mail.Options]> = [
        ["Hello", { messageId: helloId }],
        ["Numbers for Q3", { inReplyTo: helloId, references: [helloId] }],
        ["Re: Hello", { from: `Sender <${SENDER.toUpperCase()}>` }],
        ["Something else entirely", {}],
        ["Re: Hello", { from: "Stranger <stranger@elsewhere.test>" }]
      ]
      const ids: Array<string> = []
      for (const [i, [subject, extra]] of steps.entries()) {
        // One at a time, each stored before the next is sent: the order a conversation happens in.
        const { data } = await transaction([box.address], await simple(box.address, subject, extra))
        expect(data?.code, data?.text).toBe(250)
        ids.push(queuedIds(data!)[0]!)
        await waitForEmails(box, i + 1)
      }
      const emails = (await waitForEmails(box, 5)).data.slice().reverse()
      expect(emails.map((e) => e.email_id)).toEqual(ids)
      const [hello, reply, re, other, stranger] = emails
      expect(reply!.thread_id).toBe(hello!.thread_id)
      expect(re!.thread_id).toBe(hello!.thread_id)
      expect(other!.thread_id).not.toBe(hello!.thread_id)
      expect(stranger!.thread_id).not.toBe(hello!.thread_id)

      const thread = await threadOf(box.user, hello!.thread_id)
      expect(thread.response.status).toBe(200)
      expect(thread.data).toMatchObject({ success: true, data: { thread_id: hello!.thread_id, mailbox_id: box.mailboxId, subject: "Hello", message_count: 3 } })
      expect(thread.data?.data.emails).toEqual([hello, reply, re].map((email) => ({ ...email, reply_text: expect.any(String) })))
      const single = await threadOf(box.user, other!.thread_id)
      expect(single.data?.data).toMatchObject({ subject: "Something else entirely", message_count: 1, emails: [other] })
    })

    it("a reply that arrives before its original still shares its thread, under another subject too", async () => {
      const box = await newBox()
      const originalId = `<${fresh("original")}@example.com>`
      const steps: Array<[string, Mail.Options]> = [
        ["Quarterly plan (my answer)", { inReplyTo: originalId, references: [originalId] }],
        ["Quarterly plan", { messageId: originalId }]
      ]
      for (const [i, [subject, extra]] of steps.entries()) {
        const { data } = await transaction([box.address], await simple(box.address, subject, extra))
        expect(data?.code, data?.text).toBe(250)
        await waitForEmails(box, i + 1)
      }
      const [original, reply] = (await waitForEmails(box, 2)).data
      expect(original!.subject).toBe("Quarterly plan")
      expect(original!.thread_id).toBe(reply!.thread_id)
    })
  })

  describe("message size", () => {
    it("EHLO announces SIZE 52428800, 8BITMIME, SMTPUTF8 and PIPELINING, and neither STARTTLS nor AUTH", async () => {
      const session = await connectSmtp(suite.server.smtpPort)
      try {
        expect(session.greeting.code).toBe(220)
        const ehlo = await session.command("EHLO client.test")
        expect(ehlo.code).toBe(250)
        const extensions = ehlo.text.split("\n").slice(1)
        expect(extensions).toEqual(expect.arrayContaining([`SIZE ${ANNOUNCED_SIZE}`, "8BITMIME", "SMTPUTF8", "PIPELINING"]))
        expect(extensions.filter((line) => /^(STARTTLS|AUTH)\b/i.test(line))).toEqual([])
      } finally {
        await session.close()
      }
    })

    it("a declared SIZE over the free plan's 10 MB is refused at RCPT with 552 5.3.4; exactly 10 MB is accepted", async () => {
      const box = await newBox()
      const over = await transaction([box.address], undefined, `<${SENDER}> SIZE=${FREE_MAX_BYTES + 1}`)
      expectRefused(over.replies[0], 552, "5.3.4")
      const exact = await transaction([box.address], undefined, `<${SENDER}> SIZE=${FREE_MAX_BYTES}`)
      expect(exact.replies[0]!.code, exact.replies[0]!.text).toBe(250)
    })

    /** A message of exactly `total` bytes (CRLF lines, the last one ending the message), undeclared size. */
    const messageOf = (to: string, subject: string, total: number) => {
      const head = [`From: <${SENDER}>`, `To: <${to}>`, `Subject: ${subject}`, `Message-ID: <${fresh("big")}@example.com>`, "", ""].join("\r\n")
      const line = `${"A".repeat(76)}\r\n`
      const body = line.repeat(Math.ceil((total - head.length) / line.length))
      const message = Buffer.concat([Buffer.from(head + body).subarray(0, total - 2), Buffer.from("\r\n")])
      expect(message.byteLength).toBe(total)
      return message
    }

    /** A message of exactly `total` bytes that is mostly one attachment (base64), as large mail is. */
    const withAttachmentOf = (to: string, subject: string, total: number) => {
      const boundary = "b0undary"
      const headOf = (note: string) =>
        [
          `From: <${SENDER}>`, `To: <${to}>`, `Subject: ${subject}`, `Message-ID: <${fresh("big")}@example.com>`, "MIME-Version: 1.0",
          `Content-Type: multipart/mixed; boundary="${boundary}"`, "", `--${boundary}`, "Content-Type: text/plain", "", note,
          `--${boundary}`, "Content-Type: application/octet-stream", "Content-Transfer-Encoding: base64",
          "Content-Disposition: attachment; filename=\"scan.bin\"", "", ""
        ].join("\r\n")
      const tail = `\r\n--${boundary}--\r\n`
      const line = `${"QUFB".repeat(19)}\r\n`
      // The note grows by a character until what is left after whole lines of base64 is nothing or a
      // shorter line of whole quadruples.
      let note = "The scan is attached."
      const lastLine = () => (total - headOf(note).length - tail.length) % line.length
      while (lastLine() !== 0 && lastLine() % 4 !== 2) note += "."
      const head = headOf(note)
      const room = total - head.length - tail.length
      const last = room % line.length
      const message = Buffer.from(head + line.repeat(Math.floor(room / line.length)) + (last > 0 ? `${"QUFB".repeat((last - 2) / 4)}\r\n` : "") + tail)
      expect(message.byteLength).toBe(total)
      return message
    }

    /** After a refusal, a small message arrives alone: what was refused was neither stored nor counted. */
    const expectNothingStored = async (box: Box) => {
      const marker = await transaction([box.address], await simple(box.address, "After the big one"))
      expect(marker.data?.code, marker.data?.text).toBe(250)
      const listed = await waitForEmails(box, 1)
      expect(listed.data.map((e) => e.subject)).toEqual(["After the big one"])
      const used = await usage(box.user)
      expect(used.emailsUsed).toBe(1)
      expect(used.storageUsed).toBe(listed.data[0]!.size)
    }

    it("10 MB + 1 byte of data to a free mailbox, no SIZE declared, is refused with 552 5.3.4 and nothing is stored or counted", async () => {
      const box = await newBox()
      const { replies, data } = await transaction([box.address], messageOf(box.address, "Too big", FREE_MAX_BYTES + 1))
      expect(replies[0]!.code).toBe(250)
      expectRefused(data, 552, "5.3.4")
      await expectNothingStored(box)
    })

    it("exactly 10 MB of data to a free mailbox is accepted", async () => {
      const box = await newBox()
      const { data } = await transaction([box.address], messageOf(box.address, "Exactly the limit", FREE_MAX_BYTES))
      expect(data?.code, data?.text).toBe(250)
      const listed = await waitForEmails(box, 1)
      expect(listed.data.map((e) => [e.subject, e.size])).toEqual([["Exactly the limit", FREE_MAX_BYTES]])
    })

    it("a recipient whose plan takes another size than the recipients accepted is 452 4.5.3 (another transaction), unless the declared SIZE fits both", async () => {
      const free = await newBox()
      const enterprise = await newBox()
      await upgrade(suite.url, enterprise.user.apiKey, "enterprise")
      const unsized = await transaction([free.address, enterprise.address])
      expect(unsized.replies[0]!.code).toBe(250)
      expectRefused(unsized.replies[1], 452, "4.5.3")
      expect(unsized.replies[1]!.text).toContain(enterprise.address)
      const sized = await transaction([free.address, enterprise.address], undefined, `<${SENDER}> SIZE=${FREE_MAX_BYTES}`)
      expect(sized.replies.map((reply) => reply.code)).toEqual([250, 250])
    })

    it("exactly 50 MB (what SIZE announces) to an enterprise mailbox is accepted and stored", async () => {
      const box = await newBox()
      await upgrade(suite.url, box.user.apiKey, "enterprise")
      const { data } = await transaction([box.address], withAttachmentOf(box.address, "The largest there is", ANNOUNCED_SIZE))
      expect(data?.code, data?.text).toBe(250)
      const listed = await waitForEmails(box, 1)
      expect(listed.data.map((e) => [e.subject, e.size])).toEqual([["The largest there is", ANNOUNCED_SIZE]])
      expect((await usage(box.user)).emailsUsed).toBe(1)
    }, 120_000)

    it("50 MB + 1 byte to an enterprise mailbox (over what SIZE announces), no SIZE declared: 552 5.3.4, nothing stored or counted", async () => {
      const box = await newBox()
      await upgrade(suite.url, box.user.apiKey, "enterprise")
      const { replies, data } = await transaction([box.address], messageOf(box.address, "Far too big", ANNOUNCED_SIZE + 1))
      expect(replies[0]!.code).toBe(250)
      expectRefused(data, 552, "5.3.4")
      expect(data!.text).toContain(String(ANNOUNCED_SIZE))
      await expectNothingStored(box)
    })
  })

  describe("plan limits", () => {
    it("a free account's 101st email of the period (its day's too) is refused at RCPT with 552 5.2.2, for good; usage counts the 100", async () => {
      const box = await newBox()
      const second = await newBox(box.user)
      const someoneElse = await newBox()
      expect(await usage(box.user)).toMatchObject({ emailsUsed: 0, storageUsed: 0 })

      const session = await connectSmtp(suite.server.smtpPort)
      let sentBytes = 0
      try {
        expect((await session.command("EHLO client.test")).code).toBe(250)
        for (let i = 0; i < 100; i++) {
          const message = await simple(box.address, `Daily ${i}`)
          sentBytes += message.byteLength
          expect((await session.command(`MAIL FROM:<${SENDER}>`)).code).toBe(250)
          const rcpt = await session.command(`RCPT TO:<${box.address}>`)
          expect({ i, code: rcpt.code, text: rcpt.text }).toMatchObject({ i, code: 250 })
          const data = await session.data(message)
          expect({ i, code: data.code, text: data.text }).toMatchObject({ i, code: 250 })
        }
        expect((await session.command(`MAIL FROM:<${SENDER}>`)).code).toBe(250)
        // The limit is the account's: its other mailbox is refused too; another account is not. The
        // day's 100 are used up too, but waiting for tomorrow would not help: a permanent refusal.
        expectRefused(await session.command(`RCPT TO:<${box.address}>`), 552, "5.2.2")
        expectRefused(await session.command(`RCPT TO:<${second.address}>`), 552, "5.2.2")
        expect((await session.command(`RCPT TO:<${someoneElse.address}>`)).code).toBe(250)
        expect((await session.command("RSET")).code).toBe(250)
      } finally {
        await session.close()
      }

      const listed = await waitForEmails(box, 100, 120_000)
      expect(listed.meta).toEqual({ total: 100, limit: 100, offset: 0, hasMore: false })
      const used = await usage(box.user)
      expect(used.emailsUsed).toBe(100)
      const storedBytes = listed.data.reduce((sum, e) => sum + (e.size as number), 0)
      expect(storedBytes).toBe(sentBytes)
      expect(used.storageUsed).toBe(storedBytes)
    }, 180_000)

    it("a free account's three mailboxes named in each message: the recipient that would pass the 100 is refused at its RCPT with 552 5.2.2; usage ends at 100", async () => {
      const box = await newBox()
      const others = [await newBox(box.user), await newBox(box.user)]
      const all = [box, ...others].map((b) => b.address)
      const session = await connectSmtp(suite.server.smtpPort)
      try {
        expect((await session.command("EHLO client.test")).code).toBe(250)
        // 33 messages to all three: 99 emails.
        for (let i = 0; i < 33; i++) {
          expect((await session.command(`MAIL FROM:<${SENDER}>`)).code).toBe(250)
          for (const address of all) expect({ i, code: (await session.command(`RCPT TO:<${address}>`)).code }).toEqual({ i, code: 250 })
          const data = await session.data(await simple(box.address, `Three ${i}`))
          expect({ i, code: data.code, text: data.text }).toMatchObject({ i, code: 250 })
        }
        expect((await session.command(`MAIL FROM:<${SENDER}>`)).code).toBe(250)
        expect((await session.command(`RCPT TO:<${all[0]}>`)).code).toBe(250)
        expectRefused(await session.command(`RCPT TO:<${all[1]}>`), 552, "5.2.2")
        expectRefused(await session.command(`RCPT TO:<${all[2]}>`), 552, "5.2.2")
        expect((await session.data(await simple(box.address, "The hundredth"))).code).toBe(250)
      } finally {
        await session.close()
      }
      await waitForEmails(box, 34, 120_000)
      expect((await usage(box.user)).emailsUsed).toBe(100)
    }, 180_000)

    it.skipIf(mode !== "postgres")("an account at its monthly count (100) with no emails today is refused at RCPT with 552 5.2.2", async () => {
      const box = await newBox()
      const db = new pg.Client({ connectionString: suite.backend.env.DATABASE_URL! })
      await db.connect()
      try {
        const written = await db.query(
          `INSERT INTO usage_counters (user_id, period_start, emails)
           SELECT user_id, current_period_start, 100 FROM subscriptions WHERE user_id = $1
           ON CONFLICT (user_id, period_start) DO UPDATE SET emails = EXCLUDED.emails`,
          [box.user.userId]
        )
        expect(written.rowCount).toBe(1)
        const today = await db.query("SELECT count(*)::int AS n FROM mail_daily_counters WHERE user_id = $1", [box.user.userId])
        expect(today.rows[0].n).toBe(0)
      } finally {
        await db.end()
      }
      expect((await usage(box.user)).emailsUsed).toBe(100)
      const { replies } = await transaction([box.address])
      expectRefused(replies[0], 552, "5.2.2")
    })
  })
})

// ---------------------------------------------------------------------------------------------
// STARTTLS (SMTP_TLS_CERT / SMTP_TLS_KEY set)
// ---------------------------------------------------------------------------------------------

describe("STARTTLS with a configured certificate", () => {
  const certificate = useCertificate("smtp-tls")
  useSuiteServer((s) => {
    suite = s
  }, certificate.env)

  it("EHLO advertises STARTTLS, and nodemailer requiring TLS delivers a message that becomes readable", async () => {
    const session = await connectSmtp(suite.server.smtpPort)
    try {
      const ehlo = await session.command("EHLO client.test")
      expect(ehlo.code).toBe(250)
      expect(ehlo.text.split("\n")).toContain("STARTTLS")
    } finally {
      await session.close()
    }

    const box = await newBox()
    const raw = await simple(box.address, "Over TLS")
    const sent = await sendRaw(box.address, raw, SENDER, { ignoreTLS: false, requireTLS: true, tls: { rejectUnauthorized: false } })
    expect(sent.accepted).toEqual([box.address])
    const listed = await waitForEmails(box, 1)
    expect(listed.data.map((e) => [e.email_id, e.subject, e.size])).toEqual([[queuedIds(sent.response)[0], "Over TLS", raw.byteLength]])
    const rawReply = await rawOf(box.user, listed.data[0]!.email_id)
    expect(Buffer.from(rawReply.data!).equals(raw)).toBe(true)
  })
})
