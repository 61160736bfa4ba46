import { HttpApiBuilder } from "@effect/platform"
import { Effect, Layer, Option } from "effect"
import { CurrentPrincipal } from "../../../services/accounts/principal.ts"
import { MailboxReach } from "../../../services/accounts/reach.ts"
import { type ListParams, page, parseSort } from "../../../services/listing.ts"
import type { CreateWebhookInput, TestWebhookInput, UpdateWebhookInput, WebhookSortField } from "../../../services/webhooks/schemas.ts"
import { Webhooks } from "../../../services/webhooks/webhooks.ts"
import { MailroomApi } from "../api.ts"
import { orUnavailable } from "../infra.ts"
import type { DeliveryListParams, DeliveryPath, WebhookPath } from "./api.ts"

type Path = { readonly path: typeof WebhookPath.Type }

/** One set of handlers, served under /v1/api (API keys) and /api (dashboard sessions). */
const makeHandlers = Effect.gen(function*() {
    const webhooks = yield* Webhooks
    const reach = yield* MailboxReach
    return {
      list: ({ urlParams }: { readonly urlParams: ReturnType<typeof ListParams<WebhookSortField>>["Type"] }) =>
        Effect.gen(function*() {
          const { mailboxes, userId } = yield* CurrentPrincipal
          const sort = parseSort<WebhookSortField>(urlParams.sort, { field: "created_at", direction: "desc" })
          const listed = webhooks.list(userId, page(urlParams), sort, Option.getOrUndefined(mailboxes))
          const { webhooks: data, meta } = yield* listed.pipe(orUnavailable)
          return { success: true as const, data, meta }
        }),
      create: ({ payload }: { readonly payload: typeof CreateWebhookInput.Type }) =>
        Effect.gen(function*() {
          const owner = yield* CurrentPrincipal
          const mailboxIds = yield* reach.listening(owner, payload.mailbox_ids, "mailbox_ids", "all")
          const data = yield* webhooks.create(owner, { ...payload, mailbox_ids: mailboxIds }).pipe(orUnavailable)
          return { success: true as const, data }
        }),
      get: ({ path }: Path) =>
        Effect.gen(function*() {
          const { userId } = yield* CurrentPrincipal
          const data = yield* webhooks.get(userId, path.id).pipe(orUnavailable)
          return { success: true as const, data }
        }),
      update: ({ path, payload }: Path & { readonly payload: typeof UpdateWebhookInput.Type }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          const mailboxIds = yield* reach.listening(principal, payload.mailbox_ids, "mailbox_ids", "unchanged")
          const data = yield* webhooks.update(principal.userId, path.id, { ...payload, mailbox_ids: mailboxIds }).pipe(orUnavailable)
          return { success: true as const, data }
        }),
      remove: ({ path }: Path) =>
        Effect.gen(function*() {
          const { userId } = yield* CurrentPrincipal
          const data = yield* webhooks.remove(userId, path.id).pipe(orUnavailable)
          return { success: true as const, data }
        }),
      deliveries: ({ path, urlParams }: Path & { readonly urlParams: typeof DeliveryListParams.Type }) =>
        Effect.gen(function*() {
          const { mailboxes, userId } = yield* CurrentPrincipal
          const listed = webhooks.deliveries(userId, path.id, page(urlParams), Option.getOrUndefined(mailboxes))
          const { deliveries: data, meta } = yield* listed.pipe(orUnavailable)
          return { success: true as const, data, meta }
        }),
      test: ({ path, urlParams }: Path & { readonly urlParams: typeof TestWebhookInput.Type }) =>
        Effect.gen(function*() {
          const { userId } = yield* CurrentPrincipal
          const data = yield* webhooks.test(userId, path.id, urlParams.event).pipe(orUnavailable)
          return { success: true as const, data }
        }),
      resend: ({ path }: { readonly path: typeof DeliveryPath.Type }) =>
        Effect.gen(function*() {
          const { mailboxes, userId } = yield* CurrentPrincipal
          const data = yield* webhooks.resend(userId, path.id, path.deliveryId, Option.getOrUndefined(mailboxes)).pipe(orUnavailable)
          return { success: true as const, data }
        })
    }
  })

export const WebhooksHandlers = HttpApiBuilder.group(MailroomApi, "webhooks", (handlers) =>
  Effect.map(makeHandlers, (h) =>
    handlers.handle("list", h.list).handle("create", h.create).handle("get", h.get).handle("update", h.update)
      .handle("remove", h.remove).handle("deliveries", h.deliveries).handle("test", h.test).handle("resend", h.resend))
).pipe(Layer.provide([Webhooks.Default, MailboxReach.Default]))

export const DashboardWebhooksHandlers = HttpApiBuilder.group(MailroomApi, "dashboardWebhooks", (handlers) =>
  Effect.map(makeHandlers, (h) =>
    handlers.handle("list", h.list).handle("create", h.create).handle("get", h.get).handle("update", h.update)
      .handle("remove", h.remove).handle("deliveries", h.deliveries).handle("test", h.test).handle("resend", h.resend))
).pipe(Layer.provide([Webhooks.Default, MailboxReach.Default]))
