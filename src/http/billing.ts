import { HttpApiBuilder } from "@effect/platform"
import { Effect, Option } from "effect"
import { Accounts } from "../../services/accounts/accounts.ts"
import { CurrentPrincipal } from "../../services/accounts/principal.ts"
import { Billing } from "../../services/billing/billing.ts"
import { PaymentProvider } from "../../services/billing/payments.ts"
import { Conflict, ServiceUnavailable, Unauthorized, ValidationError } from "../../services/errors.ts"
import { MailroomApi } from "./api.ts"
import { orUnavailable } from "./infra.ts"

export const BillingHandlers = HttpApiBuilder.group(MailroomApi, "billing", (handlers) =>
  Effect.gen(function*() {
    const billing = yield* Billing
    const accounts = yield* Accounts
    const payments = yield* PaymentProvider
    const providerDown = () => ServiceUnavailable.of("The payment provider is not reachable, retry shortly")

    return handlers
      .handle("subscription", () =>
        CurrentPrincipal.pipe(
          Effect.flatMap(({ userId }) => billing.subscription(userId)),
          orUnavailable,
          Effect.map((data) => ({ success: true as const, data }))
        ))
      .handle("usage", () =>
        CurrentPrincipal.pipe(
          Effect.flatMap(({ userId }) => billing.usage(userId)),
          orUnavailable,
          Effect.map((data) => ({ success: true as const, data }))
        ))
      .handle("checkout", ({ payload }) =>
        Effect.gen(function*() {
          const { userId } = yield* CurrentPrincipal
          const plan = payload.plan
          if (plan === "free") {
            return yield* ValidationError.field("plan", "free needs no checkout; cancel a paid plan from the billing portal")
          }
          const current = yield* billing.subscription(userId)
          if (current.plan === plan && current.status === "active") {
            return yield* Conflict.of({ message: `Already on the ${plan} plan`, details: { plan } })
          }
          const user = yield* accounts.findUser(userId)
          if (Option.isNone(user)) return yield* Unauthorized.of("Unknown account")
          const session = yield* payments.checkout({
            userId,
            email: user.value.email,
            plan,
            successUrl: payload.successUrl,
            cancelUrl: payload.cancelUrl
          }).pipe(Effect.mapError(providerDown))
          return { success: true as const, data: { url: session.url } }
        }).pipe(orUnavailable))
      .handle("portal", ({ payload }) =>
        Effect.gen(function*() {
          const { userId } = yield* CurrentPrincipal
          const session = yield* payments.portal({ userId, returnUrl: payload.returnUrl }).pipe(Effect.mapError(providerDown))
          return { success: true as const, data: { url: session.url } }
        }).pipe(orUnavailable))
  }))
