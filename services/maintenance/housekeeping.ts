/**
 * Worker-side housekeeping: drop login sessions that can no longer be used and rate-limit counters
 * whose windows have all passed. Idempotent, so any number of workers may run it.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Layer, Schedule } from "effect"

/** Ended sessions are kept a week (for support questions), then removed. */
const SESSION_RETENTION = "7 days"

export const sweep = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const sessions = yield* sql`
    DELETE FROM sessions
    WHERE coalesce(revoked_at, refresh_expires_at) < now() - ${SESSION_RETENTION}::interval`.raw
  const counters = yield* sql`
    DELETE FROM rate_limit_counters
    WHERE (SELECT max(s) FROM unnest(window_starts) s) < floor(extract(epoch FROM now()))::bigint - 86400`.raw
  const removed = { sessions: (sessions as { rowCount?: number }).rowCount ?? 0, counters: (counters as { rowCount?: number }).rowCount ?? 0 }
  if (removed.sessions + removed.counters > 0) yield* Effect.logInfo("Housekeeping", removed)
}).pipe(Effect.withSpan("Housekeeping.sweep"))

export const HousekeepingLive = Layer.scopedDiscard(
  sweep.pipe(
    Effect.catchAllCause((cause) => Effect.logWarning("Housekeeping failed; will retry", cause)),
    Effect.repeat(Schedule.spaced("15 minutes")),
    Effect.forkScoped
  )
)
