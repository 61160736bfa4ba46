/**
 * Forwarding a mailbox's received mail, as its owner and the person at the address meet it: the API
 * against a started server whose mta resolves MX records through a DNS server this test runs and
 * delivers to a receiving SMTP server this test runs; the confirmation link mailed there is opened as
 * a browser would (GET, then the form's POST); mail arrives over SMTP. The copy is checked as it
 * arrived: unchanged below Mailroom's two fields, its sender's DKIM signature and Mailroom's own both
 * verified by an independent verifier (mailauth) against keys the test DNS publishes.
 */
import { generateKeyPairSync } from "node:crypto"
import { authenticate, dkimVerify } from "mailauth"
import { simpleParser } from "mailparser"
import nodemailer from "nodemailer"
import { beforeAll, describe, expect, it } from "vitest"
import { createClient, type MailroomFetchClient } from "../../packages/client/src/fetch-client.ts"
import { withApiKey } from "../support/accounts.ts"
import { upgrade } from "../support/billing.ts"
import { type Box, fresh, newBox } from "../support/mailboxes.ts"
import { dkimTxt, useOutboundWorld } from "../support/outbound-world.ts"
import { sendMail } from "../support/send-mail.ts"
import { type SuiteServer, useSuiteServer } from "../support/server.ts"
import { awayFromWindowEdge, until } from "../support/wait.ts"

/** Mailroom's key for the shared domain, and the sender's own (news.example signs what it sends). */
/** The sender's own key (news.example signs what it sends); Mailroom's for the shared domain is the world's. */
const SENDER_DKIM = generateKeyPairSync("rsa", { modulusLength: 2048 })

let suite: SuiteServer

const world = useOutboundWorld()
beforeAll(() => {
  world.names.set("s1._domainkey.news.example", { TXT: [dkimTxt(SENDER_DKIM.publicKey)] })
})

useSuiteServer((s) => {
  suite = s
}, world.env({ OUTBOUND_RETRY_DELAYS: "300ms,600ms" }))

/**
 * A mailbox's owner on the pro plan: the walks poll for mail and its copies, and on a loaded machine
 * those polls would spend the free plan's 20 requests a minute (CI2: a 429 read as a missing email).
 */
const owner = async (): Promise<{ box: Box; mailroom: MailroomFetchClient }> => {
  const user = await withApiKey(suite.url)
  await upgrade(suite.url, user.apiKey, "pro")
  const box = await newBox(suite.url, { user })
  return { box, mailroom: createClient({ baseUrl: suite.url, apiKey: box.user.apiKey }) }
}

const forward = (mailroom: MailroomFetchClient, box: Box, address: string) =>
  mailroom.POST("/v1/api/mailboxes/{mailboxId}/forwarding", { params: { path: { mailboxId: box.mailboxId } }, body: { address } })

const forwardingOf = async (mailroom: MailroomFetchClient, box: Box) =>
  (await mailroom.GET("/v1/api/mailboxes/{mailboxId}/forwarding", { params: { path: { mailboxId: box.mailboxId } } })).data!.data

/** The confirmation mailed to `address`, and its link. */
const confirmation = async (address: string) => {
  const message = await until(`the confirmation at ${address}`, async () =>
    world.mx.delivered().find((m) => m.rcptTo.includes(address) && m.raw.includes("Confirm forwarding")), 20_000)
  const parsed = await simpleParser(message.raw)
  const link = /https?:\/\/\S+\/forwarding\/mrf_[A-Za-z0-9_-]+/.exec(parsed.text ?? "")![0]
  return { parsed, link: link.replace(/^https?:\/\/[^/]+/, suite.url) }
}

/** The page's form, as a browser posts it. */
const post = (link: string, action: string) =>
  fetch(link, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: `action=${action}` })

/** The loop field Mailroom writes on a copy `mailbox` forwarded: the mailbox and the MAC that shows Mailroom wrote it. */
const forwardedByField = (mailbox: string) => new RegExp(`^${mailbox.replace(/[.+]/g, "\\$&")}; mac=[0-9a-f]{32}$`)

