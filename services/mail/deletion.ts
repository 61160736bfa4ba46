/**
 * Deleting mail: emails of the caller (one, a batch, or a whole thread), all or none, gone for good.
 *
 * - What goes in one transaction: the emails' rows and what hangs on them (attachments' records,
 *   delivery records, search documents and their postings, by ON DELETE CASCADE), their share of the
 *   word lexicon's counts, and their bytes from the account's storage. Their vectors go from the
 *   vector index just before (an index outage refuses the deletion and leaves everything as it was).
 *   The stored bytes (raw message, attachments) are no longer referenced and go with housekeeping's
 *   sweep of unreferenced blobs (maintenance/housekeeping.ts), at most 8 days later: the same bytes
 *   may belong to a message accepted but not yet stored, which must not lose them.
 * - What refuses it (409 CONFLICT, nothing deleted): a sent email with deliveries still queued or
 *   deferred (the mta would have nothing to send; delete once they are settled), and an email that an
 *   unsent draft replies to or forwards (the draft would lose what it answers; delete or change the
 *   draft first).
 * - Each deleted email is announced as `email.deleted`, carrying the email's fields as they were:
 *   owed to the bus in the deletion's transaction (bus/outbox.ts), so an outage delays it, never loses it.
 * - Its id is remembered (`deleted_emails`, 8 days) so that its inbound message, should the bus
 *   deliver it again, is not stored again.
 */
import { SqlClient, type Statement } from "@effect/sql"
import { Effect } from "effect"
import { Bus, encodeJson, subjects } from "../bus/bus.ts"
import { deliver, stage } from "../bus/outbox.ts"
import { Conflict, NotFound, ServiceUnavailable } from "../errors.ts"
import { uncountWords } from "../search/indexer.ts"
import { Vectors } from "../search/vectors.ts"
import { emailNotFound, missingThreads, threadsNotFound } from "./emails.ts"
import { emailColumnList, type EmailRow, toFields } from "./records.ts"

/** What a deletion answers: the emails it deleted. */
export interface Deleted {
  readonly deleted: number
  readonly email_ids: ReadonlyArray<string>
}

