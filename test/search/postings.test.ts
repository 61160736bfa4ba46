/**
 * The postings the word ranking holds in memory (services/search/postings.ts), on their own: BM25's
 * top of what is held against the textbook formula summed email by email, postings added in several
 * reads, and the bound on what is held (the lexemes searched least recently go first, never those of
 * the search under way). That the held postings follow the database (deltas, counts, forgetting) is
 * test/search/pruning.test.ts's, against the ranking the database computes.
 */
import { describe, expect, it } from "@effect/vitest"
import { PostingsMemory } from "../../services/search/postings.ts"

const read = (postings: ReadonlyArray<readonly [id: string, frequency: number, length: number]>, last: number) => ({
  emailIds: postings.map(([id]) => id),
  frequencies: postings.map(([, frequency]) => frequency),
  lengths: postings.map(([, , length]) => length),
  last
})

const bm25 = (f: number, length: number, avgLength: number, k1 = 1.2, b = 0.75) => f * (k1 + 1) / (f + k1 * (1 - b + b * length / avgLength))

describe("PostingsMemory", () => {
  it("ranks the emails of the lexemes given by BM25, best first, ties by id, at most depth", () => {
    const memory = new PostingsMemory(1_000)
    const alpha = memory.add("usr_1", "alpha", read([["eml_a", 2, 10], ["eml_b", 1, 40]], 2))
    // A second read adds to the first.
    memory.add("usr_1", "alpha", read([["eml_c", 1, 10]], 3))
    const beta = memory.add("usr_1", "beta", read([["eml_b", 3, 40], ["eml_d", 1, 10], ["eml_e", 1, 10]], 5))
    expect(alpha.size).toBe(3)
    expect(alpha.last).toBe(3)
    const options = { k1: 1.2, b: 0.75, avgLength: 20, depth: 10 }
    const ranked = memory.rank("usr_1", [{ postings: alpha, weight: 2 }, { postings: beta, weight: 0.5 }], options)
    const expected = [
      { emailId: "eml_a", bm25: 2 * bm25(2, 10, 20) },
      { emailId: "eml_b", bm25: 2 * bm25(1, 40, 20) + 0.5 * bm25(3, 40, 20) },
      { emailId: "eml_c", bm25: 2 * bm25(1, 10, 20) },
      { emailId: "eml_d", bm25: 0.5 * bm25(1, 10, 20) },
      { emailId: "eml_e", bm25: 0.5 * bm25(1, 10, 20) }
    ].sort((x, y) => y.bm25 - x.bm25 || (x.emailId < y.emailId ? -1 : 1))
    expect(ranked.map((hit) => hit.emailId)).toEqual(expected.map((hit) => hit.emailId))
    ranked.forEach((hit, i) => expect(hit.bm25).toBeCloseTo(expected[i]!.bm25, 12))
    // The same top, cut.
    expect(memory.rank("usr_1", [{ postings: alpha, weight: 2 }, { postings: beta, weight: 0.5 }], { ...options, depth: 2 }))
      .toEqual(ranked.slice(0, 2))
    expect(memory.rank("usr_2", [], options)).toEqual([])
  })

  it("keeps within its capacity, dropping the lexemes searched least recently and never the search's own", () => {
    const memory = new PostingsMemory(100)
    const postings = (prefix: string, n: number) => read(Array.from({ length: n }, (_, i) => [`${prefix}${i}`, 1, 10] as const), n)
    const a = memory.add("usr_1", "a", postings("a", 40))
    const b = memory.add("usr_2", "b", postings("b", 40))
    const c = memory.add("usr_1", "c", postings("c", 40))
    expect(memory.size).toBe(120)
    memory.touch(a)
    // Over capacity: b (least recently used) goes, then nothing more (80 is under nine tenths).
    memory.evict(new Set([c]))
    expect(memory.size).toBe(80)
    expect(memory.postingsOf("usr_2", "b")).toBeUndefined()
    expect(memory.postingsOf("usr_1", "a")).toBe(a)
    // The search's own lexemes stay even when they alone pass the capacity.
    const d = memory.add("usr_1", "d", postings("d", 90))
    memory.evict(new Set([d]))
    expect(memory.postingsOf("usr_1", "d")).toBe(d)
    expect(memory.postingsOf("usr_1", "a")).toBeUndefined()
    expect(memory.postingsOf("usr_1", "c")).toBeUndefined()
    expect(memory.size).toBe(90)
    expect(b.size).toBe(40)
  })
})
