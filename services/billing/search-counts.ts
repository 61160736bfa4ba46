/**
 * Searches of accounts whose plan sets no search quota, counted behind the answer (issue 19): no
 * limit depends on that count, so a search notes it in memory and the counts are added to
 * `usage_counters` in one statement every FLUSH_EVERY, and when the process stops. Reads of usage in
 * this process add what is not written yet; other processes see it within FLUSH_EVERY. A crash loses
 * at most one interval of these counts. Plans with a quota count each search in the same statement
 * that checks it (search.ts), before the answer.
 *
 * A read of usage and a flush never overlap (`exactly`): while a batch is being written it is in
 * neither the memory nor, for a reader, surely the database, and a reader that counted it in both
 * would be as wrong as one that counted it in neither.
 *
 * A count goes to the period running when it is written, which for a search in the last second of a
 * period may be the next one.
 */
import { SqlClient } from "@effect/sql"
import { Cause, Duration, Effect, Schedule } from "effect"
import { DependencyHealth } from "../health/dependency-health.ts"

const FLUSH_EVERY = Duration.seconds(1)

export class SearchCounts extends Effect.Service<SearchCounts>()("mailroom/SearchCounts", {
  scoped: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const health = yield* DependencyHealth
    let pending = new Map<string, number>()
    const settled = yield* Effect.makeSemaphore(1)

    const flush: Effect.Effect<void> = settled.withPermits(1)(Effect.suspend(() => {
      if (pending.size === 0) return Effect.void
      const batch = pending
      pending = new Map()
      // In user order, so concurrent flushes of several processes take the rows' locks in one order.
      const users = [...batch.keys()].sort()
      return sql`
        INSERT INTO usage_counters AS u (user_id, period_start, searches)
        SELECT s.user_id, s.current_period_start, c.searches
        FROM unnest(${users}::text[], ${users.map((user) => batch.get(user)!)}::int[]) AS c(user_id, searches)
        JOIN subscriptions s ON s.user_id = c.user_id
        ORDER BY s.user_id
        ON CONFLICT (user_id, period_start) DO UPDATE SET searches = u.searches + EXCLUDED.searches`.pipe(
        Effect.asVoid,
        Effect.catchAll((error) =>
          // Kept for the next attempt rather than lost.
          Effect.sync(() => {
            for (const [user, count] of batch) pending.set(user, (pending.get(user) ?? 0) + count)
          }).pipe(Effect.zipRight(health.report("Could not record search counts; will retry", Cause.fail(error))))
        )
      )
    }))

    yield* flush.pipe(Effect.repeat(Schedule.spaced(FLUSH_EVERY)), Effect.forkScoped)
    yield* Effect.addFinalizer(() => flush)

    return {
      /** Count one search of `userId`; written with the next batch. */
      count: (userId: string): void => void pending.set(userId, (pending.get(userId) ?? 0) + 1),
      /**
       * Read the written searches with `written`, no batch being written meanwhile, and add those of
       * `userId` counted here and not written yet.
       */
      exactly: <E, R>(userId: string, written: Effect.Effect<number, E, R>): Effect.Effect<number, E, R> =>
        settled.withPermits(1)(Effect.map(written, (count) => count + (pending.get(userId) ?? 0))),
      flush
    } as const
  })
}) {}
