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
  emailsSentLimit: Schema.Number.annotations({ description: "Maximum emails sent per period; -1 means unlimited" })
}).annotations({ identifier: "Usage" })
export type Usage = typeof Usage.Type
