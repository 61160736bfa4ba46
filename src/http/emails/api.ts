/** Reading mail on `{base_url}/api` (DESIGN.md §4): a mailbox's emails, one email, its raw MIME, an attachment and its text, a thread. */
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { IntegerParam, ListMeta, ListParams } from "../../../services/listing.ts"
import { AttachmentText, MAX_PDF_PAGES, MAX_TEXT_CHARS } from "../../../services/mail/attachment-text.ts"
import { Label, LabelList, MAX_BATCH } from "../../../services/mail/label-rules.ts"
import {
  Direction,
  Email,
  EmailSummary,
  emailSortFields,
  LabelCount,
  LabelListParams,
  MAX_DELETE_BATCH,
  Thread,
  threadSortFields,
  ThreadSummary
} from "../../../services/mail/schemas.ts"
import { RECEIVED_AFTER, RECEIVED_BEFORE, ReceivedBound } from "../../../services/mail/received-range.ts"
import { SenderPattern } from "../../../services/mail/sender-list-rules.ts"
import { AttachmentUnreadable, Conflict, FactLabel, NotFound, ValidationError } from "../../../services/errors.ts"
import { Ok, OkWithMeta } from "../envelope.ts"
import { envelope } from "../errors.ts"
import { ApiAuthentication, SessionAuthentication } from "../security.ts"

export const MailboxEmailsPath = Schema.Struct({ mailboxId: Schema.String })
export const EmailPath = Schema.Struct({ emailId: Schema.String })
export const AttachmentPath = Schema.Struct({ emailId: Schema.String, attachmentId: Schema.String })
export const ThreadPath = Schema.Struct({ threadId: Schema.String })

/** The longest a list may wait for mail (`wait`). */
export const MAX_WAIT_SECONDS = 60

/** `labels=a,b`: comma-separated label names. */
const LabelsParam = Schema.split(",").pipe(Schema.compose(Schema.Array(Label)))

/** What lists of emails filter by: labels, direction, sender, read state, conversation, when it arrived, and a cursor. */
const emailFilterFields = {
  ...ListParams(emailSortFields).fields,
  labels: Schema.optional(LabelsParam).annotations({ description: "Comma-separated: only emails carrying every one of these labels" }),
  exclude_labels: Schema.optional(LabelsParam).annotations({ description: "Comma-separated: only emails carrying none of these labels" }),
  direction: Schema.optional(Direction.annotations({ message: () => "must be inbound or outbound" }))
    .annotations({ description: "inbound: received mail only; outbound: sent mail only" }),
  from: Schema.optional(SenderPattern).annotations({
    description: "Only mail from this sender: an address (ada@example.com, and her subaddresses such as ada+news@example.com), " +
      "a domain (example.com) or its subdomains (*.example.com); case-insensitive"
  }),
  unread: Schema.optional(Schema.BooleanFromString.annotations({ message: () => "must be true or false" }))
    .annotations({ description: "true: only unread emails (label unread); false: only read ones" }),
  thread_id: Schema.optional(Schema.String).annotations({
    description: "Only this conversation's mail (404 NOT_FOUND for one with no mail here); with after and wait, waits for a reply"
  }),
  received_after: Schema.optional(ReceivedBound).annotations({ description: `Only ${RECEIVED_AFTER}` }),
  received_before: Schema.optional(ReceivedBound).annotations({ description: `Only ${RECEIVED_BEFORE}` }),
  after: Schema.optional(Schema.String).annotations({
    description: "Only emails stored after this email (the newest one you have seen), in the order they were stored: mail an ingest stored late comes after it all the same"
  })
}

const waitParam = (description: string) => Schema.optional(IntegerParam(0, MAX_WAIT_SECONDS)).annotations({ description })
const WAIT = `Seconds (at most ${MAX_WAIT_SECONDS}) to wait for a matching email when there is none yet: answered as soon as one arrives, or with an empty page when the wait ends`

/** `mailbox_id` on the lists of every mailbox: that mailbox's list instead, as its own route answers it. */
const oneMailbox = (list: string) =>
  Schema.optional(Schema.String).annotations({
    description: `Only this mailbox's, answered as ${list} answers (404 NOT_FOUND for a mailbox that is not the caller's)`
  })

export const EmailListParams = Schema.Struct({ ...emailFilterFields, wait: waitParam(WAIT) })
  .annotations({ parseOptions: { errors: "all" } })

