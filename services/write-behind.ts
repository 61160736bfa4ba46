/**
 * Values written behind the answer (a key's last use, a session's, a search's query): noted in memory
 * under a key, merged with what is noted there already, and written in batches. A value stays visible
 * to this process from the moment it is noted until its batch's statement has committed, including
 * while that statement runs, so a read that looks here and then in the database never misses it. A
 * batch that could not be written is noted again for the next attempt. Its owner flushes once more as
 * it closes, after its periodic flush has stopped (a flush's statement finishes first), so that nothing
 * noted is left behind.
 */
import { Effect, Exit } from "effect"

export interface WriteBehind<V> {
  /** Note `value` under `key`, merged with a value noted there and not yet written. */
  readonly note: (key: string, value: V) => void
  /** How many values wait for the next batch. */
  readonly size: () => number
  /** Every value not written yet, those being written included (one may also be in the database). */
  readonly unwritten: () => ReadonlyArray<V>
  /** The values not written yet under `key`, oldest batch first. */
  readonly unwrittenAt: (key: string) => ReadonlyArray<V>
  /** Write the values noted so far with `write`; on its failure they are noted again and `failed` runs. */
  readonly flush: <E>(
    write: (batch: ReadonlyMap<string, V>) => Effect.Effect<void, E>,
    failed: (error: E) => Effect.Effect<void>
  ) => Effect.Effect<void>
}

export const writeBehind = <V>(merge: (noted: V, newer: V) => V): WriteBehind<V> => {
  let pending = new Map<string, V>()
  const writing = new Set<ReadonlyMap<string, V>>()
  const note = (key: string, value: V) => {
    const noted = pending.get(key)
    pending.set(key, noted === undefined ? value : merge(noted, value))
  }
  return {
    note,
    size: () => pending.size,
    unwritten: () => [...[...writing].flatMap((batch) => [...batch.values()]), ...pending.values()],
    unwrittenAt: (key) =>
      [...writing, pending].flatMap((batch) => {
        const value = batch.get(key)
        return value === undefined ? [] : [value]
      }),
    flush: (write, failed) =>
      Effect.suspend(() => {
        if (pending.size === 0) return Effect.void
        const batch = pending
        pending = new Map()
        writing.add(batch)
        return write(batch).pipe(
          // Not written (failed, or died): noted again, merged under what was noted since, which is newer.
          Effect.onExit((exit) =>
            Exit.isSuccess(exit) ? Effect.void : Effect.sync(() => {
              const since = pending
              pending = new Map(batch)
              for (const [key, value] of since) note(key, value)
            })
          ),
          // A statement begun is seen to its end, at shutdown too: interrupted, it might have committed
          // or not, and the batch could be neither kept nor dropped with certainty.
          Effect.uninterruptible,
          Effect.catchAll(failed),
          Effect.ensuring(Effect.sync(() => writing.delete(batch)))
        )
      })
  }
}
