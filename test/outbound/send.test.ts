/**
 * Sending mail over the wire (issue 16), as an agent meets it: `POST /mailboxes/{id}/send` against a
 * started server whose mta resolves MX records through a DNS server this test runs and delivers to a
 * receiving SMTP server this test runs (outbound-world.ts, OUTBOUND_SMTP_PORT), with a retry schedule shortened to
 * fractions of a second. What arrives is checked byte for byte, its DKIM signature by an independent
 * verifier (mailauth) against the key the test DNS publishes.
 */
import { generateKeyPairSync, randomBytes } from "node:crypto"
import { simpleParser } from "mailparser"
import nodemailer from "nodemailer"
import { dkimVerify } from "mailauth"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createClient, type MailroomFetchClient } from "../../packages/client/src/fetch-client.ts"
import { withApiKey } from "../support/accounts.ts"
import { upgrade } from "../support/billing.ts"
import { feedbackReport } from "../support/reports.ts"
import { type Box, DOMAIN, fresh, newBox } from "../support/mailboxes.ts"
import { scrape } from "../support/metrics.ts"
import { dkimTxt, useOutboundWorld } from "../support/outbound-world.ts"
import { type Receiver, startReceiver } from "../support/receiver.ts"
import { type SuiteServer, useSuiteServer } from "../support/server.ts"
import { sendMail } from "../support/send-mail.ts"
import { settled } from "../support/settled-delivery.ts"
import { until } from "../support/wait.ts"

/** The key a provider's feedback loop signs its reports with (feedback.partner.test). */
const FEEDBACK_DKIM = generateKeyPairSync("rsa", { modulusLength: 2048 })

let hooks: Receiver
let suite: SuiteServer

const world = useOutboundWorld()
beforeAll(async () => {
  hooks = await startReceiver()
  // Another provider, whose mail the same test MX takes.
  world.names.set("elsewhere.test", { MX: [{ preference: 10, exchange: "mx.partner.test" }] })
  // bücher.test, as DNS knows an internationalized name.
  world.names.set("xn--bcher-kva.test", { MX: [{ preference: 10, exchange: "mx.partner.test" }] })
  // A null MX (RFC 7505): the domain takes no mail at all.
  world.names.set("nomail.test", { MX: [{ preference: 0, exchange: "." }] })
  world.names.set("fbl._domainkey.feedback.partner.test", { TXT: [dkimTxt(FEEDBACK_DKIM.publicKey)] })
})

afterAll(async () => {
  await hooks?.close()
})

useSuiteServer((s) => {
  suite = s
}, world.env({ OUTBOUND_RETRY_DELAYS: "300ms,600ms", WEBHOOK_ALLOW_PRIVATE: "true" }))

/** A user with a mailbox and a typed client of their own (each test stays inside the free plan's rate). */
const sender = async (): Promise<{ box: Box; mailroom: MailroomFetchClient }> => {
  const box = await newBox(suite.url, { user: await withApiKey(suite.url) })
  return { box, mailroom: createClient({ baseUrl: suite.url, apiKey: box.user.apiKey }) }
}

const send = (mailroom: MailroomFetchClient, box: Box, body: Record<string, unknown>, idempotencyKey?: string) =>
  mailroom.POST("/v1/api/mailboxes/{mailboxId}/send", {
    params: { path: { mailboxId: box.mailboxId }, header: idempotencyKey ? { "idempotency-key": idempotencyKey } : {} } as never,
    body: body as never
  })

/** The message the MX server took with this Message-ID. */
const arrived = (messageId: string) =>
  until(`${messageId} at the MX`, async () => world.mx.delivered().find((m) => m.raw.includes(`Message-ID: ${messageId}`)), 20_000)

/** A receiving server's later report (RFC 3464) that `recipient` of the email `emailId` is gone. */
const bounceReport = (emailId: string, recipient: string) =>
  [
    "From: Mail Delivery System <MAILER-DAEMON@mx.partner.test>",
    `To: bounces+${emailId}@agents.localhost`,
    "Subject: Undelivered Mail Returned to Sender",
    "MIME-Version: 1.0",
    "Content-Type: multipart/report; report-type=delivery-status; boundary=b1",
    "",
    "--b1",
    "Content-Type: text/plain",
    "",
    "Your message could not be delivered.",
    "--b1",
    "Content-Type: message/delivery-status",
    "",
    "Reporting-MTA: dns; mx.partner.test",
    "",
    `Final-Recipient: rfc822; ${recipient}`,
    "Action: failed",
    "Status: 5.1.1",
    "Diagnostic-Code: smtp; 550 5.1.1 The mailbox is gone",
    "--b1--",
    ""
  ].join("\r\n")

/** The bounce address the email `emailId` went to `to` with (a recipient, or one at a domain): the envelope sender its MX saw. */
const bounceAddressOf = (emailId: string, to = "partner.test") => {
  const message = world.mx.delivered().find((m) =>
    m.raw.includes(`Message-ID: <${emailId}@`) && m.rcptTo.some((r) => (to.includes("@") ? r === to : r.endsWith(`@${to}`)))
  )
  if (message === undefined) throw new Error(`${emailId} did not reach ${to}`)
  return message.mailFrom
}

/** A report (`raw`), sent over SMTP to the bounce address the email went to `to` with, as its receiving server sends it. */
const report = async (emailId: string, raw: string, to?: string) => {
  const transport = nodemailer.createTransport({ host: "127.0.0.1", port: suite.server.smtpPort, secure: false, ignoreTLS: true })
  try {
    const sent = await transport.sendMail({ envelope: { from: "", to: [bounceAddressOf(emailId, to)] }, raw })
    // The report becomes no email of its own: the answer names none.
    expect(sent.response).toMatch(/^250 2\.0\.0 Ok: delivery report received/)
  } finally {
    transport.close()
  }
}

const reportBounce = (emailId: string, recipient: string) => report(emailId, bounceReport(emailId, recipient))

/** A feedback report mailed to `to` (an address a feedback loop was given), DKIM-signed by its provider or not. */
const mailReport = async (to: string, raw: string, signed: boolean) => {
  const transport = nodemailer.createTransport({
    host: "127.0.0.1",
    port: suite.server.smtpPort,
    secure: false,
    ignoreTLS: true,
    ...(signed
      ? { dkim: { domainName: "feedback.partner.test", keySelector: "fbl", privateKey: FEEDBACK_DKIM.privateKey.export({ type: "pkcs8", format: "pem" }).toString() } }
      : {})
  })
  try {
    await transport.sendMail({ envelope: { from: "fbl@feedback.partner.test", to: [to] }, raw })
  } finally {
    transport.close()
  }
}

