/**
 * Webhooks on the wire (SPEC "Webhook", "Webhooks"; DESIGN.md §4) and the events they carry.
 */
import { Schema, SchemaAST } from "effect"
import { Label, MAX_LABELS } from "../mail/label-rules.ts"
import { EmailFields, EmailReceived } from "../mail/schemas.ts"
import { MeetingAnsweredData } from "../meetings/schemas.ts"
import { InvitationReceivedData, REMINDER_MINUTES, ScheduleReminderData } from "../schedule/schemas.ts"
import { ComplaintEventData, DeliveryEventData, UnsubscribedEventData } from "../outbound/schemas.ts"
import { weakStandardSecret } from "./signatures.ts"
import { rule } from "../schema-rules.ts"

/** The event kinds an endpoint can subscribe to (SPEC "Events"). */
export const eventKinds = [
  "email.received",
  "email.processed",
  "email.labels_changed",
  "email.deleted",
  "email.sent",
  "email.delivery_delayed",
  "email.bounced",
  "email.failed",
  "email.unsubscribed",
  "email.complained",
  "meeting.answered",
  "invitation.received",
  "schedule.reminder",
  "api_key.created"
] as const
export type EventKind = (typeof eventKinds)[number]

export const isEventKind = (value: string): value is EventKind => (eventKinds as ReadonlyArray<string>).includes(value)

const Events = Schema.Array(Schema.String).pipe(
  rule((events) => {
    if (events.length === 0) return `must list at least one of ${eventKinds.join(", ")}`
    const unknown = events.find((event) => !isEventKind(event))
    return unknown === undefined ? undefined : `"${unknown}" is not an event kind; supported: ${eventKinds.join(", ")}`
  }, { jsonSchema: { minItems: 1, items: { type: "string", enum: eventKinds } } })
).annotations({ description: `Event kinds: ${eventKinds.join(", ")}` })

const Secret = Schema.String.pipe(
  rule((secret) =>
    /^[\x21-\x7e]{8,256}$/.test(secret) ? weakStandardSecret(secret) : "must be 8-256 printable ASCII characters without spaces",
    { jsonSchema: { minLength: 8, maxLength: 256, pattern: "^[\\x21-\\x7e]+$" } }
  )
).annotations({ description: "Signing secret; generated (whsec_…) when omitted" })

const Url = Schema.String.annotations({ description: "HTTPS URL that receives the events" })

/** The most mailboxes one webhook names. */
export const MAX_WEBHOOK_MAILBOXES = 100

const MailboxIds = Schema.NullOr(
  Schema.Array(Schema.String).pipe(
    Schema.minItems(1, { message: () => "must list at least one mailbox id (null: every mailbox)" }),
    Schema.maxItems(MAX_WEBHOOK_MAILBOXES, { message: () => `must list at most ${MAX_WEBHOOK_MAILBOXES} mailbox ids` })
  )
).annotations({
  description: "Only events about these mailboxes of the account (events about no mailbox, such as api_key.created, are not sent; only such events is refused); " +
    "null or left out: every event"
})

const Labels = Schema.NullOr(
  Schema.Array(Label).pipe(
    Schema.minItems(1, { message: () => "must list at least one label (null: mail with any labels)" }),
    Schema.maxItems(MAX_LABELS, { message: () => `must list at most ${MAX_LABELS} labels` })
  )
).annotations({
  description: "Only events about an email that carries one of these labels (email.received, email.processed, email.labels_changed, " +
    "email.deleted: what a filter labelled billing, say); events that carry no labels (deliveries of sent mail, api_key.created) are not sent (only such events is refused). " +
    "null or left out: every event"
})

export const CreateWebhookInput = Schema.Struct({
  url: Url,
  events: Events,
  secret: Schema.optional(Secret),
  mailbox_ids: Schema.optional(MailboxIds),
  labels: Schema.optional(Labels)
}).annotations({ identifier: "CreateWebhookInput", parseOptions: { errors: "all", onExcessProperty: "error" } })
export type CreateWebhookInput = typeof CreateWebhookInput.Type

export const UpdateWebhookInput = Schema.Struct({
  url: Schema.optional(Url),
  events: Schema.optional(Events),
  active: Schema.optional(Schema.Boolean),
  secret: Schema.optional(Secret),
  mailbox_ids: Schema.optional(MailboxIds),
  labels: Schema.optional(Labels)
}).annotations({ identifier: "UpdateWebhookInput", parseOptions: { errors: "all", onExcessProperty: "error" } })
export type UpdateWebhookInput = typeof UpdateWebhookInput.Type

