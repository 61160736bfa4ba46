import { HttpApiBuilder } from "@effect/platform"
import { Effect, Layer, Option } from "effect"
import { CurrentPrincipal } from "../../../services/accounts/principal.ts"
import { Search } from "../../../services/search/search.ts"
import type { SearchInput, SuggestionsParams } from "../../../services/search/schemas.ts"
import { MailroomApi } from "../api.ts"
import { orUnavailable } from "../infra.ts"
import { announceTighter } from "../middleware.ts"

/** One set of handlers, served under /v1 (API keys) and /api (dashboard sessions). */
const makeHandlers = Effect.gen(function*() {
    const search = yield* Search
    return {
      search: ({ payload }: { readonly payload: typeof SearchInput.Type }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          const { data, meta, rate } = yield* search.search(principal, payload).pipe(orUnavailable)
          yield* announceTighter(rate)
          return { success: true as const, data, meta }
        }),
      suggestions: ({ urlParams }: { readonly urlParams: typeof SuggestionsParams.Type }) =>
        Effect.gen(function*() {
          const { mailboxes, userId } = yield* CurrentPrincipal
          const data = yield* search.suggestions(userId, urlParams.q, Option.getOrUndefined(mailboxes)).pipe(orUnavailable)
          return { success: true as const, data }
        })
    }
  })

export const SearchHandlers = HttpApiBuilder.group(MailroomApi, "search", (handlers) =>
  Effect.map(makeHandlers, (h) => handlers.handle("search", h.search).handle("suggestions", h.suggestions))
).pipe(Layer.provide(Search.Default))

export const DashboardSearchHandlers = HttpApiBuilder.group(MailroomApi, "dashboardSearch", (handlers) =>
  Effect.map(makeHandlers, (h) => handlers.handle("search", h.search).handle("suggestions", h.suggestions))
).pipe(Layer.provide(Search.Default))
