/**
 * The query log in process (services/search/query-log.ts), over the suite's migrated database: a
 * search's query is this process's suggestion from the moment it is noted, while its batch waits, while
 * the batch's statement is being written and once it is, so a suggestion never misses it in between;
 * an account deleted meanwhile keeps none and fails nobody's.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer } from "effect"
import { DependencyHealth } from "../../services/health/dependency-health.ts"
import { QueryLog } from "../../services/search/query-log.ts"
import { testDatabase } from "../support/database.ts"
import { insertUser } from "../support/users.ts"

const services = QueryLog.Default.pipe(Layer.provide(DependencyHealth.Default), Layer.provideMerge(testDatabase))

/** A pause of real time (the suite's clock is a test clock). */
const pause = (ms: number) => Effect.promise(() => new Promise((resolve) => setTimeout(resolve, ms)))

layer(services, { timeout: "60 seconds" })("QueryLog", (it) => {
  it.effect("a query is pending until its batch is written, including while the write waits", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const log = yield* QueryLog
      const { userId } = yield* insertUser()
      const stored = sql<{ query: string }>`SELECT query FROM search_queries WHERE user_id = ${userId}`
      const pendingQueries = () => log.pending(userId, "quarterly").map((noted) => noted.query)

      yield* log.remember(userId, "Quarterly report")
      expect(pendingQueries()).toEqual(["Quarterly report"])

      // The table held by another transaction: the batch's statement waits on it (on the embedded
      // database, for its one connection) while the query is being written, neither noted nor stored.
      const locked = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const holder = yield* Effect.forkDaemon(Effect.gen(function*() {
        yield* sql`LOCK TABLE search_queries IN EXCLUSIVE MODE`
        yield* Deferred.succeed(locked, undefined)
        yield* Deferred.await(release)
      }).pipe(sql.withTransaction))
      yield* Deferred.await(locked)
      const flushing = yield* Effect.forkDaemon(log.flush)
      yield* pause(200)
      expect(pendingQueries()).toEqual(["Quarterly report"])
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(holder)
      yield* Fiber.join(flushing)

      expect(pendingQueries()).toEqual([])
      expect((yield* stored).map((row) => row.query)).toEqual(["Quarterly report"])
    }))

  it.effect("a query of an account deleted before its batch is written is dropped; the batch's others are written", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const log = yield* QueryLog
      const gone = yield* insertUser()
      const kept = yield* insertUser()
      yield* log.remember(gone.userId, "Contract renewal")
      yield* log.remember(kept.userId, "Contract renewal")
      yield* sql`DELETE FROM users WHERE id = ${gone.userId}`

      yield* log.flush
      const stored = yield* sql<{ userId: string }>`
        SELECT user_id FROM search_queries WHERE user_id IN (${gone.userId}, ${kept.userId})`
      expect(stored).toEqual([{ userId: kept.userId }])
      // Not kept for another attempt either.
      expect(log.pending(gone.userId, "contract")).toEqual([])
    }))
})