const common = {
  webhook_id: Schema.String,
  url: Schema.String,
  events: Schema.Array(Schema.String),
  secret_masked: Schema.String,
  active: Schema.Boolean
}

/** Which mailboxes' events a webhook gets, after SPEC's fields. */
const mailboxIdsField = Schema.NullOr(Schema.Array(Schema.String)).annotations({
  description: "The mailboxes whose events it gets; null: every event of the account"
})

/** Which labels' mail a webhook gets. */
const labelsField = Schema.NullOr(Schema.Array(Schema.String)).annotations({
  description: "Only events about an email carrying one of these labels; null: every event"
})

/** Whether the plan's limit keeps an active webhook from deliveries now (subscriptions.ts `withinPlan`). */
const heldByPlanField = Schema.Boolean.annotations({
  description: "Whether the plan holds this webhook back: the account has more active webhooks than its plan allows (back on free " +
    "after a paid plan ended, say), and only the oldest active ones, as many as the plan allows, are delivered to. A held webhook " +
    "is kept as it is and delivers again as soon as the plan allows it (an upgrade, or an older active one deleted or disabled). " +
    "false for an inactive webhook"
})

/** get and update: the secret masked. */
export const Webhook = Schema.Struct({
  ...common,
  created_at: Schema.String,
  mailbox_ids: mailboxIdsField,
  labels: labelsField,
  held_by_plan: heldByPlanField
}).annotations({ identifier: "Webhook" })
export type Webhook = typeof Webhook.Type

/** A webhook with its full secret, in SPEC's field order (the secret before its masked form). */
const withSecret = <S extends Schema.Struct.Field>(secret: S) =>
  Schema.Struct({
    webhook_id: common.webhook_id,
    url: common.url,
    events: common.events,
    secret,
    secret_masked: common.secret_masked,
    active: common.active,
    created_at: Schema.String,
    mailbox_ids: mailboxIdsField,
    labels: labelsField,
    held_by_plan: heldByPlanField
  })

/** update: like get, with the new full secret once when it was changed. */
export const UpdatedWebhook = withSecret(
  Schema.optional(Schema.String.annotations({ description: "The new full secret; only when it was changed" }))
).annotations({ identifier: "UpdatedWebhook" })
export type UpdatedWebhook = typeof UpdatedWebhook.Type

/** create: the full secret, once. */
export const CreatedWebhook = withSecret(
  Schema.String.annotations({ description: "The full signing secret. Shown only now and when it is changed." })
).annotations({ identifier: "CreatedWebhook" })
export type CreatedWebhook = typeof CreatedWebhook.Type

/** list: as SPEC spells it, `createdAt`. */
export const WebhookListItem = Schema.Struct({
  ...common,
  createdAt: Schema.String,
  mailbox_ids: mailboxIdsField,
  labels: labelsField,
  held_by_plan: heldByPlanField
}).annotations({ identifier: "WebhookListItem" })
export type WebhookListItem = typeof WebhookListItem.Type

export const DeletedWebhook = Schema.Struct({ message: Schema.String }).annotations({ identifier: "DeletedWebhook" })

export const DeliveryStatus = Schema.Literal("pending", "succeeded", "failed", "canceled")
export type DeliveryStatus = typeof DeliveryStatus.Type

export const DeliveryAttempt = Schema.Struct({
  attempt: Schema.Number,
  status_code: Schema.NullOr(Schema.Number).annotations({ description: "HTTP status answered; null when none was" }),
  duration_ms: Schema.Number,
  error: Schema.NullOr(Schema.String),
  attempted_at: Schema.String
}).annotations({ identifier: "WebhookDeliveryAttempt" })

export const Delivery = Schema.Struct({
  delivery_id: Schema.String,
  webhook_id: Schema.String,
  event_id: Schema.String.annotations({ description: "The webhook-id header of the delivery" }),
  event: Schema.String,
  status: DeliveryStatus,
  attempts: Schema.Array(DeliveryAttempt),
  created_at: Schema.String,
  completed_at: Schema.NullOr(Schema.String)
}).annotations({ identifier: "WebhookDelivery" })
export type Delivery = typeof Delivery.Type

