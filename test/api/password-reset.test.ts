/**
 * A forgotten password over real HTTP and SMTP against a started server: asking for a link (the same
 * answer for an email nobody uses), the link arriving as mail (here to an account whose email is a
 * mailbox of this Mailroom, so the mta delivers it through the inbound path; through a relay in
 * test/outbound/relay.test.ts), and choosing a new password with it: sessions end, failed logins are
 * forgotten, the link works once. Expiry and the hourly allowance: test/domain/mailed-links.test.ts.
 */
import { describe, expect, it } from "vitest"
import { signUp } from "../support/accounts.ts"
import { type Box, fresh, newBox } from "../support/mailboxes.ts"
import { type SuiteServer, useSuiteServer } from "../support/server.ts"
import { anonymous, offContract, withKey, withToken } from "../support/typed-client.ts"
import { until } from "../support/wait.ts"

let suite: SuiteServer

useSuiteServer((s) => {
  suite = s
})

/** A person whose login email is a mailbox of this Mailroom (another account's), where their mail can be read. */
const personWithInbox = async () => {
  const inbox = await newBox(suite.url, { localPart: fresh("person") })
  const person = await signUp(suite.url, { email: inbox.address, name: "Ada <Lovelace>" })
  return { person, inbox }
}

/** The reset mail in `inbox`, and the token its link carries. */
const resetMail = async (inbox: Box, count = 1) => {
  const emails = await until("the reset mail", async () => {
    const { data } = await withKey(suite.url, inbox.user).GET("/v1/api/mailboxes/{mailboxId}/emails", {
      params: { path: { mailboxId: inbox.mailboxId } }
    })
    return data && data.data.length >= count ? data.data : undefined
  }, 30_000, 100, 500)
  const { data } = await withKey(suite.url, inbox.user).GET("/v1/api/emails/{emailId}", { params: { path: { emailId: emails[0]!.email_id } } })
  const email = data!.data
  const token = /#\/reset-password\/(mrp_[A-Za-z0-9_-]+)/.exec(email.text ?? "")?.[1]
  return { email, token: token! }
}

const ask = (email: unknown) => anonymous(suite.url).POST("/api/auth/password-reset", { body: offContract({ email }) })
const choose = (body: unknown) => anonymous(suite.url).POST("/api/auth/password-reset/confirm", { body: offContract(body) })

describe("a forgotten password", () => {
  it("answers alike whether or not an account uses the email: 202, the same words", async () => {
    const { person } = await personWithInbox()
    const known = await ask(person.email)
    const unknown = await ask(`nobody-${fresh("x")}@example.com`)
    expect(known.response.status).toBe(202)
    expect(unknown.response.status).toBe(202)
    expect(unknown.data).toEqual(known.data)
    expect(known.data).toEqual({ success: true, data: { message: expect.stringContaining("If an account uses this email") } })
  })

  it("mails a signed link that sets a new password once: every session ends, the old password stops working", async () => {
    const { person, inbox } = await personWithInbox()
    expect((await ask(person.email.toUpperCase())).response.status).toBe(202)
    const { email, token } = await resetMail(inbox)
    expect(email).toMatchObject({ from: expect.stringMatching(/^no-reply@/), from_name: "Mailroom", subject: "Choose a new Mailroom password" })
    expect(email.text).toContain(`http://localhost:${suite.server.port}/#/reset-password/mrp_`)
    // Greeted without the name the account was registered with: whoever registers an address types it.
    expect(email.text).toMatch(/^Hello,\n/)
    expect(email.text).not.toContain("Lovelace")
    const { data: raw } = await withKey(suite.url, inbox.user).GET("/v1/api/emails/{emailId}/raw", {
      params: { path: { emailId: email.email_id } },
      parseAs: "text"
    })
    expect(raw).toMatch(/^DKIM-Signature: v=1; a=rsa-sha256; c=relaxed\/relaxed; d=agents\.localhost;/m)
    expect(raw).toMatch(/^Auto-Submitted: auto-generated/m)
    // Delivered by the mta and passed over by the consumers of sent mail (the indexer), which log no error.
    expect(suite.server.output()).not.toMatch(/malformed outbound job/)

    const done = await choose({ token, password: "a brand new passphrase" })
    expect(done.response.status).toBe(200)
    expect(done.data).toEqual({ success: true, data: { email: person.email, sessionsEnded: 1, message: expect.any(String) } })
    expect((await withToken(suite.url, person).GET("/api/auth/sessions")).response.status).toBe(401)
    const old = await anonymous(suite.url).POST("/api/auth/login", { body: { email: person.email, password: person.password } })
    expect(old.response.status).toBe(401)
    const fresh = await anonymous(suite.url).POST("/api/auth/login", { body: { email: person.email, password: "a brand new passphrase" } })
    expect(fresh.response.status).toBe(200)
    // The account's activity tells the reset from a change, with where the link was opened.
    const activity = (await withToken(suite.url, fresh.data!.data).GET("/api/auth/activity")).data!.data
    expect(activity.slice(0, 3).map((e) => [e.kind, e.detail])).toEqual([
      ["login", {}],
      ["login_failed", { reason: "password" }],
      ["password_reset", { sessionsEnded: 1 }]
    ])
    expect(activity[2]!.clientAddress).not.toBeNull()

    const again = await choose({ token, password: "yet another passphrase" })
    expect(again.response.status).toBe(400)
    expect(again.error).toEqual({
      success: false,
      error: { code: "VALIDATION_ERROR", message: expect.any(String), details: { token: expect.stringContaining("ask for a new one") } }
    })
  })

  it("lets a person locked out by failed logins back in", async () => {
    const { person, inbox } = await personWithInbox()
    let locked = 0
    for (let i = 0; i < 11; i++) {
      const { response } = await anonymous(suite.url).POST("/api/auth/login", { body: { email: person.email, password: "not the password" } })
      if (response.status === 429) locked++
    }
    expect(locked).toBeGreaterThan(0)
    await ask(person.email)
    const { token } = await resetMail(inbox)
    expect((await choose({ token, password: "remembered at last" })).response.status).toBe(200)
    const login = await anonymous(suite.url).POST("/api/auth/login", { body: { email: person.email, password: "remembered at last" } })
    expect(login.response.status).toBe(200)
  })

  it("refuses bad input by field: no email, no token, a short password, a made-up token", async () => {
    const noEmail = await anonymous(suite.url).POST("/api/auth/password-reset", { body: offContract({}) })
    expect(noEmail.response.status).toBe(400)
    expect(noEmail.error?.error).toMatchObject({ code: "VALIDATION_ERROR", details: { email: "is required" } })

    const nothing = await choose({})
    expect(nothing.response.status).toBe(400)
    expect(nothing.error?.error).toMatchObject({ code: "VALIDATION_ERROR", details: { token: "is required", password: expect.any(String) } })

    const short = await choose({ token: "mrp_whatever", password: "short" })
    expect(short.response.status).toBe(400)
    expect(short.error?.error).toMatchObject({ code: "VALIDATION_ERROR", details: { password: "must be at least 8 characters" } })

    const madeUp = await choose({ token: "mrp_made-up", password: "long enough password" })
    expect(madeUp.response.status).toBe(400)
    expect(madeUp.error?.error).toMatchObject({ code: "VALIDATION_ERROR", details: { token: expect.any(String) } })
  })
})
