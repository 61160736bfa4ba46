/**
 * SMTP submission, as a mail program or an SMTP library meets it: nodemailer (and, where every reply
 * must be seen, a bare SMTP client) signs in to a started server's submission port with an API key and
 * sends from a mailbox; the mta resolves MX records through a DNS server this test runs and delivers to
 * a receiving SMTP server this test runs, where the message is checked as it arrived (an independent
 * verifier, mailauth, checks its DKIM signature against the key the test DNS publishes).
 */
import { dkimVerify } from "mailauth"
import { simpleParser } from "mailparser"
import * as net from "node:net"
import nodemailer from "nodemailer"
import { beforeAll, describe, expect, it } from "vitest"
import { createClient, type MailroomFetchClient } from "../../packages/client/src/fetch-client.ts"
import { withApiKey } from "../support/accounts.ts"
import { upgrade } from "../support/billing.ts"
import { type Box, fresh, newBox } from "../support/mailboxes.ts"
import { scrape } from "../support/metrics.ts"
import { useOutboundWorld } from "../support/outbound-world.ts"
import { sendMail } from "../support/send-mail.ts"
import { freePort, type SuiteServer, useSuiteServer } from "../support/server.ts"
import { connectSmtp, dataPayload, type SmtpSession } from "../support/smtp-client.ts"
import { withToken } from "../support/typed-client.ts"
import { until } from "../support/wait.ts"

let submissionPort: number
let suite: SuiteServer
/** A TCP load balancer's address: its connections open with a PROXY header (PROXY_PROTOCOL). */
const BALANCER = "127.0.0.7"

const world = useOutboundWorld()
beforeAll(async () => {
  submissionPort = await freePort()
})

useSuiteServer((s) => {
  suite = s
}, world.env({ SUBMISSION_PORT: () => String(submissionPort), PROXY_PROTOCOL: () => BALANCER }))

const owner = async (): Promise<{ box: Box; mailroom: MailroomFetchClient }> => {
  const box = await newBox(suite.url, { user: await withApiKey(suite.url) })
  return { box, mailroom: createClient({ baseUrl: suite.url, apiKey: box.user.apiKey }) }
}

/** A mail program's account on the submission port: any user name, the API key as the password. */
const transport = (apiKey: string) =>
  nodemailer.createTransport({
    host: "127.0.0.1",
    port: submissionPort,
    secure: false,
    auth: { user: "mailroom", pass: apiKey }
  })

/** A bare session signed in with `apiKey` (AUTH PLAIN). */
const signedIn = async (apiKey: string): Promise<SmtpSession> => {
  const session = await connectSmtp(submissionPort)
  expect((await session.command("EHLO client.test")).code).toBe(250)
  const auth = await session.command(`AUTH PLAIN ${Buffer.from(`\0agent\0${apiKey}`).toString("base64")}`)
  expect(auth.code).toBe(235)
  return session
}

const deliveredTo = (address: string, subject: string) =>
  until(`"${subject}" at ${address}`, async () => world.mx.delivered().find((m) => m.rcptTo.includes(address) && m.raw.includes(subject)), 20_000)

