/**
 * User accounts and login sessions (SPEC "User authentication", DESIGN.md §4):
 * register, login, refresh (rotating), logout (ends that session only), a password changed from
 * a session (which signs out every other session of the account), and one set without the current
 * one (a mailed link, an operator), which signs out every session.
 */
import { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Option } from "effect"
import { Billing } from "../billing/billing.ts"
import { isUniqueViolation } from "../unique-violation.ts"
import { Conflict, NotFound, RateLimited, Unauthorized, ValidationError } from "../errors.ts"
import { accountFailedLoginWindows, failedLoginWindows, RateLimiter, type Window, wrongCodeWindows } from "../ratelimit/rate-limiter.ts"
import { AccountActivity, RequestOrigin } from "./activity.ts"
import { CredentialUse } from "./credential-use.ts"
import { hashPassword, needsRehash, PasswordCost, verifyPassword } from "./passwords.ts"
import { Principals } from "./principals.ts"
import { NOT_A_CODE, type SecondFactorUsed, useSecondFactor } from "./second-factor.ts"
import type { ChangePasswordInput, LoginInput, LoginSession, PasswordChanged, RegisteredUser, RegisterInput, User } from "./schemas.ts"
import { AccountSettings } from "./settings.ts"
import {
  ACCESS_TOKEN_SECONDS,
  cookieTokenPrefix,
  newId,
  opaqueToken,
  REFRESH_TOKEN_SECONDS,
  refreshTokenPrefix,
  sha256,
  signAccessToken
} from "./tokens.ts"

/** The failed-login counter of the account with this (normalised) email; its counters per client address are under it. */
export const failedLogins = (emailNormalized: string) => `login:${sha256(emailNormalized)}`

/**
 * The counters a failed login of the account from `address` spends (rate-limiter.ts): the account's
 * from that address (10 per 15 minutes), then the account's from everywhere (100 per 15 minutes).
 */
export const failedLoginCounters = (emailNormalized: string, address: string | undefined): ReadonlyArray<{
  readonly subject: string
  readonly windows: ReadonlyArray<Window>
}> => [
  { subject: `${failedLogins(emailNormalized)}:${address ?? "unknown"}`, windows: failedLoginWindows },
  { subject: failedLogins(emailNormalized), windows: accountFailedLoginWindows }
]

/** The account's counter of wrong second-factor codes (a day's: `wrongCodeWindows`), under its failed logins: forgotten with them. */
export const wrongCodes = (emailNormalized: string) => ({ subject: `${failedLogins(emailNormalized)}:codes`, windows: wrongCodeWindows })

/** The client address of the request being served, when there is one (RequestOrigin). */
export const requestAddress = Effect.map(Effect.serviceOption(RequestOrigin), (origin) => Option.getOrUndefined(origin)?.address)

/** Where a login comes from: recorded with its session, for the account's list of sessions. */
export interface LoginClient {
  readonly userAgent: string | undefined
  readonly address: string | undefined
}

/** The most of a User-Agent kept: enough to tell browsers apart, not a place to store a megabyte. */
const MAX_USER_AGENT = 512

export interface NewSession {
  readonly accessToken: string
  readonly refreshToken: string
  readonly expiresIn: number
  readonly user: User
  /** The dashboard session cookie's value. */
  readonly cookieToken: string
  readonly cookieMaxAge: number
  /** How the login proved its second factor, for an account with two-factor sign-in on. */
  readonly secondFactor: Option.Option<SecondFactorUsed>
}