describe("sending to another domain", () => {
  it("delivers to the domain's MX: headers, UTF-8 subject, attachment and bcc intact, DKIM passes, raw is what was sent", async () => {
    const { box, mailroom } = await sender()
    const to = `${fresh("ada")}@partner.test`
    const cc = `${fresh("bob")}@partner.test`
    const bcc = `${fresh("eve")}@partner.test`
    const pdf = Buffer.from("%PDF-1.4 a tiny report\n")
    const before = world.mx.delivered().length
    const sent = await send(mailroom, box, {
      to: [{ name: "Ada Lovelace", address: to }],
      cc: [cc],
      bcc: [bcc],
      subject: "Grüße aus dem Büro ✉",
      text: "Hello Ada,\nthe report is attached.",
      html: "<p>Hello Ada,<br>the report is attached.</p>",
      attachments: [{ filename: "report.pdf", content_type: "application/pdf", content: pdf.toString("base64") }],
      reply_to: "desk@partner.test",
      headers: { "X-Ticket": "T-42" }
    })
    expect(sent.response.status).toBe(202)
    const accepted = sent.data!.data
    expect(accepted).toEqual({
      email_id: expect.stringMatching(/^eml_/),
      message_id: `<${accepted.email_id}@agents.localhost>`,
      thread_id: expect.stringMatching(/^thr_/),
      status: "queued"
    })

    // One transaction per recipient, each with a bounce address of its own (bounce-address.ts) that
    // names the email; the message is the same.
    const copies = (await world.mx.waitFor(before + 3)).slice(before).filter((m) => m.raw.includes(`Message-ID: <${accepted.email_id}@`))
    expect(copies.map((m) => m.rcptTo).sort()).toEqual([[to], [cc], [bcc]].sort())
    for (const copy of copies) expect(copy.mailFrom).toMatch(new RegExp(`^bounces\\+${accepted.email_id}-[0-9a-f]{16}@agents\\.localhost$`))
    expect(new Set(copies.map((m) => m.mailFrom)).size).toBe(3)
    expect(copies.every((m) => m.raw.equals(copies[0]!.raw))).toBe(true)
    // One after another on one connection (reset between them), not a connection each.
    expect(new Set(copies.map((m) => m.sessionId)).size).toBe(1)
    const message = copies.find((m) => m.rcptTo[0] === to)
    const parsed = await simpleParser(message!.raw)
    expect(parsed.subject).toBe("Grüße aus dem Büro ✉")
    expect(parsed.messageId).toBe(accepted.message_id)
    expect(parsed.from?.value).toEqual([{ address: box.address, name: "" }])
    expect(parsed.to).toMatchObject({ value: [{ address: to, name: "Ada Lovelace" }] })
    expect(parsed.headers.has("bcc")).toBe(false)
    expect(parsed.headers.get("x-ticket")).toBe("T-42")
    expect(parsed.replyTo?.value[0]?.address).toBe("desk@partner.test")
    expect(parsed.attachments.map((a) => [a.filename, a.contentType, a.content.equals(pdf)])).toEqual([["report.pdf", "application/pdf", true]])

    const verdict = await dkimVerify(message!.raw, { resolver: world.resolver() })
    expect(verdict.results.map((r: { status: { result: string }; signingDomain: string }) => [r.signingDomain, r.status.result])).toEqual([
      ["agents.localhost", "pass"]
    ])
    // The agent's own field is signed: a receiver's automation may trust it.
    const signedFields = /\bh=([^;]+);/.exec(message!.raw.toString("latin1").replace(/\r\n\s+/g, ""))![1]!.split(":")
    expect(signedFields).toContain("x-ticket")

    const email = await settled(mailroom, accepted.email_id)
    expect(email).toMatchObject({ direction: "outbound", labels: ["sent"], thread_id: accepted.thread_id, subject: "Grüße aus dem Büro ✉" })
    // Bcc is in no header: the delivery below is where it shows.
    expect({ to: email.to, cc: email.cc, reply_to: email.reply_to }).toEqual({ to: [to], cc: [cc], reply_to: ["desk@partner.test"] })
    expect(email.delivery).toEqual([to, cc, bcc].sort().map((recipient) => ({
      recipient,
      status: "sent",
      attempts: 1,
      last_response: "250 2.0.0 Queued as test",
      next_attempt_at: null,
      attempting: false,
      complained_at: null,
      updated_at: expect.any(String)
    })))
    const raw = await mailroom.GET("/v1/api/emails/{emailId}/raw", { params: { path: { emailId: accepted.email_id } }, parseAs: "arrayBuffer" })
    expect(Buffer.from(raw.data!).equals(message!.raw)).toBe(true)

    const outbound = await mailroom.GET("/v1/api/mailboxes/{mailboxId}/emails", {
      params: { path: { mailboxId: box.mailboxId }, query: { direction: "outbound" } }
    })
    expect(outbound.data?.data.map((e) => e.email_id)).toEqual([accepted.email_id])
    const inbound = await mailroom.GET("/v1/api/mailboxes/{mailboxId}/emails", {
      params: { path: { mailboxId: box.mailboxId }, query: { direction: "inbound" } }
    })
    expect(inbound.data?.meta.total).toBe(0)

    // Operators see deliveries by status: counted as the outcome is written, so a moment after it reads.
    let sentCount = 0
    await until(() => `3 deliveries counted as sent in /metrics (${sentCount} so far)`, async () => {
      sentCount = (await scrape(`${suite.url}/metrics`)).value("mailroom_outbound_deliveries_total", { status: "sent" })
      return sentCount >= 3 ? true : undefined
    }, 5_000)
  })

  it("a mailbox's display_name is its From's name (quoted, encoded, signed) and the sent email's from_name; cleared, the From is bare", async () => {
    const { box, mailroom } = await sender()
    const name = 'Zoë "Z" Agent, Support'
    const path = { params: { path: { mailboxId: box.mailboxId } } }
    expect((await mailroom.PATCH("/v1/api/mailboxes/{mailboxId}", { ...path, body: { display_name: name } })).response.status).toBe(200)
    const to = `${fresh("ada")}@partner.test`
    const named = await send(mailroom, box, { to: [to], subject: "From a name", text: "Hi" })
    const message = await arrived(named.data!.data.message_id)
    const from = message.raw.toString("latin1").replace(/\r\n[ \t]/g, " ").match(/^From: .*$/m)![0].trimEnd()
    // The header is ASCII: the name an encoded-word (RFC 2047), its quotes and comma inside it.
    expect(from).toMatch(/^From: =\?UTF-8\?[QB]\?[\x21-\x7e]+\?= <[^>]+>$/)
    expect((await simpleParser(message.raw)).from?.value).toEqual([{ address: box.address, name }])
    const verdict = await dkimVerify(message.raw, { resolver: world.resolver() })
    expect(verdict.results.map((r: { status: { result: string } }) => r.status.result)).toEqual(["pass"])
    expect(await settled(mailroom, named.data!.data.email_id)).toMatchObject({ from: box.address, from_name: name })

    await mailroom.PATCH("/v1/api/mailboxes/{mailboxId}", { ...path, body: { display_name: null } })
    const bare = await send(mailroom, box, { to: [to], subject: "From an address", text: "Hi" })
    expect((await arrived(bare.data!.data.message_id)).raw.toString("latin1")).toMatch(new RegExp(`^From: ${box.address.replace(/\./g, "\\.")}\r$`, "m"))
    expect(await settled(mailroom, bare.data!.data.email_id)).toMatchObject({ from: box.address, from_name: null })
  })

  it("takes attachments up to the plan's message size (free: 10 MB), past the 1 MiB other bodies may be", async () => {
    const { box, mailroom } = await sender()
    const to = `${fresh("large")}@partner.test`
    const scan = randomBytes(1_500_000)
    const sent = await send(mailroom, box, {
      to: [to],
      subject: "The scan",
      text: "Attached.",
      attachments: [{ filename: "scan.bin", content_type: "application/octet-stream", content: scan.toString("base64") }]
    })
    expect(sent.response.status).toBe(202)
    const message = await arrived(sent.data!.data.message_id)
    expect((await simpleParser(message.raw)).attachments[0]?.content.equals(scan)).toBe(true)

    const tooBig = await send(mailroom, box, {
      to: [to],
      subject: "Too much",
      text: "Attached.",
      attachments: [{ filename: "big.bin", content: randomBytes(10 * 1024 * 1024).toString("base64") }]
    })
    expect(tooBig.response.status).toBe(413)
    expect(tooBig.error).toMatchObject({ error: { code: "PAYLOAD_TOO_LARGE", details: { limit: 10 * 1024 * 1024, size: expect.any(Number) } } })

    // Without a credential that names an account, no body is read past 1 MiB.
    const stranger = createClient({ baseUrl: suite.url, apiKey: "mr_not_a_key_at_all_0000000000000000000000" })
    const refused = await send(stranger, box, { to: [to], subject: "?", text: "x", attachments: [{ filename: "scan.bin", content: scan.toString("base64") }] })
    expect(refused.response.status).toBe(413)
    expect(refused.error).toMatchObject({ error: { code: "PAYLOAD_TOO_LARGE", details: { max_bytes: 1024 * 1024 } } })
  })

  it("a message sent to Bcc alone is stored as it was addressed: no To, its one recipient delivered", async () => {
    const { box, mailroom } = await sender()
    const bcc = `${fresh("quiet")}@partner.test`
    const sent = await send(mailroom, box, { bcc: [bcc], subject: "Only Bcc", text: "Nobody else sees this." })
    expect(sent.response.status).toBe(202)
    const email = await settled(mailroom, sent.data!.data.email_id)
    expect(email.to).toEqual([])
    expect(email.delivery?.map((d) => [d.recipient, d.status])).toEqual([[bcc, "sent"]])
    // No Bcc header; a To that names nobody (an empty group), as a message to Bcc only shows it.
    const raw = (await arrived(sent.data!.data.message_id)).raw.toString()
    expect(raw).not.toMatch(/^Bcc:/im)
    expect(raw.match(/^To:.*$/gim)).toEqual(['To: "undisclosed-recipients":;'])
    // A reply to it has nobody to go to: said so, with what to do.
    const reply = await mailroom.POST("/v1/api/emails/{emailId}/reply", { params: { path: { emailId: email.email_id } }, body: { text: "And?" } })
    expect(reply.response.status).toBe(400)
    expect(reply.error?.error).toMatchObject({
      code: "VALIDATION_ERROR",
      details: { email_id: "has no one to reply to: it was sent to this mailbox's own address or to Bcc only; name the recipients in cc or bcc" }
    })
  })

  it("shows an inline image in the HTML by its content_id, given bare or in <> as a read email shows it", async () => {
    const { box, mailroom } = await sender()
    const png = Buffer.from("89504e470d0a1a0a", "hex")
    const sent = await send(mailroom, box, {
      to: [`${fresh("img")}@partner.test`],
      subject: "Logo",
      html: '<p><img src="cid:logo@mailroom.test"></p>',
      attachments: [{ filename: "logo.png", content_type: "image/png", content: png.toString("base64"), content_id: "logo@mailroom.test" }]
    })
    expect(sent.response.status).toBe(202)
    const raw = (await arrived(sent.data!.data.message_id)).raw
    // HTML alone goes with a text alternative (as a reader renders it): no HTML-only message.
    expect(raw.toString()).toMatch(/Content-Type: multipart\/alternative[\s\S]*Content-Type: text\/plain[\s\S]*Content-Type: text\/html/)
    const parsed = await simpleParser(raw)
    expect(parsed.attachments.map((a) => [a.contentId, a.related])).toEqual([["<logo@mailroom.test>", true]])
    const email = await settled(mailroom, sent.data!.data.email_id)
    const shown = email.attachments[0]!.content_id!
    expect(shown).toBe("<logo@mailroom.test>")
    // Sent on again as it was read.
    const again = await send(mailroom, box, {
      to: [`${fresh("img")}@partner.test`],
      html: `<p><img src="cid:logo@mailroom.test"></p>`,
      attachments: [{ filename: "logo.png", content_type: "image/png", content: png.toString("base64"), content_id: shown }]
    })
    expect(again.response.status).toBe(202)
    const reparsed = await simpleParser((await arrived(again.data!.data.message_id)).raw)
    expect(reparsed.attachments.map((a) => a.contentId)).toEqual(["<logo@mailroom.test>"])
  })

  it("attaches an email (message/rfc822) as an attachment; bytes no such part may carry go as base64 octets, under their name", async () => {
    const { box, mailroom } = await sender()
    const eml = Buffer.from("From: someone@example.org\r\nSubject: The original\r\n\r\nAs it was.\r\n")
    const binary = Buffer.concat([Buffer.from(`Subject: long\r\n\r\n${"y".repeat(3000)}\r\n`), Buffer.from([0xff, 0, 0x41])])
    const sent = await send(mailroom, box, {
      to: [`${fresh("fwd")}@partner.test`],
      subject: "Attached",
      text: "See attached.",
      attachments: [
        { filename: "original.eml", content_type: "message/rfc822", content: eml.toString("base64") },
        { filename: "broken.eml", content_type: "Message/RFC822", content: binary.toString("base64") }
      ]
    })
    expect(sent.response.status).toBe(202)
    const raw = (await arrived(sent.data!.data.message_id)).raw.toString("latin1")
    expect(raw).toMatch(/Content-Type: message\/rfc822; name=original\.eml\r\nContent-Transfer-Encoding: 8bit\r\nContent-Disposition: attachment/)
    expect(raw).toMatch(/Content-Type: application\/octet-stream; name=broken\.eml\r\nContent-Transfer-Encoding: base64\r\nContent-Disposition: attachment/)
    expect(raw.split("\r\n").every((line) => line.length <= 998)).toBe(true)
    const email = await settled(mailroom, sent.data!.data.email_id)
    expect(email.text).toBe("See attached.")
    expect(email.attachments.map((a) => [a.filename, a.size])).toEqual([["original.eml", eml.length], ["broken.eml", binary.length]])
  })

  it("names each recipient once in the headers, whatever its case or the list it is repeated in", async () => {
    const { box, mailroom } = await sender()
    const [ada, bob] = [`${fresh("ada")}@partner.test`, `${fresh("bob")}@partner.test`]
    const sent = await send(mailroom, box, { to: [ada, ada.toUpperCase()], cc: [ada, bob, bob], subject: "Once", text: "x" })
    expect(sent.response.status).toBe(202)
    const parsed = await simpleParser((await arrived(sent.data!.data.message_id)).raw)
    expect([parsed.to, parsed.cc].map((field) => (Array.isArray(field) ? field : [field]).flatMap((f) => f!.value.map((a) => a.address)))).toEqual([[ada], [bob]])
  })

  it("a message without a subject still has its Subject field, empty and signed (mail without one counts against its sender)", async () => {
    const { box, mailroom } = await sender()
    const sent = await send(mailroom, box, { to: [`${fresh("ada")}@partner.test`], text: "No subject here." })
    expect(sent.response.status).toBe(202)
    const message = await arrived(sent.data!.data.message_id)
    expect(message.raw.toString("latin1").match(/^Subject:.*$/gm)).toEqual(["Subject: "])
    const verdict = await dkimVerify(message.raw, { resolver: world.resolver() })
    expect(verdict.results.map((r: { status: { result: string } }) => r.status.result)).toEqual(["pass"])
    expect((await settled(mailroom, sent.data!.data.email_id)).subject).toBe("")
  })

  it("a new email is its subject's conversation with its one recipient: two to two people are two, and an answer naming nothing joins its own", async () => {
    const { box, mailroom } = await sender()
    await upgrade(suite.url, box.user.apiKey, "pro")
    const [aliceAddress, bobAddress] = [`${fresh("alice")}@partner.test`, `${fresh("bob")}@partner.test`]
    const [alice, bob, both] = await Promise.all([
      send(mailroom, box, { to: [aliceAddress], subject: "Quick question", text: "Hello" }),
      send(mailroom, box, { to: [bobAddress.toUpperCase()], subject: "Quick question", text: "Hello" }),
      send(mailroom, box, { to: [aliceAddress], cc: [bobAddress], subject: "Quick question", text: "Hello, both" })
    ])
    expect([alice!.response.status, bob!.response.status, both!.response.status]).toEqual([202, 202, 202])
    const threads = [alice, bob, both].map((sent) => sent!.data!.data.thread_id)
    expect(new Set(threads).size).toBe(3)
    // Bob's mail program answers with the subject alone (no In-Reply-To, no References), as some do.
    await sendMail(suite.server.smtpPort, {
      envelope: { from: bobAddress, to: [box.address] },
      raw: `From: Bob <${bobAddress}>\r\nTo: ${box.address}\r\nSubject: RE: quick question\r\nMessage-ID: <${fresh("answer")}@partner.test>\r\n\r\nSure.\r\n`
    })
    const answer = await until("Bob's answer arrived", async () => {
      const { data } = await mailroom.GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId: box.mailboxId } } })
      return data?.data.find((e) => e.direction === "inbound")
    })
    expect(answer.thread_id).toBe(threads[1])
  })

  it("sends to an internationalized domain as DNS and SMTP name it (punycode); a non-ASCII local part is 400", async () => {
    const { box, mailroom } = await sender()
    const local = fresh("ada")
    const sent = await send(mailroom, box, { to: [{ name: "Ada", address: `${local}@Bücher.test` }], subject: "Bücher", text: "Ein Gruß." })
    expect(sent.response.status).toBe(202)
    // Only the punycode name has an MX in this DNS. (smtp-server reports a recipient's domain in Unicode.)
    const message = await arrived(sent.data!.data.message_id)
    expect(message.rcptTo).toEqual([`${local}@bücher.test`])
    expect(message.raw.toString()).toContain(`To: Ada <${local}@xn--bcher-kva.test>`)
    const email = await settled(mailroom, sent.data!.data.email_id)
    expect(email.delivery?.map((d) => [d.recipient, d.status])).toEqual([[`${local}@xn--bcher-kva.test`, "sent"]])

    const refused = await send(mailroom, box, { to: ["jürgen@bücher.test"], subject: "x", text: "x" })
    expect(refused.response.status).toBe(400)
    expect(refused.error).toMatchObject({
      error: { code: "VALIDATION_ERROR", details: { "to.0": "must have an ASCII name before the @: internationalized mailbox names (SMTPUTF8) are not sent to" } }
    })
  })

  it("retries 4xx on the schedule (300 ms, 600 ms) until the server takes it; the deferral is told once", async () => {
    const { box, mailroom } = await sender()
    const to = `${fresh("slow")}@partner.test`
    world.mx.script(to, [451, 421, 250])
    const hook = await mailroom.POST("/v1/api/webhooks", {
      body: { url: `${hooks.url}/delayed-${box.mailboxId}`, events: ["email.delivery_delayed", "email.sent"] }
    })
    expect(hook.response.status).toBe(201)
    const sent = await send(mailroom, box, { to: [to], subject: "Patience", text: "Third time lucky" })
    const email = await settled(mailroom, sent.data!.data.email_id)
    expect(email.delivery).toMatchObject([{ recipient: to, status: "sent", attempts: 3, last_response: "250 2.0.0 Queued as test" }])
    const times = world.mx.attempts(to)
    expect(times).toHaveLength(3)
    expect(times[1]! - times[0]!).toBeGreaterThanOrEqual(250)
    expect(times[2]! - times[1]!).toBeGreaterThanOrEqual(550)

    const events = await hooks.waitFor(`/delayed-${box.mailboxId}`, 2)
    const bodies = events.map((e) => JSON.parse(e.body))
    expect(bodies.map((b) => b.event).sort()).toEqual(["email.delivery_delayed", "email.sent"])
    const delayed = bodies.find((b) => b.event === "email.delivery_delayed")
    expect(delayed.data).toEqual({
      email_id: email.email_id,
      message_id: email.message_id,
      mailbox_id: box.mailboxId,
      thread_id: email.thread_id,
      recipient: to,
      status: "deferred",
      attempts: 1,
      smtp_response: "451 4.3.0 Temporary failure, try again later",
      next_attempt_at: expect.any(String)
    })
  })

  it("deleting the mailbox stops what it sent and is still waiting to go", async () => {
    const { box, mailroom } = await sender()
    const to = `${fresh("waiting")}@partner.test`
    world.mx.script(to, [451, 451, 451, 451, 451, 451, 250])
    const sent = await send(mailroom, box, { to: [to], subject: "Deleted before it went", text: "Never mind" })
    expect(sent.response.status).toBe(202)
    await until("the first attempt", async () => world.mx.attempts(to).length >= 1 || undefined, 20_000)
    const deleted = await mailroom.DELETE("/v1/api/mailboxes/{mailboxId}", {
      params: { path: { mailboxId: box.mailboxId } },
      body: { confirm_email_address: box.address }
    })
    expect(deleted.response.status).toBe(200)
    const tried = world.mx.attempts(to).length
    // Retries come 300 and 600 ms apart: past two of them, at most one attempt under way at the delete went on.
    await new Promise((resolve) => setTimeout(resolve, 2_000))
    expect(world.mx.attempts(to).length).toBeLessThanOrEqual(tried + 1)
    expect(world.mx.delivered().some((m) => m.rcptTo.includes(to))).toBe(false)
  })

  it("keeps the connection to an MX for the next message, and replaces one the server dropped without a deferral; asks DNS once", async () => {
    const { box, mailroom } = await sender()
    const asked = () => world.names.questions().filter((q) => / (partner\.test|mx\.partner\.test) /.test(`${q} `)).length
    const askedBefore = asked()
    const deliverOne = async (subject: string) => {
      const sent = await send(mailroom, box, { to: [`${fresh("reuse")}@partner.test`], subject, text: subject })
      expect(sent.response.status).toBe(202)
      await settled(mailroom, sent.data!.data.email_id)
      return arrived(sent.data!.data.message_id)
    }
    const first = await deliverOne("Reuse one")
    const second = await deliverOne("Reuse two")
    expect(second.sessionId).toBe(first.sessionId)

    world.mx.dropConnections()
    const third = await deliverOne("After the hang-up")
    expect(third.sessionId).not.toBe(first.sessionId)
    const email = await settled(mailroom, (await mailroom.GET("/v1/api/mailboxes/{mailboxId}/emails", {
      params: { path: { mailboxId: box.mailboxId } }
    })).data!.data.find((e) => e.subject === "After the hang-up")!.email_id)
    expect(email.delivery).toMatchObject([{ status: "sent", attempts: 1 }])
    // The domain's MX and its host's addresses are kept a minute: three deliveries asked at most once each
    // (MX, A, AAAA), and not at all when an earlier test of the suite asked within the minute.
    expect(asked() - askedBefore).toBeLessThanOrEqual(3)
  })

  it("a 550 bounces at once, suppresses the address, and the next send to it is 422 RECIPIENT_SUPPRESSED", async () => {
    const { box, mailroom } = await sender()
    const gone = `${fresh("gone")}@partner.test`
    const fine = `${fresh("fine")}@partner.test`
    world.mx.script(gone, [550])
    const sent = await send(mailroom, box, { to: [gone, fine], subject: "Hello", text: "Anyone there?" })
    const email = await settled(mailroom, sent.data!.data.email_id)
    expect(email.delivery).toMatchObject(
      [
        { recipient: fine, status: "sent", attempts: 1 },
        { recipient: gone, status: "bounced", attempts: 1, last_response: "550 5.1.1 No such user here" }
      ].sort((a, b) => a.recipient.localeCompare(b.recipient))
    )
    expect(world.mx.attempts(gone)).toHaveLength(1)

    const again = await send(mailroom, box, { to: [fine], cc: [gone.toUpperCase()], subject: "Hello again", text: "?" })
    expect(again.response.status).toBe(422)
    expect(again.error).toMatchObject({ success: false, error: { code: "RECIPIENT_SUPPRESSED", details: { addresses: [gone] } } })

    const listed = await mailroom.GET("/v1/api/suppressions", {})
    expect(listed.data).toEqual({
      success: true,
      data: [{ address: gone, reason: "bounced", last_response: "550 5.1.1 No such user here", email_id: email.email_id, created_at: expect.any(String) }],
      meta: { total: 1, limit: 20, offset: 0, hasMore: false }
    })
    const byAddress = await mailroom.GET("/v1/api/suppressions", { params: { query: { sort: "address:asc" } } })
    expect(byAddress.data?.data.map((s) => s.address)).toEqual([gone])
    const removed = await mailroom.DELETE("/v1/api/suppressions/{address}", { params: { path: { address: gone } } })
    expect(removed.data).toEqual({ success: true, data: { address: gone, deleted: true } })
    const missing = await mailroom.DELETE("/v1/api/suppressions/{address}", { params: { path: { address: gone } } })
    expect(missing.response.status).toBe(404)
    expect(missing.error).toMatchObject({ error: { code: "NOT_FOUND", details: { address: gone } } })
    world.mx.script(gone, [250])
    const third = await send(mailroom, box, { to: [gone], subject: "Back again", text: "Welcome back" })
    expect(third.response.status).toBe(202)
  })

  it("suppresses an address by hand, once; a send to it and to a bounced one is refused saying why for each", async () => {
    const { box, mailroom } = await sender()
    const gone = `${fresh("gone")}@partner.test`
    world.mx.script(gone, [550])
    await settled(mailroom, (await send(mailroom, box, { to: [gone], subject: "Hello", text: "?" })).data!.data.email_id)
    const asked = `${fresh("Asked")}@Partner.test`
    const added = await mailroom.POST("/v1/api/suppressions", { body: { address: asked } })
    expect(added.response.status).toBe(201)
    const entry = { address: asked.toLowerCase(), reason: "manual", last_response: null, email_id: null, created_at: expect.any(String) }
    expect(added.data).toEqual({ success: true, data: entry })
    const again = await mailroom.POST("/v1/api/suppressions", { body: { address: asked.toLowerCase() } })
    expect(again.response.status).toBe(200)
    expect(again.data).toEqual({ success: true, data: { ...entry, created_at: added.data!.data.created_at } })
    // On the list already, a bounced address keeps its reason.
    const bouncedAgain = await mailroom.POST("/v1/api/suppressions", { body: { address: gone } })
    expect(bouncedAgain.response.status).toBe(200)
    expect(bouncedAgain.data?.data).toMatchObject({ address: gone, reason: "bounced", last_response: "550 5.1.1 No such user here" })

    const refused = await send(mailroom, box, { to: [asked, gone], subject: "Hello", text: "?" })
    expect(refused.response.status).toBe(422)
    expect(refused.error).toEqual({
      success: false,
      error: {
        code: "RECIPIENT_SUPPRESSED",
        message: `Not sent: ${gone} bounced before and is suppressed; ${asked.toLowerCase()} is suppressed by the account`,
        details: { addresses: [asked.toLowerCase(), gone].sort(), reasons: { [gone]: "bounced", [asked.toLowerCase()]: "manual" } }
      }
    })
    expect((await mailroom.GET("/v1/api/suppressions", { params: { query: { sort: "address:asc" } } })).data?.data.map((s) => [s.address, s.reason]))
      .toEqual([[asked.toLowerCase(), "manual"], [gone, "bounced"]].sort((a, b) => a[0]!.localeCompare(b[0]!)))

    for (const [body, field] of [[{ address: "not an address" }, "address"], [{}, "address"], [{ address: "a@b.test\r\nBcc: x@y.test" }, "address"]] as const) {
      const bad = await mailroom.POST("/v1/api/suppressions", { body: body as never })
      expect(bad.response.status).toBe(400)
      expect(bad.error).toMatchObject({ error: { code: "VALIDATION_ERROR", details: { [field]: expect.any(String) } } })
    }
    // An internationalized domain is kept in punycode, and removed as written in either form, any case.
    const reader = `${fresh("reader")}@bücher.test`
    const stored = reader.replace("bücher.test", "xn--bcher-kva.test")
    expect((await mailroom.POST("/v1/api/suppressions", { body: { address: reader } })).data?.data.address).toBe(stored)
    const removed = await mailroom.DELETE("/v1/api/suppressions/{address}", { params: { path: { address: reader.replace("bücher", "BÜCHER") } } })
    expect(removed.data).toEqual({ success: true, data: { address: stored, deleted: true } })
  })

  it("keeps a recipient's local part as written in the envelope and the delivery record (RFC 5321 §2.4); the domain lower-cased, the address once", async () => {
    const { box, mailroom } = await sender()
    const local = `Ada.Lovelace.${fresh("case")}`
    const sent = await send(mailroom, box, { to: [`${local}@Partner.TEST`], cc: [`${local.toLowerCase()}@partner.test`], subject: "Case", text: "As written." })
    expect(sent.response.status).toBe(202)
    const message = await arrived(sent.data!.data.message_id)
    expect(message.rcptTo).toEqual([`${local}@partner.test`])
    const email = await settled(mailroom, sent.data!.data.email_id)
    expect(email.delivery).toMatchObject([{ recipient: `${local}@partner.test`, status: "sent" }])

    // Bounced as written, suppressed in any case.
    const gone = `Gone.${fresh("case")}@partner.test`
    world.mx.script(gone, [550])
    const bounced = await settled(mailroom, (await send(mailroom, box, { to: [gone], subject: "Still there?", text: "?" })).data!.data.email_id)
    expect(bounced.delivery).toMatchObject([{ recipient: gone, status: "bounced" }])
    const again = await send(mailroom, box, { to: [gone.toLowerCase()], subject: "Still there?", text: "?" })
    expect(again.error).toMatchObject({ error: { code: "RECIPIENT_SUPPRESSED", details: { addresses: [gone.toLowerCase()] } } })
  })

  it("an address here without a mailbox bounces and is suppressed until a mailbox is made there, for it and its subaddresses", async () => {
    const { box, mailroom } = await sender()
    const local = fresh("later")
    const [bare, tagged] = [`${local}@${DOMAIN}`, `${local}+news@${DOMAIN}`]
    const first = await send(mailroom, box, { to: [bare, tagged], subject: "Anyone?", text: "Hello" })
    const bounced = await settled(mailroom, first.data!.data.email_id)
    expect(bounced.delivery?.map((d) => [d.recipient, d.status, d.last_response?.slice(0, 9)])).toEqual(
      expect.arrayContaining([[bare, "bounced", "550 5.1.1"], [tagged, "bounced", "550 5.1.1"]])
    )
    expect(bounced.delivery).toHaveLength(2)
    const refused = await send(mailroom, box, { to: [bare], subject: "Anyone now?", text: "Hello" })
    expect(refused.error).toMatchObject({ error: { code: "RECIPIENT_SUPPRESSED", details: { addresses: [bare] } } })

    // Someone else makes the mailbox: it is a new recipient, and both of the sender's suppressions go.
    const made = await newBox(suite.url, { user: await withApiKey(suite.url), localPart: local })
    expect((await mailroom.GET("/v1/api/suppressions", {})).data?.data).toEqual([])
    const second = await send(mailroom, box, { to: [bare, tagged], subject: "Welcome", text: "Hello again" })
    expect(second.response.status).toBe(202)
    const delivered = await settled(mailroom, second.data!.data.email_id)
    expect(delivered.delivery?.map((d) => d.status)).toEqual(["sent", "sent"])
    const inbox = await until("the mail in the new mailbox", async () => {
      const listed = await createClient({ baseUrl: suite.url, apiKey: made.user.apiKey }).GET("/v1/api/mailboxes/{mailboxId}/emails", {
        params: { path: { mailboxId: made.mailboxId } }
      })
      return (listed.data?.data.length ?? 0) >= 1 ? listed.data!.data : undefined
    })
    expect(inbox[0]).toMatchObject({ subject: "Welcome" })
  })

  it("a bounce report (RFC 3464) to the bounce address marks the recipient bounced and suppresses it; the report is not mail", async () => {
    const { box, mailroom } = await sender()
    const to = `${fresh("later")}@partner.test`
    const sent = await send(mailroom, box, { to: [to], subject: "Accepted, then bounced", text: "?" })
    const emailId = sent.data!.data.email_id
    expect((await settled(mailroom, emailId)).delivery).toMatchObject([{ recipient: to, status: "sent" }])

    await reportBounce(emailId, to)
    const bounced = await until("the report applied", async () => {
      const { data } = await mailroom.GET("/v1/api/emails/{emailId}", { params: { path: { emailId } } })
      return data?.data.delivery?.[0]?.status === "bounced" ? data.data.delivery[0] : undefined
    }, 20_000, 200, 2_000)
    expect(bounced).toMatchObject({ recipient: to, status: "bounced", last_response: "550 5.1.1 The mailbox is gone" })
    const suppressed = await mailroom.GET("/v1/api/suppressions", {})
    expect(suppressed.data?.data.map((s) => s.address)).toEqual([to])
    const listed = await mailroom.GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId: box.mailboxId } } })
    expect(listed.data?.data.map((e) => e.email_id)).toEqual([emailId])

    // A bounce address that no sent email has is refused at RCPT.
    const forged = nodemailer.createTransport({ host: "127.0.0.1", port: suite.server.smtpPort, secure: false, ignoreTLS: true })
    try {
      await expect(forged.sendMail({ envelope: { from: "", to: ["bounces+eml_000000000000000000000000@agents.localhost"] }, raw: bounceReport(emailId, to) }))
        .rejects.toMatchObject({ responseCode: 550 })
    } finally {
      forged.close()
    }
  })

  it("each recipient gets a bounce address of its own: a report to it changes only that recipient, even beside others at its domain, and one failing onward is its; the bare address and a wrong tag are refused", async () => {
    const { box, mailroom } = await sender()
    await upgrade(suite.url, box.user.apiKey, "pro")
    const [here, beside, there] = [`${fresh("here")}@partner.test`, `${fresh("beside")}@partner.test`, `${fresh("there")}@elsewhere.test`]
    const emailId = (await send(mailroom, box, { to: [here, beside, there], subject: "To three people", text: "?" })).data!.data.email_id
    expect((await settled(mailroom, emailId)).delivery).toMatchObject([{ status: "sent" }, { status: "sent" }, { status: "sent" }])
    const addresses = [here, beside, there].map((to) => bounceAddressOf(emailId, to))
    expect(new Set(addresses).size).toBe(3)
    const elsewhere = addresses[2]!
    // One transaction each (one envelope sender each), the message the same.
    const copies = world.mx.delivered().filter((m) => m.raw.includes(`Message-ID: <${emailId}@`))
    expect(copies.map((m) => m.rcptTo).sort()).toEqual([[beside], [here], [there]].sort())

    // The first recipient knows its own bounce address (its Return-Path): its reports about the
    // others, at its own domain or another, a bounce and a complaint, are taken (as any report is)
    // and change nothing.
    await report(emailId, bounceReport(emailId, beside), here)
    await report(emailId, bounceReport(emailId, there), here)
    await report(emailId, feedbackReport(emailId, "abuse", beside), here)
    // A report about itself is applied.
    await report(emailId, bounceReport(emailId, here), here)
    await until("the report about the first recipient applied", async () => {
      const { data } = await mailroom.GET("/v1/api/emails/{emailId}", { params: { path: { emailId } } })
      return data?.data.delivery?.find((d) => d.recipient === here)?.status === "bounced" ? true : undefined
    }, 20_000, 200, 2_000)
    // (The ones before it were taken first; given time, they would have been applied by now.)
    await new Promise((resolve) => setTimeout(resolve, 500))
    const { data } = await mailroom.GET("/v1/api/emails/{emailId}", { params: { path: { emailId } } })
    expect(data?.data.delivery?.filter((d) => d.recipient !== here).map((d) => d.status)).toEqual(["sent", "sent"])
    expect((await mailroom.GET("/v1/api/suppressions", {})).data?.data.map((s) => s.address)).toEqual([here])

    // Addresses that were never sent are refused at RCPT: the bare one, a tag changed by one
    // character, and another email's tag.
    const tag = elsewhere.slice(elsewhere.indexOf("-") + 1, elsewhere.indexOf("@"))
    const other = (await send(mailroom, box, { to: [`${fresh("other")}@elsewhere.test`], subject: "Another", text: "?" })).data!.data.email_id
    await settled(mailroom, other)
    const forged = [
      `bounces+${emailId}@agents.localhost`,
      elsewhere.replace(`-${tag}@`, `-${tag.slice(0, -1)}${tag.endsWith("0") ? "1" : "0"}@`),
      bounceAddressOf(other, "elsewhere.test").replace(other, emailId)
    ]
    const transport = nodemailer.createTransport({ host: "127.0.0.1", port: suite.server.smtpPort, secure: false, ignoreTLS: true })
    try {
      for (const to of forged) {
        await expect(transport.sendMail({ envelope: { from: "", to: [to] }, raw: bounceReport(emailId, there) }), to)
          .rejects.toMatchObject({ responseCode: 550, response: expect.stringContaining("5.1.1") })
      }
    } finally {
      transport.close()
    }
    const after = await mailroom.GET("/v1/api/emails/{emailId}", { params: { path: { emailId } } })
    expect(after.data?.data.delivery?.find((d) => d.recipient === there)).toMatchObject({ status: "sent" })

    // The second recipient's mail went on (an alias, a forward) and failed there: the report to its
    // bounce address names an address the email was never sent to, and is the second recipient's.
    await report(emailId, bounceReport(emailId, `${fresh("onward")}@elsewhere.test`), beside)
    const onward = await until("the onward failure applied", async () => {
      const { data } = await mailroom.GET("/v1/api/emails/{emailId}", { params: { path: { emailId } } })
      const delivery = data?.data.delivery?.find((d) => d.recipient === beside)
      return delivery?.status === "bounced" ? delivery : undefined
    }, 20_000, 200, 2_000)
    expect(onward.last_response).toBe("550 5.1.1 The mailbox is gone")
    const { data: final } = await mailroom.GET("/v1/api/emails/{emailId}", { params: { path: { emailId } } })
    expect(final?.data.delivery?.find((d) => d.recipient === there)).toMatchObject({ status: "sent" })
  })

  it("a complaint (ARF) to the bounce address suppresses the recipient who reported spam and tells the account; the delivery stays sent", async () => {
    const { box, mailroom } = await sender()
    const hook = await mailroom.POST("/v1/api/webhooks", { body: { url: `${hooks.url}/complained-${box.mailboxId}`, events: ["email.complained"] } })
    expect(hook.response.status).toBe(201)
    const reader = `${fresh("reader")}@partner.test`
    const sent = await send(mailroom, box, { to: [reader], subject: "Our offer", text: "Buy now" })
    const emailId = sent.data!.data.email_id
    expect((await settled(mailroom, emailId)).delivery).toMatchObject([{ recipient: reader, status: "sent" }])

    // The provider left the recipient out, as most do: the email had one.
    await report(emailId, feedbackReport(emailId, "abuse"))
    const [told] = await hooks.waitFor(`/complained-${box.mailboxId}`, 1)
    expect(JSON.parse(told!.body)).toEqual({
      event: "email.complained",
      timestamp: expect.any(String),
      data: {
        email_id: emailId,
        message_id: sent.data!.data.message_id,
        mailbox_id: box.mailboxId,
        thread_id: sent.data!.data.thread_id,
        recipient: reader,
        feedback_type: "abuse",
        reported_by: "feedback.partner.test"
      }
    })
    expect((await mailroom.GET("/v1/api/suppressions", {})).data?.data).toEqual([{
      address: reader,
      reason: "complained",
      last_response: "Reported as spam (abuse) by feedback.partner.test",
      email_id: emailId,
      created_at: expect.any(String)
    }])
    const email = await mailroom.GET("/v1/api/emails/{emailId}", { params: { path: { emailId } } })
    expect(email.data?.data.delivery).toMatchObject([{ recipient: reader, status: "sent", complained_at: expect.any(String) }])
    const listed = await mailroom.GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId: box.mailboxId } } })
    expect(listed.data?.data.map((e) => e.email_id)).toEqual([emailId])
    const stats = await mailroom.GET("/v1/api/stats", { params: { query: { mailbox_id: box.mailboxId } } })
    expect(stats.data?.data).toMatchObject({ sent: 1, recipients: { sent: 1 }, complaints: 1, complaint_rate: 1 })

  })

  it("a complaint about an email to two recipients suppresses the one its bounce address was made for: named (any case), or named by nobody; other feedback changes nothing", async () => {
    const { box, mailroom } = await sender()
    await upgrade(suite.url, box.user.apiKey, "pro")
    await mailroom.POST("/v1/api/webhooks", { body: { url: `${hooks.url}/complained-${box.mailboxId}`, events: ["email.complained"] } })
    const [one, two] = [`${fresh("one")}@partner.test`, `${fresh("two")}@partner.test`]
    const both = (await send(mailroom, box, { to: [one, two], subject: "Our offer again", text: "Buy now" })).data!.data.email_id
    await settled(mailroom, both)
    await report(both, feedbackReport(both, "not-spam", one), one)
    await report(both, feedbackReport(both, "abuse", two.toUpperCase()), two)
    const [told] = await hooks.waitFor(`/complained-${box.mailboxId}`, 1)
    expect(JSON.parse(told!.body).data).toMatchObject({ email_id: both, recipient: two })
    expect((await mailroom.GET("/v1/api/suppressions", {})).data?.data.map((s) => [s.address, s.reason])).toEqual([[two, "complained"]])
    // The one before it (accepted first) was told nothing.
    await new Promise((resolve) => setTimeout(resolve, 500))
    expect(hooks.received(`/complained-${box.mailboxId}`)).toHaveLength(1)
    const refused = await send(mailroom, box, { to: [two], subject: "?", text: "?" })
    expect(refused.error).toMatchObject({ error: { code: "RECIPIENT_SUPPRESSED", message: `Not sent: ${two} reported your mail as spam and is suppressed` } })
    // Most providers leave the recipient out: the bounce address it came to names it.
    await report(both, feedbackReport(both, "abuse"), one)
    const [, second] = await hooks.waitFor(`/complained-${box.mailboxId}`, 2)
    expect(JSON.parse(second!.body).data).toMatchObject({ email_id: both, recipient: one })
  })

  it("a complaint mailed to a mailbox of the account (its feedback loop's address) is applied when its provider is authenticated; it stays mail", async () => {
    const { box, mailroom } = await sender()
    const loop = await newBox(suite.url, { user: box.user, localPart: fresh("fbl") })
    const reader = `${fresh("reader")}@partner.test`
    const emailId = (await send(mailroom, box, { to: [reader], subject: "Our offer", text: "Buy now" })).data!.data.email_id
    await settled(mailroom, emailId)
    const inLoop = (n: number) =>
      until(`${n} reports in the loop's mailbox`, async () => {
        const { data } = await mailroom.GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId: loop.mailboxId } } })
        return data && data.data.length >= n ? data.data : undefined
      }, 20_000, 200, 2_000)
    const raw = feedbackReport(emailId, "abuse").replace(`To: bounces+${emailId}@agents.localhost`, `To: ${loop.address}`)

    // Anyone can write a report: one its provider did not sign is kept as mail, and changes nothing.
    await mailReport(loop.address, raw, false)
    expect((await inLoop(1))[0]).toMatchObject({ subject: "Email feedback report", labels: expect.arrayContaining(["unauthenticated"]) })
    expect((await mailroom.GET("/v1/api/suppressions", {})).data?.data).toEqual([])

    await mailReport(loop.address, raw, true)
    await inLoop(2)
    const suppressed = await until("the complaint applied", async () => {
      const { data } = await mailroom.GET("/v1/api/suppressions", {})
      return data?.data.length ? data.data : undefined
    }, 20_000, 200, 2_000)
    expect(suppressed).toMatchObject([{ address: reader, reason: "complained", email_id: emailId }])

    // About another account's email, it changes nothing here or there.
    const other = await sender()
    const theirs = (await send(other.mailroom, other.box, { to: [`${fresh("theirs")}@partner.test`], subject: "Theirs", text: "?" })).data!.data.email_id
    await settled(other.mailroom, theirs)
    await mailReport(loop.address, feedbackReport(theirs, "abuse"), true)
    await inLoop(3)
    expect((await other.mailroom.GET("/v1/api/suppressions", {})).data?.data).toEqual([])
  })

  it("a complaint mailed to the feedback loop's mailbox names only a recipient its provider hosts; another provider's is left alone", async () => {
    const { box, mailroom } = await sender()
    const loop = await newBox(suite.url, { user: box.user, localPart: fresh("fbl") })
    // feedback.partner.test speaks for partner.test's users, not elsewhere.test's (whose address any
    // other recipient could give it).
    const [away, near] = [`${fresh("away")}@elsewhere.test`, `${fresh("near")}@partner.test`]
    const emailId = (await send(mailroom, box, { to: [away, near], subject: "To both", text: "?" })).data!.data.email_id
    await settled(mailroom, emailId)
    const report = (recipient: string) =>
      feedbackReport(emailId, "abuse", recipient).replace(`To: bounces+${emailId}@agents.localhost`, `To: ${loop.address}`)
    await mailReport(loop.address, report(away), true)
    await mailReport(loop.address, report(near), true)
    const suppressed = await until("the complaint about partner.test's recipient applied", async () => {
      const { data } = await mailroom.GET("/v1/api/suppressions", {})
      return data?.data.length ? data.data : undefined
    }, 20_000, 200, 2_000)
    // (The report about elsewhere.test's was mailed first: given time, it would have been applied by now.)
    await new Promise((resolve) => setTimeout(resolve, 500))
    expect((await mailroom.GET("/v1/api/suppressions", {})).data?.data.map((s) => s.address)).toEqual([near])
    expect(suppressed.map((s) => s.address)).toEqual([near])
  })

  it("a recipient that bounces another message while this one waits is suppressed, and not tried again", async () => {
    const { box, mailroom } = await sender()
    const late = `${fresh("late")}@partner.test`
    // An earlier message reached it; then its server starts answering 451 (and keeps to it).
    const earlier = await send(mailroom, box, { to: [late], subject: "First", text: "One" })
    const earlierId = earlier.data!.data.email_id
    expect((await settled(mailroom, earlierId)).delivery).toMatchObject([{ recipient: late, status: "sent" }])
    world.mx.script(late, [451])
    const waiting = await send(mailroom, box, { to: [late], subject: "Second", text: "Two" })
    const waitingId = waiting.data!.data.email_id
    await until("the second message deferred", async () => {
      const { data } = await mailroom.GET("/v1/api/emails/{emailId}", { params: { path: { emailId: waitingId } } })
      return data?.data.delivery?.[0]?.status === "deferred" ? true : undefined
    }, 20_000, 100)
    // The earlier message's bounce report arrives: the address joins the suppression list.
    await reportBounce(earlierId, late)
    const settledLater = await settled(mailroom, waitingId)
    expect(settledLater.delivery).toMatchObject([{
      recipient: late,
      status: "suppressed",
      last_response: expect.stringContaining("suppression list"),
      next_attempt_at: null
    }])
    // Its attempts are the tries its server heard (all but the earlier message's one): giving up on it
    // was not one more.
    const tries = world.mx.attempts(late).length
    expect(settledLater.delivery?.[0]?.attempts).toBe(tries - 1)
    // Not tried after that: the receiving server hears no more of it.
    await new Promise((resolve) => setTimeout(resolve, 1_500))
    expect(world.mx.attempts(late)).toHaveLength(tries)
  })

  it("a domain with a null MX fails at once, naming why", async () => {
    const { box, mailroom } = await sender()
    const sent = await send(mailroom, box, { to: ["someone@nomail.test"], subject: "Hello", text: "?" })
    const email = await settled(mailroom, sent.data!.data.email_id)
    expect(email.delivery).toMatchObject([{ recipient: "someone@nomail.test", status: "failed", last_response: expect.stringContaining("null MX") }])
  })
})

