import { HttpApiBuilder } from "@effect/platform"
import { Effect, Layer } from "effect"
import { CurrentPrincipal } from "../../../services/accounts/principal.ts"
import { Search } from "../../../services/search/search.ts"
import { MailroomApi } from "../api.ts"
import { orUnavailable } from "../infra.ts"

export const SearchHandlers = HttpApiBuilder.group(MailroomApi, "search", (handlers) =>
  Effect.gen(function*() {
    const search = yield* Search
    return handlers
      .handle("search", ({ payload }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          const { data, meta } = yield* search.search(principal, payload).pipe(orUnavailable)
          return { success: true as const, data, meta }
        }))
      .handle("suggestions", ({ urlParams }) =>
        Effect.gen(function*() {
          const { userId } = yield* CurrentPrincipal
          const data = yield* search.suggestions(userId, urlParams.q).pipe(orUnavailable)
          return { success: true as const, data }
        }))
  })).pipe(Layer.provide(Search.Default))
