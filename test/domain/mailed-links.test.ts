/**
 * The links accounts are mailed, in process, over the suite's migrated database: a password reset's
 * hourly allowance, expiry and one link's use ending the account's others; a new email's expiry. The
 * mail is caught where it would be handed to the mta (SystemMail); its delivery and the HTTP routes are
 * test/api/password-reset.test.ts's and test/api/email-change.test.ts's.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Effect, Layer, Option, Redacted } from "effect"
import { Accounts } from "../../services/accounts/accounts.ts"
import { AccountActivity } from "../../services/accounts/activity.ts"
import { CredentialUse } from "../../services/accounts/credential-use.ts"
import { EmailChange } from "../../services/accounts/email-change.ts"
import { PasswordReset } from "../../services/accounts/password-reset.ts"
import { Principals } from "../../services/accounts/principals.ts"
import { AccountSettings } from "../../services/accounts/settings.ts"
import { sha256 } from "../../services/accounts/tokens.ts"
import { PaymentError, PaymentProvider } from "../../services/billing/payments.ts"
import { DependencyHealth } from "../../services/health/dependency-health.ts"
import { RecipientDirectory } from "../../services/mail/directory.ts"
import { WebhookSubscriptions } from "../../services/webhooks/subscriptions.ts"
import { type SystemMessage, SystemMail } from "../../services/outbound/system-mail.ts"
import { RateLimiter } from "../../services/ratelimit/rate-limiter.ts"
import * as MemoryBus from "../../layers/memory-bus.ts"
import { testDatabase } from "../support/database.ts"
import { testSecret, uniqueName } from "../support/services.ts"

/** Every message handed over, in order. */
const mailed: Array<SystemMessage> = []
const caughtMail = Layer.succeed(SystemMail, SystemMail.make({ send: (message) => Effect.sync(() => (mailed.push(message), `sys_${mailed.length}`)) }))

/** The payment provider as an email change meets it: the accounts it was told of, or down. */
const provider = { told: [] as Array<string>, down: false }
const payments = Layer.succeed(PaymentProvider, {
  checkout: () => Effect.die("not used"),
  portal: () => Effect.die("not used"),
  close: () => Effect.die("not used"),
  emailChanged: (userId) =>
    Effect.suspend(() =>
      provider.down ? Effect.fail(new PaymentError({ message: "connection refused" })) : Effect.sync(() => void provider.told.push(userId))
    ),
  webhook: Option.none()
})

const services = Layer.merge(PasswordReset.DefaultWithoutDependencies, EmailChange.DefaultWithoutDependencies).pipe(
  Layer.provide(Layer.mergeAll(caughtMail, RateLimiter.layer, payments, AccountActivity.Default)),
  Layer.provideMerge(Accounts.Default),
  Layer.provideMerge(Layer.mergeAll(Principals.Default, RecipientDirectory.Default, WebhookSubscriptions.Default, CredentialUse.layer)),
  Layer.provide(MemoryBus.layer),
  Layer.provide(Layer.merge(Layer.succeed(AccountSettings, { jwtSecret: Redacted.make(testSecret()) }), DependencyHealth.Default)),
  Layer.provideMerge(testDatabase)
)

const PAGE = "https://mail.example.test/"