/** The unsubscribe link a delivered message carries (List-Unsubscribe), as a path on the suite's server. */
const unsubscribeLinkOf = (raw: Buffer) => {
  const text = raw.toString("latin1")
  // Folded onto a line of its own when long (RFC 5322 §2.2.3), as nodemailer writes it.
  const link = /^List-Unsubscribe:(?:\r\n)? <([^>]+)>\r$/m.exec(text)?.[1]
  expect(link).toMatch(/^http:\/\/localhost:\d+\/unsubscribe\/[A-Za-z0-9_-]{43}$/)
  expect(text).toMatch(/^List-Unsubscribe-Post: List-Unsubscribe=One-Click\r$/m)
  return new URL(link!).pathname
}

/** The page at `path`, as a mail app or a browser meets it. */
const visit = async (path: string, init?: RequestInit) => {
  const response = await fetch(`${suite.url}${path}`, init)
  return { status: response.status, type: response.headers.get("content-type"), html: await response.text() }
}

/** RFC 8058's one-click POST, as a mail app's Unsubscribe button sends it. */
const oneClick = (path: string) =>
  visit(path, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: "List-Unsubscribe=One-Click" })

describe("one-click unsubscribe", () => {
  it("a message sent with list_unsubscribe carries a signed link of its own; GET shows it, the mail app's POST unsubscribes, once; the account hears it", async () => {
    const { box, mailroom } = await sender()
    const hook = await mailroom.POST("/v1/api/webhooks", { body: { url: `${hooks.url}/unsubscribed-${box.mailboxId}`, events: ["email.unsubscribed"] } })
    expect(hook.response.status).toBe(201)
    const reader = `${fresh("Reader")}@partner.test`
    const sent = await send(mailroom, box, {
      to: [{ name: "Reader", address: reader }],
      subject: "This week's news",
      text: "Hello.\n\nNo more of these: {{unsubscribe_url}}",
      html: `<p>Hello.</p><p><a href="{{unsubscribe_url}}">Unsubscribe</a></p>`,
      list_unsubscribe: true
    })
    expect(sent.response.status).toBe(202)
    const message = await arrived(sent.data!.data.message_id)
    const path = unsubscribeLinkOf(message.raw)
    // Signed, both headers included (RFC 8058 §4): mail apps check before they offer the button.
    const verdict = await dkimVerify(message.raw, { resolver: world.resolver() })
    expect(verdict.results.map((r: { status: { result: string } }) => r.status.result)).toEqual(["pass"])
    const signed = /^DKIM-Signature:[^]*?\bh=([^;]+);/m.exec(message.raw.toString("latin1"))![1]!.replace(/\s+/g, "").split(":")
    expect(signed).toEqual(expect.arrayContaining(["list-unsubscribe", "list-unsubscribe-post"]))
    // The body's placeholder is the link, in each part.
    const parsed = await simpleParser(message.raw)
    expect(parsed.text).toContain(`No more of these: http://localhost:`)
    expect(parsed.text).toContain(path)
    expect(parsed.html).toContain(`<a href="http://localhost:`)
    expect(`${parsed.text}${parsed.html}`).not.toContain("{{unsubscribe_url}}")

    // A GET (a link checker, a preview) changes nothing.
    const shown = await visit(path)
    expect(shown).toMatchObject({ status: 200, type: expect.stringContaining("text/html") })
    expect(shown.html).toContain(`Stop mail from <strong>${box.address}</strong> to <strong>${reader.toLowerCase()}</strong>?`)
    expect(shown.html).toContain(`<form method="post">`)
    expect((await mailroom.GET("/v1/api/suppressions", {})).data?.data).toEqual([])

    const done = await oneClick(path)
    expect(done.status).toBe(200)
    expect(done.html).toContain("You are unsubscribed")
    expect((await mailroom.GET("/v1/api/suppressions", {})).data?.data).toEqual([{
      address: reader.toLowerCase(),
      reason: "unsubscribed",
      last_response: "Unsubscribed with the message's List-Unsubscribe link",
      email_id: sent.data!.data.email_id,
      created_at: expect.any(String)
    }])
    const [told] = await hooks.waitFor(`/unsubscribed-${box.mailboxId}`, 1)
    expect(JSON.parse(told!.body)).toEqual({
      event: "email.unsubscribed",
      timestamp: expect.any(String),
      data: { email_id: sent.data!.data.email_id, message_id: sent.data!.data.message_id, mailbox_id: box.mailboxId, recipient: reader.toLowerCase() }
    })

    // Again (the person presses twice, the page's own button): the same page, nothing more.
    const again = await visit(path, { method: "POST" })
    expect(again).toMatchObject({ status: 200 })
    expect(again.html).toContain("You are unsubscribed")
    expect((await visit(path)).html).toContain("You are unsubscribed")
    const refused = await send(mailroom, box, { to: [reader], subject: "One more", text: "?" })
    expect(refused.error).toMatchObject({
      error: { code: "RECIPIENT_SUPPRESSED", message: `Not sent: ${reader.toLowerCase()} unsubscribed and is suppressed`, details: { reasons: { [reader.toLowerCase()]: "unsubscribed" } } }
    })
    await new Promise((resolve) => setTimeout(resolve, 300))
    expect(hooks.received(`/unsubscribed-${box.mailboxId}`)).toHaveLength(1)

    // Lifted by the account, the link still works: the person's wish stands. Its email deleted too.
    await mailroom.DELETE("/v1/api/suppressions/{address}", { params: { path: { address: reader.toLowerCase() } } })
    await mailroom.DELETE("/v1/api/emails/{emailId}", { params: { path: { emailId: sent.data!.data.email_id } } })
    const form = new FormData()
    form.set("List-Unsubscribe", "One-Click")
    expect((await visit(path, { method: "POST", body: form })).status).toBe(200)
    expect((await mailroom.GET("/v1/api/suppressions", {})).data?.data.map((s) => [s.address, s.reason])).toEqual([[reader.toLowerCase(), "unsubscribed"]])
    await hooks.waitFor(`/unsubscribed-${box.mailboxId}`, 2)
  })

  it("refuses list_unsubscribe with more than one recipient by its field; an unknown link is a 404 page; a reply and a draft may offer it", async () => {
    const { box, mailroom } = await sender()
    const [one, two] = [`${fresh("one")}@partner.test`, `${fresh("two")}@partner.test`]
    for (const body of [{ to: [one, two] }, { to: [one], bcc: [two] }]) {
      const refused = await send(mailroom, box, { ...body, subject: "News", text: "Hello", list_unsubscribe: true })
      expect(refused.response.status).toBe(400)
      expect(refused.error).toMatchObject({ error: { code: "VALIDATION_ERROR", details: { list_unsubscribe: expect.stringContaining("one recipient") } } })
    }
    const wrong = await send(mailroom, box, { to: [one], subject: "News", text: "Hello", list_unsubscribe: "yes" })
    expect(wrong.error).toMatchObject({ error: { code: "VALIDATION_ERROR", details: { list_unsubscribe: expect.any(String) } } })
    // Without it, no header, and the placeholder is left as written.
    const plain = await send(mailroom, box, { to: [one], subject: "Plain", text: "Keep {{unsubscribe_url}} as it is" })
    const plainRaw = (await arrived(plain.data!.data.message_id)).raw.toString("latin1")
    expect(plainRaw).not.toMatch(/^List-Unsubscribe/im)
    expect(plainRaw).toContain("Keep {{unsubscribe_url}} as it is")

    for (const unknown of ["/unsubscribe/not-a-link", `/unsubscribe/${"A".repeat(43)}`]) {
      expect(await visit(unknown)).toMatchObject({ status: 404, html: expect.stringContaining("This link is not valid") })
      expect(await oneClick(unknown)).toMatchObject({ status: 404, html: expect.stringContaining("This link is not valid") })
    }

    // A reply to the message sent above, and a draft sent by a person, each with a link of its own.
    const reply = await mailroom.POST("/v1/api/emails/{emailId}/reply", {
      params: { path: { emailId: plain.data!.data.email_id } },
      body: { text: "Following up", list_unsubscribe: true }
    })
    expect(reply.response.status).toBe(202)
    const replyPath = unsubscribeLinkOf((await arrived(reply.data!.data.message_id)).raw)
    const draft = await mailroom.POST("/v1/api/mailboxes/{mailboxId}/drafts", {
      params: { path: { mailboxId: box.mailboxId } },
      body: { to: [two], subject: "Drafted", text: "Approved by a person", list_unsubscribe: true }
    })
    expect(draft.data?.data).toMatchObject({ list_unsubscribe: true })
    const fromDraft = await mailroom.POST("/v1/api/mailboxes/{mailboxId}/drafts/{draftId}/send", {
      params: { path: { mailboxId: box.mailboxId, draftId: draft.data!.data.draft_id } }
    })
    const draftPath = unsubscribeLinkOf((await arrived(fromDraft.data!.data.message_id)).raw)
    expect(draftPath).not.toBe(replyPath)
    expect((await oneClick(draftPath)).status).toBe(200)
    expect((await mailroom.GET("/v1/api/suppressions", {})).data?.data.map((s) => [s.address, s.reason])).toEqual([[two, "unsubscribed"]])
  })
})

