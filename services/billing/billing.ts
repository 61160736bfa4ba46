/**
 * Subscriptions and usage, read side (SPEC "Billing"). Every user holds one subscription row from
 * registration on; usage is counted per billing period.
 */
import { SqlClient, SqlSchema } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Clock, Effect, Option, Schema } from "effect"
import { NotFound } from "../errors.ts"
import { makePlanChanged } from "../plans/plan-caches.ts"
import { limits, Plan, reportLimit } from "../plans/plans.ts"
import type { BillingEvent } from "./events.ts"
import { SearchCounts } from "./search-counts.ts"
import { type Subscription, SubscriptionStatus, type Usage } from "./schemas.ts"
import { addMonth, calendarMonth } from "./periods.ts"

/**
 * A subscription as its table holds it, decoded as it is read (SqlSchema): a row that does not read so
 * is a bug here or in a migration, a defect rather than a failure of the request.
 */
const SubscriptionRow = Schema.Struct({
  plan: Plan,
  status: SubscriptionStatus,
  currentPeriodStart: Schema.DateFromSelf,
  currentPeriodEnd: Schema.DateFromSelf,
  cancelAtPeriodEnd: Schema.Boolean
})
type SubscriptionRow = typeof SubscriptionRow.Type

/** A period's counters (bigints, which the client reads as strings). */
const CountersRow = Schema.Struct({ emails: Schema.NumberFromString, emailsSent: Schema.NumberFromString })

/** One account's usage in one period. */
const PeriodRequest = Schema.Struct({ userId: Schema.String, periodStart: Schema.DateFromSelf })

const toSubscription = (row: SubscriptionRow): Subscription => ({
  status: row.status,
  plan: row.plan,
  currentPeriodStart: row.currentPeriodStart.toISOString(),
  currentPeriodEnd: row.currentPeriodEnd.toISOString(),
  cancelAtPeriodEnd: row.cancelAtPeriodEnd
})

