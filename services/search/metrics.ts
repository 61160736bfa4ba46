/**
 * Search latency by mode (text, vector, hybrid), the postings the word ranking holds in memory, the
 * embedder's batch latency in seconds, and the emails the indexer has waiting for the embedder.
 */
import { Duration, Effect, Metric, MetricBoundaries } from "effect"

const latencyBuckets = MetricBoundaries.fromIterable([0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10])

const seconds = (name: string, description: string) =>
  Metric.histogram(name, latencyBuckets, description).pipe(Metric.mapInput((elapsed: Duration.Duration) => Duration.toSeconds(elapsed)))

const searchDuration = seconds(
  "mailroom_search_duration_seconds",
  "How long a search took, from the query to the page of results, by mode"
)
const searchByMode = {
  text: Metric.tagged(searchDuration, "mode", "text"),
  vector: Metric.tagged(searchDuration, "mode", "vector"),
  hybrid: Metric.tagged(searchDuration, "mode", "hybrid")
} as const

const embedderBatch = seconds(
  "mailroom_embedder_batch_duration_seconds",
  "How long the embedder took for one batch of texts (an email's chunks, or a query)"
)

/** Time a search of `mode`, whatever its outcome. */
export const timeSearch = (mode: keyof typeof searchByMode) => <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Metric.trackDuration(effect, searchByMode[mode])

/** Time one embedder call. */
export const timeEmbedderBatch = <A, E, R>(effect: Effect.Effect<A, E, R>) => Metric.trackDuration(effect, embedderBatch)

const memoryPostings = Metric.gauge("mailroom_search_memory_postings", {
  description: "Postings the word ranking holds in memory in this process (at most SEARCH_MEMORY_POSTINGS)"
})

/** How many postings the word ranking holds now. */
export const postingsHeld = (postings: number) => Metric.set(memoryPostings, postings)

const embedderQueue = Metric.gauge("mailroom_embedder_queue_emails", {
  description: "Emails the indexer has waiting for the embedder or in one of its calls"
})

/** Count an email in the embedder's queue while `effect` embeds it. */
export const queuedForEmbedding = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.acquireUseRelease(
    Metric.increment(embedderQueue),
    () => effect,
    () => Metric.incrementBy(embedderQueue, -1)
  )

const indexAbandoned = Metric.counter("mailroom_index_abandoned_total", {
  description: "Emails the indexer gave up on: they failed again and again while other mail was indexed (`mailroom reindex` tries them again)",
  incremental: true
})

/** Count an email the indexer gave up on. */
export const abandonedIndexing = Metric.increment(indexAbandoned)
/** Exported from 0 as the indexer starts: an alert on the first email given up on needs the series before it. */
export const abandonedIndexingFromZero = Metric.incrementBy(indexAbandoned, 0)
