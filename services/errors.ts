/**
 * The failures a user can meet: one `Schema.TaggedError` per SPEC error code. Each carries what the
 * SPEC error envelope needs (the HTTP status, its stable `code`, a human `message`, optional
 * `details`) and a description of when it happens, read by the contract (OpenAPI). Domain services
 * fail with these; the HTTP edge (src/http/errors.ts) turns them into
 * `{ success: false, error: { code, message, details } }`, with no other knowledge of them.
 *
 * `failure(tag, wire)` is the one shape they share: `status` and `code` are fields filled in by the
 * constructor (so an instance says on its own how it goes on the wire), and `wire` rides on the
 * class as an annotation (so the contract can describe the class without an instance).
 */
import { Option, Schema, SchemaAST } from "effect"
import { rule } from "./schema-rules.ts"

export const Details = Schema.Record({ key: Schema.String, value: Schema.Unknown })
export type Details = typeof Details.Type

/**
 * An error's `details`: the keys its description names, typed (so the contract, and the clients
 * made from it, type them), and any other key as before, so that no detail an answer carries is
 * refused. A key is required only where every construction of the error sets it; the types must
 * be what those constructions put, since the envelope encodes every answer with them.
 */
const detailsWith = <Known extends Schema.Struct.Fields>(known: Known) => Schema.Struct(known, Details)

/** How an error goes on the wire: SPEC's HTTP status and `error.code`, and when it is answered. */
export interface Wire<Status extends number = number, Code extends string = string> {
  readonly status: Status
  readonly code: Code
  readonly description: string
}

const WireAnnotationId: unique symbol = Symbol.for("mailroom/errors/Wire")

/** A field that always holds `value`, filled in by the constructor. */
const always = <const L extends string | number>(value: L) =>
  Schema.Literal(value).pipe(Schema.propertySignature, Schema.withConstructorDefault(() => value))

/** The tags of every error declared with `failure`: what `isApiError` recognises. */
const tags = new Set<string>()

/**
 * The fields and annotations of an error going on the wire as `wire`, plus `extra` fields the edge
 * needs besides (`retryAfter`). Spread into `Schema.TaggedError<Self>()(...failureWith(...))`.
 */
const failureWith = <
  const Tag extends string,
  const Status extends number,
  const Code extends string,
  Extra extends Schema.Struct.Fields,
  Known extends Schema.Struct.Fields = {}
>(tag: Tag, wire: Wire<Status, Code> & { readonly details?: Known }, extra: Extra) => {
  const { details: named, ...said } = wire
  // No details named: `Known` is then its default, no keys.
  return failureDetailed(tag, { ...said, details: detailsWith(named ?? ({} as Known)) }, extra)
}

/**
 * `failureWith`, its details' schema given whole: for the errors whose details are not some keys
 * named plus any other, but one shape throughout (VALIDATION_ERROR's and BAD_REQUEST's field messages).
 */
const failureDetailed = <
  const Tag extends string,
  const Status extends number,
  const Code extends string,
  Extra extends Schema.Struct.Fields,
  Shape extends Schema.Schema.All
>(tag: Tag, wire: Wire<Status, Code> & { readonly details: Shape }, extra: Extra) => {
  tags.add(tag)
  const { details, ...said } = wire
  return [
    tag,
    { status: always(wire.status), code: always(wire.code), message: Schema.String, details: Schema.optional(details), ...extra },
    { description: wire.description, [WireAnnotationId]: said }
  ] as const
}

/** `failureWith` and no extra fields: what most errors are. */
const failure = <const Tag extends string, const Status extends number, const Code extends string, Known extends Schema.Struct.Fields = {}>(
  tag: Tag,
  wire: Wire<Status, Code> & { readonly details?: Known }
) => failureWith(tag, wire, {})