export class Deletions extends Effect.Service<Deletions>()("mailroom/Deletions", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const bus = yield* Bus
    const vectors = yield* Vectors

    /** The emails `which` picks (`emails e` of the caller's active mailboxes); with `lock`, locked until the transaction ends. */
    const select = (userId: string, which: Statement.Fragment, lock: boolean) =>
      sql<EmailRow>`
        SELECT ${sql.literal(emailColumnList)}
        FROM emails e JOIN mailboxes m ON m.id = e.mailbox_id AND m.status = 'active'
        WHERE ${which} AND e.user_id = ${userId}
        ORDER BY e.id
        ${sql.literal(lock ? "FOR UPDATE OF e" : "")}`

    /** Why these emails may not go yet, if anything says so. */
    const refusal = (emailIds: ReadonlyArray<string>) =>
      Effect.gen(function*() {
        const pending = yield* sql<{ emailId: string; n: string }>`
          SELECT email_id, count(*) AS n FROM outbound_deliveries
          WHERE email_id = ANY(${emailIds}::text[]) AND status IN ('queued', 'deferred')
          GROUP BY email_id ORDER BY email_id`
        if (pending.length > 0) {
          return new Conflict({
            message: "Sent mail is still being delivered: delete it once its deliveries are settled",
            details: {
              email_ids: pending.map((row) => row.emailId),
              pending_deliveries: pending.reduce((sum, row) => sum + Number(row.n), 0)
            }
          })
        }
        const drafts = yield* sql<{ id: string }>`
          SELECT id FROM drafts
          WHERE (in_reply_to = ANY(${emailIds}::text[]) OR forward_of = ANY(${emailIds}::text[])) AND status <> 'sent'
          ORDER BY id`
        if (drafts.length > 0) {
          return new Conflict({
            message: "An unsent draft replies to or forwards this mail: delete or change the draft first",
            details: { draft_ids: drafts.map((row) => row.id) }
          })
        }
        return undefined
      })

    /**
     * What the emails `ids` counted towards the mail stats (stats.ts), kept as they go: emails by
     * direction and their recipients by status (and those who complained), per mailbox and UTC day (in key order, so that
     * deletions at once wait for each other instead of deadlocking).
     */
    const keepCounted = (ids: ReadonlyArray<string>) =>
      sql`
        INSERT INTO deleted_mail_counts AS c (user_id, mailbox_id, day, what, key, n)
        SELECT user_id, mailbox_id, day, what, key, n FROM (
          SELECT e.user_id, e.mailbox_id, (e.received_at AT TIME ZONE 'UTC')::date AS day, 'email' AS what, e.direction AS key, count(*) AS n
          FROM emails e WHERE e.id = ANY(${ids}::text[])
          GROUP BY 1, 2, 3, 5
          UNION ALL
          SELECT e.user_id, e.mailbox_id, (e.received_at AT TIME ZONE 'UTC')::date, 'recipient', d.status, count(*)
          FROM emails e JOIN outbound_deliveries d ON d.email_id = e.id
          WHERE e.id = ANY(${ids}::text[]) AND e.direction = 'outbound'
          GROUP BY 1, 2, 3, 5
          UNION ALL
          SELECT e.user_id, e.mailbox_id, (e.received_at AT TIME ZONE 'UTC')::date, 'recipient', 'complained', count(*)
          FROM emails e JOIN outbound_deliveries d ON d.email_id = e.id
          WHERE e.id = ANY(${ids}::text[]) AND e.direction = 'outbound' AND d.complained_at IS NOT NULL
          GROUP BY 1, 2, 3
        ) counted
        ORDER BY mailbox_id, day, what, key
        ON CONFLICT (mailbox_id, day, what, key) DO UPDATE SET n = c.n + EXCLUDED.n`

    /**
     * Delete the emails `which` picks, all or none: `missing` says what to refuse when some asked for
     * are not found.
     */
    const remove = (
      userId: string,
      which: Statement.Fragment,
      missing: (found: ReadonlyArray<EmailRow>) => NotFound | undefined
    ) =>
      Effect.gen(function*() {
        // Looked at first without locks: a refusal must not cost the vectors their removal.
        const seen = yield* select(userId, which, false)
        const absent = missing(seen)
        if (absent) return yield* absent
        const ids = seen.map((row) => row.id)
        const refused = yield* refusal(ids)
        if (refused) return yield* refused
        yield* Effect.flatMap(vectors.collection, (collection) => collection.remove(ids)).pipe(
          Effect.catchTag("VectorIndexError", (error) =>
            Effect.zipRight(Effect.logWarning(`Vector index unavailable: ${error.message}`), Effect.fail(ServiceUnavailable.of())))
        )
        const { owed, rows } = yield* Effect.gen(function*() {
          // The emails seen, no others (mail that joined the thread since stays); asked again under the
          // locks, should a delivery have been queued, a draft made or an email deleted meanwhile.
          const rows = yield* select(userId, sql`e.id = ANY(${ids}::text[])`, true)
          const found = new Set(rows.map((row) => row.id))
          const gone = ids.filter((id) => !found.has(id))
          if (gone.length > 0) return yield* emailNotFound(gone)
          const late = yield* refusal(ids)
          if (late) return yield* late
          yield* uncountWords(sql, ids)
          yield* keepCounted(ids)
          // Remembered while the bus may deliver an inbound message of theirs again (a node failed before
          // it heard the message was stored): store.ts stores no email of these ids again. With its
          // place, which a list's `after` may still name (emails.ts).
          yield* sql`
            INSERT INTO deleted_emails (id, user_id, mailbox_id, stored_seq, received_at)
            SELECT id, user_id, mailbox_id, stored_seq, received_at FROM emails WHERE id = ANY(${ids}::text[])
            ON CONFLICT DO NOTHING`
          yield* sql`DELETE FROM emails WHERE id = ANY(${ids}::text[])`
          const bytes = rows.reduce((sum, row) => sum + Number(row.size), 0)
          yield* sql`UPDATE storage_usage SET bytes = greatest(0, bytes - ${bytes}) WHERE user_id = ${userId}`
          const timestamp = new Date().toISOString()
          const owed = rows.map((row) => ({
            subject: subjects.event("email.deleted"),
            data: encodeJson({ event: "email.deleted", timestamp, namespace: userId, data: toFields(row) }),
            msgId: `email.deleted:${row.id}`
          }))
          yield* stage(sql, owed)
          return { rows, owed }
        }).pipe(sql.withTransaction)
        // Announced once the deletion is committed.
        yield* deliver(sql, bus, owed)
        return { deleted: rows.length, email_ids: rows.map((row) => row.id) } satisfies Deleted
      })

    /** Delete one or more of the caller's emails (the routes take at most 100: MAX_DELETE_BATCH), all or none; 404 names those not found. */
    const emails = Effect.fn("Deletions.emails")(function*(userId: string, emailIds: ReadonlyArray<string>) {
      const ids = [...new Set(emailIds)]
      return yield* remove(userId, sql`e.id = ANY(${ids}::text[])`, (rows) => {
        const found = new Set(rows.map((row) => row.id))
        const absent = ids.filter((id) => !found.has(id))
        return absent.length > 0 ? emailNotFound(absent) : undefined
      })
    })

    /**
     * Delete every email of some of the caller's threads (the routes take at most 100: MAX_DELETE_BATCH),
     * all or none; 404 names the threads of no active mailbox of the caller's.
     */
    const threads = Effect.fn("Deletions.threads")(function*(userId: string, threadIds: ReadonlyArray<string>) {
      const ids = [...new Set(threadIds)]
      return yield* remove(userId, sql`e.thread_id = ANY(${ids}::text[])`, (rows) => {
        const missing = missingThreads(ids, rows)
        return missing.length > 0 ? threadsNotFound(missing) : undefined
      })
    })

    /** `threads` of one thread: 404 `details.thread_id` when it is not the caller's. */
    const thread = (userId: string, threadId: string) => threads(userId, [threadId])

    return { emails, threads, thread } as const
  })
}) {}
