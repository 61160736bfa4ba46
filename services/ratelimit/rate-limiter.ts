/**
 * Fixed-window rate limiting with counters in the SQL database, so every API process enforces one
 * limit together. One round trip per check (the `mailroom_rate_take` function, migration 0001).
 */
import { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Layer } from "effect"
import * as Context from "effect/Context"
import type { RateWindows } from "../plans/plans.ts"

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

export const windowName = (seconds: number) =>
  seconds === 60 ? "minute" : seconds === 3600 ? "hour" : seconds === 86400 ? "day" : `${seconds} seconds`

export const planWindows = (requests: RateWindows): ReadonlyArray<Window> => [
  { seconds: 60, limit: requests.perMinute },
  { seconds: 3600, limit: requests.perHour },
  { seconds: 86400, limit: requests.perDay }
]

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
        peek: (subject, windows) => run(subject, windows, true)
      }
    })
  )
}