/** A list's message to `to` from news@feedback.partner.test, with `headers` (its List-Unsubscribe), as its server sends it. */
const listMessage = (to: string, subject: string, headers: ReadonlyArray<string>) =>
  [
    "From: Partner News <fbl@feedback.partner.test>",
    `To: ${to}`,
    `Subject: ${subject}`,
    `Message-ID: <${fresh("news")}@feedback.partner.test>`,
    "MIME-Version: 1.0",
    ...headers,
    "Content-Type: text/plain; charset=utf-8",
    "",
    "This week at Partner: nothing much.",
    ""
  ].join("\r\n")

describe("unsubscribing from a list the mailbox receives", () => {
  /** Deliver a list's message to `box` (signed by its sender, or not) and answer its email id once stored. */
  const received = async (mailroom: MailroomFetchClient, box: Box, headers: ReadonlyArray<string>, signed = true) => {
    const subject = fresh("News")
    await mailReport(box.address, listMessage(box.address, subject, headers), signed)
    const listed = await until(`"${subject}" stored`, async () => {
      const { data } = await mailroom.GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId: box.mailboxId } } })
      return data?.data.find((e) => e.subject === subject)
    }, 20_000, 200, 2_000)
    return listed.email_id
  }
  const unsubscribe = (mailroom: MailroomFetchClient, emailId: string) =>
    mailroom.POST("/v1/api/emails/{emailId}/unsubscribe", { params: { path: { emailId } } })
  /** A sender on the pro plan: each test waits for several messages, reading the list each time. */
  const proSender = async () => {
    const made = await sender()
    await upgrade(suite.url, made.box.user.apiKey, "pro")
    return made
  }

  it("one-click first (RFC 8058's POST to the sender), else a message to the mailto address; what the list offers decides", async () => {
    const { box, mailroom } = await proSender()
    const oneClick = `/list-unsubscribe-${box.mailboxId}`
    hooks.script(oneClick, [202])
    const both = await received(mailroom, box, [
      `List-Unsubscribe: <mailto:leave@partner.test?subject=stop>, <${hooks.url}${oneClick}>`,
      "List-Unsubscribe-Post: List-Unsubscribe=One-Click"
    ])
    const clicked = await unsubscribe(mailroom, both)
    expect(clicked.response.status).toBe(200)
    expect(clicked.data?.data).toEqual({ email_id: both, method: "one_click", url: `${hooks.url}${oneClick}`, status: 202, address: null, sent_email_id: null })
    const [post] = hooks.received(oneClick)
    expect(post).toMatchObject({ body: "List-Unsubscribe=One-Click", headers: { "content-type": "application/x-www-form-urlencoded" } })

    // A mailto alone: a message from the mailbox, with the URI's subject.
    const mailto = await received(mailroom, box, ["List-Unsubscribe: <mailto:leave@partner.test?subject=stop%20please>"])
    const mailed = await unsubscribe(mailroom, mailto)
    expect(mailed.data?.data).toMatchObject({ email_id: mailto, method: "mailto", url: null, address: "leave@partner.test", sent_email_id: expect.stringMatching(/^eml_/) })
    const message = await until("the unsubscribe message at the MX", async () =>
      world.mx.delivered().find((m) => m.rcptTo.includes("leave@partner.test") && m.raw.toString("latin1").includes("Subject: stop please")))
    expect(message.raw.toString("latin1")).toMatch(new RegExp(`^From: ${box.address.replace(/\./g, "\\.")}\r$`, "m"))

    // The one-click address refuses, and a mailto is there: it is used instead.
    const refusing = `/list-refuses-${box.mailboxId}`
    hooks.script(refusing, [500])
    const fallback = await received(mailroom, box, [
      `List-Unsubscribe: <${hooks.url}${refusing}>, <mailto:leave@partner.test>`,
      "List-Unsubscribe-Post: List-Unsubscribe=One-Click"
    ])
    expect((await unsubscribe(mailroom, fallback)).data?.data).toMatchObject({ method: "mailto", address: "leave@partner.test" })
  })

  it("a list sent from a mailbox here, read by a mailbox here: the reader's unsubscribe uses the link without the network", async () => {
    const list = await proSender()
    const reader = await proSender()
    const subject = fresh("Here's news")
    await send(list.mailroom, list.box, { to: [reader.box.address], subject, text: "Hello.", list_unsubscribe: true })
    const received = await until(`"${subject}" received`, async () => {
      const { data } = await reader.mailroom.GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId: reader.box.mailboxId } } })
      return data?.data.find((e) => e.subject === subject)
    }, 20_000, 200, 2_000)
    const done = await unsubscribe(reader.mailroom, received.email_id)
    expect(done.data?.data).toEqual({
      email_id: received.email_id,
      method: "one_click",
      url: expect.stringMatching(/^http:\/\/localhost:\d+\/unsubscribe\/[A-Za-z0-9_-]{43}$/),
      status: 200,
      address: null,
      sent_email_id: null
    })
    expect((await list.mailroom.GET("/v1/api/suppressions", {})).data?.data.map((s) => [s.address, s.reason])).toEqual([[reader.box.address, "unsubscribed"]])
  })

  it("refuses what it cannot or should not do: by reason, with the page a person may open; a refused one-click alone is 502", async () => {
    const { box, mailroom } = await proSender()
    const refusing = `/list-refuses-alone-${box.mailboxId}`
    hooks.script(refusing, [500])
    const cases: Array<[ReadonlyArray<string>, boolean, number, string, Record<string, unknown>]> = [
      [[], true, 422, "UNSUBSCRIBE_UNAVAILABLE", { reason: "none" }],
      [["List-Unsubscribe: <https://partner.test/preferences?u=1>"], true, 422, "UNSUBSCRIBE_UNAVAILABLE", { reason: "page", url: "https://partner.test/preferences?u=1" }],
      [["List-Unsubscribe: <mailto:leave@partner.test>"], false, 422, "UNSUBSCRIBE_UNAVAILABLE", { reason: "unauthenticated" }],
      [[`List-Unsubscribe: <${hooks.url}${refusing}>`, "List-Unsubscribe-Post: List-Unsubscribe=One-Click"], true, 502, "UNSUBSCRIBE_FAILED", {
        url: `${hooks.url}${refusing}`,
        status: 500
      }]
    ]
    for (const [headers, signed, status, code, details] of cases) {
      const emailId = await received(mailroom, box, headers, signed)
      const refused = await unsubscribe(mailroom, emailId)
      expect(refused.response.status, JSON.stringify(headers)).toBe(status)
      expect(refused.error).toMatchObject({ success: false, error: { code, message: expect.any(String), details: { email_id: emailId, ...details } } })
    }
    const sent = (await send(mailroom, box, { to: [`${fresh("to")}@partner.test`], subject: "Ours", text: "?" })).data!.data.email_id
    expect((await unsubscribe(mailroom, sent)).error).toMatchObject({ error: { code: "UNSUBSCRIBE_UNAVAILABLE", details: { reason: "sent" } } })
    const missing = await unsubscribe(mailroom, "eml_000000000000000000000000")
    expect(missing.response.status).toBe(404)
    expect(missing.error).toMatchObject({ error: { code: "NOT_FOUND" } })
  })
})

