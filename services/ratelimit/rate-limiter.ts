/**
 * Rate limiting: every limit Mailroom enforces, stated here, and the limiter that counts them.
 *
 * What is limited, and by what (SPEC "Limits", DESIGN.md §4):
 * - Requests with an API key count per key, with an access token or session cookie per user, against
 *   the owner's plan: per minute, hour and day (`planWindows`), through leases of tokens taken from
 *   the counters below (leases.ts; the Authenticator, services/accounts/authenticator.ts).
 * - Routes open to anyone (register, login, refresh) and requests refused for a missing or invalid
 *   credential count per client address (`clientWindows`).
 * - Failed logins count per account and client address (`failedLoginWindows`) and per account from
 *   every address together (`accountFailedLoginWindows`), wrong second-factor codes per account and day
 *   too (`wrongCodeWindows`); searches per user, a limit of their own
 *   (`searchWindows`).
 *
 * Counters are fixed windows in the SQL database (`mailroom_rate_take`, migration 0001), so every API
 * process enforces one limit together: exactly, for what is taken here one request at a time; within
 * a lease per process, for what is leased (leases.ts). A refused request is not counted.
 */
import { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Layer } from "effect"
import * as Context from "effect/Context"
import { limits, type Plan, type RateWindows } from "../plans/plans.ts"

export interface Window {
  readonly seconds: number
  readonly limit: number
}

/** The outcome of one check, with what the `X-RateLimit-*` headers report. */
export interface Decision {
  readonly allowed: boolean
  /** Limit of the reported window. */
  readonly limit: number
  readonly remaining: number
  /** Unix seconds when the reported window resets. */
  readonly resetAt: number
  /** "minute", "hour", "day" or "<n> seconds". */
  readonly window: string
  /** Seconds until the reported window resets (at least 1). */
  readonly retryAfter: number
}

/** A window as a message says it ("per minute", "per 15 minutes"). */
export const windowName = (seconds: number) =>
  seconds === 60 ? "minute" : seconds === 3600 ? "hour" : seconds === 86400 ? "day"
  : seconds % 3600 === 0 ? `${seconds / 3600} hours`
  : seconds % 60 === 0 ? `${seconds / 60} minutes`
  : `${seconds} seconds`

export const planWindows = (requests: RateWindows): ReadonlyArray<Window> => [
  { seconds: 60, limit: requests.perMinute },
  { seconds: 3600, limit: requests.perHour },
  { seconds: 86400, limit: requests.perDay }
]

/** Requests per client address on routes that need no credential (and refused credentials). */
export const clientWindows: ReadonlyArray<Window> = [{ seconds: 60, limit: 300 }]

/**
 * Failed logins per account from one client address: whoever guesses there is stopped, and the
 * account's owner signing in from elsewhere is not locked out by it.
 */
export const failedLoginWindows: ReadonlyArray<Window> = [{ seconds: 900, limit: 10 }]

/**
 * Failed logins per account from every address together: guessing spread over many addresses is
 * stopped too (locking the owner out then takes ten addresses' worth of refusals, not one's).
 */
export const accountFailedLoginWindows: ReadonlyArray<Window> = [{ seconds: 900, limit: 100 }]

/**
 * Wrong second-factor codes per account in a day, from every address together. Only someone who knows
 * the password gets to try codes, but the failed-login windows alone would let many addresses try
 * thousands a day (a code is one in a million, and three are good at any moment). A new password
 * forgets them (accounts.ts `setPassword`), so the owner is not shut out for the rest of the day.
 */
export const wrongCodeWindows: ReadonlyArray<Window> = [{ seconds: 86_400, limit: 30 }]

/**
 * Links mailed to a person per account and purpose (a new password, a new email), so that nobody can
 * fill an inbox with them: a password link past it is not sent (the answer does not say so), an email
 * link is 429.
 */
export const mailedLinkWindows: ReadonlyArray<Window> = [{ seconds: 3600, limit: 5 }]

/** Searches per user and minute, by plan. */
export const searchWindows = (plan: Plan): ReadonlyArray<Window> => [{ seconds: 60, limit: limits[plan].searchesPerMinute }]

export interface DecisionRow {
  readonly allowed: boolean
  readonly windowSeconds: number
  readonly maxRequests: number
  readonly remaining: number
  readonly resetAt: number | string
}

export const toDecision = (row: DecisionRow, nowMs = Date.now()): Decision => {
  const resetAt = Number(row.resetAt)
  return {
    allowed: row.allowed,
    limit: row.maxRequests,
    remaining: Math.max(0, row.remaining),
    resetAt,
    window: windowName(row.windowSeconds),
    retryAfter: Math.max(1, Math.ceil(resetAt - nowMs / 1000))
  }
}

export class RateLimiter extends Context.Tag("mailroom/RateLimiter")<RateLimiter, {
  /** Count one request against every window of `subject`; refused requests are not counted. */
  readonly take: (subject: string, windows: ReadonlyArray<Window>) => Effect.Effect<Decision, SqlError>
  /** Check without counting. */
  readonly peek: (subject: string, windows: ReadonlyArray<Window>) => Effect.Effect<Decision, SqlError>
  /** Start the windows of `subject`, and of the subjects under it (`<subject>:…`), afresh: what they took no longer counts. */
  readonly forget: (subject: string) => Effect.Effect<void, SqlError>
}>() {
  static readonly layer = Layer.effect(
    RateLimiter,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const run = (subject: string, windows: ReadonlyArray<Window>, peek: boolean) =>
        sql<DecisionRow>`SELECT * FROM mailroom_rate_take(
            ${subject},
            ${windows.map((w) => w.seconds)}::int[],
            ${windows.map((w) => w.limit)}::int[],
            ${peek})`.pipe(
          Effect.map((rows) => toDecision(rows[0]!)),
          Effect.withSpan("RateLimiter.take", { attributes: { subject, peek } })
        )
      return {
        take: (subject, windows) => run(subject, windows, false),
        peek: (subject, windows) => run(subject, windows, true),
        forget: (subject) =>
          Effect.asVoid(sql`DELETE FROM rate_limit_counters WHERE subject = ${subject} OR starts_with(subject, ${`${subject}:`})`)
      }
    })
  )
}
