/**
 * The second factor of a login, for an account with two-factor sign-in on (two-factor.ts turns it on
 * and off): the current code of its authenticator app, or one of its unused recovery codes. Either
 * works once: a code's time step is taken in the statement that accepts it, so the same code (read
 * over a shoulder, replayed) is refused, and of two logins racing with one code one gets in.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Option } from "effect"
import { asTotpCode, matchingStep, recoveryCodeDigest } from "./totp.ts"

export interface SecondFactorUsed {
  readonly method: "app" | "recovery_code"
  /** Recovery codes the account has left. */
  readonly recoveryCodesLeft: number
}

/** Use `code` as the second factor of the account whose (enabled) secret is `secret`, at `at` (ms); none when it is not one. */
export const useSecondFactor = (userId: string, secret: string, code: string, at = Date.now()) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const digits = asTotpCode(code)
    if (digits !== undefined) {
      const step = matchingStep(secret, digits, at)
      if (step === undefined) return Option.none()
      const taken = yield* sql<{ left: number }>`
        UPDATE two_factor SET last_step = ${step}
        WHERE user_id = ${userId} AND enabled_at IS NOT NULL AND secret = ${secret} AND (last_step IS NULL OR last_step < ${step})
        RETURNING cardinality(recovery_hashes) AS left`
      return Option.map(Option.fromNullable(taken[0]), (row): SecondFactorUsed => ({ method: "app", recoveryCodesLeft: Number(row.left) }))
    }
    const digest = recoveryCodeDigest(code)
    const used = yield* sql<{ left: number }>`
      UPDATE two_factor SET recovery_hashes = array_remove(recovery_hashes, ${digest}::text)
      WHERE user_id = ${userId} AND enabled_at IS NOT NULL AND ${digest}::text = ANY (recovery_hashes)
      RETURNING cardinality(recovery_hashes) AS left`
    return Option.map(Option.fromNullable(used[0]), (row): SecondFactorUsed => ({ method: "recovery_code", recoveryCodesLeft: Number(row.left) }))
  })

/** The refusal's words, on `details.code` (or the field named): the same for a wrong, used or malformed code. */
export const NOT_A_CODE = "is not the authenticator app's current code, nor an unused recovery code"
