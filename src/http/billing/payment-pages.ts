/**
 * The hosted pages of the local payment provider: `GET /billing/checkout/:id` shows what is being
 * bought, `POST` completes it and redirects to the caller's successUrl; `/billing/portal/:id` shows
 * the subscription and lets the user cancel at period end or resume.
 *
 * The database out of reach is the pages' "try again in a moment" (503), never an account without a
 * plan: a checkout shown during an outage would offer a purchase as if from the free plan.
 */
import { HttpApiBuilder, HttpRouter, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect, Layer, Option, Schema } from "effect"
import { Billing } from "../../../services/billing/billing.ts"
import { DependencyHealth } from "../../../services/health/dependency-health.ts"
import { escapeHtml } from "../../../services/html.ts"
import { Plan } from "../../../services/plans/plans.ts"
import { LocalPayments, type PaymentSession } from "../../../layers/local-billing.ts"
import { page, pageOrUnavailable } from "../pages.ts"

const gone = page("This link has expired", `<p class="muted">Start again from your application.</p>`, 404)
const unknown = page("No such payment link", `<p class="muted">Check the link, or start again from your application.</p>`, 404)

/** A checkout link used already (pressed twice, or opened again): said so, nothing charged again. */
const paid = (session: PaymentSession, status: 200 | 409) =>
  page(
    "Already paid",
    `<p>This purchase of the <strong>${escapeHtml(planName(session.plan ?? ""))}</strong> plan was completed${
      session.completedAt === null ? "" : ` on ${escapeHtml(new Date(session.completedAt).toUTCString())}`
    }: nothing more was charged.</p>
<p><a href="${escapeHtml(session.successUrl ?? "/")}">Continue</a></p>`,
    status
  )

/** The page of a session that is not there to use: unknown, paid already, refused, or expired. */
const notOpen = (session: Option.Option<PaymentSession>, status: 200 | 409) =>
  Option.isNone(session)
    ? unknown
    : session.value.kind === "checkout" && session.value.status === "completed"
    ? paid(session.value, status)
    : session.value.kind === "checkout" && session.value.status === "refused"
    ? refusal(session.value, session.value.refusedOnPlan)
    : gone

/** The pages' forms (input-rules.ts `readsForm`). */
export const paymentForms = [/^\/billing\/checkout\/[^/]+$/, /^\/billing\/portal\/[^/]+$/]

const planName = (plan: string) => plan.charAt(0).toUpperCase() + plan.slice(1)

/** "Upgrade to Enterprise" from Pro, "Change to Pro" from Enterprise: the plans in their order. */
const changeTitle = (from: Plan | undefined, to: Plan) =>
  `${from !== undefined && Plan.literals.indexOf(from) > Plan.literals.indexOf(to) ? "Change" : "Upgrade"} to ${planName(to)}`

/** A checkout of the plan the account has already (another link of the same purchase): nothing to pay. */
const alreadyOn = (plan: string, successUrl: string | null) =>
  page(
    `Already on ${planName(plan)}`,
    `<p>This account is on the <strong>${escapeHtml(planName(plan))}</strong> plan already: nothing was charged or changed.</p>
<p><a href="${escapeHtml(successUrl ?? "/")}">Continue</a></p>`,
    409
  )

/**
 * A checkout link made on another plan than the account has now (another link was paid since, say):
 * it may no longer be paid, so that nothing is paid or changed twice.
 */
const changedSince = (session: PaymentSession, now: Plan | null) =>
  page(
    "Plan changed since",
    `<p>This link was made while the account was on the <strong>${escapeHtml(planName(session.madeOnPlan ?? ""))}</strong> plan; it is on ${
      now === null ? "another plan" : `the <strong>${escapeHtml(planName(now))}</strong> plan`
    } now, so this link to the <strong>${escapeHtml(planName(session.plan ?? ""))}</strong> plan can no longer be used: nothing was charged or changed.</p>
<p class="muted">To change plan, start again from your application.</p>
<p><a href="${escapeHtml(session.cancelUrl ?? "/")}">Continue</a></p>`,
    409
  )

/** Why a checkout link is not to be paid on the account's plan `now` (undefined: it may be). */
const refusalFor = (session: PaymentSession, now: Plan | null) =>
  now !== null && now === session.plan
    ? alreadyOn(now, session.successUrl)
    : session.madeOnPlan !== null && now !== session.madeOnPlan
    ? changedSince(session, now)
    : undefined

/** A refused checkout's page, as its confirmation answered: nothing charged. */
const refusal = (session: PaymentSession, now: Plan | null) => refusalFor(session, now) ?? changedSince(session, now)

