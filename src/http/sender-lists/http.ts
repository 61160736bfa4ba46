/**
 * Allow and block lists over HTTP, served twice from one set of handlers (API keys under /v1/api,
 * dashboard sessions under /api). An add that finds the entry on the list already answers 200.
 */
import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Effect, Layer } from "effect"
import { CurrentPrincipal } from "../../../services/accounts/principal.ts"
import { listMeta, page, parseSort } from "../../../services/listing.ts"
import type { EntrySortField, ListName } from "../../../services/mail/sender-list-rules.ts"
import { type ListOwner, SenderLists } from "../../../services/mail/sender-lists.ts"
import { MailroomApi } from "../api.ts"
import type { EntryListParams } from "./api.ts"
import { orUnavailable } from "../infra.ts"

type PageQuery = typeof EntryListParams.Type

const makeHandlers = Effect.gen(function*() {
  const lists = yield* SenderLists
  const owner = (mailboxId: string | null) =>
    Effect.map(CurrentPrincipal, (principal): ListOwner => ({ userId: principal.userId, mailboxId }))

  const listed = (mailboxId: string | null, list: ListName, urlParams: PageQuery) =>
    Effect.gen(function*() {
      const p = page(urlParams)
      const sort = parseSort<EntrySortField>(urlParams.sort, { field: "created_at", direction: "desc" })
      const { data, total } = yield* orUnavailable(lists.list(yield* owner(mailboxId), list, p, sort))
      return { success: true as const, data, meta: listMeta(total, p) }
    })

  const added = (mailboxId: string | null, list: ListName, entry: string) =>
    Effect.gen(function*() {
      const result = yield* orUnavailable(lists.add(yield* owner(mailboxId), list, entry))
      const body = { success: true as const, data: result.entry }
      // The contract's first success (201) is what an encoded answer gets; "already there" is said here.
      return result.created ? body : HttpServerResponse.unsafeJson(body, { status: 200 })
    })

  const removed = (mailboxId: string | null, list: ListName, entry: string) =>
    Effect.gen(function*() {
      const data = yield* orUnavailable(lists.remove(yield* owner(mailboxId), list, entry))
      return { success: true as const, data }
    })

  type AccountPath = { readonly list: ListName }
  type MailboxPath = { readonly mailboxId: string; readonly list: ListName }
  return {
    listAccount: ({ path, urlParams }: { readonly path: AccountPath; readonly urlParams: PageQuery }) => listed(null, path.list, urlParams),
    addAccount: ({ path, payload }: { readonly path: AccountPath; readonly payload: { readonly entry: string } }) =>
      added(null, path.list, payload.entry),
    removeAccount: ({ path }: { readonly path: AccountPath & { readonly entry: string } }) => removed(null, path.list, path.entry),
    listMailbox: ({ path, urlParams }: { readonly path: MailboxPath; readonly urlParams: PageQuery }) =>
      listed(path.mailboxId, path.list, urlParams),
    addMailbox: ({ path, payload }: { readonly path: MailboxPath; readonly payload: { readonly entry: string } }) =>
      added(path.mailboxId, path.list, payload.entry),
    removeMailbox: ({ path }: { readonly path: MailboxPath & { readonly entry: string } }) => removed(path.mailboxId, path.list, path.entry)
  }
})

export const SenderListsHandlers = HttpApiBuilder.group(MailroomApi, "senderLists", (handlers) =>
  Effect.map(makeHandlers, (h) =>
    handlers.handle("listAccount", h.listAccount).handle("addAccount", h.addAccount).handle("removeAccount", h.removeAccount)
      .handle("listMailbox", h.listMailbox).handle("addMailbox", h.addMailbox).handle("removeMailbox", h.removeMailbox))).pipe(
    Layer.provide(SenderLists.Default)
  )

export const DashboardSenderListsHandlers = HttpApiBuilder.group(MailroomApi, "dashboardSenderLists", (handlers) =>
  Effect.map(makeHandlers, (h) =>
    handlers.handle("listAccount", h.listAccount).handle("addAccount", h.addAccount).handle("removeAccount", h.removeAccount)
      .handle("listMailbox", h.listMailbox).handle("addMailbox", h.addMailbox).handle("removeMailbox", h.removeMailbox))).pipe(
    Layer.provide(SenderLists.Default)
  )
