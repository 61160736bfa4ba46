/**
 * Group commit (services/batching.ts): batching, ordering, failure and interruption.
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Ref, Scope } from "effect"
import { groupCommit, groupCommitIsolated, inLockOrder } from "../services/batching.ts"

/** Lets forked callers reach the batcher (live clock). */
const settle = Effect.sleep("20 millis")

describe("groupCommit", () => {
  it.live("sends a lone request at once, and requests that arrive meanwhile together in the next batch", () =>
    Effect.gen(function*() {
      const batches = yield* Ref.make<Array<ReadonlyArray<number>>>([])
      const gate = yield* Deferred.make<void>()
      const submit = yield* groupCommit({
        maxBatch: 3,
        parallel: 1,
        run: (batch: ReadonlyArray<number>) =>
          Ref.update(batches, (all) => [...all, batch]).pipe(
            // The first batch holds its slot until the gate opens, so the rest must queue.
            Effect.zipRight(batch[0] === 0 ? Deferred.await(gate) : Effect.void),
            Effect.as(batch.map((n) => n * 10))
          )
      })
      const first = yield* Effect.fork(submit(0))
      yield* settle
      expect(yield* Ref.get(batches)).toEqual([[0]])
      const rest = yield* Effect.fork(Effect.forEach([1, 2, 3, 4, 5], submit, { concurrency: "unbounded" }))
      yield* settle
      expect(yield* Ref.get(batches)).toEqual([[0]])
      yield* Deferred.succeed(gate, undefined)
      expect(yield* Fiber.join(first)).toBe(0)
      // Each caller gets its own result, in its own position, whatever batch it went in.
      expect(yield* Fiber.join(rest)).toEqual([10, 20, 30, 40, 50])
      expect(yield* Ref.get(batches)).toEqual([[0], [1, 2, 3], [4, 5]])
    }).pipe(Effect.scoped))

  it.live("runs at most `parallel` batches at once", () =>
    Effect.gen(function*() {
      const running = yield* Ref.make(0)
      const peak = yield* Ref.make(0)
      const submit = yield* groupCommit({
        maxBatch: 1,
        parallel: 2,
        run: (batch: ReadonlyArray<number>) =>
          Effect.gen(function*() {
            const now = yield* Ref.updateAndGet(running, (n) => n + 1)
            yield* Ref.update(peak, (p) => Math.max(p, now))
            yield* Effect.sleep("5 millis")
            yield* Ref.update(running, (n) => n - 1)
            return batch
          })
      })
      const results = yield* Effect.forEach([1, 2, 3, 4, 5, 6], submit, { concurrency: "unbounded" })
      expect(results).toEqual([1, 2, 3, 4, 5, 6])
      expect(yield* Ref.get(peak)).toBe(2)
    }).pipe(Effect.scoped))

  it.scoped("fails every request of a failed batch, and later batches still run", () =>
    Effect.gen(function*() {
      const submit = yield* groupCommit({
        maxBatch: 10,
        parallel: 1,
        run: (batch: ReadonlyArray<string>) => (batch.includes("bad") ? Effect.fail("refused" as const) : Effect.succeed(batch))
      })
      const failed = yield* Effect.exit(submit("bad"))
      expect(failed).toEqual(Exit.fail("refused"))
      expect(yield* submit("good")).toBe("good")
    }))

  it.live("drops an interrupted request that has not been sent", () =>
    Effect.gen(function*() {
      const sent = yield* Ref.make<Array<number>>([])
      const gate = yield* Deferred.make<void>()
      const submit = yield* groupCommit({
        maxBatch: 10,
        parallel: 1,
        run: (batch: ReadonlyArray<number>) =>
          Ref.update(sent, (all) => [...all, ...batch]).pipe(
            Effect.zipRight(batch[0] === 0 ? Deferred.await(gate) : Effect.void),
            Effect.as(batch)
          )
      })
      const blocker = yield* Effect.fork(submit(0))
      yield* settle
      const abandoned = yield* Effect.fork(submit(1))
      const kept = yield* Effect.fork(submit(2))
      yield* settle
      yield* Fiber.interrupt(abandoned)
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(blocker)
      expect(yield* Fiber.join(kept)).toBe(2)
      expect(yield* Ref.get(sent)).toEqual([0, 2])
    }).pipe(Effect.scoped))

  it.live("interrupts waiting and running requests when its scope closes", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const submit = yield* groupCommit({
        maxBatch: 1,
        parallel: 1,
        run: (batch: ReadonlyArray<number>) => Effect.never.pipe(Effect.as(batch))
      }).pipe(Scope.extend(scope))
      const running = yield* Effect.fork(submit(1))
      const waiting = yield* Effect.fork(submit(2))
      yield* settle
      yield* Scope.close(scope, Exit.void)
      expect(Exit.isInterrupted(yield* Fiber.await(running))).toBe(true)
      expect(Exit.isInterrupted(yield* Fiber.await(waiting))).toBe(true)
      // A request after the close is refused the same way rather than left waiting.
      expect(Exit.isInterrupted(yield* Effect.exit(submit(3)))).toBe(true)
    }))
})

describe("groupCommitIsolated", () => {
  it.live("runs a failed batch again a request at a time: the request that cannot succeed fails alone", () =>
    Effect.gen(function*() {
      const batches = yield* Ref.make<Array<ReadonlyArray<number>>>([])
      const gate = yield* Deferred.make<void>()
      const submit = yield* groupCommitIsolated({
        maxBatch: 10,
        parallel: 1,
        run: (batch: ReadonlyArray<number>) =>
          Ref.update(batches, (all) => [...all, batch]).pipe(
            Effect.zipRight(batch[0] === 0 ? Deferred.await(gate) : Effect.void),
            // A batch holding 13 is refused whole, as a statement with one bad row is.
            Effect.zipRight(batch.includes(13) ? Effect.fail(`refused ${batch.join(",")}`) : Effect.succeed(batch.map((n) => n * 10)))
          )
      })
      const first = yield* Effect.fork(submit(0))
      yield* settle
      const rest = yield* Effect.fork(Effect.forEach([1, 13, 2], (n) => Effect.either(submit(n)), { concurrency: "unbounded" }))
      yield* settle
      yield* Deferred.succeed(gate, undefined)
      expect(yield* Fiber.join(first)).toBe(0)
      const results = yield* Fiber.join(rest)
      expect(results.map((r) => (r._tag === "Right" ? r.right : r.left))).toEqual([10, "refused 13", 20])
      // The batch of three, then each of its requests alone, once.
      expect(yield* Ref.get(batches)).toEqual([[0], [1, 13, 2], [1], [13], [2]])
    }).pipe(Effect.scoped))
})

describe("inLockOrder", () => {
  it("orders rows by key, whatever order they were collected in", () => {
    const rows = new Map([["b/2", { id: "b" }], ["a/9", { id: "a" }], ["c/1", { id: "c" }]])
    expect(inLockOrder(rows)).toEqual([{ id: "a" }, { id: "b" }, { id: "c" }])
    expect(inLockOrder(new Map())).toEqual([])
  })
})
