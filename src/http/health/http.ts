import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { makeReadiness } from "../../../services/health/readiness.ts"
import { MailroomApi } from "../api.ts"

export const HealthHandlers = HttpApiBuilder.group(MailroomApi, "health", (handlers) =>
  Effect.gen(function*() {
    const readiness = yield* makeReadiness
    return handlers
      .handle("healthz", () => Effect.succeed({ success: true as const, data: { status: "ok" as const } }))
      .handle("readyz", () => Effect.map(readiness, (data) => ({ success: true as const, data })))
  }))
