/**
 * `mailroom reindex` (`npm run reindex`): embed every email that is not searchable with the current
 * embedding model (a changed `EMBEDDING_MODEL` or embedder, or mail received before search), or
 * every email afresh with `--all` (its vectors and its words: an attachment an earlier version could
 * not read, such as a PDF, is then searchable by its words too). Then the mail of accounts whose
 * vectors the index lost (a fresh Qdrant volume) is embedded again. Then the words of mail an earlier
 * version read differently (documents.ts WORDS_VERSION) are read again, its vectors kept. First,
 * mail stored with html and no text gets its text, and received mail whose 8-bit text lost its
 * characters, or in HZ or ISO-2022-KR stored as its bytes, is read again (text-repair.ts), their
 * words indexed afresh. Runs beside a cluster's
 * nodes; on the embedded database, stop the server first (one process holds `DATA_DIR`). Progress
 * goes to stderr; re-running continues where it stopped.
 */
import { Effect, Layer } from "effect"
import { retryOnConflict } from "../services/health/dependency-health.ts"
import { repairText } from "../services/maintenance/text-repair.ts"
import { Indexer } from "../services/search/indexer.ts"
import { vectorsLayer } from "./infrastructure.ts"
import type { AppConfigShape } from "./config.ts"
import * as Database from "./database.ts"

const CONCURRENCY = 8
/** Emails whose words are read again in one transaction. */
const WORDS_BATCH = 100

const bar = (done: number, total: number, startedMs: number) => {
  const width = 30
  const fraction = total === 0 ? 1 : done / total
  const rate = done / Math.max(0.001, (Date.now() - startedMs) / 1000)
  const left = rate > 0 ? Math.ceil((total - done) / rate) : 0
  const filled = Math.round(width * fraction)
  return `[${"#".repeat(filled)}${".".repeat(width - filled)}] ${done}/${total} ${(fraction * 100).toFixed(0)}% ` +
    `${rate.toFixed(1)}/s ETA ${Math.floor(left / 60)}m${String(left % 60).padStart(2, "0")}s`
}

/**
 * Run `step` on each of `items` (`concurrency` at once), a progress bar on stderr counting `weight`
 * of each (a terminal's redrawn in place, else a line every 5 s), then `Done:` and `what` was done.
 */
const withProgress = <A, E, R>(
  items: ReadonlyArray<A>,
  options: { readonly total: number; readonly weight: (item: A) => number; readonly concurrency: number; readonly what: (done: number) => string },
  step: (item: A) => Effect.Effect<unknown, E, R>
) =>
  Effect.gen(function*() {
    const started = Date.now()
    const tty = process.stderr.isTTY === true
    let done = 0
    let lastLine = 0
    yield* Effect.forEach(items, (item) =>
      Effect.tap(step(item), () =>
        Effect.sync(() => {
          done += options.weight(item)
          if (tty) process.stderr.write(`\r${bar(done, options.total, started)}`)
          else if (Date.now() - lastLine > 5_000 || done === options.total) {
            lastLine = Date.now()
            process.stderr.write(`${bar(done, options.total, started)}\n`)
          }
        })), { concurrency: options.concurrency, discard: true })
    if (tty) process.stderr.write("\n")
    process.stderr.write(`Done: ${options.what(done)} in ${((Date.now() - started) / 1000).toFixed(1)} s\n`)
  })

export const reindex = (config: AppConfigShape, options: { readonly all: boolean }) =>
  Effect.gen(function*() {
    const { derived, reread, sevenBit } = yield* repairText
    if (derived > 0) process.stderr.write(`Derived the text of ${derived} emails stored with html and no text, and indexed their words\n`)
    if (reread > 0) process.stderr.write(`Read again ${reread} received emails whose 8-bit text was stored with characters lost (as �), and indexed their words\n`)
    if (sevenBit > 0) process.stderr.write(`Read again ${sevenBit} received emails in HZ or ISO-2022-KR stored as their bytes, and indexed their words\n`)
    const indexer = yield* Indexer
    const ids = yield* indexer.stale({ all: options.all })
    process.stderr.write(`Embedding ${ids.length} emails with ${indexer.model}\n`)
    // Emails indexed at once share the lexicon's rows: on PostgreSQL one may lose a deadlock to another.
    // Emails embedded (each on its own, CONCURRENCY at once), counted on the progress bar.
    const embedEach = <E>(emailIds: ReadonlyArray<string>, embed: (id: string) => Effect.Effect<unknown, E>) =>
      withProgress(
        emailIds,
        { total: emailIds.length, weight: () => 1, concurrency: CONCURRENCY, what: (done) => `${done} emails` },
        (id) => retryOnConflict(embed(id))
      )
    yield* embedEach(ids, options.all ? indexer.refresh : indexer.index)

    // Mail whose vectors the index lost (indexer.lostVectors): indexed afresh, as with --all.
    const lost = options.all ? [] : yield* indexer.lostVectors
    if (lost.length > 0) {
      const again = yield* indexer.embeddedOf(lost.map((account) => account.userId))
      process.stderr.write(
        `The vector index lost the vectors of ${lost.length === 1 ? "1 account's" : `${lost.length} accounts'`} mail: embedding ${again.length} emails again\n`
      )
      yield* embedEach(again, indexer.refresh)
    }

    // Mail whose words an earlier version read (documents.ts WORDS_VERSION): read again, vectors kept.
    const worded = yield* indexer.staleWords
    if (worded.length === 0) return
    process.stderr.write(`Reading again the words of ${worded.length === 1 ? "1 email" : `${worded.length} emails`} indexed by an earlier version\n`)
    const batches = Array.from({ length: Math.ceil(worded.length / WORDS_BATCH) }, (_, i) => worded.slice(i * WORDS_BATCH, (i + 1) * WORDS_BATCH))
    yield* withProgress(
      batches,
      { total: worded.length, weight: (batch) => batch.length, concurrency: 2, what: (done) => `the words of ${done} emails` },
      (batch) => retryOnConflict(indexer.reword(batch))
    )
  }).pipe(Effect.provide(Indexer.Default.pipe(Layer.provide(vectorsLayer(config)), Layer.provideMerge(Database.layer(config)))))