describe("sending within this Mailroom", () => {
  it("delivers to a mailbox here through the inbound path, without the network", async () => {
    const { box, mailroom } = await sender()
    const other = await sender()
    const before = world.mx.delivered().length
    const sent = await send(mailroom, box, { to: [other.box.address], subject: "Internal memo", text: "Lunch at noon" })
    const email = await settled(mailroom, sent.data!.data.email_id)
    expect(email.delivery).toMatchObject([{ recipient: other.box.address, status: "sent", attempts: 1 }])
    const arrived = await until("memo arrived", async () => {
      const { data } = await other.mailroom.GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId: other.box.mailboxId } } })
      return data?.data[0]
    })
    expect(arrived).toMatchObject({ direction: "inbound", subject: "Internal memo", from: box.address, message_id: sent.data!.data.message_id })
    // Nothing for it reached the network's MX (this suite's earlier sends, retried, may land there meanwhile).
    expect(world.mx.delivered().slice(before).filter((m) => m.rcptTo.includes(other.box.address))).toEqual([])

    // Sent mail is searchable by its sender, like received mail.
    const found = await until("the sent memo is searchable", async () => {
      const { data } = await mailroom.POST("/v1/search", { body: { query: "lunch at noon", mode: "text" } as never })
      return data && data.data.length > 0 ? data.data : undefined
      // Few probes: searches are limited to 10 a minute on the free plan.
    }, 30_000, 500, 4_000)
    // With whom it went to, as the email's own `to`, so that a sent result says it without reading the email.
    expect(found.map((r) => [r.email_id, r.direction, r.to, r.cc])).toEqual([[sent.data!.data.email_id, "outbound", [other.box.address], []]])
  })
})

