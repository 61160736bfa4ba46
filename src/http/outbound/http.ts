/**
 * Sending over HTTP, served twice from one set of handlers (API keys under /v1/api, dashboard
 * sessions under /api). An Idempotency-Key's request is the route, the mailbox and the body.
 */
import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Effect, Layer, Option } from "effect"
import { CurrentPrincipal } from "../../../services/accounts/principal.ts"
import { listMeta, page, type Page, parseSort, type Sort } from "../../../services/listing.ts"
import { Emails } from "../../../services/mail/emails.ts"
import { ListUnsubscribe } from "../../../services/mail/list-unsubscribe.ts"
import { Drafts } from "../../../services/outbound/drafts.ts"
import { Replies } from "../../../services/outbound/replies.ts"
import { Suppressions } from "../../../services/outbound/suppressions.ts"
import type {
  Draft,
  DraftInput,
  DraftSendInput,
  DraftSortField,
  DraftStatus,
  DraftUpdate,
  ForwardInput,
  ReplyInput,
  SendAccepted,
  SendBatchInput,
  SendInput,
  SuppressionInput,
  SuppressionSortField
} from "../../../services/outbound/schemas.ts"
import type { Idempotency } from "../../../services/outbound/idempotency.ts"
import { fromSendInput, Outbound } from "../../../services/outbound/send.ts"
import { MailroomApi } from "../api.ts"
import { orUnavailable } from "../infra.ts"

interface Request<Path, Payload> {
  readonly path: Path
  readonly headers: { readonly "idempotency-key"?: string | undefined }
  readonly payload: Payload
}

/** The Idempotency-Key of a request, and what makes a repeat the same request: route, target, body. */
const idempotency = (request: Request<unknown, unknown>, route: string): Idempotency | undefined => {
  const key = request.headers["idempotency-key"]
  return key === undefined ? undefined : { key, fingerprint: [route, request.path, request.payload] }
}

const accepted = <E, R>(effect: Effect.Effect<SendAccepted, E, R>) =>
  Effect.map(orUnavailable(effect), (data) => ({ success: true as const, data }))

