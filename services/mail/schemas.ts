/**
 * Received mail, on the bus and on the wire (DESIGN.md §4 "email record fields", "reading mail").
 * SPEC's snake_case names are kept as is.
 */
import { Schema } from "effect"
import { IntegerParam, Limit, Offset, SortParam } from "../listing.ts"
import { Authentication, AuthenticationOnTheBus } from "./authentication.ts"
import { Spam } from "./spam.ts"
import { Extracted } from "./extracted.ts"

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
  received_at: Schema.String,
  /** Sent to a bounce address: a delivery report about this sent email, not mail for the mailbox. */
  bounce_of: Schema.optional(Schema.String),
  /** The recipient domain its tagged bounce address names: the report may speak only of that domain's recipients. */
  bounce_domain: Schema.optional(Schema.String),
  /** The recipient its tagged bounce address names: the report may speak only of that recipient. */
  bounce_recipient: Schema.optional(Schema.String),
  /**
   * The verdicts, when the SMTP node checked the message before answering (DMARC_ENFORCE=true); absent
   * when it left the checks to ingest (`connection`) or did not check (VERIFY_INBOUND=false).
   */
  authentication: Schema.optional(AuthenticationOnTheBus),
  authentication_results: Schema.optional(Schema.String),
  /**
   * What only the SMTP node knew of the message's connection, for the checks ingest runs in its place
   * (SPF asks for the client's address and, for an empty MAIL FROM, the HELO name).
   */
  connection: Schema.optional(Schema.Struct({ client_ip: Schema.String, helo: Schema.optional(Schema.String) })),
  /** rspamd's verdict; absent when RSPAMD_URL is unset. */
  spam: Schema.optional(Spam)
})
export type InboundMessage = typeof InboundMessage.Type

export const AttachmentMeta = Schema.Struct({
  attachment_id: Schema.String,
  filename: Schema.NullOr(Schema.String).annotations({
    description: "As the sender wrote it (it may hold '/' or '..'): never use it as a path"
  }),
  content_type: Schema.String,
  size: Schema.Number.annotations({ description: "Bytes, decoded" }),
  checksum: Schema.String.annotations({ description: "SHA-256 of the decoded bytes, lowercase hex" }),
  content_id: Schema.NullOr(Schema.String)
}).annotations({ identifier: "Attachment" })
export type AttachmentMeta = typeof AttachmentMeta.Type

/** The most emails one batch deletes (POST /emails/batch-delete, MCP delete_emails), as a batch of label changes. */
export const MAX_DELETE_BATCH = 100

/** Which way an email went: received by the mailbox, or sent from it. */
export const Direction = Schema.Literal("inbound", "outbound")
export type Direction = typeof Direction.Type

/** The fields of the `email.received` payload (SPEC "Events"), shared by every email shape. */
export const EmailFields = Schema.Struct({
  email_id: Schema.String,
  direction: Direction,
  message_id: Schema.String,
  subject: Schema.String,
  from: Schema.String,
  from_name: Schema.NullOr(Schema.String).annotations({ description: "The From's display name (\"Ann Smith\" of Ann Smith <ann@example.com>); null when it has none" }),
  to: Schema.Array(Schema.String),
  cc: Schema.Array(Schema.String).annotations({ description: "The Cc header's addresses (none: empty)" }),
  reply_to: Schema.Array(Schema.String).annotations({
    description: "The Reply-To header's addresses, where the sender asks answers to go (none: empty; a reply goes to From)"
  }),
  date: Schema.String,
  mailbox_id: Schema.String,
  domain: Schema.String,
  has_attachments: Schema.Boolean,
  thread_id: Schema.String,
  labels: Schema.Array(Schema.String).annotations({
    description: "System labels (inbound, sent, unread, spam, unauthenticated, blocked) and the account's own"
  }),
  authentication: Schema.NullOr(Authentication).annotations({
    description: "Inbound mail: SPF, DKIM, DMARC and ARC verdicts from when it was received; null for sent mail and mail received before the checks existed"
  }),
  authentication_results: Schema.NullOr(Schema.String).annotations({
    description: "The verdicts as one RFC 8601 Authentication-Results value (not added to the raw message, which stays as sent)"
  }),
  spam: Schema.NullOr(Spam).annotations({
    description: "Inbound mail with RSPAMD_URL set: rspamd's verdict; null when nothing scored the email"
  })
})
export type EmailFields = typeof EmailFields.Type

/**
 * What the full representations add: the content extracted when the email arrived. Not in list
 * items (summaries), threads or search results: up to 100 links an email would make a page of 100
 * emails heavy for what a list is for, choosing what to read.
 */
const extractedField = {
  extracted: Schema.NullOr(Extracted)
}

/** The `email.received` payload (webhooks, the event stream, MCP): the email's fields and its extracted content. */
export const EmailReceived = Schema.Struct({ ...EmailFields.fields, ...extractedField })
export type EmailReceived = typeof EmailReceived.Type

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

/** A header's first value (`name` lower case), as most headers are read. */
export const firstHeader = (headers: Headers, name: string): string | undefined => {
  const value = headers[name]
  return typeof value === "string" ? value : value?.[0]
}

