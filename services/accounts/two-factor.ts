/**
 * Two-factor sign-in: a login asks, after the password, for the current code of an authenticator
 * app (TOTP, totp.ts) or one of the account's recovery codes (second-factor.ts checks them; Accounts.login
 * asks). API keys are not logins and are not affected.
 *
 * - Turning it on takes two steps from a login session: `setup` (the password again) makes a secret,
 *   shown once as text and as an otpauth URI (the dashboard draws its QR code); `enable` with a code
 *   from the app proves the app has it, turns it on and answers 10 recovery codes, shown once.
 * - Turning it off, or new recovery codes, ask the password again (and, to turn it off, a code): a
 *   session left open somewhere must not be enough. Wrong ones count as failed logins.
 * - The account's email is told each time it is turned on or off (and when a recovery code signs in:
 *   login-notices.ts).
 * - An operator turns it off for a person who lost both app and codes (`mailroom users reset-two-factor`).
 *   Passwords set without the current one (a mailed link, an operator) leave it as it is.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Option } from "effect"
import { Conflict, Unauthorized, ValidationError } from "../errors.ts"
import { notice, SystemMail } from "../outbound/system-mail.ts"
import { RateLimiter } from "../ratelimit/rate-limiter.ts"
import { Accounts, failedLoginCounters, requestAddress, wrongCodes } from "./accounts.ts"
import { AccountActivity } from "./activity.ts"
import type { TwoFactorStatus } from "./schemas.ts"
import { NOT_A_CODE, useSecondFactor } from "./second-factor.ts"
import { asTotpCode, matchingStep, newRecoveryCodes, newTotpSecret, otpauthUri, RECOVERY_CODES, recoveryCodeDigest } from "./totp.ts"

/** What authenticator apps list the account under. */
export const TOTP_ISSUER = "Mailroom"
export class TwoFactor extends Effect.Service<TwoFactor>()("mailroom/TwoFactor", {
  dependencies: [Accounts.Default, RateLimiter.layer, SystemMail.Default, AccountActivity.Default],
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const accounts = yield* Accounts
    const limiter = yield* RateLimiter
    const mail = yield* SystemMail
    const activity = yield* AccountActivity

    /** The session's account (deleted meanwhile by another of its sessions: 401, as for any credential of it). */
    const userOf = (userId: string) =>
      Effect.flatMap(
        sql<{ email: string; emailNormalized: string; name: string }>`SELECT email, email_normalized, name FROM users WHERE id = ${userId}`,
        (rows) => (rows[0] === undefined ? Effect.fail(Unauthorized.of("The account no longer exists")) : Effect.succeed(rows[0]))
      )

    /** Tell the account's email what happened to its sign-in; best effort (the change is made either way). */
    const notify = (user: { readonly email: string; readonly name: string }, subject: string, paragraphs: ReadonlyArray<string>) =>
      mail.send(notice(user, subject, paragraphs)).pipe(
        Effect.catchAll((error) => Effect.logWarning(`Could not mail a two-factor notice: ${String(error)}`)),
        Effect.asVoid
      )

    const status = Effect.fn("TwoFactor.status")(function*(userId: string) {
      const rows = yield* sql<{ enabledAt: Date; left: number }>`
        SELECT enabled_at, cardinality(recovery_hashes) AS left FROM two_factor WHERE user_id = ${userId} AND enabled_at IS NOT NULL`
      const row = rows[0]
      return {
        enabled: row !== undefined,
        enabledAt: row?.enabledAt.toISOString() ?? null,
        recoveryCodesLeft: row === undefined ? 0 : Number(row.left)
      } satisfies typeof TwoFactorStatus.Type
    })

    const alreadyOn = () =>
      new Conflict({ message: "Two-factor sign-in is on already: turn it off first to use another app", details: { twoFactor: "is on" } })

    /**
     * Make a new secret for the account's authenticator app (replacing one set up and not turned on).
     * Nothing changes at sign-in until `enable` proves the app has it.
     */
    const setup = Effect.fn("TwoFactor.setup")(function*(userId: string, password: string) {
      yield* accounts.confirmPassword(userId, password, "password")
      const user = yield* userOf(userId)
      const secret = newTotpSecret()
      const made = yield* sql`
        INSERT INTO two_factor (user_id, secret) VALUES (${userId}, ${secret})
        ON CONFLICT (user_id) DO UPDATE SET secret = EXCLUDED.secret, last_step = NULL, recovery_hashes = '{}', created_at = now()
        WHERE two_factor.enabled_at IS NULL
        RETURNING user_id`
      if (made.length === 0) return yield* alreadyOn()
      return { secret, otpauthUri: otpauthUri(secret, TOTP_ISSUER, user.email) }
    })

    /** Turn it on with a code of the secret `setup` made; answers the recovery codes, which are shown this once. */
    const enable = Effect.fn("TwoFactor.enable")(function*(userId: string, code: string) {
      const rows = yield* sql<{ secret: string; enabled: boolean }>`
        SELECT secret, enabled_at IS NOT NULL AS enabled FROM two_factor WHERE user_id = ${userId}`
      const pending = rows[0]
      if (pending?.enabled) return yield* alreadyOn()
      if (pending === undefined) {
        return yield* new Conflict({
          message: "Nothing to turn on: set two-factor sign-in up first (POST /api/auth/two-factor/setup)",
          details: { twoFactor: "is not set up" }
        })
      }
      const digits = asTotpCode(code)
      const step = digits === undefined ? undefined : matchingStep(pending.secret, digits, Date.now())
      if (step === undefined) return yield* ValidationError.field("code", "is not the authenticator app's current code")
      const recoveryCodes = newRecoveryCodes()
      // Over the secret the code was checked against: a setup made meanwhile must be proved itself.
      const enabled = yield* sql<{ enabledAt: Date }>`
        UPDATE two_factor SET enabled_at = now(), last_step = ${step}, recovery_hashes = ${recoveryCodes.map(recoveryCodeDigest)}::text[]
        WHERE user_id = ${userId} AND secret = ${pending.secret} AND enabled_at IS NULL
        RETURNING enabled_at`
      if (enabled.length === 0) {
        return yield* new Conflict({ message: "Two-factor sign-in was set up again meanwhile: use the newest secret", details: { twoFactor: "changed" } })
      }
      const user = yield* userOf(userId)
      yield* Effect.logInfo("Two-factor sign-in turned on").pipe(Effect.annotateLogs({ user_id: userId }))
      yield* activity.record(userId, "two_factor_enabled")
      yield* notify(user, "Two-factor sign-in is on for your Mailroom account", [
        `From now on, signing in to the Mailroom account ${user.email} asks for a code from your authenticator app after the password.`,
        `Keep the ${RECOVERY_CODES} recovery codes you were shown somewhere safe: each signs in once without the app.`,
        "If you did not turn it on, someone who knew your password did: ask your Mailroom operator for help."
      ])
      return { enabledAt: enabled[0]!.enabledAt.toISOString(), recoveryCodes }
    })

    /** A wrong code from a session that knew the password: counted as a failed login and against the day's codes, refused on `details.code`. */
    const wrongCode = (emailNormalized: string) =>
      Effect.flatMap(requestAddress, (address) =>
        Effect.forEach([...failedLoginCounters(emailNormalized, address), wrongCodes(emailNormalized)], ({ subject, windows }) =>
          limiter.take(subject, windows), { discard: true })).pipe(
          Effect.zipRight(ValidationError.field("code", NOT_A_CODE))
        )

    const enabledSecret = (userId: string) =>
      Effect.flatMap(
        sql<{ secret: string }>`SELECT secret FROM two_factor WHERE user_id = ${userId} AND enabled_at IS NOT NULL`,
        (rows) =>
          rows[0] === undefined
            ? Effect.fail(new Conflict({ message: "Two-factor sign-in is off", details: { twoFactor: "is off" } }))
            : Effect.succeed(rows[0].secret)
      )

    /** Turn it off, with the password and a code (of the app, or a recovery code). */
    const disable = Effect.fn("TwoFactor.disable")(function*(userId: string, input: { readonly password: string; readonly code: string }) {
      yield* accounts.confirmPassword(userId, input.password, "password")
      const user = yield* userOf(userId)
      const secret = yield* enabledSecret(userId)
      yield* accounts.wrongCodeGate(user.emailNormalized)
      const used = yield* useSecondFactor(userId, secret, input.code)
      if (Option.isNone(used)) return yield* wrongCode(user.emailNormalized)
      yield* sql`DELETE FROM two_factor WHERE user_id = ${userId}`
      yield* Effect.logInfo("Two-factor sign-in turned off").pipe(Effect.annotateLogs({ user_id: userId }))
      yield* activity.record(userId, "two_factor_disabled")
      yield* notify(user, "Two-factor sign-in is off for your Mailroom account", [
        `Signing in to the Mailroom account ${user.email} asks for the password only from now on.`,
        "If you did not turn it off, someone who knew your password and had your authenticator app or a recovery code did: change your password and ask your Mailroom operator for help."
      ])
      return yield* status(userId)
    })

    /** New recovery codes (with the password again); the account's earlier ones stop working. */
    const regenerateRecoveryCodes = Effect.fn("TwoFactor.regenerateRecoveryCodes")(function*(userId: string, password: string) {
      yield* accounts.confirmPassword(userId, password, "password")
      yield* enabledSecret(userId)
      const recoveryCodes = newRecoveryCodes()
      yield* sql`UPDATE two_factor SET recovery_hashes = ${recoveryCodes.map(recoveryCodeDigest)}::text[]
                 WHERE user_id = ${userId} AND enabled_at IS NOT NULL`
      yield* activity.record(userId, "recovery_codes_regenerated")
      return { recoveryCodes }
    })

    /**
     * An operator turns it off for a person who lost both app and codes, at their request (by email, no
     * password or code); nobody is mailed: the operator tells them.
     */
    const reset = Effect.fn("TwoFactor.reset")(function*(userId: string) {
      const removed = yield* sql<{ was: boolean }>`DELETE FROM two_factor WHERE user_id = ${userId} RETURNING enabled_at IS NOT NULL AS was`
      const wasOn = removed[0]?.was === true
      if (wasOn) {
        yield* Effect.logInfo("Two-factor sign-in turned off by an operator").pipe(Effect.annotateLogs({ user_id: userId }))
        yield* activity.record(userId, "two_factor_disabled", { by: "operator" })
      }
      return { wasOn }
    })

    return { status, setup, enable, disable, regenerateRecoveryCodes, reset } as const
  })
}) {}
