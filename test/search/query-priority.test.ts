/**
 * A search's query is embedded before indexing work that has not started (embedder.ts `priority`):
 * with a large indexing batch waiting for the offline embedder's processes, the query waits for the
 * job in progress at most, not for the batch. The model is a slow stand-in (a fixed time a text), so
 * what is timed is the scheduling, not the model. The ranker asks with that priority.
 */
import { expect, layer } from "@effect/vitest"
import { Duration, Effect, Fiber, Layer } from "effect"
import { fileURLToPath } from "node:url"
import { describe, it } from "vitest"
import * as LocalEmbedder from "../../layers/local-embedder.ts"
import * as DocumentReader from "../../layers/document-reader.ts"
import * as WordNet from "../../layers/wordnet.ts"
import { type EmbedPriority, Embedder } from "../../services/search/embedder.ts"
import { Indexer } from "../../services/search/indexer.ts"
import { Ranker } from "../../services/search/ranker.ts"
import { Vectors } from "../../services/search/vectors.ts"
import { testDatabase } from "../support/database.ts"
import { hashedVector, indexedMail, otherTopics, testVectorIndex } from "../support/search-services.ts"

const MS_PER_TEXT = 10
const stub = fileURLToPath(new URL("../fixtures/slow-embedder-stub.mjs", import.meta.url))

describe("the offline embedder's queue", () => {
  it("answers a query while a large indexing batch waits, after the jobs in progress only; the batch goes on after it", async () => {
    process.env.EMBEDDER_STUB_MS_PER_TEXT = String(MS_PER_TEXT)
    const seen = await Effect.gen(function*() {
      const embedder = yield* Embedder
      // Warm: both processes started (and their start not timed below).
      yield* embedder.embed(Array.from({ length: 16 }, (_, i) => `warm ${i}`))
      // 640 texts: 80 jobs of 8, 40 a process, ~3.2 s each at 10 ms a text.
      const batch = yield* Effect.fork(Effect.timed(embedder.embed(Array.from({ length: 640 }, (_, i) => `chunk ${i}`))))
      yield* Effect.sleep("200 millis")
      const started = Date.now()
      const [vector] = yield* embedder.embed(["when is the invoice due"], "query")
      const queryMs = Date.now() - started
      const batchDoneFirst = batch.unsafePoll() !== null
      const [batchTime, vectors] = yield* Fiber.join(batch)
      return { queryMs, batchDoneFirst, batchMs: Duration.toMillis(batchTime), vector: vector!, vectors }
    }).pipe(Effect.scoped, Effect.provide(LocalEmbedder.layer({ threads: 2, nice: 0, processPath: stub })), Effect.runPromise).finally(() => {
      delete process.env.EMBEDDER_STUB_MS_PER_TEXT
    })
    // The job in progress (8 texts, 80 ms) and the query's own: well under the batch's ~3 s.
    expect(seen.queryMs).toBeLessThan(1_000)
    expect(seen.batchDoneFirst).toBe(false)
    expect(seen.vectors).toHaveLength(640)
    expect(seen.batchMs).toBeGreaterThan(2_500)
    // Each answer is its own request's (the stub marks vectors with the request): the query's differs from the batch's.
    const request = (vector: Float32Array) => vector.indexOf(1)
    expect(new Set(seen.vectors.map(request)).has(request(seen.vector))).toBe(false)
  }, 30_000)
})

const asked: Array<EmbedPriority | undefined> = []
const recordingEmbedder = Layer.succeed(Embedder, {
  model: "words-v1",
  dimensions: 32,
  maxInputChars: 2_000,
  reads: () => true,
  embed: (texts, priority) => Effect.sync(() => {
    asked.push(priority)
    return texts.map(hashedVector)
  })
})

layer(testDatabase, { timeout: "60 seconds" })("the ranker's query", (it) => {
  it.effect("is embedded with the query priority; the indexer's chunks with the indexing one", () =>
    Effect.gen(function*() {
      yield* indexedMail([["eml_1", "Invoice 42", "Please pay by Friday."], ...otherTopics])
      expect(asked.length).toBeGreaterThan(0)
      expect(asked.every((priority) => priority === undefined || priority === "indexing")).toBe(true)
      asked.length = 0
      yield* (yield* Ranker).rank("usr_1", "payment due this week", "hybrid", undefined)
      expect(asked).toEqual(["query"])
    }).pipe(Effect.provide(
      Layer.merge(Ranker.Default, Indexer.Default).pipe(
        Layer.provideMerge(Vectors.Default),
        Layer.provide(Layer.mergeAll(recordingEmbedder, testVectorIndex, WordNet.layer, DocumentReader.layer))
      )
    )))
})
