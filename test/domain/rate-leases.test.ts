/**
 * Rate limits by leased tokens (services/ratelimit/leases.ts), in process over the suite's migrated
 * database: the lease's size, one process exact, two processes never over the limit together, and
 * unused tokens given back.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Context, Effect, Exit, Layer, Scope } from "effect"
import { leaseSize, RateLeases } from "../../services/ratelimit/leases.ts"
import { testDatabase } from "../support/database.ts"
import { uniqueName } from "../support/services.ts"
import { awayFromMinuteEdge, sleep } from "../support/wait.ts"

const minute = (limit: number) => [{ seconds: 60, limit }, { seconds: 3600, limit: limit * 10 }]

/** The hits the shared counters hold for a subject, per window. */
const counted = (subject: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ hits: ReadonlyArray<number> }>`SELECT hits FROM rate_limit_counters WHERE subject = ${subject}`).pipe(
      Effect.map((rows) => rows[0]?.hits.map(Number) ?? [])
    )

/** A RateLeases of its own, as another process would have, closed when `use` is done. */
const anotherProcess = <A, E, R>(use: (leases: RateLeases) => Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    const context = yield* Layer.buildWithScope(RateLeases.Default, scope)
    const leases = Context.get(context, RateLeases)
    return yield* use(leases).pipe(Effect.ensuring(Scope.close(scope, Exit.void)))
  })

layer(testDatabase, { timeout: "120 seconds" })("RateLeases", (it) => {
  it.effect("a lease is 2% of the smallest window limit, at least one request", () =>
    Effect.sync(() => {
      expect(leaseSize(minute(20))).toBe(1)
      expect(leaseSize(minute(100))).toBe(2)
      expect(leaseSize(minute(500))).toBe(10)
      expect(leaseSize([{ seconds: 60, limit: 10_000 }, { seconds: 3600, limit: 400 }])).toBe(8)
    }))

  it.effect("one process is exact: it takes a lease at a time, grants the limit and no more, and reports what it may still grant", () =>
    Effect.gen(function*() {
      yield* Effect.promise(() => awayFromMinuteEdge(15))
      const subject = uniqueName("key")
      yield* anotherProcess((leases) =>
        Effect.gen(function*() {
          const first = yield* leases.take(subject, minute(500))
          expect(first).toMatchObject({ allowed: true, limit: 500, remaining: 499, window: "minute" })
          // The whole lease is counted in every window at once; one was granted.
          expect(yield* counted(subject)).toEqual([10, 10])
          const decisions = yield* Effect.forEach(Array.from({ length: 520 }), () => leases.take(subject, minute(500)), { concurrency: 20 })
          const allowed = decisions.filter((d) => d.allowed)
          expect(allowed.length).toBe(499)
          expect(Math.min(...allowed.map((d) => d.remaining))).toBe(0)
          const refused = decisions.find((d) => !d.allowed)!
          expect(refused).toMatchObject({ allowed: false, limit: 500, remaining: 0, window: "minute" })
          expect(refused.retryAfter).toBeGreaterThanOrEqual(1)
          expect(yield* counted(subject)).toEqual([500, 500])
        })
      )
    }))

  it.effect("two processes never grant more than the limit together, and each leaves the other at most one lease short", () =>
    Effect.gen(function*() {
      yield* Effect.promise(() => awayFromMinuteEdge(15))
      const subject = uniqueName("key")
      const hammer = (leases: RateLeases) =>
        Effect.forEach(Array.from({ length: 400 }), () => leases.take(subject, minute(500)), { concurrency: 10 }).pipe(
          Effect.map((decisions) => decisions.filter((d) => d.allowed).length)
        )
      const [a, b] = yield* Effect.all([anotherProcess(hammer), anotherProcess(hammer)], { concurrency: 2 })
      expect(a + b).toBeLessThanOrEqual(500)
      expect(a + b).toBeGreaterThanOrEqual(500 - 2 * leaseSize(minute(500)))
    }))

  it.effect("a lease's last token sends for the next lease, so the request after it finds tokens; a lease of one is never taken ahead", () =>
    Effect.gen(function*() {
      yield* Effect.promise(() => awayFromMinuteEdge(15))
      const subject = uniqueName("key")
      const single = uniqueName("key")
      yield* anotherProcess((leases) =>
        Effect.gen(function*() {
          // Ten requests, one at a time, use the first lease of ten; the next is taken without a request waiting.
          yield* Effect.repeatN(leases.take(subject, minute(500)), 9)
          for (let waited = 0; (yield* counted(subject))[0] !== 20 && waited < 3000; waited += 20) {
            yield* Effect.promise(() => sleep(20))
          }
          expect(yield* counted(subject)).toEqual([20, 20])
          const eleventh = yield* leases.take(subject, minute(500))
          expect(eleventh).toMatchObject({ allowed: true, remaining: 489 })
          expect(yield* counted(subject)).toEqual([20, 20])
          // A limit of 20 leases one request at a time: the one used is all that is counted.
          yield* leases.take(single, minute(20))
          yield* Effect.promise(() => sleep(300))
          expect(yield* counted(single)).toEqual([1, 1])
        })
      )
    }))

  it.effect("tokens a process did not use go back to the windows still running when it stops", () =>
    Effect.gen(function*() {
      yield* Effect.promise(() => awayFromMinuteEdge(15))
      const subject = uniqueName("key")
      yield* anotherProcess((leases) => leases.take(subject, minute(500)))
      // One used, nine given back.
      expect(yield* counted(subject)).toEqual([1, 1])
      // A limit of 20 leases one at a time: nothing is held, nothing to give back.
      const exact = uniqueName("key")
      yield* anotherProcess((leases) => Effect.repeatN(leases.take(exact, minute(20)), 2))
      expect(yield* counted(exact)).toEqual([3, 3])
    }))
})
