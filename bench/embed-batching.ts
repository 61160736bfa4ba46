/**
 * `npm run bench:embed-batching`: what sharing embedder calls across emails gives the index stage
 * (issue 18 item 4), on the offline model (EMBEDDER_THREADS threads, default 2), in one run:
 *   per email  one call per email (its one chunk), 8 emails at once: how the indexer called it before;
 *   shared     the same emails through the indexer's group commit (up to 16 emails a call, 2 calls
 *              in flight), as services/search/indexer.ts calls it now.
 * Texts are ~60 words, as a short email's body. Prints emails/s of each and their ratio.
 * Settings: BENCH_EMAILS (160), EMBEDDER_THREADS (2).
 */
import { Effect } from "effect"
import * as LocalEmbedder from "../layers/local-embedder.ts"
import { groupCommit } from "../services/batching.ts"
import { Embedder } from "../services/search/embedder.ts"

const EMAILS = Number(process.env.BENCH_EMAILS ?? 160)
const THREADS = Number(process.env.EMBEDDER_THREADS ?? 2)
const words = "invoice payment meeting agenda flight hotel contract renewal schedule project budget report customer order delivery".split(" ")
const text = (i: number) => `${Array.from({ length: 60 }, (_, j) => words[(i * 7 + j * 3) % words.length]).join(" ")} ${i}`
const emails = Array.from({ length: EMAILS }, (_, i) => [text(i)])

const program = Effect.gen(function*() {
  const embedder = yield* Embedder
  // Every thread loads the model before anything is timed.
  yield* embedder.embed(Array.from({ length: 16 * THREADS }, (_, i) => text(i)))
  const timed = <A, E>(effect: Effect.Effect<A, E>) =>
    Effect.gen(function*() {
      const started = performance.now()
      yield* effect
      return EMAILS / ((performance.now() - started) / 1000)
    })
  const perEmail = yield* timed(Effect.forEach(emails, (chunks) => embedder.embed(chunks), { concurrency: 8, discard: true }))
  const shared = yield* groupCommit({
    maxBatch: 16,
    parallel: 2,
    run: (batch: ReadonlyArray<ReadonlyArray<string>>) =>
      embedder.embed(batch.flat()).pipe(Effect.map((vectors) => {
        let offset = 0
        return batch.map((chunks) => vectors.slice(offset, (offset += chunks.length)))
      }))
  })
  const batched = yield* timed(Effect.forEach(emails, (chunks) => shared(chunks), { concurrency: 8, discard: true }))
  console.log(`bench:embed-batching — ${EMAILS} emails, 8 at once, local model on ${THREADS} thread(s)`)
  console.log(`  per email  ${perEmail.toFixed(1)} emails/s`)
  console.log(`  shared     ${batched.toFixed(1)} emails/s`)
  console.log(`ratio shared/per email: ${(batched / perEmail).toFixed(2)}`)
})

await Effect.runPromise(program.pipe(Effect.scoped, Effect.provide(LocalEmbedder.layer({ threads: THREADS }))))