/** An email of `box` once stored and its forwarded copies settled. */
const forwardedEmail = (mailroom: MailroomFetchClient, box: Box, subject: string) =>
  until(`"${subject}" forwarded`, async () => {
    const listed = await mailroom.GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId: box.mailboxId } } })
    const summary = listed.data?.data.find((e) => e.subject === subject)
    if (summary === undefined) return undefined
    const { data } = await mailroom.GET("/v1/api/emails/{emailId}", { params: { path: { emailId: summary.email_id } } })
    const copies = data?.data.forwarded ?? []
    return copies.length > 0 && copies.every((c) => c.status !== "queued" && c.status !== "deferred") ? data!.data : undefined
  }, 20_000, 200, 1_000)


describe("forwarding a mailbox's mail", () => {
  it("asks the address's owner first, then copies each received email there unchanged, signed, and shows the copy's delivery", async () => {
    const { box, mailroom } = await owner()
    const person = `${fresh("ada")}@partner.test`

    const added = await forward(mailroom, box, person.toUpperCase())
    expect(added.response.status).toBe(201)
    expect(added.data!.data).toEqual({
      address: person,
      mailbox_id: box.mailboxId,
      status: "pending",
      created_at: expect.any(String),
      confirmed_at: null,
      suspended_reason: null
    })

    // Nothing is forwarded while the address's owner has not agreed.
    const early = `Before agreeing ${fresh("s")}`
    await sendMail(suite.server.smtpPort, { to: box.address, subject: early, text: "Not for Ada yet." })
    const earlier = await until("the early email stored", async () =>
      (await mailroom.GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId: box.mailboxId } } })).data?.data
        .find((e) => e.subject === early))

    const { parsed, link } = await confirmation(person)
    expect(parsed.subject).toBe(`Confirm forwarding from ${box.address}`)
    // Opening the link changes nothing (link checkers open links); the page asks.
    const page = await fetch(link)
    expect(page.status).toBe(200)
    expect(await page.text()).toContain("Forward mail to me")
    expect((await forwardingOf(mailroom, box))[0]!.status).toBe("pending")

    const agreed = await post(link, "confirm")
    expect(agreed.status).toBe(200)
    expect(await agreed.text()).toContain("Forwarding is on")
    const [active] = await forwardingOf(mailroom, box)
    expect(active).toMatchObject({ address: person, status: "active" })
    expect(active!.confirmed_at).not.toBeNull()
    // Added again: answered as it is.
    const again = await forward(mailroom, box, person)
    expect(again.response.status).toBe(200)
    expect(again.data!.data.status).toBe("active")

    // A signed newsletter arrives: its copy reaches Ada with the sender's signature intact.
    const subject = `Weekly digest ${fresh("s")}`
    const before = world.mx.delivered().length
    await sendMail(suite.server.smtpPort, {
      from: "Newsletter <news@news.example>",
      to: box.address,
      subject,
      text: "Three things happened this week.",
      dkim: { domainName: "news.example", keySelector: "s1", privateKey: SENDER_DKIM.privateKey.export({ type: "pkcs8", format: "pem" }).toString() }
    })
    const email = await forwardedEmail(mailroom, box, subject)
    expect(email.forwarded).toEqual([{
      address: person,
      status: "sent",
      attempts: 1,
      last_response: expect.stringMatching(/^250/),
      next_attempt_at: null,
      attempting: false,
      updated_at: expect.any(String)
    }])
    const copy = world.mx.delivered().slice(before).find((m) => m.raw.includes(subject))!
    expect(copy.mailFrom).toMatch(new RegExp(`^bounces\\+${email.email_id}-[0-9a-f]{16}@agents\\.localhost$`))
    expect(copy.rcptTo).toEqual([person])
    const raw = await mailroom.GET("/v1/api/emails/{emailId}/raw", { params: { path: { emailId: email.email_id } }, parseAs: "arrayBuffer" })
    const received = Buffer.from(raw.data as ArrayBuffer)
    // The message as received, below Mailroom's fields in front: its DKIM signature, the ARC set, the trace, the loop guard.
    expect(copy.raw.subarray(copy.raw.length - received.length).equals(received)).toBe(true)
    const front = copy.raw.subarray(0, copy.raw.length - received.length).toString("latin1")
    expect(front).toMatch(/^DKIM-Signature: .*d=agents\.localhost/s)
    expect(front).toMatch(/\r\nARC-Seal: i=1; .*cv=none; d=agents\.localhost;\s+s=mailroom;/s)
    // What Mailroom found when the newsletter arrived, under its seal.
    expect(front).toMatch(/\r\nARC-Authentication-Results: i=1; mx\.agents\.localhost; .*dkim=pass header\.d=news\.example/s)
    expect(front).toMatch(/\r\nReceived: by .* \(Mailroom\) for forwarding from <[^>]+>; .*\r\n/)
    expect(front.split("\r\n").find((line) => line.startsWith("X-Mailroom-Forwarded-By: "))?.slice(25)).toMatch(forwardedByField(box.address))
    const verdict = await dkimVerify(copy.raw, { resolver: world.resolver() })
    expect(verdict.results.map((r: { status: { result: string }; signingDomain: string }) => [r.signingDomain, r.status.result]).sort()).toEqual([
      ["agents.localhost", "pass"],
      ["news.example", "pass"]
    ])
    // The receiving side validates the ARC chain Mailroom started, against the key DNS publishes.
    const checked = await authenticate(copy.raw, {
      ip: "127.0.0.1",
      helo: "mx.agents.localhost",
      sender: copy.mailFrom,
      mta: "mx.partner.test",
      resolver: world.resolver(),
      disableBimi: true
    })
    expect(checked.arc && checked.arc.status.result).toBe("pass")
    // The mail from before the agreement was never sent.
    expect(world.mx.delivered().some((m) => m.raw.includes(early))).toBe(false)
    expect((await mailroom.GET("/v1/api/emails/{emailId}", { params: { path: { emailId: earlier.email_id } } })).data!.data.forwarded).toEqual([])

    // Ada stops it from her side, with the same link.
    const stop = await post(link, "stop")
    expect(stop.status).toBe(200)
    expect(await stop.text()).toContain("Forwarding stopped")
    expect(await forwardingOf(mailroom, box)).toEqual([])
    expect((await fetch(link)).status).toBe(404)
  })

  it("marks a copy the address refuses bounced and suspends the address until it is added again; a mailbox of the account gets its copy as received mail", async () => {
    const { box, mailroom } = await owner()
    const sibling = await newBox(suite.url, { user: box.user })
    const gone = `${fresh("gone")}@partner.test`
    // The account's own mailbox forwards at once; the other address is confirmed from its link, then refuses mail.
    expect((await forward(mailroom, box, sibling.address)).data!.data.status).toBe("active")
    await forward(mailroom, box, gone)
    expect((await post((await confirmation(gone)).link, "confirm")).status).toBe(200)
    world.mx.script(gone, [550])
    // The sibling admits the sender's domain alone: the copy is judged by the email's sender, not by its bounce address.
    await mailroom.POST("/v1/api/mailboxes/{mailboxId}/lists/{list}", {
      params: { path: { mailboxId: sibling.mailboxId, list: "allow" } },
      body: { entry: "example.com" }
    })

    const subject = `Invoice ${fresh("s")}`
    await sendMail(suite.server.smtpPort, { to: box.address, subject, text: "Please pay." })
    const email = await forwardedEmail(mailroom, box, subject)
    expect(email.forwarded!.map((c) => [c.address, c.status])).toEqual([[gone, "bounced"], [sibling.address, "sent"]].sort())
    expect(email.forwarded!.find((c) => c.address === gone)!.last_response).toMatch(/^550/)
    // The sibling mailbox holds the copy as received mail.
    const copy = await until("the copy in the sibling mailbox", async () => {
      const { data } = await mailroom.GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId: sibling.mailboxId } } })
      return data?.data.find((e) => e.subject === subject)
    })
    expect(copy.direction).toBe("inbound")
    // Received with the verdicts on the email it copies: a From no check vouched for stays unauthenticated.
    expect(email.labels).toContain("unauthenticated")
    expect(copy.labels).toContain("unauthenticated")
    const { data: stored } = await mailroom.GET("/v1/api/emails/{emailId}", { params: { path: { emailId: copy.email_id } } })
    expect(stored!.data.authentication).toEqual(email.authentication)

    // The refusing address is suspended: the next email is copied to the sibling alone.
    const listed = await forwardingOf(mailroom, box)
    expect(listed.map((f) => [f.address, f.status])).toEqual([[sibling.address, "active"], [gone, "suspended"]])
    expect(listed.find((f) => f.address === gone)!.suspended_reason).toMatch(/^550/)
    const next = `Second invoice ${fresh("s")}`
    await sendMail(suite.server.smtpPort, { to: box.address, subject: next, text: "Please pay this one too." })
    expect((await forwardedEmail(mailroom, box, next)).forwarded!.map((c) => c.address)).toEqual([sibling.address])
    // A copy refused for its sender alone (the sibling admits example.com only) bounces; the forward stays, and the next copy goes.
    const stranger = `From a stranger ${fresh("s")}`
    await sendMail(suite.server.smtpPort, { from: "someone@elsewhere.test", to: box.address, subject: stranger, text: "Hello." })
    const refused = (await forwardedEmail(mailroom, box, stranger)).forwarded!
    expect(refused.map((c) => [c.address, c.status])).toEqual([[sibling.address, "bounced"]])
    expect(refused[0]!.last_response).toMatch(/^550 5\.7\.1 /)
    expect((await forwardingOf(mailroom, box)).find((f) => f.address === sibling.address)).toMatchObject({ status: "active", suspended_reason: null })
    const third = `Third invoice ${fresh("s")}`
    await sendMail(suite.server.smtpPort, { to: box.address, subject: third, text: "And this one." })
    expect((await forwardedEmail(mailroom, box, third)).forwarded!.map((c) => [c.address, c.status])).toEqual([[sibling.address, "sent"]])
    // Added again, it forwards again.
    const resumed = await forward(mailroom, box, gone)
    expect(resumed.response.status).toBe(200)
    expect(resumed.data!.data).toMatchObject({ address: gone, status: "active", suspended_reason: null })
  })

  it("applies a delivery report that comes back to the copy's bounce address: the copy bounced, the address suspended", async () => {
    const { box, mailroom } = await owner()
    const person = `${fresh("later")}@partner.test`
    await forward(mailroom, box, person)
    await post((await confirmation(person)).link, "confirm")
    const subject = `Report ${fresh("s")}`
    await sendMail(suite.server.smtpPort, { to: box.address, subject, text: "A report follows." })
    const email = await forwardedEmail(mailroom, box, subject)
    expect(email.forwarded![0]!.status).toBe("sent")

    const report = [
      "From: Mail Delivery System <MAILER-DAEMON@mx.partner.test>",
      `To: bounces+${email.email_id}@agents.localhost`,
      "Subject: Undelivered Mail Returned to Sender",
      "MIME-Version: 1.0",
      "Content-Type: multipart/report; report-type=delivery-status; boundary=b1",
      "",
      "--b1",
      "Content-Type: message/delivery-status",
      "",
      "Reporting-MTA: dns; mx.partner.test",
      "",
      `Final-Recipient: rfc822; ${person}`,
      "Action: failed",
      "Status: 5.2.1",
      "Diagnostic-Code: smtp; 550 5.2.1 The mailbox is disabled",
      "--b1--",
      ""
    ].join("\r\n")
    const transport = nodemailer.createTransport({ host: "127.0.0.1", port: suite.server.smtpPort, secure: false, ignoreTLS: true })
    try {
      // To the envelope sender the copy went with (its domain's bounce address).
      const copy = world.mx.delivered().find((m) => m.raw.includes(subject))!
      await transport.sendMail({ envelope: { from: "", to: [copy.mailFrom] }, raw: report })
    } finally {
      transport.close()
    }
    const bounced = await until("the report applied", async () => {
      const { data } = await mailroom.GET("/v1/api/emails/{emailId}", { params: { path: { emailId: email.email_id } } })
      return data?.data.forwarded?.[0]?.status === "bounced" ? data.data.forwarded[0] : undefined
    }, 20_000, 200, 1_000)
    expect(bounced.last_response).toBe("550 5.2.1 The mailbox is disabled")
    expect(await forwardingOf(mailroom, box)).toMatchObject([{ address: person, status: "suspended", suspended_reason: "550 5.2.1 The mailbox is disabled" }])
    // The report is not mail of the mailbox.
    const listed = (await mailroom.GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId: box.mailboxId } } })).data!.data
    expect(listed.map((e) => e.subject)).toEqual([subject])
  })

  it("ends a loop between two mailboxes that forward to each other, and forwards nothing blocked", async () => {
    const { box: a, mailroom } = await owner()
    const b = await newBox(suite.url, { user: a.user })
    await forward(mailroom, a, b.address)
    await forward(mailroom, b, a.address)
    const titled = async (box: Box, subject: string) => {
      const { data } = await mailroom.GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId: box.mailboxId } } })
      return data?.data.filter((e) => e.subject === subject) ?? []
    }
    const read = async (emailId: string) => (await mailroom.GET("/v1/api/emails/{emailId}", { params: { path: { emailId } } })).data!.data

    // A message with its sender's Message-ID and Date: a → b → a, where a has received it already and
    // does not store it again.
    const dated = `Round and round ${fresh("s")}`
    await sendMail(suite.server.smtpPort, { to: a.address, subject: dated, text: "Where does it end?" })
    const copyAtB = await until("b's copy sent back to a", async () => {
      const [found] = await titled(b, dated)
      const email = found && (await read(found.email_id))
      return email?.forwarded?.[0]?.status === "sent" ? email : undefined
    })
    expect(copyAtB.headers["x-mailroom-forwarded-by"]).toMatch(forwardedByField(a.address))
    await new Promise((resolve) => setTimeout(resolve, 1_000))
    expect(await titled(a, dated)).toHaveLength(1)

    // Mail without a Date is never taken for a copy: the copy back at a is stored, names a, and goes no further.
    const subject = `Round again ${fresh("s")}`
    await sendMail(suite.server.smtpPort, {
      envelope: { from: "sender@example.com", to: [a.address] },
      raw: [`From: sender@example.com`, `To: ${a.address}`, `Subject: ${subject}`, `Message-ID: <${fresh("undated")}@example.com>`, "", "Where does it end?", ""].join("\r\n")
    })
    const atA = await until("the copy back in a", async () => {
      const found = await titled(a, subject)
      return found.length === 2 ? found : undefined
    })
    const both = await Promise.all(atA.map((e) => read(e.email_id)))
    const back = both.find((e) => e.headers["x-mailroom-forwarded-by"] !== undefined)!
    // The newest field first: b forwarded it last.
    expect(back.headers["x-mailroom-forwarded-by"]).toEqual([expect.stringMatching(forwardedByField(b.address)), expect.stringMatching(forwardedByField(a.address))])
    expect(back.forwarded).toEqual([])
    await new Promise((resolve) => setTimeout(resolve, 1_000))
    expect(await titled(b, subject)).toHaveLength(1)

    // A blocked sender's mail is kept quiet: not forwarded either.
    await mailroom.POST("/v1/api/mailboxes/{mailboxId}/lists/{list}", {
      params: { path: { mailboxId: a.mailboxId, list: "block" } },
      body: { entry: "spammer@example.com" }
    })
    const blocked = `Buy now ${fresh("s")}`
    await sendMail(suite.server.smtpPort, {
      from: "spammer@example.com",
      envelope: { from: "bulk@relay.example", to: [a.address] },
      subject: blocked,
      text: "Cheap."
    })
    const kept = await until("the blocked email stored", async () => {
      const { data } = await mailroom.GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId: a.mailboxId } } })
      return data?.data.find((e) => e.subject === blocked)
    })
    expect(kept.labels).toContain("blocked")
    const email = (await mailroom.GET("/v1/api/emails/{emailId}", { params: { path: { emailId: kept.email_id } } })).data!.data
    expect(email.forwarded).toEqual([])
  })

  it("refuses what cannot be forwarded, with the reason", async () => {
    const { box, mailroom } = await owner()
    const own = await forward(mailroom, box, box.address.toUpperCase())
    expect(own.response.status).toBe(400)
    expect(own.error).toMatchObject({ error: { code: "VALIDATION_ERROR", details: { address: "is this mailbox's own address" } } })
    // A subaddress reaches the mailbox itself: forwarding there would store each email twice.
    const [local, domain] = box.address.split("@")
    const tagged = await forward(mailroom, box, `${local}+copy@${domain}`)
    expect([tagged.response.status, tagged.error?.error.details]).toEqual([400, { address: "is this mailbox's own address" }])
    // An IP address is no domain, written bare as in brackets (a literal), as localhost is none that takes mail.
    for (const address of ["ada@127.0.0.1", "ada@[127.0.0.1]", "ada@localhost"]) {
      const refused = await forward(mailroom, box, address)
      expect([refused.response.status, refused.error?.error.code, refused.error?.error.details], address)
        .toEqual([400, "VALIDATION_ERROR", { address: "must be an email address such as name@example.com" }])
    }
    const invalid = await forward(mailroom, box, "not an address")
    expect(invalid.response.status).toBe(400)
    expect(invalid.error).toMatchObject({ error: { code: "VALIDATION_ERROR", details: { address: expect.stringContaining("email address") } } })
    const unknown = await mailroom.POST("/v1/api/mailboxes/{mailboxId}/forwarding", {
      params: { path: { mailboxId: "mbx_000000000000000000000000" } },
      body: { address: "ada@partner.test" }
    })
    expect(unknown.response.status).toBe(404)
    expect(unknown.error).toMatchObject({ error: { code: "NOT_FOUND", details: { mailbox_id: "mbx_000000000000000000000000" } } })

    // Five addresses, each mailed a link (the account's allowance: 5 an hour, counted from the hour's
    // start), then a sixth: all in one hour (a CI run crossed 09:00 there and had its allowance again).
    await awayFromWindowEdge(3600, 60)
    const people = Array.from({ length: 5 }, () => `${fresh("p")}@partner.test`)
    for (const person of people) expect((await forward(mailroom, box, person)).response.status).toBe(201)
    const sixth = await forward(mailroom, box, "sixth@partner.test")
    expect(sixth.response.status).toBe(403)
    expect(sixth.error).toMatchObject({ error: { code: "FORWARDING_LIST_FULL", details: { limit: 5, mailbox_id: box.mailboxId } } })

    const missing = await mailroom.DELETE("/v1/api/mailboxes/{mailboxId}/forwarding/{address}", {
      params: { path: { mailboxId: box.mailboxId, address: "nobody@partner.test" } }
    })
    expect(missing.response.status).toBe(404)
    expect(missing.error).toMatchObject({ error: { code: "NOT_FOUND", details: { address: "nobody@partner.test", mailbox_id: box.mailboxId } } })
    const first = (await forwardingOf(mailroom, box))[0]!
    const removed = await mailroom.DELETE("/v1/api/mailboxes/{mailboxId}/forwarding/{address}", {
      params: { path: { mailboxId: box.mailboxId, address: first.address.toUpperCase() } }
    })
    expect(removed.data!.data).toEqual({ address: first.address, mailbox_id: box.mailboxId, deleted: true })
    // Room again, but no link left to mail this hour: refused, and not kept pending without its link.
    const spent = await forward(mailroom, box, "sixth@partner.test")
    expect(spent.response.status).toBe(429)
    expect(spent.error).toMatchObject({ error: { code: "RATE_LIMIT_EXCEEDED", details: { limit: 5, window: expect.any(String) } } })
    expect((await forwardingOf(mailroom, box)).map((f) => f.address)).not.toContain("sixth@partner.test")

    // The link's page: an unknown link, and a POST that is not the page's form.
    const unknownLink = `${suite.url}/forwarding/mrf_${"x".repeat(43)}`
    expect((await fetch(unknownLink)).status).toBe(404)
    expect((await post(unknownLink, "confirm")).status).toBe(404)
    expect((await post(unknownLink, "launch")).status).toBe(400)
  })
})