export const AllEmailListParams = Schema.Struct({
  ...emailFilterFields,
  mailbox_id: oneMailbox("GET /v1/api/mailboxes/{mailbox_id}/emails"),
  wait: waitParam(`With \`mailbox_id\` only (without it 400: the event stream tells of every mailbox's mail). ${WAIT}`)
}).annotations({ parseOptions: { errors: "all" } })

/** What lists of threads filter by, over all of a thread's emails. */
export const ThreadListParams = Schema.Struct({
  ...ListParams(threadSortFields).fields,
  from: Schema.optional(SenderPattern).annotations({
    description: "Only conversations with mail from this sender (some email of the thread): an address (and its subaddresses), " +
      "a domain (example.com) or its subdomains (*.example.com); case-insensitive"
  }),
  labels: Schema.optional(LabelsParam).annotations({ description: "Comma-separated: only threads where each of these labels is on some email" }),
  exclude_labels: Schema.optional(LabelsParam).annotations({ description: "Comma-separated: only threads none of whose emails carries any of these labels" }),
  unread: Schema.optional(Schema.BooleanFromString.annotations({ message: () => "must be true or false" }))
    .annotations({ description: "true: only threads with an unread email; false: only threads with none" }),
  received_after: Schema.optional(ReceivedBound).annotations({ description: `Only conversations with ${RECEIVED_AFTER} (some email of the thread)` }),
  received_before: Schema.optional(ReceivedBound).annotations({ description: `Only conversations with ${RECEIVED_BEFORE} (some email of the thread)` })
}).annotations({ parseOptions: { errors: "all" } })

export const AllThreadListParams = Schema.Struct({
  ...ThreadListParams.fields,
  mailbox_id: oneMailbox("GET /v1/api/mailboxes/{mailbox_id}/threads")
}).annotations({ parseOptions: { errors: "all" } })

const LabelChangeFields = {
  add_labels: Schema.optional(LabelList).annotations({ description: "Labels to add (custom, unread, spam, unauthenticated, blocked)" }),
  remove_labels: Schema.optional(LabelList).annotations({ description: "Labels to remove (inbound and sent cannot be)" })
}

export const UpdateEmailInput = Schema.Struct(LabelChangeFields)
  .annotations({ identifier: "UpdateEmailInput", parseOptions: { errors: "all", onExcessProperty: "error" } })

export const UpdateThreadInput = Schema.Struct(LabelChangeFields)
  .annotations({ identifier: "UpdateThreadInput", parseOptions: { errors: "all", onExcessProperty: "error" } })

/** A batch's ids of `what` ("email", "thread"): one to `max`. */
const Ids = (what: string, max: number) =>
  Schema.Array(Schema.String).pipe(
    Schema.minItems(1, { message: () => `must list at least one ${what} id` }),
    Schema.maxItems(max, { message: () => `must list at most ${max} ${what} ids` })
  )

export const BatchUpdateInput = Schema.Struct({ email_ids: Ids("email", MAX_BATCH), ...LabelChangeFields })
  .annotations({ identifier: "BatchUpdateInput", parseOptions: { errors: "all", onExcessProperty: "error" } })

const EmailLabels = Schema.Struct({ email_id: Schema.String, labels: Schema.Array(Schema.String) })
  .annotations({ identifier: "EmailLabels" })
const BatchUpdated = Schema.Struct({ updated: Schema.Number, emails: Schema.Array(EmailLabels) })
  .annotations({ identifier: "BatchUpdated" })

export const BatchDeleteInput = Schema.Struct({ email_ids: Ids("email", MAX_DELETE_BATCH) })
  .annotations({ identifier: "BatchDeleteInput", parseOptions: { errors: "all", onExcessProperty: "error" } })

export const BatchUpdateThreadsInput = Schema.Struct({ thread_ids: Ids("thread", MAX_BATCH), ...LabelChangeFields })
  .annotations({ identifier: "BatchUpdateThreadsInput", parseOptions: { errors: "all", onExcessProperty: "error" } })

const BatchUpdatedThreads = Schema.Struct({
  thread_ids: Schema.Array(Schema.String).annotations({ description: "The threads changed, as asked (each once)" }),
  updated: Schema.Number.annotations({ description: "How many emails the threads held" }),
  emails: Schema.Array(EmailLabels).annotations({ description: "Each email of the threads with its labels now" })
}).annotations({ identifier: "BatchUpdatedThreads" })

