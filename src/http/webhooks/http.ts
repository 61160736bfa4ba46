import { HttpApiBuilder } from "@effect/platform"
import { Effect, Layer } from "effect"
import { CurrentPrincipal } from "../../../services/accounts/principal.ts"
import { page, parseSort } from "../../../services/listing.ts"
import type { WebhookSortField } from "../../../services/webhooks/schemas.ts"
import { Webhooks } from "../../../services/webhooks/webhooks.ts"
import { MailroomApi } from "../api.ts"
import { orUnavailable } from "../infra.ts"

export const WebhooksHandlers = HttpApiBuilder.group(MailroomApi, "webhooks", (handlers) =>
  Effect.gen(function*() {
    const webhooks = yield* Webhooks
    return handlers
      .handle("list", ({ urlParams }) =>
        Effect.gen(function*() {
          const { userId } = yield* CurrentPrincipal
          const sort = parseSort<WebhookSortField>(urlParams.sort, { field: "createdAt", direction: "desc" })
          const { webhooks: data, meta } = yield* webhooks.list(userId, page(urlParams), sort).pipe(orUnavailable)
          return { success: true as const, data, meta }
        }))
      .handle("create", ({ payload }) =>
        Effect.gen(function*() {
          const owner = yield* CurrentPrincipal
          const data = yield* webhooks.create(owner, payload).pipe(orUnavailable)
          return { success: true as const, data }
        }))
      .handle("get", ({ path }) =>
        Effect.gen(function*() {
          const { userId } = yield* CurrentPrincipal
          const data = yield* webhooks.get(userId, path.id).pipe(orUnavailable)
          return { success: true as const, data }
        }))
      .handle("update", ({ path, payload }) =>
        Effect.gen(function*() {
          const { userId } = yield* CurrentPrincipal
          const data = yield* webhooks.update(userId, path.id, payload).pipe(orUnavailable)
          return { success: true as const, data }
        }))
      .handle("remove", ({ path }) =>
        Effect.gen(function*() {
          const { userId } = yield* CurrentPrincipal
          const data = yield* webhooks.remove(userId, path.id).pipe(orUnavailable)
          return { success: true as const, data }
        }))
      .handle("deliveries", ({ path, urlParams }) =>
        Effect.gen(function*() {
          const { userId } = yield* CurrentPrincipal
          const { deliveries: data, meta } = yield* webhooks.deliveries(userId, path.id, page(urlParams)).pipe(orUnavailable)
          return { success: true as const, data, meta }
        }))
  })).pipe(Layer.provide(Webhooks.Default))
