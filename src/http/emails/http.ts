/**
 * Reading mail over HTTP. Raw messages and attachments are bytes, not JSON: they are answered
 * directly, with their own content type, and offered as a download.
 */
import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Duration, Effect, Layer, Option, Stream } from "effect"
import { CurrentPrincipal } from "../../../services/accounts/principal.ts"
import { MailboxReach } from "../../../services/accounts/reach.ts"
import { ValidationError } from "../../../services/errors.ts"
import { listMeta, page, parseSort } from "../../../services/listing.ts"
import { type EmailFilter, Emails, type ThreadFilter } from "../../../services/mail/emails.ts"
import { MailArrivals } from "../../../services/mail/arrivals.ts"
import { AttachmentTexts } from "../../../services/mail/attachment-texts.ts"
import { Deletions } from "../../../services/mail/deletion.ts"
import { MailExport } from "../../../services/mail/export.ts"
import { Labels } from "../../../services/mail/labels.ts"
import type { EmailSortField, LabelListParams, LabelSortField, ThreadSortField } from "../../../services/mail/schemas.ts"
import { MailroomApi } from "../api.ts"
import { orUnavailable } from "../infra.ts"
import type {
  AttachmentPath,
  BatchDeleteInput,
  BatchDeleteThreadsInput,
  BatchUpdateInput,
  BatchUpdateThreadsInput,
  AllEmailListParams,
  AllThreadListParams,
  EmailListParams,
  EmailPath,
  MailboxEmailsPath,
  ThreadListParams,
  ThreadPath,
  UpdateEmailInput,
  UpdateThreadInput
} from "./api.ts"

/**
 * A `Content-Disposition` that survives any file name (RFC 6266, with the RFC 5987 form for
 * non-ASCII): the name's last path segment only, so that a sender's `../../etc/passwd` names no
 * directory for a client that saves under the name it is given.
 */