/** The wire of an error class, as `failure` recorded it. */
export const wireOf = <E extends { readonly status: number; readonly code: string }>(
  cls: Schema.Schema<E, any>
): Wire<E["status"], E["code"]> =>
  Option.getOrThrowWith(
    SchemaAST.getAnnotation<Wire<E["status"], E["code"]>>(Schema.typeSchema(cls).ast, WireAnnotationId),
    () => new Error(`${String(cls.ast)} is not an API error (declare it with failure())`)
  )

// ---------------------------------------------------------------------------------------------
// General codes (SPEC "Errors")

/** A field's name (dotted into a body: `messages.0.to`) → a string about it: what is wrong with it. */
export const FieldMessages = Schema.Record({ key: Schema.String, value: Schema.String })

/**
 * The `details` of VALIDATION_ERROR and BAD_REQUEST: field → message, or (SPEC "Errors": the bodies the
 * dashboard has a JSON schema for, and a malformed mailbox body on /v1/api) that map under
 * `field_errors`. Every other value is a string: no construction puts a number or a list.
 *
 * TypeScript cannot say "any key a string, but field_errors a map" (an index signature covers every
 * key), so the type lets any key be either and the check refuses a map elsewhere; the contract says
 * it exactly (field_errors a map, additionalProperties strings), and so does the generated fetch client.
 */
export const FieldDetails = Schema.Struct(
  { field_errors: Schema.optional(FieldMessages) },
  Schema.Record({ key: Schema.String, value: Schema.Union(Schema.String, FieldMessages) })
).pipe(
  rule((details) =>
    Object.entries(details).every(([field, message]) => field === "field_errors" || typeof message === "string") ||
    "each field's message is a string (only field_errors holds a map of them)"
  ),
  Schema.annotations({
    jsonSchema: {
      type: "object",
      properties: { field_errors: { type: "object", additionalProperties: { type: "string" } } },
      additionalProperties: { type: "string" }
    }
  })
)
export type FieldDetails = typeof FieldDetails.Type

/** 400 BAD_REQUEST: malformed input (invalid JSON, missing body, bad shape). */
export class BadRequest extends Schema.TaggedError<BadRequest>()(
  ...failureDetailed("BadRequest", {
    status: 400,
    code: "BAD_REQUEST",
    description: "BAD_REQUEST: invalid JSON, a missing or malformed body, or a local part missing from email_address; " +
      "details, when there are any, are strings: email_address (the address sent), or a malformed mailbox body's field messages in details.field_errors",
    details: FieldDetails
  }, {})
) {}

/** 400 VALIDATION_ERROR: parameters failed validation; `details` maps a field name to a message. */
export class ValidationError extends Schema.TaggedError<ValidationError>()(
  ...failureDetailed("ValidationError", {
    status: 400,
    code: "VALIDATION_ERROR",
    description: "VALIDATION_ERROR: invalid parameters; details maps each field to its message, a string (on the dashboard's /api routes, the mailbox and domain bodies put that map in details.field_errors)",
    details: FieldDetails
  }, {})
) {
  static field(field: string, message: string) {
    return new ValidationError({ message: `${field}: ${message}`, details: { [field]: message } })
  }
}

/** 401 UNAUTHORIZED: missing or invalid credential, bad login, bad refresh token. */
export class Unauthorized extends Schema.TaggedError<Unauthorized>()(
  ...failure("Unauthorized", {
    status: 401,
    code: "UNAUTHORIZED",
    description: "UNAUTHORIZED: a missing or invalid credential, a bad login or a bad refresh token"
  })
) {
  static of(message: string) {
    return new Unauthorized({ message })
  }
}

/** 403 FORBIDDEN: no permission for the operation. */
export class Forbidden extends Schema.TaggedError<Forbidden>()(
  ...failure("Forbidden", {
    status: 403,
    code: "FORBIDDEN",
    description: "FORBIDDEN: no permission for the operation (a cookie-authenticated write from another origin)"
  })
) {}

/** 404 NOT_FOUND: missing, or owned by someone else (the two are never told apart). */
export class NotFound extends Schema.TaggedError<NotFound>()(
  ...failure("NotFound", {
    status: 404,
    code: "NOT_FOUND",
    description: "NOT_FOUND: the resource does not exist or is not the caller's"
  })
) {}

