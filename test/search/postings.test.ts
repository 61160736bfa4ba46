/**
 * The postings the word ranking holds in memory (services/search/postings.ts), on their own: BM25's
 * top of what is held against the textbook formula summed document by document, postings added in
 * several reads (in number order, or put in it), a read that does not follow on from what is held,
 * and the bound on what is held (the lexemes searched least recently go first, never those of the
 * search under way). That the held postings follow the database (reads since the last number,
 * counts, forgetting) is test/search/word-reading.test.ts's, against the ranking the database computes.
 */
import { describe, expect, it } from "@effect/vitest"
import { PostingsMemory } from "../../services/search/postings.ts"

const read = (postings: ReadonlyArray<readonly [document: number, frequency: number, length: number]>) => ({
  documents: postings.map(([document]) => document),
  frequencies: postings.map(([, frequency]) => frequency),
  lengths: postings.map(([, , length]) => length)
})

const bm25 = (f: number, length: number, avgLength: number, k1 = 1.2, b = 0.75) => f * (k1 + 1) / (f + k1 * (1 - b + b * length / avgLength))

describe("PostingsMemory", () => {
  it("ranks the documents of the lexemes given by BM25, best first, the latest indexed first of equal scores, at most depth", () => {
    const memory = new PostingsMemory(1_000)
    memory.add("usr_1", "alpha", read([[1, 2, 10], [2, 1, 40]]))
    // A second read adds to the first; one out of number order is put in order.
    const alpha = memory.add("usr_1", "alpha", read([[6, 1, 10], [3, 1, 10]]))!
    const beta = memory.add("usr_1", "beta", read([[2, 3, 40], [4, 1, 10], [5, 1, 10]]))!
    expect(alpha.size).toBe(4)
    expect([...alpha.documents.subarray(0, alpha.size)]).toEqual([1, 2, 3, 6])
    expect(memory.lastOf("usr_1", "alpha")).toBe(6)
    expect(memory.lastOf("usr_1", "gamma")).toBe(0)
    expect(memory.size).toBe(7)
    const options = { k1: 1.2, b: 0.75, avgLength: 20, depth: 10 }
    const ranked = memory.rank([{ postings: alpha, weight: 2 }, { postings: beta, weight: 0.5 }], options)
    const expected = [
      { document: 1, bm25: 2 * bm25(2, 10, 20) },
      { document: 2, bm25: 2 * bm25(1, 40, 20) + 0.5 * bm25(3, 40, 20) },
      { document: 3, bm25: 2 * bm25(1, 10, 20) },
      { document: 4, bm25: 0.5 * bm25(1, 10, 20) },
      { document: 5, bm25: 0.5 * bm25(1, 10, 20) },
      { document: 6, bm25: 2 * bm25(1, 10, 20) }
    ].sort((x, y) => y.bm25 - x.bm25 || y.document - x.document)
    expect(ranked.map((hit) => hit.document)).toEqual(expected.map((hit) => hit.document))
    ranked.forEach((hit, i) => expect(hit.bm25).toBeCloseTo(expected[i]!.bm25, 12))
    // The same top, cut; of equal scores (3 and 6; 4 and 5) the latest indexed first.
    expect(memory.rank([{ postings: alpha, weight: 2 }, { postings: beta, weight: 0.5 }], { ...options, depth: 3 }))
      .toEqual(ranked.slice(0, 3))
    expect(memory.rank([], options)).toEqual([])
    // How many of the query's own lexemes each document holds (a lexeme feedback added is not one).
    const held = memory.rank([{ postings: alpha, weight: 2, original: true }, { postings: beta, weight: 0.5, original: true }], options)
    expect(new Map(held.map((hit) => [hit.document, hit.originals]))).toEqual(new Map([[1, 1], [2, 2], [3, 1], [4, 1], [5, 1], [6, 1]]))
    const added = memory.rank([{ postings: alpha, weight: 2, original: true }, { postings: beta, weight: 0.5 }], options)
    expect(added.find((hit) => hit.document === 2)!.originals).toBe(1)
  })

  it("drops a lexeme whose read does not follow on from what it holds", () => {
    const memory = new PostingsMemory(1_000)
    memory.add("usr_1", "alpha", read([[5, 1, 10], [8, 1, 10]]))
    expect(memory.add("usr_1", "alpha", read([[7, 1, 10]]))).toBeUndefined()
    expect(memory.postingsOf("usr_1", "alpha")).toBeUndefined()
    expect(memory.size).toBe(0)
  })

  it("remembers documents' email ids per namespace", () => {
    const memory = new PostingsMemory(1_000)
    memory.add("usr_1", "alpha", read([[1, 1, 10]]))
    memory.rememberEmailIds("usr_1", [[1, "eml_a"], [2, "eml_b"]])
    expect(memory.emailIdsOf("usr_1", [2, 1, 3])).toEqual(["eml_b", "eml_a", undefined])
    expect(memory.emailIdsOf("usr_2", [1])).toEqual([undefined])
  })

  it("keeps within its capacity, dropping the lexemes searched least recently and never the search's own", () => {
    const memory = new PostingsMemory(100)
    const postings = (n: number) => read(Array.from({ length: n }, (_, i) => [i + 1, 1, 10] as const))
    const a = memory.add("usr_1", "a", postings(40))!
    const b = memory.add("usr_2", "b", postings(40))!
    const c = memory.add("usr_1", "c", postings(40))!
    expect(memory.size).toBe(120)
    memory.touch(a)
    // Over capacity: b (least recently used) goes, then nothing more (80 is under nine tenths).
    memory.evict(new Set([c]))
    expect(memory.size).toBe(80)
    expect(memory.postingsOf("usr_2", "b")).toBeUndefined()
    expect(memory.postingsOf("usr_1", "a")).toBe(a)
    // The search's own lexemes stay even when they alone pass the capacity.
    const d = memory.add("usr_1", "d", postings(90))!
    memory.evict(new Set([d]))
    expect(memory.postingsOf("usr_1", "d")).toBe(d)
    expect(memory.postingsOf("usr_1", "a")).toBeUndefined()
    expect(memory.postingsOf("usr_1", "c")).toBeUndefined()
    expect(memory.size).toBe(90)
    expect(b.size).toBe(40)
  })
})
