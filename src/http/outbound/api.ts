/**
 * Sending mail (issue 16): the same routes for API keys under /v1/api and for dashboard sessions
 * under /api. A send answers 202 once the message is durable and queued; what becomes of it is read
 * from the email (`GET /emails/{email_id}`: `delivery`) and told by the delivery events.
 */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import {
  Conflict,
  IdempotencyKeyReused,
  NotFound,
  PayloadTooLarge,
  StorageQuotaReached,
  UnsubscribeFailed,
  UnsubscribeUnavailable,
  ValidationError
} from "../../../services/errors.ts"
import {
  Draft,
  DraftConflictDetails,
  DraftInput,
  DraftSendInput,
  draftSortFields,
  DraftStatus,
  DraftUpdate,
  ForwardInput,
  ReplyInput,
  SendAccepted,
  SendBatchInput,
  SendInput,
  Suppression,
  SuppressionInput,
  suppressionSortFields
} from "../../../services/outbound/schemas.ts"
import { ListMeta, ListParams } from "../../../services/listing.ts"
import { IdempotencyKey } from "../../../services/outbound/idempotency.ts"
import { UnsubscribeResult } from "../../../services/mail/schemas.ts"
import { Ok, OkWithMeta } from "../envelope.ts"
import { detailsNaming, envelope, envelopeFor } from "../errors.ts"
import { OptionalBody } from "../optional-body.ts"
import { refusingSends } from "./refusals.ts"
import { ApiAuthentication, SessionAuthentication } from "../security.ts"

/** A drafts list's query: the list conventions, and which drafts by state. */
const DraftListParams = Schema.Struct({
  ...ListParams(draftSortFields).fields,
  status: Schema.optional(DraftStatus.annotations({ message: () => "must be one of draft, sending, sent" })).annotations({
    description: "Only drafts in this state: draft (awaiting approval), sending, or sent"
  })
})

const MailboxPath = Schema.Struct({ mailboxId: Schema.String })
const EmailPath = Schema.Struct({ emailId: Schema.String })
const SuppressionPath = Schema.Struct({ address: Schema.String })
const DraftsPath = Schema.Struct({ mailboxId: Schema.String })
const DraftPath = Schema.Struct({ mailboxId: Schema.String, draftId: Schema.String })
const DeletedDraft = Schema.Struct({
  draft_id: Schema.String,
  deleted: Schema.Literal(true),
  email_id: Schema.NullOr(Schema.String).annotations({
    description: "The email a draft already sent became (it stays in the mailbox); null: the draft was never sent, and now will not be"
  })
}).annotations({ identifier: "DeletedDraft" })
const Unsuppressed = Schema.Struct({ address: Schema.String, deleted: Schema.Literal(true) }).annotations({ identifier: "Unsuppressed" })

/** `Idempotency-Key`: 1-255 visible characters; a repeat within 24 hours does nothing new (`repeat` says what). */
const idempotencyHeaders = (request: string, repeat: string) =>
  Schema.Struct({
    "idempotency-key": Schema.optional(IdempotencyKey).annotations({
      description: `Makes the ${request} safe to retry: the same key with the same body within 24 hours answers the first answer and ${repeat}`
    })
  })

export const IdempotencyHeaders = idempotencyHeaders("send", "sends nothing new")

/**
 * The sending routes: a path (the mailbox, or the email answered), Idempotency-Key, body, 202 (one
 * send's answer, or a batch's), and every reason a send can be refused. Two builders only because the
 * path differs.
 */
const fromMailbox = <const Name extends string, Payload extends Schema.Schema.Any, Answer extends Schema.Schema.Any>(
  name: Name,
  route: `/${string}`,
  payload: Payload,
  answer: Answer
) =>
  HttpApiEndpoint.post(name, route)
    .setPath(MailboxPath)
    .setPayload(payload)
    .setHeaders(IdempotencyHeaders)
    .addSuccess(Ok(answer), { status: 202 })
    .addError(envelope(ValidationError))
    .addError(envelope(NotFound))
    .pipe(refusingSends)
    .addError(envelope(IdempotencyKeyReused))
    .addError(envelope(PayloadTooLarge))

