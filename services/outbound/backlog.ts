/**
 * What sent mail is still waiting to go, for the operator: deliveries queued (not yet tried, or
 * handed to an mta that has not tried them) and deferred (a temporary failure, tried again later),
 * and how long the oldest queued one has waited. An mta role that is stopped, or behind, shows as a
 * queue that grows and ages; deferrals come and go with the receivers. Sampled from the database by
 * every process, whichever runs the mta role, so it is told even when none does; served in
 * `/readyz` (`data.outbound`) and as `mailroom_outbound_waiting{status}` and
 * `mailroom_outbound_oldest_queued_seconds`.
 */
import { SqlClient } from "@effect/sql"
import { Context, Duration, Effect, Metric, Schedule } from "effect"

export interface OutboundWaiting {
  readonly queued: number
  readonly deferred: number
  /** Seconds the oldest queued delivery has waited (0 when none); null until the first sample. */
  readonly oldestQueuedSeconds: number | null
}

/** How often the backlog is sampled (tests shorten it). */
export class OutboundBacklogInterval extends Context.Reference<OutboundBacklogInterval>()("mailroom/OutboundBacklogInterval", {
  defaultValue: (): Duration.Duration => Duration.seconds(5)
}) {}

export const waitingGauge = Metric.gauge("mailroom_outbound_waiting", {
  description: "Deliveries of sent mail waiting to go, by status: queued (not tried yet) and deferred (to be tried again)"
})
export const oldestGauge = Metric.gauge("mailroom_outbound_oldest_queued_seconds", {
  description: "Seconds the oldest queued delivery of sent mail has waited (0 when none): grows while no mta role sends"
})

export class OutboundBacklog extends Effect.Service<OutboundBacklog>()("mailroom/OutboundBacklog", {
  scoped: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const interval = yield* OutboundBacklogInterval
    let latest: OutboundWaiting = { queued: 0, deferred: 0, oldestQueuedSeconds: null }
    const sample = sql<{ queued: number; deferred: number; oldest: number | null }>`
      SELECT count(*) FILTER (WHERE status = 'queued')::int AS queued,
             count(*) FILTER (WHERE status = 'deferred')::int AS deferred,
             extract(epoch FROM now() - min(updated_at) FILTER (WHERE status = 'queued'))::float8 AS oldest
      FROM outbound_deliveries WHERE status IN ('queued', 'deferred')`.pipe(
      Effect.flatMap((rows) => {
        // An aggregate answers one row, whatever it counted.
        const { deferred, oldest, queued } = rows[0]!
        const oldestQueuedSeconds = Math.max(0, Math.round((oldest ?? 0) * 10) / 10)
        latest = { queued, deferred, oldestQueuedSeconds }
        return Effect.all([
          Metric.set(Metric.tagged(waitingGauge, "status", "queued"), queued),
          Metric.set(Metric.tagged(waitingGauge, "status", "deferred"), deferred),
          Metric.set(oldestGauge, oldestQueuedSeconds)
        ], { discard: true })
      }),
      // The figures wait for the next sample. A database outage is told once by DependencyHealth (a
      // warning each sample repeated it, with a stack); another failure is at debug, not swallowed unseen.
      Effect.catchAll((error) => Effect.logDebug(`Outbound backlog not sampled: ${error.message}`))
    )
    yield* sample.pipe(Effect.repeat(Schedule.spaced(interval)), Effect.interruptible, Effect.forkScoped)
    return { latest: Effect.sync(() => latest) } as const
  })
}) {}