/** 409 CONFLICT: already exists, or a state conflict. */
export class Conflict extends Schema.TaggedError<Conflict>()(
  ...failure("Conflict", {
    status: 409,
    code: "CONFLICT",
    description: "CONFLICT: the resource already exists, or the state forbids the change"
  })
) {}

/** 413 PAYLOAD_TOO_LARGE: the request body is larger than we accept. */
export class PayloadTooLarge extends Schema.TaggedError<PayloadTooLarge>()(
  ...failure("PayloadTooLarge", {
    status: 413,
    code: "PAYLOAD_TOO_LARGE",
    description: "PAYLOAD_TOO_LARGE: a body over 1 MiB (details.max_bytes), or a message or draft over the plan's size (details: size, limit, and index, its place in a batch)",
    details: { max_bytes: Schema.optional(Schema.Number), size: Schema.optional(Schema.Number), limit: Schema.optional(Schema.Number), index: Schema.optional(Schema.Number) }
  })
) {}

/** 415 UNSUPPORTED_MEDIA_TYPE: a request body in a media type the route does not read (every API body is JSON). */
export class UnsupportedMediaType extends Schema.TaggedError<UnsupportedMediaType>()(
  ...failure("UnsupportedMediaType", {
    status: 415,
    code: "UNSUPPORTED_MEDIA_TYPE",
    description: "UNSUPPORTED_MEDIA_TYPE: a request body that is not JSON; details.accepted and details.charset name what to send, details.received what was sent (null: no Content-Type)",
    details: { accepted: Schema.String, charset: Schema.String, received: Schema.NullOr(Schema.String) }
  })
) {}

/** 429 RATE_LIMIT_EXCEEDED: a rate limit was hit; `retryAfter` seconds go into the `Retry-After` header. */
export class RateLimited extends Schema.TaggedError<RateLimited>()(
  ...failureWith("RateLimited", {
    status: 429,
    code: "RATE_LIMIT_EXCEEDED",
    description: "RATE_LIMIT_EXCEEDED: a rate limit was hit; details: limit, window, retry_after; the Retry-After header carries the seconds",
    details: { limit: Schema.Number, window: Schema.String, retry_after: Schema.Number }
  }, { retryAfter: Schema.Number, resetAt: Schema.optional(Schema.Number) })
) {
  /** `resetAt`: when the refusing window ends (Unix seconds), for the 429's X-RateLimit-Reset. */
  static of(input: {
    readonly limit: number
    readonly window: string
    readonly retryAfter: number
    readonly resetAt?: number | undefined
    readonly message?: string
  }) {
    return new RateLimited({
      message: input.message ?? `Rate limit of ${input.limit} requests per ${input.window} exceeded`,
      details: { limit: input.limit, window: input.window, retry_after: input.retryAfter },
      retryAfter: input.retryAfter,
      resetAt: input.resetAt
    })
  }
}

/** 500 INTERNAL_ERROR: something we did not expect. Never carries internals. */
export class InternalError extends Schema.TaggedError<InternalError>()(
  ...failure("InternalError", { status: 500, code: "INTERNAL_ERROR", description: "INTERNAL_ERROR: an unexpected failure" })
) {
  static of(message = "An unexpected error occurred") {
    return new InternalError({ message })
  }
}

/**
 * 503 SERVICE_UNAVAILABLE: a dependency (database, bus) is unreachable; clients retry after `retryAfter`
 * seconds, told in the `Retry-After` header and, for a client that reads bodies alone, `details.retry_after`.
 */
export class ServiceUnavailable extends Schema.TaggedError<ServiceUnavailable>()(
  ...failureWith("ServiceUnavailable", {
    status: 503,
    code: "SERVICE_UNAVAILABLE",
    description: "SERVICE_UNAVAILABLE: a dependency is unreachable for now; details.retry_after and the Retry-After header carry the seconds to wait",
    details: { retry_after: Schema.Number }
  }, { retryAfter: Schema.Number })
) {
  static of(message = "The service is temporarily unavailable, retry shortly", retryAfter = 5) {
    return new ServiceUnavailable({ message, details: { retry_after: retryAfter }, retryAfter })
  }
}

