/**
 * Filters over HTTP, served twice from one set of handlers (API keys under /v1/api, dashboard sessions
 * under /api).
 */
import { HttpApiBuilder } from "@effect/platform"
import { Effect, Layer } from "effect"
import { CurrentPrincipal } from "../../../services/accounts/principal.ts"
import { listMeta, page } from "../../../services/listing.ts"
import type { FilterInput, FilterUpdate } from "../../../services/mail/filter-rules.ts"
import { Filters } from "../../../services/mail/filters.ts"
import { MailroomApi } from "../api.ts"
import { orUnavailable } from "../infra.ts"

type ListQuery = { readonly mailbox_id?: string | undefined; readonly limit?: number | undefined; readonly offset?: number | undefined }
type FilterPath = { readonly filterId: string }

const makeHandlers = Effect.gen(function*() {
  const filters = yield* Filters
  const caller = Effect.map(CurrentPrincipal, (principal) => principal.userId)
  return {
    list: ({ urlParams }: { readonly urlParams: ListQuery }) =>
      Effect.gen(function*() {
        const p = page(urlParams)
        const { data, total } = yield* orUnavailable(filters.list(yield* caller, urlParams.mailbox_id, p))
        return { success: true as const, data, meta: listMeta(total, p) }
      }),
    create: ({ payload }: { readonly payload: FilterInput }) =>
      Effect.map(Effect.flatMap(caller, (userId) => orUnavailable(filters.create(userId, payload))), (data) => ({ success: true as const, data })),
    get: ({ path }: { readonly path: FilterPath }) =>
      Effect.map(Effect.flatMap(caller, (userId) => orUnavailable(filters.get(userId, path.filterId))), (data) => ({ success: true as const, data })),
    update: ({ path, payload }: { readonly path: FilterPath; readonly payload: FilterUpdate }) =>
      Effect.map(
        Effect.flatMap(caller, (userId) => orUnavailable(filters.update(userId, path.filterId, payload))),
        (data) => ({ success: true as const, data })
      ),
    remove: ({ path }: { readonly path: FilterPath }) =>
      Effect.map(Effect.flatMap(caller, (userId) => orUnavailable(filters.remove(userId, path.filterId))), (data) => ({ success: true as const, data })),
    apply: ({ path, payload }: { readonly path: FilterPath; readonly payload: { readonly dry_run?: boolean | undefined } }) =>
      Effect.map(
        Effect.flatMap(caller, (userId) => orUnavailable(filters.apply(userId, path.filterId, payload.dry_run ?? false))),
        (data) => ({ success: true as const, data })
      )
  }
})

export const FiltersHandlers = HttpApiBuilder.group(MailroomApi, "filters", (handlers) =>
  Effect.map(makeHandlers, (h) =>
    handlers.handle("list", h.list).handle("create", h.create).handle("get", h.get).handle("update", h.update)
      .handle("remove", h.remove).handle("apply", h.apply))).pipe(Layer.provide(Filters.Default))

export const DashboardFiltersHandlers = HttpApiBuilder.group(MailroomApi, "dashboardFilters", (handlers) =>
  Effect.map(makeHandlers, (h) =>
    handlers.handle("list", h.list).handle("create", h.create).handle("get", h.get).handle("update", h.update)
      .handle("remove", h.remove).handle("apply", h.apply))).pipe(Layer.provide(Filters.Default))
