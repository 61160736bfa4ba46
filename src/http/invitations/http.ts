/**
 * Calendar invitations over HTTP, served twice from one set of handlers (API keys under /v1/api,
 * dashboard sessions under /api). An Idempotency-Key's request is the route, the email and the body.
 */
import { HttpApiBuilder } from "@effect/platform"
import { Effect, Layer } from "effect"
import { CurrentPrincipal } from "../../../services/accounts/principal.ts"
import { Invitations } from "../../../services/invitations/invitations.ts"
import type { RespondInput } from "../../../services/invitations/schemas.ts"
import { Outbound } from "../../../services/outbound/send.ts"
import { MailroomApi } from "../api.ts"
import { orUnavailable } from "../infra.ts"

type EmailPath = { readonly emailId: string }

const makeHandlers = Effect.gen(function*() {
  const invitations = yield* Invitations
  /** `run` for the calling account, answered in SPEC's envelope. */
  const forCaller = <A, E, R>(run: (userId: string) => Effect.Effect<A, E, R>) =>
    Effect.gen(function*() {
      const { userId } = yield* CurrentPrincipal
      return { success: true as const, data: yield* orUnavailable(run(userId)) }
    })
  return {
    get: ({ path }: { readonly path: EmailPath }) => forCaller((userId) => invitations.get(userId, path.emailId)),
    respond: (request: { readonly path: EmailPath; readonly payload: RespondInput; readonly headers: { readonly "idempotency-key"?: string | undefined } }) =>
      forCaller((userId) => {
        const key = request.headers["idempotency-key"]
        return invitations.respond(
          userId,
          request.path.emailId,
          request.payload,
          key === undefined ? undefined : { key, fingerprint: ["invitation/respond", request.path, request.payload] }
        )
      })
  }
})

const services = Invitations.Default.pipe(Layer.provide(Outbound.Default))

export const InvitationsHandlers = HttpApiBuilder.group(MailroomApi, "invitations", (handlers) =>
  Effect.map(makeHandlers, (h) => handlers.handle("get", h.get).handle("respond", h.respond))).pipe(Layer.provide(services))

export const DashboardInvitationsHandlers = HttpApiBuilder.group(MailroomApi, "dashboardInvitations", (handlers) =>
  Effect.map(makeHandlers, (h) => handlers.handle("get", h.get).handle("respond", h.respond))).pipe(Layer.provide(services))
