/**
 * Sending mail, on the wire and on the bus (issue 16; DESIGN.md §4b). Every value that ends up in
 * a header (addresses, names, subject, custom headers, file names) is refused when it holds a line
 * break: header injection is a 400, never a message with headers the caller did not ask for.
 */
import { Schema } from "effect"
import { domainToASCII } from "node:url"
import { isRealWallTime } from "../time-zones.ts"
import { readContentType } from "./attachment-types.ts"
import { rule } from "../schema-rules.ts"

/** The most recipients (to, cc and bcc together) one message may have. */
export const MAX_RECIPIENTS = 50
/**
 * Attachments one message may carry. Each is a MIME part: past about a thousand the parser that
 * stores the sent copy gives up on the message's structure (mailparser's child-node limit), and the
 * stored copy would lose its body and attachments.
 */
export const MAX_ATTACHMENTS = 100

/** No CR or LF: what keeps a value inside its header. */
export const oneLine = <S extends Schema.Schema<string, string>>(schema: S) =>
  schema.pipe(rule((value) => !/[\r\n]/.test(value), { message: () => "must not contain line breaks" }))

/**
 * One line of text a person reads in a header (a subject, a name, a file name): no CR or LF, and no
 * other control character either (a BEL, an escape, a NUL), which mail programs show as garbage or
 * cut the value at. A tab is text.
 */
export const headerText = <S extends Schema.Schema<string, string>>(schema: S) =>
  oneLine(schema).pipe(rule((value) => !/[\u0000-\u0008\u000b-\u001f\u007f]/.test(value), { message: () => "must not contain control characters" }))

