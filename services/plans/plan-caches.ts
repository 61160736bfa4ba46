/**
 * The caches that keep what an account's plan decides, each per process (bus/told-cache.ts): what its
 * keys and sessions may do (accounts/principals.ts), what mail its mailboxes take (mail/directory.ts)
 * and which of its webhooks are delivered to (webhooks/subscriptions.ts). Whatever changes a plan
 * (billing/billing.ts: a checkout, a provider's event, the operator; maintenance/housekeeping.ts: a paid
 * plan that lapsed) tells them through the one function made here, once the change is committed, so that
 * no node can look the old plan up again after hearing it. A cache that comes to keep a plan joins here.
 */
import { Effect } from "effect"
import { Principals } from "../accounts/principals.ts"
import { RecipientDirectory } from "../mail/directory.ts"
import { WebhookSubscriptions } from "../webhooks/subscriptions.ts"

/** Makes `planChanged(userId)`: every cache a plan decides forgets the user, here at once and on every other node. */
export const makePlanChanged = Effect.gen(function*() {
  const principals = yield* Principals
  const directory = yield* RecipientDirectory
  const subscriptions = yield* WebhookSubscriptions
  return (userId: string): Effect.Effect<void> =>
    Effect.all([principals.changed(userId), directory.changed(userId), subscriptions.changed(userId)], { discard: true })
})
