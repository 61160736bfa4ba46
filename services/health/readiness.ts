/**
 * Readiness (`/readyz`): the database and the bus each answer within 2 s, how each inbound stage
 * is doing, and what sent mail waits to go (outbound/backlog.ts). Served by the API (src/http/health) and, for a process without the api role, beside its
 * metrics on METRICS_PORT (src/metrics.ts), so every node has a probe.
 *
 * A process that searches (api, indexer) also says whether its vector index answers. An index
 * that does not leaves the process ready: mail is still accepted, stored and read, and only
 * search by meaning and indexing wait for it, so a load balancer must not take every API node out
 * of service for it.
 */
import { Effect, Option } from "effect"
import { Bus } from "../bus/bus.ts"
import { ServiceUnavailable } from "../errors.ts"
import { OutboundBacklog } from "../outbound/backlog.ts"
import { StageMonitor, type StageStatus } from "../pipeline/stages.ts"
import { VectorIndex } from "../search/vector-index.ts"
import { DatabaseProbe } from "./database-probe.ts"

/** A stage as readiness reports it (src/http/health/api.ts `Stage` describes each field). */
const stageReport = (status: StageStatus) => ({
  rate_per_second: Math.round(status.rate * 10) / 10,
  handled: status.handled,
  pending: status.pending,
  in_flight: status.inFlight,
  oldest_age_seconds: status.oldestAgeSeconds === null ? null : Math.round(status.oldestAgeSeconds * 10) / 10,
  lagging: status.lagging
})

/** The check: its report, or 503 SERVICE_UNAVAILABLE naming what does not answer. */
export const makeReadiness = Effect.gen(function*() {
  const databaseProbe = yield* DatabaseProbe
  const bus = yield* Bus
  const monitor = yield* StageMonitor
  const backlog = yield* OutboundBacklog
  const vectorIndex = yield* Effect.serviceOption(VectorIndex)
  // Asked of the server, not of this process's pool: a pool busy to its last connection is working, not cut off.
  const database = databaseProbe.reachable.pipe(
    Effect.filterOrFail((reachable) => reachable, () => ServiceUnavailable.of("The database is not reachable"))
  )
  const busReachable = bus.ping.pipe(
    Effect.timeoutFail({ duration: "2 seconds", onTimeout: () => ServiceUnavailable.of("The bus is not reachable") }),
    Effect.mapError(() => ServiceUnavailable.of("The bus is not reachable"))
  )
  /** "ok", or "unreachable" when it fails or takes more than 2 s; none where the process does not search. */
  const vectors = Option.match(vectorIndex, {
    onNone: () => Effect.succeed(undefined),
    onSome: (index) =>
      index.ping.pipe(
        Effect.timeout("2 seconds"),
        Effect.as("ok" as const),
        Effect.orElseSucceed(() => "unreachable" as const)
      )
  })
  return Effect.gen(function*() {
    const [vector_index] = yield* Effect.all([vectors, database, busReachable], { concurrency: 3 })
    const [stages, outbound] = yield* Effect.all([monitor.status, backlog.latest])
    return {
      status: "ok" as const,
      database: "ok" as const,
      bus: "ok" as const,
      ...(vector_index === undefined ? {} : { vector_index }),
      stages: {
        accept: stageReport(stages.accept),
        ingest: stageReport(stages.ingest),
        words: stageReport(stages.words),
        index: stageReport(stages.index)
      },
      outbound: { queued: outbound.queued, deferred: outbound.deferred, oldest_queued_age_seconds: outbound.oldestQueuedSeconds }
    }
  })
})
