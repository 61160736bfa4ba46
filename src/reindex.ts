/**
 * `mailroom reindex` (`npm run reindex`): embed every email that is not searchable with the current
 * embedding model (a changed `EMBEDDING_MODEL` or embedder, or mail received before search), or
 * every email afresh with `--all` (its vectors and its words: an attachment an earlier version could
 * not read, such as a PDF, is then searchable by its words too). First, mail stored with html and no
 * text gets its text, and received mail whose 8-bit text lost its characters is read again
 * (text-repair.ts), their words indexed afresh. Runs beside a cluster's nodes; on the embedded database, stop the
 * server first (one process holds `DATA_DIR`). Progress goes to stderr; re-running continues where
 * it stopped.
 */
import { Effect, Layer } from "effect"
import { retryOnConflict } from "../services/health/dependency-health.ts"
import { repairText } from "../services/maintenance/text-repair.ts"
import { Indexer } from "../services/search/indexer.ts"
import { vectorsLayer } from "./app.ts"
import type { AppConfigShape } from "./config.ts"
import * as Database from "./database.ts"

const CONCURRENCY = 8

const bar = (done: number, total: number, startedMs: number) => {
  const width = 30
  const fraction = total === 0 ? 1 : done / total
  const rate = done / Math.max(0.001, (Date.now() - startedMs) / 1000)
  const left = rate > 0 ? Math.ceil((total - done) / rate) : 0
  const filled = Math.round(width * fraction)
  return `[${"#".repeat(filled)}${".".repeat(width - filled)}] ${done}/${total} ${(fraction * 100).toFixed(0)}% ` +
    `${rate.toFixed(1)}/s ETA ${Math.floor(left / 60)}m${String(left % 60).padStart(2, "0")}s`
}

export const reindex = (config: AppConfigShape, options: { readonly all: boolean }) =>
  Effect.gen(function*() {
    const { derived, reread } = yield* repairText
    if (derived > 0) process.stderr.write(`Derived the text of ${derived} emails stored with html and no text, and indexed their words\n`)
    if (reread > 0) process.stderr.write(`Read again ${reread} received emails whose 8-bit text was stored with characters lost (as �), and indexed their words\n`)
    const indexer = yield* Indexer
    const ids = yield* indexer.stale({ all: options.all })
    process.stderr.write(`Embedding ${ids.length} emails with ${indexer.model}\n`)
    const started = Date.now()
    const tty = process.stderr.isTTY === true
    let done = 0
    let lastLine = 0
    yield* Effect.forEach(ids, (id) =>
      // Emails indexed at once share the lexicon's rows: on PostgreSQL one may lose a deadlock to another.
      retryOnConflict(options.all ? indexer.refresh(id) : indexer.index(id)).pipe(
        Effect.tap(() =>
          Effect.sync(() => {
            done++
            if (tty) process.stderr.write(`\r${bar(done, ids.length, started)}`)
            else if (Date.now() - lastLine > 5_000 || done === ids.length) {
              lastLine = Date.now()
              process.stderr.write(`${bar(done, ids.length, started)}\n`)
            }
          })
        )
      ), { concurrency: CONCURRENCY, discard: true })
    if (tty) process.stderr.write("\n")
    process.stderr.write(`Done: ${done} emails in ${((Date.now() - started) / 1000).toFixed(1)} s\n`)
  }).pipe(Effect.provide(Indexer.Default.pipe(Layer.provide(vectorsLayer(config)), Layer.provideMerge(Database.layer(config)))))
