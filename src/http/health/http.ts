import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { Bus } from "../../../services/bus/bus.ts"
import { ServiceUnavailable } from "../../../services/errors.ts"
import { DatabaseProbe } from "../../../services/health/database-probe.ts"
import { StageMonitor, type StageStatus } from "../../../services/pipeline/stages.ts"
import { MailroomApi } from "../api.ts"

export const HealthHandlers = HttpApiBuilder.group(MailroomApi, "health", (handlers) =>
  Effect.gen(function*() {
    const databaseProbe = yield* DatabaseProbe
    const bus = yield* Bus
    const monitor = yield* StageMonitor
    const stage = (status: StageStatus) => ({
      rate_per_second: Math.round(status.rate * 10) / 10,
      handled: status.handled,
      pending: status.pending,
      in_flight: status.inFlight,
      oldest_age_seconds: status.oldestAgeSeconds === null ? null : Math.round(status.oldestAgeSeconds * 10) / 10,
      lagging: status.lagging
    })
    // Asked of the server, not of this process's pool: a pool busy to its last connection is working, not cut off.
    const database = databaseProbe.reachable.pipe(
      Effect.filterOrFail((reachable) => reachable, () => ServiceUnavailable.of("The database is not reachable"))
    )
    const busReachable = bus.ping.pipe(
      Effect.timeoutFail({ duration: "2 seconds", onTimeout: () => ServiceUnavailable.of("The bus is not reachable") }),
      Effect.mapError(() => ServiceUnavailable.of("The bus is not reachable"))
    )
    return handlers
      .handle("healthz", () => Effect.succeed({ success: true as const, data: { status: "ok" as const } }))
      .handle("readyz", () =>
        Effect.all([database, busReachable], { concurrency: 2 }).pipe(
          Effect.zipRight(monitor.status),
          Effect.map((stages) => ({
            success: true as const,
            data: {
              status: "ok" as const,
              database: "ok" as const,
              bus: "ok" as const,
              stages: { accept: stage(stages.accept), ingest: stage(stages.ingest), index: stage(stages.index) }
            }
          }))
        ))
  }))
