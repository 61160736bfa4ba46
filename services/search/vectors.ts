/**
 * The current model's vectors: the embedder this process uses and its collection in the vector
 * index, opened on first use, and opened again after any of its operations fails: a vector index
 * that was down at start does not keep search down once it is back, and a collection that went
 * away (Qdrant on a fresh volume, a collection deleted by hand) is created again by the next
 * operation rather than failing every one until a restart.
 */
import { Effect, Option, Ref } from "effect"
import { type EmbedPriority, Embedder } from "./embedder.ts"
import { timeEmbedderBatch } from "./metrics.ts"
import { type VectorCollection, VectorIndex, type VectorIndexError } from "./vector-index.ts"

export class Vectors extends Effect.Service<Vectors>()("mailroom/Vectors", {
  effect: Effect.gen(function*() {
    const adapter = yield* Embedder
    // Every embedding, by the indexer or a search, goes through here: one place to time batches.
    const embedder = { ...adapter, embed: (texts: ReadonlyArray<string>, priority?: EmbedPriority) => timeEmbedderBatch(adapter.embed(texts, priority)) }
    const index = yield* VectorIndex
    const opened = yield* Ref.make(Option.none<VectorCollection>())
    const semaphore = yield* Effect.makeSemaphore(1)

    /** `collection`, forgotten when one of its operations fails, so that the next asks the index again. */
    const forgottenOnFailure = (collection: VectorCollection): VectorCollection => {
      const forget = <A>(effect: Effect.Effect<A, VectorIndexError>) => Effect.tapError(effect, () => Ref.set(opened, Option.none()))
      return {
        ...collection,
        upsert: (points) => forget(collection.upsert(points)),
        search: (vector, filter, limit, options) => forget(collection.search(vector, filter, limit, options)),
        remove: (emailIds) => forget(collection.remove(emailIds)),
        count: (namespace) => forget(collection.count(namespace))
      }
    }

    const collection = Effect.flatMap(Ref.get(opened), Option.match({
      onSome: Effect.succeed,
      onNone: () =>
        semaphore.withPermits(1)(
          Effect.flatMap(Ref.get(opened), Option.match({
            onSome: Effect.succeed,
            onNone: () =>
              index.collection(embedder.model, embedder.dimensions).pipe(
                Effect.map(forgottenOnFailure),
                Effect.tap((c) => Ref.set(opened, Option.some(c)))
              )
          }))
        )
    }))

    return { embedder, index, collection } as const
  })
}) {}