const makeHandlers = Effect.gen(function*() {
  const outbound = yield* Outbound
  const replies = yield* Replies
  const suppressions = yield* Suppressions
  const drafts = yield* Drafts
  const listUnsubscribe = yield* ListUnsubscribe
  type DraftPath = { readonly mailboxId: string; readonly draftId: string }
  type ListQuery = { readonly limit?: number | undefined; readonly offset?: number | undefined; readonly sort?: string | undefined }
  type DraftQuery = ListQuery & { readonly status?: DraftStatus | undefined }
  const ok = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.map(orUnavailable(effect), (data) => ({ success: true as const, data }))
  const caller = Effect.map(CurrentPrincipal, (principal) => principal.userId)
  type EmailPath = { readonly emailId: string }
  /** A drafts list's answer: the page and order the query asks for, read by `read`. */
  const draftList = <E, R>(
    urlParams: DraftQuery,
    read: (userId: string, p: Page, sort: Sort<DraftSortField>) => Effect.Effect<{ readonly data: ReadonlyArray<Draft>; readonly total: number }, E, R>
  ) =>
    Effect.gen(function*() {
      const p = page(urlParams)
      const sort = parseSort<DraftSortField>(urlParams.sort, { field: "created_at", direction: "desc" })
      const { data, total } = yield* orUnavailable(read(yield* caller, p, sort))
      return { success: true as const, data, meta: listMeta(total, p) }
    })
  return {
    send: (request: Request<{ readonly mailboxId: string }, SendInput>) =>
      Effect.flatMap(caller, (userId) =>
        accepted(outbound.submit(userId, request.path.mailboxId, fromSendInput(request.payload), idempotency(request, "send")))),
    sendBatch: (request: Request<{ readonly mailboxId: string }, SendBatchInput>) =>
      Effect.flatMap(caller, (userId) =>
        ok(outbound.submitBatch(userId, request.path.mailboxId, request.payload.messages.map(fromSendInput), idempotency(request, "send/batch")))),
    reply: (request: Request<EmailPath, ReplyInput>) =>
      Effect.flatMap(caller, (userId) =>
        accepted(replies.reply(userId, request.path.emailId, request.payload, false, idempotency(request, "reply")))),
    replyAll: (request: Request<EmailPath, ReplyInput>) =>
      Effect.flatMap(caller, (userId) =>
        accepted(replies.reply(userId, request.path.emailId, request.payload, true, idempotency(request, "reply-all")))),
    forward: (request: Request<EmailPath, ForwardInput>) =>
      Effect.flatMap(caller, (userId) =>
        accepted(replies.forward(userId, request.path.emailId, request.payload, idempotency(request, "forward")))),
    createDraft: (request: Request<{ readonly mailboxId: string }, DraftInput>) =>
      Effect.flatMap(caller, (userId) => ok(drafts.create(userId, request.path.mailboxId, request.payload, idempotency(request, "drafts")))),
    listDrafts: ({ path, urlParams }: { readonly path: { readonly mailboxId: string }; readonly urlParams: DraftQuery }) =>
      draftList(urlParams, (userId, p, sort) => drafts.list(userId, path.mailboxId, p, sort, urlParams.status)),
    listAllDrafts: ({ urlParams }: { readonly urlParams: DraftQuery }) =>
      Effect.flatMap(CurrentPrincipal, ({ mailboxes }) =>
        draftList(urlParams, (userId, p, sort) => drafts.listAll(userId, p, sort, urlParams.status, Option.getOrUndefined(mailboxes)))),
    getDraft: ({ path }: { readonly path: DraftPath }) => Effect.flatMap(caller, (userId) => ok(drafts.get(userId, path.mailboxId, path.draftId))),
    updateDraft: ({ path, payload: { if_updated_at, ...changes } }: { readonly path: DraftPath; readonly payload: DraftUpdate }) =>
      Effect.flatMap(caller, (userId) => ok(drafts.update(userId, path.mailboxId, path.draftId, changes, if_updated_at))),
    deleteDraft: ({ path }: { readonly path: DraftPath }) => Effect.flatMap(caller, (userId) => ok(drafts.remove(userId, path.mailboxId, path.draftId))),
    sendDraft: ({ path, payload }: { readonly path: DraftPath; readonly payload: DraftSendInput }) =>
      Effect.flatMap(caller, (userId) => ok(drafts.send(userId, path.mailboxId, path.draftId, payload.if_updated_at))),
    suppressions: ({ urlParams }: { readonly urlParams: ListQuery }) =>
      Effect.gen(function*() {
        const p = page(urlParams)
        const sort = parseSort<SuppressionSortField>(urlParams.sort, { field: "created_at", direction: "desc" })
        const { data, total } = yield* orUnavailable(suppressions.list(yield* caller, p, sort))
        return { success: true as const, data, meta: listMeta(total, p) }
      }),
    unsubscribe: ({ path }: { readonly path: EmailPath }) =>
      Effect.flatMap(caller, (userId) => ok(listUnsubscribe.unsubscribe(userId, path.emailId))),
    suppress: ({ payload }: { readonly payload: SuppressionInput }) =>
      Effect.gen(function*() {
        const { suppression, created } = yield* orUnavailable(suppressions.add(yield* caller, payload.address))
        const body = { success: true as const, data: suppression }
        // The contract's first success (201) is what an encoded answer gets; "already there" is said here.
        return created ? body : HttpServerResponse.unsafeJson(body, { status: 200 })
      }),
    unsuppress: ({ path }: { readonly path: { readonly address: string } }) =>
      Effect.gen(function*() {
        const data = yield* orUnavailable(suppressions.remove(yield* caller, path.address))
        return { success: true as const, data }
      })
  }
})

const services = Layer.merge(Drafts.Default, ListUnsubscribe.Default).pipe(
  Layer.provideMerge(Layer.mergeAll(Replies.Default, Suppressions.Default, Emails.Default)),
  Layer.provideMerge(Outbound.Default)
)

export const OutboundHandlers = HttpApiBuilder.group(MailroomApi, "outbound", (handlers) =>
  Effect.map(makeHandlers, (h) =>
    handlers.handle("send", h.send).handle("sendBatch", h.sendBatch).handle("reply", h.reply).handle("replyAll", h.replyAll).handle("forward", h.forward)
      .handle("createDraft", h.createDraft).handle("listDrafts", h.listDrafts).handle("listAllDrafts", h.listAllDrafts)
      .handle("getDraft", h.getDraft)
      .handle("updateDraft", h.updateDraft).handle("deleteDraft", h.deleteDraft).handle("sendDraft", h.sendDraft)
      .handle("unsubscribe", h.unsubscribe).handle("suppressions", h.suppressions).handle("suppress", h.suppress).handle("unsuppress", h.unsuppress))).pipe(
    Layer.provide(services)
  )

export const DashboardOutboundHandlers = HttpApiBuilder.group(MailroomApi, "dashboardOutbound", (handlers) =>
  Effect.map(makeHandlers, (h) =>
    handlers.handle("send", h.send).handle("sendBatch", h.sendBatch).handle("reply", h.reply).handle("replyAll", h.replyAll).handle("forward", h.forward)
      .handle("createDraft", h.createDraft).handle("listDrafts", h.listDrafts).handle("listAllDrafts", h.listAllDrafts)
      .handle("getDraft", h.getDraft)
      .handle("updateDraft", h.updateDraft).handle("deleteDraft", h.deleteDraft).handle("sendDraft", h.sendDraft)
      .handle("unsubscribe", h.unsubscribe).handle("suppressions", h.suppressions).handle("suppress", h.suppress).handle("unsuppress", h.unsuppress))).pipe(
    Layer.provide(services)
  )
