/**
 * Which of an account's endpoints an event goes to, kept in each process (bus/told-cache.ts), so that
 * the webhook actor does not ask the database for every event: most accounts have no endpoint, and
 * every email makes two events (`email.received`, `email.processed`), every sent one more.
 *
 * Creating, changing or deleting an endpoint goes through `changed(userId)`: this process sees it
 * before the caller's answer, every other one within a second. (A delivery also re-reads its endpoint
 * before every attempt, so a deactivation stops even the deliveries already under way.)
 */
import { SqlClient } from "@effect/sql"
import { Effect, Option } from "effect"
import { groupCommit } from "../batching.ts"
import { makeToldCache } from "../bus/told-cache.ts"

interface Subscribed {
  readonly userId: string
  /** The account's active endpoints, the kinds each wants, and the mailboxes it listens to (null: all). */
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

    /** The active endpoints of each account asked for at once, in one statement (a burst of events). */
    const lookup = yield* groupCommit({
      maxBatch: 64,
      parallel: 2,
      run: (userIds: ReadonlyArray<string>) =>
        sql<{
          userId: string
          id: string
          events: ReadonlyArray<string>
          mailboxIds: ReadonlyArray<string> | null
          labels: ReadonlyArray<string> | null
        }>`
          SELECT user_id, id, events, mailbox_ids, labels FROM webhooks
          WHERE active AND user_id = ANY(${[...new Set(userIds)]}::text[])
          ORDER BY id`.pipe(
          Effect.map((rows) =>
            userIds.map((userId): Subscribed => ({ userId, endpoints: rows.filter((row) => row.userId === userId) }))
          )
        )
    })

    /**
     * The account's active endpoints subscribed to `kind` about `mailboxId` (undefined: an event about
     * no mailbox, which goes only to endpoints listening to every mailbox) and an email carrying
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