/** The pages over the Billing given (PaymentPagesLive's own, or a test's stand-in). */
export const PaymentPages = HttpApiBuilder.Router.use((router) =>
  Effect.gen(function*() {
    // Mounted only with the local provider: Stripe hosts its own pages.
    const local = yield* Effect.serviceOption(LocalPayments)
    if (Option.isNone(local)) return
    const payments = local.value
    const billing = yield* Billing
    const health = yield* DependencyHealth
    const answered = pageOrUnavailable(health)
    const sessionId = Effect.map(HttpRouter.params, (params) => params.id ?? "")

    yield* router.get(
      "/billing/checkout/:id",
      Effect.gen(function*() {
        const session = yield* payments.find(yield* sessionId)
        if (Option.isNone(session) || session.value.kind !== "checkout" || !session.value.plan) return unknown
        if (session.value.status !== "open" || session.value.expired) return notOpen(session, 200)
        const { plan, cancelUrl, userId } = session.value
        // No subscription on record is no plan; the database failing is not (answered 503, below).
        const current = yield* billing.subscription(userId).pipe(
          Effect.map(Option.some),
          Effect.catchTag("NotFound", () => Effect.succeedNone)
        )
        const refused = Option.isSome(current) ? refusalFor(session.value, current.value.plan) : undefined
        if (refused !== undefined) return refused
        return page(
          changeTitle(Option.getOrUndefined(current)?.plan, plan),
          `<p>Confirm to activate the <strong>${escapeHtml(planName(plan))}</strong> plan now.</p>
<p class="muted">Local payment provider: no card is charged.</p>
<form method="post"><button type="submit">Confirm and pay</button></form>
<p><a href="${escapeHtml(cancelUrl ?? "/")}">Cancel</a></p>`
        )
      }).pipe(answered)
    )

    yield* router.post(
      "/billing/checkout/:id",
      Effect.gen(function*() {
        const id = yield* sessionId
        const completed = yield* payments.completeCheckout(id)
        if (Option.isNone(completed)) return notOpen(yield* payments.find(id), 409)
        const { changed, session } = completed.value
        if (!changed) return refusal(session, session.refusedOnPlan)
        return HttpServerResponse.redirect(session.successUrl ?? "/", { status: 303 })
      }).pipe(answered)
    )

    yield* router.get(
      "/billing/portal/:id",
      Effect.gen(function*() {
        const session = yield* payments.find(yield* sessionId)
        if (Option.isNone(session) || session.value.kind !== "portal") return unknown
        if (session.value.expired) return gone
        const found = yield* billing.subscription(session.value.userId).pipe(
          Effect.map(Option.some),
          Effect.catchTag("NotFound", () => Effect.succeedNone)
        )
        // The account is gone (its sessions with it, but for a moment): the link leads nowhere.
        if (Option.isNone(found)) return unknown
        const subscription = found.value
        const end = new Date(subscription.currentPeriodEnd).toUTCString()
        const action = subscription.plan === "free"
          ? ""
          : subscription.cancelAtPeriodEnd
          ? `<p>Your plan ends on ${escapeHtml(end)}.</p><form method="post"><input type="hidden" name="action" value="resume"><button>Keep my plan</button></form>`
          : `<p>Renews on ${escapeHtml(end)}.</p><form method="post"><input type="hidden" name="action" value="cancel"><button>Cancel at period end</button></form>`
        return page(
          "Billing",
          `<p>Plan: <strong>${escapeHtml(planName(subscription.plan))}</strong> (${escapeHtml(subscription.status)})</p>${action}
<p><a href="${escapeHtml(session.value.returnUrl ?? "/")}">Return</a></p>`
        )
      }).pipe(answered)
    )

    yield* router.post(
      "/billing/portal/:id",
      Effect.gen(function*() {
        const id = yield* sessionId
        // The page's own form is URL-encoded; anything else (multipart included) is read the same way and finds no action.
        const form = yield* HttpServerRequest.schemaBodyUrlParams(Schema.Struct({ action: Schema.Literal("cancel", "resume") })).pipe(
          Effect.option
        )
        if (Option.isNone(form)) return page("Unknown action", `<p><a href="${escapeHtml(id)}">Back</a></p>`, 400)
        const updated = yield* payments.setCancelAtPeriodEnd(id, form.value.action === "cancel")
        if (Option.isNone(updated)) return notOpen(yield* payments.find(id), 409)
        return HttpServerResponse.redirect(`/billing/portal/${encodeURIComponent(id)}`, { status: 303 })
      }).pipe(answered)
    )
  })
)

export const PaymentPagesLive = PaymentPages.pipe(Layer.provide(Billing.Default))
