/** Reading mail on `{base_url}/api` (DESIGN.md §4): a mailbox's emails, one email, its raw MIME, an attachment, a thread. */
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { ListMeta, ListParams } from "../../../services/listing.ts"
import { Email, EmailSummary, emailSortFields, Thread } from "../../../services/mail/schemas.ts"
import { NotFound } from "../../../services/errors.ts"
import { Ok, OkWithMeta } from "../envelope.ts"
import { envelope } from "../errors.ts"
import { ApiAuthentication } from "../security.ts"

const MailboxEmailsPath = Schema.Struct({ mailboxId: Schema.String })
const EmailPath = Schema.Struct({ emailId: Schema.String })
const AttachmentPath = Schema.Struct({ emailId: Schema.String, attachmentId: Schema.String })
const ThreadPath = Schema.Struct({ threadId: Schema.String })

export class EmailsGroup extends HttpApiGroup.make("emails")
  .add(
    HttpApiEndpoint.get("list", "/mailboxes/:mailboxId/emails")
      .setPath(MailboxEmailsPath)
      .setUrlParams(ListParams(emailSortFields))
      .addSuccess(OkWithMeta(Schema.Array(EmailSummary), ListMeta))
      .addError(envelope(NotFound))
      .annotateContext(OpenApi.annotations({
        summary: "List a mailbox's emails",
        description: "Newest first (sort received_at:desc) unless `sort` says otherwise"
      }))
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
      .addSuccess(HttpApiSchema.Uint8Array({ contentType: "application/octet-stream" }))
      .addError(envelope(NotFound))
      .annotateContext(OpenApi.annotations({
        summary: "Download an attachment",
        description: "The decoded bytes, served with the attachment's own content type"
      }))
  )
  .add(
    HttpApiEndpoint.get("thread", "/threads/:threadId")
      .setPath(ThreadPath)
      .addSuccess(Ok(Thread))
      .addError(envelope(NotFound))
      .annotateContext(OpenApi.annotations({ summary: "Get a thread", description: "The emails of one conversation, oldest first" }))
  )
  .middleware(ApiAuthentication)
  .prefix("/v1/api")
  .annotate(OpenApi.Title, "Emails")
  .annotate(OpenApi.Description, "Reading received mail: lists, single emails, raw messages, attachments and threads")
{}