/** `POST /webhooks/{id}/test?event=<kind>`: which kind of example event to send (no body needed). */
export const TestWebhookInput = Schema.Struct({
  event: Schema.optional(Schema.Literal(...eventKinds).annotations({
    message: () => `must be one of ${eventKinds.join(", ")}`
  })).annotations({
    description: "The kind of example event to send; the webhook's first subscribed kind when left out"
  })
}).annotations({ parseOptions: { errors: "all" } })
export type TestWebhookInput = typeof TestWebhookInput.Type

/** What a test delivery came to: the endpoint's answer to one signed POST of an example event. */
export const TestDelivery = Schema.Struct({
  event: Schema.Literal(...eventKinds),
  event_id: Schema.String.annotations({ description: "The webhook-id header sent: test_…, never an event's" }),
  succeeded: Schema.Boolean.annotations({ description: "The endpoint answered 2xx" }),
  status_code: Schema.NullOr(Schema.Number).annotations({ description: "HTTP status answered; null when none was" }),
  duration_ms: Schema.Number,
  error: Schema.NullOr(Schema.String).annotations({ description: "What went wrong: the status, a refused connection, a time-out" }),
  payload: Schema.Struct({ event: Schema.String, timestamp: Schema.String, data: Schema.Unknown })
    .annotations({ description: "The body sent, as a real event of that kind carries it, about an example email or key" })
}).annotations({ identifier: "WebhookTestDelivery" })
export type TestDelivery = typeof TestDelivery.Type

/** An event as it travels on the bus: the payload receivers get, plus whose it is. */
export const BusEvent = Schema.Struct({
  event: Schema.String,
  timestamp: Schema.String,
  namespace: Schema.String,
  data: Schema.Unknown
})
export type BusEvent = typeof BusEvent.Type

/** What the endpoint list sorts by. */
export const webhookSortFields = ["created_at", "url"] as const
export type WebhookSortField = (typeof webhookSortFields)[number]

// ---------------------------------------------------------------------------------------------
// What receivers get: `{ event, timestamp, data }` per kind (SPEC "Events"; DESIGN.md §4), as the
// OpenAPI document's `webhooks` describe it. The producers (mail/ingest.ts, search/indexer.ts,
// keys/api-keys.ts) publish exactly these fields.

const eventPayload = <const Kind extends EventKind, Data extends Schema.Schema.Any>(
  kind: Kind,
  identifier: string,
  data: Data,
  description: string
) =>
  Schema.Struct({
    event: Schema.Literal(kind),
    timestamp: Schema.String.annotations({ description: "When the event happened (ISO 8601 UTC)" }),
    data
  }).annotations({ identifier, description })

export const EmailReceivedEvent = eventPayload(
  "email.received",
  "EmailReceivedEvent",
  EmailReceived,
  "A new email arrived at one of the account's mailboxes"
)

export const EmailProcessedEvent = eventPayload(
  "email.processed",
  "EmailProcessedEvent",
  Schema.Struct({
    ...EmailReceived.fields,
    embedding_model: Schema.String.annotations({ description: "The model that embedded the email for search" }),
    processing_ms: Schema.Number.annotations({ description: "How long indexing took" })
  }),
  "A received email is indexed for semantic search"
)

export const EmailLabelsChangedEvent = eventPayload(
  "email.labels_changed",
  "EmailLabelsChangedEvent",
  Schema.Struct({
    ...EmailFields.fields,
    added: Schema.Array(Schema.String).annotations({ description: "Labels the change added" }),
    removed: Schema.Array(Schema.String).annotations({ description: "Labels the change removed" })
  }),
  "An email's labels changed (labels holds them after the change); removing unread marks it handled"
)

export const EmailDeletedEvent = eventPayload(
  "email.deleted",
  "EmailDeletedEvent",
  EmailFields,
  "An email was deleted (alone, in a batch or with its thread): its fields as they were"
)

export const EmailSentEvent = eventPayload(
  "email.sent",
  "EmailSentEvent",
  DeliveryEventData,
  "A sent email reached one recipient's server (status sent, with its answer)"
)

export const EmailDeliveryDelayedEvent = eventPayload(
  "email.delivery_delayed",
  "EmailDeliveryDelayedEvent",
  DeliveryEventData,
  "A sent email could not be delivered to one recipient yet and will be tried again (next_attempt_at); told once per recipient"
)

