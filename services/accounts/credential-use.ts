/**
 * When each API key and login session was last used (a key's `lastUsed`, a session's `lastActiveAt`),
 * without a database write per request: uses are noted in memory and written in one batch every few
 * seconds (and when the process stops), behind the answer (write-behind.ts). Reads in this process see
 * the values not written yet at once; other processes see them after the next flush.
 */
import { SqlClient } from "@effect/sql"
import { Cause, Duration, Effect, Layer, Schedule } from "effect"
import * as Context from "effect/Context"
import { DependencyHealth } from "../health/dependency-health.ts"
import { type WriteBehind, writeBehind } from "../write-behind.ts"

const FLUSH_EVERY = Duration.seconds(5)

/** Uses not written yet, of one kind of credential: the latest of each. */
const pendingUses = () => writeBehind<Date>((noted, newer) => (newer > noted ? newer : noted))

/** The newest of the stored time and the times not written yet. */
const newest = (uses: WriteBehind<Date>) => (id: string, stored: Date | null): Date | null =>
  uses.unwrittenAt(id).reduce<Date | null>((latest, at) => (latest === null || at > latest ? at : latest), stored)

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

      const write = (uses: WriteBehind<Date>, table: "api_keys" | "sessions", what: string) =>
        uses.flush(
          (batch) =>
            sql`
              UPDATE ${sql(table)} t SET last_used_at = v.used_at
              FROM unnest(${[...batch.keys()]}::text[], ${[...batch.values()]}::timestamptz[]) AS v(id, used_at)
              WHERE t.id = v.id AND (t.last_used_at IS NULL OR t.last_used_at < v.used_at)`.pipe(Effect.asVoid),
          (error) => health.report(`Could not record ${what} use; will retry`, Cause.fail(error))
        )
      const flush = Effect.zipRight(write(keys, "api_keys", "API key"), write(sessions, "sessions", "session"))

      // The last flush, as the service closes: after the periodic one has stopped (finalizers run last first).
      yield* Effect.addFinalizer(() => flush)
      yield* flush.pipe(Effect.repeat(Schedule.spaced(FLUSH_EVERY)), Effect.forkScoped)

      return {
        touchKey: (keyId) => keys.note(keyId, new Date()),
        keyLastUsed: newest(keys),
        touchSession: (sessionId) => sessions.note(sessionId, new Date()),
        sessionLastUsed: newest(sessions),
        flush
      }
    })
  )
}
