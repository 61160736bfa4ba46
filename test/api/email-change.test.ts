/**
 * Changing an account's email over real HTTP and SMTP against a started server: asked from a session
 * with the password, mailed to the new address (a mailbox of this server, where the test reads it),
 * made when its link is confirmed, and told to the old address. Refusals by field. Expiry:
 * test/domain/mailed-links.test.ts.
 */
import { describe, expect, it } from "vitest"
import { signUp } from "../support/accounts.ts"
import { arrivedIn, type Box, emailChangeToken, fresh, newBox } from "../support/mailboxes.ts"
import { type SuiteServer, useSuiteServer } from "../support/server.ts"
import { anonymous, offContract, withKey, withToken } from "../support/typed-client.ts"

let suite: SuiteServer

useSuiteServer((s) => {
  suite = s
})

const arrived = (inbox: Box, subject: string) => arrivedIn(suite.url, inbox, subject)

const confirm = (token: unknown) => anonymous(suite.url).POST("/api/auth/email/confirm", { body: offContract({ token }) })

const login = async (email: string, password: string) =>
  (await anonymous(suite.url).POST("/api/auth/login", { body: { email, password } })).response.status

describe("changing the account's email", () => {
  it("waits for the new address to confirm, then signs in with it, keeps the session and tells the old address", async () => {
    const oldInbox = await newBox(suite.url, { localPart: fresh("before") })
    const newInbox = await newBox(suite.url, { localPart: fresh("after") })
    const person = await signUp(suite.url, { email: oldInbox.address, name: "Grace" })

    const asked = await withToken(suite.url, person).POST("/api/auth/email", { body: { newEmail: newInbox.address, password: person.password } })
    expect(asked.response.status).toBe(202)
    expect(asked.data).toEqual({ success: true, data: { newEmail: newInbox.address, message: expect.stringContaining("24 hours") } })
    const link = await arrived(newInbox, "Confirm your new Mailroom email")
    expect(link.text).toContain(`${oldInbox.address} asked to sign in with ${newInbox.address}`)
    // Nothing changes until the link is used.
    expect(await login(oldInbox.address, person.password)).toBe(200)
    expect(await login(newInbox.address, person.password)).toBe(401)

    const done = await confirm(emailChangeToken(link.text))
    expect(done.response.status).toBe(200)
    expect(done.data).toEqual({ success: true, data: { email: newInbox.address, previousEmail: oldInbox.address } })
    expect(await login(newInbox.address, person.password)).toBe(200)
    expect(await login(oldInbox.address, person.password)).toBe(401)
    expect((await withToken(suite.url, person).GET("/api/auth/sessions")).response.status).toBe(200)
    const [changed] = (await withToken(suite.url, person).GET("/api/auth/activity")).data!.data.filter((e) => e.kind === "email_changed")
    expect(changed?.detail).toEqual({ previousEmail: oldInbox.address, email: newInbox.address })
    const told = await arrived(oldInbox, "Your Mailroom email was changed")
    expect(told.text).toContain(`signs in with ${newInbox.address} from now on`)

    const again = await confirm(emailChangeToken(link.text))
    expect(again.response.status).toBe(400)
    expect(again.error?.error).toMatchObject({ code: "VALIDATION_ERROR", details: { token: expect.stringContaining("ask for a new one") } })
  })

  it("a new password ends a link not yet opened: whoever knew the old one cannot move the account afterwards", async () => {
    const newInbox = await newBox(suite.url, { localPart: fresh("taker") })
    const person = await signUp(suite.url)
    const session = withToken(suite.url, person)
    expect((await session.POST("/api/auth/email", { body: { newEmail: newInbox.address, password: person.password } })).response.status).toBe(202)
    const link = await arrived(newInbox, "Confirm your new Mailroom email")
    expect((await session.POST("/api/auth/password", { body: { currentPassword: person.password, newPassword: "the owner's new one" } })).response.status)
      .toBe(200)
    const late = await confirm(emailChangeToken(link.text))
    expect([late.response.status, late.error?.error.code]).toEqual([400, "VALIDATION_ERROR"])
    expect(await login(person.email, "the owner's new one")).toBe(200)
  })

  it("refuses by field: a wrong password, an address another account uses, its own, not an address; an API key is 401", async () => {
    const person = await signUp(suite.url)
    const other = await signUp(suite.url)
    const ask = (body: unknown) => withToken(suite.url, person).POST("/api/auth/email", { body: offContract(body) })

    const wrong = await ask({ newEmail: `${fresh("n")}@example.com`, password: "not the password" })
    expect(wrong.response.status).toBe(400)
    expect(wrong.error?.error).toMatchObject({ code: "VALIDATION_ERROR", details: { password: "is not the account's password" } })

    const takenAddress = await ask({ newEmail: other.email.toUpperCase(), password: person.password })
    expect(takenAddress.response.status).toBe(409)
    expect(takenAddress.error?.error).toMatchObject({ code: "CONFLICT", details: { newEmail: "already registered" } })

    const own = await ask({ newEmail: person.email, password: person.password })
    expect(own.response.status).toBe(400)
    expect(own.error?.error).toMatchObject({ code: "VALIDATION_ERROR", details: { newEmail: "is the account's email already" } })

    const invalid = await ask({ newEmail: "not an address", password: "" })
    expect(invalid.response.status).toBe(400)
    expect(invalid.error?.error).toMatchObject({
      code: "VALIDATION_ERROR",
      details: { newEmail: "must be a valid email address", password: "is required" }
    })

    const keyed = await withToken(suite.url, person).POST("/v1/api-keys", { body: { name: "agent" } })
    const withApiKey = await withKey(suite.url, keyed.data!.data).POST("/api/auth/email", {
      body: { newEmail: `${fresh("n")}@example.com`, password: person.password }
    })
    expect(withApiKey.response.status).toBe(401)

    const madeUp = await confirm("mre_made-up")
    expect(madeUp.response.status).toBe(400)
    expect(madeUp.error?.error).toMatchObject({ code: "VALIDATION_ERROR", details: { token: expect.any(String) } })
    const none = await confirm("")
    expect(none.error?.error).toMatchObject({ code: "VALIDATION_ERROR", details: { token: "is required" } })
  })

  it("a link whose address another account registered meanwhile is 409, and the email stays", async () => {
    const newInbox = await newBox(suite.url, { localPart: fresh("contested") })
    const person = await signUp(suite.url)
    await withToken(suite.url, person).POST("/api/auth/email", { body: { newEmail: newInbox.address, password: person.password } })
    const link = await arrived(newInbox, "Confirm your new Mailroom email")
    await signUp(suite.url, { email: newInbox.address })
    const refused = await confirm(emailChangeToken(link.text))
    expect(refused.response.status).toBe(409)
    expect(refused.error?.error).toMatchObject({ code: "CONFLICT", details: { newEmail: "already registered" } })
    expect(await login(person.email, person.password)).toBe(200)
  })
})
