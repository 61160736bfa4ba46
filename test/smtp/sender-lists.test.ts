/**
 * Allow and block lists as a sender meets them (issue 20, item 3), over real SMTP (nodemailer) to a
 * started server: MAIL FROM refused per recipient at RCPT with 550 5.7.1 by the account's and the
 * mailbox's lists, the null sender under an allow list, and a blocked header From accepted, stored
 * labelled `blocked` and never announced (no `email.received` webhook). The server's DNS questions
 * (SPF, DMARC of the senders' domains) go to a DNS server of this suite that knows no names, so
 * every check answers at once.
 */
import nodemailer from "nodemailer"
import type Mail from "nodemailer/lib/mailer"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { withApiKey } from "../support/accounts.ts"
import { type DnsServer, startDnsServer } from "../support/dns-server.ts"
import { DOMAIN, fresh } from "../support/mailboxes.ts"
import { type Receiver, startReceiver } from "../support/receiver.ts"
import { type SuiteServer, useSuiteServer } from "../support/server.ts"
import { type MailroomFetchClient, withKey } from "../support/typed-client.ts"
import { until } from "../support/wait.ts"

let names: DnsServer
let hooks: Receiver
let suite: SuiteServer

beforeAll(async () => {
  names = await startDnsServer()
  hooks = await startReceiver()
})
afterAll(async () => {
  await names?.close()
  await hooks?.close()
})

useSuiteServer((s) => {
  suite = s
}, {
  // Read when the server starts, after the beforeAll above.
  get DNS_SERVERS() {
    return names.address
  },
  WEBHOOK_ALLOW_PRIVATE: "true"
} as Record<string, string>)

interface Account {
  readonly apiKey: string
  readonly mailroom: MailroomFetchClient
}

const account = async (): Promise<Account> => {
  const user = await withApiKey(suite.url)
  return { apiKey: user.apiKey, mailroom: withKey(suite.url, user) }
}

const mailbox = async (owner: Account) => {
  const created = await owner.mailroom.POST("/v1/api/mailboxes", { body: { local_part: fresh("lists"), domain: DOMAIN } })
  expect(created.response.status).toBe(201)
  return { id: created.data!.mailbox.mailbox_id, address: created.data!.mailbox.email_address }
}

const addToAccount = async (owner: Account, list: "allow" | "block", entry: string) => {
  const added = await owner.mailroom.POST("/v1/api/lists/{list}", { params: { path: { list } }, body: { entry } })
  expect(added.response.status).toBe(201)
}

const addToMailbox = async (owner: Account, mailboxId: string, list: "allow" | "block", entry: string) => {
  const added = await owner.mailroom.POST("/v1/api/mailboxes/{mailboxId}/lists/{list}", { params: { path: { mailboxId, list } }, body: { entry } })
  expect(added.response.status).toBe(201)
}

/** Send over SMTP; answers nodemailer's report, or the error of a message no recipient took. */
const send = async (message: Mail.Options) => {
  const transport = nodemailer.createTransport({ host: "127.0.0.1", port: suite.server.smtpPort, secure: false, ignoreTLS: true })
  try {
    return await transport.sendMail({ messageId: `<${fresh("msg")}@example.com>`, text: "Hello.", ...message })
  } finally {
    transport.close()
  }
}

/** How the recipient `address` was answered at RCPT, when the whole message was refused. */
const refusal = (message: Mail.Options) =>
  send(message).then(
    () => {
      throw new Error("the message was accepted")
    },
    (error: { responseCode?: number; response?: string }) => ({ code: error.responseCode, response: error.response })
  )

/** The stored email with this subject, as the mailbox's list shows it. */
const stored = (owner: Account, mailboxId: string, subject: string) =>
  until(`"${subject}" stored`, async () => {
    const list = await owner.mailroom.GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId } } })
    expect(list.response.status).toBe(200)
    return list.data!.data.find((email) => email.subject === subject)
  }, 30_000, 300, 2_000)