const aboutEmail = <const Name extends string, Payload extends Schema.Schema.Any>(name: Name, route: `/${string}`, payload: Payload) =>
  HttpApiEndpoint.post(name, route)
    .setPath(EmailPath)
    .setPayload(payload)
    .setHeaders(IdempotencyHeaders)
    .addSuccess(Ok(SendAccepted), { status: 202 })
    .addError(envelope(ValidationError))
    .addError(envelope(NotFound))
    .pipe(refusingSends)
    .addError(envelope(IdempotencyKeyReused))
    .addError(envelope(PayloadTooLarge))

/**
 * A draft's edit's and send's 409: being sent or sent, or changed since the version named, its details
 * typed (the draft, its status, and updated_at to read it again by); a draft's other routes keep CONFLICT's.
 */
const DraftConflict = envelopeFor(Conflict, {
  identifier: "DraftConflict",
  description: "the draft is being sent or sent (details.status), or it changed since if_updated_at (details.updated_at: its updated_at now; " +
    "details.if_updated_at: the value given); nothing was changed or sent. details.draft_id names the draft",
  details: detailsNaming(DraftConflictDetails)
})

/** A draft's send: no body, or the version of the draft approved. */
const DraftSendBody = OptionalBody(DraftSendInput, {})

const fromDraft = <const Name extends string>(name: Name, route: `/${string}`) =>
  HttpApiEndpoint.post(name, route)
    .setPath(DraftPath)
    .setPayload(DraftSendBody)
    .addSuccess(Ok(SendAccepted), { status: 202 })
    .addError(envelope(ValidationError))
    .addError(envelope(NotFound))
    .addError(DraftConflict)
    .pipe(refusingSends)
    .addError(envelope(PayloadTooLarge))

const ANSWER =
  "202 once the message is stored (as an email of the mailbox, direction outbound) and queued; `GET /emails/{email_id}` shows each recipient's delivery. Line breaks in any header value are refused (400)."