export class Billing extends Effect.Service<Billing>()("mailroom/Billing", {
  dependencies: [SearchCounts.Default],
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const searchCounts = yield* SearchCounts
    /** Every cache a plan decides forgets the user, on every node (plans/plan-caches.ts). */
    const planChanged = yield* makePlanChanged

    /** Every new account starts on an active free plan for the current calendar month. */
    const openFreeSubscription = Effect.fn("Billing.openFreeSubscription")(function*(userId: string) {
      const period = calendarMonth(new Date())
      yield* sql`INSERT INTO subscriptions ${
        sql.insert({ userId, plan: "free", status: "active", currentPeriodStart: period.start, currentPeriodEnd: period.end })
      }`
    })

    const subscriptionRow = SqlSchema.findOne({
      Request: Schema.String,
      Result: SubscriptionRow,
      execute: (userId) =>
        sql`
          SELECT plan, status, current_period_start, current_period_end, cancel_at_period_end
          FROM subscriptions WHERE user_id = ${userId}`
    })

    /** The subscription with its current period; a free plan's period rolls to the current month. */
    const currentRow = (userId: string): Effect.Effect<SubscriptionRow, NotFound | SqlError> =>
      Effect.gen(function*() {
        const found = yield* subscriptionRow(userId).pipe(Effect.catchTag("ParseError", Effect.die))
        if (Option.isNone(found)) return yield* new NotFound({ message: "No subscription for this account" })
        const row = found.value
        const now = new Date()
        if (row.plan !== "free" || row.currentPeriodEnd > now) return row
        const period = calendarMonth(now)
        yield* sql`UPDATE subscriptions SET current_period_start = ${period.start}, current_period_end = ${period.end},
                     updated_at = now()
                   WHERE user_id = ${userId} AND current_period_end <= ${now}`
        return { ...row, currentPeriodStart: period.start, currentPeriodEnd: period.end }
      })

    const subscription = Effect.fn("Billing.subscription")(function*(userId: string) {
      return toSubscription(yield* currentRow(userId))
    })

    /** The period's counters; none before anything was counted in it. */
    const countersRow = SqlSchema.findOne({
      Request: PeriodRequest,
      Result: CountersRow,
      execute: ({ periodStart, userId }) =>
        sql`
          SELECT emails, emails_sent FROM usage_counters
          WHERE user_id = ${userId} AND period_start = ${periodStart}`
    })

    const searchesRow = SqlSchema.findOne({
      Request: PeriodRequest,
      Result: Schema.Struct({ searches: Schema.NumberFromString }),
      execute: ({ periodStart, userId }) =>
        sql`
          SELECT searches FROM usage_counters
          WHERE user_id = ${userId} AND period_start = ${periodStart}`
    })

    /** Today's counters (the UTC day `day`, YYYY-MM-DD), which the daily limits hold; none before anything was counted. */
    const dailyRow = SqlSchema.findOne({
      Request: Schema.Struct({ userId: Schema.String, day: Schema.String }),
      Result: Schema.Struct({ emails: Schema.NumberFromString, sent: Schema.NumberFromString }),
      execute: ({ day, userId }) => sql`SELECT emails, sent FROM mail_daily_counters WHERE user_id = ${userId} AND day = ${day}::date`
    })

    /** The bytes the account stores; none before it stored any. */
    const storageRow = SqlSchema.findOne({
      Request: Schema.String,
      Result: Schema.Struct({ bytes: Schema.NumberFromString }),
      execute: (userId) => sql`SELECT bytes FROM storage_usage WHERE user_id = ${userId}`
    })

    const usage = Effect.fn("Billing.usage")(function*(userId: string) {
      const row = yield* currentRow(userId)
      const period = { userId, periodStart: row.currentPeriodStart }
      const counters = yield* countersRow(period).pipe(Effect.catchTag("ParseError", Effect.die))
      const searches = yield* searchCounts.exactly(
        userId,
        searchesRow(period).pipe(
          Effect.catchTag("ParseError", Effect.die),
          Effect.map(Option.match({ onNone: () => 0, onSome: (counted) => counted.searches }))
        )
      )
      const storage = yield* storageRow(userId).pipe(Effect.catchTag("ParseError", Effect.die))
      // The day the inbound and send limits count in (inbound.ts utcDay), and when the next one starts,
      // by Effect's clock, as the services around it tell the time.
      const now = new Date(yield* Clock.currentTimeMillis)
      const dayEnd = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1))
      const today = yield* dailyRow({ userId, day: now.toISOString().slice(0, 10) }).pipe(Effect.catchTag("ParseError", Effect.die))
      const plan = limits[row.plan]
      return {
        emailsUsed: Option.match(counters, { onNone: () => 0, onSome: (counted) => counted.emails }),
        emailsLimit: reportLimit(plan.emailsPerMonth),
        searchesUsed: searches,
        searchesLimit: reportLimit(plan.searchesPerMonth),
        storageUsed: Option.match(storage, { onNone: () => 0, onSome: (stored) => stored.bytes }),
        storageLimit: reportLimit(plan.storageBytes),
        emailsSent: Option.match(counters, { onNone: () => 0, onSome: (counted) => counted.emailsSent }),
        emailsSentLimit: reportLimit(plan.sendsPerMonth),
        periodEnd: row.currentPeriodEnd.toISOString(),
        emailsToday: Option.match(today, { onNone: () => 0, onSome: (counted) => counted.emails }),
        emailsDailyLimit: plan.emailsPerDay,
        emailsSentToday: Option.match(today, { onNone: () => 0, onSome: (counted) => counted.sent }),
        emailsSentDailyLimit: plan.sendsPerDay,
        dayEnd: dayEnd.toISOString()
      } satisfies Usage
    })

    /** The account's plan, its subscription locked until the transaction ends. */
    const lockedPlan = SqlSchema.findOne({
      Request: Schema.String,
      Result: Schema.Struct({ plan: Plan }),
      execute: (userId) => sql`SELECT plan FROM subscriptions WHERE user_id = ${userId} FOR UPDATE`
    })

    /**
     * Change the account's plan; the change applies to every limit at once. A paid plan bought from
     * the free one starts a period now that runs a month; a move between paid plans keeps the period
     * and what it has counted (as a provider's upgrade does, prorated); free runs by calendar month.
     */
    const changePlan = Effect.fn("Billing.changePlan")(function*(userId: string, plan: Plan) {
      const now = new Date()
      const current = yield* lockedPlan(userId).pipe(Effect.catchTag("ParseError", Effect.die))
      const betweenPaid = plan !== "free" && Option.isSome(current) && current.value.plan !== "free"
      if (betweenPaid) {
        yield* sql`UPDATE subscriptions SET plan = ${plan}, status = 'active', cancel_at_period_end = false, updated_at = now()
                   WHERE user_id = ${userId}`
      } else {
        const period = plan === "free" ? calendarMonth(now) : { start: now, end: addMonth(now) }
        yield* sql`UPDATE subscriptions SET plan = ${plan}, status = 'active', current_period_start = ${period.start},
                     current_period_end = ${period.end}, cancel_at_period_end = false, updated_at = now()
                   WHERE user_id = ${userId}`
      }
      yield* planChanged(userId)
    })

    /** Cancel a paid plan at the end of its period, or keep it after all. The free plan has nothing to end. */
    const setCancelAtPeriodEnd = Effect.fn("Billing.setCancelAtPeriodEnd")(function*(userId: string, cancel: boolean) {
      yield* sql`UPDATE subscriptions SET cancel_at_period_end = ${cancel}, updated_at = now()
                 WHERE user_id = ${userId} AND (plan <> 'free' OR NOT ${cancel}::boolean)`
    })

    /**
     * Apply a payment provider's event, once (by its id), and only when it is not older than the
     * state applied already. Answers what happened, for the log.
     */
    /** The account an event is about: by its customer first, else by the account it names. */
    const eventOwner = SqlSchema.findOne({
      Request: Schema.Struct({ customerId: Schema.NullOr(Schema.String), userId: Schema.NullOr(Schema.String) }),
      Result: Schema.Struct({ userId: Schema.String }),
      execute: ({ customerId, userId }) =>
        sql`
          SELECT user_id FROM subscriptions
          WHERE stripe_customer_id = ${customerId} OR user_id = ${userId}
          ORDER BY (stripe_customer_id = ${customerId}) DESC NULLS LAST
          LIMIT 1`
    })

    const applyEvent = Effect.fn("Billing.applyEvent")(function*(event: BillingEvent) {
      return yield* Effect.gen(function*() {
        const fresh = yield* sql`
          INSERT INTO billing_events (id, type) VALUES (${event.eventId}, ${event.eventType})
          ON CONFLICT (id) DO NOTHING RETURNING id`
        if (fresh.length === 0) return "duplicate" as const
        if (event.kind === "ignored") return "ignored" as const
        const owner = yield* eventOwner({ customerId: event.customerId ?? null, userId: event.userId ?? null }).pipe(
          Effect.catchTag("ParseError", Effect.die)
        )
        if (Option.isNone(owner)) return "unknown-customer" as const
        const userId = owner.value.userId
        // The account's row first, on every path: concurrent events of one account apply one after the
        // other, each reading what the one before committed. Without it, an update that waited on a
        // deletion's row lock re-checked that row alone and read ended_stripe_subscriptions as its
        // statement had found it before the deletion (PostgreSQL, READ COMMITTED): the deletion's own
        // record unseen, it revived the subscription.
        const locked = yield* sql<{ stripeSubscriptionId: string | null }>`
          SELECT stripe_subscription_id FROM subscriptions WHERE user_id = ${userId} FOR UPDATE`
        const onRecord = locked[0]?.stripeSubscriptionId ?? null
        const now = new Date()
        const newer = sql`(provider_state_at IS NULL OR provider_state_at <= ${event.at})`
        // About the subscription the account pays now (or it has none on record): the events of one it
        // left (a second checkout's predecessor) neither change its plan nor end it.
        const current = (subscriptionId: string | undefined) =>
          sql`(stripe_subscription_id IS NULL OR ${subscriptionId ?? null}::text IS NULL OR stripe_subscription_id = ${subscriptionId ?? null})`
        // An ended subscription is final (ended_stripe_subscriptions): an event about it that comes after
        // its deletion, in the same second (no older by its time) or late, brings nothing back.
        const live = (subscriptionId: string | undefined) =>
          sql`NOT EXISTS (SELECT 1 FROM ended_stripe_subscriptions WHERE subscription_id = ${subscriptionId ?? null})`
        // Lapsed: on free since housekeeping ended the plan its payment past due (7 days after its period
        // ended), the subscription still on record, for Stripe may still bill it (an open invoice the
        // customer pays brings the plan back: the subscription active). Its dunning (still past due,
        // unpaid) leaves the account on free.
        const lapsedStillDue = (subscriptionId: string, status: string) =>
          sql`(plan = 'free' AND stripe_subscription_id = ${subscriptionId} AND ${status}::text = 'past_due')`
        const link = sql`stripe_customer_id = coalesce(stripe_customer_id, ${event.customerId ?? null}),
                         provider_state_at = ${event.at}, updated_at = now()`
        let applied: ReadonlyArray<unknown>
        switch (event.kind) {
          case "checkout-completed": {
            applied = yield* sql`
              UPDATE subscriptions SET plan = ${event.plan}, status = 'active', current_period_start = ${now},
                current_period_end = ${addMonth(now)}, cancel_at_period_end = false,
                stripe_subscription_id = coalesce(${event.subscriptionId ?? null}, stripe_subscription_id), ${link}
              WHERE user_id = ${userId} AND ${newer} AND ${live(event.subscriptionId)} RETURNING user_id`
            break
          }
          case "subscription-changed": {
            applied = yield* sql`
              UPDATE subscriptions SET plan = ${event.plan}, status = ${event.status},
                current_period_start = ${event.periodStart}, current_period_end = ${event.periodEnd},
                cancel_at_period_end = ${event.cancelAtPeriodEnd}, stripe_subscription_id = ${event.subscriptionId}, ${link}
              WHERE user_id = ${userId} AND ${newer} AND ${current(event.subscriptionId)} AND ${live(event.subscriptionId)}
                AND NOT ${lapsedStillDue(event.subscriptionId, event.status)}
              RETURNING user_id`
            break
          }
          case "subscription-ended": {
            const period = calendarMonth(now)
            // Ended for good, whatever this event finds: the subscription's own later-arriving events change nothing.
            yield* sql`INSERT INTO ended_stripe_subscriptions (subscription_id, user_id) VALUES (${event.subscriptionId}, ${userId})
                       ON CONFLICT (subscription_id) DO NOTHING`
            applied = yield* sql`
              UPDATE subscriptions SET plan = 'free', status = 'canceled', current_period_start = ${period.start},
                current_period_end = ${period.end}, cancel_at_period_end = false, stripe_subscription_id = NULL, ${link}
              WHERE user_id = ${userId} AND ${newer} AND ${current(event.subscriptionId)} RETURNING user_id`
            break
          }
          case "payment-failed": {
            applied = yield* sql`
              UPDATE subscriptions SET status = 'past_due', ${link}
              WHERE user_id = ${userId} AND plan <> 'free' AND ${newer} AND ${current(event.subscriptionId)}
                AND ${live(event.subscriptionId)} RETURNING user_id`
            break
          }
        }
        // A subscription other than the one on record that Stripe may still bill (neither ended nor the
        // one this account pays): the account could be paying two. Its events change nothing here, but
        // are told, with both ids, for someone to end the one the account left.
        const ended = (subscriptionId: string) =>
          Effect.map(sql`SELECT 1 FROM ended_stripe_subscriptions WHERE subscription_id = ${subscriptionId}`, (rows) => rows.length > 0)
        const other = event.kind === "subscription-ended" ? undefined : event.subscriptionId
        if (applied.length > 0) {
          if (event.kind === "checkout-completed" && other !== undefined && onRecord !== null && onRecord !== other && !(yield* ended(onRecord))) {
            yield* Effect.logWarning("A paid checkout started another subscription: the one the account leaves may still be billed").pipe(
              Effect.annotateLogs({ userId, subscription: other, left: onRecord, eventId: event.eventId })
            )
          }
          return { outcome: "applied" as const, userId }
        }
        if (other !== undefined && onRecord !== null && onRecord !== other && !(yield* ended(other))) {
          yield* Effect.logWarning("An event of a subscription the account has left, which may still be billed: not applied").pipe(
            Effect.annotateLogs({ userId, subscription: other, onRecord, eventId: event.eventId, type: event.eventType })
          )
          return "other-subscription" as const
        }
        return "superseded" as const
      }).pipe(
        sql.withTransaction,
        // Told once the change is committed, so no node can look the old plan up again after hearing it.
        Effect.flatMap((result) =>
          typeof result === "string" ? Effect.succeed(result) : Effect.as(planChanged(result.userId), result.outcome)
        )
      )
    })

    return { openFreeSubscription, subscription, usage, changePlan, planChanged, setCancelAtPeriodEnd, applyEvent } as const
  })
}) {}
