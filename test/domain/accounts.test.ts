/**
 * Accounts in process, over the suite's migrated database (SPEC "User authentication", DESIGN.md §4):
 * registration rules, login, refresh-token rotation and logout, with the Authenticator as the judge
 * of which credentials still work. The HTTP wiring of the same routes is test/api/auth.test.ts's.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Effect, Layer, Option, Redacted } from "effect"
import { Accounts, failedLoginCounters, wrongCodes } from "../../services/accounts/accounts.ts"
import { Authenticator } from "../../services/accounts/authenticator.ts"
import { CredentialUse } from "../../services/accounts/credential-use.ts"
import { hashPassword } from "../../services/accounts/passwords.ts"
import { Principals } from "../../services/accounts/principals.ts"
import { RecipientDirectory } from "../../services/mail/directory.ts"
import { WebhookSubscriptions } from "../../services/webhooks/subscriptions.ts"
import { RegisterInput } from "../../services/accounts/schemas.ts"
import { newTotpSecret, totpAt } from "../../services/accounts/totp.ts"
import { AccountSettings } from "../../services/accounts/settings.ts"
import { Billing } from "../../services/billing/billing.ts"
import type { RateLimited, Unauthorized } from "../../services/errors.ts"
import { RateLimiter } from "../../services/ratelimit/rate-limiter.ts"
import { DependencyHealth } from "../../services/health/dependency-health.ts"
import * as MemoryBus from "../../layers/memory-bus.ts"
import { decodeBody } from "../../src/http/surface.ts"
import { testDatabase } from "../support/database.ts"
import { testSecret, uniqueName } from "../support/services.ts"
import { awayFromWindowEdge } from "../support/wait.ts"

const settings = Layer.succeed(AccountSettings, { jwtSecret: Redacted.make(testSecret()) })

const services = Layer.mergeAll(Accounts.Default, Authenticator.Default, Billing.Default).pipe(
  Layer.provideMerge(Layer.mergeAll(Principals.Default, RecipientDirectory.Default, WebhookSubscriptions.Default, CredentialUse.layer)),
  Layer.provide(MemoryBus.layer),
  Layer.provide(Layer.merge(settings, DependencyHealth.Default)),
  Layer.provideMerge(testDatabase)
)

/** 20 ms of the wall clock (the test clock stands still; when a credential was used is read from the wall clock). */
const realPause = Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 20)))

const newEmail = () => `${uniqueName("user")}@Example.com`
const PASSWORD = "correct horse"

const registered = (email = newEmail()) =>
  Effect.flatMap(Accounts, (accounts) => accounts.register({ email, password: PASSWORD, name: "Ada" }))

/** Which user an access token stands for now, or the refusal. */
const bearer = (accessToken: string) =>
  Effect.flatMap(Authenticator, (auth) => auth.authenticate({ kind: "accessToken", secret: accessToken })).pipe(
    Effect.map(({ principal }) => principal)
  )

