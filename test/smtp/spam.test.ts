/**
 * Spam scoring (issue 20, item 2): a started server with RSPAMD_URL pointing at a real rspamd
 * (Debian's package, its stock rules, started by this suite), fed over real SMTP. GTUBE, the
 * standard spam test pattern, is spam; a plain note is not; with rspamd stopped mail is still
 * accepted, marked unchecked. A second server with SPAM_REJECT=true refuses GTUBE at DATA.
 */
import nodemailer from "nodemailer"
import type Mail from "nodemailer/lib/mailer"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type Client, client, withApiKey } from "../support/http.ts"
import { type Box, fresh, newBox } from "../support/mailboxes.ts"
import { type Rspamd, startRspamd } from "../support/rspamd.ts"
import { type Backend, createBackend, type Server, startServer, type SuiteServer, useSuiteServer } from "../support/server.ts"
import { until } from "../support/wait.ts"

const GTUBE = "XJS*C4JDBQADN1.NSBN3*2IDNEN*GTUBE-STANDARD-ANTI-UBE-TEST-EMAIL*C.34X"

let rspamd: Rspamd
let suite: SuiteServer
let api: Client

beforeAll(async () => {
  rspamd = await startRspamd()
}, 120_000)

afterAll(async () => {
  await rspamd?.close()
})

useSuiteServer((s) => {
  suite = s
  api = client(s.url)
}, {
  // Set before the server starts: the suite's beforeAll above runs first.
  get RSPAMD_URL() {
    return rspamd.url
  }
} as Record<string, string>)

const send = async (port: number, mail: Mail.Options) => {
  const transport = nodemailer.createTransport({ host: "127.0.0.1", port, secure: false, ignoreTLS: true, name: "client.test" })
  try {
    return await transport.sendMail(mail)
  } finally {
    transport.close()
  }
}

const mailbox = async () => newBox(api.url, { user: await withApiKey(api), localPart: fresh("spam") })

const received = async (box: Box, subject: string) => {
  const summary = await until(`"${subject}" in ${box.address}`, async () => {
    const list = await api.get(`/v1/api/mailboxes/${box.mailboxId}/emails`, { apiKey: box.user.apiKey })
    expect(list.status, list.text).toBe(200)
    return (list.body.data as Array<Record<string, any>>).find((email) => email.subject === subject)
  }, 30_000, 300, 2_000)
  const email = await api.get(`/v1/api/emails/${summary.email_id}`, { apiKey: box.user.apiKey })
  expect(email.status, email.text).toBe(200)
  expect(summary.spam).toEqual(email.body.data.spam)
  return email.body.data as Record<string, any>
}

describe("with RSPAMD_URL", () => {
  it("GTUBE is spam: accepted (SPAM_REJECT is off), scored with its symbols, labelled spam", async () => {
    const box = await mailbox()
    const subject = fresh("gtube")
    await send(suite.server.smtpPort, { from: "pusher@example.com", to: box.address, subject, text: `Buy now.\n${GTUBE}\n` })
    const email = await received(box, subject)
    expect(email.spam).toEqual({ status: "checked", score: expect.any(Number), action: "reject", symbols: expect.arrayContaining(["GTUBE"]) })
    expect(email.spam.score).toBeGreaterThanOrEqual(15)
    expect(email.labels).toContain("spam")
  })

  it("a plain note is not spam", async () => {
    const box = await mailbox()
    const subject = fresh("lunch")
    await send(suite.server.smtpPort, {
      from: "Ada Lovelace <ada@example.com>",
      to: box.address,
      subject,
      text: "Shall we have lunch on Thursday? The usual place at noon."
    })
    const email = await received(box, subject)
    expect(email.spam).toEqual({ status: "checked", score: expect.any(Number), action: "no action", symbols: expect.any(Array) })
    expect(email.spam.score).toBeLessThan(6)
    expect(email.labels).not.toContain("spam")
  })

  it("rspamd stopped: the mail is accepted all the same, marked unchecked", async () => {
    const box = await mailbox()
    const subject = fresh("outage")
    await rspamd.stop()
    try {
      const info = await send(suite.server.smtpPort, { from: "pusher@example.com", to: box.address, subject, text: `Still here.\n${GTUBE}\n` })
      expect(info.response).toMatch(/^250 /)
    } finally {
      await rspamd.start()
    }
    const email = await received(box, subject)
    expect(email.spam).toEqual({ status: "unchecked", score: null, action: null, symbols: [] })
    expect(email.labels).not.toContain("spam")
  }, 120_000)
})

describe("with SPAM_REJECT=true", () => {
  let backend: Backend
  let server: Server

  beforeAll(async () => {
    backend = await createBackend()
    server = await startServer({ ...backend.env, RSPAMD_URL: rspamd.url, SPAM_REJECT: "true" })
  }, 120_000)

  afterAll(async () => {
    await server?.stop()
    await backend?.dispose()
  })

  it("GTUBE is refused 550 5.7.1 at DATA and nothing is stored; a plain note is accepted", async () => {
    const other = client(server.url)
    const box = await newBox(other.url, { user: await withApiKey(other), localPart: fresh("spam") })
    const refused = await send(server.smtpPort, { from: "pusher@example.com", to: box.address, subject: "Offer", text: `${GTUBE}\n` }).then(
      () => undefined,
      (error: { responseCode?: number; response?: string }) => error
    )
    expect(refused?.responseCode).toBe(550)
    expect(refused?.response).toMatch(/^550 5\.7\.1 /)
    const accepted = await send(server.smtpPort, { from: "ada@example.com", to: box.address, subject: "Lunch", text: "Thursday at noon?" })
    expect(accepted.response).toMatch(/^250 /)
    const list = await until("the note listed", async () => {
      const reply = await other.get(`/v1/api/mailboxes/${box.mailboxId}/emails`, { apiKey: box.user.apiKey })
      return reply.body.meta?.total >= 1 ? reply.body : undefined
    }, 30_000, 300)
    expect(list.data.map((email: { subject: string }) => email.subject)).toEqual(["Lunch"])
  })
})
