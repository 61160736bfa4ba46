import { HttpApiBuilder, HttpServerRequest } from "@effect/platform"
import { Effect, Layer, Option, Schema } from "effect"
import { CurrentPrincipal } from "../../../services/accounts/principal.ts"
import { MailboxReach } from "../../../services/accounts/reach.ts"
import { type ListParams, page, parseSort } from "../../../services/listing.ts"
import { ValidationError } from "../../../services/errors.ts"
import { type CreateWebhookInput, type EventKind, TestWebhookInput, type UpdateWebhookInput, type WebhookSortField } from "../../../services/webhooks/schemas.ts"
import { Webhooks } from "../../../services/webhooks/webhooks.ts"
import { MailroomApi } from "../api.ts"
import { orUnavailable } from "../infra.ts"
import { decodeBody } from "../surface.ts"
import type { DeliveryListParams, DeliveryPath, WebhookPath } from "./api.ts"

type Path = { readonly path: typeof WebhookPath.Type }

const decodeTestBody = decodeBody(Schema.Struct(TestWebhookInput.fields).annotations({ parseOptions: { onExcessProperty: "error", errors: "all" } }), "api")

/**
 * The kind a test asks for: `?event=`, or `{"event"}` in a JSON body (what a client that posts JSON
 * sends; ignored, it sent the first kind instead). Both, naming different kinds, is refused.
 */
const eventAsked = (query: EventKind | undefined) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const text = yield* Effect.orElseSucceed(request.text, () => "")
    if (text.trim() === "") return query
    const notAnObject = new ValidationError({ message: "Invalid request body: not a JSON object", details: { body: "must be a JSON object" } })
    const parsed = yield* Effect.try({ try: (): unknown => JSON.parse(text), catch: () => notAnObject })
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return yield* notAnObject
    const body = yield* decodeTestBody(parsed)
    if (query !== undefined && body.event !== undefined && body.event !== query) {
      return yield* new ValidationError({
        message: "The query and the body ask for different events",
        details: { event: `?event=${query} and the body's ${body.event} differ: name one` }
      })
    }
    return body.event ?? query
  })

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
          const { direction } = parseSort(urlParams.sort, { field: "created_at", direction: "desc" })
          const listed = webhooks.deliveries(userId, path.id, page(urlParams), { only: Option.getOrUndefined(mailboxes), direction })
          const { deliveries: data, meta } = yield* listed.pipe(orUnavailable)
          return { success: true as const, data, meta }
        }),
      test: ({ path, urlParams }: Path & { readonly urlParams: typeof TestWebhookInput.Type }) =>
        Effect.gen(function*() {
          const { userId } = yield* CurrentPrincipal
          const event = yield* eventAsked(urlParams.event)
          const data = yield* webhooks.test(userId, path.id, event).pipe(orUnavailable)
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
