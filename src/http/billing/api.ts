/** Billing on `{base_url}` (subscription, usage, checkout, portal) and Stripe's webhook: the contract. */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { Subscription, Usage } from "../../../services/billing/schemas.ts"
import { Plan } from "../../../services/plans/plans.ts"
import { Ok } from "../envelope.ts"
import { BadRequest, Conflict, InvalidSignature, NotFound, PayloadTooLarge, UnsupportedMediaType, ValidationError } from "../../../services/errors.ts"
import { envelope } from "../errors.ts"
import { ApiAuthentication, SessionAuthentication } from "../security.ts"
import { rule } from "../../../services/schema-rules.ts"

const HttpUrl = Schema.String.pipe(
  rule((value) => {
    try {
      const url = new URL(value)
      return url.protocol === "https:" || url.protocol === "http:" ? undefined : "must be an http(s) URL"
    } catch {
      return "must be a valid URL"
    }
  })
)

export const CheckoutInput = Schema.Struct({
  // Decoded as any plan, so that free is answered by name (400 "free needs no checkout"); offered as the paid ones.
  plan: Plan.annotations({
    jsonSchema: { enum: ["pro", "enterprise"] },
    description: "The paid plan to subscribe to: free needs no checkout (a paid plan is cancelled from the billing portal)"
  }),
  successUrl: HttpUrl,
  cancelUrl: HttpUrl
}).annotations({ identifier: "CheckoutInput", parseOptions: { errors: "all" } })

export const PortalInput = Schema.Struct({ returnUrl: HttpUrl }).annotations({
  identifier: "PortalInput",
  parseOptions: { errors: "all" }
})

const SessionUrl = Schema.Struct({ url: Schema.String.annotations({ description: "Hosted page to send the user to" }) })

const billingEndpoints = <const Name extends string>(name: Name) =>
  HttpApiGroup.make(name)
  .add(
    HttpApiEndpoint.get("subscription", "/billing/subscription")
      .addSuccess(Ok(Subscription))
      .addError(envelope(NotFound))
      .annotateContext(OpenApi.annotations({
        summary: "Get the subscription",
        description: "The account's plan, its status and the current billing period"
      }))
  )
  .add(
    HttpApiEndpoint.get("usage", "/billing/usage")
      .addSuccess(Ok(Usage))
      .addError(envelope(NotFound))
      .annotateContext(OpenApi.annotations({
        summary: "Get usage",
        description: "Emails, searches and storage used in the current billing period, against the plan's limits (storage in bytes)"
      }))
  )
  .add(
    HttpApiEndpoint.post("checkout", "/billing/checkout")
      .setPayload(CheckoutInput)
      .addSuccess(Ok(SessionUrl))
      .addError(envelope(ValidationError))
      .addError(envelope(NotFound))
      .addError(envelope(Conflict))
      .annotateContext(OpenApi.annotations({
        summary: "Start a checkout",
        description: "Answers the hosted payment page to send the user to. The plan the account is on already, or a payment past due on its subscription at Stripe, is 409 CONFLICT; free needs no checkout (400)"
      }))
  )
  .add(
    HttpApiEndpoint.post("portal", "/billing/portal")
      .setPayload(PortalInput)
      .addSuccess(Ok(SessionUrl))
      .annotateContext(OpenApi.annotations({
        summary: "Open the billing portal",
        description: "Answers a customer portal page for payment methods, invoices and cancelling"
      }))
  )

export class BillingGroup extends billingEndpoints("billing")
  .middleware(ApiAuthentication)
  .prefix("/v1")
  .annotate(OpenApi.Title, "Billing")
  .annotate(OpenApi.Description, "Subscription, usage, checkout and the billing portal on {base_url}")
{}

/** The same routes under /api for dashboard sessions: the dashboard's billing page. */
export class DashboardBillingGroup extends billingEndpoints("dashboardBilling")
  .middleware(SessionAuthentication)
  .prefix("/api")
  .annotate(OpenApi.Title, "Billing (dashboard session)")
  .annotate(OpenApi.Description, "As /v1/billing, for the dashboard's cookie session")
{}

/** Stripe calls this; it proves itself with `Stripe-Signature`, not a key. */
export class BillingWebhookGroup extends HttpApiGroup.make("billingWebhook")
  .add(
    HttpApiEndpoint.post("webhook", "/billing/webhook")
      .addSuccess(Ok(Schema.Struct({ received: Schema.Literal(true) })))
      .addError(envelope(BadRequest))
      .addError(envelope(InvalidSignature))
      .addError(envelope(NotFound))
      // Its body (Stripe's JSON, read whole to check the signature) is no declared payload, but is held to the same limits.
      .addError(envelope(PayloadTooLarge))
      .addError(envelope(UnsupportedMediaType))
      .annotate(OpenApi.Summary, "Receive Stripe's events")
      .annotate(
        OpenApi.Description,
        "Stripe's events (signed with STRIPE_WEBHOOK_SECRET): checkout.session.completed, customer.subscription.*, invoice.payment_failed. A bad signature is 400 INVALID_SIGNATURE; 404 without Stripe configured"
      )
  )
  .prefix("/v1")
  .annotate(OpenApi.Title, "Billing webhook")
  .annotate(OpenApi.Description, "Called by the payment provider, not by clients")
{}
