/**
 * The ranking behind search: the best emails for a query by words (BM25 over the caller's postings,
 * optionally widened by pseudo-relevance feedback or synonyms), by meaning (the vector index) and both fused
 * (ranking.ts). Search (search.ts) adds admission, scope and paging; benchmarks call this with
 * other `RankingOptions` to measure what each technique gives.
 *
 * The word ranking sums every posting of the query's informative lexemes, from the postings this
 * process holds in memory (postings.ts, `fromMemory`) or in the database (`exhaustive`). Feedback and
 * the thesaurus (thesaurus.ts) widen the query's words.
 *
 * The defaults were chosen on SciFact's train queries only (bench/search-quality.ts,
 * `BENCH_TUNE=1`); its test queries report them.
 */
import { SqlClient, type Statement } from "@effect/sql"
import { Clock, Context, Effect } from "effect"
import { type MailNarrowing, narrowedIfAny, senderKey as senderKeyOf } from "../mail/narrowing.ts"
import { capInput } from "./embedder.ts"
import { searchableText, wordForm } from "./documents.ts"
import { expansionTerms, type FeedbackOptions, type FeedbackPosting, type WeightedLexeme } from "./feedback.ts"
import { calibrationFor, type ExactMatch, fuse, MEANING_WEIGHT, type MeaningHit, type Ranked, type TextHit } from "./ranking.ts"
import { postingsHeld } from "./metrics.ts"
import { PostingsMemory, type ScoredLexeme } from "./postings.ts"
import { MAX_OFFSET, type SearchMode } from "./schemas.ts"
import { queryWords, Thesaurus, type ThesaurusOptions, type WeightedSynonym } from "./thesaurus.ts"
import { Vectors } from "./vectors.ts"

/** Emails taken from the word ranking before fusion: deep enough for every page we serve. */
export const CANDIDATES = MAX_OFFSET + 100

export interface RankingOptions {
  /** BM25's term-frequency saturation and length normalisation. */
  readonly k1: number
  readonly b: number
  /** A second word ranking with the first one's shared words added; none without. */
  readonly feedback: FeedbackOptions | undefined
  /** The query's words widened by their synonyms (thesaurus.ts); none without. */
  readonly thesaurus: ThesaurusOptions | undefined
  /** Meaning's weight against words in hybrid fusion (0..1). */
  readonly meaningWeight: number
  /**
   * From the vector ranking, in hybrid search: a nearest-neighbour search costs more the deeper
   * it goes, and meaning mostly decides the top of the ranking. Vector-only search goes as deep as
   * words do.
   */
  readonly vectorDepth: number
  /**
   * Emails the word ranking answers, best first: `CANDIDATES`, as deep as pages reach (fusion
   * takes every one of them; a lower depth is for tests of the cut on small collections).
   */
  readonly depth: number
  /**
   * How the word ranking reads the postings; both ways answer the same ranking.
   * - `memory` (the default): from the postings held in this process (postings.ts), each search
   *   reading from the database only its lexemes' counts and the postings of mail indexed since
   *   (the first search of a lexeme reads them all). A search within mailboxes (a domain), or
   *   with the thesaurus, reads the database as `every` does.
   * - `every`: the database sums every posting of the query's lexemes (the reference `memory` is
   *   tested against). Reading only the postings that could change the top in the database
   *   (MaxScore over impact-ordered postings, sessions 19-25) was measured slower than this once the
   *   tables are vacuumed, and removed once the memory made both moot (README, Benchmarks).
   */
  readonly reading: "memory" | "every"
  /**
   * Which lexemes are too common to read, unless the query has no other: one in more than a third of
   * the namespace's mail, and one in more than `share` of it once that is more than `floor` emails.
   * A common lexeme weighs little (its IDF is low) and costs the most postings; the floor keeps a
   * small mailbox's words, where reading them all costs nothing. A third, with no lower share: a
   * tenth made the word ranking faster at 100,000 emails (p99 74 to 57 ms) but lost 0.013-0.016
   * nDCG@10 on SciFact's train queries (README, Benchmarks).
   */
  readonly common: { readonly share: number; readonly floor: number }
  /**
   * How hybrid fusion treats an email holding every query word (ranking.ts `ExactMatch`): `lift`
   * ranks it above all mail holding none of them, `floor` scores it at least its words-only score,
   * `fused` as any other (round one).
   */
  readonly exactMatch: ExactMatch
}

