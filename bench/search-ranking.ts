/**
 * In-process evaluation of the search ranking (services/search/ranker.ts) on an indexed data
 * directory, with the server stopped: the same service search runs, asked with other
 * `RankingOptions`, so that each technique's contribution is measured on the same index.
 *
 * `tune` chooses the options on one query set (SciFact's train queries), coordinate by coordinate;
 * `ablation` reports a table of techniques added one at a time to the baseline, on every query set
 * given (the chosen options are never changed by the test queries).
 */
import { SqlClient } from "@effect/sql"
import { ConfigProvider, Effect, Layer, Logger, LogLevel, ManagedRuntime } from "effect"
import { vectorsLayer } from "../src/infrastructure.ts"
import { loadConfig } from "../src/config.ts"
import * as Database from "../src/database.ts"
import { SUBJECT_BOOST } from "../services/search/documents.ts"
import type { FeedbackOptions } from "../services/search/feedback.ts"
import type { ThesaurusOptions } from "../services/search/thesaurus.ts"
import { BASELINE_RANKING, DEFAULT_RANKING, Ranker, type RankingOptions } from "../services/search/ranker.ts"
import type { SearchMode } from "../services/search/schemas.ts"
import { evaluate, type QuerySet } from "../test/support/ndcg.ts"

export { evaluate, type QuerySet }

export interface Measured {
  readonly ndcg: number
  readonly recall: number
  readonly p50: number
  readonly p95: number
}

/**
 * Opens the data directory (settings as the server had them: `env`), and answers a function that
 * ranks a query set with given options. `keyOf` turns an email into the collection's document key
 * (SciFact's document id is in the sender's address).
 */
export const openRanking = async (dataDir: string, env: Record<string, string>, keyOf: (from: string, subject: string) => string) => {
  const settings = new Map([...Object.entries(env), ["DATA_DIR", dataDir]])
  const layer = Layer.unwrapEffect(
    loadConfig.pipe(
      Effect.map((config) => Ranker.Default.pipe(Layer.provideMerge(vectorsLayer(config)), Layer.provideMerge(Database.layer(config)))),
      Effect.withConfigProvider(ConfigProvider.fromMap(settings))
    )
  ).pipe(Layer.provide(Logger.minimumLogLevel(LogLevel.Warning)))
  const runtime = ManagedRuntime.make(layer)
  const { keys, userId } = await runtime.runPromise(Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ id: string; fromAddress: string; subject: string; userId: string }>`
      SELECT e.id, e.from_address, e.subject, e.user_id FROM emails e JOIN search_documents d ON d.email_id = e.id`
    return { keys: new Map(rows.map((row) => [row.id, keyOf(row.fromAddress, row.subject)])), userId: rows[0]?.userId ?? "" }
  }))

  const run = async (set: QuerySet, options: RankingOptions, mode: SearchMode = "hybrid"): Promise<Measured> => {
    let ndcg = 0
    let recall = 0
    const ms: Array<number> = []
    for (const query of set.queries) {
      const started = performance.now()
      const ranked = await runtime.runPromise(Effect.flatMap(Ranker, (ranker) => ranker.rank(userId, query.text, mode, undefined, options)))
      ms.push(performance.now() - started)
      const score = evaluate(ranked.map((r) => keys.get(r.emailId) ?? r.emailId), set.qrels.get(query.id) ?? new Map())
      ndcg += score.ndcg
      recall += score.recall
    }
    ms.sort((a, b) => a - b)
    const n = Math.max(1, set.queries.length)
    return { ndcg: ndcg / n, recall: recall / n, p50: ms[Math.floor(ms.length / 2)] ?? 0, p95: ms[Math.floor(ms.length * 0.95)] ?? 0 }
  }
  /**
   * Re-weigh subject words in the stored postings from `from` to `to` times a body word, as the
   * indexer would have with `SUBJECT_BOOST` = `to` (the same lexemes, their subject occurrences
   * added or taken away): field weighting measured without embedding the collection again.
   */
  const reweighSubjects = (from: number, to: number) =>
    runtime.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) =>
      sql`
        UPDATE search_terms p SET frequency = p.frequency + ${to - from} * s.n
        FROM (
          SELECT e.id AS email_id, u.lexeme, cardinality(u.positions) AS n
          FROM emails e JOIN search_documents d ON d.email_id = e.id,
               unnest(to_tsvector('english', e.subject)) AS u (lexeme, positions, weights)
        ) AS s
        WHERE p.email_id = s.email_id AND p.lexeme = s.lexeme`))
  return { run, reweighSubjects, close: () => runtime.dispose() }
}

type Ranking = Awaited<ReturnType<typeof openRanking>>

/**
 * Each technique at its best setting on SciFact's train queries (the 1,507-document subset,
 * `BENCH_TUNE=1`, 2026-11-25; the thesaurus on the whole collection by words alone, 2026-11-26),
 * kept or not: what the table shows each one give. A tuning run replaces these with what it finds.
 */