const DOMAIN = /^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)+$/i
/** A dot-atom local part (RFC 5322 §3.4.1), ASCII: what every receiving server takes. */
const LOCAL = /^[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*$/

/** A top-level label of digits alone: no domain has one (RFC 3696 §2), and `127.0.0.1` is an IP address, not a domain. */
const NUMERIC_TLD = /\.\d+$/

/** Is `value` an address Mailroom sends to: `local@domain.tld` (a domain name, not an IP address), at most 254 characters? */
export const isAddress = (value: string): boolean => {
  const at = value.lastIndexOf("@")
  if (at <= 0 || value.length > 254) return false
  const local = value.slice(0, at)
  const domain = value.slice(at + 1)
  return local.length <= 64 && LOCAL.test(local) && DOMAIN.test(domain) && !NUMERIC_TLD.test(domain)
}

/**
 * An internationalized domain as DNS and SMTP carry it: `ada@bücher.example` is sent to (and written in
 * the headers as) `ada@xn--bcher-kva.example`, as a custom domain is stored. Other addresses unchanged.
 */
export const withAsciiDomain = (value: string): string => {
  const at = value.lastIndexOf("@")
  const domain = value.slice(at + 1)
  if (at <= 0 || !/[^\x00-\x7f]/.test(domain)) return value
  return `${value.slice(0, at)}@${domainToASCII(domain) || domain}`
}

/** Why an internationalized mailbox name (RFC 6531) is refused, by the API and by submission alike. */
export const INTERNATIONAL_MAILBOX = "must have an ASCII name before the @: internationalized mailbox names (SMTPUTF8) are not sent to"

/** An address but for its mailbox name, which is not ASCII (`jürgen@example.com`). */
export const hasInternationalMailboxName = (value: string): boolean => {
  const ascii = withAsciiDomain(value)
  const at = ascii.lastIndexOf("@")
  return at > 0 && /[^\x00-\x7f]/.test(ascii.slice(0, at)) && isAddress(`x@${ascii.slice(at + 1)}`)
}

/** Why `value` is not an address Mailroom sends to, in the words a caller acts on. */
const addressRefusal = (value: string): string => {
  // "Ada <ada@example.com>", as a mail program writes it: the name has a field of its own.
  if (/<[^<>]+@[^<>]+>\s*$/.test(value)) {
    return "must be an email address such as name@example.com; with a name, send {\"name\": \"Ada\", \"address\": \"ada@example.com\"}"
  }
  // An internationalized mailbox name (RFC 6531) is an address, but one only servers that take SMTPUTF8
  // receive, with nothing to fall back to for the others: Mailroom does not send to them.
  if (hasInternationalMailboxName(value)) return INTERNATIONAL_MAILBOX
  return "must be an email address such as name@example.com"
}

export const Address = Schema.transform(
  oneLine(Schema.String),
  Schema.String.pipe(rule(isAddress, { message: (issue) => addressRefusal(String(issue.actual)) })),
  { strict: true, decode: withAsciiDomain, encode: (address) => address }
).annotations({ description: "An email address, local@domain (an internationalized domain in Unicode or punycode)" })

/** A recipient: an address, or an address with a display name. */
export const AddressInput = Schema.Union(
  Address,
  Schema.Struct({
    name: Schema.optional(headerText(Schema.String).pipe(Schema.maxLength(200))),
    address: Address
  })
).annotations({ identifier: "AddressInput" })
export type AddressInput = typeof AddressInput.Type

const Recipients = Schema.Array(AddressInput)

const BASE64 = /^[A-Za-z0-9+/\s]*={0,2}\s*$/

export const AttachmentInput = Schema.Struct({
  filename: headerText(Schema.String).pipe(Schema.minLength(1), Schema.maxLength(255)),
  content_type: Schema.optional(
    Schema.String.pipe(rule((value) => {
      const read = readContentType(value)
      return typeof read === "string" ? read : true
    }))
  ).annotations({
    description: "The file's media type (RFC 2045), such as application/pdf; a text one may name the charset its bytes are in: " +
      "text/plain; charset=iso-8859-1 (no other parameter). Text without one goes as utf-8 when its bytes are UTF-8 beyond ASCII. " +
      "Left out, the type the filename suggests"
  }),
  content: Schema.String.pipe(rule((value) => BASE64.test(value), { message: () => "must be base64" }))
    .annotations({ description: "The file's bytes, base64" }),
  content_id: Schema.optional(
    oneLine(Schema.String).pipe(
      Schema.pattern(/^(?:[^<>\s]{1,200}|<[^<>\s]{1,200}>)$/, { message: () => "must be 1-200 characters without spaces, or those in <>" }),
      // As a read email shows it (`<logo@x>`), or bare: the same id.
      Schema.transform(Schema.String, { strict: true, decode: (id) => id.replace(/^<(.*)>$/, "$1"), encode: (id) => id })
    )
  ).annotations({ description: "For inline images: referenced from the HTML as cid:<content_id> (given bare or in <>, as a read email shows it)" })
}).annotations({ identifier: "AttachmentInput" })
export type AttachmentInput = typeof AttachmentInput.Type

/** Custom headers: `X-` names only; the rest are Mailroom's to write. */
const CustomHeaders = Schema.Record({ key: Schema.String, value: headerText(Schema.String).pipe(Schema.maxLength(998)) }).pipe(
  rule((headers) => {
    const bad = Object.keys(headers).find((name) => !/^X-[A-Za-z0-9-]{1,100}$/i.test(name))
    if (bad === undefined) return true
    return /^X-[A-Za-z0-9-]+$/i.test(bad)
      ? `must name fields of at most 102 characters: ${JSON.stringify(bad.slice(0, 40))}… has ${bad.length}`
      : `must name X- fields only (letters, digits, -): ${JSON.stringify(bad)} is not allowed`
  })
)

/** One-click unsubscribe (services/outbound/unsubscribes.ts): for any message sent. */
/**
 * An optional field of a send, a reply or a forward: absent, or null as a client that writes every
 * field (an SDK's None, a draft's fields copied) sends it. Drafts take null to remove a field.
 */
const optional = <S extends Schema.Schema.Any>(schema: S) => Schema.optionalWith(schema, { nullable: true })

const ListUnsubscribe = optional(Schema.Boolean).annotations({
  description:
    "Offer one-click unsubscribe (RFC 8058): the message carries a List-Unsubscribe link of its own, which mail apps show as an Unsubscribe button; " +
    "using it suppresses the recipient (reason unsubscribed) and sends email.unsubscribed. For one recipient (to, cc and bcc together): " +
    "send one message per recipient. {{unsubscribe_url}} in text or html becomes the link, for a visible footer"
})

/** The content_id two attachments share, if any: `cid:` would name either. */
const sharedContentId = (attachments: ReadonlyArray<AttachmentInput>): string | undefined => {
  const seen = new Set<string>()
  return attachments.map((a) => a.content_id).find((id) => id !== undefined && (seen.has(id) || (seen.add(id), false)))
}

const Attachments = Schema.Array(AttachmentInput).pipe(
  Schema.maxItems(MAX_ATTACHMENTS, { message: () => `must list at most ${MAX_ATTACHMENTS} attachments` }),
  rule((attachments) => {
    const shared = sharedContentId(attachments)
    return shared === undefined || `must give each content_id to one attachment: ${JSON.stringify(shared)} is on two`
  })
)
// Described in JSON Schema alone: a description annotation would take the place of the length's own words in a refusal.
const Subject = headerText(Schema.String).pipe(Schema.maxLength(998, { jsonSchema: { maxLength: 998, description: "The subject line" } }))

/** What every outgoing message may carry besides its recipients and subject. */
export const BodyFields = {
  text: optional(Schema.String).annotations({ description: "Plain-text body" }),
  html: optional(Schema.String).annotations({ description: "HTML body" }),
  attachments: optional(Attachments.annotations({
    description: "Files to attach: {filename, content (base64), content_type, content_id (an inline image's, for cid: in html)}"
  })),
  headers: optional(CustomHeaders).annotations({ description: "Custom headers, X-* names only" }),
  list_unsubscribe: ListUnsubscribe
}

const replyTo = "Where answers should go instead of the mailbox: an address or {name, address}"

export const SendInput = Schema.Struct({
  to: optional(Recipients).annotations({ description: "Recipients: addresses or {name, address}" }),
  cc: optional(Recipients).annotations({ description: "Copied recipients, shown to all" }),
  bcc: optional(Recipients).annotations({ description: "Recipients not shown in the message's headers" }),
  subject: optional(Subject),
  reply_to: optional(AddressInput).annotations({ description: replyTo }),
  ...BodyFields
}).annotations({ identifier: "SendInput", parseOptions: { errors: "all", onExcessProperty: "error" } })
export type SendInput = typeof SendInput.Type

/** The most messages one batch sends. */
export const MAX_BATCH = 100

export const SendBatchInput = Schema.Struct({
  messages: Schema.Array(SendInput).pipe(
    Schema.minItems(1, { message: () => "must list at least one message" }),
    Schema.maxItems(MAX_BATCH, { message: () => `must list at most ${MAX_BATCH} messages` })
  ).annotations({ description: `The messages, each as a send's body: at most ${MAX_BATCH}` })
}).annotations({ identifier: "SendBatchInput", parseOptions: { errors: "all", onExcessProperty: "error" } })
export type SendBatchInput = typeof SendBatchInput.Type

/** A reply's body; its recipients come from the original (cc and bcc add more). */
export const ReplyInput = Schema.Struct({
  cc: optional(Recipients).annotations({ description: "More recipients, besides those the reply goes to" }),
  bcc: optional(Recipients).annotations({ description: "More recipients, not shown in the message's headers" }),
  ...BodyFields
}).annotations({ identifier: "ReplyInput", parseOptions: { errors: "all", onExcessProperty: "error" } })
export type ReplyInput = typeof ReplyInput.Type

export const ForwardInput = Schema.Struct({
  to: Recipients.annotations({ description: "Whom to forward it to: addresses or {name, address}" }),
  cc: optional(Recipients).annotations({ description: "Copied recipients, shown to all" }),
  bcc: optional(Recipients).annotations({ description: "Recipients not shown in the message's headers" }),
  ...BodyFields
}).annotations({ identifier: "ForwardInput", parseOptions: { errors: "all", onExcessProperty: "error" } })
export type ForwardInput = typeof ForwardInput.Type

/** Whether `value` is an ISO 8601 time with a zone whose fields name a real moment (no 2026-02-30, no 24:00). */
export const isRealTime = (value: string): boolean => {
  const m = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?(?:Z|[+-](\d{2}):(\d{2}))$/.exec(value)
  if (m === null) return false
  const [year, month, day, hour, minute, second = 0, offsetHours = 0, offsetMinutes = 0] = m.slice(1).map((f) => f === undefined ? undefined : Number(f))
  return isRealWallTime({ year: year!, month: month!, day: day!, hour: hour!, minute: minute!, second }) && offsetHours <= 23 && offsetMinutes <= 59
}

/** An ISO 8601 time with its offset, as `send_at` is written. */
export const Instant = Schema.String.pipe(
  rule((value) => isRealTime(value), {
    message: () => "must be an ISO 8601 time with a zone, such as 2026-12-01T09:00:00Z"
  })
)

/** A draft's fields: a send request, possibly incomplete until it is sent, and what it answers or forwards. */
const DraftFields = {
  to: Schema.optional(Recipients),
  cc: Schema.optional(Recipients),
  bcc: Schema.optional(Recipients),
  subject: Schema.optional(Subject).annotations({
    description: "For a reply or forward, the original's subject with Re:/Fwd: when left out"
  }),
  reply_to: Schema.optional(AddressInput),
  ...BodyFields
}

/** On an update a content field set to null is removed (a reply_to, the HTML part, the cc list); on a create it is absence. */
const cleared = "; null on an update removes it"

export const DraftInput = Schema.Struct({
  to: Schema.optional(Schema.NullOr(Recipients)).annotations({ description: `Recipients${cleared}` }),
  cc: Schema.optional(Schema.NullOr(Recipients)).annotations({ description: `Copied recipients${cleared}` }),
  bcc: Schema.optional(Schema.NullOr(Recipients)).annotations({ description: `Recipients not shown in the message's headers${cleared}` }),
  subject: Schema.optional(Schema.NullOr(Subject)).annotations({
    description: `For a reply or forward, the original's subject with Re:/Fwd: when left out${cleared}`
  }),
  reply_to: Schema.optional(Schema.NullOr(AddressInput)).annotations({ description: `Where replies should go${cleared}` }),
  text: Schema.optional(Schema.NullOr(Schema.String)).annotations({ description: `Plain-text body${cleared}` }),
  html: Schema.optional(Schema.NullOr(Schema.String)).annotations({ description: `HTML body${cleared}` }),
  attachments: Schema.optional(Schema.NullOr(Attachments)).annotations({ description: `Files to attach${cleared}` }),
  headers: Schema.optional(Schema.NullOr(CustomHeaders)).annotations({ description: `Custom headers, X-* names only${cleared}` }),
  list_unsubscribe: Schema.optional(Schema.NullOr(Schema.Boolean)).annotations({ description: `Offer one-click unsubscribe (as on a send)${cleared}` }),
  in_reply_to: Schema.optional(Schema.NullOr(Schema.String)).annotations({
    description:
      "The id of an email of this mailbox the draft replies to (its to, cc and subject are filled from it where the draft gives none); null on an update: a reply no more"
  }),
  reply_all: Schema.optional(Schema.Boolean).annotations({ description: "With in_reply_to: reply to everyone on the email (they are filled into cc)" }),
  forward_of: Schema.optional(Schema.NullOr(Schema.String)).annotations({
    description: "The id of an email of this mailbox the draft forwards (its subject is filled from it where the draft gives none); null on an update: a forward no more"
  }),
  send_at: Schema.optional(Schema.NullOr(Instant)).annotations({
    description: "Send automatically at this time; null or absent: only when sent explicitly"
  })
}).annotations({ identifier: "DraftInput", parseOptions: { errors: "all", onExcessProperty: "error" } })
export type DraftInput = typeof DraftInput.Type

/**
 * A precondition on a draft: its `updated_at` as the client last read it. A person approving or
 * editing what they were shown sends it, so that a draft changed meanwhile (by its agent, say) is
 * refused, 409 CONFLICT with the draft's `updated_at` now, rather than sent or edited unseen.
 */
const IfUpdatedAt = Schema.optional(Instant).annotations({
  description: "Only if the draft's updated_at is still this (as last read): otherwise 409 CONFLICT, details.updated_at its value now, and nothing is done. Left out: no check"
})

/** `PATCH …/drafts/{id}`: a draft's fields, and the version they were decided on. */
export const DraftUpdate = Schema.Struct({ ...DraftInput.fields, if_updated_at: IfUpdatedAt })
  .annotations({ identifier: "DraftUpdate", parseOptions: { errors: "all", onExcessProperty: "error" } })
export type DraftUpdate = typeof DraftUpdate.Type

/** `POST …/drafts/{id}/send`'s body, which may be left out: the version of the draft approved. */
export const DraftSendInput = Schema.Struct({ if_updated_at: IfUpdatedAt })
  .annotations({ identifier: "DraftSendInput", parseOptions: { errors: "all", onExcessProperty: "error" } })
export type DraftSendInput = typeof DraftSendInput.Type

/** What a draft holds of a send request (stored as JSON). */
export const DraftContent = Schema.Struct(DraftFields)
export type DraftContent = typeof DraftContent.Type

/** A draft awaits approval (`draft`), is going out (`sending`) or went (`sent`). */
export const DraftStatus = Schema.Literal("draft", "sending", "sent")
export type DraftStatus = typeof DraftStatus.Type

/**
 * What a draft's 409 CONFLICT says in `details` (services/outbound/drafts.ts), on its edit and its send:
 * the draft, its status when it is being sent or sent, and, when it changed since the `if_updated_at`
 * given, its `updated_at` now (to read it again by) and the value given.
 */
export const DraftConflictDetails = {
  draft_id: Schema.String.annotations({ description: "The draft" }),
  status: Schema.optional(DraftStatus.annotations({ description: "Its status: sending or sent; draft when it changed since if_updated_at" })),
  updated_at: Schema.optional(Schema.String.annotations({ description: "When it changed since if_updated_at: its updated_at now, the version to read again and decide on" })),
  if_updated_at: Schema.optional(Schema.String.annotations({ description: "When it changed since if_updated_at: the if_updated_at given" }))
}

/** A draft's content field as answered: what it holds, or null when it holds none (every field is always there). */
const held = <S extends Schema.Schema.Any>(schema: S, description: string) => Schema.NullOr(schema).annotations({ description })

export const Draft = Schema.Struct({
  draft_id: Schema.String,
  mailbox_id: Schema.String,
  status: DraftStatus,
  to: held(Recipients, "Its recipients; null: none yet (a reply's then go to the original's sender)"),
  cc: held(Recipients, "Copied recipients; null: none"),
  bcc: held(Recipients, "Recipients not shown in the message's headers; null: none"),
  subject: held(Subject, "Null: none yet (a reply's or forward's then comes from the original)"),
  reply_to: held(AddressInput, "Where replies should go; null: to the mailbox"),
  text: held(Schema.String, "Plain-text body; null: none"),
  html: held(Schema.String, "HTML body; null: none"),
  headers: held(CustomHeaders, "Custom headers; null: none"),
  list_unsubscribe: held(Schema.Boolean, "Whether the message offers one-click unsubscribe; null: not asked (it does not)"),
  attachments: Schema.Array(Schema.Struct({ filename: Schema.String, content_type: Schema.NullOr(Schema.String), size: Schema.Number })),
  in_reply_to: Schema.NullOr(Schema.String),
  reply_all: Schema.Boolean,
  forward_of: Schema.NullOr(Schema.String),
  send_at: Schema.NullOr(Schema.String),
  email_id: Schema.NullOr(Schema.String).annotations({ description: "The email the draft became, once sent" }),
  last_error: Schema.NullOr(Schema.String).annotations({ description: "Why its scheduled send was refused (it is unscheduled then)" }),
  created_at: Schema.String,
  updated_at: Schema.String
}).annotations({ identifier: "Draft" })
export type Draft = typeof Draft.Type

export const SendAccepted = Schema.Struct({
  email_id: Schema.String,
  message_id: Schema.String,
  thread_id: Schema.String,
  status: Schema.Literal("queued")
}).annotations({ identifier: "SendAccepted" })
export type SendAccepted = typeof SendAccepted.Type

/**
 * What the API puts on the bus for the mta (`mail.outbound.<email_id>`): one message per recipient
 * domain of a sent email, a reference to rows in the database, never the message itself.
 */
export const OutboundJob = Schema.Struct({
  email_id: Schema.String,
  domain: Schema.String
})
export type OutboundJob = typeof OutboundJob.Type

/** The delivery events, and what each one's `data` holds. */
export const deliveryEventKinds = ["email.sent", "email.delivery_delayed", "email.bounced", "email.failed"] as const
export type DeliveryEventKind = (typeof deliveryEventKinds)[number]

export const DeliveryEventData = Schema.Struct({
  email_id: Schema.String,
  message_id: Schema.String,
  mailbox_id: Schema.String,
  thread_id: Schema.String,
  recipient: Schema.String,
  status: Schema.Literal("sent", "deferred", "bounced", "failed", "suppressed").annotations({
    description: "suppressed (with email.failed): not sent, the address having joined the account's suppression list while the message waited"
  }),
  attempts: Schema.Number,
  smtp_response: Schema.NullOr(Schema.String).annotations({ description: "The receiving server's answer, or why it was not reached" }),
  next_attempt_at: Schema.NullOr(Schema.String)
}).annotations({ identifier: "DeliveryEventData" })
export type DeliveryEventData = typeof DeliveryEventData.Type

/**
 * Why the account no longer sends to an address: it bounced for good, its owner unsubscribed (the
 * link of a message sent with `list_unsubscribe`), its owner reported the mail as spam, or the
 * account suppressed it.
 */
export const SuppressionReason = Schema.Literal("bounced", "unsubscribed", "complained", "manual").annotations({
  description:
    "bounced: a receiving server refused it for good; unsubscribed: its owner used a sent message's unsubscribe link; complained: its owner reported a sent message as spam; manual: the account added it"
})
export type SuppressionReason = typeof SuppressionReason.Type

/** `email.unsubscribed`: a recipient used the unsubscribe link of a message sent with `list_unsubscribe`. */
export const UnsubscribedEventData = Schema.Struct({
  email_id: Schema.String.annotations({ description: "The sent email whose link was used (it may have been deleted since)" }),
  message_id: Schema.String,
  mailbox_id: Schema.String,
  recipient: Schema.String.annotations({ description: "The address now suppressed, reason unsubscribed" })
}).annotations({ identifier: "UnsubscribedEventData" })
export type UnsubscribedEventData = typeof UnsubscribedEventData.Type

/** `email.complained`: a recipient reported a sent email as spam (a feedback report, RFC 5965, came back). */
export const ComplaintEventData = Schema.Struct({
  email_id: Schema.String,
  message_id: Schema.String,
  mailbox_id: Schema.String,
  thread_id: Schema.String,
  recipient: Schema.String.annotations({ description: "The address now suppressed, reason complained" }),
  feedback_type: Schema.String.annotations({ description: "The report's Feedback-Type: abuse (spam) or fraud" }),
  reported_by: Schema.NullOr(Schema.String).annotations({ description: "The provider that reported it (its Reporting-MTA), when named" })
}).annotations({ identifier: "ComplaintEventData" })
export type ComplaintEventData = typeof ComplaintEventData.Type

/** An address the account no longer sends to (GET /suppressions). */
export const Suppression = Schema.Struct({
  address: Schema.String,
  reason: SuppressionReason,
  last_response: Schema.NullOr(Schema.String).annotations({
    description: "What suppressed it: the receiving server's answer, the unsubscribe or the complaint; null for one added by the account"
  }),
  email_id: Schema.NullOr(Schema.String).annotations({
    description: "The sent email it came from (the one that bounced, was unsubscribed from or reported); null for one added by the account"
  }),
  created_at: Schema.String
}).annotations({ identifier: "Suppression" })
export type Suppression = typeof Suppression.Type

/** POST /suppressions: an address the account stops sending to (a person asked it to, say). */
export const SuppressionInput = Schema.Struct({
  address: Address.annotations({ description: "The address no longer to send to (any case; kept lower-cased)" })
}).annotations({ identifier: "SuppressionInput", parseOptions: { errors: "all", onExcessProperty: "error" } })
export type SuppressionInput = typeof SuppressionInput.Type

/** What the drafts and suppressions lists sort by (`sort=<field>:<asc|desc>`; newest first by default). */
export const draftSortFields = ["created_at", "updated_at", "send_at"] as const
export type DraftSortField = (typeof draftSortFields)[number]
export const suppressionSortFields = ["created_at", "address"] as const
export type SuppressionSortField = (typeof suppressionSortFields)[number]

// A mailbox's automatic reply (auto-replies.ts; which mail it answers: auto-reply-rules.ts).

/** RFC 3834 §2 suggests a week between two answers to one sender. */
export const DEFAULT_INTERVAL_DAYS = 7

export const AutoReplyInput = Schema.Struct({
  subject: Schema.optional(Schema.NullOr(headerText(Schema.String).pipe(Schema.minLength(1), Schema.maxLength(998)))).annotations({
    description: "The answer's subject; null or absent: \"Re: \" and the subject of the email answered"
  }),
  text: Schema.String.pipe(
    Schema.minLength(1, { message: () => "must not be empty" }),
    Schema.maxLength(100_000, { message: () => "must be at most 100,000 characters" })
  ).annotations({ description: "The answer, as plain text" }),
  html: Schema.optional(Schema.NullOr(Schema.String.pipe(Schema.maxLength(500_000)))).annotations({
    description: "The answer as HTML, beside the text"
  }),
  interval_days: Schema.optional(Schema.Int.pipe(Schema.between(1, 30))).annotations({
    description: `Days before the same sender is answered again: 1-30, default ${DEFAULT_INTERVAL_DAYS}`
  }),
  starts_at: Schema.optional(Schema.NullOr(Instant)).annotations({ description: "Answer mail received from this time; null: from now" }),
  ends_at: Schema.optional(Schema.NullOr(Instant)).annotations({ description: "Answer mail received until this time; null: until turned off" })
}).annotations({ identifier: "AutoReplyInput", parseOptions: { errors: "all", onExcessProperty: "error" } })
export type AutoReplyInput = typeof AutoReplyInput.Type

export const AutoReply = Schema.Struct({
  mailbox_id: Schema.String,
  subject: Schema.NullOr(Schema.String),
  text: Schema.String,
  html: Schema.NullOr(Schema.String),
  interval_days: Schema.Number,
  starts_at: Schema.NullOr(Schema.String),
  ends_at: Schema.NullOr(Schema.String),
  active: Schema.Boolean.annotations({ description: "Whether mail received now is answered (within starts_at and ends_at)" }),
  created_at: Schema.String,
  updated_at: Schema.String
}).annotations({ identifier: "AutoReply" })
export type AutoReply = typeof AutoReply.Type

export const RemovedAutoReply = Schema.Struct({ mailbox_id: Schema.String, deleted: Schema.Literal(true) }).annotations({
  identifier: "RemovedAutoReply"
})
