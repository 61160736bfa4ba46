/**
 * Spam scoring (issue 20, item 2): a started server with RSPAMD_URL pointing at a real rspamd
 * (Debian's package, its stock rules, started by this suite), fed over real SMTP. GTUBE, the
 * standard spam test pattern, is spam; a plain note is not; with rspamd stopped mail is still
 * accepted, marked unchecked. A second server with SPAM_REJECT=true refuses GTUBE at DATA.
 */
import nodemailer from "nodemailer"
import type Mail from "nodemailer/lib/mailer"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { withApiKey } from "../support/accounts.ts"
import { type Box, fresh, newBox } from "../support/mailboxes.ts"
import { type Rspamd, startRspamd } from "../support/rspamd.ts"
import { type Backend, createBackend, type Server, startServer, type SuiteServer, useSuiteServer } from "../support/server.ts"
import { withKey } from "../support/typed-client.ts"
import { until } from "../support/wait.ts"

const GTUBE = "XJS*C4JDBQADN1.NSBN3*2IDNEN*GTUBE-STANDARD-ANTI-UBE-TEST-EMAIL*C.34X"

let rspamd: Rspamd
let suite: SuiteServer

beforeAll(async () => {
  rspamd = await startRspamd()
}, 120_000)

afterAll(async () => {
  await rspamd?.close()
})

useSuiteServer((s) => {
  suite = s
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

const mailbox = async () => newBox(suite.url, { user: await withApiKey(suite.url), localPart: fresh("spam") })

const received = async (box: Box, subject: string) => {
  const mailroom = withKey(suite.url, box.user)
  const summary = await until(`"${subject}" in ${box.address}`, async () => {
    const list = await mailroom.GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId: box.mailboxId } } })
    expect(list.response.status, JSON.stringify(list.error)).toBe(200)
    return list.data!.data.find((email) => email.subject === subject)
  }, 30_000, 300, 2_000)
  const email = await mailroom.GET("/v1/api/emails/{emailId}", { params: { path: { emailId: summary.email_id } } })
  expect(email.response.status, JSON.stringify(email.error)).toBe(200)
  expect(summary.spam).toEqual(email.data!.data.spam)
  return email.data!.data
}

describe("with RSPAMD_URL", () => {
  it("GTUBE is spam: accepted (SPAM_REJECT is off), scored with its symbols, labelled spam", async () => {
    const box = await mailbox()
    const subject = fresh("gtube")
    await send(suite.server.smtpPort, { from: "pusher@example.com", to: box.address, subject, text: `Buy now.\n${GTUBE}\n` })
    const email = await received(box, subject)
    expect(email.spam).toEqual({ status: "checked", score: expect.any(Number), action: "reject", symbols: expect.arrayContaining(["GTUBE"]) })
    expect(email.spam?.score).toBeGreaterThanOrEqual(15)
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
    expect(email.spam?.score).toBeLessThan(6)
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
    const box = await newBox(server.url, { user: await withApiKey(server.url), localPart: fresh("spam") })
    const refused = await send(server.smtpPort, { from: "pusher@example.com", to: box.address, subject: "Offer", text: `${GTUBE}\n` }).then(
      () => undefined,
      (error: { responseCode?: number; response?: string }) => error
    )
    expect(refused?.responseCode).toBe(550)
    expect(refused?.response).toMatch(/^550 5\.7\.1 /)
    const accepted = await send(server.smtpPort, { from: "ada@example.com", to: box.address, subject: "Lunch", text: "Thursday at noon?" })
    expect(accepted.response).toMatch(/^250 /)
    const list = await until("the note listed", async () => {
      const reply = await withKey(server.url, box.user).GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId: box.mailboxId } } })
      return (reply.data?.meta.total ?? 0) >= 1 ? reply.data : undefined
    }, 30_000, 300)
    expect(list.data.map((email) => email.subject)).toEqual(["Lunch"])
  })
})
