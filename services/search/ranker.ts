/**
 * The ranking behind search: the best emails for a query by words (BM25 over the caller's postings,
 * widened by pseudo-relevance feedback), by meaning (the vector index) and both fused
 * (ranking.ts). Search (search.ts) adds admission, scope and paging; benchmarks call this with
 * other `RankingOptions` to measure what each technique gives.
 *
 * The defaults were chosen on SciFact's train queries only (bench/search-quality.ts,
 * `BENCH_TUNE=1`); its test queries report them.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { capInput } from "./embedder.ts"
import { expansionTerms, type FeedbackOptions, type FeedbackPosting, type WeightedLexeme } from "./feedback.ts"
import { calibrationFor, fuse, MEANING_WEIGHT, type MeaningHit, type Ranked, type TextHit } from "./ranking.ts"
import { MAX_OFFSET, type SearchMode } from "./schemas.ts"
import { Vectors } from "./vectors.ts"

/** Emails taken from the word ranking before fusion: deep enough for every page we serve. */
export const CANDIDATES = MAX_OFFSET + 100

export interface RankingOptions {
  /** BM25's term-frequency saturation and length normalisation. */
  readonly k1: number
  readonly b: number
  /** A second word ranking with the first one's shared words added; none without. */
  readonly feedback: FeedbackOptions | undefined
  /** Meaning's weight against words in hybrid fusion (0..1). */
  readonly meaningWeight: number
  /**
   * From the vector ranking, in hybrid search: a nearest-neighbour search costs more the deeper
   * it goes, and meaning mostly decides the top of the ranking. Vector-only search goes as deep as
   * words do.
   */
  readonly vectorDepth: number
}

/** Round one's ranking: BM25's textbook constants, no feedback, words and meaning even. */
export const BASELINE_RANKING: RankingOptions = { k1: 1.2, b: 0.75, feedback: undefined, meaningWeight: MEANING_WEIGHT, vectorDepth: 64 }

/**
 * What search runs with: round one's, since no technique measured (BM25's constants, feedback,
 * meaning's weight, the vector depth, subject weight) gained on SciFact's train queries beyond
 * noise (README, Benchmarks). Feedback stays available to the benchmarks, off here: it cost two
 * more queries and gained nothing.
 */
export const DEFAULT_RANKING: RankingOptions = BASELINE_RANKING

const STATS_TTL_MS = 30_000
const STATS_CACHE_MIN_DOCS = 1_000
const STATS_CACHE_SIZE = 10_000
/** Query vectors kept, so a repeated query (paging, retries, a popular search) is not embedded again. */
const QUERY_CACHE_SIZE = 1_000

interface WordHit {
  readonly emailId: string
  readonly bm25: number
  readonly ideal: number
}

