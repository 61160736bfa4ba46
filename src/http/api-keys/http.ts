import { HttpApiBuilder } from "@effect/platform"
import { Effect, Layer } from "effect"
import { CurrentPrincipal } from "../../../services/accounts/principal.ts"
import { ApiKeys } from "../../../services/keys/api-keys.ts"
import { type CreateKeyInput, type KeySortField, type UpdateKeyInput } from "../../../services/keys/schemas.ts"
import { type ListParams, page, parseSort } from "../../../services/listing.ts"
import { MailroomApi } from "../api.ts"
import { orUnavailable } from "../infra.ts"
import { fromRequest } from "../origin.ts"

type KeyListParams = ReturnType<typeof ListParams<KeySortField>>["Type"]

/** One set of handlers, served under /v1 (API keys) and /api (dashboard sessions). */
const makeHandlers = Effect.gen(function*() {
    const keys = yield* ApiKeys
    return {
      list: ({ urlParams }: { readonly urlParams: KeyListParams }) =>
        Effect.gen(function*() {
          const { userId } = yield* CurrentPrincipal
          const sort = parseSort<KeySortField>(urlParams.sort, { field: "createdAt", direction: "desc" })
          const { keys: data, meta } = yield* keys.list(userId, page(urlParams), sort).pipe(orUnavailable)
          return { success: true as const, data, meta }
        }),
      create: ({ payload }: { readonly payload: typeof CreateKeyInput.Type }) =>
        Effect.gen(function*() {
          const { userId } = yield* CurrentPrincipal
          const data = yield* fromRequest(keys.create(userId, payload)).pipe(orUnavailable)
          return {
            success: true as const,
            data,
            meta: { warning: "This is the only time the full API key is shown. Store it securely now; it cannot be retrieved later." }
          }
        }),
      update: ({ path, payload }: { readonly path: { readonly id: string }; readonly payload: typeof UpdateKeyInput.Type }) =>
        Effect.gen(function*() {
          const { userId } = yield* CurrentPrincipal
          const data = yield* keys.update(userId, path.id, payload).pipe(orUnavailable)
          return { success: true as const, data }
        }),
      revoke: ({ path }: { readonly path: { readonly id: string } }) =>
        Effect.gen(function*() {
          const { userId } = yield* CurrentPrincipal
          const data = yield* fromRequest(keys.revoke(userId, path.id)).pipe(orUnavailable)
          return { success: true as const, data }
        })
    }
  })

export const ApiKeysHandlers = HttpApiBuilder.group(MailroomApi, "apiKeys", (handlers) =>
  Effect.map(makeHandlers, (h) => handlers.handle("list", h.list).handle("create", h.create).handle("update", h.update).handle("revoke", h.revoke))
).pipe(Layer.provide(ApiKeys.Default))

export const DashboardApiKeysHandlers = HttpApiBuilder.group(MailroomApi, "dashboardApiKeys", (handlers) =>
  Effect.map(makeHandlers, (h) => handlers.handle("list", h.list).handle("create", h.create).handle("update", h.update).handle("revoke", h.revoke))
).pipe(Layer.provide(ApiKeys.Default))