export const EmailBouncedEvent = eventPayload(
  "email.bounced",
  "EmailBouncedEvent",
  DeliveryEventData,
  "One recipient's server refused a sent email for good, or a bounce report came back; the address is now suppressed"
)

export const EmailFailedEvent = eventPayload(
  "email.failed",
  "EmailFailedEvent",
  DeliveryEventData,
  "Mailroom gave up delivering a sent email to one recipient (out of retries, or the domain takes no mail)"
)

export const EmailUnsubscribedEvent = eventPayload(
  "email.unsubscribed",
  "EmailUnsubscribedEvent",
  UnsubscribedEventData,
  "The recipient of an email sent with list_unsubscribe used its unsubscribe link (or their mail app's Unsubscribe button): the address is now suppressed, reason unsubscribed"
)

export const EmailComplainedEvent = eventPayload(
  "email.complained",
  "EmailComplainedEvent",
  ComplaintEventData,
  "The recipient of a sent email reported it as spam (their provider's feedback report came back to its bounce address): the address is now suppressed, reason complained"
)

export const MeetingAnsweredEvent = eventPayload(
  "meeting.answered",
  "MeetingAnsweredEvent",
  MeetingAnsweredData,
  "An attendee's calendar answered a meeting the mailbox organizes (accepted, declined, tentative): the meeting's attendees show it"
)

export const InvitationReceivedEvent = eventPayload(
  "invitation.received",
  "InvitationReceivedEvent",
  InvitationReceivedData,
  "A calendar invitation, its update or its cancellation arrived and changed the mailbox's schedule (not mail labelled spam or blocked)"
)

export const ScheduleReminderEvent = eventPayload(
  "schedule.reminder",
  "ScheduleReminderEvent",
  ScheduleReminderData,
  `An occurrence on the mailbox's schedule starts within ${REMINDER_MINUTES} minutes (a meeting it organizes, an invitation it has not declined; not a whole day): told once`
)

export const ApiKeyCreatedEvent = eventPayload(
  "api_key.created",
  "ApiKeyCreatedEvent",
  Schema.Struct({
    keyId: Schema.String,
    name: Schema.String,
    keyPrefix: Schema.String,
    createdAt: Schema.String,
    expirationTs: Schema.NullOr(Schema.String),
    mailboxIds: Schema.NullOr(Schema.Array(Schema.String)).annotations({
      description: "The mailboxes the key is limited to; null: the whole account"
    }),
    permission: Schema.Literal("full_access", "read_only").annotations({ description: "What the key may do: everything, or read only" })
  }),
  "An API key was created on the account (never the key itself)"
)

export const EventPayloads = {
  "email.received": EmailReceivedEvent,
  "email.processed": EmailProcessedEvent,
  "email.labels_changed": EmailLabelsChangedEvent,
  "email.deleted": EmailDeletedEvent,
  "email.sent": EmailSentEvent,
  "email.delivery_delayed": EmailDeliveryDelayedEvent,
  "email.bounced": EmailBouncedEvent,
  "email.failed": EmailFailedEvent,
  "email.unsubscribed": EmailUnsubscribedEvent,
  "email.complained": EmailComplainedEvent,
  "meeting.answered": MeetingAnsweredEvent,
  "invitation.received": InvitationReceivedEvent,
  "schedule.reminder": ScheduleReminderEvent,
  "api_key.created": ApiKeyCreatedEvent
} as const satisfies Record<EventKind, Schema.Schema.Any>

/** The fields an event kind's `data` has. */
const dataFieldsOf = (kind: EventKind): ReadonlySet<string> => {
  const data = SchemaAST.getPropertySignatures(EventPayloads[kind].ast).find((field) => field.name === "data")
  return new Set(data === undefined ? [] : SchemaAST.getPropertySignatures(data.type).map((field) => String(field.name)))
}

/**
 * The kinds whose events are about a mailbox (their data has `mailbox_id`), and those about an email
 * that carry its labels: a webhook narrowed by `mailbox_ids` or `labels` is sent only these
 * (subscriptions.ts), so a kind outside them is never sent to it (webhooks.ts refuses that).
 */
export const aboutAMailbox: ReadonlySet<string> = new Set(eventKinds.filter((kind) => dataFieldsOf(kind).has("mailbox_id")))
export const carryingLabels: ReadonlySet<string> = new Set(eventKinds.filter((kind) => dataFieldsOf(kind).has("labels")))