// ---------------------------------------------------------------------------------------------
// Mailbox address rules (SPEC "Mailbox error codes")

/** 400 MISSING_FIELDS: `domain` missing, or both `local_part` and `email_address`. */
export class MissingFields extends Schema.TaggedError<MissingFields>()(
  ...failure("MissingFields", {
    status: 400,
    code: "MISSING_FIELDS",
    description: "MISSING_FIELDS: domain missing, or both local_part and email_address missing; details.missing_fields",
    details: { missing_fields: Schema.Array(Schema.String) }
  })
) {}

/** 422 LOCAL_TOO_SHORT: a local part under the minimum length. */
export class LocalTooShort extends Schema.TaggedError<LocalTooShort>()(
  ...failure("LocalTooShort", {
    status: 422,
    code: "LOCAL_TOO_SHORT",
    description: "LOCAL_TOO_SHORT: a local part under 5 characters; details: min_length, actual_length",
    details: { min_length: Schema.Number, actual_length: Schema.Number }
  })
) {}

/** 422 INVALID_LOCAL: disallowed characters or shape. */
export class InvalidLocal extends Schema.TaggedError<InvalidLocal>()(
  ...failure("InvalidLocal", {
    status: 422,
    code: "INVALID_LOCAL",
    description: "INVALID_LOCAL: disallowed characters or shape in the local part; details.local_part",
    details: { local_part: Schema.String }
  })
) {}

/** 422 DISALLOWED_LOCAL: a reserved name (DISALLOWED_EMAIL_NAME). */
export class DisallowedLocal extends Schema.TaggedError<DisallowedLocal>()(
  ...failure("DisallowedLocal", {
    status: 422,
    code: "DISALLOWED_LOCAL",
    description: "DISALLOWED_LOCAL: the local part is a reserved name; details.local_part",
    details: { local_part: Schema.String }
  })
) {}

/** 422 DOMAIN_MISMATCH: the host in `email_address` differs from `domain`. */
export class DomainMismatch extends Schema.TaggedError<DomainMismatch>()(
  ...failure("DomainMismatch", {
    status: 422,
    code: "DOMAIN_MISMATCH",
    description: "DOMAIN_MISMATCH: the host in email_address differs from domain; details: domain_expected, domain_in_request",
    details: { domain_expected: Schema.String, domain_in_request: Schema.String }
  })
) {}

/** 422 DOMAIN_NOT_ALLOWED: not in the shared pool (free), or not a verified domain of the account (paid). */
export class DomainNotAllowed extends Schema.TaggedError<DomainNotAllowed>()(
  ...failure("DomainNotAllowed", {
    status: 422,
    code: "DOMAIN_NOT_ALLOWED",
    description: "DOMAIN_NOT_ALLOWED: the domain is not in the shared pool (free) or not verified or shared (paid); details: domain, plan",
    details: { domain: Schema.String, plan: Schema.String }
  })
) {}

/** 409 EMAIL_TAKEN: the full address exists already (including a lost race on the unique index). */
export class EmailTaken extends Schema.TaggedError<EmailTaken>()(
  ...failure("EmailTaken", {
    status: 409,
    code: "EMAIL_TAKEN",
    description: "EMAIL_TAKEN: the full address already exists; details.email_address",
    details: { email_address: Schema.optional(Schema.String) }
  })
) {}

// ---------------------------------------------------------------------------------------------
// Plan quotas (403)

/** 403 MAILBOX_QUOTA: the plan's mailbox count is reached. */
export class MailboxQuotaReached extends Schema.TaggedError<MailboxQuotaReached>()(
  ...failure("MailboxQuotaReached", {
    status: 403,
    code: "MAILBOX_QUOTA",
    description: "MAILBOX_QUOTA: the plan's mailbox count is reached; details: count, limit, plan",
    details: { count: Schema.Number, limit: Schema.Number, plan: Schema.String }
  })
) {}

