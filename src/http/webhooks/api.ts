/** Webhook endpoints on `{base_url}/api` (SPEC "Webhooks") and their delivery log (DESIGN.md §4): the contract. */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { ListMeta, ListParams } from "../../../services/listing.ts"
import {
  CreatedWebhook,
  CreateWebhookInput,
  DeletedWebhook,
  Delivery,
  TestDelivery,
  TestWebhookInput,
  UpdatedWebhook,
  UpdateWebhookInput,
  Webhook,
  WebhookListItem
} from "../../../services/webhooks/schemas.ts"
import { webhookSortFields } from "../../../services/webhooks/schemas.ts"
import { Ok, OkWithMeta } from "../envelope.ts"
import { Conflict, NotFound, PayloadTooLarge, UnsupportedMediaType, ValidationError, WebhookQuotaReached } from "../../../services/errors.ts"
import { envelope } from "../errors.ts"
import { ApiAuthentication, SessionAuthentication } from "../security.ts"

export const WebhookPath = Schema.Struct({ id: Schema.String })
export const DeliveryPath = Schema.Struct({ id: Schema.String, deliveryId: Schema.String })

/** A delivery log, newest first unless `sort=created_at:asc`. */
export const DeliveryListParams = ListParams(["created_at"] as const)

const webhookEndpoints = <const Name extends string>(name: Name) =>
  HttpApiGroup.make(name)
  .add(
    HttpApiEndpoint.get("list", "/webhooks")
      .setUrlParams(ListParams(webhookSortFields, { createdAt: "created_at" }))
      .addSuccess(OkWithMeta(Schema.Array(WebhookListItem), ListMeta))
      .annotateContext(OpenApi.annotations({ summary: "List webhooks", description: "Secrets masked; the creation time is spelled createdAt here" }))
  )
  .add(
    HttpApiEndpoint.post("create", "/webhooks")
      .setPayload(CreateWebhookInput)
      .addSuccess(Ok(CreatedWebhook), { status: 201 })
      .addError(envelope(ValidationError))
      .addError(envelope(WebhookQuotaReached))
      .annotateContext(OpenApi.annotations({
        summary: "Create a webhook",
        description: "The full secret is in this answer only; over the plan's endpoint limit: 403 WEBHOOK_QUOTA"
      }))
  )
  .add(
    HttpApiEndpoint.get("get", "/webhooks/:id")
      .setPath(WebhookPath)
      .addSuccess(Ok(Webhook))
      .addError(envelope(NotFound))
      .annotateContext(OpenApi.annotations({ summary: "Get a webhook", description: "The endpoint with its secret masked" }))
  )
  .add(
    HttpApiEndpoint.patch("update", "/webhooks/:id")
      .setPath(WebhookPath)
      .setPayload(UpdateWebhookInput)
      .addSuccess(Ok(UpdatedWebhook))
      .addError(envelope(ValidationError))
      .addError(envelope(NotFound))
      .annotateContext(OpenApi.annotations({
        summary: "Update a webhook",
        description: "Every field optional; a changed secret is answered in full, once"
      }))
  )
  .add(
    HttpApiEndpoint.del("remove", "/webhooks/:id")
      .setPath(WebhookPath)
      .addSuccess(Ok(DeletedWebhook))
      .addError(envelope(NotFound))
      .annotateContext(OpenApi.annotations({ summary: "Delete a webhook", description: "No more deliveries are made to it" }))
  )
  .add(
    HttpApiEndpoint.get("deliveries", "/webhooks/:id/deliveries")
      .setPath(WebhookPath)
      .setUrlParams(DeliveryListParams)
      .addSuccess(OkWithMeta(Schema.Array(Delivery), ListMeta))
      .addError(envelope(NotFound))
      .annotateContext(OpenApi.annotations({
        summary: "List a webhook's deliveries",
        description: "Every delivery to this endpoint, newest first, with each attempt's status, duration and error. A key " +
          "limited to mailboxes sees only the deliveries of events about its mailboxes (the webhook may have listened to " +
          "the whole account before it was narrowed)"
      }))
  )
  .add(
    HttpApiEndpoint.post("test", "/webhooks/:id/test")
      .setPath(WebhookPath)
      .setUrlParams(TestWebhookInput)
      .addSuccess(Ok(TestDelivery))
      .addError(envelope(ValidationError))
      .addError(envelope(NotFound))
      // Its optional {"event"} body is read by the handler (http.ts), not declared, but is held to the same limits.
      .addError(envelope(PayloadTooLarge))
      .addError(envelope(UnsupportedMediaType))
      .annotateContext(OpenApi.annotations({
        summary: "Send a test event",
        description: "Posts an example event of the kind asked (?event=<kind>, or {\"event\"} in a JSON body; the webhook's first by default) to the endpoint, signed as every " +
          "delivery is, once, and answers what the endpoint answered and the body sent. The webhook-id is test_…; nothing is " +
          "logged as a delivery. A disabled webhook can be tested."
      }))
  )
  .add(
    HttpApiEndpoint.post("resend", "/webhooks/:id/deliveries/:deliveryId/resend")
      .setPath(DeliveryPath)
      .addSuccess(Ok(Delivery))
      .addError(envelope(NotFound))
      .addError(envelope(Conflict))
      .annotateContext(OpenApi.annotations({
        summary: "Send a delivery again",
        description: "One more attempt of a finished delivery (failed, canceled or succeeded), now: the same event, body and " +
          "webhook-id, numbered after its last attempt; the delivery's status becomes that attempt's. 409 CONFLICT while it " +
          "is still under way or being sent again already, while the webhook is disabled, or once the event is no longer kept (7 days). A key limited to " +
          "mailboxes sends again only deliveries it can list."
      }))
  )

export class WebhooksGroup extends webhookEndpoints("webhooks")
  .middleware(ApiAuthentication)
  .prefix("/v1/api")
  .annotate(OpenApi.Title, "Webhooks")
  .annotate(OpenApi.Description, "Endpoints that receive signed event notifications (see the document's webhooks for the payloads)")
{}

/** The same routes under /api for dashboard sessions. */
export class DashboardWebhooksGroup extends webhookEndpoints("dashboardWebhooks")
  .middleware(SessionAuthentication)
  .prefix("/api")
  .annotate(OpenApi.Title, "Webhooks (dashboard session)")
  .annotate(OpenApi.Description, "As /v1/api/webhooks, for the dashboard's cookie session")
{}