export const BatchDeleteThreadsInput = Schema.Struct({ thread_ids: Ids("thread", MAX_DELETE_BATCH) })
  .annotations({ identifier: "BatchDeleteThreadsInput", parseOptions: { errors: "all", onExcessProperty: "error" } })

const DeletedEmails = Schema.Struct({
  deleted: Schema.Number.annotations({ description: "How many emails were deleted" }),
  email_ids: Schema.Array(Schema.String).annotations({ description: "The emails deleted" })
}).annotations({ identifier: "DeletedEmails" })

const DELETION_NOTE =
  "Gone for good: the email, its attachments and its search data; its bytes leave storage at once. Announced as email.deleted. " +
  "409 CONFLICT while sent mail still has deliveries queued or deferred (details.email_ids, pending_deliveries) or an unsent draft " +
  "replies to or forwards it (details.draft_ids)"

const emailEndpoints = <const Name extends string>(name: Name) =>
  HttpApiGroup.make(name)
  .add(
    HttpApiEndpoint.get("list", "/mailboxes/:mailboxId/emails")
      .setPath(MailboxEmailsPath)
      .setUrlParams(EmailListParams)
      .addSuccess(OkWithMeta(Schema.Array(EmailSummary), ListMeta))
      .addError(envelope(ValidationError))
      .addError(envelope(NotFound))
      .annotateContext(OpenApi.annotations({
        summary: "List a mailbox's emails",
        description:
          "Newest first (sort received_at:desc) unless `sort` says otherwise; filtered by labels and read state. With `wait`, an empty answer waits for mail (long polling): pass the newest email you have as `after`"
      }))
  )
  .add(
    HttpApiEndpoint.get("export", "/mailboxes/:mailboxId/export")
      .setPath(MailboxEmailsPath)
      .addSuccess(HttpApiSchema.Uint8Array({ contentType: "application/mbox" }))
      .addError(envelope(NotFound))
      .annotateContext(OpenApi.annotations({
        summary: "Export a mailbox's mail (mbox)",
        description: "Every email of the mailbox, received and sent, oldest first, as one mbox file (mboxrd, RFC 4155; LF line " +
          "ends) that mail programs import: each its raw message as stored, after a `From <envelope sender> <date>` line. " +
          "Streamed, whatever the mailbox's size. 404 NOT_FOUND, before anything is sent, for a mailbox that is not the caller's"
      }))
  )
  .add(
    HttpApiEndpoint.get("listAll", "/emails")
      .setUrlParams(AllEmailListParams)
      .addSuccess(OkWithMeta(Schema.Array(EmailSummary), ListMeta))
      .addError(envelope(ValidationError))
      .addError(envelope(NotFound))
      .annotateContext(OpenApi.annotations({
        summary: "List every mailbox's emails",
        description:
          "The emails of all the account's mailboxes in one list, newest first unless `sort` says otherwise, with the mailbox list's filters (each email names its `mailbox_id`); " +
          "with `mailbox_id`, one mailbox's list. `wait` is one mailbox's: without `mailbox_id` it is 400 (the event stream tells of every mailbox's mail)"
      }))
  )
  .add(
    HttpApiEndpoint.get("listThreads", "/mailboxes/:mailboxId/threads")
      .setPath(MailboxEmailsPath)
      .setUrlParams(ThreadListParams)
      .addSuccess(OkWithMeta(Schema.Array(ThreadSummary), ListMeta))
      .addError(envelope(ValidationError))
      .addError(envelope(NotFound))
      .annotateContext(OpenApi.annotations({
        summary: "List a mailbox's threads",
        description:
          "Its conversations, the most recently active first (sort last_received_at:desc) unless `sort` says otherwise: each with its subject, counts, labels, senders and newest email. Filtered by labels and read state over all of a thread's emails"
      }))
  )
  .add(
    HttpApiEndpoint.get("listAllThreads", "/threads")
      .setUrlParams(AllThreadListParams)
      .addSuccess(OkWithMeta(Schema.Array(ThreadSummary), ListMeta))
      .addError(envelope(ValidationError))
      .addError(envelope(NotFound))
      .annotateContext(OpenApi.annotations({
        summary: "List every mailbox's threads",
        description: "The conversations of all the account's mailboxes in one list (each names its `mailbox_id`), with the mailbox list's order and filters; " +
          "with `mailbox_id`, one mailbox's list"
      }))
  )
  .add(
    HttpApiEndpoint.get("listLabels", "/labels")
      .setUrlParams(LabelListParams)
      .addSuccess(OkWithMeta(Schema.Array(LabelCount), ListMeta))
      .addError(envelope(ValidationError))
      .addError(envelope(NotFound))
      .annotateContext(OpenApi.annotations({
        summary: "List the labels the account's mail carries",
        description: "Every label on the account's emails (of one mailbox with `mailbox_id`), by name, with how many emails carry it " +
          "and how many of those are unread: the system labels (inbound, sent, unread, spam, unauthenticated, blocked) and the " +
          "account's own. A label is there while some email carries it; rename one with a batch update of the emails listed with `labels=`"
      }))
  )
  .add(
    HttpApiEndpoint.patch("update", "/emails/:emailId")
      .setPath(EmailPath)
      .setPayload(UpdateEmailInput)
      .addSuccess(Ok(Email))
      .addError(envelope(ValidationError))
      .addError(envelope(FactLabel))
      .addError(envelope(NotFound))
      .annotateContext(OpenApi.annotations({
        summary: "Change an email's labels",
        description: "Adds and removes labels; removing unread marks the email handled. Announced as email.labels_changed"
      }))
  )
  .add(
    HttpApiEndpoint.post("batchUpdate", "/emails/batch-update")
      .setPayload(BatchUpdateInput)
      .addSuccess(Ok(BatchUpdated))
      .addError(envelope(ValidationError))
      .addError(envelope(FactLabel))
      .addError(envelope(NotFound))
      .annotateContext(OpenApi.annotations({
        summary: "Change the labels of up to 100 emails",
        description: "One change applied to every listed email, all or none: an email that is not the caller's fails the whole batch with 404"
      }))
  )
  .add(
    HttpApiEndpoint.post("batchDelete", "/emails/batch-delete")
      .setPayload(BatchDeleteInput)
      .addSuccess(Ok(DeletedEmails))
      .addError(envelope(ValidationError))
      .addError(envelope(NotFound)).addError(envelope(Conflict))
      .annotateContext(OpenApi.annotations({
        summary: `Delete up to ${MAX_DELETE_BATCH} emails`,
        description: `All or none: an email that is not the caller's fails the whole batch with 404 naming it. ${DELETION_NOTE}`
      }))
  )
  .add(
    HttpApiEndpoint.del("remove", "/emails/:emailId")
      .setPath(EmailPath)
      .addSuccess(Ok(DeletedEmails))
      .addError(envelope(NotFound)).addError(envelope(Conflict))
      .annotateContext(OpenApi.annotations({ summary: "Delete an email", description: DELETION_NOTE }))
  )
  .add(
    HttpApiEndpoint.get("get", "/emails/:emailId")
      .setPath(EmailPath)
      .addSuccess(Ok(Email))
      .addError(envelope(NotFound))
      .annotateContext(OpenApi.annotations({
        summary: "Get an email",
        description: "Headers, text, HTML, attachments' metadata and the thread it belongs to"
      }))
  )
  .add(
    HttpApiEndpoint.get("raw", "/emails/:emailId/raw")
      .setPath(EmailPath)
      .addSuccess(HttpApiSchema.Uint8Array({ contentType: "message/rfc822" }))
      .addError(envelope(NotFound))
      .annotateContext(OpenApi.annotations({ summary: "Download an email's raw MIME", description: "The message exactly as it was received" }))
  )
  .add(
    HttpApiEndpoint.get("attachment", "/emails/:emailId/attachments/:attachmentId")
      .setPath(AttachmentPath)
      // Documented as opaque bytes: the Content-Type sent is each attachment's own, which no contract can name ahead.
      .addSuccess(HttpApiSchema.Uint8Array({ contentType: "application/octet-stream" }).annotations({
        description: "The attachment's bytes. Content-Type is the attachment's own media type (its content_type in the email's " +
          "attachments; a text type with the charset it named), application/octet-stream when that is not a well-formed media type"
      }))
      .addError(envelope(NotFound))
      .annotateContext(OpenApi.annotations({
        summary: "Download an attachment",
        description: "The decoded bytes, served with the attachment's own content type, a text type with the charset it named (application/octet-stream when the type it came with is not a well-formed media type)"
      }))
  )
  .add(
    HttpApiEndpoint.get("attachmentText", "/emails/:emailId/attachments/:attachmentId/text")
      .setPath(AttachmentPath)
      .addSuccess(Ok(AttachmentText))
      .addError(envelope(NotFound))
      .addError(envelope(AttachmentUnreadable))
      .annotateContext(OpenApi.annotations({
        summary: "Read an attachment's text",
        description:
          "What a text, HTML, PDF or Word (.docx) attachment says, as plain text: text decoded by its charset, HTML rendered as a " +
          "reader sees it, a PDF's pages in order, a Word document's paragraphs (a document is read once and kept; its first reading " +
          "may take seconds). " +
          `At most ${MAX_TEXT_CHARS.toLocaleString("en")} characters and ${MAX_PDF_PAGES} pages (truncated says when more was left out). ` +
          "Other kinds, and documents that are encrypted, damaged or too large or complex to read, answer 422 ATTACHMENT_UNREADABLE with the reason"
      }))
  )
  .add(
    HttpApiEndpoint.get("thread", "/threads/:threadId")
      .setPath(ThreadPath)
      .addSuccess(Ok(Thread))
      .addError(envelope(NotFound))
      .annotateContext(OpenApi.annotations({ summary: "Get a thread", description: "The emails of one conversation, oldest first" }))
  )
  .add(
    HttpApiEndpoint.patch("updateThread", "/threads/:threadId")
      .setPath(ThreadPath)
      .setPayload(UpdateThreadInput)
      .addSuccess(Ok(Thread))
      .addError(envelope(ValidationError))
      .addError(envelope(FactLabel))
      .addError(envelope(NotFound))
      .annotateContext(OpenApi.annotations({
        summary: "Change the labels of a whole thread",
        description:
          "One change applied to every email of the conversation, all or none (removing unread marks it handled); answers the thread as GET does. Each email changed is announced as email.labels_changed"
      }))
  )
  .add(
    HttpApiEndpoint.post("batchUpdateThreads", "/threads/batch-update")
      .setPayload(BatchUpdateThreadsInput)
      .addSuccess(Ok(BatchUpdatedThreads))
      .addError(envelope(ValidationError))
      .addError(envelope(FactLabel))
      .addError(envelope(NotFound))
      .annotateContext(OpenApi.annotations({
        summary: `Change the labels of up to ${MAX_BATCH} whole threads`,
        description: "One change applied to every email of every listed conversation, all or none: a thread that is not the caller's " +
          "fails the whole batch with 404 naming it (details.thread_id, or thread_ids for more). Each email changed is announced as email.labels_changed"
      }))
  )
  .add(
    HttpApiEndpoint.post("batchDeleteThreads", "/threads/batch-delete")
      .setPayload(BatchDeleteThreadsInput)
      .addSuccess(Ok(DeletedEmails))
      .addError(envelope(ValidationError))
      .addError(envelope(NotFound)).addError(envelope(Conflict))
      .annotateContext(OpenApi.annotations({
        summary: `Delete up to ${MAX_DELETE_BATCH} whole threads`,
        description: "Every email of every listed conversation as they are when asked, all or none: a thread that is not the caller's " +
          `fails the whole batch with 404 naming it. ${DELETION_NOTE}`
      }))
  )
  .add(
    HttpApiEndpoint.del("removeThread", "/threads/:threadId")
      .setPath(ThreadPath)
      .addSuccess(Ok(DeletedEmails))
      .addError(envelope(NotFound)).addError(envelope(Conflict))
      .annotateContext(OpenApi.annotations({
        summary: "Delete a whole thread",
        description: `Every email of the conversation as it is when asked, all or none. ${DELETION_NOTE}`
      }))
  )

export class EmailsGroup extends emailEndpoints("emails")
  .middleware(ApiAuthentication)
  .prefix("/v1/api")
  .annotate(OpenApi.Title, "Emails")
  .annotate(OpenApi.Description, "Reading received mail: lists, single emails, raw messages, attachments and threads")
{}

/** The same routes under /api for dashboard sessions (the dashboard's inbox and reader). */
export class DashboardEmailsGroup extends emailEndpoints("dashboardEmails")
  .middleware(SessionAuthentication)
  .prefix("/api")
  .annotate(OpenApi.Title, "Emails (dashboard session)")
  .annotate(OpenApi.Description, "As /v1/api's email routes, for the dashboard's cookie session")
{}