/** 403 DOMAIN_QUOTA: the plan's custom-domain count is reached. */
export class DomainQuotaReached extends Schema.TaggedError<DomainQuotaReached>()(
  ...failure("DomainQuotaReached", {
    status: 403,
    code: "DOMAIN_QUOTA",
    description: "DOMAIN_QUOTA: the plan's custom-domain count is reached; details: count, limit, plan",
    details: { count: Schema.Number, limit: Schema.Number, plan: Schema.String }
  })
) {}

/** 403 WEBHOOK_QUOTA: the plan's webhook endpoint count is reached. */
export class WebhookQuotaReached extends Schema.TaggedError<WebhookQuotaReached>()(
  ...failure("WebhookQuotaReached", {
    status: 403,
    code: "WEBHOOK_QUOTA",
    description: "WEBHOOK_QUOTA: the plan's webhook endpoint count is reached; details: count, limit, plan",
    details: { count: Schema.Number, limit: Schema.Number, plan: Schema.String }
  })
) {}

/** 403 SEARCH_QUOTA: the plan's searches for this billing period are used up. */
export class SearchQuotaReached extends Schema.TaggedError<SearchQuotaReached>()(
  ...failure("SearchQuotaReached", {
    status: 403,
    code: "SEARCH_QUOTA",
    description: "SEARCH_QUOTA: the plan's searches for this billing period are used up; details: used, limit, plan, period_end",
    details: { used: Schema.NullOr(Schema.Number), limit: Schema.NullOr(Schema.Number), plan: Schema.String, period_end: Schema.String }
  })
) {}

/**
 * 400 RANKING_EXPIRED (a Mailroom extension): a search's `ranking` token is unknown to the account:
 * expired (held 10 minutes after its last use), never made, or another account's.
 */
export class RankingExpired extends Schema.TaggedError<RankingExpired>()(
  ...failure("RankingExpired", {
    status: 400,
    code: "RANKING_EXPIRED",
    description: "RANKING_EXPIRED: the search's ranking token is expired or unknown (a held ranking lasts held_for_seconds after " +
      "its last use): search again without it, from the first page, for a new ranking; details: ranking (a message), held_for_seconds",
    details: { ranking: Schema.String, held_for_seconds: Schema.Number }
  })
) {}

// ---------------------------------------------------------------------------------------------
// Domains, billing

/** 400 VERIFICATION_FAILED: the domain's TXT ownership record is missing or does not match. */
export class VerificationFailed extends Schema.TaggedError<VerificationFailed>()(
  ...failure("VerificationFailed", {
    status: 400,
    code: "VERIFICATION_FAILED",
    description: "VERIFICATION_FAILED: the TXT record was not found or does not match; details: expected_txt_record, instructions",
    details: { expected_txt_record: Schema.String, instructions: Schema.String }
  })
) {}

/** 409 DOMAIN_HAS_MAILBOXES: deleting a domain that active mailboxes still use. */
export class DomainHasMailboxes extends Schema.TaggedError<DomainHasMailboxes>()(
  ...failure("DomainHasMailboxes", {
    status: 409,
    code: "DOMAIN_HAS_MAILBOXES",
    description: "DOMAIN_HAS_MAILBOXES: active mailboxes still use the domain; details: mailbox_count, domain_name",
    details: { mailbox_count: Schema.Number, domain_name: Schema.String }
  })
) {}

/** 400 INVALID_SIGNATURE: a payment provider event whose signature does not verify. */
export class InvalidSignature extends Schema.TaggedError<InvalidSignature>()(
  ...failure("InvalidSignature", {
    status: 400,
    code: "INVALID_SIGNATURE",
    description: "INVALID_SIGNATURE: the Stripe-Signature header does not verify over the body"
  })
) {}

// ---------------------------------------------------------------------------------------------
// Mail (Mailroom's own codes, beyond SPEC's table)