describe("MAIL FROM at RCPT", () => {
  it("an account's block list refuses the sender 550 5.7.1 for its mailboxes only; another account's mailbox in the same message gets the mail", async () => {
    const owner = await account()
    const other = await account()
    const [mine, sibling, theirs] = [await mailbox(owner), await mailbox(owner), await mailbox(other)]
    await addToAccount(owner, "block", "*.spam.test")

    const report = await send({ from: "offers@mail.spam.test", to: [mine.address, theirs.address], subject: fresh("mixed") })
    expect(report.accepted).toEqual([theirs.address])
    expect(report.rejected).toEqual([mine.address])
    const [rejected] = (report as unknown as { rejectedErrors: Array<{ responseCode: number; response: string }> }).rejectedErrors
    expect(rejected).toMatchObject({ responseCode: 550, response: expect.stringContaining("5.7.1") })

    const alone = await refusal({ from: "OFFERS@Deals.SPAM.test", to: sibling.address, subject: fresh("alone") })
    expect(alone).toEqual({ code: 550, response: expect.stringMatching(/^550 5\.7\.1 <[^>]+>: the recipient does not accept mail from this sender$/) })
    // Subdomains only: spam.test itself is not on the list.
    await send({ from: "news@spam.test", to: sibling.address, subject: fresh("apex") })
  })

  it("a mailbox's allow list admits its senders only, refuses the null sender, and leaves the account's other mailboxes open", async () => {
    const owner = await account()
    const [guarded, open] = [await mailbox(owner), await mailbox(owner)]
    await addToMailbox(owner, guarded.id, "allow", "partner.test")
    await addToMailbox(owner, guarded.id, "allow", "ceo@Example.com")

    await send({ from: "Boss@PARTNER.test", to: guarded.address, subject: fresh("partner") })
    await send({ from: "ceo@example.com", to: guarded.address, subject: fresh("ceo") })
    expect((await refusal({ from: "cfo@example.com", to: guarded.address, subject: fresh("cfo") })).code).toBe(550)
    expect((await refusal({ from: "x@eu.partner.test", to: guarded.address, subject: fresh("sub") })).code).toBe(550)
    const bounce = await refusal({ envelope: { from: "", to: [guarded.address] }, from: "mailer-daemon@example.com", subject: fresh("bounce") })
    expect(bounce).toEqual({ code: 550, response: expect.stringContaining("5.7.1") })
    await send({ from: "cfo@example.com", to: open.address, subject: fresh("open") })
    // A block entry wins over the allow list.
    await addToMailbox(owner, guarded.id, "block", "boss@partner.test")
    expect((await refusal({ from: "boss@partner.test", to: guarded.address, subject: fresh("blocked") })).code).toBe(550)
  })
})

describe("the header From after DATA", () => {
  it("on the mailbox's or the account's block list: accepted, labelled blocked, and no email.received webhook", async () => {
    const owner = await account()
    const box = await mailbox(owner)
    const path = `/received-${box.id}`
    const hook = await owner.mailroom.POST("/v1/api/webhooks", { body: { url: `${hooks.url}${path}`, events: ["email.received"] } })
    expect(hook.response.status).toBe(201)
    await addToMailbox(owner, box.id, "block", "*.phish.test")
    await addToAccount(owner, "block", "fraud@bank.test")

    // The envelope senders are not listed: the header From is what the lists catch here.
    const phished = fresh("phished")
    const accepted = await send({ envelope: { from: "bounce@relay.test", to: [box.address] }, from: "Bank <security@login.phish.test>", to: box.address, subject: phished })
    expect(accepted.response).toMatch(/^250 /)
    const fraud = fresh("fraud")
    await send({ envelope: { from: "bounce@relay.test", to: [box.address] }, from: "Fraud@BANK.test", to: box.address, subject: fraud })
    const wanted = fresh("wanted")
    await send({ envelope: { from: "bounce@relay.test", to: [box.address] }, from: "support@bank.test", to: box.address, subject: wanted })

    expect((await stored(owner, box.id, phished)).labels).toEqual(["inbound", "unread", "unauthenticated", "blocked"])
    expect((await stored(owner, box.id, fraud)).labels).toContain("blocked")
    expect((await stored(owner, box.id, wanted)).labels).not.toContain("blocked")
    // All three are stored: the one webhook delivery is the wanted mail's, the blocked ones raised none.
    const [delivery] = await hooks.waitFor(path, 1)
    expect(JSON.parse(delivery!.body).data.subject).toBe(wanted)
    await new Promise((resolve) => setTimeout(resolve, 1_000))
    expect(hooks.received(path).map((d) => JSON.parse(d.body).data.subject)).toEqual([wanted])
  })
})
