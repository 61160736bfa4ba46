/**
 * The payment provider port: hosted checkout and customer-portal pages. Adapters: Stripe, and the
 * local provider whose pages live on the app itself (DESIGN.md §3).
 */
import { Context, Data, type Effect, type Option } from "effect"
import type { Plan } from "../plans/plans.ts"
import type { BillingEvent } from "./events.ts"

export class PaymentError extends Data.TaggedError("PaymentError")<{
  readonly message: string
  readonly cause?: unknown
}> {}

/** A provider webhook that is not genuine (bad or missing signature, or unreadable). */
/**
 * A provider's webhook call refused: its signature does not verify (`signed: false`), or it does but
 * the body is no event of the provider's that can be read (`signed: true`).
 */
export class WebhookRejected extends Data.TaggedError("WebhookRejected")<{ readonly message: string; readonly signed: boolean }> {}

/**
 * No checkout while the account has a subscription the provider may still bill with a payment past due
 * on it (a lapsed one included: on free here, still billed there): another would be paid beside it. The
 * portal pays it, changes the card, or cancels it; then a checkout opens.
 */
export class PaymentPastDue extends Data.TaggedError("PaymentPastDue")<{ readonly message: string }> {}

export interface CheckoutRequest {
  readonly userId: string
  readonly plan: Exclude<Plan, "free">
  readonly successUrl: string
  readonly cancelUrl: string
}

export interface PortalRequest {
  readonly userId: string
  readonly returnUrl: string
}

export class PaymentProvider extends Context.Tag("mailroom/PaymentProvider")<PaymentProvider, {
  /** Address of a hosted page where the user pays for `plan`. */
  readonly checkout: (request: CheckoutRequest) => Effect.Effect<{ readonly url: string }, PaymentError | PaymentPastDue>
  /** Address of a hosted page where the user manages payment methods, invoices and cancellation. */
  readonly portal: (request: PortalRequest) => Effect.Effect<{ readonly url: string }, PaymentError>
  /**
   * Stop charging the account for good and forget its payment details (its subscription ends now,
   * unpaid time is not refunded): the account is being deleted. Nothing to do for one that never paid.
   */
  readonly close: (userId: string) => Effect.Effect<void, PaymentError>
  /**
   * The account's email changed: the provider mails receipts and invoices to the new one from now on.
   * Nothing to do for one that never paid. A provider that could not be told is told again by the next
   * `checkout` or `portal`.
   */
  readonly emailChanged: (userId: string) => Effect.Effect<void, PaymentError>
  /**
   * Check a provider webhook (the raw body and its signature header) and say what it means. None when
   * the provider sends no webhooks (the local provider completes payments itself).
   */
  readonly webhook: Option.Option<(body: string, signature: string | undefined) => Effect.Effect<BillingEvent, WebhookRejected>>
}>() {}