/** 400 LABEL_READ_ONLY: a change that adds or removes a label Mailroom sets from facts (`inbound`, `sent`). */
export class FactLabel extends Schema.TaggedError<FactLabel>()(
  ...failure("FactLabel", {
    status: 400,
    code: "LABEL_READ_ONLY",
    description: "LABEL_READ_ONLY: inbound and sent state facts about an email and cannot be added or removed; details: labels",
    details: { labels: Schema.optional(Schema.Array(Schema.String)) }
  })
) {}

/** 403 SENDER_LIST_FULL: an allow or block list holds as many entries as one list may. */
export class SenderListFull extends Schema.TaggedError<SenderListFull>()(
  ...failure("SenderListFull", {
    status: 403,
    code: "SENDER_LIST_FULL",
    description: "SENDER_LIST_FULL: the allow or block list already holds its 1,000 entries; details: list, limit, mailbox_id",
    details: { list: Schema.optional(Schema.String), limit: Schema.optional(Schema.Number), mailbox_id: Schema.optional(Schema.NullOr(Schema.String)) }
  })
) {}

/** 403 FORWARDING_LIST_FULL: a mailbox forwards to as many addresses as one may. */
export class ForwardingListFull extends Schema.TaggedError<ForwardingListFull>()(
  ...failure("ForwardingListFull", {
    status: 403,
    code: "FORWARDING_LIST_FULL",
    description: "FORWARDING_LIST_FULL: the mailbox forwards to 5 addresses already; details: limit, mailbox_id",
    details: { limit: Schema.optional(Schema.Number), mailbox_id: Schema.optional(Schema.String) }
  })
) {}

/** 403 FILTER_QUOTA: the account keeps as many filters as one may. */
export class FilterQuotaReached extends Schema.TaggedError<FilterQuotaReached>()(
  ...failure("FilterQuotaReached", {
    status: 403,
    code: "FILTER_QUOTA",
    description: "FILTER_QUOTA: the account has 100 filters already; details: limit",
    details: { limit: Schema.optional(Schema.Number) }
  })
) {}

// ---------------------------------------------------------------------------------------------
// Sending mail

/** 403 SEND_QUOTA: the plan's sends for today or for this billing period are used up. */
export class SendQuotaReached extends Schema.TaggedError<SendQuotaReached>()(
  ...failure("SendQuotaReached", {
    status: 403,
    code: "SEND_QUOTA",
    description: "SEND_QUOTA: the plan's sends per day or per billing period are used up; details: window (day or period), used, limit, plan",
    details: { window: Schema.Literal("day", "period"), used: Schema.Number, limit: Schema.NullOr(Schema.Number), plan: Schema.String }
  })
) {}

/** 403 STORAGE_QUOTA: the account's stored mail fills its plan's storage, or this message would pass it. */
export class StorageQuotaReached extends Schema.TaggedError<StorageQuotaReached>()(
  ...failure("StorageQuotaReached", {
    status: 403,
    code: "STORAGE_QUOTA",
    description:
      "STORAGE_QUOTA: the account's stored mail (received and sent) fills its plan's storage, or this message's copy would pass it; details: used, size, limit, plan",
    details: { used: Schema.Number, size: Schema.Number, limit: Schema.NullOr(Schema.Number), plan: Schema.String }
  })
) {}

/** 422 RECIPIENT_SUPPRESSED: a recipient is on the account's suppression list; the account no longer sends to it. */
export class RecipientSuppressed extends Schema.TaggedError<RecipientSuppressed>()(
  ...failure("RecipientSuppressed", {
    status: 422,
    code: "RECIPIENT_SUPPRESSED",
    description: "RECIPIENT_SUPPRESSED: a recipient is on the account's suppression list (it bounced, unsubscribed, complained, or the account added it); details: addresses, reasons (address → reason), and for a batch messages (the places in it of the messages refused)",
    details: {
      addresses: Schema.optional(Schema.Array(Schema.String)),
      reasons: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
      messages: Schema.optional(Schema.Array(Schema.Number))
    }
  })
) {}