export class Ranker extends Effect.Service<Ranker>()("mailroom/Ranker", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const vectors = yield* Vectors
    const { embedder } = vectors
    const calibration = calibrationFor(embedder.model)
    const queryVectors = new Map<string, Float32Array>()

    const embedQuery = (query: string) =>
      Effect.suspend(() => {
        const cached = queryVectors.get(query)
        if (cached) {
          // Most recently used last: Map keeps insertion order, so the first key is the one to evict.
          queryVectors.delete(query)
          queryVectors.set(query, cached)
          return Effect.succeed(cached)
        }
        return embedder.embed([capInput(query, embedder.maxInputChars)]).pipe(
          Effect.map((vectors) => vectors[0]!),
          Effect.tap((vector) =>
            Effect.sync(() => {
              queryVectors.set(query, vector)
              if (queryVectors.size > QUERY_CACHE_SIZE) queryVectors.delete(queryVectors.keys().next().value!)
            })
          )
        )
      })

    /**
     * Documents and their average length per namespace (and domain scope): what BM25 normalises
     * by. In a large namespace they change slowly relative to its size, so they are read at most
     * every `STATS_TTL_MS` there.
     */
    const statsCache = new Map<string, { readonly at: number; readonly docs: number; readonly avgLength: number }>()
    const corpusStats = (userId: string, mailboxIds: ReadonlyArray<string> | undefined) =>
      Effect.suspend(() => {
        const key = `${userId}|${mailboxIds?.join(",") ?? "*"}`
        const cached = statsCache.get(key)
        if (cached && Date.now() - cached.at < STATS_TTL_MS) return Effect.succeed(cached)
        return sql<{ docs: string; avgLength: number | null }>`
          SELECT count(*) AS docs, avg(length)::float8 AS avg_length FROM search_documents
          WHERE user_id = ${userId} ${mailboxIds === undefined ? sql`` : sql`AND mailbox_id = ANY(${[...mailboxIds]}::text[])`}`.pipe(
          Effect.map((rows) => {
            const stats = { at: Date.now(), docs: Number(rows[0]?.docs ?? 0), avgLength: Number(rows[0]?.avgLength ?? 1) || 1 }
            // A small namespace is cheap to count, and changes fast relative to its size.
            if (stats.docs >= STATS_CACHE_MIN_DOCS) {
              if (statsCache.size >= STATS_CACHE_SIZE) statsCache.delete(statsCache.keys().next().value!)
              statsCache.set(key, stats)
            }
            return stats
          })
        )
      })

    /**
     * BM25 over the caller's postings (`search_terms`): each query lexeme weighs its IDF from the
     * namespace's lexicon (times its weight: 1 for the query's own, less for feedback words), and
     * only the postings of informative lexemes are read (a lexeme in more than a third of the mail
     * adds little and would cost a scan of most postings), unless the query has no other. Also
     * answers the BM25 of a typical document holding each of the query's own lexemes once
     * (`ideal`), which scores are measured against.
     */
    const byWords = (
      userId: string,
      query: string,
      mailboxIds: ReadonlyArray<string> | undefined,
      options: RankingOptions,
      added: ReadonlyArray<WeightedLexeme> = []
    ) =>
      Effect.gen(function*() {
        const stats = yield* corpusStats(userId, mailboxIds)
        if (stats.docs === 0) return { hits: [] as Array<WordHit>, docs: 0 }
        const docs = sql.literal(String(stats.docs))
        const avgLength = sql.literal(String(stats.avgLength))
        const k1 = sql.literal(String(options.k1))
        const b = sql.literal(String(options.b))
        const hits = yield* sql<WordHit>`
          WITH terms AS (
            SELECT lexeme, bool_or(original) AS original, sum(weight) AS weight FROM (
              SELECT DISTINCT t.lexeme, true AS original, 1::float8 AS weight
              FROM unnest(tsvector_to_array(to_tsvector('english', ${query}))) AS t (lexeme)
              UNION ALL
              SELECT a.lexeme, false, a.weight FROM unnest(${added.map((a) => a.lexeme)}::text[], ${added.map((a) => a.weight)}::float8[]) AS a (lexeme, weight)
            ) AS q GROUP BY lexeme
          ),
          weighted AS (
            SELECT l.lexeme, l.documents, t.original, t.weight, ln(1 + (${docs} - l.documents + 0.5) / (l.documents + 0.5)) AS idf
            FROM search_lexicon l JOIN terms t ON t.lexeme = l.lexeme
            WHERE l.user_id = ${userId}
          ),
          chosen AS (
            SELECT lexeme, original, weight, idf FROM weighted
            WHERE documents * 3 <= ${docs}
               OR (original AND NOT EXISTS (SELECT 1 FROM weighted WHERE original AND documents * 3 <= ${docs}))
          )
          SELECT p.email_id,
                 sum(c.weight * c.idf * p.frequency * (${k1} + 1) / (p.frequency + ${k1} * (1 - ${b} + ${b} * p.length / ${avgLength}))) AS bm25,
                 (SELECT sum(idf) FROM chosen WHERE original) AS ideal
          FROM chosen c JOIN search_terms p ON p.user_id = ${userId} AND p.lexeme = c.lexeme
          ${mailboxIds === undefined ? sql`` : sql`WHERE p.mailbox_id = ANY(${[...mailboxIds]}::text[])`}
          GROUP BY p.email_id
          ORDER BY bm25 DESC, p.email_id
          LIMIT ${CANDIDATES}`
        return { hits: hits.map((hit) => ({ emailId: hit.emailId, bm25: Number(hit.bm25), ideal: Number(hit.ideal ?? 0) })), docs: stats.docs }
      })

    /**
     * The words of the best first-pass emails, for feedback (feedback.ts): only those in at least
     * two emails and at most a third of them, read through the postings' email index.
     */
    const feedbackPostings = (userId: string, emailIds: ReadonlyArray<string>, docs: number) =>
      emailIds.length === 0 ? Effect.succeed<ReadonlyArray<FeedbackPosting>>([]) : sql<FeedbackPosting>`
        SELECT p.email_id, p.lexeme, p.frequency, p.length
        FROM search_terms p JOIN search_lexicon l ON l.user_id = p.user_id AND l.lexeme = p.lexeme
        WHERE p.email_id = ANY(${[...emailIds]}::text[]) AND p.user_id = ${userId}
          AND l.documents >= 2 AND l.documents * 3 <= ${sql.literal(String(docs))}`

    /** Words, then (with feedback) words again with the first pass's shared words added. */
    const wordRanking = (userId: string, query: string, mailboxIds: ReadonlyArray<string> | undefined, options: RankingOptions) =>
      Effect.gen(function*() {
        const first = yield* byWords(userId, query, mailboxIds, options)
        const feedback = options.feedback
        if (feedback === undefined || first.hits.length === 0) return first.hits
        const top = first.hits.slice(0, feedback.documents)
        const postings = yield* feedbackPostings(userId, top.map((hit) => hit.emailId), first.docs)
        const added = expansionTerms({
          hits: top,
          postings: postings.map((p) => ({ ...p, frequency: Number(p.frequency), length: Number(p.length) })),
          options: feedback
        })
        if (added.length === 0) return first.hits
        return (yield* byWords(userId, query, mailboxIds, options, added)).hits
      })

    const byMeaning = (userId: string, query: string, mailboxIds: ReadonlyArray<string> | undefined, depth: number) =>
      Effect.gen(function*() {
        const vector = yield* embedQuery(query)
        const collection = yield* vectors.collection
        return yield* collection.search(vector, { namespace: userId, mailboxIds }, depth)
      })

    /**
     * Every candidate for `query` in the caller's namespace (within `mailboxIds` when given),
     * best first, with its score. Hybrid search without meaning is still a good search: an
     * embedder or vector index outage narrows it to words instead of failing it.
     */
    const rank = (
      userId: string,
      query: string,
      mode: SearchMode,
      mailboxIds: ReadonlyArray<string> | undefined,
      options: RankingOptions = DEFAULT_RANKING
    ) =>
      Effect.gen(function*() {
        const [text, meaning] = yield* Effect.all([
          mode === "vector" ? Effect.succeed<ReadonlyArray<WordHit>>([]) : wordRanking(userId, query, mailboxIds, options),
          mode === "text"
            ? Effect.succeed<ReadonlyArray<MeaningHit>>([])
            : mode === "vector"
            ? byMeaning(userId, query, mailboxIds, CANDIDATES)
            : byMeaning(userId, query, mailboxIds, options.vectorDepth).pipe(
              Effect.catchTags({
                EmbedderError: (error) => Effect.as(Effect.logWarning(`Searching by words only: ${error.message}`), []),
                VectorIndexError: (error) => Effect.as(Effect.logWarning(`Searching by words only: ${error.message}`), [])
              })
            )
        ], { concurrency: 2 })
        return fuse({
          mode,
          text: text.map((hit): TextHit => ({ emailId: hit.emailId, bm25: hit.bm25 })),
          meaning,
          ideal: text[0]?.ideal ?? 0,
          calibration,
          meaningWeight: options.meaningWeight
        }) satisfies Array<Ranked>
      })

    return { model: embedder.model, rank } as const
  })
}) {}
