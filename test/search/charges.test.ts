/**
 * A search is charged to the period's quota when it runs to its answer, only: one that fails, dies or
 * is given up by its caller (the client went away: the request's fiber interrupted) is refunded.
 * In process over the suite's database, the search by meaning asking an embedder that fails, dies or
 * never answers.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer, Option } from "effect"
import type { Principal } from "../../services/accounts/principal.ts"
import { Principals } from "../../services/accounts/principals.ts"
import { RecipientDirectory } from "../../services/mail/directory.ts"
import { WebhookSubscriptions } from "../../services/webhooks/subscriptions.ts"
import * as MemoryBus from "../../layers/memory-bus.ts"
import { DependencyHealth } from "../../services/health/dependency-health.ts"
import { Embedder, EmbedderError, readsAnyText } from "../../services/search/embedder.ts"
import { Search } from "../../services/search/search.ts"
import { Vectors } from "../../services/search/vectors.ts"
import * as WordNet from "../../layers/wordnet.ts"
import { testDatabase } from "../support/database.ts"
import { HASHED_DIMENSIONS, testVectorIndex } from "../support/search-services.ts"
import { insertUser } from "../support/users.ts"

type Answer = "fails" | "dies" | "hangs"

/** What the embedder does with the next search, and a signal that the search reached it. */
let answer: Answer = "fails"
let reached: Deferred.Deferred<void> | undefined

const embedder = Layer.succeed(Embedder, {
  model: "charges-v1",
  dimensions: HASHED_DIMENSIONS,
  maxInputChars: 2_000,
  reads: readsAnyText,
  embed: () =>
    Effect.gen(function*() {
      if (reached !== undefined) yield* Deferred.succeed(reached, undefined)
      if (answer === "fails") return yield* new EmbedderError({ message: "the model is away" })
      if (answer === "dies") return yield* Effect.die(new Error("the model broke"))
      return yield* Effect.never
    })
})

const search = Search.Default.pipe(
  Layer.provide(Layer.merge(Vectors.Default.pipe(Layer.provide(Layer.merge(embedder, testVectorIndex))), WordNet.layer))
)

const principal = (userId: string): Principal => ({
  userId,
  plan: "free",
  via: "apiKey",
  keyId: Option.none(),
  sessionId: Option.none(),
  mailboxes: Option.none(),
  readOnly: false
})

const searchesUsed = (userId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ n: number }>`SELECT coalesce(sum(searches), 0)::int AS n FROM usage_counters WHERE user_id = ${userId}`).pipe(
    Effect.map((rows) => Number(rows[0]?.n ?? 0))
  )

layer(Layer.provideMerge(search, Layer.mergeAll(Principals.Default, RecipientDirectory.Default, WebhookSubscriptions.Default).pipe(Layer.provideMerge(MemoryBus.layer), Layer.provideMerge(DependencyHealth.Default), Layer.provideMerge(testDatabase))), { timeout: "60 seconds" })("What a search that gives no answer costs", (it) => {
  it.effect("nothing when the embedder fails (503) or dies", () =>
    Effect.gen(function*() {
      const { userId } = yield* insertUser("free")
      const searches = yield* Search
      answer = "fails"
      const failed = yield* Effect.flip(searches.search(principal(userId), { query: "quarterly report", mode: "vector" }))
      expect(failed._tag).toBe("ServiceUnavailable")
      answer = "dies"
      const died = yield* Effect.exit(searches.search(principal(userId), { query: "quarterly report", mode: "vector" }))
      expect(died._tag).toBe("Failure")
      expect(yield* searchesUsed(userId)).toBe(0)
    }))

  it.effect("nothing when its caller gives it up while it runs, though it was counted when it began", () =>
    Effect.gen(function*() {
      const { userId } = yield* insertUser("free")
      const searches = yield* Search
      answer = "hangs"
      reached = yield* Deferred.make<void>()
      const running = yield* Effect.fork(searches.search(principal(userId), { query: "quarterly report", mode: "vector" }))
      yield* Deferred.await(reached)
      expect(yield* searchesUsed(userId)).toBe(1)
      yield* Fiber.interrupt(running)
      expect(yield* searchesUsed(userId)).toBe(0)
      reached = undefined
    }))
})
