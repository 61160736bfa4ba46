/**
 * The Stripe payment provider (`STRIPE_SECRET_KEY`).
 *
 * - One Stripe customer per user, created on first need (idempotently: a retried create makes none
 *   twice) and kept on the user's subscription row.
 * - Checkout: a Checkout Session in subscription mode for the plan's price (`STRIPE_PRICE_PRO`,
 *   `STRIPE_PRICE_ENTERPRISE`), carrying the user id so its events find the account. An account that
 *   pays a subscription already changes that one's price instead, on Stripe's hosted confirmation
 *   page (the billing portal's `subscription_update_confirm` flow, which shows the proration): a
 *   second Checkout Session would start a second subscription and charge both. One whose subscription
 *   on record has a payment past due (its plan lapsed to free here or not) is refused until the portal
 *   settles it: Stripe bills it still.
 * - Portal: a Billing Portal session for the customer.
 * - The customer has the account's email, where Stripe mails receipts and invoices: a change of it is
 *   passed on at once, and where Stripe could not be told then, at the next checkout or portal visit.
 * - Closing an account deletes its customer, which ends its subscriptions at once.
 * - Webhooks: `Stripe-Signature` checked with `STRIPE_WEBHOOK_SECRET` over the raw body, and the
 *   events Mailroom acts on turned into BillingEvents (services/billing/events.ts).
 */
import { SqlClient } from "@effect/sql"
import { Effect, Layer, Option, Redacted } from "effect"
// Loaded by the layer, only when STRIPE_SECRET_KEY chooses it: most processes never need the SDK.
import type Stripe from "stripe"
import type { BillingEvent } from "../services/billing/events.ts"
import { PaymentError, PaymentPastDue, PaymentProvider, WebhookRejected } from "../services/billing/payments.ts"
import type { Plan } from "../services/plans/plans.ts"

export interface StripeOptions {
  readonly secretKey: Redacted.Redacted
  readonly webhookSecret: Redacted.Redacted
  readonly prices: { readonly pro: string; readonly enterprise: string }
  /** Another API address (stripe-mock, a test double); default Stripe's own. */
  readonly apiUrl: Option.Option<string>
}

/** An event's envelope as every Stripe event has it, or a throw (caught as a malformed event). */
const readable = (event: Stripe.Event): Stripe.Event => {
  const candidate = event as unknown as { id?: unknown; type?: unknown; created?: unknown; data?: { object?: unknown } } | null
  if (
    typeof candidate !== "object" || candidate === null || Array.isArray(candidate) || typeof candidate.id !== "string" ||
    candidate.id === "" || typeof candidate.type !== "string" || typeof candidate.created !== "number" ||
    typeof candidate.data?.object !== "object" || candidate.data.object === null
  ) throw new Error("not a Stripe event")
  return event
}

/** Seconds since the epoch as a Date; anything else is a field Mailroom cannot read (the event is refused). */
const secondsAt = (value: unknown): Date => {
  if (typeof value !== "number" || !Number.isFinite(value)) throw new Error("not a time")
  return new Date(value * 1000)
}

/**
 * A subscription's current period: on its item since Stripe's API version 2025-03-31 ("basil"), on
 * the subscription itself before it (an account or endpoint pinned to an older version sends that).
 */
const periodOf = (subscription: Stripe.Subscription, item: Stripe.SubscriptionItem) => {
  const fromItem = item as { current_period_start?: unknown; current_period_end?: unknown }
  const older = subscription as { current_period_start?: unknown; current_period_end?: unknown }
  return {
    periodStart: secondsAt(fromItem.current_period_start ?? older.current_period_start),
    periodEnd: secondsAt(fromItem.current_period_end ?? older.current_period_end)
  }
}