/** Round one's ranking: BM25's textbook constants, no feedback, words and meaning even. */
export const BASELINE_RANKING: RankingOptions = {
  k1: 1.2,
  b: 0.75,
  feedback: undefined,
  thesaurus: undefined,
  meaningWeight: MEANING_WEIGHT,
  vectorDepth: 64,
  depth: CANDIDATES,
  reading: "memory",
  common: { share: 1 / 3, floor: 0 },
  exactMatch: "fused"
}

/**
 * What search runs with: round one's, since no technique measured (BM25's constants, feedback, the
 * thesaurus, meaning's weight, the vector depth, subject weight) gained on SciFact's train queries
 * beyond noise in hybrid search (README, Benchmarks). Feedback and the thesaurus stay available to
 * the benchmarks, off here: feedback cost two more queries and gained nothing; the thesaurus gained
 * words alone 0.003 and hybrid search nothing. But an email holding every query word is lifted
 * above mail holding none of them (`exactMatch`): a correction of a flaw (an exact match on a rare
 * name buried under mail the model finds near), not a gain measured on SciFact.
 */
export const DEFAULT_RANKING: RankingOptions = { ...BASELINE_RANKING, exactMatch: "lift" }

const STATS_TTL_MS = 30_000
const STATS_CACHE_MIN_DOCS = 1_000
const STATS_CACHE_SIZE = 10_000
/** Queries remembered (their vectors, their lexemes), so a repeated query (paging, retries, a popular search) is not embedded or stemmed again. */
const QUERY_CACHE_SIZE = 1_000

/**
 * `value` under `key` in `map`, as its newest entry; past `capacity` the oldest goes (a Map keeps its
 * insertion order). Asked on a hit too, it keeps the most recently used last.
 */
const keepBounded = <K, V>(map: Map<K, V>, key: K, value: V, capacity: number) => {
  map.delete(key)
  map.set(key, value)
  if (map.size > capacity) map.delete(map.keys().next().value!)
}

/**
 * How many postings the word ranking holds in memory in this process (`reading: "memory"`), at 16
 * bytes each: 8,000,000 is ~128 MB. The lexemes searched least recently go first.
 */
export class SearchMemory extends Context.Reference<SearchMemory>()("mailroom/SearchMemory", {
  defaultValue: () => ({ postings: 8_000_000 })
}) {}

/**
 * A chosen lexeme as the memory reads it: the lexicon's count and its weight, and its postings of
 * documents numbered above `after` (space-separated lists, in the same order; null for none).
 */
interface MemoryRow {
  readonly lexeme: string
  readonly documents: number
  readonly original: boolean
  readonly idf: number
  readonly weight: number
  readonly numbers: string | null
  readonly frequencies: string | null
  readonly lengths: string | null
  /** How many of the query's own lexemes some email holds (the same in every row). */
  readonly seen: string | number
}

/**
 * The IDF of a lexeme none of `docs` emails holds: a query word the mail never uses still counts in
 * what a match is measured against (`ideal`), as the rarest word would, so that mail holding some
 * of the query's words scores as holding some, not all.
 */
const unseenIdf = (docs: number) => Math.log(1 + (docs + 0.5) / 0.5)

interface WordHit {
  readonly emailId: string
  readonly bm25: number
  readonly ideal: number
  /** Whether it holds every one of the query's own lexemes that is read, and the query has no lexeme the mail never uses. */
  readonly everyWord: boolean
}

/** What a word ranking reads besides the query's own words: feedback's lexemes, the thesaurus's words. */
interface Added {
  readonly lexemes: ReadonlyArray<WeightedLexeme>
  readonly synonyms: ReadonlyArray<WeightedSynonym>
}

const NOTHING_ADDED: Added = { lexemes: [], synonyms: [] }

