/** What billing shows a user: the subscription and the period's usage (the contract's schemas). */
import { Schema } from "effect"
import { Plan } from "../plans/plans.ts"

export const SubscriptionStatus = Schema.Literal("active", "canceled", "past_due")

export const Subscription = Schema.Struct({
  status: SubscriptionStatus,
  plan: Plan,
  currentPeriodStart: Schema.String,
  currentPeriodEnd: Schema.String,
  cancelAtPeriodEnd: Schema.Boolean
}).annotations({ identifier: "Subscription" })
export type Subscription = typeof Subscription.Type

export const Usage = Schema.Struct({
  emailsUsed: Schema.Number,
  emailsLimit: Schema.Number.annotations({ description: "-1 means unlimited" }),
  searchesUsed: Schema.Number,
  searchesLimit: Schema.Number.annotations({ description: "-1 means unlimited" }),
  storageUsed: Schema.Number.annotations({ description: "Bytes" }),
  storageLimit: Schema.Number.annotations({ description: "Bytes; -1 means unlimited" }),
  emailsSent: Schema.Number.annotations({ description: "Emails sent this period" }),
  emailsSentLimit: Schema.Number.annotations({ description: "Maximum emails sent per period; -1 means unlimited" }),
  periodEnd: Schema.String.annotations({
    description: "Timestamp: when this billing period ends, and with it the counts of emails received, emails sent and searches"
  }),
  emailsToday: Schema.Number.annotations({ description: "Emails received today (the UTC day)" }),
  emailsDailyLimit: Schema.Number.annotations({ description: "Maximum emails received per UTC day" }),
  emailsSentToday: Schema.Number.annotations({ description: "Emails sent today (the UTC day)" }),
  emailsSentDailyLimit: Schema.Number.annotations({ description: "Maximum emails sent per UTC day" }),
  dayEnd: Schema.String.annotations({ description: "Timestamp: when today's counts start again (the next midnight UTC)" })
}).annotations({ identifier: "Usage" })
export type Usage = typeof Usage.Type
