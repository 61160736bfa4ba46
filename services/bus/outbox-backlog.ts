/**
 * What the outbox (outbox.ts) holds, for the operator: publications a committed change staged that
 * the bus has not taken yet, and how long the oldest has waited since its change staged it. A change's
 * own node publishes them within milliseconds of its commit; what stays is what the bus refused or a
 * node that died left behind, for the worker role's sweep. A figure that grows and ages says the bus
 * refuses, or no worker sweeps. Sampled from the database by every process, whichever runs the
 * sweep, so it is told even when none does; served as `mailroom_outbox_waiting` and
 * `mailroom_outbox_oldest_seconds`.
 */
import { SqlClient } from "@effect/sql"
import { Duration, Effect, Layer, Metric, Schedule } from "effect"

/** How often the outbox is sampled (as the outbound backlog is). */
const SAMPLE_EVERY = Duration.seconds(5)

export const waitingGauge = Metric.gauge("mailroom_outbox_waiting", {
  description: "Publications committed changes staged in the outbox that the bus has not taken yet"
})
export const oldestGauge = Metric.gauge("mailroom_outbox_oldest_seconds", {
  description: "Seconds the oldest publication in the outbox has waited for the bus (0 when none): grows while the bus refuses or no worker sweeps"
})

export const OutboxBacklogLive = Layer.scopedDiscard(Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const sample = sql<{ waiting: number; oldest: number | null }>`
    SELECT count(*)::int AS waiting, extract(epoch FROM now() - min(created_at))::float8 AS oldest FROM outbox`.pipe(
    Effect.flatMap((rows) => {
      // An aggregate answers one row, whatever it counted.
      const { oldest, waiting } = rows[0]!
      return Effect.all([
        Metric.set(waitingGauge, waiting),
        Metric.set(oldestGauge, Math.max(0, Math.round((oldest ?? 0) * 10) / 10))
      ], { discard: true })
    }),
    // The figures wait for the next sample. A database outage is told once by DependencyHealth;
    // another failure is at debug, not swallowed unseen.
    Effect.catchAll((error) => Effect.logDebug(`Outbox backlog not sampled: ${error.message}`))
  )
  yield* sample.pipe(Effect.repeat(Schedule.spaced(SAMPLE_EVERY)), Effect.interruptible, Effect.forkScoped)
}))
