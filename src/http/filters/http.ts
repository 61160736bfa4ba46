/**
 * Filters over HTTP, served twice from one set of handlers (API keys under /v1/api, dashboard sessions
 * under /api).
 */
import { HttpApiBuilder } from "@effect/platform"
import { Effect, Layer } from "effect"
import { CurrentPrincipal } from "../../../services/accounts/principal.ts"
import { listMeta, page, parseSort } from "../../../services/listing.ts"
import type { FilterInput, FilterSortField, FilterUpdate } from "../../../services/mail/filter-rules.ts"
import { Filters } from "../../../services/mail/filters.ts"
import { MailroomApi } from "../api.ts"
import type { FilterListQuery } from "./api.ts"
import { orUnavailable } from "../infra.ts"

type ListQuery = typeof FilterListQuery.Type
type FilterPath = { readonly filterId: string }

const makeHandlers = Effect.gen(function*() {
  const filters = yield* Filters
  /** `run` for the calling account, answered in SPEC's envelope. */
  const forCaller = <A, E, R>(run: (userId: string) => Effect.Effect<A, E, R>) =>
    Effect.gen(function*() {
      const { userId } = yield* CurrentPrincipal
      return { success: true as const, data: yield* orUnavailable(run(userId)) }
    })
  return {
    list: ({ urlParams }: { readonly urlParams: ListQuery }) =>
      Effect.gen(function*() {
        const p = page(urlParams)
        const { userId } = yield* CurrentPrincipal
        const sort = parseSort<FilterSortField>(urlParams.sort, { field: "created_at", direction: "asc" })
        const { data, total } = yield* orUnavailable(filters.list(userId, urlParams.mailbox_id, p, sort))
        return { success: true as const, data, meta: listMeta(total, p) }
      }),
    create: ({ payload }: { readonly payload: FilterInput }) => forCaller((userId) => filters.create(userId, payload)),
    get: ({ path }: { readonly path: FilterPath }) => forCaller((userId) => filters.get(userId, path.filterId)),
    update: ({ path, payload }: { readonly path: FilterPath; readonly payload: FilterUpdate }) =>
      forCaller((userId) => filters.update(userId, path.filterId, payload)),
    remove: ({ path }: { readonly path: FilterPath }) => forCaller((userId) => filters.remove(userId, path.filterId)),
    apply: ({ path, payload }: { readonly path: FilterPath; readonly payload: { readonly dry_run?: boolean | undefined } }) =>
      forCaller((userId) => filters.apply(userId, path.filterId, payload.dry_run ?? false))
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
