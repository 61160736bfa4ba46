/** Live events on `{base_url}` (issue 17): the account's events as Server-Sent Events or over a WebSocket, resumable. */
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { NotFound, StreamQuotaReached, ValidationError } from "../../../services/errors.ts"
import { Label } from "../../../services/mail/label-rules.ts"
import { eventKinds, isEventKind } from "../../../services/webhooks/schemas.ts"
import { envelope } from "../errors.ts"
import { ApiAuthentication, SessionAuthentication } from "../security.ts"
import { rule } from "../../../services/schema-rules.ts"

/** `types=a,b`: comma-separated event kinds. */
const Kinds = Schema.split(",").pipe(
  Schema.compose(Schema.Array(Schema.String.pipe(
    rule((kind) => isEventKind(kind) || `"${kind}" is not an event kind; supported: ${eventKinds.join(", ")}`)
  )))
)

/** A mailbox to listen to: an id, not an empty one (which would be read as no mailbox at all). */
export const MailboxFilter = Schema.String.pipe(
  Schema.minLength(1, { message: () => "must be a mailbox id; leave it out for every mailbox" })
)

export const EventStreamParams = Schema.Struct({
  types: Schema.optional(Kinds).annotations({ description: `Comma-separated event kinds to receive (${eventKinds.join(", ")}); all when absent` }),
  mailbox_id: Schema.optional(MailboxFilter).annotations({
    description: "Only events about this mailbox (events about no mailbox, such as api_key.created, are left out)"
  }),
  labels: Schema.optional(Schema.split(",").pipe(Schema.compose(Schema.Array(Label)))).annotations({
    description: "Comma-separated labels: only events about an email carrying one of them (events that carry no labels, " +
      "such as deliveries of sent mail and api_key.created, are left out)"
  }),
  after: Schema.optional(Schema.String).annotations({
    description: "Resume after this event id, as the Last-Event-ID header does (the header wins when both are sent)"
  })
}).annotations({ parseOptions: { errors: "all" } })

export const EventStreamHeaders = Schema.Struct({
  "last-event-id": Schema.optional(Schema.String).annotations({
    description: "The id of the last event received: the stream resumes right after it, with nothing lost or repeated (events are kept 7 days)"
  })
})

const eventEndpoints = <const Name extends string>(name: Name) =>
  HttpApiGroup.make(name)
  .add(
    HttpApiEndpoint.get("stream", "/events")
      .setUrlParams(EventStreamParams)
      .setHeaders(EventStreamHeaders)
      .addSuccess(HttpApiSchema.Text({ contentType: "text/event-stream" }))
      .addError(envelope(ValidationError))
      .addError(envelope(NotFound))
      .addError(envelope(StreamQuotaReached))
      .annotateContext(OpenApi.annotations({
        summary: "Stream events (Server-Sent Events)",
        description:
          "The account's events as they happen, for agents without a public URL: each SSE event has `id` (the webhook's " +
          "webhook-id), `event` (the kind) and `data` (the webhook payload, JSON). A comment line every 15 s keeps proxies " +
          "from closing a quiet stream. Reconnecting with `Last-Event-ID` (or `after`) gets exactly the events missed, in " +
          "order; an id older than 7 days or not the account's is 400. Open streams per account: free 2, pro 10, enterprise " +
          "50 (403 STREAM_QUOTA). A mailbox_id that is not the account's is 404; a stream filtered to a mailbox ends once the mailbox " +
          "is deleted (after the events logged before), and its reconnection is that 404; so does the stream of a key limited to " +
          "mailboxes once every one of them is deleted (its reconnection is 404 with details.mailboxIds). Filters that leave nothing to hear, as for a webhook " +
          "(only kinds that carry no labels with labels, only kinds about no mailbox with mailbox_id or a key limited to mailboxes), are 400 " +
          "with details.types."
      }))
  )

/** The WebSocket (ws.ts), for API keys: the dashboard's browser listens with EventSource. */
const socketEndpoint = HttpApiEndpoint.get("socket", "/ws")
  .addSuccess(Schema.Void.annotations({ description: "Switching Protocols: the WebSocket is open" }), { status: 101 })
  .addError(envelope(ValidationError))
  .annotateContext(OpenApi.annotations({
    summary: "Stream events (WebSocket)",
    description:
      "The same events as /v1/events over a WebSocket, as JSON text messages. Send " +
      "`{\"type\":\"subscribe\",\"types\":[…],\"mailbox_id\":\"…\",\"labels\":[…],\"after\":\"<event id>\"}` (every field optional; " +
      "an event id is an event's `id` as delivered); the server answers `{\"type\":\"subscribed\",\"types\",\"mailbox_id\",\"labels\"}` " +
      "(the filters in force, null where absent), then `{\"type\":\"event\",\"id\",\"event\",\"data\"}` per event and " +
      "`{\"type\":\"heartbeat\"}` every 15 s. A new subscribe replaces the filters and, without `after`, continues " +
      "after the last event delivered; a refused one leaves the socket without a subscription. `types`, when given, " +
      "lists at least one kind; other fields are refused. `{\"type\":\"ping\"}` is answered `{\"type\":\"pong\"}`. Refusals come as " +
      "`{\"type\":\"error\",\"error\":{code,message,details}}` (VALIDATION_ERROR, NOT_FOUND; STREAM_QUOTA then closes " +
      "the socket with 1008). A subscription whose mailbox is deleted is told NOT_FOUND, and the socket is left without a " +
      "subscription; a key limited to mailboxes whose every mailbox is deleted is told NOT_FOUND and the socket closes with 1008. " +
      "On shutdown the socket closes with 1001: reconnect with `after`. A plain GET is 400."
  }))

export class EventsGroup extends eventEndpoints("events")
  .add(socketEndpoint)
  .middleware(ApiAuthentication)
  .prefix("/v1")
  .annotate(OpenApi.Title, "Events")
  .annotate(OpenApi.Description, "Live events on {base_url}, the same payloads webhooks receive")
{}

/**
 * The same stream at /api/events for dashboard sessions: a browser's EventSource sends the session
 * cookie and no Authorization header. A GET, so the same-origin rule for cookie writes does not apply.
 */
export class DashboardEventsGroup extends eventEndpoints("dashboardEvents")
  .middleware(SessionAuthentication)
  .prefix("/api")
  .annotate(OpenApi.Title, "Events (dashboard session)")
  .annotate(OpenApi.Description, "As /v1/events, for the dashboard's cookie session (EventSource)")
{}
