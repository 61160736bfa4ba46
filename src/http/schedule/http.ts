/**
 * The schedule over HTTP, served twice from one handler (API keys under /v1/api, dashboard sessions
 * under /api).
 */
import { HttpApiBuilder } from "@effect/platform"
import { Effect, Layer } from "effect"
import { CurrentPrincipal } from "../../../services/accounts/principal.ts"
import { Schedule } from "../../../services/schedule/schedule.ts"
import type { ScheduleParams } from "../../../services/schedule/schemas.ts"
import { MailroomApi } from "../api.ts"
import { orUnavailable } from "../infra.ts"

const makeHandler = Effect.map(Schedule, (schedule) =>
  ({ path, urlParams }: { readonly path: { readonly mailboxId: string }; readonly urlParams: ScheduleParams }) =>
    Effect.gen(function*() {
      const { userId } = yield* CurrentPrincipal
      const { data, meta } = yield* orUnavailable(schedule.list(userId, path.mailboxId, urlParams))
      return { success: true as const, data, meta }
    }))

export const ScheduleHandlers = HttpApiBuilder.group(MailroomApi, "schedule", (handlers) =>
  Effect.map(makeHandler, (get) => handlers.handle("get", get))).pipe(Layer.provide(Schedule.Default))

export const DashboardScheduleHandlers = HttpApiBuilder.group(MailroomApi, "dashboardSchedule", (handlers) =>
  Effect.map(makeHandler, (get) => handlers.handle("get", get))).pipe(Layer.provide(Schedule.Default))
