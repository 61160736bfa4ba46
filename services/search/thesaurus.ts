/**
 * Query expansion by a lexical thesaurus: each word of a query also looks for the words that name
 * the same thing in its commonest senses ("physician" for "doctor", "yearly" for "annual"), at a
 * fraction of a query word's weight. It bridges vocabulary where the question and the email share
 * no word, without a bigger model (issue 23, item 3).
 *
 * The Thesaurus port answers a word's synonyms; the adapter reads WordNet (layers/wordnet.ts). The
 * word ranking (ranker.ts) stems the synonyms as it stems the query, leaves out those that are
 * stop words or already in the query, and weighs each found one by its own IDF times `weight`.
 */
import { Context, type Effect } from "effect"

export interface ThesaurusOptions {
  /** The senses of a word read for its synonyms, commonest first (per part of speech). */
  readonly senses: number
  /** What a synonym weighs against a query word (1). */
  readonly weight: number
}

export interface ThesaurusShape {
  /**
   * Single words meaning what `word` means in one of its first `senses` senses (per part of
   * speech), in the order the senses come, without `word` itself; none for a word it does not
   * know. Never fails: a thesaurus that cannot be read expands nothing (and says so in the log).
   */
  readonly synonyms: (word: string, senses: number) => Effect.Effect<ReadonlyArray<string>>
}

export class Thesaurus extends Context.Tag("mailroom/Thesaurus")<Thesaurus, ThesaurusShape>() {}

/** A synonym to add to a query: `word`, found for the query's `source` word. */
export interface WeightedSynonym {
  readonly source: string
  readonly word: string
  readonly weight: number
}

/** The words of a query the thesaurus is asked about: letters only, lower case, each once. */
export const queryWords = (query: string): Array<string> => [
  ...new Set((query.toLowerCase().match(/[a-z][a-z'-]*[a-z]|[a-z]/g) ?? []).filter((word) => word.length > 2))
]
