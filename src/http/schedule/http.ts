/**
 * The schedule over HTTP, served twice from one set of handlers (API keys under /v1/api, dashboard sessions
 * under /api).
 */
import { HttpApiBuilder } from "@effect/platform"
import { Effect, Layer } from "effect"
import { CurrentPrincipal } from "../../../services/accounts/principal.ts"
import { Schedule } from "../../../services/schedule/schedule.ts"
import type { AvailabilityParams, ScheduleParams } from "../../../services/schedule/schemas.ts"
import { MailroomApi } from "../api.ts"
import { orUnavailable } from "../infra.ts"

type MailboxPath = { readonly mailboxId: string }

const makeHandlers = Effect.map(Schedule, (schedule) => {
  /** `run` for the calling account, answered with its meta in SPEC's envelope. */
  const forCaller = <A, M, E, R>(run: (userId: string) => Effect.Effect<{ readonly data: A; readonly meta: M }, E, R>) =>
    Effect.gen(function*() {
      const { userId } = yield* CurrentPrincipal
      const { data, meta } = yield* orUnavailable(run(userId))
      return { success: true as const, data, meta }
    })
  return {
    get: ({ path, urlParams }: { readonly path: MailboxPath; readonly urlParams: ScheduleParams }) =>
      forCaller((userId) => schedule.list(userId, path.mailboxId, urlParams)),
    availability: ({ path, urlParams }: { readonly path: MailboxPath; readonly urlParams: AvailabilityParams }) =>
      forCaller((userId) => schedule.availability(userId, path.mailboxId, urlParams))
  }
})

export const ScheduleHandlers = HttpApiBuilder.group(MailroomApi, "schedule", (handlers) =>
  Effect.map(makeHandlers, (h) => handlers.handle("get", h.get).handle("availability", h.availability))).pipe(Layer.provide(Schedule.Default))

export const DashboardScheduleHandlers = HttpApiBuilder.group(MailroomApi, "dashboardSchedule", (handlers) =>
  Effect.map(makeHandlers, (h) => handlers.handle("get", h.get).handle("availability", h.availability))).pipe(Layer.provide(Schedule.Default))
