/**
 * Automatic replies over HTTP, served twice from one set of handlers (API keys under /v1/api,
 * dashboard sessions under /api).
 */
import { HttpApiBuilder } from "@effect/platform"
import { Effect, Layer } from "effect"
import { CurrentPrincipal } from "../../../services/accounts/principal.ts"
import type { AutoReplyInput } from "../../../services/outbound/schemas.ts"
import { AutoReplies } from "../../../services/outbound/auto-replies.ts"
import { MailroomApi } from "../api.ts"
import { orUnavailable } from "../infra.ts"

const makeHandlers = Effect.gen(function*() {
  const autoReplies = yield* AutoReplies
  type MailboxPath = { readonly mailboxId: string }
  /** The caller's answer from `run`, enveloped. */
  const answer = <A, E, R>(run: (userId: string) => Effect.Effect<A, E, R>) =>
    Effect.gen(function*() {
      const { userId } = yield* CurrentPrincipal
      return { success: true as const, data: yield* orUnavailable(run(userId)) }
    })
  return {
    get: ({ path }: { readonly path: MailboxPath }) => answer((userId) => autoReplies.get(userId, path.mailboxId)),
    set: ({ path, payload }: { readonly path: MailboxPath; readonly payload: AutoReplyInput }) =>
      answer((userId) => autoReplies.set(userId, path.mailboxId, payload)),
    remove: ({ path }: { readonly path: MailboxPath }) => answer((userId) => autoReplies.remove(userId, path.mailboxId))
  }
})

export const AutoRepliesHandlers = HttpApiBuilder.group(MailroomApi, "autoReplies", (handlers) =>
  Effect.map(makeHandlers, (h) => handlers.handle("get", h.get).handle("set", h.set).handle("remove", h.remove))).pipe(
    Layer.provide(AutoReplies.Default)
  )

export const DashboardAutoRepliesHandlers = HttpApiBuilder.group(MailroomApi, "dashboardAutoReplies", (handlers) =>
  Effect.map(makeHandlers, (h) => handlers.handle("get", h.get).handle("set", h.set).handle("remove", h.remove))).pipe(
    Layer.provide(AutoReplies.Default)
  )
