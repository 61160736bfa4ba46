/**
 * Which of an account's endpoints an event goes to, kept in each process (bus/told-cache.ts), so that
 * the webhook actor does not ask the database for every event: most accounts have no endpoint, and
 * every email makes two events (`email.received`, `email.processed`), every sent one more.
 *
 * Creating, changing or deleting an endpoint goes through `changed(userId)`: this process sees it
 * before the caller's answer, every other one within a second. (A delivery also re-reads its endpoint
 * before every attempt, so a deactivation stops even the deliveries already under way.)
 *
 * The plan's limit holds here too (`withinPlan`): an account with more active endpoints than its plan
 * allows (back on free after a paid plan ended) is delivered to by its oldest ones only. It is worked
 * out from the plan and the rows as they are read, nothing stored, so the plan is part of each entry:
 * a plan change goes through `changed(userId)` as well (plans/plan-caches.ts).
 */
import { SqlClient } from "@effect/sql"
import { Effect, Option } from "effect"
import { groupCommit } from "../batching.ts"
import { makeToldCache } from "../bus/told-cache.ts"
import { limits, type Plan } from "../plans/plans.ts"

/**
 * The plan's limit on endpoints, as deliveries keep it: of the account's active endpoints, oldest
 * first (by created_at, then id), the first `limits[plan].webhooks` are delivered to and the others
 * are held back, kept as they are, until the plan allows them again or one before them is deleted or
 * disabled. `activeOldestFirst` must be in that order.
 */
export const withinPlan = <A>(plan: Plan, activeOldestFirst: ReadonlyArray<A>): { readonly delivered: ReadonlyArray<A>; readonly held: ReadonlyArray<A> } => {
  const limit = limits[plan].webhooks
  return limit === null || activeOldestFirst.length <= limit
    ? { delivered: activeOldestFirst, held: [] }
    : { delivered: activeOldestFirst.slice(0, limit), held: activeOldestFirst.slice(limit) }
}

/** An active endpoint as `activeWithinPlan` reads it. */
interface ActiveEndpoint {
  readonly id: string
  readonly events: ReadonlyArray<string>
  readonly mailboxIds: ReadonlyArray<string> | null
  readonly labels: ReadonlyArray<string> | null
}

/**
 * The active endpoints of each of `userIds` (in their order), read in one statement with the account's
 * plan, and split by it (`withinPlan`): those delivered to and those held back. What the webhook actor
 * delivers to (here) and what every answer about webhooks calls held back (webhooks.ts `held_by_plan`)
 * are both read so.
 */
export const activeWithinPlan = (sql: SqlClient.SqlClient, userIds: ReadonlyArray<string>) =>
  sql<ActiveEndpoint & { readonly userId: string; readonly plan: Plan | null }>`
    SELECT w.user_id, w.id, w.events, w.mailbox_ids, w.labels, s.plan
    FROM webhooks w LEFT JOIN subscriptions s ON s.user_id = w.user_id
    WHERE w.active AND w.user_id = ANY(${[...new Set(userIds)]}::text[])
    ORDER BY w.created_at, w.id`.pipe(
    Effect.map((rows) =>
      userIds.map((userId) => {
        const active = rows.filter((row) => row.userId === userId)
        // Every account has its subscription row; one without would be on free.
        return { userId, ...withinPlan(active[0]?.plan ?? "free", active) }
      })
    )
  )

interface Subscribed {
  readonly userId: string
  /**
   * The account's active endpoints its plan lets deliver (`withinPlan`), the kinds each wants, and the
   * mailboxes it listens to (null: all).
   */
  readonly endpoints: ReadonlyArray<
    {
      readonly id: string
      readonly events: ReadonlyArray<string>
      readonly mailboxIds: ReadonlyArray<string> | null
      readonly labels: ReadonlyArray<string> | null
    }
  >
}

export class WebhookSubscriptions extends Effect.Service<WebhookSubscriptions>()("mailroom/WebhookSubscriptions", {
  scoped: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const cache = yield* makeToldCache<Subscribed>({ name: "webhooks", ownerOf: (subscribed) => subscribed.userId })

    /**
     * The active endpoints of each account asked for at once, in one statement (a burst of events),
     * and of them those the plan lets deliver.
     */
    const lookup = yield* groupCommit({
      maxBatch: 64,
      parallel: 2,
      run: (userIds: ReadonlyArray<string>) =>
        activeWithinPlan(sql, userIds).pipe(
          Effect.map((accounts) =>
            accounts.map(({ delivered, userId }): Subscribed => ({
              userId,
              endpoints: delivered.map(({ events, id, labels, mailboxIds }) => ({ id, events, mailboxIds, labels }))
            }))
          )
        )
    })

    /**
     * The account's active endpoints within its plan's limit subscribed to `kind` about `mailboxId`
     * (undefined: an event about no mailbox, which goes only to endpoints listening to every mailbox) and an email carrying
     * `labels` (undefined: an event that carries none, which goes only to endpoints listening to any
     * labels), by id.
     */
    const endpoints = (userId: string, kind: string, mailboxId: string | undefined, labels?: ReadonlyArray<string>) =>
      cache.resolve(userId, Effect.map(lookup(userId), Option.some)).pipe(
        Effect.map((found) =>
          Option.match(found, {
            onNone: () => [],
            onSome: (subscribed) =>
              subscribed.endpoints.filter((endpoint) =>
                endpoint.events.includes(kind) &&
                (endpoint.mailboxIds === null || (mailboxId !== undefined && endpoint.mailboxIds.includes(mailboxId))) &&
                (endpoint.labels === null || (labels !== undefined && labels.some((label) => endpoint.labels!.includes(label))))
              ).map(({ id }) => ({ id }))
          })
        )
      )

    return { endpoints, changed: cache.changed } as const
  })
}) {}