/**
 * What became of a sent email at one recipient: `queued` (not yet tried), `sent` (the receiving
 * server took it), `deferred` (a temporary failure; tried again later), `bounced` (refused for good,
 * or a bounce report came back), `failed` (given up: out of retries, or the domain takes no mail),
 * `suppressed` (not sent: the address is on the account's suppression list).
 */
export const DeliveryStatus = Schema.Literal("queued", "sent", "deferred", "bounced", "failed", "suppressed")
export type DeliveryStatus = typeof DeliveryStatus.Type

export const Delivery = Schema.Struct({
  recipient: Schema.String,
  status: DeliveryStatus,
  attempts: Schema.Number,
  last_response: Schema.NullOr(Schema.String).annotations({ description: "The receiving server's last answer, or why it was not reached" }),
  next_attempt_at: Schema.NullOr(Schema.String).annotations({ description: "When a deferred delivery is tried again" }),
  attempting: Schema.Boolean.annotations({
    description: "An attempt is under way now (a receiving server is being talked to); status, attempts and last_response change when it ends"
  }),
  complained_at: Schema.NullOr(Schema.String).annotations({
    description: "When the recipient reported the email as spam (their provider's feedback report came back); null: no complaint"
  }),
  updated_at: Schema.String
}).annotations({ identifier: "Delivery" })
export type Delivery = typeof Delivery.Type

/** What became of a received email's copy to one of its mailbox's forwarding addresses (as a sent email's delivery, never suppressed). */
export const ForwardedCopy = Schema.Struct({
  address: Schema.String,
  status: Schema.Literal("queued", "sent", "deferred", "bounced", "failed"),
  attempts: Schema.Number,
  last_response: Schema.NullOr(Schema.String).annotations({ description: "The receiving server's last answer, or why it was not reached" }),
  next_attempt_at: Schema.NullOr(Schema.String).annotations({ description: "When a deferred copy is tried again" }),
  attempting: Schema.Boolean.annotations({ description: "An attempt is under way now; status, attempts and last_response change when it ends" }),
  updated_at: Schema.String
}).annotations({ identifier: "ForwardedCopy" })
export type ForwardedCopy = typeof ForwardedCopy.Type

export const Email = Schema.Struct({
  ...EmailSummary.fields,
  text: Schema.String,
  html: Schema.NullOr(Schema.String),
  headers: Headers,
  attachments: Schema.Array(AttachmentMeta),
  ...extractedField,
  delivery: Schema.optional(Schema.Array(Delivery)).annotations({
    description: "Sent emails only: one entry per recipient (to, cc and bcc)"
  }),
  forwarded: Schema.optional(Schema.Array(ForwardedCopy)).annotations({
    description: "Received emails only: its copies to the mailbox's forwarding addresses, one per address (none when it was not forwarded)"
  }),
  delivered_to: Schema.optional(Schema.String).annotations({
    description: "Received emails only: the address it was delivered to (the envelope's recipient), which its To and Cc may not name: " +
      "a Bcc, a list, a subaddress, an address a custom domain's catch-all took"
  })
}).annotations({ identifier: "Email" })
export type Email = typeof Email.Type

/** One email of a conversation read whole: its summary, and what it says that is new. */
export const ThreadEmail = Schema.Struct({
  ...EmailSummary.fields,
  reply_text: Schema.String.annotations({
    description: "What the email says that is new: received mail without its quoted history and signature (extracted.reply_text), " +
      "sent mail its text. The conversation reads in order from these, without each email repeating the ones before"
  })
}).annotations({ identifier: "ThreadEmail" })
export type ThreadEmail = typeof ThreadEmail.Type

/** One conversation in a list: what it is about, who wrote, how much of it is unread, and its newest email. */
export const ThreadSummary = Schema.Struct({
  thread_id: Schema.String,
  mailbox_id: Schema.String,
  subject: Schema.String.annotations({ description: "The subject of its first email" }),
  message_count: Schema.Number,
  unread_count: Schema.Number.annotations({ description: "Its emails labelled unread" }),
  has_attachments: Schema.Boolean.annotations({ description: "Whether any of its emails has attachments" }),
  labels: Schema.Array(Schema.String).annotations({ description: "Every label any of its emails carries, sorted" }),
  senders: Schema.Array(Schema.String).annotations({ description: "The addresses its emails came from, in the order they first wrote" }),
  first_received_at: Schema.String,
  last_received_at: Schema.String,
  latest: Schema.propertySignature(EmailSummary).annotations({ description: "Its newest email" })
}).annotations({ identifier: "ThreadSummary" })
export type ThreadSummary = typeof ThreadSummary.Type

/** A conversation read whole: what its list entry says of it, and every email, each with its new text. */
export const Thread = Schema.Struct({
  ...ThreadSummary.omit("latest").fields,
  emails: Schema.Array(ThreadEmail).annotations({ description: "Oldest first" })
}).annotations({ identifier: "Thread" })
export type Thread = typeof Thread.Type

/** Sortable fields of a thread list. */
export const threadSortFields = ["last_received_at", "first_received_at"] as const
export type ThreadSortField = (typeof threadSortFields)[number]

