import { HttpApiBuilder, HttpServerRequest } from "@effect/platform"
import { Effect, Layer, Option } from "effect"
import { CurrentPrincipal } from "../../../services/accounts/principal.ts"
import { Billing } from "../../../services/billing/billing.ts"
import { PaymentProvider } from "../../../services/billing/payments.ts"
import { BadRequest, Conflict, InvalidSignature, NotFound, ServiceUnavailable, ValidationError } from "../../../services/errors.ts"
import { MailroomApi } from "../api.ts"
import { orUnavailable } from "../infra.ts"
import type { CheckoutInput, PortalInput } from "./api.ts"

/** One set of handlers, served under /v1 (API keys) and /api (dashboard sessions). */
const makeHandlers = Effect.gen(function*() {
    const billing = yield* Billing
    const payments = yield* PaymentProvider
    const providerDown = () => ServiceUnavailable.of("The payment provider is not reachable, retry shortly")

    return {
      subscription: () =>
        CurrentPrincipal.pipe(
          Effect.flatMap(({ userId }) => billing.subscription(userId)),
          orUnavailable,
          Effect.map((data) => ({ success: true as const, data }))
        ),
      usage: () =>
        CurrentPrincipal.pipe(
          Effect.flatMap(({ userId }) => billing.usage(userId)),
          orUnavailable,
          Effect.map((data) => ({ success: true as const, data }))
        ),
      checkout: ({ payload }: { readonly payload: typeof CheckoutInput.Type }) =>
        Effect.gen(function*() {
          const { userId } = yield* CurrentPrincipal
          const plan = payload.plan
          if (plan === "free") {
            return yield* ValidationError.field("plan", "free needs no checkout; cancel a paid plan from the billing portal")
          }
          const current = yield* billing.subscription(userId)
          // The plan it has: nothing to buy. A payment past due is paid, or the card changed, in the portal.
          if (current.plan === plan) {
            return yield* new Conflict({
              message: current.status === "past_due"
                ? `Already on the ${plan} plan, with a payment past due: pay it or change the card in the billing portal`
                : `Already on the ${plan} plan`,
              details: { plan, status: current.status }
            })
          }
          const session = yield* payments.checkout({
            userId,
            plan,
            successUrl: payload.successUrl,
            cancelUrl: payload.cancelUrl
          }).pipe(
            Effect.catchTag("PaymentPastDue", (due) => new Conflict({ message: due.message, details: { plan, status: "past_due" } })),
            Effect.mapError((error) => error._tag === "PaymentError" ? providerDown() : error)
          )
          return { success: true as const, data: { url: session.url } }
        }).pipe(orUnavailable),
      portal: ({ payload }: { readonly payload: typeof PortalInput.Type }) =>
        Effect.gen(function*() {
          const { userId } = yield* CurrentPrincipal
          const session = yield* payments.portal({ userId, returnUrl: payload.returnUrl }).pipe(Effect.mapError(providerDown))
          return { success: true as const, data: { url: session.url } }
        }).pipe(orUnavailable)
    }
  })

export const BillingHandlers = HttpApiBuilder.group(MailroomApi, "billing", (handlers) =>
  Effect.map(makeHandlers, (h) =>
    handlers.handle("subscription", h.subscription).handle("usage", h.usage).handle("checkout", h.checkout).handle("portal", h.portal))
).pipe(Layer.provide(Billing.Default))

export const DashboardBillingHandlers = HttpApiBuilder.group(MailroomApi, "dashboardBilling", (handlers) =>
  Effect.map(makeHandlers, (h) =>
    handlers.handle("subscription", h.subscription).handle("usage", h.usage).handle("checkout", h.checkout).handle("portal", h.portal))
).pipe(Layer.provide(Billing.Default))

/**
 * The payment provider's webhook: verified over the raw body, applied once per event, newest state
 * winning. 400 INVALID_SIGNATURE when it does not verify (the provider keeps retrying a genuine one
 * that failed for another reason, answered 5xx).
 */
export const BillingWebhookHandlers = HttpApiBuilder.group(MailroomApi, "billingWebhook", (handlers) =>
  Effect.gen(function*() {
    const billing = yield* Billing
    const payments = yield* PaymentProvider
    return handlers.handle("webhook", () =>
      Effect.gen(function*() {
        if (Option.isNone(payments.webhook)) {
          return yield* new NotFound({ message: "No payment provider webhook is configured (local billing)" })
        }
        const request = yield* HttpServerRequest.HttpServerRequest
        const body = yield* Effect.orElseFail(request.text, () => new BadRequest({ message: "The request body could not be read" }))
        const event = yield* payments.webhook.value(body, request.headers["stripe-signature"]).pipe(
          Effect.mapError((rejected) => rejected.signed ? new BadRequest({ message: rejected.message }) : new InvalidSignature({ message: rejected.message }))
        )
        const outcome = yield* billing.applyEvent(event)
        yield* Effect.logInfo("Payment provider event").pipe(
          Effect.annotateLogs({ eventId: event.eventId, type: event.eventType, outcome })
        )
        return { success: true as const, data: { received: true as const } }
      }).pipe(orUnavailable))
  })).pipe(Layer.provide(Billing.Default))
