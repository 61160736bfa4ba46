/**
 * Received mail, on the bus and on the wire (DESIGN.md §4 "email record fields", "reading mail").
 * SPEC's snake_case names are kept as is.
 */
import { Schema } from "effect"

/**
 * What the SMTP node puts on the bus (`mail.inbound.<mailbox_id>`) once the raw message is stored:
 * a reference, not the message, so a 50 MB message never travels through the bus. `email_id` is
 * chosen at acceptance and is the email's id, which makes ingesting a redelivery a no-op.
 */
export const InboundMessage = Schema.Struct({
  email_id: Schema.String,
  mailbox_id: Schema.String,
  user_id: Schema.String,
  raw_sha256: Schema.String,
  size: Schema.Number,
  mail_from: Schema.String,
  rcpt_to: Schema.String,
  received_at: Schema.String
})
export type InboundMessage = typeof InboundMessage.Type

export const AttachmentMeta = Schema.Struct({
  attachment_id: Schema.String,
  filename: Schema.NullOr(Schema.String),
  content_type: Schema.String,
  size: Schema.Number.annotations({ description: "Bytes, decoded" }),
  checksum: Schema.String.annotations({ description: "SHA-256 of the decoded bytes, lowercase hex" }),
  content_id: Schema.NullOr(Schema.String)
}).annotations({ identifier: "Attachment" })
export type AttachmentMeta = typeof AttachmentMeta.Type

/** The fields of the `email.received` payload (SPEC "Events"), shared by every email shape. */
export const EmailFields = Schema.Struct({
  email_id: Schema.String,
  message_id: Schema.String,
  subject: Schema.String,
  from: Schema.String,
  to: Schema.Array(Schema.String),
  date: Schema.String,
  mailbox_id: Schema.String,
  domain: Schema.String,
  has_attachments: Schema.Boolean,
  thread_id: Schema.String,
  labels: Schema.Array(Schema.String).annotations({
    description: "System labels (inbound, sent, unread, spam, unauthenticated, blocked) and the account's own"
  })
})
export type EmailFields = typeof EmailFields.Type

/** One email in a list: the event fields plus when it arrived, its size and a preview. */
export const EmailSummary = Schema.Struct({
  ...EmailFields.fields,
  received_at: Schema.String,
  size: Schema.Number.annotations({ description: "Bytes of the raw message" }),
  snippet: Schema.String.annotations({ description: "The first 200 characters of the text body" })
}).annotations({ identifier: "EmailSummary" })
export type EmailSummary = typeof EmailSummary.Type

/** Header name (lower case) to its decoded value; a header that occurs more than once gives an array. */
export const Headers = Schema.Record({ key: Schema.String, value: Schema.Union(Schema.String, Schema.Array(Schema.String)) })
export type Headers = typeof Headers.Type

export const Email = Schema.Struct({
  ...EmailSummary.fields,
  text: Schema.String,
  html: Schema.NullOr(Schema.String),
  headers: Headers,
  attachments: Schema.Array(AttachmentMeta)
}).annotations({ identifier: "Email" })
export type Email = typeof Email.Type

export const Thread = Schema.Struct({
  thread_id: Schema.String,
  mailbox_id: Schema.String,
  subject: Schema.String,
  message_count: Schema.Number,
  emails: Schema.Array(EmailSummary).annotations({ description: "Oldest first" })
}).annotations({ identifier: "Thread" })
export type Thread = typeof Thread.Type

/** Sortable fields of a mailbox's email list. */
export const emailSortFields = ["received_at", "date", "subject"] as const
export type EmailSortField = (typeof emailSortFields)[number]
