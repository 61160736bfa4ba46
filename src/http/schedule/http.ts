/**
 * The schedule over HTTP, served twice from one set of handlers (API keys under /v1/api, dashboard sessions
 * under /api).
 */
import { HttpApiBuilder } from "@effect/platform"
import { Effect, Layer } from "effect"
import { CurrentPrincipal } from "../../../services/accounts/principal.ts"
import { MailboxReach } from "../../../services/accounts/reach.ts"
import { Schedule } from "../../../services/schedule/schedule.ts"
import type { AvailabilityParams, ScheduleParams, SharedAvailabilityParams, SharedScheduleParams } from "../../../services/schedule/schemas.ts"
import { MailroomApi } from "../api.ts"
import { orUnavailable } from "../infra.ts"

type MailboxPath = { readonly mailboxId: string }

const makeHandlers = Effect.gen(function*() {
  const schedule = yield* Schedule
  const reach = yield* MailboxReach
  /**
   * `run` for the calling account over `mailboxIds`, answered with its meta in SPEC's envelope. A key
   * limited to some mailboxes gets the 404 of the first outside them, as if it did not exist.
   */
  const forCaller = <A, M, E, R>(
    mailboxIds: ReadonlyArray<string>,
    run: (userId: string, mailboxIds: ReadonlyArray<string>) => Effect.Effect<{ readonly data: A; readonly meta: M }, E, R>
  ) =>
    Effect.gen(function*() {
      const principal = yield* CurrentPrincipal
      yield* Effect.forEach(mailboxIds, (mailboxId) => reach.mailbox(principal, mailboxId), { discard: true })
      const { data, meta } = yield* orUnavailable(run(principal.userId, mailboxIds))
      return { success: true as const, data, meta }
    })
  return {
    get: ({ path, urlParams }: { readonly path: MailboxPath; readonly urlParams: ScheduleParams }) =>
      forCaller([path.mailboxId], (userId, ids) => schedule.list(userId, ids, urlParams)),
    availability: ({ path, urlParams }: { readonly path: MailboxPath; readonly urlParams: AvailabilityParams }) =>
      forCaller([path.mailboxId], (userId, ids) => schedule.availability(userId, ids, urlParams)),
    shared: ({ urlParams: { mailbox_ids, ...params } }: { readonly urlParams: SharedScheduleParams }) =>
      forCaller(mailbox_ids, (userId, ids) => schedule.list(userId, ids, params)),
    sharedAvailability: ({ urlParams: { mailbox_ids, ...params } }: { readonly urlParams: SharedAvailabilityParams }) =>
      forCaller(mailbox_ids, (userId, ids) => schedule.availability(userId, ids, params))
  }
})

export const ScheduleHandlers = HttpApiBuilder.group(MailroomApi, "schedule", (handlers) =>
  Effect.map(makeHandlers, (h) =>
    handlers.handle("get", h.get).handle("availability", h.availability).handle("shared", h.shared).handle("sharedAvailability", h.sharedAvailability))
).pipe(Layer.provide([Schedule.Default, MailboxReach.Default]))

export const DashboardScheduleHandlers = HttpApiBuilder.group(MailroomApi, "dashboardSchedule", (handlers) =>
  Effect.map(makeHandlers, (h) =>
    handlers.handle("get", h.get).handle("availability", h.availability).handle("shared", h.shared).handle("sharedAvailability", h.sharedAvailability))
).pipe(Layer.provide([Schedule.Default, MailboxReach.Default]))
