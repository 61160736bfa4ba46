import { HttpApiBuilder } from "@effect/platform"
import { Effect, Layer, Option } from "effect"
import { CurrentPrincipal } from "../../../services/accounts/principal.ts"
import type { StatsParams } from "../../../services/mail/schemas.ts"
import { Stats } from "../../../services/mail/stats.ts"
import { MailroomApi } from "../api.ts"
import { orUnavailable } from "../infra.ts"

/** One handler, served under /v1/api (API keys) and /api (dashboard sessions). */
const makeHandler = Effect.map(Stats, (stats) => ({ urlParams }: { readonly urlParams: typeof StatsParams.Type }) =>
  Effect.gen(function*() {
    const { mailboxes, userId } = yield* CurrentPrincipal
    const data = yield* stats.of(userId, { mailboxId: urlParams.mailbox_id, days: urlParams.days, only: Option.getOrUndefined(mailboxes) })
      .pipe(orUnavailable)
    return { success: true as const, data }
  }))

export const StatsHandlers = HttpApiBuilder.group(MailroomApi, "stats", (handlers) =>
  Effect.map(makeHandler, (stats) => handlers.handle("stats", stats))
).pipe(Layer.provide(Stats.Default))

export const DashboardStatsHandlers = HttpApiBuilder.group(MailroomApi, "dashboardStats", (handlers) =>
  Effect.map(makeHandler, (stats) => handlers.handle("stats", stats))
).pipe(Layer.provide(Stats.Default))