export interface Tried {
  readonly k1: number
  readonly b: number
  readonly feedback: FeedbackOptions
  readonly thesaurus: ThesaurusOptions
  readonly meaningWeight: number
  readonly vectorDepth: number
}
export const TRIED_ON_TRAIN: Tried = {
  k1: 1.5,
  b: 0.6,
  feedback: { documents: 10, terms: 10, weight: 0.1 },
  thesaurus: { senses: 2, weight: 0.1 },
  meaningWeight: 0.4,
  vectorDepth: 128
}

/** What a change must gain on the tuning queries to be kept: less is noise, and every technique costs. */
const MIN_GAIN = 0.002

const describe = (o: RankingOptions) =>
  `k1=${o.k1} b=${o.b} feedback=${o.feedback ? `${o.feedback.documents}docs/${o.feedback.terms}terms/${o.feedback.weight}` : "off"} ` +
  `thesaurus=${o.thesaurus ? `${o.thesaurus.senses}senses/${o.thesaurus.weight}` : "off"} meaning=${o.meaningWeight} depth=${o.vectorDepth} ` +
  `exact=${o.exactMatch}`

/**
 * Coordinate search on `train`: BM25's constants and feedback by words alone (text mode), then
 * meaning's weight and the vector depth in hybrid mode. Answers the best options found.
 */
export const tune = async (ranking: Ranking, train: QuerySet): Promise<{ chosen: RankingOptions; tried: Tried }> => {
  // How exact matches are fused is the product's choice (a correction, not tuned here).
  let best: RankingOptions = { ...BASELINE_RANKING, exactMatch: DEFAULT_RANKING.exactMatch }
  const tried: { -readonly [K in keyof Tried]: Tried[K] } = { ...TRIED_ON_TRAIN }
  /** The first candidate is the incumbent; another replaces it only by more than `MIN_GAIN`. */
  const tryAll = async (mode: SearchMode, candidates: ReadonlyArray<RankingOptions>, step?: (top: RankingOptions) => void) => {
    let bestScore = -1
    let top = -1
    for (const candidate of candidates) {
      const r = await ranking.run(train, candidate, mode)
      console.log(`  ${mode.padEnd(6)} ${r.ndcg.toFixed(4)}  ${describe(candidate)}`)
      if (r.ndcg > top) {
        top = r.ndcg
        step?.(candidate)
      }
      if (bestScore < 0 || r.ndcg > bestScore + MIN_GAIN) {
        bestScore = r.ndcg
        best = candidate
      }
    }
    return bestScore
  }
  console.log(`tuning on ${train.name} (${train.queries.length} queries)`)
  const base = best
  await tryAll("text", [base, ...[0.9, 1.2, 1.5].flatMap((k1) => [0.4, 0.6, 0.75].map((b) => ({ ...base, k1, b })))], (top) => {
    tried.k1 = top.k1
    tried.b = top.b
  })
  const bm25 = best
  // The best of each step is shown in the table even when it did not gain enough to be kept.
  let bestFeedback = -1
  // Feedback: a heavier weight only where a lighter one helped (each step costs two more word passes).
  let before = await tryAll("text", [bm25])
  for (const documents of [5, 10]) {
    for (const terms of [10, 20]) {
      for (const weight of [0.1, 0.2, 0.4]) {
        const candidate = { ...bm25, feedback: { documents, terms, weight } }
        const r = await ranking.run(train, candidate, "text")
        console.log(`  text   ${r.ndcg.toFixed(4)}  ${describe(candidate)}`)
        if (r.ndcg > bestFeedback) {
          bestFeedback = r.ndcg
          tried.feedback = candidate.feedback!
        }
        if (r.ndcg <= before + MIN_GAIN) break
        before = r.ndcg
        best = candidate
      }
    }
  }
  // The thesaurus: the first sense or two of each word, its synonyms at a fraction of a query word.
  const fedBack = best
  await tryAll("text", [fedBack, ...[1, 2].flatMap((senses) => [0.1, 0.2, 0.3, 0.5].map((weight) => ({ ...fedBack, thesaurus: { senses, weight } })))], (top) => {
    if (top.thesaurus) tried.thesaurus = top.thesaurus
  })
  const words = best
  await tryAll("hybrid", [words, ...[0.2, 0.3, 0.4, 0.6].map((meaningWeight) => ({ ...words, meaningWeight }))], (top) => {
    tried.meaningWeight = top.meaningWeight
  })
  const fused = best
  await tryAll("hybrid", [fused, ...[128, 256].map((vectorDepth) => ({ ...fused, vectorDepth }))], (top) => {
    tried.vectorDepth = top.vectorDepth
  })
  console.log(`chosen on ${train.name}: ${describe(best)}`)
  return { chosen: best, tried }
}

/**
 * Each technique added alone to the baseline, then all of `chosen` together; nDCG@10 on every set,
 * recall@100 and latency (in-process, no HTTP) on the last.
 */
