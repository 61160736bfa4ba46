/**
 * Stored emails and how they read on the wire: one row shape, one mapping per wire shape.
 */
import type { Authentication } from "./authentication.ts"
import { type Extracted, extract } from "./extract.ts"
import { domainOf } from "../mailboxes/rules.ts"
import { addressList, displayName, inUnicode } from "./parse.ts"
import type { Spam } from "./spam.ts"
import type { AttachmentMeta, Delivery, Direction, Email, EmailFields, ForwardedCopy, EmailReceived, EmailSummary, Headers } from "./schemas.ts"

/** The columns every email read selects (see `emailColumns`). */
export interface EmailRow {
  readonly id: string
  readonly direction: Direction
  readonly mailboxId: string
  readonly userId: string
  readonly messageId: string
  readonly threadId: string
  readonly subject: string
  readonly fromAddress: string
  /** '' when the From has no name; null for an email stored before names were kept: then `fromHeader` holds its From. */
  readonly fromName: string | null
  readonly fromHeader: HeaderValue | null
  readonly toAddresses: ReadonlyArray<string>
  /** Null for an email stored before they were kept: then `ccHeader` / `replyToHeader` hold its headers. */
  readonly ccAddresses: ReadonlyArray<string> | null
  readonly replyToAddresses: ReadonlyArray<string> | null
  readonly ccHeader: HeaderValue | null
  readonly replyToHeader: HeaderValue | null
  readonly sentAt: Date
  readonly receivedAt: Date
  readonly rcptTo: string
  readonly hasAttachments: boolean
  readonly size: string | number
  readonly snippet: string
  readonly labels: ReadonlyArray<string>
  /** jsonb: the driver gives it parsed. */
  readonly authentication: Authentication | null
  readonly authenticationResults: string | null
  readonly spam: Spam | null
  readonly createdAt: Date
}

/** A stored header's decoded value; a header the message carried more than once is an array. */
export type HeaderValue = string | ReadonlyArray<string>

export interface EmailBodyRow extends EmailRow {
  readonly headers: Headers
  readonly textBody: string
  readonly htmlBody: string | null
  /** JSON text (see `extractedColumn`); null for sent mail and mail stored before extraction existed. */
  readonly extracted: string | null
}

export interface AttachmentRow {
  readonly id: string
  readonly filename: string | null
  readonly contentType: string
  readonly size: string | number
  readonly checksum: string
  readonly contentId: string | null
}

/** The From's name as `fromNameOf` reads it: the column, and for older mail (NULL) its stored From header. */
export const fromNameColumns = "e.from_name, CASE WHEN e.from_name IS NULL THEN e.headers->'from' END AS from_header"

/** The Cc as `ccOf` reads it: the column, and for older mail (NULL) its stored Cc header. */
export const ccColumns = "e.cc_addresses, CASE WHEN e.cc_addresses IS NULL THEN e.headers->'cc' END AS cc_header"

/** Columns of `EmailRow`, for `SELECT ${emailColumns} FROM emails e`. */
/** How much of an email's text a list shows (`snippet`): its first 200 characters, white space around them trimmed. */
export const snippetColumn = "left(btrim(e.text_body, E' \\t\\r\\n'), 200) AS snippet"

export const emailColumnList = [
  "e.id",
  "e.direction",
  "e.mailbox_id",
  "e.user_id",
  "e.message_id",
  "e.thread_id",
  "e.subject",
  "e.from_address",
  fromNameColumns,
  "e.to_addresses",
  ccColumns,
  "e.reply_to_addresses",
  // Read only for an email stored before the column existed (a CASE leaves the headers unread).
  "CASE WHEN e.reply_to_addresses IS NULL THEN e.headers->'reply-to' END AS reply_to_header",
  "e.sent_at",
  "e.received_at",
  "e.rcpt_to",
  "e.has_attachments",
  "e.size",
  snippetColumn,
  "e.labels",
  "e.authentication",
  "e.authentication_results",
  "e.spam",
  "e.created_at"
].join(", ")

/**
 * The extracted content as JSON text: read as jsonb, the driver would turn its snake_case keys
 * (`reply_text`) into camelCase as it does column names.
 */
export const extractedColumn = "e.extracted::text AS extracted"

/** Columns of `EmailBodyRow`, for `SELECT ${emailBodyColumns} FROM emails e`. */
export const emailBodyColumnList = `${emailColumnList}, e.headers, e.text_body, e.html_body, ${extractedColumn}`

/**
 * The addresses of a stored address header, for an email stored before its Cc and Reply-To were kept,
 * in the forms parsing gives the others (services/mail/parse.ts): groups flattened, and a punycode
 * domain in Unicode, as mailparser writes `to`. The stored value is decoded, so a display name may
 * hold a comma the sender had encoded; what that splits off holds no `@` and is dropped.
 */
const headerAddresses = (value: HeaderValue | null): Array<string> =>
  value === null ? [] : (typeof value === "string" ? [value] : value)
    .flatMap((line) => addressList(line))
    .filter((address) => address.includes("@"))
    .map(inUnicode)

/** The display name of a stored From header (decoded already), for an email stored before names were kept. */
const headerName = (value: HeaderValue | null): string =>
  value === null ? "" : displayName(typeof value === "string" ? value : value[0])

