/**
 * Searches of accounts whose plan sets no search quota, counted behind the answer (issue 19): no
 * limit depends on that count, so a search notes it in memory and the counts are added to
 * `usage_counters` in one statement every FLUSH_EVERY, and when the process stops. Reads of usage in
 * this process add what is not written yet; other processes see it within FLUSH_EVERY. A crash loses
 * at most one interval of these counts. Plans with a quota count each search in the same statement
 * that checks it (search.ts), before the answer.
 *
 * Noted in a write-behind buffer (write-behind.ts), which keeps a batch visible while it is written;
 * for a count that is not enough, since a reader could then count a batch in memory and again in the
 * database once it commits. So a read of usage and a flush never overlap (`exactly`): the read finds
 * each batch in memory or committed, never both, never neither.
 *
 * A count goes to the period running when it is written, which for a search in the last second of a
 * period may be the next one.
 */
import { SqlClient } from "@effect/sql"
import { Cause, Duration, Effect, Schedule } from "effect"
import { DependencyHealth } from "../health/dependency-health.ts"
import { writeBehind } from "../write-behind.ts"

const FLUSH_EVERY = Duration.seconds(1)

export class SearchCounts extends Effect.Service<SearchCounts>()("mailroom/SearchCounts", {
  scoped: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const health = yield* DependencyHealth
    const counted = writeBehind<number>((noted, more) => noted + more)
    const settled = yield* Effect.makeSemaphore(1)

    const flush: Effect.Effect<void> = settled.withPermits(1)(counted.flush(
      (batch) => {
        // In user order, so concurrent flushes of several processes take the rows' locks in one order.
        const users = [...batch.keys()].sort()
        return sql`
          INSERT INTO usage_counters AS u (user_id, period_start, searches)
          SELECT s.user_id, s.current_period_start, c.searches
          FROM unnest(${users}::text[], ${users.map((user) => batch.get(user)!)}::int[]) AS c(user_id, searches)
          JOIN subscriptions s ON s.user_id = c.user_id
          ORDER BY s.user_id
          ON CONFLICT (user_id, period_start) DO UPDATE SET searches = u.searches + EXCLUDED.searches`.pipe(Effect.asVoid)
      },
      // Kept for the next attempt rather than lost.
      (error) => health.report("Could not record search counts; will retry", Cause.fail(error))
    ))

    // The last flush, as the service closes: after the periodic one has stopped (finalizers run last first).
    yield* Effect.addFinalizer(() => flush)
    yield* flush.pipe(Effect.repeat(Schedule.spaced(FLUSH_EVERY)), Effect.forkScoped)

    return {
      /** Count one search of `userId`; written with the next batch. */
      count: (userId: string): void => counted.note(userId, 1),
      /**
       * Read the written searches with `written`, no batch being written meanwhile, and add those of
       * `userId` counted here and not written yet.
       */
      exactly: <E, R>(userId: string, written: Effect.Effect<number, E, R>): Effect.Effect<number, E, R> =>
        settled.withPermits(1)(
          Effect.map(written, (count) => counted.unwrittenAt(userId).reduce((sum, n) => sum + n, count))
        ),
      flush
    } as const
  })
}) {}