export const ablation = async (
  ranking: Ranking,
  sets: ReadonlyArray<QuerySet>,
  chosen: RankingOptions = DEFAULT_RANKING,
  tried: Tried = TRIED_ON_TRAIN
) => {
  const base = BASELINE_RANKING
  const feedback = `feedback (RM3: ${tried.feedback.documents} emails, ${tried.feedback.terms} words, weight ${tried.feedback.weight})`
  const thesaurus = `thesaurus (WordNet: ${tried.thesaurus.senses} sense${tried.thesaurus.senses === 1 ? "" : "s"}, weight ${tried.thesaurus.weight})`
  const rows: ReadonlyArray<readonly [string, SearchMode, RankingOptions]> = [
    ["words only (BM25 k1 1.2, b 0.75)", "text", base],
    [`words, BM25 k1 ${tried.k1}, b ${tried.b}`, "text", { ...base, k1: tried.k1, b: tried.b }],
    [`words + ${feedback}`, "text", { ...base, feedback: tried.feedback }],
    [`words + ${thesaurus}`, "text", { ...base, thesaurus: tried.thesaurus }],
    ["meaning only", "vector", base],
    ["hybrid, round one", "hybrid", base],
    [`+ BM25 k1 ${tried.k1}, b ${tried.b}`, "hybrid", { ...base, k1: tried.k1, b: tried.b }],
    [`+ ${feedback}`, "hybrid", { ...base, feedback: tried.feedback }],
    [`+ ${thesaurus}`, "hybrid", { ...base, thesaurus: tried.thesaurus }],
    [`+ meaning weight ${tried.meaningWeight}`, "hybrid", { ...base, meaningWeight: tried.meaningWeight }],
    [`+ vector depth ${tried.vectorDepth}`, "hybrid", { ...base, vectorDepth: tried.vectorDepth }],
    ["+ exact matches floored at their words' score", "hybrid", { ...base, exactMatch: "floor" }],
    ["+ exact matches above meaning-only mail (lift)", "hybrid", { ...base, exactMatch: "lift" }],
    ["all five together", "hybrid", {
      ...base,
      k1: tried.k1,
      b: tried.b,
      feedback: tried.feedback,
      thesaurus: tried.thesaurus,
      meaningWeight: tried.meaningWeight,
      vectorDepth: tried.vectorDepth
    }],
    ["the product's default (kept on train)", "hybrid", chosen]
  ]
  const last = sets[sets.length - 1]!
  const shown = rows
  // Set by set, so that each set's query vectors stay in the ranker's cache across the rows.
  const results = new Map<string, Array<Measured>>()
  for (const set of sets) {
    for (const [label, mode, options] of shown) {
      const measured = await ranking.run(set, options, mode)
      results.set(label, [...(results.get(label) ?? []), measured])
    }
  }
  console.log("")
  console.log(`technique                                              ${sets.map((s) => `${s.name} nDCG@10`.padStart(16)).join(" ")}  ${last.name} recall@100  p50 ms  p95 ms`)
  for (const [label] of shown) {
    const measured = results.get(label)!
    const r = measured[measured.length - 1]!
    console.log(
      `${label.padEnd(54)} ${measured.map((x) => x.ndcg.toFixed(3).padStart(16)).join(" ")}  ${r.recall.toFixed(3).padStart(16)}  ${r.p50.toFixed(1).padStart(6)}  ${r.p95.toFixed(1).padStart(6)}`
    )
  }
  console.log(`(the product's default: ${describe(chosen)})`)
}

/**
 * Field weighting: subject words at `boosts` times a body word instead of the indexer's
 * `SUBJECT_BOOST`, by words alone and hybrid with `chosen`; the postings are put back as they were
 * after each (a run stopped half-way leaves the data directory's word weights changed).
 */
export const fieldWeights = async (ranking: Ranking, sets: ReadonlyArray<QuerySet>, boosts: ReadonlyArray<number>, chosen: RankingOptions = DEFAULT_RANKING) => {
  console.log("")
  console.log(`subject weight        ${sets.map((s) => `${s.name} text`.padStart(12) + `${s.name} hybrid`.padStart(14)).join(" ")}`)
  for (const boost of [SUBJECT_BOOST, ...boosts.filter((b) => b !== SUBJECT_BOOST)]) {
    if (boost !== SUBJECT_BOOST) await ranking.reweighSubjects(SUBJECT_BOOST, boost)
    try {
      const cells: Array<string> = []
      for (const set of sets) {
        const text = await ranking.run(set, chosen, "text")
        const hybrid = await ranking.run(set, chosen, "hybrid")
        cells.push(text.ndcg.toFixed(3).padStart(12) + hybrid.ndcg.toFixed(3).padStart(14))
      }
      console.log(`subject x ${String(boost).padEnd(11)} ${cells.join(" ")}${boost === SUBJECT_BOOST ? "  (the indexer's)" : ""}`)
    } finally {
      if (boost !== SUBJECT_BOOST) await ranking.reweighSubjects(boost, SUBJECT_BOOST)
    }
  }
}