describe("reply all and forward", () => {
  it("reply-all answers the sender and the other recipients minus the mailbox; forward carries the attachments, text ones in their charset", async () => {
    const { box, mailroom } = await sender()
    const colleague = await sender()
    const watcher = `${fresh("cc")}@partner.test`
    const csv = Buffer.from("quarter,revenue\nQ3,42\n")
    const latin1 = Buffer.from("Caf\xe9 cr\xe8me, 12 \xa4", "latin1")
    const original = await send(colleague.mailroom, colleague.box, {
      to: [{ name: "Ada, the agent", address: box.address }],
      cc: [watcher],
      subject: "Figures",
      text: "See the figures.",
      attachments: [
        { filename: "q3.csv", content_type: "text/csv", content: csv.toString("base64") },
        { filename: "notes.txt", content_type: "text/plain; charset=iso-8859-1", content: latin1.toString("base64") }
      ]
    })
    const received = await until("the figures arrived", async () => {
      const { data } = await mailroom.GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId: box.mailboxId } } })
      return data?.data[0]
    })

    const answer = await mailroom.POST("/v1/api/emails/{emailId}/reply-all", {
      params: { path: { emailId: received.email_id } },
      body: { text: "Thanks, all." }
    })
    expect(answer.response.status).toBe(202)
    const replied = await settled(mailroom, answer.data!.data.email_id)
    expect(replied).toMatchObject({ subject: "Re: Figures", thread_id: received.thread_id, to: [colleague.box.address] })
    expect(replied.delivery!.map((d) => [d.recipient, d.status]).sort()).toEqual([[colleague.box.address, "sent"], [watcher, "sent"]].sort())
    const parsed = await simpleParser((await arrived(answer.data!.data.message_id)).raw)
    expect(parsed.inReplyTo).toBe(original.data!.data.message_id)
    expect(parsed.cc).toMatchObject({ value: [{ address: watcher }] })
    // A copy the caller asks for is kept, to the mailbox itself too: only what the original gives leaves it out.
    const copied = await mailroom.POST("/v1/api/emails/{emailId}/reply", {
      params: { path: { emailId: received.email_id } },
      body: { text: "Noted.", cc: [box.address] }
    })
    expect(copied.response.status).toBe(202)
    expect((await settled(mailroom, copied.data!.data.email_id)).cc).toEqual([box.address])

    const forwarded = await mailroom.POST("/v1/api/emails/{emailId}/forward", {
      params: { path: { emailId: received.email_id } },
      body: { to: [`${fresh("fwd")}@partner.test`], text: "FYI" }
    })
    expect(forwarded.response.status).toBe(202)
    const fwdParsed = await simpleParser((await arrived(forwarded.data!.data.message_id)).raw)
    expect(fwdParsed.subject).toBe("Fwd: Figures")
    expect(fwdParsed.text).toContain("FYI")
    // The original's header fields as it came: display names (a comma in one quoted) and its Cc.
    expect(fwdParsed.text).toContain(
      `---------- Forwarded message ---------\nFrom: ${colleague.box.address}\nDate: `
    )
    expect(fwdParsed.text).toContain(`Subject: Figures\nTo: "Ada, the agent" <${box.address}>\nCc: ${watcher}\n`)
    expect(fwdParsed.text).toContain("See the figures.")
    // Each in the charset it came in (ASCII needs none): a mail program reads "Café crème, 12 ¤", not "Caf� cr�me".
    expect(fwdParsed.attachments.map((a) => [a.filename, a.content.toString("hex"), a.headers.get("content-type")])).toEqual([
      ["q3.csv", csv.toString("hex"), { value: "text/csv", params: { name: "q3.csv" } }],
      ["notes.txt", latin1.toString("hex"), { value: "text/plain", params: { charset: "iso-8859-1", name: "notes.txt" } }]
    ])
    // Mailroom's own copy of the forward serves it so too.
    const { data: fwdCopy } = await mailroom.GET("/v1/api/emails/{emailId}", { params: { path: { emailId: forwarded.data!.data.email_id } } })
    const notes = fwdCopy!.data.attachments.find((a) => a.filename === "notes.txt")!
    const download = await mailroom.GET("/v1/api/emails/{emailId}/attachments/{attachmentId}", {
      params: { path: { emailId: forwarded.data!.data.email_id, attachmentId: notes.attachment_id } },
      parseAs: "arrayBuffer"
    })
    expect([download.response.headers.get("content-type"), Buffer.from(download.data!).toString("hex")]).toEqual([
      "text/plain; charset=iso-8859-1",
      latin1.toString("hex")
    ])

    // A note written in HTML alone is in the plain-text part too.
    const htmlNote = await mailroom.POST("/v1/api/emails/{emailId}/forward", {
      params: { path: { emailId: received.email_id } },
      body: { to: [`${fresh("fwd")}@partner.test`], html: "<p>See <b>below</b></p>" }
    })
    expect(htmlNote.response.status).toBe(202)
    const htmlParsed = await simpleParser((await arrived(htmlNote.data!.data.message_id)).raw)
    expect(htmlParsed.text).toMatch(/^See below\s+---------- Forwarded message/)
    // The attachments it carries count towards the message's 100.
    const crowded = await mailroom.POST("/v1/api/emails/{emailId}/forward", {
      params: { path: { emailId: received.email_id } },
      body: { to: [`${fresh("fwd")}@partner.test`], text: "x", attachments: Array.from({ length: 99 }, (_, i) => ({ filename: `${i}.txt`, content: "aGk=" })) }
    })
    expect([crowded.response.status, crowded.error?.error.details]).toEqual([400, {
      attachments: "must list at most 98 attachments: the email forwarded carries 2 of the 100 a message may have"
    }])
  })

  it("reply-all leaves out the address the email came to when the mailbox has been renamed since, and its subaddresses", async () => {
    const { box, mailroom } = await sender()
    const colleague = await sender()
    const watcher = `${fresh("cc")}@partner.test`
    const [local, domain] = box.address.split("@") as [string, string]
    await send(colleague.mailroom, colleague.box, { to: [box.address], cc: [watcher, `${local}+notes@${domain}`], subject: "Plans", text: "The plans." })
    const received = await until("the plans arrived", async () => {
      const { data } = await mailroom.GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId: box.mailboxId } } })
      return data?.data[0]
    })
    const renamed = await mailroom.PATCH("/v1/api/mailboxes/{mailboxId}", {
      params: { path: { mailboxId: box.mailboxId } },
      body: { local_part: fresh("renamed"), domain }
    })
    expect(renamed.response.status).toBe(200)

    const answer = await mailroom.POST("/v1/api/emails/{emailId}/reply-all", { params: { path: { emailId: received.email_id } }, body: { text: "Noted." } })
    expect(answer.response.status).toBe(202)
    const replied = await settled(mailroom, answer.data!.data.email_id)
    expect(replied.delivery!.map((d) => d.recipient).sort()).toEqual([colleague.box.address, watcher].sort())
  })

  it("replying to an email of another account is 404 NOT_FOUND", async () => {
    const { mailroom } = await sender()
    const answer = await mailroom.POST("/v1/api/emails/{emailId}/reply", {
      params: { path: { emailId: "eml_not_yours" } },
      body: { text: "?" }
    })
    expect(answer.response.status).toBe(404)
    expect(answer.error).toMatchObject({ error: { code: "NOT_FOUND", details: { email_id: "eml_not_yours" } } })
  })
})

