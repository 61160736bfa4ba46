/**
 * The queries a user searched for (the suggestions' first source), written behind the answer: a
 * search notes its query in memory (write-behind.ts) and a batch is written every FLUSH_EVERY (or when
 * BATCH_SIZE are waiting), in one statement, and when the process stops. A crash loses at most one interval of
 * suggestions; no limit depends on them.
 */
import { SqlClient } from "@effect/sql"
import { Cause, Duration, Effect, FiberSet, Schedule } from "effect"
import { DependencyHealth } from "../health/dependency-health.ts"
import { writeBehind } from "../write-behind.ts"

const FLUSH_EVERY = Duration.seconds(1)
const BATCH_SIZE = 500
/**
 * A longer query is a pasted text, not one to offer again; and past ~2,700 bytes (a query may hold
 * 1,000 characters, 4,000 bytes of UTF-8) its row would not fit the prefix index, failing the batch.
 */
export const MAX_REMEMBERED_CHARS = 200

interface Noted {
  readonly userId: string
  readonly normalized: string
  readonly query: string
  readonly uses: number
  readonly at: Date
}

export class QueryLog extends Effect.Service<QueryLog>()("mailroom/QueryLog", {
  scoped: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const health = yield* DependencyHealth
    const noted = writeBehind<Noted>((earlier, newer) => ({
      ...earlier,
      query: newer.query,
      uses: earlier.uses + newer.uses,
      at: newer.at > earlier.at ? newer.at : earlier.at
    }))

    const flush: Effect.Effect<void> = noted.flush(
      (written) => {
        // In key order, so concurrent flushes of several processes take the rows' locks in one order.
        const batch = [...written.values()].sort((a, b) =>
          a.userId === b.userId ? (a.normalized < b.normalized ? -1 : 1) : a.userId < b.userId ? -1 : 1
        )
        return sql`
          INSERT INTO search_queries AS q (user_id, normalized, query, uses, last_used_at)
          SELECT n.* FROM unnest(${batch.map((n) => n.userId)}::text[], ${batch.map((n) => n.normalized)}::text[],
                                 ${batch.map((n) => n.query)}::text[], ${batch.map((n) => n.uses)}::int[],
                                 ${batch.map((n) => n.at)}::timestamptz[]) AS n (user_id, normalized, query, uses, at)
          -- An account deleted since its search (accounts/closure.ts) keeps no queries, nor fails the batch.
          WHERE EXISTS (SELECT 1 FROM users u WHERE u.id = n.user_id)
          ON CONFLICT (user_id, normalized) DO UPDATE
            SET query = EXCLUDED.query, uses = q.uses + EXCLUDED.uses, last_used_at = greatest(q.last_used_at, EXCLUDED.last_used_at)`
          .pipe(Effect.asVoid)
      },
      // Kept for the next attempt rather than lost.
      (error) => health.report("Could not record search queries; will retry", Cause.fail(error))
    )

    // The last flush, as the service closes: after the periodic one has stopped (finalizers run last first).
    yield* Effect.addFinalizer(() => flush)
    yield* flush.pipe(Effect.repeat(Schedule.spaced(FLUSH_EVERY)), Effect.forkScoped)
    // A full batch is written at once, by a fiber of the service's (not a daemon outliving its database).
    const flushNow = yield* FiberSet.makeRuntime<never, void, never>()

    return {
      /** Note one search of `query` (one of at most MAX_REMEMBERED_CHARS); written with the next batch. */
      remember: (userId: string, query: string): Effect.Effect<void> =>
        Effect.suspend(() => {
          if (query.length > MAX_REMEMBERED_CHARS) return Effect.void
          const normalized = query.toLowerCase()
          noted.note(`${userId}\u0000${normalized}`, { userId, normalized, query, uses: 1, at: new Date() })
          if (noted.size() >= BATCH_SIZE) flushNow(flush)
          return Effect.void
        }),
      /**
       * Queries of `userId` noted and not written yet (or being written) that start with `prefix` (lower
       * case). One being written may be here and in the database for a moment.
       */
      pending: (userId: string, prefix: string): ReadonlyArray<Noted> =>
        noted.unwritten().filter((query) => query.userId === userId && query.normalized.startsWith(prefix)),
      flush
    } as const
  })
}) {}
