/**
 * Forwarding over HTTP, served twice from one set of handlers (API keys under /v1/api, dashboard
 * sessions under /api). An add that finds the address there already answers 200.
 */
import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Effect, Layer } from "effect"
import { CurrentPrincipal } from "../../../services/accounts/principal.ts"
import { Forwarding } from "../../../services/mail/forwarding.ts"
import { MailroomApi } from "../api.ts"
import { orUnavailable } from "../infra.ts"

const makeHandlers = Effect.gen(function*() {
  const forwarding = yield* Forwarding
  const userId = Effect.map(CurrentPrincipal, (principal) => principal.userId)

  type MailboxPath = { readonly mailboxId: string }
  return {
    list: ({ path }: { readonly path: MailboxPath }) =>
      Effect.gen(function*() {
        const data = yield* orUnavailable(forwarding.list(yield* userId, path.mailboxId))
        return { success: true as const, data }
      }),
    add: ({ path, payload }: { readonly path: MailboxPath; readonly payload: { readonly address: string } }) =>
      Effect.gen(function*() {
        const result = yield* orUnavailable(forwarding.add(yield* userId, path.mailboxId, payload.address))
        const body = { success: true as const, data: result.forwarding }
        // The contract's first success (201) is what an encoded answer gets; "already there" is said here.
        return result.created ? body : HttpServerResponse.unsafeJson(body, { status: 200 })
      }),
    remove: ({ path }: { readonly path: MailboxPath & { readonly address: string } }) =>
      Effect.gen(function*() {
        const data = yield* orUnavailable(forwarding.remove(yield* userId, path.mailboxId, path.address))
        return { success: true as const, data }
      })
  }
})

export const ForwardingHandlers = HttpApiBuilder.group(MailroomApi, "forwarding", (handlers) =>
  Effect.map(makeHandlers, (h) => handlers.handle("list", h.list).handle("add", h.add).handle("remove", h.remove))).pipe(
    Layer.provide(Forwarding.Default)
  )

export const DashboardForwardingHandlers = HttpApiBuilder.group(MailroomApi, "dashboardForwarding", (handlers) =>
  Effect.map(makeHandlers, (h) => handlers.handle("list", h.list).handle("add", h.add).handle("remove", h.remove))).pipe(
    Layer.provide(Forwarding.Default)
  )