describe("drafts", () => {
  const draftsOf = (mailroom: MailroomFetchClient, box: Box) => ({
    create: (body: Record<string, unknown>) =>
      mailroom.POST("/v1/api/mailboxes/{mailboxId}/drafts", { params: { path: { mailboxId: box.mailboxId } }, body: body as never }),
    update: (draftId: string, body: Record<string, unknown>) =>
      mailroom.PATCH("/v1/api/mailboxes/{mailboxId}/drafts/{draftId}", { params: { path: { mailboxId: box.mailboxId, draftId } }, body: body as never }),
    send: (draftId: string, body?: { if_updated_at?: string }) =>
      mailroom.POST("/v1/api/mailboxes/{mailboxId}/drafts/{draftId}/send", {
        params: { path: { mailboxId: box.mailboxId, draftId } },
        ...(body === undefined ? {} : { body: body as never })
      }),
    get: (draftId: string) =>
      mailroom.GET("/v1/api/mailboxes/{mailboxId}/drafts/{draftId}", { params: { path: { mailboxId: box.mailboxId, draftId } } }),
    remove: (draftId: string) =>
      mailroom.DELETE("/v1/api/mailboxes/{mailboxId}/drafts/{draftId}", { params: { path: { mailboxId: box.mailboxId, draftId } } })
  })

  it("refuses a draft past the plan's message size, made or edited so (413 with size and limit): it could never be sent", async () => {
    const { box, mailroom } = await sender()
    const drafts = draftsOf(mailroom, box)
    // 8 MiB of bytes are ~11.2 MB in base64, past the free plan's 10 MiB a message.
    const big = { filename: "big.bin", content_type: "application/octet-stream", content: Buffer.alloc(8 * 1024 * 1024, 7).toString("base64") }
    const made = await drafts.create({ to: ["someone@partner.test"], subject: "Too big", text: "x", attachments: [big] })
    expect(made.response.status).toBe(413)
    expect(made.error).toMatchObject({ error: { code: "PAYLOAD_TOO_LARGE", details: { limit: 10 * 1024 * 1024 } } })
    expect((made.error as unknown as { error: { details: { size: number } } }).error.details.size).toBeGreaterThan(10 * 1024 * 1024)

    const small = await drafts.create({ to: ["someone@partner.test"], subject: "Small", text: "x" })
    expect(small.response.status).toBe(201)
    const grown = await drafts.update(small.data!.data.draft_id, { attachments: [big] })
    expect(grown.response.status).toBe(413)
    expect(grown.error).toMatchObject({ error: { code: "PAYLOAD_TOO_LARGE" } })
    expect((await drafts.get(small.data!.data.draft_id)).data!.data).toMatchObject({ subject: "Small", attachments: [] })
  })

  it("an agent drafts, a person edits and sends it; sending again answers the same email; a sent draft is 409 to edit, and deleting it keeps its email", async () => {
    const { box, mailroom } = await sender()
    const drafts = draftsOf(mailroom, box)
    const to = `${fresh("approve")}@partner.test`
    const created = await drafts.create({ to: [to], subject: "Proposal", text: "Draft text" })
    expect(created.response.status).toBe(201)
    const draft = created.data!.data
    expect(draft).toMatchObject({ status: "draft", to: [to], subject: "Proposal", send_at: null, email_id: null, mailbox_id: box.mailboxId })
    const edited = await drafts.update(draft.draft_id, { text: "Approved text" })
    expect(edited.data?.data).toMatchObject({ subject: "Proposal", text: "Approved text" })
    const listed = await mailroom.GET("/v1/api/mailboxes/{mailboxId}/drafts", { params: { path: { mailboxId: box.mailboxId } } })
    expect(listed.data?.data.map((d) => d.draft_id)).toEqual([draft.draft_id])

    const sent = await drafts.send(draft.draft_id)
    expect(sent.response.status).toBe(202)
    const message = await arrived(sent.data!.data.message_id)
    expect((await simpleParser(message.raw)).text?.trim()).toBe("Approved text")
    const again = await drafts.send(draft.draft_id)
    expect(again.data?.data).toEqual(sent.data?.data)
    expect((await drafts.get(draft.draft_id)).data?.data).toMatchObject({ status: "sent", email_id: sent.data!.data.email_id })
    const late = await drafts.update(draft.draft_id, { text: "Too late" })
    expect(late.response.status).toBe(409)
    expect(late.error).toMatchObject({ error: { code: "CONFLICT", details: { draft_id: draft.draft_id, status: "sent" } } })
    // Deleting it now removes the draft, not the mail: the answer says it had been sent, as which email.
    const removed = await drafts.remove(draft.draft_id)
    expect(removed.data?.data).toEqual({ draft_id: draft.draft_id, deleted: true, email_id: sent.data!.data.email_id })
    expect((await mailroom.GET("/v1/api/emails/{emailId}", { params: { path: { emailId: sent.data!.data.email_id } } })).response.status).toBe(200)
    expect((await drafts.get(draft.draft_id)).response.status).toBe(404)

    // A reply draft made a plain one again (null), and back.
    const answering = (await drafts.create({ in_reply_to: sent.data!.data.email_id, text: "Follow-up" })).data!.data
    expect(answering.in_reply_to).toBe(sent.data!.data.email_id)
    const plain = await drafts.update(answering.draft_id, { in_reply_to: null, to: [to] })
    expect(plain.data?.data).toMatchObject({ in_reply_to: null, forward_of: null, to: [to] })
    expect((await drafts.update(answering.draft_id, { forward_of: sent.data!.data.email_id })).data?.data)
      .toMatchObject({ in_reply_to: null, forward_of: sent.data!.data.email_id })

    // A content field set to null is removed (answered null, as every field a draft does not hold): the
    // HTML part, the reply-to and the copies go; the rest stays.
    const full = (await drafts.create({ to: [to], cc: [to], reply_to: to, subject: "Both", text: "Plain", html: "<p>Rich</p>" })).data!.data
    const trimmed = (await drafts.update(full.draft_id, { html: null, reply_to: null, cc: null })).data!.data
    expect(trimmed).toMatchObject({ to: [to], subject: "Both", text: "Plain", html: null, reply_to: null, cc: null, bcc: null, headers: null })
    expect((await drafts.get(full.draft_id)).data!.data).toEqual(trimmed)
  })

  it("sends or edits only the version that was read (if_updated_at): a draft its agent changed since is 409 with its updated_at now, nothing sent or changed", async () => {
    const { box, mailroom } = await sender()
    const drafts = draftsOf(mailroom, box)
    const bob = `${fresh("bob")}@partner.test`
    const mallory = `${fresh("mallory")}@elsewhere.test`
    const read = (await drafts.create({ to: [bob], subject: "Hello Bob", text: "Original" })).data!.data
    const draftId = read.draft_id
    // The agent changes it after the person read it: another recipient, other words.
    const changed = (await drafts.update(draftId, { to: [bob, mallory], text: "Pay Mallory instead" })).data!.data
    expect(Date.parse(changed.updated_at)).toBeGreaterThan(Date.parse(read.updated_at))
    const staleness = { draft_id: draftId, status: "draft", updated_at: changed.updated_at, if_updated_at: read.updated_at }

    // Approving the version read is refused, and nothing goes: the draft is the agent's, untouched.
    const approved = await drafts.send(draftId, { if_updated_at: read.updated_at })
    expect(approved.response.status).toBe(409)
    expect(approved.error).toMatchObject({ error: { code: "CONFLICT", details: staleness } })
    expect(approved.error!.error.message).toMatch(/^The draft was changed after it was read .*nothing was sent/)
    expect((await drafts.get(draftId)).data!.data).toEqual(changed)
    // So is an edit of the version read: what the agent changed is not kept unseen, nor overwritten.
    const edited = await drafts.update(draftId, { subject: "Hello again", if_updated_at: read.updated_at })
    expect(edited.response.status).toBe(409)
    expect(edited.error).toMatchObject({ error: { code: "CONFLICT", details: staleness } })
    expect((await drafts.get(draftId)).data!.data).toEqual(changed)
    // A precondition that is no time is the caller's mistake.
    const malformed = await drafts.send(draftId, { if_updated_at: "yesterday" })
    expect(malformed.response.status).toBe(400)
    expect(malformed.error).toMatchObject({ error: { code: "VALIDATION_ERROR", details: { if_updated_at: expect.stringMatching(/ISO 8601/) } } })

    // The version read now is edited (the same instant in another offset is the same version), then approved as saved.
    const offset = new Date(Date.parse(changed.updated_at) + 2 * 3600_000).toISOString().replace("Z", "+02:00")
    const reviewed = await drafts.update(draftId, { to: [bob], text: "Reviewed", if_updated_at: offset })
    expect(reviewed.response.status).toBe(200)
    expect(reviewed.data!.data).toMatchObject({ to: [bob], text: "Reviewed" })
    const sent = await drafts.send(draftId, { if_updated_at: reviewed.data!.data.updated_at })
    expect(sent.response.status).toBe(202)
    const message = await arrived(sent.data!.data.message_id)
    expect(message.rcptTo).toEqual([bob])
    expect((await simpleParser(message.raw)).text?.trim()).toBe("Reviewed")
    // Sent, the same approval retried answers the same email (it sends nothing).
    const again = await drafts.send(draftId, { if_updated_at: reviewed.data!.data.updated_at })
    expect(again.response.status).toBe(202)
    expect(again.data?.data).toEqual(sent.data?.data)

    // Without one (an agent sending its own draft) nothing is checked, as before; an empty body is none.
    const own = (await drafts.create({ to: [bob], subject: "Agent's own", text: "First" })).data!.data
    expect((await drafts.update(own.draft_id, { text: "Second" })).response.status).toBe(200)
    const unchecked = await drafts.send(own.draft_id, {})
    expect(unchecked.response.status).toBe(202)
    expect((await simpleParser((await arrived(unchecked.data!.data.message_id)).raw)).text?.trim()).toBe("Second")
    expect(world.mx.delivered().some((m) => m.rcptTo.includes(mallory))).toBe(false)
  })

  it("answers mail whose From is no address: a reply says so, a reply-all goes to the others, a draft leaves To to a person and still reads", async () => {
    const { box, mailroom } = await sender()
    await upgrade(suite.url, box.user.apiKey, "pro")
    const drafts = draftsOf(mailroom, box)
    const watcher = `${fresh("cc")}@partner.test`
    await sendMail(suite.server.smtpPort, {
      envelope: { from: "bounces@partner.test", to: [box.address] },
      raw: `From: <<not an address>>\r\nTo: ${box.address}\r\nCc: ${watcher}\r\nSubject: Odd sender\r\nMessage-ID: <${fresh("odd")}@partner.test>\r\n\r\nWho am I?\r\n`
    })
    const received = await until("the odd email arrived", async () => {
      const { data } = await mailroom.GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId: box.mailboxId } } })
      return data?.data.find((e) => e.subject === "Odd sender")
    })
    const path = { params: { path: { emailId: received.email_id } }, body: { text: "Hello?" } }
    const noAddress = expect.stringMatching(/^has no address to reply to: its sender's is ".*not an address.*", which mail cannot be sent to; name the recipients in cc or bcc$/)

    const reply = await mailroom.POST("/v1/api/emails/{emailId}/reply", path)
    expect([reply.response.status, reply.error?.error.code, reply.error?.error.details]).toEqual([400, "VALIDATION_ERROR", { email_id: noAddress }])
    // To all: the others on it, nobody made up from the From.
    const all = await mailroom.POST("/v1/api/emails/{emailId}/reply-all", path)
    expect(all.response.status).toBe(202)
    expect((await settled(mailroom, all.data!.data.email_id)).delivery!.map((d) => d.recipient)).toEqual([watcher])

    // A draft answering it is made without a To (a person names one); every list of drafts still reads.
    const draft = await drafts.create({ in_reply_to: received.email_id, text: "Who are you?" })
    expect(draft.response.status).toBe(201)
    expect(draft.data!.data).toMatchObject({ subject: "Re: Odd sender", in_reply_to: received.email_id })
    expect(draft.data!.data.to).toBeNull()
    const listed = await mailroom.GET("/v1/api/mailboxes/{mailboxId}/drafts", { params: { path: { mailboxId: box.mailboxId } } })
    expect(listed.data?.data.map((d) => d.draft_id)).toEqual([draft.data!.data.draft_id])
    expect((await mailroom.GET("/v1/api/drafts", {})).response.status).toBe(200)
    // Sent as it stands, it names nobody: the person is told to, by the field to fill.
    const unsent = await drafts.send(draft.data!.data.draft_id)
    expect([unsent.response.status, unsent.error?.error.details]).toEqual([400, { to: "must list at least one recipient (to, cc or bcc)" }])
    const named = await drafts.update(draft.data!.data.draft_id, { to: [watcher] })
    expect(named.data?.data.to).toEqual([watcher])
  })

  it("a reply or forward draft shows whom it goes to and its subject, as a mail client fills them; what a person leaves there is what is sent", async () => {
    const { box, mailroom } = await sender()
    // More requests than the free plan's minute holds.
    await upgrade(suite.url, box.user.apiKey, "pro")
    const colleague = await sender()
    const drafts = draftsOf(mailroom, box)
    const watcher = `${fresh("cc")}@partner.test`
    await send(colleague.mailroom, colleague.box, { to: [box.address], cc: [{ name: "Wat Cher", address: watcher }], subject: "Budget", text: "Numbers?" })
    const received = await until("the question arrived", async () => {
      const { data } = await mailroom.GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId: box.mailboxId } } })
      return data?.data[0]
    })

    const draft = (await drafts.create({ in_reply_to: received.email_id, reply_all: true, text: "Agreed." })).data!.data
    expect(draft).toMatchObject({ to: [colleague.box.address], cc: [{ name: "Wat Cher", address: watcher }], subject: "Re: Budget", reply_all: true })
    // The person approving it drops the copy: nobody but the colleague gets it.
    expect((await drafts.update(draft.draft_id, { cc: [] })).data?.data).toMatchObject({ to: [colleague.box.address], cc: [] })
    const sent = await drafts.send(draft.draft_id)
    expect(sent.response.status).toBe(202)
    expect((await settled(mailroom, sent.data!.data.email_id)).delivery!.map((d) => d.recipient)).toEqual([colleague.box.address])

    // Made a forward instead: what the reply gave and nobody edited goes; the forward's subject comes.
    const other = (await drafts.create({ in_reply_to: received.email_id, text: "Hm." })).data!.data
    expect(other).toMatchObject({ to: [colleague.box.address], subject: "Re: Budget" })
    expect(other.cc).toBeNull()
    const forward = (await drafts.update(other.draft_id, { in_reply_to: null, forward_of: received.email_id })).data!.data
    expect(forward).toMatchObject({ forward_of: received.email_id, subject: "Fwd: Budget" })
    expect(forward.to).toBeNull()
    // Reply to all later: the others join the copies the draft has.
    const later = (await drafts.create({ in_reply_to: received.email_id, cc: ["boss@partner.test"], subject: "Budget (numbers)" })).data!.data
    expect(later).toMatchObject({ cc: ["boss@partner.test"], subject: "Budget (numbers)" })
    expect((await drafts.update(later.draft_id, { reply_all: true })).data?.data)
      .toMatchObject({ to: [colleague.box.address], cc: ["boss@partner.test", { name: "Wat Cher", address: watcher }], subject: "Budget (numbers)" })

    // What a person removes stays removed: no To, no Cc, no subject, a Bcc alone.
    const quiet = (await drafts.create({ in_reply_to: received.email_id, reply_all: true, text: "For the record." })).data!.data
    const audit = `${fresh("audit")}@partner.test`
    expect((await drafts.update(quiet.draft_id, { to: null, cc: null, subject: null, bcc: [audit] })).response.status).toBe(200)
    const recorded = await drafts.send(quiet.draft_id)
    expect(recorded.response.status).toBe(202)
    const recordedEmail = await settled(mailroom, recorded.data!.data.email_id)
    expect([recordedEmail.delivery!.map((d) => d.recipient), recordedEmail.subject]).toEqual([[audit], ""])
    // Left with nobody at all, it is refused as a send is.
    const nobody = (await drafts.create({ in_reply_to: received.email_id, text: "?" })).data!.data
    await drafts.update(nobody.draft_id, { to: null })
    const refused = await drafts.send(nobody.draft_id)
    expect([refused.response.status, refused.error?.error.details]).toEqual([400, { to: "must list at least one recipient (to, cc or bcc)" }])
    // Made a plain draft, it keeps the recipients and subject it shows.
    expect((await drafts.update(nobody.draft_id, { in_reply_to: null, to: [colleague.box.address] })).data?.data)
      .toMatchObject({ in_reply_to: null, to: [colleague.box.address], subject: "Re: Budget" })
    const kept = (await drafts.create({ in_reply_to: received.email_id, text: "Plain now." })).data!.data
    expect((await drafts.update(kept.draft_id, { in_reply_to: null })).data?.data).toMatchObject({ to: [colleague.box.address], subject: "Re: Budget" })

    const lonely = await drafts.create({ reply_all: true, to: [watcher], text: "?" })
    expect([lonely.response.status, lonely.error?.error]).toEqual([400, expect.objectContaining({
      code: "VALIDATION_ERROR",
      details: { reply_all: "is for a reply: give in_reply_to, the email it answers" }
    })])
  })

  it("lists drafts and suppressions in the order sort asks for; an unknown field is 400 naming the fields", async () => {
    const { box, mailroom } = await sender()
    const drafts = draftsOf(mailroom, box)
    const day = 86_400_000
    const later = (await drafts.create({ subject: "Later", send_at: new Date(Date.now() + 2 * day).toISOString() })).data!.data
    const sooner = (await drafts.create({ subject: "Sooner", send_at: new Date(Date.now() + day).toISOString() })).data!.data
    const unscheduled = (await drafts.create({ subject: "Whenever" })).data!.data
    const order = async (sort?: string) => {
      const listed = await mailroom.GET("/v1/api/mailboxes/{mailboxId}/drafts", {
        params: { path: { mailboxId: box.mailboxId }, query: sort === undefined ? {} : { sort } }
      })
      return listed.data?.data.map((d) => d.subject)
    }
    expect(await order()).toEqual([unscheduled.subject, sooner.subject, later.subject])
    expect(await order("created_at:asc")).toEqual([later.subject, sooner.subject, unscheduled.subject])
    // A draft that is not scheduled comes last either way.
    expect(await order("send_at:asc")).toEqual([sooner.subject, later.subject, unscheduled.subject])
    expect(await order("send_at:desc")).toEqual([later.subject, sooner.subject, unscheduled.subject])
    const badDrafts = await mailroom.GET("/v1/api/mailboxes/{mailboxId}/drafts", { params: { path: { mailboxId: box.mailboxId }, query: { sort: "subject:asc" } } })
    expect(badDrafts.response.status).toBe(400)
    expect(badDrafts.error?.error.details).toEqual({ sort: "must be <field>:<asc|desc> with field one of created_at, updated_at, send_at" })
    const badSuppressions = await mailroom.GET("/v1/api/suppressions", { params: { query: { sort: "reason:asc" } } })
    expect(badSuppressions.response.status).toBe(400)
    expect(badSuppressions.error?.error.details).toEqual({ sort: "must be <field>:<asc|desc> with field one of created_at, address" })
  })

  it("every mailbox's drafts come in one list, newest first (GET /drafts): not another account's, nor a deleted mailbox's", async () => {
    const { box, mailroom } = await sender()
    const second = await newBox(suite.url, { user: box.user })
    const third = await newBox(suite.url, { user: box.user })
    const first = (await draftsOf(mailroom, box).create({ subject: "First" })).data!.data
    const middle = (await draftsOf(mailroom, second).create({ subject: "Second" })).data!.data
    await draftsOf(mailroom, third).create({ subject: "Gone with its mailbox" })
    const last = (await draftsOf(mailroom, box).create({ subject: "Third" })).data!.data
    const stranger = await sender()
    await draftsOf(stranger.mailroom, stranger.box).create({ subject: "Not yours" })
    const deleted = await mailroom.DELETE("/v1/api/mailboxes/{mailboxId}", {
      params: { path: { mailboxId: third.mailboxId } },
      body: { confirm_email_address: third.address } as never
    })
    expect(deleted.response.status).toBe(200)

    const all = await mailroom.GET("/v1/api/drafts", {})
    expect(all.data?.data.map((d) => [d.draft_id, d.mailbox_id])).toEqual([
      [last.draft_id, box.mailboxId],
      [middle.draft_id, second.mailboxId],
      [first.draft_id, box.mailboxId]
    ])
    expect(all.data?.meta).toMatchObject({ total: 3 })
    const paged = await mailroom.GET("/v1/api/drafts", { params: { query: { limit: 1, offset: 1, sort: "created_at:asc" } } })
    expect(paged.data?.data.map((d) => d.draft_id)).toEqual([middle.draft_id])
    expect(paged.data?.meta).toMatchObject({ total: 3, limit: 1, offset: 1 })
    const bad = await mailroom.GET("/v1/api/drafts", { params: { query: { limit: 0 } } })
    expect(bad.response.status).toBe(400)
    expect(bad.error?.error).toMatchObject({ code: "VALIDATION_ERROR", details: { limit: expect.any(String) } })

    // By state: what awaits approval, apart from what went (a page of either holds only its own).
    const approved = (await draftsOf(mailroom, second).create({ to: [`${fresh("approved")}@partner.test`], subject: "Approved", text: "Go" })).data!.data
    expect((await draftsOf(mailroom, second).send(approved.draft_id)).response.status).toBe(202)
    const waiting = await mailroom.GET("/v1/api/drafts", { params: { query: { status: "draft" } } })
    expect(waiting.data?.data.map((d) => d.draft_id)).toEqual([last.draft_id, middle.draft_id, first.draft_id])
    const gone = await mailroom.GET("/v1/api/drafts", { params: { query: { status: "sent" } } })
    expect([gone.data?.meta.total, gone.data?.data.map((d) => d.draft_id)]).toEqual([1, [approved.draft_id]])
    const mailboxSent = await mailroom.GET("/v1/api/mailboxes/{mailboxId}/drafts", { params: { path: { mailboxId: second.mailboxId }, query: { status: "sent" } } })
    expect(mailboxSent.data?.data.map((d) => d.draft_id)).toEqual([approved.draft_id])
    const badStatus = await mailroom.GET("/v1/api/drafts", { params: { query: { status: "pending" as never } } })
    expect(badStatus.response.status).toBe(400)
    expect(badStatus.error?.error.details).toEqual({ status: "must be one of draft, sending, sent" })
  })

  it("a scheduled draft leaves within 1 s of send_at; a deleted one never does", async () => {
    const { box, mailroom } = await sender()
    const drafts = draftsOf(mailroom, box)
    const sendAt = new Date(Date.now() + 2_000)
    const kept = await drafts.create({ to: [`${fresh("sched")}@partner.test`], subject: "Scheduled", text: "On time", send_at: sendAt.toISOString() })
    const dropped = await drafts.create({ to: [`${fresh("dropped")}@partner.test`], subject: "Cancelled", text: "Never", send_at: sendAt.toISOString() })
    expect((await drafts.remove(dropped.data!.data.draft_id)).data?.data).toEqual({ draft_id: dropped.data!.data.draft_id, deleted: true, email_id: null })

    const message = await until("the scheduled draft at the MX", async () =>
      world.mx.delivered().find((m) => m.rcptTo.includes(kept.data!.data.to![0] as string)), 10_000, 50)
    // Sent (stored as an email of the mailbox and queued) within a second of its time.
    const draft = await drafts.get(kept.data!.data.draft_id)
    expect(draft.data?.data.status).toBe("sent")
    const email = await mailroom.GET("/v1/api/emails/{emailId}", { params: { path: { emailId: draft.data!.data.email_id! } } })
    const sentAt = Date.parse(email.data!.data.received_at)
    expect(sentAt).toBeGreaterThanOrEqual(sendAt.getTime())
    expect(sentAt - sendAt.getTime()).toBeLessThan(1_000)
    expect((await simpleParser(message.raw)).subject).toBe("Scheduled")
    await new Promise((resolve) => setTimeout(resolve, 1_000))
    expect(world.mx.delivered().some((m) => m.rcptTo.includes(dropped.data!.data.to![0] as string))).toBe(false)
  })

  it("refuses what cannot be a draft: a reply to another mailbox's email, a bad send_at, someone else's draft", async () => {
    const { box, mailroom } = await sender()
    const drafts = draftsOf(mailroom, box)
    const reply = await drafts.create({ in_reply_to: "eml_elsewhere", text: "?" })
    expect(reply.response.status).toBe(400)
    expect(reply.error).toMatchObject({ error: { code: "VALIDATION_ERROR", details: { in_reply_to: "must be the id of an email of this mailbox" } } })
    const when = await drafts.create({ text: "?", send_at: "tomorrow" })
    expect(when.response.status).toBe(400)
    expect(when.error).toMatchObject({ error: { code: "VALIDATION_ERROR", details: { send_at: expect.stringContaining("ISO 8601") } } })
    // Refused when made or edited, not only when a person approves it or its time comes: a mistyped
    // year in the past would send it at once, unreviewed; 51 recipients could never be sent.
    const lastYear = new Date(Date.now() - 365 * 86_400_000).toISOString()
    const past = await drafts.create({ to: ["a@partner.test"], text: "?", send_at: lastYear })
    expect([past.response.status, past.error?.error]).toEqual([400, {
      code: "VALIDATION_ERROR",
      message: expect.any(String),
      details: { send_at: "is in the past: give a time to come, or send the draft now" }
    }])
    const crowd = Array.from({ length: 51 }, (_, i) => `reader${i}@partner.test`)
    const many = await drafts.create({ to: crowd.slice(0, 30), bcc: crowd.slice(30), text: "?" })
    expect([many.response.status, many.error?.error.details]).toEqual([400, { to: "must list at most 50 recipients (to, cc and bcc together)" }])
    const made = (await drafts.create({ to: crowd.slice(0, 50), text: "Fifty" })).data!.data
    const crowded = await drafts.update(made.draft_id, { cc: ["one-more@partner.test"] })
    expect([crowded.response.status, crowded.error?.error.details]).toEqual([400, { to: "must list at most 50 recipients (to, cc and bcc together)" }])
    const late = await drafts.update(made.draft_id, { send_at: lastYear })
    expect([late.response.status, late.error?.error.details]).toEqual([400, { send_at: "is in the past: give a time to come, or send the draft now" }])
    const missing = await drafts.get("drf_missing")
    expect(missing.response.status).toBe(404)
    expect(missing.error).toMatchObject({ error: { code: "NOT_FOUND", details: { draft_id: "drf_missing" } } })
    const stranger = await sender()
    const theirs = await draftsOf(stranger.mailroom, stranger.box).create({ text: "mine" })
    const peek = await mailroom.GET("/v1/api/mailboxes/{mailboxId}/drafts/{draftId}", {
      params: { path: { mailboxId: stranger.box.mailboxId, draftId: theirs.data!.data.draft_id } }
    })
    expect(peek.response.status).toBe(404)
  })
})