describe("SMTP submission", () => {
  it("sends a mail program's message as written, Bcc taken out, signed, kept as sent mail with its deliveries", async () => {
    const { box, mailroom } = await owner()
    const to = `${fresh("ada")}@partner.test`
    const hidden = `${fresh("grace")}@partner.test`
    const subject = `Réunion ✓ ${fresh("s")}`

    const info = await transport(box.user.apiKey).sendMail({
      from: { name: "Desk Agent", address: box.address },
      to,
      bcc: hidden,
      subject,
      text: "Agenda attached.\n",
      attachments: [{ filename: "agenda.txt", content: "1. Budget\n2. Hiring\n" }],
      headers: { "X-Ticket": "T-42" }
    })
    const queued = /^250 2\.0\.0 Ok: queued as (eml_\w+)/.exec(info.response)
    expect(queued).not.toBeNull()
    expect(info.accepted).toEqual([to, hidden])
    const emailId = queued![1]!

    const arrived = await deliveredTo(to, "Agenda attached")
    const copy = await deliveredTo(hidden, "Agenda attached")
    expect(copy.raw.equals(arrived.raw)).toBe(true)
    expect(arrived.mailFrom).toMatch(new RegExp(`^bounces\\+${emailId}-[0-9a-f]{16}@agents\\.localhost$`))
    const parsed = await simpleParser(arrived.raw)
    expect(parsed.subject).toBe(subject)
    expect(parsed.messageId).toBe(info.messageId)
    expect(parsed.headers.get("bcc")).toBeUndefined()
    expect(arrived.raw.toString()).not.toContain(hidden)
    expect(parsed.headers.get("x-ticket")).toBe("T-42")
    expect(parsed.attachments.map((a) => [a.filename, a.content.toString()])).toEqual([["agenda.txt", "1. Budget\n2. Hiring\n"]])
    const verified = await dkimVerify(Buffer.from(arrived.raw), { resolver: world.resolver() })
    expect(verified.results.map((r) => [r.signingDomain, r.status.result])).toEqual([["agents.localhost", "pass"]])

    const email = await until("the sent email delivered", async () => {
      const { data } = await mailroom.GET("/v1/api/emails/{emailId}", { params: { path: { emailId } } })
      return data?.data.delivery?.every((d) => d.status === "sent") ? data.data : undefined
    }, 20_000)
    expect(email).toMatchObject({
      direction: "outbound",
      labels: ["sent"],
      mailbox_id: box.mailboxId,
      message_id: info.messageId,
      subject
    })
    expect(email.delivery!.map((d) => d.recipient).sort()).toEqual([to, hidden].sort())
    // Its raw is exactly what the recipients got.
    const raw = await fetch(`${suite.url}/v1/api/emails/${emailId}/raw`, { headers: { "X-API-Key": box.user.apiKey } })
    expect(Buffer.from(await raw.arrayBuffer()).equals(arrived.raw)).toBe(true)
  })

  it("makes an 8-bit message 7-bit (quoted-printable, encoded words) so any server takes it; one with a UTF-8 address in its header goes with SMTPUTF8", async () => {
    const { box } = await owner()
    const session = await signedIn(box.user.apiKey)
    const tag = fresh("bits")
    const send = async (to: string, header: string, body: string, from = box.address) => {
      expect((await session.command(`MAIL FROM:<${box.address}> BODY=8BITMIME SMTPUTF8`)).code).toBe(250)
      expect((await session.command(`RCPT TO:<${to}>`)).code).toBe(250)
      const raw = `From: ${from}\r\nTo: ${to}\r\n${header}\r\nMIME-Version: 1.0\r\n` +
        `Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n${body}\r\n`
      expect((await session.data(Buffer.from(raw, "utf8"))).code).toBe(250)
    }
    const converted = `${fresh("ada")}@partner.test`
    const inHeader = `${fresh("zoe")}@partner.test`
    const plain = `${fresh("bob")}@partner.test`
    await send(converted, `Subject: Réunion ${tag}`, "Café au lait, 10 €")
    await send(inHeader, `Cc: jürgen@partner.test\r\nSubject: Cc ${tag}`, "Zoë's agenda")
    // The header From in another letter case is still the mailbox's.
    await send(plain, `Subject: Plain ${tag}`, "Nothing above 127 here", box.address.toUpperCase())
    // A recipient whose mailbox name is not ASCII is refused as the API refuses it.
    expect((await session.command(`MAIL FROM:<${box.address}>`)).code).toBe(250)
    expect(await session.command("RCPT TO:<jürgen@a.test>")).toEqual({
      code: 553,
      // (The test's client reads replies as Latin-1.)
      text: `5.6.7 <${Buffer.from("jürgen", "utf8").toString("latin1")}@a.test> must have an ASCII name before the @: internationalized mailbox names (SMTPUTF8) are not sent to`
    })
    await session.command("QUIT")

    const arrived = await deliveredTo(converted, tag)
    expect(arrived.mailFromArgs).toEqual({})
    expect(arrived.raw.some((byte) => byte > 127)).toBe(false)
    const parsed = await simpleParser(arrived.raw)
    expect([parsed.subject, parsed.text]).toEqual([`Réunion ${tag}`, "Café au lait, 10 €\n"])
    expect((await deliveredTo(inHeader, `Cc ${tag}`)).mailFromArgs).toEqual({ BODY: "8BITMIME", SMTPUTF8: true })
    expect((await deliveredTo(plain, `Plain ${tag}`)).mailFromArgs).toEqual({})
    // Kept as the mailbox spells its address, as the API's sends are.
    const { data } = await createClient({ baseUrl: suite.url, apiKey: box.user.apiKey }).GET("/v1/api/mailboxes/{mailboxId}/emails", {
      params: { path: { mailboxId: box.mailboxId }, query: { direction: "outbound" } }
    })
    expect(data!.data.map((email) => email.from)).toEqual([box.address, box.address, box.address])
  })

  it("asks the key again at the end of DATA: one narrowed away from the mailbox, or revoked, while the message was written sends nothing", async () => {
    const { box, mailroom } = await owner()
    const account = withToken(suite.url, box.user)
    const made = await account.POST("/v1/api-keys", { body: { name: "mail program", mailboxIds: [box.mailboxId] } })
    const { apiKey, keyId } = made.data!.data
    const other = await newBox(suite.url, { user: box.user })
    const session = await signedIn(apiKey)
    const written = async (change: () => Promise<unknown>) => {
      expect((await session.command(`MAIL FROM:<${box.address}>`)).code).toBe(250)
      expect((await session.command("RCPT TO:<ada@partner.test>")).code).toBe(250)
      expect((await session.command("DATA")).code).toBe(354)
      await change()
      await session.write(dataPayload(`From: ${box.address}\r\nTo: ada@partner.test\r\nSubject: Late\r\n\r\nHi.\r\n`))
      return session.reply()
    }
    const path = { params: { path: { id: keyId } } }
    expect(await written(() => account.PATCH("/v1/api-keys/{id}", { ...path, body: { mailboxIds: [other.mailboxId] } }))).toEqual({
      code: 550,
      text: "5.7.1 This API key no longer sends from this mailbox: nothing was sent"
    })
    await account.PATCH("/v1/api-keys/{id}", { ...path, body: { mailboxIds: [box.mailboxId] } })
    expect(await written(() => account.DELETE("/v1/api-keys/{id}", path))).toEqual({
      code: 535,
      text: "5.7.8 The API key is no longer valid: nothing was sent"
    })
    await session.close()
    const { data } = await mailroom.GET("/v1/api/mailboxes/{mailboxId}/emails", {
      params: { path: { mailboxId: box.mailboxId }, query: { direction: "outbound" } }
    })
    expect(data!.data).toEqual([])
  })

  it("threads a reply written in a mail program with the email it answers, and completes a bare message's Message-ID and Date", async () => {
    const { box, mailroom } = await owner()
    // Past free's 20 requests a minute when the question takes a while to be stored (CI's run of 16a4cc0).
    await upgrade(suite.url, box.user.apiKey, "pro")
    const subject = `Question ${fresh("q")}`
    await sendMail(suite.server.smtpPort, { from: "ada@partner.test", to: box.address, subject, text: "When is the meeting?" })
    const received = await until("the question stored", async () => {
      const { data } = await mailroom.GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId: box.mailboxId } } })
      return data?.data.find((e) => e.subject === subject)
    }, 20_000)
    const { data: question } = await mailroom.GET("/v1/api/emails/{emailId}", { params: { path: { emailId: received.email_id } } })

    // A message as a script writes it: no Message-ID, no Date, bare LF line ends.
    const session = await signedIn(box.user.apiKey)
    expect((await session.command(`MAIL FROM:<${box.address}>`)).code).toBe(250)
    expect((await session.command("RCPT TO:<ada@partner.test>")).code).toBe(250)
    expect((await session.command("RCPT TO:<boss@partner.test>")).code).toBe(250)
    const reply = await session.data(
      `From: ${box.address}\nTo: ada@partner.test\nBcc: boss@partner.test\nSubject: Re: ${subject}\nIn-Reply-To: ${question!.data.message_id}\n\nThursday at ten.\n`
    )
    await session.close()
    expect(reply.code).toBe(250)
    const emailId = /queued as (eml_\w+)/.exec(reply.text)![1]!

    const arrived = await deliveredTo("ada@partner.test", "Thursday at ten")
    const parsed = await simpleParser(arrived.raw)
    expect(parsed.messageId).toBe(`<${emailId}@agents.localhost>`)
    expect(parsed.date).toBeInstanceOf(Date)
    expect(arrived.raw.toString()).toContain("\r\n\r\nThursday at ten.\r\n")
    expect(arrived.raw.toString()).not.toMatch(/^Bcc:/im)
    expect((await deliveredTo("boss@partner.test", "Thursday at ten")).raw.equals(arrived.raw)).toBe(true)
    const sent = await until("the reply read back", async () => {
      const { data, response } = await mailroom.GET("/v1/api/emails/{emailId}", { params: { path: { emailId } } })
      if (response.status !== 200 && response.status !== 404) throw new Error(`GET /v1/api/emails/${emailId} answered ${response.status}`)
      return data?.data
    }, 10_000)
    expect(sent.thread_id).toBe(question!.data.thread_id)
    expect(sent.message_id).toBe(`<${emailId}@agents.localhost>`)
  })

  it("refuses, with a reply that says why, what a key may not send, and counts each reply by its code", async () => {
    const { box, mailroom } = await owner()
    const other = await owner()
    const before = await scrape(`${suite.url}/metrics`)

    // Nothing before AUTH; a wrong key three times ends the session.
    const anonymous = await connectSmtp(submissionPort)
    await anonymous.command("EHLO client.test")
    expect(await anonymous.command(`MAIL FROM:<${box.address}>`)).toEqual({ code: 530, text: expect.stringContaining("5.7.0 Authentication required") })
    const wrong = `AUTH PLAIN ${Buffer.from("\0agent\0mr_not_a_key").toString("base64")}`
    expect(await anonymous.command(wrong)).toEqual({ code: 535, text: expect.stringContaining("5.7.8") })
    expect((await anonymous.command(wrong)).code).toBe(535)
    expect(await anonymous.command(wrong)).toEqual({ code: 421, text: expect.stringContaining("Too many failed") })
    await until("the session closed", async () => anonymous.closed() || undefined, 5_000)

    // Another account's mailbox, a key limited to another mailbox, a read-only key.
    const session = await signedIn(box.user.apiKey)
    expect(await session.command(`MAIL FROM:<${other.box.address}>`)).toEqual({
      code: 553,
      text: `5.7.1 <${other.box.address}> is not a mailbox this API key sends from`
    })
    const limited = await withToken(suite.url, box.user).POST("/v1/api-keys", { body: { name: "elsewhere", mailboxIds: [(await newBox(suite.url, { user: box.user })).mailboxId] } })
    const limitedSession = await signedIn(limited.data!.data.apiKey)
    expect((await limitedSession.command(`MAIL FROM:<${box.address}>`)).code).toBe(553)
    await limitedSession.close()
    const readOnly = await withToken(suite.url, box.user).POST("/v1/api-keys", { body: { name: "reader", permission: "read_only" } })
    const readOnlySession = await signedIn(readOnly.data!.data.apiKey)
    expect(await readOnlySession.command(`MAIL FROM:<${box.address}>`)).toEqual({ code: 550, text: "5.7.1 This API key is read-only: it cannot send" })
    await readOnlySession.close()

    // The header's From must be the mailbox.
    expect((await session.command(`MAIL FROM:<${box.address}>`)).code).toBe(250)
    expect((await session.command("RCPT TO:<ada@partner.test>")).code).toBe(250)
    expect(await session.data(`From: ceo@partner.test\r\nTo: ada@partner.test\r\nSubject: Wire the money\r\n\r\nNow.\r\n`)).toEqual({
      code: 550,
      text: `5.7.1 From must be the sending mailbox's address, ${box.address}, alone`
    })

    // A header that is not one.
    expect((await session.command(`MAIL FROM:<${box.address}>`)).code).toBe(250)
    expect((await session.command("RCPT TO:<ada@partner.test>")).code).toBe(250)
    expect(await session.data(`Hello Ada,\r\nFrom: ${box.address}\r\n\r\nHi.\r\n`)).toEqual({
      code: 550,
      text: "5.6.0 the message's header has a line that is not a field (Name: value)"
    })

    // A suppressed recipient: the whole message is refused, naming it.
    const suppressed = `${fresh("gone")}@partner.test`
    expect((await mailroom.POST("/v1/api/suppressions", { body: { address: suppressed } })).response.status).toBe(201)
    expect((await session.command(`MAIL FROM:<${box.address}>`)).code).toBe(250)
    expect((await session.command(`RCPT TO:<${suppressed}>`)).code).toBe(250)
    expect(await session.data(`From: ${box.address}\r\nTo: ${suppressed}\r\nSubject: Hello\r\n\r\nHi.\r\n`)).toEqual({
      code: 550,
      text: `5.7.1 Not sent: ${suppressed} is suppressed by the account`
    })

    // A recipient that is no address is refused alone; the others go.
    expect((await session.command(`MAIL FROM:<${box.address}>`)).code).toBe(250)
    for (const nowhere of ["postmaster", "ada@partner", "ada@[127.0.0.1]"]) {
      expect(await session.command(`RCPT TO:<${nowhere}>`)).toEqual({ code: 553, text: `5.1.3 <${nowhere}> is not an email address such as name@example.com` })
    }
    expect((await session.command("RSET")).code).toBe(250)

    // At most 50 recipients a message.
    expect((await session.command(`MAIL FROM:<${box.address}>`)).code).toBe(250)
    for (let i = 0; i < 50; i++) expect((await session.command(`RCPT TO:<r${i}@partner.test>`)).code).toBe(250)
    expect(await session.command("RCPT TO:<r50@partner.test>")).toEqual({ code: 452, text: "4.5.3 Too many recipients: at most 50 a message" })
    expect((await session.command("RSET")).code).toBe(250)

    // Bigger than the free plan's 10 MB.
    expect((await session.command(`MAIL FROM:<${box.address}>`)).code).toBe(250)
    expect((await session.command("RCPT TO:<ada@partner.test>")).code).toBe(250)
    const big = `From: ${box.address}\r\nTo: ada@partner.test\r\nSubject: Big\r\n\r\n${"x".repeat(998)}\r\n`.padEnd(11 * 2 ** 20, `${"y".repeat(998)}\r\n`)
    expect(await session.data(big)).toEqual({ code: 552, text: expect.stringMatching(/^5\.3\.4 The message is \d+ bytes; the free plan sends at most 10485760$/) })
    await session.close()

    // Nothing of it was sent or kept.
    const { data } = await mailroom.GET("/v1/api/mailboxes/{mailboxId}/emails", {
      params: { path: { mailboxId: box.mailboxId }, query: { direction: "outbound" } }
    })
    expect(data!.data).toEqual([])

    const after = await scrape(`${suite.url}/metrics`)
    // Each counted under the command it answered: a refused sender at MAIL FROM, a refused message at DATA.
    const counted = ([phase, code]: readonly [string, number]) =>
      after.value("mailroom_submission_replies_total", { phase, code: String(code) }) -
      before.value("mailroom_submission_replies_total", { phase, code: String(code) })
    const replies = [["auth", 535], ["auth", 421], ["mail", 553], ["rcpt", 553], ["mail", 550], ["data", 550], ["rcpt", 452], ["data", 552]] as const
    expect(replies.map(counted)).toEqual([2, 1, 2, 3, 1, 3, 1, 1])
  })
})