/** 422 UNSUBSCRIBE_UNAVAILABLE: a received email offers no way to unsubscribe that Mailroom may use. */
export class UnsubscribeUnavailable extends Schema.TaggedError<UnsubscribeUnavailable>()(
  ...failure("UnsubscribeUnavailable", {
    status: 422,
    code: "UNSUBSCRIBE_UNAVAILABLE",
    description:
      "UNSUBSCRIBE_UNAVAILABLE: the email names no one-click or mailto unsubscribe (List-Unsubscribe), its sender is not authenticated, or Mailroom sent it; details: email_id, reason, url (a page a person may open)",
    details: { email_id: Schema.optional(Schema.String), reason: Schema.optional(Schema.String), url: Schema.optional(Schema.String) }
  })
) {}

/** 422 ATTACHMENT_UNREADABLE: an attachment whose text cannot be read (its kind, or the file itself). */
export class AttachmentUnreadable extends Schema.TaggedError<AttachmentUnreadable>()(
  ...failure("AttachmentUnreadable", {
    status: 422,
    code: "ATTACHMENT_UNREADABLE",
    description:
      "ATTACHMENT_UNREADABLE: the attachment has no text to read: not text, HTML, PDF or Word (reason unsupported_type), or a document that is " +
      "encrypted, damaged, too_large or too_complex to read in time; details: email_id, attachment_id, content_type, reason",
    details: { email_id: Schema.optional(Schema.String), attachment_id: Schema.optional(Schema.NullOr(Schema.String)), content_type: Schema.optional(Schema.NullOr(Schema.String)), reason: Schema.optional(Schema.String) }
  })
) {}

/** 404 NO_INVITATION: the email carries no calendar invitation (no text/calendar part, no .ics file). */
export class NoInvitation extends Schema.TaggedError<NoInvitation>()(
  ...failure("NoInvitation", {
    status: 404,
    code: "NO_INVITATION",
    description: "NO_INVITATION: the email exists but carries no calendar invitation (a text/calendar part or an .ics file); details: email_id",
    details: { email_id: Schema.optional(Schema.String) }
  })
) {}

/** 422 INVITATION_UNREADABLE: the email's calendar cannot be read. */
export class InvitationUnreadable extends Schema.TaggedError<InvitationUnreadable>()(
  ...failure("InvitationUnreadable", {
    status: 422,
    code: "INVITATION_UNREADABLE",
    description:
      "INVITATION_UNREADABLE: the email's calendar part is not valid iCalendar (reason damaged), describes no event with a UID and a start " +
      "(no_event), or is larger than 1 MB (too_large); details: email_id, attachment_id, reason",
    details: { email_id: Schema.optional(Schema.String), attachment_id: Schema.optional(Schema.NullOr(Schema.String)), reason: Schema.optional(Schema.String) }
  })
) {}

/** 422 INVITATION_NOT_RESPONDABLE: the calendar asks no answer of the mailbox. */
export class InvitationNotRespondable extends Schema.TaggedError<InvitationNotRespondable>()(
  ...failure("InvitationNotRespondable", {
    status: 422,
    code: "INVITATION_NOT_RESPONDABLE",
    description:
      "INVITATION_NOT_RESPONDABLE: there is nothing to answer: the event is cancelled (reason cancelled), the calendar is not a REQUEST " +
      "(not_a_request: PUBLISH, REPLY, …), it names no organizer (no_organizer), the mailbox organizes it or sent it (own_invitation), " +
      "or an update of it arrived since, which is the one to answer (superseded; details.latest_email_id), or it is an update the schedule " +
      "did not apply for who sent it (not_applied; details.not_applied_reason: not_organizer, or unverified_sender until a person takes " +
      "unauthenticated off it; details.latest_email_id the invitation the schedule holds); one reason, the schedule past its revision first " +
      "(cancelled, then superseded), then not_applied; details: email_id, method, reason, latest_email_id whenever another email holds the event as the schedule has it",
    details: {
      email_id: Schema.optional(Schema.String),
      method: Schema.optional(Schema.NullOr(Schema.String)),
      reason: Schema.optional(Schema.String),
      not_applied_reason: Schema.optional(Schema.String),
      latest_email_id: Schema.optional(Schema.String)
    }
  })
) {}