const outboundEndpoints = <const Name extends string>(name: Name) =>
  HttpApiGroup.make(name)
    .add(
      fromMailbox("send", "/mailboxes/:mailboxId/send", SendInput, SendAccepted)
        .annotateContext(OpenApi.annotations({
          summary: "Send an email",
          description: `Sends from the mailbox to \`to\`, \`cc\` and \`bcc\` (at most 50 in all). ${ANSWER}`
        }))
    )
    .add(
      fromMailbox("sendBatch", "/mailboxes/:mailboxId/send/batch", SendBatchInput, Schema.Array(SendAccepted))
        .annotateContext(OpenApi.annotations({
          summary: "Send several emails at once",
          description:
            `Sends each message (a send's body) from the mailbox, all or none: a refusal of any refuses the batch and names it (\`messages.<i>.<field>\` in a 400's details, \`index\` in a 413's), and the plan's sends must cover all of them. 202 with one answer per message, in order, once all are stored and queued. The request body is held to a send's size. ${ANSWER}`
        }))
    )
    .add(
      aboutEmail("reply", "/emails/:emailId/reply", ReplyInput)
        .annotateContext(OpenApi.annotations({
          summary: "Reply to an email",
          description:
            `From the mailbox holding the email, to its Reply-To or From (for mail the mailbox sent: to its recipients), with one "Re:" and In-Reply-To / References set. ${ANSWER}`
        }))
    )
    .add(
      aboutEmail("replyAll", "/emails/:emailId/reply-all", ReplyInput)
        .annotateContext(OpenApi.annotations({
          summary: "Reply to everyone on an email",
          description: `As reply, with the email's To and Cc added (minus the mailbox itself). ${ANSWER}`
        }))
    )
    .add(
      aboutEmail("forward", "/emails/:emailId/forward", ForwardInput)
        .annotateContext(OpenApi.annotations({
          summary: "Forward an email",
          description: `To \`to\` (and cc, bcc), with one "Fwd:", the original below the note and its attachments along. ${ANSWER}`
        }))
    )
    .add(
      HttpApiEndpoint.post("createDraft", "/mailboxes/:mailboxId/drafts")
        .setPath(DraftsPath)
        .setPayload(DraftInput)
        .setHeaders(idempotencyHeaders("create", "makes no second draft"))
        .addSuccess(Ok(Draft), { status: 201 })
        .addError(envelope(ValidationError))
        .addError(envelope(NotFound))
        .addError(envelope(PayloadTooLarge))
        .addError(envelope(StorageQuotaReached))
        .addError(envelope(IdempotencyKeyReused))
        .annotateContext(OpenApi.annotations({
          summary: "Create a draft",
          description:
            "A message to send later: by a person (POST …/send, the approval path) or at `send_at`. It may reply to (`in_reply_to`, `reply_all`) or forward (`forward_of`) an email of the mailbox; recipients and body may be completed later"
        }))
    )
    .add(
      HttpApiEndpoint.get("listDrafts", "/mailboxes/:mailboxId/drafts")
        .setPath(DraftsPath)
        .setUrlParams(DraftListParams)
        .addSuccess(OkWithMeta(Schema.Array(Draft), ListMeta))
        .addError(envelope(ValidationError))
        .addError(envelope(NotFound))
        .annotateContext(OpenApi.annotations({ summary: "List drafts", description: "The mailbox's drafts, newest first, sent ones included" }))
    )
    .add(
      HttpApiEndpoint.get("listAllDrafts", "/drafts")
        .setUrlParams(DraftListParams)
        .addSuccess(OkWithMeta(Schema.Array(Draft), ListMeta))
        .addError(envelope(ValidationError))
        .annotateContext(OpenApi.annotations({
          summary: "List every mailbox's drafts",
          description: "The drafts of all the account's mailboxes, newest first, sent ones included: what waits for approval, in one list"
        }))
    )
    .add(
      HttpApiEndpoint.get("getDraft", "/mailboxes/:mailboxId/drafts/:draftId")
        .setPath(DraftPath)
        .addSuccess(Ok(Draft))
        .addError(envelope(NotFound))
        .annotateContext(OpenApi.annotations({
          summary: "Get a draft",
          description: "The draft as it is now: its fields, schedule, status and, once sent, the email it became"
        }))
    )
    .add(
      HttpApiEndpoint.patch("updateDraft", "/mailboxes/:mailboxId/drafts/:draftId")
        .setPath(DraftPath)
        .setPayload(DraftUpdate)
        .addSuccess(Ok(Draft))
        .addError(envelope(ValidationError))
        .addError(envelope(NotFound))
        .addError(envelope(PayloadTooLarge))
        .addError(envelope(StorageQuotaReached))
        .addError(DraftConflict)
        .annotateContext(OpenApi.annotations({
          summary: "Update a draft",
          description: "Changes the fields given; `send_at: null` cancels a scheduled send. A draft being sent or sent is 409 CONFLICT; " +
            "so is one changed since `if_updated_at`, when given (details.updated_at: its updated_at now), and nothing changes"
        }))
    )
    .add(
      HttpApiEndpoint.del("deleteDraft", "/mailboxes/:mailboxId/drafts/:draftId")
        .setPath(DraftPath)
        .addSuccess(Ok(DeletedDraft))
        .addError(envelope(NotFound))
        .addError(envelope(Conflict))
        .annotateContext(OpenApi.annotations({
          summary: "Delete a draft",
          description:
            "A draft deleted before it is sent is never sent (a scheduled one included); one already sent is removed from the drafts and `email_id` names the email it became; one being sent at that moment is 409 CONFLICT"
        }))
    )
    .add(
      fromDraft("sendDraft", "/mailboxes/:mailboxId/drafts/:draftId/send")
        .annotateContext(OpenApi.annotations({
          summary: "Send a draft",
          description: "Sends the draft as it is now (a reply or forward as such). Sending it again answers the same email. " +
            "With `if_updated_at` (the draft's updated_at as read, the version a person approved), a draft changed since is 409 CONFLICT " +
            `(details.updated_at: its updated_at now) and nothing is sent. ${ANSWER}`
        }))
    )
    .add(
      HttpApiEndpoint.post("unsubscribe", "/emails/:emailId/unsubscribe")
        .setPath(EmailPath)
        .addSuccess(Ok(UnsubscribeResult))
        .addError(envelope(NotFound))
        .addError(envelope(UnsubscribeUnavailable))
        .addError(envelope(UnsubscribeFailed))
        .addError(envelope(ValidationError))
        .addError(envelope(PayloadTooLarge))
        .pipe(refusingSends)
        .annotateContext(OpenApi.annotations({
          summary: "Unsubscribe from a received email's list",
          description:
            "Leaves the mailing list a received email came from, the way its List-Unsubscribe header offers: RFC 8058's one-click POST to the sender's https address (2xx within 10 s), else a message from the mailbox to its mailto address. " +
            "Only mail whose sender is authenticated. A list that only offers a web page, an unauthenticated sender, or an email Mailroom sent is 422 UNSUBSCRIBE_UNAVAILABLE (details.reason; details.url for the page); a one-click address that cannot be reached or refuses, with no mailto to fall back on, 502 UNSUBSCRIBE_FAILED"
        }))
    )
    .add(
      HttpApiEndpoint.get("suppressions", "/suppressions")
        .setUrlParams(ListParams(suppressionSortFields))
        .addSuccess(OkWithMeta(Schema.Array(Suppression), ListMeta))
        .addError(envelope(ValidationError))
        .annotateContext(OpenApi.annotations({
          summary: "List suppressed addresses",
          description:
            "Addresses the account no longer sends to, newest first, each with its reason (bounced, unsubscribed, complained, manual): sending to one is refused with 422 RECIPIENT_SUPPRESSED"
        }))
    )
    .add(
      HttpApiEndpoint.post("suppress", "/suppressions")
        .setPayload(SuppressionInput)
        .addSuccess(Ok(Suppression), { status: 201 })
        .addSuccess(Ok(Suppression), { status: 200 })
        .addError(envelope(ValidationError))
        .annotateContext(OpenApi.annotations({
          summary: "Suppress an address",
          description:
            "Stop sending to an address (reason manual): a person asked not to be written to, say. 201 when added; 200 with the entry as it was when the address is suppressed already"
        }))
    )
    .add(
      HttpApiEndpoint.del("unsuppress", "/suppressions/:address")
        .setPath(SuppressionPath)
        .addSuccess(Ok(Unsuppressed))
        .addError(envelope(NotFound))
        .annotateContext(OpenApi.annotations({
          summary: "Remove a suppressed address",
          description: "Mail to the address is sent again"
        }))
    )

export class OutboundGroup extends outboundEndpoints("outbound")
  .middleware(ApiAuthentication)
  .prefix("/v1/api")
  .annotate(OpenApi.Title, "Sending")
  .annotate(OpenApi.Description, "Sending mail from a mailbox: delivered by Mailroom's mta, DKIM-signed, retried, bounces tracked")
{}

export class DashboardOutboundGroup extends outboundEndpoints("dashboardOutbound")
  .middleware(SessionAuthentication)
  .prefix("/api")
  .annotate(OpenApi.Title, "Sending (dashboard)")
  .annotate(OpenApi.Description, "The sending routes for dashboard sessions")
{}