/** The subscription an invoice bills and its metadata: under `parent` since "basil", at the top level before. */
const billedBy = (invoice: Stripe.Invoice) => {
  const older = invoice as {
    subscription?: string | { readonly id: string } | null
    subscription_details?: { metadata?: Record<string, string> | null } | null
  }
  const details = invoice.parent?.subscription_details
  return {
    subscription: details?.subscription ?? older.subscription,
    userId: (details?.metadata ?? older.subscription_details?.metadata)?.userId
  }
}

const paymentError = (message: string) => (cause: unknown) => new PaymentError({ message, cause })

const idOf = (value: string | { readonly id: string } | null | undefined) =>
  value === null || value === undefined ? undefined : typeof value === "string" ? value : value.id

/** Stripe's subscription statuses in ours; undefined: not a state that grants or ends anything yet. */
const statusOf = (status: Stripe.Subscription.Status): "active" | "past_due" | "ended" | undefined => {
  switch (status) {
    case "active":
    case "trialing":
      return "active"
    case "past_due":
    case "unpaid":
    case "paused":
      return "past_due"
    case "canceled":
    case "incomplete_expired":
      return "ended"
    case "incomplete":
      return undefined
  }
}

export const layer = (options: StripeOptions) =>
  Layer.effect(
    PaymentProvider,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const api = Option.map(options.apiUrl, (url) => new URL(url))
      const { default: StripeClient } = yield* Effect.promise(() => import("stripe"))
      const stripe = new StripeClient(Redacted.value(options.secretKey), {
        maxNetworkRetries: 2,
        timeout: 10_000,
        ...Option.match(api, {
          onNone: () => ({}),
          onSome: (url) => ({ host: url.hostname, port: url.port || (url.protocol === "https:" ? 443 : 80), protocol: url.protocol.replace(":", "") as "http" | "https" })
        })
      })
      const planOfPrice = (price: string | undefined): Plan | undefined =>
        price === options.prices.pro ? "pro" : price === options.prices.enterprise ? "enterprise" : undefined

      const readCustomer = (userId: string) =>
        sql<{ stripeCustomerId: string | null; stripeCustomerEmail: string | null; email: string }>`
          SELECT s.stripe_customer_id, s.stripe_customer_email, u.email FROM subscriptions s JOIN users u ON u.id = s.user_id
          WHERE s.user_id = ${userId}`.pipe(Effect.map((rows) => rows[0]))

      /** Give the customer the account's email when it has another (the account's changed since). */
      const syncEmail = (userId: string, customer: string, email: string) =>
        Effect.gen(function*() {
          yield* Effect.tryPromise({
            try: () => stripe.customers.update(customer, { email }),
            catch: paymentError("Stripe did not take the account's new email")
          })
          yield* sql`UPDATE subscriptions SET stripe_customer_email = ${email} WHERE user_id = ${userId} AND stripe_customer_id = ${customer}`
        })

      /** The user's Stripe customer, created the first time it is needed, with the account's email. */
      const customerFor = (userId: string) =>
        Effect.gen(function*() {
          const row = yield* readCustomer(userId)
          if (row === undefined) return yield* new PaymentError({ message: "No subscription for this account" })
          if (row.stripeCustomerId !== null) {
            if (row.stripeCustomerEmail !== row.email) yield* syncEmail(userId, row.stripeCustomerId, row.email)
            return row.stripeCustomerId
          }
          const customer = yield* Effect.tryPromise({
            try: () => stripe.customers.create({ email: row.email, metadata: { userId } }, { idempotencyKey: `mailroom-customer-${userId}` }),
            catch: paymentError("Stripe did not create the customer")
          })
          // Two requests at once create one customer (the idempotency key); either write keeps it.
          yield* sql`UPDATE subscriptions SET stripe_customer_id = ${customer.id}, stripe_customer_email = ${row.email}
                     WHERE user_id = ${userId} AND stripe_customer_id IS NULL`
          return customer.id
        }).pipe(Effect.catchTag("SqlError", paymentError("Could not read the account's customer")))

      const toEvent = (event: Stripe.Event): BillingEvent => {
        const common = { eventId: event.id, eventType: event.type, at: new Date(event.created * 1000) }
        switch (event.type) {
          case "checkout.session.completed": {
            const session = event.data.object
            const plan = session.metadata?.plan
            if (session.mode !== "subscription" || (plan !== "pro" && plan !== "enterprise")) {
              return { ...common, kind: "ignored", userId: undefined, customerId: undefined }
            }
            return {
              ...common,
              kind: "checkout-completed",
              userId: session.client_reference_id ?? session.metadata?.userId,
              customerId: idOf(session.customer),
              subscriptionId: idOf(session.subscription),
              plan
            }
          }
          case "customer.subscription.created":
          case "customer.subscription.updated":
          case "customer.subscription.deleted": {
            const subscription = event.data.object
            const who = { userId: subscription.metadata?.userId, customerId: idOf(subscription.customer) }
            const status = event.type === "customer.subscription.deleted" ? "ended" : statusOf(subscription.status)
            const item = subscription.items.data[0]
            const plan = planOfPrice(item?.price.id)
            if (status === "ended") return { ...common, ...who, kind: "subscription-ended", subscriptionId: subscription.id }
            if (status === undefined || plan === undefined || item === undefined) return { ...common, ...who, kind: "ignored" }
            return {
              ...common,
              ...who,
              kind: "subscription-changed",
              subscriptionId: subscription.id,
              plan,
              status,
              ...periodOf(subscription, item),
              cancelAtPeriodEnd: subscription.cancel_at_period_end
            }
          }
          case "invoice.payment_failed": {
            const invoice = event.data.object
            const billed = billedBy(invoice)
            return {
              ...common,
              kind: "payment-failed",
              userId: billed.userId,
              customerId: idOf(invoice.customer),
              subscriptionId: idOf(billed.subscription)
            }
          }
          default:
            return { ...common, kind: "ignored", userId: undefined, customerId: undefined }
        }
      }

      /**
       * The subscription on record that Stripe may still bill, with the item its plan's price is on and
       * its status; none when there is none, or Stripe says it has ended. Asked whatever the plan here:
       * a past_due plan that lapsed to free (housekeeping) keeps its subscription on record, and Stripe
       * keeps billing it.
       */
      const liveSubscription = (userId: string) =>
        Effect.gen(function*() {
          const rows = yield* sql<{ stripeSubscriptionId: string }>`
            SELECT stripe_subscription_id FROM subscriptions
            WHERE user_id = ${userId} AND stripe_subscription_id IS NOT NULL`.pipe(
            Effect.catchTag("SqlError", paymentError("Could not read the account's subscription"))
          )
          const id = rows[0]?.stripeSubscriptionId
          if (id === undefined) return undefined
          const subscription = yield* Effect.tryPromise({
            // One Stripe no longer has (deleted test data, say) is none.
            try: () => stripe.subscriptions.retrieve(id).catch((error) => (error?.code === "resource_missing" ? null : Promise.reject(error))),
            catch: paymentError("Stripe did not answer for the account's subscription")
          })
          if (subscription === null) return undefined
          const status = statusOf(subscription.status)
          if (status === "ended") return undefined
          // Billed but not paid up (past due, unpaid, paused; or its first payment still incomplete).
          if (status !== "active") return { id, status: "past_due" as const }
          const item = subscription.items.data[0]
          return item === undefined ? undefined : { id, status, item: item.id }
        })

      return PaymentProvider.of({
        checkout: (request) =>
          Effect.gen(function*() {
            const customer = yield* customerFor(request.userId)
            const live = yield* liveSubscription(request.userId)
            // A price change would leave its open invoice to be paid beside the new plan; a new
            // subscription would be billed beside it.
            if (live?.status === "past_due") {
              return yield* new PaymentPastDue({
                message: "The account's subscription has a payment past due, and Stripe still bills it: pay it or change the card " +
                  "in the billing portal, or cancel that subscription there, before buying a plan"
              })
            }
            if (live !== undefined) {
              const change = yield* Effect.tryPromise({
                try: () =>
                  stripe.billingPortal.sessions.create({
                    customer,
                    return_url: request.cancelUrl,
                    flow_data: {
                      type: "subscription_update_confirm",
                      subscription_update_confirm: {
                        subscription: live.id,
                        items: [{ id: live.item, price: options.prices[request.plan], quantity: 1 }]
                      },
                      after_completion: { type: "redirect", redirect: { return_url: request.successUrl } }
                    }
                  }),
                catch: paymentError("Stripe did not open the page that changes the subscription's plan")
              })
              return { url: change.url }
            }
            const session = yield* Effect.tryPromise({
              try: () =>
                stripe.checkout.sessions.create({
                  mode: "subscription",
                  customer,
                  line_items: [{ price: options.prices[request.plan], quantity: 1 }],
                  success_url: request.successUrl,
                  cancel_url: request.cancelUrl,
                  client_reference_id: request.userId,
                  metadata: { userId: request.userId, plan: request.plan },
                  subscription_data: { metadata: { userId: request.userId, plan: request.plan } }
                }),
              catch: paymentError("Stripe did not open a checkout session")
            })
            if (session.url === null) return yield* new PaymentError({ message: "Stripe answered a checkout session without a URL" })
            return { url: session.url }
          }),
        portal: (request) =>
          Effect.gen(function*() {
            const customer = yield* customerFor(request.userId)
            const session = yield* Effect.tryPromise({
              try: () => stripe.billingPortal.sessions.create({ customer, return_url: request.returnUrl }),
              catch: paymentError("Stripe did not open a portal session")
            })
            return { url: session.url }
          }),
        // Deleting the customer ends its subscriptions at once and removes its payment methods; one
        // Stripe no longer has is gone already.
        close: (userId) =>
          Effect.gen(function*() {
            const rows = yield* sql<{ stripeCustomerId: string | null }>`
              SELECT stripe_customer_id FROM subscriptions WHERE user_id = ${userId}`.pipe(
              Effect.catchTag("SqlError", paymentError("Could not read the account's customer"))
            )
            const customer = rows[0]?.stripeCustomerId
            if (customer === null || customer === undefined) return
            yield* Effect.tryPromise({
              try: () => stripe.customers.del(customer).catch((error) => (error?.code === "resource_missing" ? null : Promise.reject(error))),
              catch: paymentError("Stripe did not delete the customer")
            })
          }),
        emailChanged: (userId) =>
          Effect.gen(function*() {
            const row = yield* readCustomer(userId)
            if (row === undefined || row.stripeCustomerId === null || row.stripeCustomerEmail === row.email) return
            yield* syncEmail(userId, row.stripeCustomerId, row.email)
          }).pipe(Effect.catchTag("SqlError", paymentError("Could not read the account's customer"))),
        webhook: Option.some((body, signature) =>
          Effect.try({
            try: () => stripe.webhooks.constructEvent(body, signature ?? "", Redacted.value(options.webhookSecret)),
            // The signature is checked before the body is parsed: any other failure is a signed body that is not JSON.
            catch: (error) =>
              (error as { type?: unknown } | null)?.type === "StripeSignatureVerificationError"
                ? new WebhookRejected({ signed: false, message: `Stripe-Signature does not verify: ${(error as Error).message}` })
                : new WebhookRejected({ signed: true, message: "The signed body is not JSON" })
          }).pipe(
            Effect.flatMap((event) =>
              Effect.try({
                try: () => toEvent(readable(event)),
                catch: () =>
                  new WebhookRejected({
                    signed: true,
                    message: `The signed event${typeof event?.type === "string" ? ` (${event.type})` : ""} lacks fields Mailroom reads; it was not applied`
                  })
              })
            )
          ))
      })
    })
  )