/** The From's display name, null when it has none: the column, or for older mail its stored From header. */
export const fromNameOf = (row: Pick<EmailRow, "fromName" | "fromHeader">): string | null =>
  (row.fromName ?? headerName(row.fromHeader)) || null

/** The Cc's addresses: the column, or for older mail its stored Cc header. */
export const ccOf = (row: Pick<EmailRow, "ccAddresses" | "ccHeader">): Array<string> =>
  row.ccAddresses !== null ? [...row.ccAddresses] : headerAddresses(row.ccHeader)

export const toFields = (row: EmailRow): EmailFields => ({
  email_id: row.id,
  direction: row.direction,
  message_id: row.messageId,
  subject: row.subject,
  from: row.fromAddress,
  from_name: fromNameOf(row),
  to: [...row.toAddresses],
  cc: ccOf(row),
  reply_to: row.replyToAddresses !== null ? [...row.replyToAddresses] : headerAddresses(row.replyToHeader),
  date: row.sentAt.toISOString(),
  mailbox_id: row.mailboxId,
  domain: domainOf(row.rcptTo),
  has_attachments: row.hasAttachments,
  thread_id: row.threadId,
  labels: [...row.labels],
  authentication: authenticationOf(row.authentication),
  authentication_results: row.authenticationResults ?? null,
  spam: row.spam ?? null
})

/**
 * The stored verdicts as the API shows them: a verdict stored before the ARC domain was kept (or by a
 * node not yet upgraded) has none, which reads as null. Filled in on reading, not by rewriting every
 * stored email at a migration.
 */
const authenticationOf = (stored: Authentication | null | undefined): Authentication | null =>
  stored === null || stored === undefined ? null : { ...stored, arc: { ...stored.arc, domain: stored.arc.domain ?? null } }

/**
 * The email's extracted content: as stored; for inbound mail stored before extraction existed,
 * read from its stored bodies now (not written back: reads stay reads).
 */
export const extractedOf = (row: EmailBodyRow): Extracted | null =>
  row.extracted !== null
    ? JSON.parse(row.extracted) as Extracted
    : row.direction === "inbound"
    ? extract({ subject: row.subject, text: row.textBody, html: row.htmlBody, headers: row.headers })
    : null

/** The `email.received` payload: the email's fields and what was extracted from it. */
export const toReceived = (row: EmailRow, extracted: Extracted | null): EmailReceived => ({ ...toFields(row), extracted })

export const toSummary = (row: EmailRow): EmailSummary => ({
  ...toFields(row),
  received_at: row.receivedAt.toISOString(),
  size: Number(row.size),
  snippet: row.snippet
})

export const toAttachment = (row: AttachmentRow): AttachmentMeta => ({
  attachment_id: row.id,
  filename: row.filename,
  content_type: row.contentType,
  size: Number(row.size),
  checksum: row.checksum,
  content_id: row.contentId
})

export interface DeliveryRow {
  readonly recipient: string
  readonly status: Delivery["status"]
  readonly attempts: number
  readonly lastResponse: string | null
  readonly nextAttemptAt: Date | null
  readonly attempting: boolean
  readonly complainedAt: Date | null
  readonly updatedAt: Date
}

export const toDelivery = (row: DeliveryRow): Delivery => ({
  recipient: row.recipient,
  status: row.status,
  attempts: row.attempts,
  last_response: row.lastResponse,
  next_attempt_at: row.nextAttemptAt?.toISOString() ?? null,
  attempting: row.attempting,
  complained_at: row.complainedAt?.toISOString() ?? null,
  updated_at: row.updatedAt.toISOString()
})

/** A forwarded copy as the database writes it in JSON (times as text, in its own format). */
export interface ForwardedRow {
  readonly address: string
  readonly status: ForwardedCopy["status"]
  readonly attempts: number
  readonly lastResponse: string | null
  readonly nextAttemptAt: string | null
  readonly attempting: boolean
  readonly updatedAt: string
}

export const toForwardedCopy = (row: ForwardedRow): ForwardedCopy => ({
  address: row.address,
  status: row.status,
  attempts: row.attempts,
  last_response: row.lastResponse,
  next_attempt_at: row.nextAttemptAt === null ? null : new Date(row.nextAttemptAt).toISOString(),
  attempting: row.attempting,
  updated_at: new Date(row.updatedAt).toISOString()
})

/** An email as `GET /emails/{id}` shows it; a sent one with its delivery per recipient, a received one with its forwarded copies. */
export const toEmail = (
  row: EmailBodyRow,
  attachments: ReadonlyArray<AttachmentRow>,
  deliveries: ReadonlyArray<DeliveryRow> = [],
  forwarded: ReadonlyArray<ForwardedRow> = []
): Email => ({
  ...toSummary(row),
  text: row.textBody,
  html: row.htmlBody,
  headers: row.headers,
  attachments: attachments.map(toAttachment),
  extracted: extractedOf(row),
  ...(row.direction === "outbound"
    ? { delivery: deliveries.map(toDelivery) }
    : { forwarded: forwarded.map(toForwardedCopy), delivered_to: row.rcptTo })
})
