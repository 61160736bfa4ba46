/** Ranking quality as BEIR measures it: nDCG@10 and recall@100 of one ranking against graded judgements. */

export interface QuerySet {
  readonly name: string
  readonly queries: ReadonlyArray<{ readonly id: string; readonly text: string }>
  readonly qrels: ReadonlyMap<string, ReadonlyMap<string, number>>
}

const dcg = (gains: ReadonlyArray<number>) => gains.reduce((sum, gain, i) => sum + (2 ** gain - 1) / Math.log2(i + 2), 0)

/** nDCG@10 and recall@100 of one ranking of document keys. */
export const evaluate = (ranked: ReadonlyArray<string>, relevant: ReadonlyMap<string, number>) => {
  const gains = ranked.slice(0, 10).map((doc) => relevant.get(doc) ?? 0)
  const ideal = [...relevant.values()].sort((a, b) => b - a).slice(0, 10)
  const ndcg = dcg(ideal) > 0 ? dcg(gains) / dcg(ideal) : 0
  const found = ranked.slice(0, 100).filter((doc) => relevant.has(doc)).length
  return { ndcg, recall: relevant.size > 0 ? found / relevant.size : 0 }
}
