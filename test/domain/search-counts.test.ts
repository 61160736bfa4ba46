/**
 * Searches counted behind the answer (services/billing/search-counts.ts), over the suite's migrated
 * database: a read of the count is exact while a batch is being written, neither missing the batch
 * (gone from memory, not yet committed) nor counting it twice.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer } from "effect"
import { SearchCounts } from "../../services/billing/search-counts.ts"
import { DependencyHealth } from "../../services/health/dependency-health.ts"
import { testDatabase } from "../support/database.ts"
import { insertUser } from "../support/users.ts"

const services = SearchCounts.Default.pipe(Layer.provide(DependencyHealth.Default), Layer.provideMerge(testDatabase))

/** A pause of real time (the suite's clock is a test clock). */
const pause = (ms: number) => Effect.promise(() => new Promise((resolve) => setTimeout(resolve, ms)))

layer(services, { timeout: "60 seconds" })("SearchCounts", (it) => {
  it.effect("a count read while its batch is being written is the whole count, once", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const counts = yield* SearchCounts
      const { userId } = yield* insertUser("enterprise")
      const written = sql<{ searches: string }>`SELECT searches FROM usage_counters WHERE user_id = ${userId}`.pipe(
        Effect.map((rows) => Number(rows[0]?.searches ?? 0))
      )
      const read = counts.exactly(userId, written)

      counts.count(userId)
      counts.count(userId)
      counts.count(userId)
      expect(yield* read).toBe(3)

      // The table held by another transaction: the batch's statement waits on it (on the embedded
      // database, for its one connection), and a read comes in meanwhile. That read is slow: it takes
      // the stored count as soon as it runs and answers it only once the batch is written, so a read
      // let in beside the write would add to an old stored count what memory holds after the write.
      const locked = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const flushed = yield* Deferred.make<void>()
      const slowRead = counts.exactly(userId, Effect.tap(written, () => Deferred.await(flushed)))
      const holder = yield* Effect.forkDaemon(Effect.gen(function*() {
        yield* sql`LOCK TABLE usage_counters IN EXCLUSIVE MODE`
        yield* Deferred.succeed(locked, undefined)
        yield* Deferred.await(release)
      }).pipe(sql.withTransaction))
      yield* Deferred.await(locked)
      const flushing = yield* Effect.forkDaemon(counts.flush)
      yield* pause(100)
      const reading = yield* Effect.forkDaemon(slowRead)
      counts.count(userId)
      yield* pause(100)
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(holder)
      yield* Fiber.join(flushing)
      yield* Deferred.succeed(flushed, undefined)
      expect(yield* Fiber.join(reading)).toBe(4)

      yield* counts.flush
      expect(yield* written).toBe(4)
      expect(yield* read).toBe(4)
    }))
})