export class Accounts extends Effect.Service<Accounts>()("mailroom/Accounts", {
  dependencies: [Billing.Default, RateLimiter.layer, CredentialUse.layer, AccountActivity.Default],
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const activity = yield* AccountActivity
    const billing = yield* Billing
    const uses = yield* CredentialUse
    const limiter = yield* RateLimiter
    const principals = yield* Principals
    const { jwtSecret } = yield* AccountSettings
    const cost = yield* PasswordCost
    // Verifying against a decoy makes a login for an unknown email cost what a wrong password costs.
    const decoyHash = yield* Effect.cached(hashPassword(opaqueToken(""), cost))

    const register = Effect.fn("Accounts.register")(
      function*(input: RegisterInput) {
        const userId = newId("usr")
        const passwordHash = yield* hashPassword(input.password, cost)
        const rows = yield* sql<{ createdAt: Date }>`
          INSERT INTO users ${
          sql.insert({ id: userId, email: input.email, emailNormalized: input.email.toLowerCase(), name: input.name, passwordHash })
        }
          RETURNING created_at`
        yield* billing.openFreeSubscription(userId)
        return {
          userId,
          email: input.email,
          name: input.name,
          createdAt: rows[0]!.createdAt.toISOString()
        } satisfies RegisteredUser
      },
      sql.withTransaction,
      Effect.catchTag("SqlError", (error): Effect.Effect<never, Conflict | SqlError> =>
        isUniqueViolation(error)
          ? Effect.fail(new Conflict({ message: "An account with this email is already registered", details: { email: "already registered" } }))
          : Effect.fail(error))
    )

    const openSession = (user: User, client: LoginClient, secondFactor: Option.Option<SecondFactorUsed> = Option.none()) =>
      Effect.gen(function*() {
        const sessionId = newId("ses")
        const refreshToken = opaqueToken(refreshTokenPrefix)
        const cookieToken = opaqueToken(cookieTokenPrefix)
        yield* sql`INSERT INTO sessions ${
          sql.insert({
            id: sessionId,
            userId: user.userId,
            refreshHash: sha256(refreshToken),
            cookieHash: sha256(cookieToken),
            refreshExpiresAt: new Date(Date.now() + REFRESH_TOKEN_SECONDS * 1000),
            // Characters a header may hold that a column may not (NUL) are dropped; the rest is kept as sent.
            userAgent: client.userAgent === undefined ? null : Array.from(client.userAgent.replace(/\u0000/g, "")).slice(0, MAX_USER_AGENT).join(""),
            clientAddress: client.address ?? null
          })
        }`
        return {
          accessToken: signAccessToken(jwtSecret, { userId: user.userId, sessionId }),
          refreshToken,
          expiresIn: ACCESS_TOKEN_SECONDS,
          user,
          cookieToken,
          cookieMaxAge: REFRESH_TOKEN_SECONDS,
          secondFactor
        } satisfies NewSession
      })

    const tooManyFailures = (decision: { readonly limit: number; readonly window: string; readonly retryAfter: number; readonly resetAt: number }) =>
      RateLimited.of({
        ...decision,
        message: "Too many failed logins for this account; try again later"
      })

    /** Refused (429) while a failed-login limit of the account (from `address`, or from everywhere) is spent: checked before a password is. */
    const failedLoginGate = (emailNormalized: string, address: string | undefined) =>
      Effect.forEach(failedLoginCounters(emailNormalized, address), ({ subject, windows }) =>
        Effect.flatMap(limiter.peek(subject, windows), (gate) => (gate.allowed ? Effect.void : tooManyFailures(gate))), { discard: true })

    /** A wrong password counted against the account's limits; the one that spends one is answered 429. */
    const countFailedLogin = (emailNormalized: string, address: string | undefined) =>
      Effect.forEach(failedLoginCounters(emailNormalized, address), ({ subject, windows }) =>
        Effect.flatMap(limiter.take(subject, windows), (counted) => (counted.allowed ? Effect.void : tooManyFailures(counted))), { discard: true })

    /** Refused (429) once the account's wrong codes of the day are spent: checked before a code is. */
    const wrongCodeGate = (emailNormalized: string) => {
      const counter = wrongCodes(emailNormalized)
      return Effect.flatMap(limiter.peek(counter.subject, counter.windows), (gate) =>
        gate.allowed ? Effect.void : RateLimited.of({
          ...gate,
          message: "Too many wrong codes for this account today: try again tomorrow, or choose a new password (\"Forgot your password?\"), which forgets them"
        }))
    }

    /** A wrong code counted against the account's day (and, as a failed login, against its other limits). */
    const countWrongCode = (emailNormalized: string, address: string | undefined) => {
      const counter = wrongCodes(emailNormalized)
      return Effect.zipRight(limiter.take(counter.subject, counter.windows), countFailedLogin(emailNormalized, address))
    }

    /**
     * Keep a password hashed at another cost at the current one (PASSWORD_HASH_COST changed since it
     * was set), now that it is known to be right. Only over the hash that was checked: a password
     * changed meanwhile stays as it was changed. Best effort: the login succeeds either way, and the
     * next one tries again.
     */
    const rehash = (userId: string, checked: string, password: string) =>
      Effect.flatMap(hashPassword(password, cost), (passwordHash) =>
        sql`UPDATE users SET password_hash = ${passwordHash} WHERE id = ${userId} AND password_hash = ${checked}`).pipe(
          Effect.catchAll((error) => Effect.logWarning(`Could not hash a password again at the current cost: ${error.message}`)),
          Effect.asVoid
        )

    /**
     * Log in with the email and password, and for an account with two-factor sign-in on, its second
     * factor (`code`). Without one, such an account is refused 401 with `details.code` "is required"
     * (the password was right: the client asks for the code and sends all three again); a wrong code
     * counts as a failed login, as a wrong password does.
     */
    const login = Effect.fn("Accounts.login")(function*(input: LoginInput, client: LoginClient = { userAgent: undefined, address: undefined }) {
      const email = input.email.toLowerCase()
      yield* failedLoginGate(email, client.address)

      const rows = yield* sql<{ id: string; email: string; name: string; passwordHash: string; totpSecret: string | null }>`
        SELECT u.id, u.email, u.name, u.password_hash, t.secret AS totp_secret
        FROM users u LEFT JOIN two_factor t ON t.user_id = u.id AND t.enabled_at IS NOT NULL
        WHERE u.email_normalized = ${email}`
      const found = rows[0]
      const valid = yield* verifyPassword(input.password, found?.passwordHash ?? (yield* decoyHash))
      // Recorded with where the login came from (a refused one for an account that exists).
      const note = (userId: string, kind: "login" | "login_failed", detail: Record<string, string | number>) =>
        Effect.provideService(activity.record(userId, kind, detail), RequestOrigin, client)
      if (!found || !valid) {
        if (found) yield* note(found.id, "login_failed", { reason: "password" })
        yield* countFailedLogin(email, client.address)
        return yield* Unauthorized.of("Invalid email or password")
      }
      if (needsRehash(found.passwordHash, cost)) yield* rehash(found.id, found.passwordHash, input.password)
      const user = { userId: found.id, email: found.email, name: found.name }
      if (found.totpSecret === null) {
        yield* note(found.id, "login", {})
        return yield* openSession(user, client)
      }
      if (input.code === undefined || input.code.trim() === "") {
        return yield* new Unauthorized({
          message: "This account signs in with a code from its authenticator app too: send it as code",
          details: { code: "is required" }
        })
      }
      yield* wrongCodeGate(email)
      const used = yield* useSecondFactor(found.id, found.totpSecret, input.code)
      if (Option.isNone(used)) {
        yield* note(found.id, "login_failed", { reason: "code" })
        yield* countWrongCode(email, client.address)
        return yield* new Unauthorized({ message: "Invalid code", details: { code: NOT_A_CODE } })
      }
      yield* note(found.id, "login", {
        secondFactor: used.value.method,
        ...(used.value.method === "recovery_code" ? { recoveryCodesLeft: used.value.recoveryCodesLeft } : {})
      })
      return yield* openSession(user, client, used)
    })

    /** Exchange a refresh token for a new access token and a new refresh token (rotation). */
    const refresh = Effect.fn("Accounts.refresh")(function*(refreshToken: string) {
      const presented = sha256(refreshToken)
      const next = opaqueToken(refreshTokenPrefix)
      // One statement: two concurrent refreshes with the same token cannot both succeed. The token
      // exchanged is kept as spent.
      const rows = yield* sql<{ id: string; userId: string }>`
        WITH rotated AS (
          UPDATE sessions SET refresh_hash = ${sha256(next)},
                 refreshed_at = now(), refresh_expires_at = ${new Date(Date.now() + REFRESH_TOKEN_SECONDS * 1000)}
          WHERE refresh_hash = ${presented} AND revoked_at IS NULL AND refresh_expires_at > now()
          RETURNING id, user_id
        ),
        spent AS (INSERT INTO spent_refresh_tokens (token_hash, session_id) SELECT ${presented}, id FROM rotated)
        SELECT id, user_id FROM rotated`
      const session = rows[0]
      if (!session) {
        // Any token the session exchanged before, presented again, means its tokens leaked (the
        // owner's or a thief's copy, whichever refreshed second): the session ends for everyone.
        const reused = yield* sql<{ id: string; userId: string }>`
          UPDATE sessions s SET revoked_at = now()
          FROM spent_refresh_tokens t
          WHERE t.token_hash = ${presented} AND s.id = t.session_id AND s.revoked_at IS NULL
          RETURNING s.id, s.user_id`
        if (reused.length > 0) {
          yield* principals.changed(reused[0]!.userId)
          yield* Effect.logWarning("Refresh token reused; session revoked").pipe(Effect.annotateLogs("session", reused[0]!.id))
        }
        return yield* Unauthorized.of("Invalid or expired refresh token")
      }
      return {
        accessToken: signAccessToken(jwtSecret, { userId: session.userId, sessionId: session.id }),
        expiresIn: ACCESS_TOKEN_SECONDS,
        refreshToken: next
      }
    })

    /** End one login session: its access token, refresh token and cookie stop working. */
    const logout = Effect.fn("Accounts.logout")(function*(sessionId: string) {
      const ended = yield* sql<{ userId: string }>`
        UPDATE sessions SET revoked_at = now() WHERE id = ${sessionId} AND revoked_at IS NULL RETURNING user_id`
      if (ended.length > 0) yield* principals.changed(ended[0]!.userId)
    })

    /**
     * The account's password, asked again of one of its sessions before something that cannot be
     * undone: a wrong one is 400 VALIDATION_ERROR on `field` and counts as a failed login of the
     * account (the same 10 in 15 minutes, then 429), so a session left open somewhere cannot be used
     * to guess it. Answers the hash that was checked.
     */
    const confirmPassword = Effect.fn("Accounts.confirmPassword")(function*(userId: string, password: string, field: string) {
      const rows = yield* sql<{ emailNormalized: string; passwordHash: string }>`
        SELECT email_normalized, password_hash FROM users WHERE id = ${userId}`
      const user = rows[0]
      if (!user) return yield* Unauthorized.of("The account no longer exists")
      const address = yield* requestAddress
      yield* failedLoginGate(user.emailNormalized, address)
      if (!(yield* verifyPassword(password, user.passwordHash))) {
        // In the account's activity as a refused sign-in: someone guessing from a session left open shows there.
        yield* activity.record(userId, "login_failed", { reason: "password", field })
        yield* countFailedLogin(user.emailNormalized, address)
        return yield* ValidationError.field(field, "is not the account's password")
      }
      return user.passwordHash
    })

    /**
     * Change the password from login session `sessionId`, which must know the current one
     * (`confirmPassword`). Every other session of the account ends with the change (their tokens and
     * cookies stop working on every node), and so does a link moving the account to another email; this
     * session goes on. API keys are not sessions and keep working.
     */
    const changePassword = Effect.fn("Accounts.changePassword")(function*(userId: string, sessionId: string, input: ChangePasswordInput) {
      const checked = yield* confirmPassword(userId, input.currentPassword, "currentPassword")
      if (input.newPassword === input.currentPassword) {
        return yield* ValidationError.field("newPassword", "must differ from the current password")
      }
      const passwordHash = yield* hashPassword(input.newPassword, cost)
      const ended = yield* sql.withTransaction(Effect.gen(function*() {
        // Only over the hash that was checked: of two changes at once, the second finds it changed.
        const changed = yield* sql`
          UPDATE users SET password_hash = ${passwordHash} WHERE id = ${userId} AND password_hash = ${checked} RETURNING id`
        if (changed.length === 0) {
          return yield* new Conflict({ message: "The password was changed meanwhile: sign in with the new one and try again" })
        }
        // A move of the account to another email asked before (perhaps by whoever knew the old
        // password) ends too, and so does a new password's link mailed before (perhaps to someone
        // who could read the mailbox).
        yield* sql`DELETE FROM email_changes WHERE user_id = ${userId}`
        yield* sql`DELETE FROM password_resets WHERE user_id = ${userId}`
        // Every other session, and how many of them were still alive (an expired one counts for nobody).
        return yield* sql<{ live: boolean }>`
          UPDATE sessions SET revoked_at = now()
          WHERE user_id = ${userId} AND id <> ${sessionId} AND revoked_at IS NULL
          RETURNING refresh_expires_at > now() AS live`
      }))
      const otherSessionsEnded = ended.filter((session) => session.live).length
      yield* principals.changed(userId)
      yield* activity.record(userId, "password_changed", { otherSessionsEnded })
      yield* Effect.logInfo("Password changed; other sessions signed out").pipe(
        Effect.annotateLogs({ user_id: userId, sessions_ended: otherSessionsEnded })
      )
      return {
        message: "Password changed; every other session of the account is signed out",
        otherSessionsEnded
      } satisfies PasswordChanged
    })

    /**
     * Set the password without the current one: from a mailed link (password-reset.ts) or by an operator
     * (`mailroom users set-password`). Whoever knew the old one is out: every session of the account and
     * every link it was mailed end, on every node; its failed logins (the forgotten password, tried) no
     * longer hold the new one back. API keys keep working.
     */
    const setPassword = Effect.fn("Accounts.setPassword")(function*(userId: string, password: string, by: "link" | "operator") {
      const passwordHash = yield* hashPassword(password, cost)
      const done = yield* sql.withTransaction(Effect.gen(function*() {
        const users = yield* sql<{ email: string; emailNormalized: string }>`
          UPDATE users SET password_hash = ${passwordHash} WHERE id = ${userId} RETURNING email, email_normalized`
        yield* sql`DELETE FROM password_resets WHERE user_id = ${userId}`
        yield* sql`DELETE FROM email_changes WHERE user_id = ${userId}`
        const ended = yield* sql<{ live: boolean }>`
          UPDATE sessions SET revoked_at = now() WHERE user_id = ${userId} AND revoked_at IS NULL
          RETURNING refresh_expires_at > now() AS live`
        return Option.map(Option.fromNullable(users[0]), (user) => ({ ...user, sessionsEnded: ended.filter((s) => s.live).length }))
      }))
      if (Option.isNone(done)) return yield* new NotFound({ message: "No such account", details: { userId } })
      yield* principals.changed(userId)
      yield* limiter.forget(failedLogins(done.value.emailNormalized))
      yield* activity.record(userId, by === "link" ? "password_reset" : "password_set", { sessionsEnded: done.value.sessionsEnded })
      yield* Effect.logInfo("Password set; every session signed out").pipe(
        Effect.annotateLogs({ user_id: userId, sessions_ended: done.value.sessionsEnded })
      )
      return { email: done.value.email, sessionsEnded: done.value.sessionsEnded }
    })

    /** The account's live login sessions (not ended, refresh token not expired), the most recently active first. */
    const sessions = Effect.fn("Accounts.sessions")(function*(userId: string, currentSessionId: string) {
      const rows = yield* sql<{
        id: string
        userAgent: string | null
        clientAddress: string | null
        createdAt: Date
        lastActiveAt: Date
        refreshExpiresAt: Date
      }>`
        SELECT id, user_agent, client_address, created_at,
               greatest(created_at, refreshed_at, last_used_at) AS last_active_at, refresh_expires_at
        FROM sessions
        WHERE user_id = ${userId} AND revoked_at IS NULL AND refresh_expires_at > now()`
      // Uses this process has not written yet count (credential-use.ts): the order is by what is shown.
      const listed = rows.map((row) => ({ ...row, lastActiveAt: uses.sessionLastUsed(row.id, row.lastActiveAt)! }))
        .sort((a, b) => b.lastActiveAt.getTime() - a.lastActiveAt.getTime() || (a.id < b.id ? -1 : 1))
      return listed.map((row): LoginSession => ({
        sessionId: row.id,
        current: row.id === currentSessionId,
        userAgent: row.userAgent,
        clientAddress: row.clientAddress,
        createdAt: row.createdAt.toISOString(),
        lastActiveAt: row.lastActiveAt.toISOString(),
        expiresAt: row.refreshExpiresAt.toISOString()
      }))
    })

    /** Sign one of the account's sessions out (a lost laptop, say): its tokens and cookie stop working on every node. */
    const endSession = Effect.fn("Accounts.endSession")(function*(userId: string, sessionId: string) {
      const ended = yield* sql`
        UPDATE sessions SET revoked_at = now()
        WHERE id = ${sessionId} AND user_id = ${userId} AND revoked_at IS NULL AND refresh_expires_at > now() RETURNING id`
      if (ended.length === 0) return yield* new NotFound({ message: "Session not found", details: { sessionId } })
      yield* principals.changed(userId)
      yield* activity.record(userId, "sessions_signed_out", { ended: 1 })
      return { ended: 1 }
    })

    /** Sign out every session of the account but `currentSessionId`. */
    const endOtherSessions = Effect.fn("Accounts.endOtherSessions")(function*(userId: string, currentSessionId: string) {
      const ended = yield* sql`
        UPDATE sessions SET revoked_at = now()
        WHERE user_id = ${userId} AND id <> ${currentSessionId} AND revoked_at IS NULL AND refresh_expires_at > now() RETURNING id`
      if (ended.length > 0) {
        yield* principals.changed(userId)
        yield* activity.record(userId, "sessions_signed_out", { ended: ended.length })
      }
      return { ended: ended.length }
    })

    const findUser = Effect.fn("Accounts.findUser")(function*(userId: string) {
      const rows = yield* sql<User>`SELECT id AS user_id, email, name FROM users WHERE id = ${userId}`
      return Option.fromNullable(rows[0])
    })

    return {
      register,
      login,
      refresh,
      logout,
      confirmPassword,
      wrongCodeGate,
      changePassword,
      setPassword,
      sessions,
      endSession,
      endOtherSessions,
      findUser
    } as const
  })
}) {}
