/**
 * The queries a user searched for (the suggestions' first source), written behind the answer: a
 * search notes its query in memory and a batch is written every FLUSH_EVERY (or when BATCH_SIZE are
 * waiting), in one statement, and when the process stops. A crash loses at most one interval of
 * suggestions; no limit depends on them.
 */
import { SqlClient } from "@effect/sql"
import { Cause, Duration, Effect, Schedule } from "effect"
import { DependencyHealth } from "../health/dependency-health.ts"

const FLUSH_EVERY = Duration.seconds(1)
const BATCH_SIZE = 500

interface Noted {
  readonly userId: string
  readonly normalized: string
  query: string
  uses: number
  at: Date
}

export class QueryLog extends Effect.Service<QueryLog>()("mailroom/QueryLog", {
  scoped: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const health = yield* DependencyHealth
    let pending = new Map<string, Noted>()
    // Batches being written: still this process's unwritten queries until their statement commits.
    const writing = new Set<ReadonlyArray<Noted>>()

    const flush: Effect.Effect<void> = Effect.suspend(() => {
      if (pending.size === 0) return Effect.void
      const batch = [...pending.values()]
      pending = new Map()
      writing.add(batch)
      // In key order, so concurrent flushes of several processes take the rows' locks in one order.
      batch.sort((a, b) => (a.userId === b.userId ? (a.normalized < b.normalized ? -1 : 1) : a.userId < b.userId ? -1 : 1))
      return sql`
        INSERT INTO search_queries AS q (user_id, normalized, query, uses, last_used_at)
        SELECT * FROM unnest(${batch.map((n) => n.userId)}::text[], ${batch.map((n) => n.normalized)}::text[],
                             ${batch.map((n) => n.query)}::text[], ${batch.map((n) => n.uses)}::int[],
                             ${batch.map((n) => n.at)}::timestamptz[])
        ON CONFLICT (user_id, normalized) DO UPDATE
          SET query = EXCLUDED.query, uses = q.uses + EXCLUDED.uses, last_used_at = greatest(q.last_used_at, EXCLUDED.last_used_at)`.pipe(
        Effect.asVoid,
        Effect.catchAll((error) =>
          // Kept for the next attempt rather than lost.
          Effect.sync(() => {
            for (const noted of batch) note(noted.userId, noted.normalized, noted.query, noted.uses, noted.at)
          }).pipe(Effect.zipRight(health.report("Could not record search queries; will retry", Cause.fail(error))))
        ),
        Effect.ensuring(Effect.sync(() => writing.delete(batch)))
      )
    })

    const note = (userId: string, normalized: string, query: string, uses: number, at: Date) => {
      const key = `${userId}\u0000${normalized}`
      const seen = pending.get(key)
      if (seen === undefined) pending.set(key, { userId, normalized, query, uses, at })
      else {
        seen.query = query
        seen.uses += uses
        if (at > seen.at) seen.at = at
      }
    }

    yield* flush.pipe(Effect.repeat(Schedule.spaced(FLUSH_EVERY)), Effect.forkScoped)
    yield* Effect.addFinalizer(() => flush)

    return {
      /** Note one search of `query`; written with the next batch. */
      remember: (userId: string, query: string): Effect.Effect<void> =>
        Effect.suspend(() => {
          note(userId, query.toLowerCase(), query, 1, new Date())
          return pending.size >= BATCH_SIZE ? Effect.forkDaemon(flush).pipe(Effect.asVoid) : Effect.void
        }),
      /**
       * Queries of `userId` noted and not written yet (or being written) that start with `prefix` (lower
       * case). One being written may be here and in the database for a moment.
       */
      pending: (userId: string, prefix: string): ReadonlyArray<Noted> =>
        [...pending.values(), ...[...writing].flat()].filter((noted) => noted.userId === userId && noted.normalized.startsWith(prefix)),
      flush
    } as const
  })
}) {}
