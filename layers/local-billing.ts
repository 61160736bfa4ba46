/**
 * The local payment provider (no `STRIPE_SECRET_KEY`): checkout and portal sessions are secret
 * URLs on the app itself. GET shows a confirm page; POST completes the payment and activates the
 * plan (DESIGN.md §3). Sessions expire after an hour and complete at most once. A checkout link is
 * payable only while the account is on the plan it was made on: confirmed once the account has its
 * plan already, or has changed plan since, it is refused (and says so ever after), nothing charged.
 */
import { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Context, Effect, Layer, Option } from "effect"
import { newId } from "../services/accounts/tokens.ts"
import { Billing } from "../services/billing/billing.ts"
import { PaymentError, PaymentProvider } from "../services/billing/payments.ts"
import type { Plan } from "../services/plans/plans.ts"

const SESSION_LIFETIME_MS = 3600_000

export interface PaymentSession {
  readonly id: string
  readonly kind: "checkout" | "portal"
  readonly userId: string
  readonly plan: Plan | null
  readonly successUrl: string | null
  readonly cancelUrl: string | null
  readonly returnUrl: string | null
  /** `refused`: a checkout confirmed when it could no longer be paid (`refusedOnPlan`); nothing was charged. */
  readonly status: "open" | "completed" | "refused"
  /** When a checkout was paid. */
  readonly completedAt: Date | null
  /** The account's plan when the checkout link was made (null: a link from before it was recorded). */
  readonly madeOnPlan: Plan | null
  /** The account's plan when a refused checkout was confirmed. */
  readonly refusedOnPlan: Plan | null
  /** Past its hour, and not completed in it. */
  readonly expired: boolean
}

/** What the hosted pages need: look a session up, complete a checkout, cancel or resume a plan. */
export class LocalPayments extends Context.Tag("mailroom/LocalPayments")<LocalPayments, {
  /** A session, whatever became of it (open, completed, expired). */
  readonly find: (id: string) => Effect.Effect<Option.Option<PaymentSession>, SqlError>
  /**
   * Confirm a checkout: the plan bought (`changed`), or refused (the account found on its plan already, or
   * on another plan than the link was made on: the session says which); none when the link is used or expired.
   */
  readonly completeCheckout: (id: string) => Effect.Effect<Option.Option<{ readonly session: PaymentSession; readonly changed: boolean }>, SqlError>
  readonly setCancelAtPeriodEnd: (portalId: string, cancel: boolean) => Effect.Effect<Option.Option<PaymentSession>, SqlError>
}>() {}

export const layer = (options: { readonly appUrl: string }) =>
  Layer.effectContext(
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const billing = yield* Billing

      const open = (session: Omit<PaymentSession, "id" | "status" | "completedAt" | "expired" | "madeOnPlan" | "refusedOnPlan">) =>
        Effect.gen(function*() {
          const id = newId(`pay_${session.kind === "checkout" ? "co" : "po"}`)
          // A checkout remembers the plan it is made on: it may change that plan, and no other.
          const current = session.kind === "checkout"
            ? yield* sql<{ plan: Plan }>`SELECT plan FROM subscriptions WHERE user_id = ${session.userId}`
            : []
          yield* sql`INSERT INTO payment_sessions ${
            sql.insert({ id, ...session, madeOnPlan: current[0]?.plan ?? null, expiresAt: new Date(Date.now() + SESSION_LIFETIME_MS) })
          }`
          return { url: `${options.appUrl}/billing/${session.kind}/${id}` }
        }).pipe(Effect.mapError((cause) => new PaymentError({ message: "Could not open a payment session", cause })))

      const provider = PaymentProvider.of({
        checkout: (request) =>
          open({
            kind: "checkout",
            userId: request.userId,
            plan: request.plan,
            successUrl: request.successUrl,
            cancelUrl: request.cancelUrl,
            returnUrl: null
          }),
        portal: (request) =>
          open({ kind: "portal", userId: request.userId, plan: null, successUrl: null, cancelUrl: null, returnUrl: request.returnUrl }),
        // Its payment sessions go with the account's rows; no card was ever kept.
        close: () => Effect.void,
        // Its pages mail nobody.
        emailChanged: () => Effect.void,
        // Payments complete on the app itself: no provider calls back.
        webhook: Option.none()
      })

      const find = (id: string) =>
        sql<PaymentSession>`
          SELECT id, kind, user_id, plan, success_url, cancel_url, return_url, status, completed_at, made_on_plan, refused_on_plan,
                 status = 'open' AND expires_at <= now() AS expired
          FROM payment_sessions WHERE id = ${id}`.pipe(Effect.map((rows) => Option.fromNullable(rows[0])))

      const completeCheckout = (id: string) =>
        Effect.gen(function*() {
          const rows = yield* sql<PaymentSession>`
            UPDATE payment_sessions SET status = 'completed', completed_at = now()
            WHERE id = ${id} AND kind = 'checkout' AND status = 'open' AND expires_at > now()
            RETURNING id, kind, user_id, plan, success_url, cancel_url, return_url, status, completed_at, made_on_plan,
                      refused_on_plan, false AS expired`
          const session = rows[0]
          if (!session?.plan) return Option.none()
          // Confirmed once the account has this plan (a second link of one checkout), or has changed plan
          // since the link was made (links for two plans, one paid): used up, nothing paid or changed twice,
          // and recorded as refused, not paid.
          const current = yield* sql<{ plan: Plan }>`SELECT plan FROM subscriptions WHERE user_id = ${session.userId} FOR UPDATE`
          const found = current[0]?.plan ?? null
          if (found === session.plan || (session.madeOnPlan !== null && found !== session.madeOnPlan)) {
            const refused = yield* sql<PaymentSession>`
              UPDATE payment_sessions SET status = 'refused', completed_at = NULL, refused_on_plan = ${found}
              WHERE id = ${id}
              RETURNING id, kind, user_id, plan, success_url, cancel_url, return_url, status, completed_at, made_on_plan,
                        refused_on_plan, false AS expired`
            return Option.some({ session: refused[0] ?? session, changed: false })
          }
          yield* billing.changePlan(session.userId, session.plan)
          return Option.some({ session, changed: true })
        }).pipe(
          sql.withTransaction,
          // Told again once committed: a node that looked the plan up before the commit drops it now
          // (every cache the plan decides: keys, the mail taken, the webhooks delivered to).
          Effect.tap((completed) => Option.isSome(completed) && completed.value.changed ? billing.planChanged(completed.value.session.userId) : Effect.void)
        )

      const setCancelAtPeriodEnd = (portalId: string, cancel: boolean) =>
        Effect.gen(function*() {
          const session = yield* find(portalId)
          if (Option.isNone(session) || session.value.kind !== "portal" || session.value.expired) return Option.none()
          yield* billing.setCancelAtPeriodEnd(session.value.userId, cancel)
          return session
        })

      return Context.make(PaymentProvider, provider).pipe(
        Context.add(LocalPayments, LocalPayments.of({ find, completeCheckout, setCancelAtPeriodEnd }))
      )
    })
  )
