/**
 * Two-factor sign-in over real HTTP against a started server: set up with the password, turned on by
 * a code of the app (the codes made here as an authenticator app makes them, from the secret the server
 * answered), then asked of every login; a code works once; recovery codes stand in for the app, once
 * each; turning it off asks the password and a code. The account's email (a mailbox of this server,
 * where the test reads it) is told each time. Refusals by status, code and field.
 */
import { describe, expect, it } from "vitest"
import { totpAt } from "../../services/accounts/totp.ts"
import { signUp } from "../support/accounts.ts"
import { arrivedIn, fresh, newBox } from "../support/mailboxes.ts"
import { type SuiteServer, useSuiteServer } from "../support/server.ts"
import { anonymous, offContract, withKey, withToken } from "../support/typed-client.ts"
import { awayFromWindowEdge } from "../support/wait.ts"

let suite: SuiteServer

useSuiteServer((s) => {
  suite = s
})

type Person = Awaited<ReturnType<typeof signUp>>

const login = (person: Person, code?: string) =>
  anonymous(suite.url).POST("/api/auth/login", {
    body: { email: person.email, password: person.password, ...(code === undefined ? {} : { code }) }
  })

/** The code an authenticator app shows `offset` steps (of 30 s) from now. */
const appCode = (secret: string, offset = 0) => totpAt(secret, Date.now() + offset * 30_000)

/** A person with two-factor sign-in on: the secret their app holds and their recovery codes. */
const withTwoFactor = async (person: Person) => {
  const session = withToken(suite.url, person)
  const setup = await session.POST("/api/auth/two-factor/setup", { body: { password: person.password } })
  expect(setup.response.status).toBe(200)
  const { secret } = setup.data!.data
  const enabled = await session.POST("/api/auth/two-factor/enable", { body: { code: appCode(secret) } })
  expect(enabled.response.status).toBe(200)
  return { secret, recoveryCodes: enabled.data!.data.recoveryCodes }
}