describe("behind a load balancer (PROXY_PROTOCOL)", () => {
  /**
   * A conversation with the submission port from the balancer: `first` written at once, then each of
   * `after` once the server has said its greeting; what the server said until it closed or `done` matched.
   */
  const fromBalancer = (first: string, after: ReadonlyArray<string>, done: RegExp) =>
    new Promise<string>((resolve, reject) => {
      const socket = net.connect({ port: submissionPort, host: "127.0.0.1", localAddress: BALANCER }, () => socket.write(first))
      let heard = ""
      socket.setEncoding("latin1")
      socket.on("data", (chunk: string) => {
        const greeted = /^220 .*\r\n/.test(heard)
        heard += chunk
        if (!greeted && /^220 .*\r\n/.test(heard)) for (const line of after) socket.write(line)
        if (done.test(heard)) {
          socket.destroy()
          resolve(heard)
        }
      })
      socket.once("close", () => resolve(heard))
      socket.once("error", reject)
    })

  it("takes the balancer's PROXY header before the session (UNKNOWN too), and closes one without a valid header without a word", async () => {
    const ehlo = ["EHLO client.test\r\n"]
    const greeted = /\r\n250 [^\r]*\r\n/
    const session = await fromBalancer(`PROXY TCP4 203.0.113.9 127.0.0.1 40000 ${submissionPort}\r\n`, ehlo, greeted)
    expect(session).toMatch(/^220 [^\r]*Mailroom submission[^\r]*\r\n250-/)
    // The protocol's own longest UNKNOWN line: whatever follows UNKNOWN is ignored.
    const unknown = `PROXY UNKNOWN ${"ffff:".repeat(7)}ffff ${"ffff:".repeat(7)}ffff 65535 65535\r\n`
    expect(await fromBalancer(unknown, ehlo, greeted)).toMatch(/^220 /)
    for (const bad of ["EHLO client.test\r\n", `PROXY TCP4  203.0.113.9 127.0.0.1 40000 ${submissionPort}\r\n`, "PROXY TCP4 203.0.113.9 127.0.0.1 40000\r\n"]) {
      expect(await fromBalancer(bad, ehlo, /never/), bad).toBe("")
    }
  })
})