/** 502 UNSUBSCRIBE_FAILED: the sender's one-click unsubscribe was not reached, or refused the request. */
export class UnsubscribeFailed extends Schema.TaggedError<UnsubscribeFailed>()(
  ...failure("UnsubscribeFailed", {
    status: 502,
    code: "UNSUBSCRIBE_FAILED",
    description: "UNSUBSCRIBE_FAILED: the sender's one-click unsubscribe address could not be reached or did not answer 2xx; details: email_id, url, status or error",
    details: { email_id: Schema.optional(Schema.String), url: Schema.optional(Schema.String), status: Schema.optional(Schema.Number), error: Schema.optional(Schema.String) }
  })
) {}

/** 403 DOMAIN_NOT_VERIFIED: mail from a custom domain before its ownership is verified. */
export class SenderDomainUnverified extends Schema.TaggedError<SenderDomainUnverified>()(
  ...failure("SenderDomainUnverified", {
    status: 403,
    code: "DOMAIN_NOT_VERIFIED",
    description: "DOMAIN_NOT_VERIFIED: the mailbox's custom domain is not verified, so it cannot send; details: domain",
    details: { domain: Schema.optional(Schema.String) }
  })
) {}

/** 409 IDEMPOTENCY_KEY_REUSED: an Idempotency-Key seen within 24 hours with another request body. */
export class IdempotencyKeyReused extends Schema.TaggedError<IdempotencyKeyReused>()(
  ...failure("IdempotencyKeyReused", {
    status: 409,
    code: "IDEMPOTENCY_KEY_REUSED",
    description: "IDEMPOTENCY_KEY_REUSED: the Idempotency-Key was used within 24 hours for a different request; details: idempotency_key",
    details: { idempotency_key: Schema.optional(Schema.String) }
  })
) {}

// ---------------------------------------------------------------------------------------------
// Events

/** 403 STREAM_QUOTA: the plan's open event streams are all in use. */
export class StreamQuotaReached extends Schema.TaggedError<StreamQuotaReached>()(
  ...failure("StreamQuotaReached", {
    status: 403,
    code: "STREAM_QUOTA",
    description: "STREAM_QUOTA: the account already has as many event streams open as its plan allows; details: count, limit, plan",
    details: { count: Schema.Number, limit: Schema.Number, plan: Schema.String }
  })
) {}

export type ApiError =
  | BadRequest
  | ValidationError
  | Unauthorized
  | Forbidden
  | NotFound
  | Conflict
  | PayloadTooLarge
  | UnsupportedMediaType
  | RateLimited
  | InternalError
  | ServiceUnavailable
  | MissingFields
  | LocalTooShort
  | InvalidLocal
  | DisallowedLocal
  | DomainMismatch
  | DomainNotAllowed
  | EmailTaken
  | MailboxQuotaReached
  | DomainQuotaReached
  | WebhookQuotaReached
  | SearchQuotaReached
  | RankingExpired
  | VerificationFailed
  | DomainHasMailboxes
  | InvalidSignature
  | FactLabel
  | SenderListFull
  | ForwardingListFull
  | FilterQuotaReached
  | SendQuotaReached
  | StorageQuotaReached
  | RecipientSuppressed
  | UnsubscribeUnavailable
  | AttachmentUnreadable
  | NoInvitation
  | InvitationUnreadable
  | InvitationNotRespondable
  | UnsubscribeFailed
  | SenderDomainUnverified
  | IdempotencyKeyReused
  | StreamQuotaReached

export const isApiError = (u: unknown): u is ApiError =>
  u instanceof Error && "_tag" in u && typeof u._tag === "string" && tags.has(u._tag) && "status" in u && "code" in u