const attachmentDisposition = (filename: string, fallback: string) => {
  const name = filename.split(/[/\\]/).pop()!.replace(/^\.+$/, "") || fallback
  const ascii = name.replace(/[^\x20-\x7e]|["\\]/g, "_")
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(name)}`
}

const TOKEN = "[a-z0-9!#$&^_.+-]+"
const MEDIA_TYPE = new RegExp(`^${TOKEN}/${TOKEN}$`, "i")
const CHARSET = new RegExp(`^${TOKEN}$`, "i")

/**
 * Only well-formed media types are echoed back; anything else is served as opaque bytes. A text
 * type keeps the charset it came with (a well-formed one), which its bytes are in.
 */
const safeContentType = (contentType: string, charset: string | null) => {
  if (!MEDIA_TYPE.test(contentType)) return "application/octet-stream"
  const media = contentType.toLowerCase()
  return charset !== null && CHARSET.test(charset) && media.startsWith("text/") ? `${media}; charset=${charset}` : media
}

type Path<S extends { readonly Type: unknown }> = { readonly path: S["Type"] }

/** A list's filters, from its query. */
const filterOf = (urlParams: typeof EmailListParams.Type): EmailFilter => ({
  direction: urlParams.direction,
  from: urlParams.from,
  labels: urlParams.labels,
  excludeLabels: urlParams.exclude_labels,
  unread: urlParams.unread,
  received: { after: urlParams.received_after, before: urlParams.received_before },
  threadId: urlParams.thread_id,
  after: urlParams.after
})

/** A thread list's filters and order, from its query. */
const threadQueryOf = (urlParams: typeof ThreadListParams.Type) => ({
  page: page(urlParams),
  sort: parseSort<ThreadSortField>(urlParams.sort, { field: "last_received_at", direction: "desc" }),
  filter: {
    from: urlParams.from,
    labels: urlParams.labels,
    excludeLabels: urlParams.exclude_labels,
    unread: urlParams.unread,
    received: { after: urlParams.received_after, before: urlParams.received_before }
  } satisfies ThreadFilter
})

/** One set of handlers, served under /v1/api (API keys) and /api (dashboard sessions). */
const makeHandlers = Effect.gen(function*() {
    const emails = yield* Emails
    const attachmentTexts = yield* AttachmentTexts
    const mailExport = yield* MailExport
    const labels = yield* Labels
    const deletions = yield* Deletions
    const arrivals = yield* MailArrivals
    const reach = yield* MailboxReach
    const change = (payload: { readonly add_labels?: ReadonlyArray<string> | undefined; readonly remove_labels?: ReadonlyArray<string> | undefined }) => ({
      add: payload.add_labels ?? [],
      remove: payload.remove_labels ?? []
    })
    const list = ({ path, urlParams }: Path<typeof MailboxEmailsPath> & { readonly urlParams: typeof EmailListParams.Type }) =>
      Effect.gen(function*() {
        const { userId } = yield* CurrentPrincipal
        const p = page(urlParams)
        const sort = parseSort<EmailSortField>(urlParams.sort, { field: "received_at", direction: "desc" })
        const look = emails.list(userId, path.mailboxId, p, sort, filterOf(urlParams))
        const { emails: data, total } = yield* (urlParams.wait === undefined || urlParams.wait === 0
          ? look
          : arrivals.waitFor(path.mailboxId, look, (answer) => answer.total > 0, Duration.seconds(urlParams.wait))).pipe(orUnavailable)
        return { success: true as const, data, meta: listMeta(total, p) }
      })
    const listThreads = ({ path, urlParams }: Path<typeof MailboxEmailsPath> & { readonly urlParams: typeof ThreadListParams.Type }) =>
      Effect.gen(function*() {
        const { userId } = yield* CurrentPrincipal
        const query = threadQueryOf(urlParams)
        const { threads: data, total } = yield* emails.threads(userId, path.mailboxId, query.page, query.sort, query.filter).pipe(orUnavailable)
        return { success: true as const, data, meta: listMeta(total, query.page) }
      })
    return {
      list,
      listAll: ({ urlParams }: { readonly urlParams: typeof AllEmailListParams.Type }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          const { mailboxes, userId } = principal
          const { mailbox_id, ...params } = urlParams
          if (mailbox_id !== undefined) {
            yield* reach.mailbox(principal, mailbox_id)
            return yield* list({ path: { mailboxId: mailbox_id }, urlParams: params })
          }
          if (urlParams.wait !== undefined && urlParams.wait > 0) {
            return yield* ValidationError.field("wait", "waits on one mailbox's list (with mailbox_id, or GET /v1/api/mailboxes/{mailbox_id}/emails); the event stream tells of every mailbox's mail")
          }
          const p = page(urlParams)
          const sort = parseSort<EmailSortField>(urlParams.sort, { field: "received_at", direction: "desc" })
          const filter = { ...filterOf(urlParams), mailboxes: Option.getOrUndefined(mailboxes) }
          const { emails: data, total } = yield* emails.listAll(userId, p, sort, filter).pipe(orUnavailable)
          return { success: true as const, data, meta: listMeta(total, p) }
        }),
      listThreads,
      listAllThreads: ({ urlParams }: { readonly urlParams: typeof AllThreadListParams.Type }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          const { mailboxes, userId } = principal
          const { mailbox_id, ...params } = urlParams
          if (mailbox_id !== undefined) {
            yield* reach.mailbox(principal, mailbox_id)
            return yield* listThreads({ path: { mailboxId: mailbox_id }, urlParams: params })
          }
          const query = threadQueryOf(urlParams)
          const filter = { ...query.filter, mailboxes: Option.getOrUndefined(mailboxes) }
          const { threads: data, total } = yield* emails.threadsAll(userId, query.page, query.sort, filter).pipe(orUnavailable)
          return { success: true as const, data, meta: listMeta(total, query.page) }
        }),
      listLabels: ({ urlParams }: { readonly urlParams: typeof LabelListParams.Type }) =>
        Effect.gen(function*() {
          const { mailboxes, userId } = yield* CurrentPrincipal
          const p = page(urlParams)
          const sort = parseSort<LabelSortField>(urlParams.sort, { field: "label", direction: "asc" })
          const { labels: data, total } = yield* labels.list(userId, p, { mailboxId: urlParams.mailbox_id, only: Option.getOrUndefined(mailboxes), sort })
            .pipe(orUnavailable)
          return { success: true as const, data, meta: listMeta(total, p) }
        }),
      get: ({ path }: Path<typeof EmailPath>) =>
        Effect.gen(function*() {
          const { userId } = yield* CurrentPrincipal
          const data = yield* emails.get(userId, path.emailId).pipe(orUnavailable)
          return { success: true as const, data }
        }),
      update: ({ path, payload }: Path<typeof EmailPath> & { readonly payload: typeof UpdateEmailInput.Type }) =>
        Effect.gen(function*() {
          const { userId } = yield* CurrentPrincipal
          yield* labels.update(userId, [path.emailId], change(payload)).pipe(orUnavailable)
          const data = yield* emails.get(userId, path.emailId).pipe(orUnavailable)
          return { success: true as const, data }
        }),
      batchUpdate: ({ payload }: { readonly payload: typeof BatchUpdateInput.Type }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          yield* reach.emails(principal, payload.email_ids).pipe(orUnavailable)
          const updated = yield* labels.update(principal.userId, payload.email_ids, change(payload)).pipe(orUnavailable)
          const data = { updated: updated.length, emails: updated.map((row) => ({ email_id: row.id, labels: [...row.labels] })) }
          return { success: true as const, data }
        }),
      remove: ({ path }: Path<typeof EmailPath>) =>
        Effect.gen(function*() {
          const { userId } = yield* CurrentPrincipal
          const data = yield* deletions.emails(userId, [path.emailId]).pipe(orUnavailable)
          return { success: true as const, data }
        }),
      batchDelete: ({ payload }: { readonly payload: typeof BatchDeleteInput.Type }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          yield* reach.emails(principal, payload.email_ids).pipe(orUnavailable)
          const data = yield* deletions.emails(principal.userId, payload.email_ids).pipe(orUnavailable)
          return { success: true as const, data }
        }),
      removeThread: ({ path }: Path<typeof ThreadPath>) =>
        Effect.gen(function*() {
          const { userId } = yield* CurrentPrincipal
          const data = yield* deletions.thread(userId, path.threadId).pipe(orUnavailable)
          return { success: true as const, data }
        }),
      raw: ({ path }: Path<typeof EmailPath>) =>
        Effect.gen(function*() {
          const { userId } = yield* CurrentPrincipal
          const content = yield* emails.raw(userId, path.emailId).pipe(orUnavailable)
          return HttpServerResponse.uint8Array(content, {
            contentType: "message/rfc822",
            headers: { "content-disposition": attachmentDisposition(`${path.emailId}.eml`, `${path.emailId}.eml`) }
          })
        }),
      export: ({ path }: Path<typeof MailboxEmailsPath>) =>
        Effect.gen(function*() {
          const { userId } = yield* CurrentPrincipal
          const mbox = yield* mailExport.mbox(userId, path.mailboxId).pipe(orUnavailable)
          return HttpServerResponse.stream(
            mbox.bytes.pipe(Stream.tapErrorCause((cause) => Effect.logError("A mailbox export stopped part way", { mailboxId: path.mailboxId, cause }))),
            {
              contentType: "application/mbox",
              headers: {
                "content-disposition": attachmentDisposition(`${mbox.address}.mbox`, `${path.mailboxId}.mbox`),
                // Strangers' bytes, like an attachment's: never sniffed into something a browser runs.
                "x-content-type-options": "nosniff"
              }
            }
          )
        }),
      attachment: ({ path }: Path<typeof AttachmentPath>) =>
        Effect.gen(function*() {
          const { userId } = yield* CurrentPrincipal
          const found = yield* emails.attachment(userId, path.emailId, path.attachmentId).pipe(orUnavailable)
          return HttpServerResponse.uint8Array(found.content, {
            contentType: safeContentType(found.contentType, found.charset),
            headers: {
              "content-disposition": attachmentDisposition(found.filename ?? path.attachmentId, path.attachmentId),
              // The bytes are whatever a stranger sent: never let a browser sniff them into something active.
              "x-content-type-options": "nosniff",
              "content-security-policy": "default-src 'none'; sandbox"
            }
          })
        }),
      attachmentText: ({ path }: Path<typeof AttachmentPath>) =>
        Effect.gen(function*() {
          const { userId } = yield* CurrentPrincipal
          const data = yield* attachmentTexts.read(userId, path.emailId, path.attachmentId).pipe(orUnavailable)
          return { success: true as const, data }
        }),
      thread: ({ path }: Path<typeof ThreadPath>) =>
        Effect.gen(function*() {
          const { userId } = yield* CurrentPrincipal
          const data = yield* emails.thread(userId, path.threadId).pipe(orUnavailable)
          return { success: true as const, data }
        }),
      batchUpdateThreads: ({ payload }: { readonly payload: typeof BatchUpdateThreadsInput.Type }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          yield* reach.threads(principal, payload.thread_ids).pipe(orUnavailable)
          const updated = yield* labels.updateThreads(principal.userId, payload.thread_ids, change(payload)).pipe(orUnavailable)
          const data = {
            thread_ids: [...new Set(payload.thread_ids)],
            updated: updated.length,
            emails: updated.map((row) => ({ email_id: row.id, labels: [...row.labels] }))
          }
          return { success: true as const, data }
        }),
      batchDeleteThreads: ({ payload }: { readonly payload: typeof BatchDeleteThreadsInput.Type }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          yield* reach.threads(principal, payload.thread_ids).pipe(orUnavailable)
          const data = yield* deletions.threads(principal.userId, payload.thread_ids).pipe(orUnavailable)
          return { success: true as const, data }
        }),
      updateThread: ({ path, payload }: Path<typeof ThreadPath> & { readonly payload: typeof UpdateThreadInput.Type }) =>
        Effect.gen(function*() {
          const { userId } = yield* CurrentPrincipal
          yield* labels.updateThread(userId, path.threadId, change(payload)).pipe(orUnavailable)
          const data = yield* emails.thread(userId, path.threadId).pipe(orUnavailable)
          return { success: true as const, data }
        })
    }
  })

const services = [Emails.Default, AttachmentTexts.Default, Labels.Default, Deletions.Default, MailArrivals.Default, MailboxReach.Default, MailExport.Default] as const

export const EmailsHandlers = HttpApiBuilder.group(MailroomApi, "emails", (handlers) =>
  Effect.map(makeHandlers, (h) =>
    handlers.handle("list", h.list).handle("listAll", h.listAll).handle("listThreads", h.listThreads).handle("listAllThreads", h.listAllThreads)
      .handle("listLabels", h.listLabels).handle("get", h.get).handle("update", h.update).handle("batchUpdate", h.batchUpdate)
      .handle("remove", h.remove).handle("batchDelete", h.batchDelete).handle("removeThread", h.removeThread)
      .handle("batchUpdateThreads", h.batchUpdateThreads).handle("batchDeleteThreads", h.batchDeleteThreads)
      .handleRaw("raw", h.raw).handleRaw("export", h.export).handleRaw("attachment", h.attachment).handle("attachmentText", h.attachmentText)
      .handle("thread", h.thread).handle("updateThread", h.updateThread))
).pipe(Layer.provide(services))

export const DashboardEmailsHandlers = HttpApiBuilder.group(MailroomApi, "dashboardEmails", (handlers) =>
  Effect.map(makeHandlers, (h) =>
    handlers.handle("list", h.list).handle("listAll", h.listAll).handle("listThreads", h.listThreads).handle("listAllThreads", h.listAllThreads)
      .handle("listLabels", h.listLabels).handle("get", h.get).handle("update", h.update).handle("batchUpdate", h.batchUpdate)
      .handle("remove", h.remove).handle("batchDelete", h.batchDelete).handle("removeThread", h.removeThread)
      .handle("batchUpdateThreads", h.batchUpdateThreads).handle("batchDeleteThreads", h.batchDeleteThreads)
      .handleRaw("raw", h.raw).handleRaw("export", h.export).handleRaw("attachment", h.attachment).handle("attachmentText", h.attachmentText)
      .handle("thread", h.thread).handle("updateThread", h.updateThread))
).pipe(Layer.provide(services))
