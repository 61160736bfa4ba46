/**
 * Hybrid ranking: full-text relevance (BM25 over PostgreSQL's English lexemes) fused with vector
 * similarity into one score in 0..1 that SPEC's bands can be read against.
 *
 * Both signals are made absolute before they are mixed, so that a score means the same whatever
 * else matched, and both stay strictly increasing, so that neither loses its order:
 * - words: BM25 measured against the BM25 a typical document holding each query term once would get
 *   (`ideal`; a query word no email holds counts there as the rarest word would), saturating:
 *   1 - e^(-2x), so holding every query word gives 0.86, half of them 0.63;
 * - meaning: the model's cosine similarity through a logistic centred where that model's
 *   similarities stop meaning "unrelated" (every model spreads them differently).
 * The fused value is their weighted sum; the score shown is that value through a logistic fitted by
 * hand to SPEC's bands: both signals strong reads 0.9 and up, one signal strong (a paraphrase with
 * no shared word, or some of the query's rare words on another topic) about 0.6, common words only
 * below 0.3.
 *
 * An email holding every query word (`TextHit.everyWord`) may be fused otherwise (`ExactMatch`).
 * The model takes little meaning from a rare name or a word it never learnt (`Zürich`, a code, a
 * surname), nor from text such as a calendar invitation's, so a weak similarity there says little
 * against an email that holds exactly what was typed; fused as any other, such an email could fall
 * below mail that holds none of the words but that the model finds near (an email holding none
 * fuses at most `meaningWeight` times its meaning):
 * - `lift` (the product's): its meaning counts at least as much as the best meaning of the mail
 *   holding none of the query's words, so it ranks above every such email, however long it is (its
 *   words' score, which BM25 lowers in a long email, is added on top). Meaning still raises it
 *   further and orders exact matches above that level; below it they are ordered by their words.
 * - `floor`: it fuses at least its words' score, what `text` mode gives it (meaning only raises it).
 *   It ranks above mail holding none of the words only while its words score more than
 *   `meaningWeight` times their meaning: not a long email holding each word once.
 * - `fused`: as any other (round one).
 */
import type { SearchMode } from "./schemas.ts"

export interface TextHit {
  readonly emailId: string
  /** BM25 of the document for the query. */
  readonly bm25: number
  /** Whether it holds every query word the ranking reads (ranker.ts `WordHit`); false unless said. */
  readonly everyWord?: boolean
}

export interface MeaningHit {
  readonly emailId: string
  /** Cosine similarity, -1..1. */
  readonly similarity: number
}

/** Where a model's similarity means "as likely related as not" (`middle`), and how fast that changes. */
export interface Calibration {
  readonly middle: number
  readonly spread: number
}

const calibrations: ReadonlyArray<readonly [RegExp, Calibration]> = [
  // USE lite: unrelated texts 0.0-0.3, a topic in common ~0.4, paraphrases 0.6 and up.
  [/^use-lite/, { middle: 0.42, spread: 0.08 }],
  // text-embedding-3: unrelated 0.0-0.2, related 0.35 and up.
  [/^openai\/text-embedding-3/, { middle: 0.35, spread: 0.07 }],
  // ada-002 and others: similarities crowd near the top.
  [/^openai\//, { middle: 0.8, spread: 0.04 }]
]

export const calibrationFor = (model: string): Calibration =>
  calibrations.find(([pattern]) => pattern.test(model))?.[1] ?? { middle: 0.45, spread: 0.1 }

const logistic = (x: number) => 1 / (1 + Math.exp(-x))

export const meaningScore = (similarity: number, calibration: Calibration) =>
  logistic((similarity - calibration.middle) / calibration.spread)

export const textScore = (bm25: number, ideal: number) => (ideal > 0 && bm25 > 0 ? 1 - Math.exp(-2 * bm25 / ideal) : 0)

/** The weight of meaning against words in the fused value. */
export const MEANING_WEIGHT = 0.5

/** How an email holding every query word is fused in hybrid mode (see the module comment). */
export type ExactMatch = "fused" | "floor" | "lift"

/** SPEC's bands from the fused value (0..1): see the module comment. */
const shown = (fused: number) => logistic(6 * (fused - 0.34))

export interface Ranked {
  readonly emailId: string
  readonly score: number
}

/**
 * One ranking of the union of both hit lists, best first, ties broken by id so that pages are
 * stable. A document that only one list holds gets, for the other signal, no better than the weakest
 * that list kept (it ranked below the cut), or nothing when the list is empty.
 */
export const fuse = (input: {
  readonly mode: SearchMode
  readonly text: ReadonlyArray<TextHit>
  readonly meaning: ReadonlyArray<MeaningHit>
  readonly ideal: number
  readonly calibration: Calibration
  /** Meaning's weight against words in hybrid mode; `MEANING_WEIGHT` unless given. */
  readonly meaningWeight?: number
  /** How an email holding every query word is fused in hybrid mode; `fused` (as any other) unless given. */
  readonly exactMatch?: ExactMatch
}): Array<Ranked> => {
  const { calibration, ideal, mode } = input
  const meaningWeight = input.meaningWeight ?? MEANING_WEIGHT
  const exactMatch = input.exactMatch ?? "fused"
  const words = new Map(input.text.map((hit) => [hit.emailId, textScore(hit.bm25, ideal)]))
  const exact = new Set(input.text.filter((hit) => hit.everyWord === true).map((hit) => hit.emailId))
  const meaning = new Map(input.meaning.map((hit) => [hit.emailId, meaningScore(hit.similarity, calibration)]))
  /** The best meaning of the mail holding none of the query's words (`lift`); none: 0. */
  let meaningAlone = 0
  for (const [emailId, m] of meaning) if (!words.has(emailId)) meaningAlone = Math.max(meaningAlone, m)
  const ids = mode === "text" ? [...words.keys()] : mode === "vector" ? [...meaning.keys()] : [...new Set([...words.keys(), ...meaning.keys()])]
  const weakestMeaning = input.meaning.length > 0 ? Math.min(...meaning.values()) : 0
  const ranked = ids.map((emailId) => {
    const w = words.get(emailId) ?? 0
    const m = meaning.get(emailId) ?? weakestMeaning
    const mix = (meaningPart: number) => meaningWeight * meaningPart + (1 - meaningWeight) * w
    const fused = mode === "text"
      ? w
      : mode === "vector"
      ? m
      : !exact.has(emailId) || exactMatch === "fused"
      ? mix(m)
      : exactMatch === "floor"
      ? Math.max(mix(m), w)
      : mix(Math.max(m, meaningAlone))
    return { emailId, fused }
  })
  return ranked
    .sort((a, b) => b.fused - a.fused || (a.emailId < b.emailId ? -1 : 1))
    .map(({ emailId, fused }) => ({ emailId, score: shown(fused) }))
}