describe("Idempotency-Key", () => {
  it("the same key and body answer the first answer and send once; another body is 409 IDEMPOTENCY_KEY_REUSED", async () => {
    const { box, mailroom } = await sender()
    const to = `${fresh("once")}@partner.test`
    const key = fresh("key")
    const body = { to: [to], subject: "Once", text: "Only once" }
    const [first, second] = await Promise.all([send(mailroom, box, body, key), send(mailroom, box, body, key)])
    expect(first.error ?? second.error).toBeUndefined()
    expect(first.response.status).toBe(202)
    expect(second.response.status).toBe(202)
    expect(second.data!.data).toEqual(first.data!.data)
    const third = await send(mailroom, box, body, key)
    expect(third.data!.data).toEqual(first.data!.data)
    await settled(mailroom, first.data!.data.email_id)
    expect(world.mx.delivered().filter((m) => m.rcptTo.includes(to))).toHaveLength(1)
    const sentList = await mailroom.GET("/v1/api/mailboxes/{mailboxId}/emails", {
      params: { path: { mailboxId: box.mailboxId }, query: { direction: "outbound" } }
    })
    expect(sentList.data?.meta.total).toBe(1)

    const other = await send(mailroom, box, { ...body, text: "Something else" }, key)
    expect(other.response.status).toBe(409)
    expect(other.error).toMatchObject({ error: { code: "IDEMPOTENCY_KEY_REUSED", details: { idempotency_key: key } } })
  })

  it("makes one draft of a create retried with its key (a person would see, and could approve, two); another body is 409", async () => {
    const { box, mailroom } = await sender()
    const key = fresh("draft-key")
    const body = { to: [`${fresh("once")}@partner.test`], subject: "Proposal", text: "For approval" }
    const create = (payload: typeof body) =>
      mailroom.POST("/v1/api/mailboxes/{mailboxId}/drafts", { params: { path: { mailboxId: box.mailboxId }, header: { "idempotency-key": key } }, body: payload })
    const [first, second] = await Promise.all([create(body), create(body)])
    expect([first.response.status, second.response.status]).toEqual([201, 201])
    expect(second.data!.data).toEqual(first.data!.data)
    expect((await create(body)).data!.data).toEqual(first.data!.data)
    const listed = await mailroom.GET("/v1/api/mailboxes/{mailboxId}/drafts", { params: { path: { mailboxId: box.mailboxId } } })
    expect(listed.data?.data.map((d) => d.draft_id)).toEqual([first.data!.data.draft_id])

    const other = await create({ ...body, text: "Something else" })
    expect(other.response.status).toBe(409)
    expect(other.error).toMatchObject({ error: { code: "IDEMPOTENCY_KEY_REUSED", details: { idempotency_key: key } } })
    // A key is the account's: one a send used is no draft's.
    const sentKey = fresh("send-key")
    expect((await send(mailroom, box, body, sentKey)).response.status).toBe(202)
    const reused = await mailroom.POST("/v1/api/mailboxes/{mailboxId}/drafts", {
      params: { path: { mailboxId: box.mailboxId }, header: { "idempotency-key": sentKey } },
      body
    })
    expect(reused.error).toMatchObject({ error: { code: "IDEMPOTENCY_KEY_REUSED" } })
  })
})

const sendBatch = (mailroom: MailroomFetchClient, box: Box, messages: ReadonlyArray<Record<string, unknown>>, idempotencyKey?: string) =>
  mailroom.POST("/v1/api/mailboxes/{mailboxId}/send/batch", {
    params: { path: { mailboxId: box.mailboxId }, header: idempotencyKey ? { "idempotency-key": idempotencyKey } : {} } as never,
    body: { messages } as never
  })

describe("batches", () => {
  it("sends every message of a batch, answered in order; the same key and body answer the same batch and send nothing more", async () => {
    const { box, mailroom } = await sender()
    const people = [fresh("ada"), fresh("grace"), fresh("linus")].map((name) => `${name}@partner.test`)
    const messages = [
      { to: [people[0]], subject: "Batch one", text: "First." },
      { to: [people[1]], subject: "Batch two", text: "Second. {{unsubscribe_url}}", list_unsubscribe: true },
      { to: [people[2]], cc: [people[0]], subject: "Batch three", text: "Third.", attachments: [{ filename: "a.txt", content: "aGk=" }] }
    ]
    const key = fresh("batch")
    const answer = await sendBatch(mailroom, box, messages, key)
    expect(answer.response.status).toBe(202)
    const accepted = answer.data!.data
    expect(accepted).toHaveLength(3)
    expect(new Set(accepted.map((a) => a.email_id)).size).toBe(3)
    for (const [i, one] of accepted.entries()) {
      expect(one).toEqual({ email_id: expect.stringMatching(/^eml_/), message_id: `<${one.email_id}@agents.localhost>`, thread_id: expect.any(String), status: "queued" })
      const email = await settled(mailroom, one.email_id)
      expect(email.subject).toBe(messages[i]!.subject)
      expect(email.delivery!.map((d) => [d.recipient, d.status]).sort()).toEqual(
        [...messages[i]!.to, ...(messages[i]!.cc ?? [])].map((recipient) => [recipient, "sent"]).sort()
      )
      const raw = (await arrived(one.message_id)).raw.toString()
      expect(raw.includes("List-Unsubscribe-Post")).toBe(i === 1)
    }

    const again = await sendBatch(mailroom, box, messages, key)
    expect(again.response.status).toBe(202)
    expect(again.data!.data).toEqual(accepted)
    const reused = await sendBatch(mailroom, box, messages.slice(1), key)
    expect(reused.response.status).toBe(409)
    expect(reused.error).toMatchObject({ error: { code: "IDEMPOTENCY_KEY_REUSED" } })
    const sentList = await mailroom.GET("/v1/api/mailboxes/{mailboxId}/emails", {
      params: { path: { mailboxId: box.mailboxId }, query: { direction: "outbound" } }
    })
    expect(sentList.data?.meta.total).toBe(3)
    // One transaction per recipient: the third message went to two.
    expect(world.mx.delivered().filter((m) => m.rcptTo.some((r) => people.includes(r)))).toHaveLength(4)
  })

  it("refuses the whole batch when any message is refused, naming it; nothing is sent", async () => {
    const { box, mailroom } = await sender()
    const fine = { to: ["fine@partner.test"], text: "Fine." }
    const refusals: Array<[ReadonlyArray<Record<string, unknown>>, Record<string, string>]> = [
      [[], { messages: "must list at least one message" }],
      [Array.from({ length: 101 }, () => fine), { messages: "must list at most 100 messages" }],
      [[fine, { to: ["not an address"], text: "x" }], { "messages.1.to.0": "must be an email address such as name@example.com" }],
      [[fine, fine, { to: [], text: "x" }], { "messages.2.to": "must list at least one recipient (to, cc or bcc)" }],
      [[{ to: ["a@partner.test"] }, fine], { "messages.0.text": "a message needs text or html" }]
    ]
    for (const [messages, details] of refusals) {
      const answer = await sendBatch(mailroom, box, messages)
      expect(answer.response.status).toBe(400)
      expect((answer.error as { error: { code: string; details: unknown } }).error).toMatchObject({ code: "VALIDATION_ERROR", details })
    }

    const gone = `${fresh("gone")}@partner.test`
    expect((await mailroom.POST("/v1/api/suppressions", { body: { address: gone } })).response.status).toBe(201)
    const suppressed = await sendBatch(mailroom, box, [fine, { to: [gone], text: "x" }])
    expect(suppressed.response.status).toBe(422)
    expect(suppressed.error).toMatchObject({
      error: { code: "RECIPIENT_SUPPRESSED", message: expect.stringMatching(/^messages\.1: Not sent: /), details: { addresses: [gone], messages: [1] } }
    })

    // The free plan's 100 sends (a day, and its period) cover the batch's messages or refuse it whole;
    // both used up, the refusal names the period, since tomorrow would refuse it too.
    expect((await send(mailroom, box, fine)).response.status).toBe(202)
    const past = await sendBatch(mailroom, box, Array.from({ length: 100 }, () => fine))
    expect(past.response.status).toBe(403)
    expect(past.error).toMatchObject({
      error: {
        code: "SEND_QUOTA",
        message: "The free plan sends at most 100 messages a billing period: 1 sent, 99 left, fewer than these 100",
        details: { window: "period", used: 1, limit: 100, plan: "free" }
      }
    })

    const sentList = await mailroom.GET("/v1/api/mailboxes/{mailboxId}/emails", {
      params: { path: { mailboxId: box.mailboxId }, query: { direction: "outbound" } }
    })
    expect(sentList.data?.meta.total).toBe(1)
  })
})

describe("refusals", () => {
  let box: Box
  let mailroom: MailroomFetchClient
  beforeAll(async () => {
    ;({ box, mailroom } = await sender())
    // Pro (100 requests a minute): the refusals below are more than free's 20.
    await upgrade(suite.url, box.user.apiKey, "pro")
  })

  it.each([
    [{ to: ["a@partner.test"], subject: "Hi\r\nBcc: victim@example.com", text: "x" }, { subject: "must not contain line breaks" }],
    [{ to: [{ name: "Ada\nBcc: victim@example.com", address: "a@partner.test" }], text: "x" }, { "to.0.name": "must not contain line breaks" }],
    [{ to: ["a@partner.test"], text: "x", headers: { "X-Note": "ok\r\nBcc: victim@example.com" } }, { "headers.X-Note": "must not contain line breaks" }],
    [{ to: ["a@partner.test"], text: "x", headers: { Bcc: "victim@example.com" } }, { headers: 'must name X- fields only (letters, digits, -): "Bcc" is not allowed' }],
    [{ to: ["a@partner.test"], text: "x", headers: { [`X-${"L".repeat(298)}`]: "v" } }, {
      headers: `must name fields of at most 102 characters: "X-${"L".repeat(38)}"… has 300`
    }],
    // Other control characters, which mail programs show as garbage or cut the value at; a tab is text.
    [{ to: ["a@partner.test"], subject: "Ding\u0007 dong", text: "x" }, { subject: "must not contain control characters" }],
    [{ to: [{ name: "Ada\u001b[31m", address: "a@partner.test" }], text: "x" }, { "to.0.name": "must not contain control characters" }],
    [{ to: ["a@partner.test"], text: "x", attachments: [{ filename: "a\u0008.pdf", content: "aGk=" }] }, { "attachments.0.filename": "must not contain control characters" }],
    [
      { to: ["a@partner.test"], html: "<img src=cid:logo>", attachments: [{ filename: "a.png", content: "aGk=", content_id: "logo" }, { filename: "b.png", content: "aGk=", content_id: "<logo>" }] },
      { attachments: 'must give each content_id to one attachment: "logo" is on two' }
    ],
    [{ to: ["not an address"], text: "x" }, { "to.0": "must be an email address such as name@example.com" }],
    [{ to: ["Ada <ada@partner.test>"], text: "x" }, {
      "to.0": 'must be an email address such as name@example.com; with a name, send {"name": "Ada", "address": "ada@example.com"}'
    }],
    [{ to: [], text: "x" }, { to: "must list at least one recipient (to, cc or bcc)" }],
    [{ to: Array.from({ length: 51 }, (_, i) => `r${i}@partner.test`), text: "x" }, { to: "must list at most 50 recipients (to, cc and bcc together)" }],
    [{ to: ["a@partner.test"], subject: "No body" }, { text: "a message needs text or html" }],
    [{ to: ["a@partner.test"], text: "x", attachments: [{ filename: "a.bin", content: "not base64!" }] }, { "attachments.0.content": "must be base64" }],
    [
      { to: ["a@partner.test"], text: "x", attachments: Array.from({ length: 101 }, (_, i) => ({ filename: `${i}.txt`, content: "aGk=" })) },
      { attachments: "must list at most 100 attachments" }
    ],
    // Values of the wrong type are told in words, never with the value sent or the schema's own notation.
    [{ to: "a@partner.test", text: "x" }, { to: "must be a list" }],
    [{ to: ["a@partner.test"], subject: 5, text: "x" }, { subject: "must be a string" }],
    [{ to: ["a@partner.test"], text: "x", headers: ["X-Note"] }, { headers: "must be an object" }],
    [{ to: ["a@partner.test"], subject: "s".repeat(5_000), text: "x" }, { subject: "must be a string at most 998 character(s) long" }],
    // A field a send does not have is refused, not dropped: send_at here would have sent the message now.
    [{ to: ["a@partner.test"], text: "x", send_at: "2030-01-01T00:00:00Z" }, {
      send_at: "is not a field here; the fields are to, cc, bcc, subject, reply_to, text, html, attachments, headers, list_unsubscribe"
    }]
  ])("refuses %j: 400 VALIDATION_ERROR with details %j", async (body, details) => {
    const answer = await send(mailroom, box, body)
    expect(answer.response.status).toBe(400)
    expect(answer.error).toMatchObject({ success: false, error: { code: "VALIDATION_ERROR" } })
    // Exactly these: an optional field's "Expected undefined, actual …" is not one of them.
    expect((answer.error as { error: { details: Record<string, unknown> } }).error.details).toEqual(details)
    expect(JSON.stringify(answer.error).length).toBeLessThan(2_000)
  })

  it("another account's mailbox, or none, is 404 NOT_FOUND, also among sends accepted at the same moment", async () => {
    // A user of its own: the suite's shared one stays well inside the free plan's 20 requests a minute.
    const me = await sender()
    const stranger = await sender()
    const attempt = (client: MailroomFetchClient, mailboxId: string) =>
      client.POST("/v1/api/mailboxes/{mailboxId}/send", { params: { path: { mailboxId } }, body: { to: ["a@partner.test"], text: "x" } })
    // Sent together, so that the mailboxes are looked up in one batch.
    const [mine, theirs, missing, own] = await Promise.all([
      attempt(me.mailroom, me.box.mailboxId),
      attempt(me.mailroom, stranger.box.mailboxId),
      attempt(me.mailroom, "mbx_missing"),
      attempt(stranger.mailroom, stranger.box.mailboxId)
    ])
    for (const [answer, mailboxId] of [[theirs, stranger.box.mailboxId], [missing, "mbx_missing"]] as const) {
      expect(answer.response.status).toBe(404)
      expect(answer.error).toMatchObject({ error: { code: "NOT_FOUND", details: { mailbox_id: mailboxId } } })
    }
    for (const [answer, owner] of [[mine, me], [own, stranger]] as const) {
      expect(answer.response.status).toBe(202)
      const sent = await me.mailroom.GET("/v1/api/emails/{emailId}", { params: { path: { emailId: answer.data!.data.email_id } } })
      expect(sent.response.status).toBe(owner === me ? 200 : 404)
    }
  })
})