/** A registered account, and the links mailed to it from here on. */
const account = Effect.gen(function*() {
  const email = `${uniqueName("reset")}@example.com`
  const user = yield* Effect.flatMap(Accounts, (accounts) => accounts.register({ email, password: "the old password", name: "Ada" }))
  const from = mailed.length
  const links = () => mailed.slice(from).filter((m) => m.to === email).flatMap((m) => /#\/reset-password\/(\S+)/.exec(m.text)?.[1] ?? [])
  const mailedTo = (address: string) => mailed.slice(from).filter((m) => m.to === address)
  return { ...user, links, mailedTo }
})

layer(services, { timeout: "120 seconds" })("mailed links", (it) => {
  it.effect("mails at most 5 links an hour to one account; the sixth ask is answered and mails nothing", () =>
    Effect.gen(function*() {
      const resets = yield* PasswordReset
      const user = yield* account
      for (let i = 0; i < 6; i++) yield* resets.request(user.email.toUpperCase(), PAGE)
      expect(user.links()).toHaveLength(5)
      // The dashboard's page, its trailing slash not doubled.
      expect(mailed.at(-1)!.text).toContain("https://mail.example.test/#/reset-password/mrp_")
      // Another account's allowance is its own.
      const other = yield* account
      yield* resets.request(other.email, PAGE)
      expect(other.links()).toHaveLength(1)
      // Nobody's email: nothing mailed, nothing refused.
      const before = mailed.length
      yield* resets.request("nobody-at-all@example.com", PAGE)
      expect(mailed.length).toBe(before)
    }))

  it.effect("an expired link is refused on details.token, and is gone", () =>
    Effect.gen(function*() {
      const resets = yield* PasswordReset
      const sql = yield* SqlClient.SqlClient
      const user = yield* account
      yield* resets.request(user.email, PAGE)
      const [token] = user.links()
      yield* sql`UPDATE password_resets SET expires_at = now() - interval '1 second' WHERE token_hash = ${sha256(token!)}`
      const refused = yield* Effect.flip(resets.confirm({ token: token!, password: "a new password" }))
      expect(refused).toMatchObject({ _tag: "ValidationError", details: { token: expect.stringContaining("expired") } })
      expect(yield* sql`SELECT 1 FROM password_resets WHERE user_id = ${user.userId}`).toHaveLength(0)
      const login = yield* Effect.flatMap(Accounts, (accounts) => accounts.login({ email: user.email, password: "the old password" }))
      expect(login.user.userId).toBe(user.userId)
    }))

  it.effect("any unexpired link of the account works, once; using it ends the others", () =>
    Effect.gen(function*() {
      const resets = yield* PasswordReset
      const user = yield* account
      yield* resets.request(user.email, PAGE)
      yield* resets.request(user.email, PAGE)
      const [first, second] = user.links()
      const done = yield* resets.confirm({ token: first!, password: "chosen from the first" })
      expect(done).toMatchObject({ email: user.email, sessionsEnded: 0 })
      for (const token of [first!, second!]) {
        const refused = yield* Effect.flip(resets.confirm({ token, password: "chosen again" }))
        expect(refused._tag).toBe("ValidationError")
      }
      const login = yield* Effect.flatMap(Accounts, (accounts) => accounts.login({ email: user.email, password: "chosen from the first" }))
      expect(login.user.userId).toBe(user.userId)
    }))

  it.effect("a new password's links end when the password is changed from a session, and when the account moves to another email", () =>
    Effect.gen(function*() {
      const resets = yield* PasswordReset
      const accounts = yield* Accounts
      const change = yield* EmailChange
      const user = yield* account
      const refused = (token: string) =>
        Effect.map(Effect.flip(resets.confirm({ token, password: "the thief's password" })), (error) => error._tag)
      // Mailed, then the owner changes the password from a session (perhaps because of whoever read the mailbox).
      yield* resets.request(user.email, PAGE)
      yield* accounts.changePassword(user.userId, "ses_elsewhere", { currentPassword: "the old password", newPassword: "the owner's new one" })
      expect(yield* refused(user.links()[0]!)).toBe("ValidationError")
      // Mailed to the old address, then the account moves to a new one: the old mailbox no longer speaks for it.
      yield* resets.request(user.email, PAGE)
      const newEmail = `${uniqueName("moved")}@example.com`
      yield* change.request(user.userId, { newEmail, password: "the owner's new one" }, PAGE)
      yield* change.confirm(/#\/confirm-email\/(\S+)/.exec(user.mailedTo(newEmail)[0]!.text)![1]!)
      expect(yield* refused(user.links()[1]!)).toBe("ValidationError")
      const login = yield* accounts.login({ email: newEmail, password: "the owner's new one" })
      expect(login.user.userId).toBe(user.userId)
    }))

  it.effect("a new email's link expires after 24 hours: refused on details.token, the email unchanged", () =>
    Effect.gen(function*() {
      const change = yield* EmailChange
      const sql = yield* SqlClient.SqlClient
      const user = yield* account
      const newEmail = `${uniqueName("moved")}@example.com`
      yield* change.request(user.userId, { newEmail, password: "the old password" }, PAGE)
      const [mail] = user.mailedTo(newEmail)
      expect(mail!.expiresAt.getTime() - Date.now()).toBeGreaterThan(23.9 * 3_600_000)
      const token = /#\/confirm-email\/(\S+)/.exec(mail!.text)![1]!
      yield* sql`UPDATE email_changes SET expires_at = now() - interval '1 second' WHERE token_hash = ${sha256(token)}`
      const refused = yield* Effect.flip(change.confirm(token))
      expect(refused).toMatchObject({ _tag: "ValidationError", details: { token: expect.stringContaining("expired") } })
      const [row] = yield* sql<{ email: string }>`SELECT email FROM users WHERE id = ${user.userId}`
      expect(row!.email).toBe(user.email)
      // The old address was told nothing: nothing changed.
      expect(user.mailedTo(user.email)).toHaveLength(0)
    }))

  it.effect("a confirmed email is passed to the payment provider; with the provider down the change is made all the same", () =>
    Effect.gen(function*() {
      const change = yield* EmailChange
      const sql = yield* SqlClient.SqlClient
      const move = (user: { readonly userId: string; readonly mailedTo: (address: string) => ReadonlyArray<SystemMessage> }) =>
        Effect.gen(function*() {
          const newEmail = `${uniqueName("moved")}@example.com`
          yield* change.request(user.userId, { newEmail, password: "the old password" }, PAGE)
          const token = /#\/confirm-email\/(\S+)/.exec(user.mailedTo(newEmail)[0]!.text)![1]!
          const done = yield* change.confirm(token)
          const [row] = yield* sql<{ email: string }>`SELECT email FROM users WHERE id = ${user.userId}`
          expect(row!.email).toBe(newEmail)
          return done
        })
      const told = yield* account
      yield* move(told)
      expect(provider.told).toContain(told.userId)

      provider.down = true
      const untold = yield* account
      const done = yield* move(untold).pipe(Effect.ensuring(Effect.sync(() => (provider.down = false))))
      expect(done.previousEmail).toBe(untold.email)
      expect(provider.told).not.toContain(untold.userId)
      // The old address is told all the same.
      expect(untold.mailedTo(untold.email)).toHaveLength(1)
    }))
})
