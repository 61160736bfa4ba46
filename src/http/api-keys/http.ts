import { HttpApiBuilder } from "@effect/platform"
import { Effect, Layer } from "effect"
import { CurrentPrincipal } from "../../../services/accounts/principal.ts"
import { ApiKeys } from "../../../services/keys/api-keys.ts"
import type { KeySortField } from "../../../services/keys/schemas.ts"
import { page, parseSort } from "../../../services/listing.ts"
import { MailroomApi } from "../api.ts"
import { orUnavailable } from "../infra.ts"

export const ApiKeysHandlers = HttpApiBuilder.group(MailroomApi, "apiKeys", (handlers) =>
  Effect.gen(function*() {
    const keys = yield* ApiKeys
    return handlers
      .handle("list", ({ urlParams }) =>
        Effect.gen(function*() {
          const { userId } = yield* CurrentPrincipal
          const sort = parseSort<KeySortField>(urlParams.sort, { field: "createdAt", direction: "desc" })
          const { keys: data, meta } = yield* keys.list(userId, page(urlParams), sort).pipe(orUnavailable)
          return { success: true as const, data, meta }
        }))
      .handle("create", ({ payload }) =>
        Effect.gen(function*() {
          const { userId } = yield* CurrentPrincipal
          const data = yield* keys.create(userId, payload).pipe(orUnavailable)
          return {
            success: true as const,
            data,
            meta: { warning: "This is the only time the full API key is shown. Store it securely now; it cannot be retrieved later." }
          }
        }))
      .handle("revoke", ({ path }) =>
        Effect.gen(function*() {
          const { userId } = yield* CurrentPrincipal
          const data = yield* keys.revoke(userId, path.id).pipe(orUnavailable)
          return { success: true as const, data }
        }))
  })).pipe(Layer.provide(ApiKeys.Default))
