/**
 * Hybrid ranking: full-text relevance (BM25 over PostgreSQL's English lexemes) fused with vector
 * similarity into one score in 0..1 that SPEC's bands can be read against.
 *
 * Both signals are made absolute before they are mixed, so that a score means the same whatever
 * else matched:
 * - words: BM25 divided by the BM25 a document would get for holding every query term at a typical
 *   frequency (`text.ideal`), capped at 1: a document that holds all the query's rare words scores
 *   near 1, one that shares only common words near 0;
 * - meaning: the model's cosine similarity mapped through its calibration (`Calibration`), since
 *   every model spreads similarities differently (USE lite: unrelated texts ~0.1-0.3, paraphrases
 *   0.6 and up).
 * Documents that only one signal found still get the other when it is known; otherwise the
 * signal's weakest value seen in this query stands in for it (it ranked below the cut).
 */

export interface TextHit {
  readonly emailId: string
  /** BM25 of the document for the query. */
  readonly bm25: number
}

export interface MeaningHit {
  readonly emailId: string
  /** Cosine similarity, -1..1. */
  readonly similarity: number
}

/** Where a model's similarities stop meaning "unrelated" and start meaning "the same thing". */
export interface Calibration {
  readonly unrelated: number
  readonly same: number
}

const calibrations: ReadonlyArray<readonly [RegExp, Calibration]> = [
  [/^use-lite/, { unrelated: 0.15, same: 0.75 }],
  [/^openai\/text-embedding-3/, { unrelated: 0.1, same: 0.7 }],
  [/^openai\//, { unrelated: 0.7, same: 0.95 }]
]

export const calibrationFor = (model: string): Calibration =>
  calibrations.find(([pattern]) => pattern.test(model))?.[1] ?? { unrelated: 0.2, same: 0.8 }

const clamp01 = (value: number) => Math.min(1, Math.max(0, value))

export const meaningScore = (similarity: number, calibration: Calibration) =>
  clamp01((similarity - calibration.unrelated) / (calibration.same - calibration.unrelated))

export const textScore = (bm25: number, ideal: number) => (ideal > 0 ? clamp01(bm25 / ideal) : 0)

/** The weight of meaning against words in a hybrid score. */
export const MEANING_WEIGHT = 0.5

export interface Ranked {
  readonly emailId: string
  readonly score: number
}

export type Mode = "hybrid" | "text" | "vector"

/**
 * One ranking of the union of both hit lists, best first, ties broken by id so that pages are
 * stable. `ideal` is the BM25 of a document holding every query term (see `text.ideal`).
 */
export const fuse = (input: {
  readonly mode: Mode
  readonly text: ReadonlyArray<TextHit>
  readonly meaning: ReadonlyArray<MeaningHit>
  readonly ideal: number
  readonly calibration: Calibration
}): Array<Ranked> => {
  const { calibration, ideal, mode } = input
  const words = new Map(input.text.map((hit) => [hit.emailId, textScore(hit.bm25, ideal)]))
  const meaning = new Map(input.meaning.map((hit) => [hit.emailId, meaningScore(hit.similarity, calibration)]))
  const ids = mode === "text" ? [...words.keys()] : mode === "vector" ? [...meaning.keys()] : [...new Set([...words.keys(), ...meaning.keys()])]
  // Below the cut of a list: no better than the weakest it kept (or nothing, when it kept none).
  const weakestMeaning = input.meaning.length > 0 ? Math.min(...meaning.values()) : 0
  const ranked = ids.map((emailId) => {
    const w = words.get(emailId) ?? 0
    const m = meaning.get(emailId) ?? weakestMeaning
    const score = mode === "text" ? w : mode === "vector" ? m : MEANING_WEIGHT * m + (1 - MEANING_WEIGHT) * w
    return { emailId, score }
  })
  return ranked.sort((a, b) => b.score - a.score || (a.emailId < b.emailId ? -1 : 1))
}