layer(services, { timeout: "120 seconds" })("Accounts", (it) => {
  it.effect("register answers the user (never the password) on an active free plan", () =>
    Effect.gen(function*() {
      const email = newEmail()
      const user = yield* registered(email)
      expect(user).toEqual({ userId: expect.stringMatching(/^usr_/), email, name: "Ada", createdAt: expect.any(String) })
      expect(new Date(user.createdAt).toISOString()).toBe(user.createdAt)
      const subscription = yield* Effect.flatMap(Billing, (billing) => billing.subscription(user.userId))
      expect(subscription).toMatchObject({ plan: "free", status: "active", cancelAtPeriodEnd: false })
      const sql = yield* SqlClient.SqlClient
      const stored = yield* sql<{ passwordHash: string }>`SELECT password_hash FROM users WHERE id = ${user.userId}`
      expect(stored[0]!.passwordHash).not.toContain(PASSWORD)
    }))

  it.effect("passwords are hashed at scrypt cost 2^15 unless set; one hashed at another cost logs in by its own and is hashed again at 2^15", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const user = yield* registered()
      const stored = yield* sql<{ passwordHash: string }>`SELECT password_hash FROM users WHERE id = ${user.userId}`
      expect(stored[0]!.passwordHash).toMatch(/^scrypt\$32768\$8\$1\$[A-Za-z0-9+/]{22}==\$[A-Za-z0-9+/]{43}=$/)

      // As an account registered while PASSWORD_HASH_COST was 10.
      const cheap = yield* hashPassword(PASSWORD, 10)
      expect(cheap).toMatch(/^scrypt\$1024\$8\$1\$/)
      const other = yield* registered()
      yield* sql`UPDATE users SET password_hash = ${cheap} WHERE id = ${other.userId}`
      const accounts = yield* Accounts
      const passwordOf = (userId: string) =>
        Effect.map(sql<{ passwordHash: string }>`SELECT password_hash FROM users WHERE id = ${userId}`, (rows) => rows[0]!.passwordHash)
      // A wrong password leaves the old hash alone; the right one logs in and is hashed again at 2^15.
      expect(yield* Effect.flip(accounts.login({ email: other.email, password: `${PASSWORD}!` }))).toMatchObject({ code: "UNAUTHORIZED" })
      expect(yield* passwordOf(other.userId)).toBe(cheap)
      expect((yield* accounts.login({ email: other.email, password: PASSWORD })).user.userId).toBe(other.userId)
      const upgraded = yield* passwordOf(other.userId)
      expect(upgraded).toMatch(/^scrypt\$32768\$8\$1\$/)
      expect((yield* accounts.login({ email: other.email, password: PASSWORD })).user.userId).toBe(other.userId)
      expect(yield* passwordOf(other.userId)).toBe(upgraded)
      expect(yield* Effect.flip(accounts.login({ email: other.email, password: `${PASSWORD}!` }))).toMatchObject({ code: "UNAUTHORIZED" })
    }))

  it.effect("a session is last active when last used: a request with its token moves it to the top of the list, and it is written", () =>
    Effect.gen(function*() {
      const accounts = yield* Accounts
      const sql = yield* SqlClient.SqlClient
      const user = yield* registered()
      const first = yield* accounts.login({ email: user.email, password: PASSWORD })
      yield* realPause
      const second = yield* accounts.login({ email: user.email, password: PASSWORD })
      const sessionOf = (accessToken: string) => Effect.map(bearer(accessToken), (principal) => Option.getOrThrow(principal.sessionId))
      const firstId = yield* sessionOf(first.accessToken)
      const secondId = yield* sessionOf(second.accessToken)
      const before = yield* accounts.sessions(user.userId, secondId)
      expect(before.map((s) => s.sessionId).slice(0, 2)).toEqual([secondId, firstId])

      yield* realPause
      yield* bearer(first.accessToken)
      const after = yield* accounts.sessions(user.userId, secondId)
      expect(after[0]!.sessionId).toBe(firstId)
      expect(Date.parse(after[0]!.lastActiveAt)).toBeGreaterThan(Date.parse(before.find((s) => s.sessionId === firstId)!.lastActiveAt))

      yield* (yield* CredentialUse).flush
      const stored = yield* sql<{ lastUsedAt: Date | null }>`SELECT last_used_at FROM sessions WHERE id = ${firstId}`
      expect(stored[0]!.lastUsedAt?.toISOString()).toBe(after[0]!.lastActiveAt)
    }))

  it.effect("an email already registered, in any letter case, is 409 CONFLICT and no second account is made", () =>
    Effect.gen(function*() {
      const email = newEmail()
      yield* registered(email)
      const error = yield* Effect.flip(registered(email.toUpperCase()))
      expect(error).toMatchObject({ code: "CONFLICT", status: 409, details: { email: "already registered" } })
      const error2 = yield* Effect.flip(registered(email.toLowerCase()))
      expect(error2).toMatchObject({ code: "CONFLICT", status: 409 })
      const sql = yield* SqlClient.SqlClient
      const rows = yield* sql`SELECT id FROM users WHERE email_normalized = ${email.toLowerCase()}`
      expect(rows).toHaveLength(1)
    }))

  it.effect("password of at least 8 characters and a valid email, else 400 VALIDATION_ERROR with details per field", () =>
    Effect.gen(function*() {
      const decode = decodeBody(RegisterInput, "api")
      const refused = yield* Effect.flip(decode({ email: "not-an-email", password: "7 chars", name: "Ada" }))
      expect(refused).toMatchObject({
        code: "VALIDATION_ERROR",
        status: 400,
        details: { email: "must be a valid email address", password: "must be at least 8 characters" }
      })
      const blank = yield* Effect.flip(decode({ email: newEmail(), password: " \t        ", name: "Ada" }))
      expect(blank).toMatchObject({ code: "VALIDATION_ERROR", details: { password: "must not be only spaces" } })
      const missing = yield* Effect.flip(decode({}))
      expect(missing).toMatchObject({
        code: "VALIDATION_ERROR",
        details: { email: "is required", password: "is required", name: "is required" }
      })
      // Exactly 8 is enough, and such an input registers.
      const accepted = yield* decode({ email: `  ${newEmail()} `, password: "8 chars!", name: "Ada" })
      expect(accepted.email).not.toMatch(/^\s|\s$/)
      yield* Effect.flatMap(Accounts, (accounts) => accounts.register(accepted))
    }))

  it.effect("login with the right password opens a session for that user; a wrong password or unknown email is 401", () =>
    Effect.gen(function*() {
      const accounts = yield* Accounts
      const user = yield* registered()
      const session = yield* accounts.login({ email: user.email.toUpperCase(), password: PASSWORD })
      expect(session).toMatchObject({
        accessToken: expect.any(String),
        refreshToken: expect.any(String),
        expiresIn: 900,
        user: { userId: user.userId, email: user.email, name: "Ada" }
      })
      expect((yield* bearer(session.accessToken)).userId).toBe(user.userId)

      const wrong = yield* Effect.flip(accounts.login({ email: user.email, password: `${PASSWORD}!` }))
      expect(wrong).toMatchObject({ code: "UNAUTHORIZED", status: 401 })
      const unknown = yield* Effect.flip(accounts.login({ email: newEmail(), password: PASSWORD }))
      expect(unknown).toMatchObject({ code: "UNAUTHORIZED", status: 401, message: wrong.message })
    }))

  it.effect("after 10 failed logins in 15 minutes an account gets 429 even with the right password; others are unaffected", () =>
    Effect.gen(function*() {
      const accounts = yield* Accounts
      const target = yield* registered()
      const bystander = yield* registered()
      for (let i = 0; i < 10; i++) {
        const error = yield* Effect.flip(accounts.login({ email: target.email, password: "wrong password" }))
        expect(error).toMatchObject({ code: "UNAUTHORIZED", status: 401 })
      }
      const limited = yield* Effect.flip(accounts.login({ email: target.email, password: PASSWORD }))
      expect(limited).toMatchObject({ code: "RATE_LIMIT_EXCEEDED", status: 429, details: { limit: 10 } })
      expect((yield* accounts.login({ email: bystander.email, password: PASSWORD })).user.userId).toBe(bystander.userId)
    }))

  it.effect("failed logins count per client address and per account: one address's 10 lock only it, 100 from many lock every address, a new password forgets them", () =>
    Effect.gen(function*() {
      const accounts = yield* Accounts
      const limiter = yield* RateLimiter
      const target = yield* registered()
      const from = (address: string) => ({ userAgent: "test", address })
      const refused = (address: string, password: string) => Effect.flip(accounts.login({ email: target.email, password }, from(address)))
      // The counters' windows are the clock's quarter hours: the whole test falls in one.
      yield* Effect.promise(() => awayFromWindowEdge(900, 60))
      for (let i = 0; i < 10; i++) expect(yield* refused("198.51.100.1", "wrong password")).toMatchObject({ code: "UNAUTHORIZED" })
      expect(yield* refused("198.51.100.1", PASSWORD)).toMatchObject({ code: "RATE_LIMIT_EXCEEDED", status: 429, details: { limit: 10 } })
      // The owner elsewhere is not locked out by whoever guesses there.
      expect((yield* accounts.login({ email: target.email, password: PASSWORD }, from("203.0.113.7"))).user.userId).toBe(target.userId)

      // Guessing spread over addresses: 100 failures in all lock the account everywhere. 89 more are
      // counted as other addresses' would be (a password check each would take most of a minute).
      const account = failedLoginCounters(target.email.toLowerCase(), undefined)[1]!
      for (let i = 0; i < 89; i++) yield* limiter.take(account.subject, account.windows)
      expect(yield* refused("198.51.100.2", "wrong password")).toMatchObject({ code: "UNAUTHORIZED" })
      expect(yield* refused("203.0.113.7", PASSWORD)).toMatchObject({ code: "RATE_LIMIT_EXCEEDED", status: 429, details: { limit: 100 } })

      yield* accounts.setPassword(target.userId, `${PASSWORD}-new`, "operator")
      expect((yield* accounts.login({ email: target.email, password: `${PASSWORD}-new` }, from("198.51.100.1"))).user.userId).toBe(target.userId)
    }).pipe(Effect.provide(RateLimiter.layer)), { timeout: 120_000 })

  it.effect("wrong second-factor codes: 30 in a day, from anywhere, refuse even the right code (429); a new password forgets them", () =>
    Effect.gen(function*() {
      const accounts = yield* Accounts
      const limiter = yield* RateLimiter
      const sql = yield* SqlClient.SqlClient
      const target = yield* registered()
      const secret = newTotpSecret()
      yield* sql`INSERT INTO two_factor (user_id, secret, enabled_at) VALUES (${target.userId}, ${secret}, now())`
      const withCode = (code: string, password = PASSWORD, address = "198.51.100.9") =>
        accounts.login({ email: target.email, password, code }, { userAgent: "test", address })
      // Refused as the API answers it (a database failure would fail the test as it is).
      const refusal = (code: string, password = PASSWORD, address = "198.51.100.9") =>
        Effect.map(Effect.flip(withCode(code, password, address)), (error) => error as Unauthorized | RateLimited)
      const wrong = String((Number(totpAt(secret, Date.now())) + 500_000) % 1_000_000).padStart(6, "0")
      // The day's window is the clock's UTC day: the whole test falls in one.
      yield* Effect.promise(() => awayFromWindowEdge(86_400, 60))
      // 29 wrong codes counted as many addresses' would be (each address may fail 10 a quarter hour), then one more.
      const codes = wrongCodes(target.email.toLowerCase())
      for (let i = 0; i < 29; i++) yield* limiter.take(codes.subject, codes.windows)
      const refused = yield* refusal(wrong)
      expect([refused.code, refused.details]).toEqual(["UNAUTHORIZED", { code: expect.any(String) }])
      const locked = yield* refusal(totpAt(secret, Date.now()), PASSWORD, "203.0.113.9")
      expect([locked.code, locked.status, locked.details]).toEqual(["RATE_LIMIT_EXCEEDED", 429, { limit: 30, window: "day", retry_after: expect.any(Number) }])
      expect(locked.message).toContain("Forgot your password")
      // A wrong password is still told as such: the day's limit is on codes.
      expect((yield* refusal(totpAt(secret, Date.now()), "wrong password", "203.0.113.9")).code).toBe("UNAUTHORIZED")
      yield* accounts.setPassword(target.userId, `${PASSWORD}-new`, "link")
      const session = yield* withCode(totpAt(secret, Date.now() + 30_000), `${PASSWORD}-new`)
      expect(session.user.userId).toBe(target.userId)
    }).pipe(Effect.provide(RateLimiter.layer)), { timeout: 120_000 })

  it.effect("refresh rotates: a new access and refresh token; the used refresh token is refused, and its reuse ends the session", () =>
    Effect.gen(function*() {
      const accounts = yield* Accounts
      const user = yield* registered()
      const session = yield* accounts.login({ email: user.email, password: PASSWORD })
      const refreshed = yield* accounts.refresh(session.refreshToken)
      expect(refreshed).toEqual({ accessToken: expect.any(String), refreshToken: expect.any(String), expiresIn: 900 })
      expect(refreshed.refreshToken).not.toBe(session.refreshToken)
      expect((yield* bearer(refreshed.accessToken)).userId).toBe(user.userId)

      const reused = yield* Effect.flip(accounts.refresh(session.refreshToken))
      expect(reused).toMatchObject({ code: "UNAUTHORIZED", status: 401 })
      // The old token came back after rotation, so it leaked: the whole session is ended.
      expect(yield* Effect.flip(accounts.refresh(refreshed.refreshToken))).toMatchObject({ code: "UNAUTHORIZED" })
      expect(yield* Effect.flip(bearer(refreshed.accessToken))).toMatchObject({ code: "UNAUTHORIZED", status: 401 })

      expect(yield* Effect.flip(accounts.refresh("mrr_not-a-token"))).toMatchObject({ code: "UNAUTHORIZED", status: 401 })
    }))

  it.effect("a refresh token past its 30 days is refused", () =>
    Effect.gen(function*() {
      const accounts = yield* Accounts
      const sql = yield* SqlClient.SqlClient
      const user = yield* registered()
      const session = yield* accounts.login({ email: user.email, password: PASSWORD })
      yield* sql`UPDATE sessions SET refresh_expires_at = now() - interval '1 second' WHERE user_id = ${user.userId}`
      expect(yield* Effect.flip(accounts.refresh(session.refreshToken))).toMatchObject({ code: "UNAUTHORIZED", status: 401 })
    }))

  it.effect("logout ends that session only: its access token, refresh token and cookie stop working, another login's keep working", () =>
    Effect.gen(function*() {
      const accounts = yield* Accounts
      const auth = yield* Authenticator
      const user = yield* registered()
      const ending = yield* accounts.login({ email: user.email, password: PASSWORD })
      const other = yield* accounts.login({ email: user.email, password: PASSWORD })
      const sessionId = Option.getOrThrow((yield* bearer(ending.accessToken)).sessionId)

      yield* accounts.logout(sessionId)

      expect(yield* Effect.flip(bearer(ending.accessToken))).toMatchObject({ code: "UNAUTHORIZED", status: 401 })
      expect(yield* Effect.flip(accounts.refresh(ending.refreshToken))).toMatchObject({ code: "UNAUTHORIZED", status: 401 })
      expect(yield* Effect.flip(auth.authenticate({ kind: "cookie", secret: ending.cookieToken }))).toMatchObject({
        code: "UNAUTHORIZED",
        status: 401
      })

      expect((yield* bearer(other.accessToken)).userId).toBe(user.userId)
      expect((yield* auth.authenticate({ kind: "cookie", secret: other.cookieToken })).principal.userId).toBe(user.userId)
      const refreshed = yield* accounts.refresh(other.refreshToken)
      expect((yield* bearer(refreshed.accessToken)).userId).toBe(user.userId)
    }))
})
