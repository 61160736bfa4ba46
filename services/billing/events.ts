/**
 * What a payment provider tells us about a subscription, in our terms: the provider adapter turns
 * its own events (Stripe's, say) into these, and Billing applies them.
 *
 * Each carries the provider's event id (applied once) and the time the provider produced it: a state
 * older than the one applied already is ignored, so events arriving out of order end in the newest
 * state.
 */
import type { Plan } from "../plans/plans.ts"

interface Common {
  /** The provider's event id: an event is applied once. */
  readonly eventId: string
  readonly eventType: string
  /** When the provider produced the event. */
  readonly at: Date
  /** Whose: from our metadata on the provider's objects, when it is there. */
  readonly userId: string | undefined
  readonly customerId: string | undefined
}

export type BillingEvent =
  /** A checkout was paid: the plan starts now. */
  | Common & {
    readonly kind: "checkout-completed"
    readonly subscriptionId: string | undefined
    readonly plan: Exclude<Plan, "free">
  }
  /** The subscription as the provider has it now. */
  | Common & {
    readonly kind: "subscription-changed"
    readonly subscriptionId: string
    readonly plan: Plan
    readonly status: "active" | "past_due" | "canceled"
    readonly periodStart: Date
    readonly periodEnd: Date
    readonly cancelAtPeriodEnd: boolean
  }
  /** The subscription ended (at its period end, or at once): back to free. */
  | Common & { readonly kind: "subscription-ended"; readonly subscriptionId: string }
  /** A renewal payment failed: past_due, the plan kept for the grace period. */
  | Common & { readonly kind: "payment-failed"; readonly subscriptionId: string | undefined }
  /** Anything else the provider sends: acknowledged, not applied. */
  | Common & { readonly kind: "ignored" }

/** How long a past_due subscription keeps its paid plan after its period ended. */
export const PAST_DUE_GRACE_DAYS = 7
