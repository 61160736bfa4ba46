/**
 * Deleting an account: everything it holds goes for good, at once, and nothing is charged again.
 *
 * - First what lives outside the database, so that an outage there refuses the deletion (503) and
 *   leaves the account as it was: the payment provider stops charging it and forgets its payment
 *   details (payments.ts `close`), and its vectors leave the vector index, every model's collection.
 *   The provider goes first: should the index then fail, the account stays without its subscription
 *   (the provider's event says so) and the person's retry finishes the deletion (closing is idempotent).
 * - Then one transaction: its mailboxes' addresses (and those its deleted mailboxes and renames hold
 *   still) are held from other accounts for 30 days, as any deleted mailbox's address is, so nobody
 *   takes over mail still sent to them; its event log and stream cursors (which reference no row)
 *   and its custom domains' DKIM keys go; then its user row, and with it by ON DELETE CASCADE its
 *   sessions, keys, subscription, usage, mailboxes, mail, drafts, deliveries, search data, domains,
 *   webhooks and lists. Its stored bytes are no longer referenced and go with housekeeping's sweep of
 *   unreferenced blobs (maintenance/housekeeping.ts).
 * - After the commit its keys and sessions stop working and its addresses stop taking mail on every
 *   node (`Principals.changed`, `RecipientDirectory.changed`); an open event stream is closed at its
 *   next check of its credential. What was under way is dropped where it arrives: an inbound message
 *   accepted for one of its mailboxes is not stored (mail/store.ts), a send not yet delivered is not
 *   sent (outbound/mta.ts, a job whose email is gone), a webhook delivery not made is not made.
 * - Its email address may be registered again at once; the new account is a new one.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { PaymentProvider } from "../billing/payments.ts"
import { NotFound, ServiceUnavailable } from "../errors.ts"
import { RecipientDirectory } from "../mail/directory.ts"
import { ADDRESS_HOLD } from "../mailboxes/mailboxes.ts"
import { VectorIndex } from "../search/vector-index.ts"
import { Principals } from "./principals.ts"

/** What a deletion answers. */
export interface AccountDeleted {
  readonly deleted: true
  readonly email: string
  /** Its mailboxes (active ones), whose addresses are held for 30 days. */
  readonly mailboxes: number
  /** Its emails, received and sent. */
  readonly emails: number
}

export class AccountClosure extends Effect.Service<AccountClosure>()("mailroom/AccountClosure", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const payments = yield* PaymentProvider
    const vectors = yield* VectorIndex
    const principals = yield* Principals
    const directory = yield* RecipientDirectory

    /** Delete account `userId` and all it holds (its owner's password is the caller's to have checked). */
    const close = Effect.fn("AccountClosure.close")(function*(userId: string) {
      const found = yield* sql<{ email: string }>`SELECT email FROM users WHERE id = ${userId}`
      if (found[0] === undefined) return yield* new NotFound({ message: "No such account", details: { userId } })
      yield* payments.close(userId).pipe(
        Effect.tapError((error) => Effect.logWarning(`Account not deleted: ${error.message}`, { userId, cause: error.cause })),
        Effect.mapError(() => ServiceUnavailable.of("The payment provider is not reachable, so the subscription could not be ended: retry shortly"))
      )
      yield* vectors.forgetNamespace(userId).pipe(
        Effect.tapError((error) => Effect.logWarning(`Account not deleted: ${error.message}`, { userId })),
        Effect.mapError(() => ServiceUnavailable.of("The search index is not reachable: retry shortly"))
      )
      const deleted = yield* Effect.gen(function*() {
        // The user's row first: a mailbox being made waits for it (mailboxes.ts), then finds no user.
        const users = yield* sql<{ email: string }>`SELECT email FROM users WHERE id = ${userId} FOR UPDATE`
        const user = users[0]
        if (user === undefined) return yield* new NotFound({ message: "No such account", details: { userId } })
        const counted = yield* sql<{ mailboxes: string; emails: string }>`
          SELECT (SELECT count(*) FROM mailboxes WHERE user_id = ${userId} AND status = 'active') AS mailboxes,
                 (SELECT count(*) FROM emails WHERE user_id = ${userId}) AS emails`
        // Held as a deleted mailbox's address is: from its deletion (now, for an active one), 30 days.
        yield* sql`
          INSERT INTO released_addresses AS r (address_normalized, user_id, released_at)
          SELECT address_normalized, user_id, coalesce(deleted_at, now()) FROM mailboxes
          WHERE user_id = ${userId} AND (status = 'active' OR deleted_at > now() - ${ADDRESS_HOLD}::interval)
          ORDER BY address_normalized
          ON CONFLICT (address_normalized, user_id) DO UPDATE SET released_at = greatest(r.released_at, EXCLUDED.released_at)`
        yield* sql`DELETE FROM event_log WHERE user_id = ${userId}`
        yield* sql`DELETE FROM event_streams WHERE user_id = ${userId}`
        yield* sql`DELETE FROM dkim_keys WHERE owner IN (SELECT id FROM domains WHERE user_id = ${userId})`
        yield* sql`DELETE FROM users WHERE id = ${userId}`
        const counts = counted[0]!
        return { deleted: true, email: user.email, mailboxes: Number(counts.mailboxes), emails: Number(counts.emails) } as const
      }).pipe(sql.withTransaction)
      yield* principals.changed(userId)
      yield* directory.changed(userId)
      yield* Effect.logInfo("Account deleted").pipe(
        Effect.annotateLogs({ user_id: userId, mailboxes: deleted.mailboxes, emails: deleted.emails })
      )
      return deleted satisfies AccountDeleted
    })

    return { close } as const
  })
}) {}