/** Sortable fields of a mailbox's email list. */
export const emailSortFields = ["received_at", "date", "subject"] as const
export type EmailSortField = (typeof emailSortFields)[number]

/** Mail stats (stats.ts): what an account's mail did over recent days. */
/** The most days one answer covers. */
export const MAX_STATS_DAYS = 90

/** One label the account's mail carries, counted (GET /v1/api/labels). */
export const LabelCount = Schema.Struct({
  label: Schema.String,
  email_count: Schema.Int.pipe(Schema.nonNegative()).annotations({ description: "Emails carrying it" }),
  unread_count: Schema.Int.pipe(Schema.nonNegative()).annotations({ description: "Of those, the ones still unread" })
}).annotations({ identifier: "LabelCount" })
export type LabelCount = typeof LabelCount.Type

/** What the label list sorts by (label:asc, by name, when left out). */
export const labelSortFields = ["label", "email_count", "unread_count"] as const
export type LabelSortField = (typeof labelSortFields)[number]

export const LabelListParams = Schema.Struct({
  mailbox_id: Schema.optional(Schema.String.annotations({ description: "One mailbox's labels; every mailbox's when left out" })),
  limit: Schema.optional(Limit),
  offset: Schema.optional(Offset),
  sort: Schema.optional(SortParam(labelSortFields))
}).annotations({ parseOptions: { errors: "all" } })

export const StatsParams = Schema.Struct({
  mailbox_id: Schema.optional(Schema.String.annotations({ description: "One mailbox's; every mailbox's when left out" })),
  days: Schema.optional(IntegerParam(1, MAX_STATS_DAYS).annotations({
    description: `Days to cover, today (UTC) included: 1-${MAX_STATS_DAYS}, default 30`
  }))
}).annotations({ parseOptions: { errors: "all" } })

const Count = Schema.Int.pipe(Schema.nonNegative())

export const RecipientCounts = Schema.Struct({
  sent: Count.annotations({ description: "Accepted by the receiving server" }),
  bounced: Count.annotations({ description: "Refused for good (5xx, or a bounce that came back)" }),
  failed: Count.annotations({ description: "Not delivered before the retries ran out" }),
  suppressed: Count.annotations({ description: "Not tried: the address is on the account's suppression list" }),
  deferred: Count.annotations({ description: "Refused for now; will be tried again" }),
  queued: Count.annotations({ description: "Not tried yet" })
}).annotations({ identifier: "RecipientCounts" })
export type RecipientCounts = typeof RecipientCounts.Type

export const DayStats = Schema.Struct({
  date: Schema.String.annotations({ description: "YYYY-MM-DD (UTC)" }),
  received: Count,
  sent: Count,
  bounced: Count.annotations({ description: "Recipients of that day's sent emails that bounced" }),
  complained: Count.annotations({ description: "Recipients of that day's sent emails that reported them as spam" })
}).annotations({ identifier: "DayStats" })

export const MailStats = Schema.Struct({
  mailbox_id: Schema.NullOr(Schema.String),
  from: Schema.String.annotations({ description: "The first day covered, YYYY-MM-DD (UTC)" }),
  to: Schema.String.annotations({ description: "The last day covered (today, UTC)" }),
  received: Count.annotations({ description: "Emails received" }),
  sent: Count.annotations({ description: "Emails sent" }),
  recipients: RecipientCounts.annotations({ description: "The recipients of the emails sent, by what became of them" }),
  bounce_rate: Schema.NullOr(Schema.Number).annotations({
    description: "Bounced among the recipients whose delivery ended (sent, bounced or failed), 0-1; null when none has ended"
  }),
  complaints: Count.annotations({ description: "Recipients who reported the emails sent as spam (counted with the day the email was sent)" }),
  complaint_rate: Schema.NullOr(Schema.Number).annotations({
    description: "Complaints among the recipients whose server took the email (sent), 0-1; null when none has. Mailbox providers distrust senders past 0.3%"
  }),
  daily: Schema.Array(DayStats).annotations({ description: "Every day covered, oldest first, days without mail included" })
}).annotations({ identifier: "MailStats" })
export type MailStats = typeof MailStats.Type

/** What `POST /emails/{id}/unsubscribe` did (mail/list-unsubscribe.ts). */
export const UnsubscribeResult = Schema.Struct({
  email_id: Schema.String,
  method: Schema.Literal("one_click", "mailto").annotations({
    description: "one_click: Mailroom POSTed to the sender's unsubscribe URL (RFC 8058); mailto: it mailed the sender's unsubscribe address"
  }),
  url: Schema.NullOr(Schema.String).annotations({ description: "The one-click URL, and what it answered (status)" }),
  status: Schema.NullOr(Schema.Number),
  address: Schema.NullOr(Schema.String).annotations({ description: "The mailto address, and the email sent to it (sent_email_id)" }),
  sent_email_id: Schema.NullOr(Schema.String)
}).annotations({ identifier: "UnsubscribeResult" })
export type UnsubscribeResult = typeof UnsubscribeResult.Type