export class Ranker extends Effect.Service<Ranker>()("mailroom/Ranker", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const vectors = yield* Vectors
    const thesaurus = yield* Thesaurus
    const { embedder } = vectors
    const calibration = calibrationFor(embedder.model)
    const queryVectors = new Map<string, Float32Array>()
    const memory = new PostingsMemory((yield* SearchMemory).postings)

    const embedQuery = (query: string) =>
      Effect.suspend(() => {
        const cached = queryVectors.get(query)
        if (cached) {
          // Most recently used last.
          keepBounded(queryVectors, query, cached, QUERY_CACHE_SIZE)
          return Effect.succeed(cached)
        }
        // Ahead of any indexing not yet started (embedder.ts `priority`): a search waits for the batch in progress at most.
        return embedder.embed([capInput(query, embedder.maxInputChars)], "query").pipe(
          Effect.map((vectors) => vectors[0]!),
          Effect.tap((vector) => Effect.sync(() => keepBounded(queryVectors, query, vector, QUERY_CACHE_SIZE)))
        )
      })

    /**
     * Documents and their average length per namespace (and domain scope): what BM25 normalises
     * by. In a large namespace they change slowly relative to its size, so they are read at most
     * every `STATS_TTL_MS` there.
     */
    const statsCache = new Map<string, { readonly at: number; readonly docs: number; readonly avgLength: number }>()
    const corpusStats = (userId: string, mailboxIds: ReadonlyArray<string> | undefined) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const key = `${userId}|${mailboxIds?.join(",") ?? "*"}`
        const cached = statsCache.get(key)
        if (cached && now - cached.at < STATS_TTL_MS) return Effect.succeed(cached)
        return sql<{ docs: string; avgLength: number | null }>`
          SELECT count(*) AS docs, avg(length)::float8 AS avg_length FROM search_documents
          WHERE user_id = ${userId} ${mailboxIds === undefined ? sql`` : sql`AND mailbox_id = ANY(${[...mailboxIds]}::text[])`}`.pipe(
          Effect.map((rows) => {
            const stats = { at: now, docs: Number(rows[0]?.docs ?? 0), avgLength: Number(rows[0]?.avgLength ?? 1) || 1 }
            // A small namespace is cheap to count, and changes fast relative to its size.
            if (stats.docs >= STATS_CACHE_MIN_DOCS) keepBounded(statsCache, key, stats, STATS_CACHE_SIZE)
            return stats
          })
        )
      })

    /**
     * How a namespace's lexemes are weighed and chosen, shared by both readings: a lexeme's IDF from
     * the lexicon's count (`l.documents`), and the `chosen` CTE over a `weighted` one (lexeme,
     * documents, original, weight, idf, …): the lexemes in at most `most` emails
     * (`RankingOptions.common`; the epsilon keeps a third exact: 9 emails, 3 is a third), or the
     * query's own when it has no other.
     */
    const lexiconTerms = (docs: number, common: RankingOptions["common"]) => {
      const most = sql.literal(`${Math.min(docs / 3, Math.max(docs * common.share, common.floor)) + 1e-9}::float8`)
      return {
        idf: sql.literal(`ln(1 + (${docs}::float8 - l.documents + 0.5) / (l.documents + 0.5))`),
        /** The IDF of a lexeme no email holds (`unseenIdf`). */
        unseen: sql.literal(`${unseenIdf(docs)}::float8`),
        chosen: sql`chosen AS (
          SELECT * FROM weighted
          WHERE documents <= ${most}
             OR (original AND NOT EXISTS (SELECT 1 FROM weighted WHERE original AND documents <= ${most}))
        )`
      }
    }

    /**
     * A query's lexemes with their weights (`queryLexemes` in SQL): the query's own (weight 1),
     * feedback's added ones and the thesaurus's synonyms, stemmed as the query is (a synonym of a
     * stop word, or one the query already holds, is left out; one found for two words counts once).
     * Only informative lexemes are read (`RankingOptions.common`: a common lexeme adds little and
     * would cost a scan of most postings), unless the query has no other.
     */
    const chosenLexemes = (query: string, added: Added, userId: string, docs: number, common: RankingOptions["common"]) => {
      const { chosen, idf } = lexiconTerms(docs, common)
      const { lexemes, synonyms } = added
      return sql`
          terms AS (
            SELECT lexeme, bool_or(original) AS original, sum(weight) AS weight FROM (
              SELECT DISTINCT t.lexeme, true AS original, 1::float8 AS weight
              FROM unnest(tsvector_to_array(to_tsvector('english', ${query}))) AS t (lexeme)
              UNION ALL
              SELECT a.lexeme, false, a.weight FROM unnest(${lexemes.map((a) => a.lexeme)}::text[], ${lexemes.map((a) => a.weight)}::float8[]) AS a (lexeme, weight)
              ${synonyms.length === 0 ? sql`` : sql`UNION ALL
              SELECT t.lexeme, false, max(s.weight)
              FROM unnest(${synonyms.map((s) => s.source)}::text[], ${synonyms.map((s) => s.word)}::text[], ${synonyms.map((s) => s.weight)}::float8[])
                AS s (source, word, weight)
              CROSS JOIN LATERAL unnest(tsvector_to_array(to_tsvector('english', s.word))) AS t (lexeme)
              WHERE to_tsvector('english', s.source) <> ''::tsvector
                AND NOT t.lexeme = ANY(tsvector_to_array(to_tsvector('english', ${query})))
              GROUP BY t.lexeme`}
            ) AS q GROUP BY lexeme
          ),
          weighted AS (
            SELECT l.lexeme, l.documents, t.original, t.weight, ${idf} AS idf
            FROM search_lexicon l JOIN terms t ON t.lexeme = l.lexeme
            WHERE l.user_id = ${userId}
          ),
          ${chosen}`
    }

    /**
     * BM25's impact of one posting (`alias.frequency`, `alias.length`): its term-frequency part,
     * which the lexeme's weight multiplies. In float8 throughout: numeric arithmetic on every
     * posting cost a third of the query's time (EXPLAIN ANALYZE, README).
     */
    const impactOf = (alias: string, options: RankingOptions, avgLength: number) =>
      sql.literal(
        `(${alias}.frequency * ${options.k1 + 1}::float8 / (${alias}.frequency + ${options.k1}::float8 * ` +
          `(1::float8 - ${options.b}::float8 + ${options.b}::float8 * ${alias}.length / ${avgLength}::float8)))`
      )

    /**
     * BM25 over the caller's postings (`search_terms`), reading them all: each chosen lexeme weighs
     * its IDF from the namespace's lexicon (times its weight); of equal scores the latest indexed
     * first (the memory agrees). The reference `fromMemory` must equal.
     */
    const exhaustive = (
      userId: string,
      query: string,
      mailboxIds: ReadonlyArray<string> | undefined,
      options: RankingOptions,
      stats: { readonly docs: number; readonly avgLength: number },
      added: Added,
      narrowed: Statement.Fragment | undefined
    ) =>
      sql<WordHit>`
          WITH ${chosenLexemes(query, added, userId, stats.docs, options.common)}
          SELECT p.email_id, sum(c.weight * c.idf * ${impactOf("p", options, stats.avgLength)}) AS bm25,
                 (SELECT sum(idf) FROM chosen WHERE original)
                   + ${lexiconTerms(stats.docs, options.common).unseen}
                     * ((SELECT count(*) FROM terms WHERE original) - (SELECT count(*) FROM weighted WHERE original)) AS ideal,
                 count(*) FILTER (WHERE c.original) = (SELECT count(*) FROM chosen WHERE original)
                   AND (SELECT count(*) FROM terms WHERE original) = (SELECT count(*) FROM weighted WHERE original) AS every_word
          FROM chosen c JOIN search_terms p ON p.user_id = ${userId} AND p.lexeme = c.lexeme
          ${narrowed === undefined ? sql`` : sql`JOIN emails e ON e.id = p.email_id ${narrowed}`}
          ${mailboxIds === undefined ? sql`` : sql`WHERE p.mailbox_id = ANY(${[...mailboxIds]}::text[])`}
          GROUP BY p.email_id, p.doc
          ORDER BY bm25 DESC, p.doc DESC
          LIMIT ${options.depth}`

    /** The query's lexemes as PostgreSQL stems it (English, stop words out), remembered per query. */
    const queryLexemes = new Map<string, ReadonlyArray<string>>()
    const lexemesOf = (query: string) =>
      Effect.suspend(() => {
        const known = queryLexemes.get(query)
        if (known !== undefined) return Effect.succeed(known)
        return sql<{ lexemes: Array<string> }>`SELECT tsvector_to_array(to_tsvector('english', ${query})) AS lexemes`.pipe(
          Effect.map((rows) => {
            const lexemes = rows[0]?.lexemes ?? []
            keepBounded(queryLexemes, query, lexemes, QUERY_CACHE_SIZE)
            return lexemes
          })
        )
      })

    /**
     * The chosen lexemes of `wanted` (as `chosenLexemes` chooses) with their counts and weights,
     * and each one's postings of documents numbered above its `after`, in one statement (one
     * snapshot: a lexeme's postings held and read add up to its count unless something held is
     * stale), in number order (the index's).
     */
    const readMemoryRows = (
      userId: string,
      wanted: ReadonlyArray<{ readonly lexeme: string; readonly weight: number; readonly original: boolean; readonly after: number }>,
      docs: number,
      common: RankingOptions["common"]
    ) => {
      const { chosen, idf } = lexiconTerms(docs, common)
      return sql<MemoryRow>`
        WITH weighted AS (
          SELECT q.lexeme, q.weight, q.original, q.after, l.documents, ${idf} AS idf
          FROM unnest(${wanted.map((w) => w.lexeme)}::text[], ${wanted.map((w) => w.weight)}::float8[],
                      ${wanted.map((w) => w.original)}::bool[], ${wanted.map((w) => w.after)}::int8[]) AS q (lexeme, weight, original, after)
          JOIN search_lexicon l ON l.user_id = ${userId} AND l.lexeme = q.lexeme
        ),
        ${chosen}
        SELECT c.lexeme, c.documents, c.original, c.idf, c.weight, n.numbers, n.frequencies, n.lengths,
               (SELECT count(*) FROM weighted WHERE original) AS seen
        FROM chosen c LEFT JOIN LATERAL (
          SELECT string_agg(p.doc::text, ' ') AS numbers, string_agg(p.frequency::text, ' ') AS frequencies,
                 string_agg(p.length::text, ' ') AS lengths
          FROM (SELECT doc, frequency, length FROM search_terms
                WHERE user_id = ${userId} AND lexeme = c.lexeme AND doc > c.after ORDER BY doc) p
        ) n ON true`
    }

    /** The email ids of documents, from what memory remembers and the database (a document forgotten since: none). */
    const emailIdsOf = (userId: string, documents: ReadonlyArray<number>) =>
      Effect.gen(function*() {
        const known = memory.emailIdsOf(userId, documents)
        const unknown = documents.filter((_, i) => known[i] === undefined)
        if (unknown.length === 0) return known
        const rows = yield* sql<{ doc: string; emailId: string }>`
          SELECT doc, email_id FROM search_documents WHERE doc = ANY(${unknown}::int8[]) AND user_id = ${userId}`
        const found = rows.map((row) => [Number(row.doc), row.emailId] as const)
        memory.rememberEmailIds(userId, found)
        const ids = new Map(found)
        return documents.map((document, i) => known[i] ?? ids.get(document))
      })

    /**
     * BM25's top `depth` from the postings held in memory (`reading: "memory"`): the query's
     * lexemes and feedback's added ones, each brought up to date from the database first (see
     * postings.ts), a lexeme whose postings disagree with its count read whole again.
     */
    const fromMemory = (
      userId: string,
      query: string,
      options: RankingOptions,
      stats: { readonly docs: number; readonly avgLength: number },
      added: ReadonlyArray<WeightedLexeme>
    ) =>
      Effect.gen(function*() {
        const own = yield* lexemesOf(query)
        const weights = new Map<string, { weight: number; original: boolean }>()
        for (const lexeme of own) weights.set(lexeme, { weight: 1, original: true })
        for (const { lexeme, weight } of added) {
          const known = weights.get(lexeme)
          weights.set(lexeme, { weight: (known?.weight ?? 0) + weight, original: known?.original ?? false })
        }
        if (weights.size === 0) return []
        const wanted = [...weights].map(([lexeme, w]) => ({ lexeme, ...w, after: memory.lastOf(userId, lexeme) }))
        // Postings read after `after` are added only to a lexeme still holding up to `after`: a
        // search side by side may have added them already (or dropped the lexeme), and then the
        // count tells whether what is held is whole.
        const apply = (row: MemoryRow, after: number) => {
          const held = memory.postingsOf(userId, row.lexeme)
          if (row.numbers === null || memory.lastOf(userId, row.lexeme) !== after) {
            if (held !== undefined) memory.touch(held)
            return held
          }
          return memory.add(userId, row.lexeme, {
            documents: row.numbers.split(" ").map(Number),
            frequencies: row.frequencies!.split(" ").map(Number),
            lengths: row.lengths!.split(" ").map(Number)
          })
        }
        const afters = new Map(wanted.map((w) => [w.lexeme, w.after]))
        const rows = yield* readMemoryRows(userId, wanted, stats.docs, options.common)
        let held = rows.map((row) => ({ row, postings: apply(row, afters.get(row.lexeme)!) }))
        const stale = held.filter(({ postings, row }) => (postings?.size ?? 0) !== Number(row.documents))
        if (stale.length > 0) {
          for (const { row } of stale) memory.drop(userId, row.lexeme)
          const again = new Set(stale.map(({ row }) => row.lexeme))
          const reread = yield* readMemoryRows(userId, wanted.filter((w) => again.has(w.lexeme)).map((w) => ({ ...w, after: 0 })), stats.docs, options.common)
          const read = new Map(reread.map((row) => [row.lexeme, { row, postings: apply(row, 0) }]))
          held = held.flatMap((entry) => {
            if (!again.has(entry.row.lexeme)) return [entry]
            const fresh = read.get(entry.row.lexeme)
            return fresh === undefined ? [] : [fresh]
          })
        }
        const scored = held.flatMap(({ postings, row }): Array<ScoredLexeme> =>
          postings === undefined ? [] : [{ postings, weight: Number(row.weight) * Number(row.idf), original: row.original }]
        )
        const unseen = own.length - Number(rows[0]?.seen ?? own.length)
        // Every query word: each of the query's own lexemes read (the common ones are not), and none the mail never uses.
        const originals = unseen > 0 ? Infinity : held.filter(({ row }) => row.original).length
        const ideal = held.filter(({ row }) => row.original).reduce((sum, { row }) => sum + Number(row.idf), 0) +
          unseen * unseenIdf(stats.docs)
        const top = memory.rank(scored, { k1: options.k1, b: options.b, avgLength: stats.avgLength, depth: options.depth })
        memory.evict(new Set(scored.map((lexeme) => lexeme.postings)))
        yield* postingsHeld(memory.size)
        const ids = yield* emailIdsOf(userId, top.map((hit) => hit.document))
        return top.flatMap((hit, i): Array<WordHit> => {
          const emailId = ids[i]
          return emailId === undefined ? [] : [{ emailId, bm25: hit.bm25, ideal, everyWord: hit.originals === originals }]
        })
      })

    /**
     * BM25 over the caller's postings for a query (and feedback's added lexemes): its best
     * `depth` emails, each with the BM25 of a typical document holding each of the query's
     * own lexemes once (`ideal`), which scores are measured against.
     */
    const byWords = (
      userId: string,
      query: string,
      mailboxIds: ReadonlyArray<string> | undefined,
      options: RankingOptions,
      added: Added = NOTHING_ADDED,
      narrowed: Statement.Fragment | undefined = undefined
    ) =>
      Effect.gen(function*() {
        const stats = yield* corpusStats(userId, mailboxIds)
        if (stats.docs === 0) return { hits: [] as Array<WordHit>, docs: 0 }
        const hits = options.reading === "memory" && memory.capacity > 0 && mailboxIds === undefined && narrowed === undefined &&
            added.synonyms.length === 0
          ? yield* fromMemory(userId, query, options, stats, added.lexemes)
          : (yield* exhaustive(userId, query, mailboxIds, options, stats, added, narrowed)).map((hit): WordHit => ({
            emailId: hit.emailId,
            bm25: Number(hit.bm25),
            ideal: Number(hit.ideal ?? 0),
            everyWord: hit.everyWord === true
          }))
        return { hits, docs: stats.docs }
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

    /** The synonyms of a query's words (none without the thesaurus option). */
    const synonymsOf = (query: string, options: ThesaurusOptions | undefined) =>
      options === undefined || options.weight <= 0
        ? Effect.succeed<ReadonlyArray<WeightedSynonym>>([])
        : Effect.forEach(queryWords(query), (source) =>
          Effect.map(thesaurus.synonyms(source, options.senses), (words) => words.map((word) => ({ source, word: wordForm(word), weight: options.weight })))).pipe(
          Effect.map((found) => found.flat())
        )

    /**
     * Words (with the thesaurus, the query's synonyms too), then (with feedback) words again with
     * the first pass's shared words added.
     */
    const wordRanking = (
      userId: string,
      query: string,
      mailboxIds: ReadonlyArray<string> | undefined,
      options: RankingOptions,
      narrowed: Statement.Fragment | undefined
    ) =>
      Effect.gen(function*() {
        const synonyms = yield* synonymsOf(query, options.thesaurus)
        const first = yield* byWords(userId, query, mailboxIds, options, { lexemes: [], synonyms }, narrowed)
        const feedback = options.feedback
        if (feedback === undefined || first.hits.length === 0) return first.hits
        const top = first.hits.slice(0, feedback.documents)
        const postings = yield* feedbackPostings(userId, top.map((hit) => hit.emailId), first.docs)
        const lexemes = expansionTerms({
          hits: top,
          postings: postings.map((p) => ({ ...p, frequency: Number(p.frequency), length: Number(p.length) })),
          options: feedback
        })
        if (lexemes.length === 0) return first.hits
        return (yield* byWords(userId, query, mailboxIds, options, { lexemes, synonyms }, narrowed)).hits
      })

    /** The nearest emails by meaning; none for a query the model takes no meaning from (embedder.ts `reads`). */
    const byMeaning = (
      userId: string,
      query: string,
      mailboxIds: ReadonlyArray<string> | undefined,
      depth: number,
      narrowing: MailNarrowing | undefined
    ) =>
      Effect.gen(function*() {
        if (!embedder.reads(capInput(query, embedder.maxInputChars))) return []
        const vector = yield* embedQuery(query)
        const collection = yield* vectors.collection
        const senderKey = narrowing?.from === undefined ? undefined : senderKeyOf(narrowing.from)
        return yield* collection.search(vector, { namespace: userId, mailboxIds, senderKey, received: narrowing?.received }, depth)
      })

    /**
     * Every candidate for `query` in the caller's namespace (within `mailboxIds` when given),
     * best first, with its score. Hybrid search without meaning is still a good search: an
     * embedder or vector index outage narrows it to words instead of failing it.
     *
     * `narrowing` (labels, sender, arrival) keeps the words' ranking to the mail meeting it before it
     * is cut at `depth`, so that a sender's email holding the words is found however many others hold
     * them too (read from the database, not the memory); and the nearest by meaning to mail of its
     * sender and arrival (the vector index keeps both with each point), but not to its labels, which
     * change: the caller keeps the candidates meeting it all.
     */
    const rank = (
      userId: string,
      query: string,
      mode: SearchMode,
      mailboxIds: ReadonlyArray<string> | undefined,
      options: RankingOptions = DEFAULT_RANKING,
      narrowing?: MailNarrowing
    ) =>
      Effect.gen(function*() {
        const narrowed = narrowing === undefined ? undefined : narrowedIfAny(sql, narrowing)
        // In the form mail is indexed in: "é" typed as an e and a combining accent finds "é"; its
        // words as mail's are indexed (documents.ts wordForm): "munchen" finds "München", "東京" 東京都庁.
        const words = searchableText(query)
        const [text, meaning] = yield* Effect.all([
          mode === "vector" ? Effect.succeed<ReadonlyArray<WordHit>>([]) : wordRanking(userId, wordForm(words), mailboxIds, options, narrowed),
          mode === "text"
            ? Effect.succeed<ReadonlyArray<MeaningHit>>([])
            : mode === "vector"
            ? byMeaning(userId, words, mailboxIds, CANDIDATES, narrowing)
            : byMeaning(userId, words, mailboxIds, options.vectorDepth, narrowing).pipe(
              Effect.catchTags({
                EmbedderError: (error) => Effect.as(Effect.logWarning(`Searching by words only: ${error.message}`), []),
                VectorIndexError: (error) => Effect.as(Effect.logWarning(`Searching by words only: ${error.message}`), [])
              })
            )
        ], { concurrency: 2 })
        return fuse({
          mode,
          text: text.map((hit): TextHit => ({ emailId: hit.emailId, bm25: hit.bm25, everyWord: hit.everyWord })),
          meaning,
          ideal: text[0]?.ideal ?? 0,
          calibration,
          meaningWeight: options.meaningWeight,
          exactMatch: options.exactMatch
        }) satisfies Array<Ranked>
      })

    return { model: embedder.model, rank } as const
  })
}) {}
