/**
 * `lastUsed` of API keys without a database write per request: uses are noted in memory and
 * written in one batch every few seconds (and when the process stops). Reads in this process see
 * the pending values at once; other processes see them after the next flush.
 */
import { SqlClient } from "@effect/sql"
import { Cause, Duration, Effect, Layer, Schedule } from "effect"
import * as Context from "effect/Context"
import { DependencyHealth } from "../health/dependency-health.ts"

const FLUSH_EVERY = Duration.seconds(5)

export class KeyUsage extends Context.Tag("mailroom/KeyUsage")<KeyUsage, {
  readonly touch: (keyId: string) => void
  /** The newer of the stored and the pending time. */
  readonly lastUsed: (keyId: string, stored: Date | null) => Date | null
  readonly flush: Effect.Effect<void>
}>() {
  static readonly layer = Layer.scoped(
    KeyUsage,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const health = yield* DependencyHealth
      let pending = new Map<string, Date>()

      const flush = Effect.suspend(() => {
        if (pending.size === 0) return Effect.void
        const batch = pending
        pending = new Map()
        const ids = [...batch.keys()]
        const times = ids.map((id) => batch.get(id)!)
        return sql`
          UPDATE api_keys k SET last_used_at = v.used_at
          FROM unnest(${ids}::text[], ${times}::timestamptz[]) AS v(id, used_at)
          WHERE k.id = v.id AND (k.last_used_at IS NULL OR k.last_used_at < v.used_at)`.pipe(
          Effect.asVoid,
          Effect.catchAll((error) =>
            // Keep the batch for the next attempt (newer uses win) rather than lose it.
            Effect.sync(() => {
              for (const [id, at] of batch) if (!pending.has(id)) pending.set(id, at)
            }).pipe(Effect.zipRight(health.report("Could not record API key use; will retry", Cause.fail(error))))
          )
        )
      })

      yield* flush.pipe(Effect.repeat(Schedule.spaced(FLUSH_EVERY)), Effect.forkScoped)
      yield* Effect.addFinalizer(() => flush)

      return {
        touch: (keyId) => void pending.set(keyId, new Date()),
        lastUsed: (keyId, stored) => {
          const seen = pending.get(keyId)
          return seen && (!stored || seen > stored) ? seen : stored
        },
        flush
      }
    })
  )
}
