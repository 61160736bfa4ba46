/**
 * The current model's vectors: the embedder this process uses and its collection in the vector
 * index, opened on first use (and again after a failure, so a vector index that was down at start
 * does not keep search down once it is back).
 */
import { Effect, Option, Ref } from "effect"
import { Embedder } from "./embedder.ts"
import { timeEmbedderBatch } from "./metrics.ts"
import { type VectorCollection, VectorIndex } from "./vector-index.ts"

export class Vectors extends Effect.Service<Vectors>()("mailroom/Vectors", {
  effect: Effect.gen(function*() {
    const adapter = yield* Embedder
    // Every embedding, by the indexer or a search, goes through here: one place to time batches.
    const embedder = { ...adapter, embed: (texts: ReadonlyArray<string>) => timeEmbedderBatch(adapter.embed(texts)) }
    const index = yield* VectorIndex
    const opened = yield* Ref.make(Option.none<VectorCollection>())
    const semaphore = yield* Effect.makeSemaphore(1)

    const collection = Effect.flatMap(Ref.get(opened), Option.match({
      onSome: Effect.succeed,
      onNone: () =>
        semaphore.withPermits(1)(
          Effect.flatMap(Ref.get(opened), Option.match({
            onSome: Effect.succeed,
            onNone: () => index.collection(embedder.model, embedder.dimensions).pipe(Effect.tap((c) => Ref.set(opened, Option.some(c))))
          }))
        )
    }))

    return { embedder, index, collection } as const
  })
}) {}