describe("two-factor sign-in", () => {
  it("is set up, turned on by the app's code, and then asked of every login; the account's email is told", async () => {
    const inbox = await newBox(suite.url, { localPart: fresh("twofactor") })
    const person = await signUp(suite.url, { email: inbox.address, name: "Ada" })
    const session = withToken(suite.url, person)
    expect((await session.GET("/api/auth/two-factor")).data).toEqual({
      success: true,
      data: { enabled: false, enabledAt: null, recoveryCodesLeft: 0 }
    })

    const setup = await session.POST("/api/auth/two-factor/setup", { body: { password: person.password } })
    expect(setup.response.status).toBe(200)
    const { secret, otpauthUri } = setup.data!.data
    expect(secret).toMatch(/^[A-Z2-7]{32}$/)
    const uri = new URL(otpauthUri)
    expect(uri.host).toBe("totp")
    expect(decodeURIComponent(uri.pathname)).toBe(`/Mailroom:${person.email}`)
    expect(uri.searchParams.get("secret")).toBe(secret)
    // Set up is not on: the password alone still signs in.
    expect((await login(person)).response.status).toBe(200)

    const wrong = await session.POST("/api/auth/two-factor/enable", { body: { code: appCode(secret, 10) } })
    expect(wrong.response.status).toBe(400)
    expect(wrong.error?.error).toMatchObject({ code: "VALIDATION_ERROR", details: { code: "is not the authenticator app's current code" } })

    const enabledAt = Date.now()
    const enabled = await session.POST("/api/auth/two-factor/enable", { body: { code: totpAt(secret, enabledAt) } })
    expect(enabled.response.status).toBe(200)
    const { recoveryCodes } = enabled.data!.data
    expect(recoveryCodes).toHaveLength(10)
    const status = (await session.GET("/api/auth/two-factor")).data!.data
    expect(status).toEqual({ enabled: true, enabledAt: enabled.data!.data.enabledAt, recoveryCodesLeft: 10 })
    const told = await arrivedIn(suite.url, inbox, "Two-factor sign-in is on for your Mailroom account")
    expect(told.text).toContain(`signing in to the Mailroom account ${person.email} asks for a code`)

    // The password alone: 401 asking for the code (the client asks the person and sends all three).
    const asked = await login(person)
    expect(asked.response.status).toBe(401)
    expect(asked.error?.error).toMatchObject({ code: "UNAUTHORIZED", details: { code: "is required" } })
    expect(asked.response.headers.get("set-cookie")).toBeNull()
    const wrongPassword = await login({ ...person, password: "not the password" }, appCode(secret, 1))
    expect(wrongPassword.error?.error).toMatchObject({ code: "UNAUTHORIZED", message: "Invalid email or password" })

    // The code enabling took is used; the next step's (a phone's clock a little ahead) signs in, once.
    const replayed = await login(person, totpAt(secret, enabledAt))
    expect(replayed.response.status).toBe(401)
    expect(replayed.error?.error).toMatchObject({ code: "UNAUTHORIZED", details: { code: expect.stringContaining("nor an unused recovery code") } })
    const next = totpAt(secret, enabledAt + 30_000)
    const signedIn = await login(person, next.replace(/^(\d{3})/, "$1 "))
    expect(signedIn.response.status).toBe(200)
    expect(signedIn.data?.data.user.email).toBe(person.email)
    expect((await login(person, next)).response.status).toBe(401)
    expect((await login(person, appCode(secret, 5))).response.status).toBe(401)

    // A recovery code, in capitals and without its dash: once. The account is told, with how many are left.
    const recovery = recoveryCodes[0]!
    expect((await login(person, recovery.replace("-", "").toUpperCase())).response.status).toBe(200)
    expect((await login(person, recovery)).response.status).toBe(401)
    expect((await session.GET("/api/auth/two-factor")).data!.data.recoveryCodesLeft).toBe(9)
    const used = await arrivedIn(suite.url, inbox, "A recovery code signed in to your Mailroom account")
    expect(used.text).toContain("9 are left")
  })

  it("wrong codes count as failed logins: after 10, 429 even with the right code, as after wrong passwords", async () => {
    const person = await signUp(suite.url)
    const { secret } = await withTwoFactor(person)
    // The eleven in one window of failed logins (quarter hours from :00).
    await awayFromWindowEdge(15 * 60, 30)
    const wrongCode = String((Number(appCode(secret)) + 500_000) % 1_000_000).padStart(6, "0")
    for (let i = 0; i < 10; i++) {
      const refused = await login(person, i % 2 === 0 ? wrongCode : "abcde-fghij")
      expect(refused.response.status).toBe(401)
    }
    const locked = await login(person, appCode(secret, 1))
    expect(locked.response.status).toBe(429)
    expect(locked.error?.error).toMatchObject({ code: "RATE_LIMIT_EXCEEDED", details: { limit: 10, window: "15 minutes" } })
  })

  it("new recovery codes end the earlier ones; turning it off asks the password and a code, and tells the account", async () => {
    const inbox = await newBox(suite.url, { localPart: fresh("twofactoroff") })
    const person = await signUp(suite.url, { email: inbox.address })
    const session = withToken(suite.url, person)
    const { recoveryCodes } = await withTwoFactor(person)

    const regenerated = await session.POST("/api/auth/two-factor/recovery-codes", { body: { password: person.password } })
    expect(regenerated.response.status).toBe(200)
    const fresher = regenerated.data!.data.recoveryCodes
    expect(fresher).toHaveLength(10)
    expect(fresher.some((code) => recoveryCodes.includes(code))).toBe(false)
    expect((await login(person, recoveryCodes[1]!)).response.status).toBe(401)

    const off = (body: unknown) => session.DELETE("/api/auth/two-factor", { body: offContract(body) })
    const wrongPassword = await off({ password: "not the password", code: fresher[0] })
    expect(wrongPassword.response.status).toBe(400)
    expect(wrongPassword.error?.error).toMatchObject({ code: "VALIDATION_ERROR", details: { password: "is not the account's password" } })
    const wrongCode = await off({ password: person.password, code: recoveryCodes[0] })
    expect(wrongCode.response.status).toBe(400)
    expect(wrongCode.error?.error).toMatchObject({ code: "VALIDATION_ERROR", details: { code: expect.stringContaining("nor an unused recovery code") } })
    const missing = await off({})
    expect(missing.error?.error).toMatchObject({ code: "VALIDATION_ERROR", details: { password: "is required", code: "is required" } })

    const done = await off({ password: person.password, code: fresher[0] })
    expect(done.response.status).toBe(200)
    expect(done.data).toEqual({ success: true, data: { enabled: false, enabledAt: null, recoveryCodesLeft: 0 } })
    expect((await login(person)).response.status).toBe(200)
    const told = await arrivedIn(suite.url, inbox, "Two-factor sign-in is off for your Mailroom account")
    expect(told.text).toContain("asks for the password only from now on")

    const again = await off({ password: person.password, code: fresher[1] })
    expect(again.response.status).toBe(409)
    expect(again.error?.error).toMatchObject({ code: "CONFLICT", details: { twoFactor: "is off" } })
    const codesWhileOff = await session.POST("/api/auth/two-factor/recovery-codes", { body: { password: person.password } })
    expect(codesWhileOff.response.status).toBe(409)
  })

  it("refuses what cannot be: enabling with nothing set up, setting up while on, a wrong password, an API key", async () => {
    const person = await signUp(suite.url)
    const session = withToken(suite.url, person)
    const nothing = await session.POST("/api/auth/two-factor/enable", { body: { code: "123456" } })
    expect(nothing.response.status).toBe(409)
    expect(nothing.error?.error).toMatchObject({ code: "CONFLICT", details: { twoFactor: "is not set up" } })

    const wrongPassword = await session.POST("/api/auth/two-factor/setup", { body: { password: "not the password" } })
    expect(wrongPassword.response.status).toBe(400)
    expect(wrongPassword.error?.error).toMatchObject({ code: "VALIDATION_ERROR", details: { password: "is not the account's password" } })

    // A second setup replaces the first: the first secret's codes do not turn it on.
    const first = (await session.POST("/api/auth/two-factor/setup", { body: { password: person.password } })).data!.data.secret
    const second = (await session.POST("/api/auth/two-factor/setup", { body: { password: person.password } })).data!.data.secret
    expect(second).not.toBe(first)
    const stale = await session.POST("/api/auth/two-factor/enable", { body: { code: appCode(first) } })
    expect(stale.response.status).toBe(400)
    expect((await session.POST("/api/auth/two-factor/enable", { body: { code: appCode(second) } })).response.status).toBe(200)

    const whileOn = await session.POST("/api/auth/two-factor/setup", { body: { password: person.password } })
    expect(whileOn.response.status).toBe(409)
    expect(whileOn.error?.error).toMatchObject({ code: "CONFLICT", details: { twoFactor: "is on" } })
    const enabledAgain = await session.POST("/api/auth/two-factor/enable", { body: { code: appCode(second, 1) } })
    expect(enabledAgain.response.status).toBe(409)

    const badCode = await session.POST("/api/auth/two-factor/enable", { body: offContract({ code: "" }) })
    expect(badCode.error?.error).toMatchObject({ code: "VALIDATION_ERROR", details: { code: "is required" } })

    const key = await session.POST("/v1/api-keys", { body: { name: "agent" } })
    const keyed = withKey(suite.url, key.data!.data)
    expect((await keyed.GET("/api/auth/two-factor")).response.status).toBe(401)
    expect((await keyed.POST("/api/auth/two-factor/setup", { body: { password: person.password } })).response.status).toBe(401)
    // API keys are not logins: they keep working with two-factor sign-in on.
    expect((await keyed.GET("/v1/api/mailboxes")).response.status).toBe(200)
  })
})
