/**
 * When each API key and login session was last used (a key's `lastUsed`, a session's `lastActiveAt`),
 * without a database write per request: uses are noted in memory and written in one batch every few
 * seconds (and when the process stops). Reads in this process see the pending values at once; other
 * processes see them after the next flush.
 */
import { SqlClient } from "@effect/sql"
import { Cause, Duration, Effect, Layer, Schedule } from "effect"
import * as Context from "effect/Context"
import { DependencyHealth } from "../health/dependency-health.ts"

const FLUSH_EVERY = Duration.seconds(5)

/** Uses not written yet, of one kind of credential. */
const pendingUses = () => {
  let pending = new Map<string, Date>()
  return {
    touch: (id: string) => void pending.set(id, new Date()),
    /** The newer of the stored and the pending time. */
    newest: (id: string, stored: Date | null) => {
      const seen = pending.get(id)
      return seen && (!stored || seen > stored) ? seen : stored
    },
    take: () => {
      const batch = pending
      pending = new Map()
      return batch
    },
    /** A batch that could not be written, kept for the next attempt (newer uses win). */
    putBack: (batch: ReadonlyMap<string, Date>) => {
      for (const [id, at] of batch) if (!pending.has(id)) pending.set(id, at)
    }
  }
}

export class CredentialUse extends Context.Tag("mailroom/CredentialUse")<CredentialUse, {
  readonly touchKey: (keyId: string) => void
  /** A key's last use: the newer of the stored and the pending time. */
  readonly keyLastUsed: (keyId: string, stored: Date | null) => Date | null
  readonly touchSession: (sessionId: string) => void
  /** A session's last use (a request with its access token or cookie), likewise. */
  readonly sessionLastUsed: (sessionId: string, stored: Date | null) => Date | null
  readonly flush: Effect.Effect<void>
}>() {
  static readonly layer = Layer.scoped(
    CredentialUse,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const health = yield* DependencyHealth
      const keys = pendingUses()
      const sessions = pendingUses()

      const write = (uses: ReturnType<typeof pendingUses>, table: "api_keys" | "sessions", what: string) =>
        Effect.suspend(() => {
          const batch = uses.take()
          if (batch.size === 0) return Effect.void
          const ids = [...batch.keys()]
          const times = ids.map((id) => batch.get(id)!)
          return sql`
            UPDATE ${sql(table)} t SET last_used_at = v.used_at
            FROM unnest(${ids}::text[], ${times}::timestamptz[]) AS v(id, used_at)
            WHERE t.id = v.id AND (t.last_used_at IS NULL OR t.last_used_at < v.used_at)`.pipe(
            Effect.asVoid,
            Effect.catchAll((error) =>
              Effect.sync(() => uses.putBack(batch)).pipe(
                Effect.zipRight(health.report(`Could not record ${what} use; will retry`, Cause.fail(error)))
              )
            )
          )
        })
      const flush = Effect.zipRight(write(keys, "api_keys", "API key"), write(sessions, "sessions", "session"))

      yield* flush.pipe(Effect.repeat(Schedule.spaced(FLUSH_EVERY)), Effect.forkScoped)
      yield* Effect.addFinalizer(() => flush)

      return {
        touchKey: keys.touch,
        keyLastUsed: keys.newest,
        touchSession: sessions.touch,
        sessionLastUsed: sessions.newest,
        flush
      }
    })
  )
}
