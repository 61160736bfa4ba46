/**
 * Pseudo-relevance feedback (a relevance model, RM3-style): the words the best first-pass matches
 * share, added to the query for a second word ranking. It bridges vocabulary one step: a query
 * that finds a few right emails by its own words also finds those that say the same thing in the
 * words those emails use.
 *
 * Each feedback email votes for its words in proportion to how much of it they make up
 * (frequency / length), weighted by its share of the feedback emails' BM25. The `terms` words with
 * most votes are kept, the strongest weighing `weight` of a query word and the others in
 * proportion. Words held by one email only (they would only find that email again) and words
 * common enough to say nothing (in more than a third of the mail, as in the first pass) are left
 * out before they get here.
 */

export interface FeedbackOptions {
  /** Best first-pass emails read for their words. */
  readonly documents: number
  /** Words added to the query. */
  readonly terms: number
  /** What the strongest added word weighs against a query word (1). */
  readonly weight: number
}

export interface FeedbackPosting {
  readonly emailId: string
  readonly lexeme: string
  readonly frequency: number
  /** The email's length in words. */
  readonly length: number
}

export interface WeightedLexeme {
  readonly lexeme: string
  readonly weight: number
}

export const expansionTerms = (input: {
  readonly hits: ReadonlyArray<{ readonly emailId: string; readonly bm25: number }>
  readonly postings: ReadonlyArray<FeedbackPosting>
  readonly options: FeedbackOptions
}): Array<WeightedLexeme> => {
  const { options } = input
  const hits = input.hits.slice(0, options.documents).filter((hit) => hit.bm25 > 0)
  const total = hits.reduce((sum, hit) => sum + hit.bm25, 0)
  if (total <= 0 || options.terms <= 0 || options.weight <= 0) return []
  const share = new Map(hits.map((hit) => [hit.emailId, hit.bm25 / total]))
  const votes = new Map<string, number>()
  for (const posting of input.postings) {
    const weight = share.get(posting.emailId)
    // Digits alone (amounts, years, ids) are not vocabulary.
    if (weight === undefined || posting.length <= 0 || /^\d+$/.test(posting.lexeme)) continue
    votes.set(posting.lexeme, (votes.get(posting.lexeme) ?? 0) + weight * posting.frequency / posting.length)
  }
  const best = [...votes.entries()]
    .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
    .slice(0, options.terms)
  const strongest = best[0]?.[1] ?? 0
  return strongest > 0 ? best.map(([lexeme, vote]) => ({ lexeme, weight: options.weight * vote / strongest })) : []
}
