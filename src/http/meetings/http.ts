/**
 * Meetings over HTTP, served twice from one set of handlers (API keys under /v1/api, dashboard
 * sessions under /api).
 */
import { HttpApiBuilder } from "@effect/platform"
import { Effect, Layer } from "effect"
import { CurrentPrincipal } from "../../../services/accounts/principal.ts"
import { listMeta, page, parseSort } from "../../../services/listing.ts"
import { Meetings } from "../../../services/meetings/meetings.ts"
import type { MeetingInput, MeetingUpdate } from "../../../services/meetings/schemas.ts"
import { Outbound } from "../../../services/outbound/send.ts"
import { MailroomApi } from "../api.ts"
import { orUnavailable } from "../infra.ts"

type MailboxPath = { readonly mailboxId: string }
type MeetingPath = { readonly meetingId: string }
type ListQuery = {
  readonly limit?: number | undefined
  readonly offset?: number | undefined
  readonly sort?: string | undefined
  readonly status?: "confirmed" | "cancelled" | undefined
}

const makeHandlers = Effect.gen(function*() {
  const meetings = yield* Meetings
  /** `run` for the calling account, answered in SPEC's envelope. */
  const forCaller = <A, E, R>(run: (userId: string) => Effect.Effect<A, E, R>) =>
    Effect.gen(function*() {
      const { userId } = yield* CurrentPrincipal
      return { success: true as const, data: yield* orUnavailable(run(userId)) }
    })
  return {
    create: ({ path, payload }: { readonly path: MailboxPath; readonly payload: MeetingInput }) =>
      forCaller((userId) => meetings.create(userId, path.mailboxId, payload)),
    list: ({ path, urlParams }: { readonly path: MailboxPath; readonly urlParams: ListQuery }) =>
      Effect.gen(function*() {
        const p = page(urlParams)
        const sort = parseSort<"created_at" | "start">(urlParams.sort, { field: "created_at", direction: "desc" })
        const { userId } = yield* CurrentPrincipal
        const { data, total } = yield* orUnavailable(meetings.list(userId, path.mailboxId, p, sort, urlParams.status))
        return { success: true as const, data, meta: listMeta(total, p) }
      }),
    get: ({ path }: { readonly path: MeetingPath }) => forCaller((userId) => meetings.get(userId, path.meetingId)),
    update: ({ path, payload }: { readonly path: MeetingPath; readonly payload: MeetingUpdate }) =>
      forCaller((userId) => meetings.update(userId, path.meetingId, payload)),
    cancel: ({ path }: { readonly path: MeetingPath }) => forCaller((userId) => meetings.cancel(userId, path.meetingId))
  }
})

const services = Meetings.Default.pipe(Layer.provide(Outbound.Default))

export const MeetingsHandlers = HttpApiBuilder.group(MailroomApi, "meetings", (handlers) =>
  Effect.map(makeHandlers, (h) =>
    handlers.handle("create", h.create).handle("list", h.list).handle("get", h.get).handle("update", h.update)
      .handle("cancel", h.cancel))).pipe(Layer.provide(services))

export const DashboardMeetingsHandlers = HttpApiBuilder.group(MailroomApi, "dashboardMeetings", (handlers) =>
  Effect.map(makeHandlers, (h) =>
    handlers.handle("create", h.create).handle("list", h.list).handle("get", h.get).handle("update", h.update)
      .handle("cancel", h.cancel))).pipe(Layer.provide(services))
