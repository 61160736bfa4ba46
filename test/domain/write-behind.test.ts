/**
 * The write-behind buffer (services/write-behind.ts) the query log and the credentials' last use share:
 * values merge under their key, stay visible while their batch is written, go once it is, and come
 * back merged under newer ones when the write fails.
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber } from "effect"
import { writeBehind } from "../../services/write-behind.ts"

const sum = () => writeBehind<number>((noted, newer) => noted + newer)

describe("writeBehind", () => {
  it.effect("merges under a key, and keeps a batch visible until its write is done", () =>
    Effect.gen(function*() {
      const buffer = sum()
      buffer.note("a", 1)
      buffer.note("a", 2)
      buffer.note("b", 5)
      expect(buffer.unwrittenAt("a")).toEqual([3])
      const started = yield* Deferred.make<ReadonlyMap<string, number>>()
      const finish = yield* Deferred.make<void>()
      const flushing = yield* Effect.fork(buffer.flush(
        (batch) => Effect.zipRight(Deferred.succeed(started, batch), Deferred.await(finish)),
        () => Effect.void
      ))
      expect([...(yield* Deferred.await(started))]).toEqual([["a", 3], ["b", 5]])
      buffer.note("a", 10)
      // Being written, and noted since: both are still this process's unwritten values.
      expect(buffer.unwrittenAt("a")).toEqual([3, 10])
      expect(buffer.unwritten()).toEqual([3, 5, 10])
      expect(buffer.size()).toBe(1)
      yield* Deferred.succeed(finish, undefined)
      yield* Fiber.join(flushing)
      expect(buffer.unwritten()).toEqual([10])
    }))

  it.effect("a failed write notes its batch again, merged with what was noted since, and says why", () =>
    Effect.gen(function*() {
      const buffer = sum()
      buffer.note("a", 1)
      const failures: Array<string> = []
      yield* buffer.flush(
        () => Effect.zipRight(Effect.sync(() => buffer.note("a", 2)), Effect.fail("database down")),
        (error) => Effect.sync(() => failures.push(error))
      )
      expect(failures).toEqual(["database down"])
      expect(buffer.unwrittenAt("a")).toEqual([3])
      expect(buffer.size()).toBe(1)
      // Nothing noted: nothing written.
      const empty = sum()
      yield* empty.flush(() => Effect.die("not called"), () => Effect.void)
    }))

  it.effect("a write that dies notes its batch again; one interrupted (the service closing) finishes its statement first", () =>
    Effect.gen(function*() {
      const buffer = sum()
      buffer.note("a", 1)
      const died = yield* Effect.exit(buffer.flush(() => Effect.die("driver broke"), () => Effect.void))
      expect(died._tag).toBe("Failure")
      expect(buffer.unwrittenAt("a")).toEqual([1])

      const started = yield* Deferred.make<void>()
      const finish = yield* Deferred.make<void>()
      const written: Array<ReadonlyMap<string, number>> = []
      const flushing = yield* Effect.fork(buffer.flush(
        (batch) => Deferred.succeed(started, undefined).pipe(Effect.zipRight(Deferred.await(finish)), Effect.zipRight(Effect.sync(() => written.push(batch)))),
        () => Effect.void
      ))
      yield* Deferred.await(started)
      const interrupting = yield* Effect.fork(Fiber.interrupt(flushing))
      yield* Deferred.succeed(finish, undefined)
      yield* Fiber.join(interrupting)
      expect(written.map((batch) => [...batch])).toEqual([[["a", 1]]])
      expect(buffer.unwritten()).toEqual([])
    }))
})
