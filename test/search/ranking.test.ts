/** The pure parts of search: how scores read against SPEC's bands, fusion order, and chunking. */
import { describe, expect, it } from "vitest"
import { capInput } from "../../services/search/embedder.ts"
import { CHUNK_CHARS, chunkText, MAX_CHUNKS, searchableBody, wordCount } from "../../services/search/documents.ts"
import { expansionTerms } from "../../services/search/feedback.ts"
import { calibrationFor, fuse } from "../../services/search/ranking.ts"

const use = calibrationFor("use-lite")
const score = (input: { bm25?: number; similarity?: number }, ideal = 10) =>
  fuse({
    mode: "hybrid",
    text: input.bm25 === undefined ? [] : [{ emailId: "e", bm25: input.bm25 }],
    meaning: input.similarity === undefined ? [] : [{ emailId: "e", similarity: input.similarity }],
    ideal,
    calibration: use
  })[0]!.score

describe("scores read as SPEC's bands", () => {
  it("every query word and the same meaning: highly relevant (0.90+)", () => {
    expect(score({ bm25: 10, similarity: 0.7 })).toBeGreaterThanOrEqual(0.9)
  })
  it("a paraphrase without a shared word, or the words on another topic: moderately to very relevant", () => {
    expect(score({ similarity: 0.7 })).toBeGreaterThanOrEqual(0.5)
    expect(score({ similarity: 0.7 })).toBeLessThan(0.9)
    expect(score({ bm25: 10, similarity: 0.15 })).toBeGreaterThanOrEqual(0.5)
    expect(score({ bm25: 10, similarity: 0.15 })).toBeLessThan(0.9)
  })
  it("a loose topic in common: somewhat relevant (0.30-0.49)", () => {
    const loose = score({ bm25: 1, similarity: 0.35 })
    expect(loose).toBeGreaterThanOrEqual(0.3)
    expect(loose).toBeLessThan(0.5)
  })
  it("unrelated: a weak match (below 0.30)", () => {
    expect(score({ similarity: 0.15 })).toBeLessThan(0.3)
    expect(score({ bm25: 0.5, similarity: 0.1 })).toBeLessThan(0.3)
  })
  it("stays within 0-1 at the extremes", () => {
    for (const s of [score({ bm25: 1e9, similarity: 1 }), score({ bm25: 0, similarity: -1 })]) {
      expect(s).toBeGreaterThanOrEqual(0)
      expect(s).toBeLessThanOrEqual(1)
    }
  })
})

describe("fuse", () => {
  it("keeps each signal's order when the other is even, and breaks ties by id", () => {
    const ranked = fuse({
      mode: "hybrid",
      text: [{ emailId: "b", bm25: 20 }, { emailId: "a", bm25: 15 }, { emailId: "c", bm25: 15 }],
      meaning: [{ emailId: "a", similarity: 0.5 }, { emailId: "b", similarity: 0.5 }, { emailId: "c", similarity: 0.5 }],
      ideal: 10,
      calibration: use
    })
    expect(ranked.map((r) => r.emailId)).toEqual(["b", "a", "c"])
    expect(ranked[0]!.score).toBeGreaterThan(ranked[1]!.score)
    expect(ranked[1]!.score).toBe(ranked[2]!.score)
  })
  it("does not flatten strong word matches into a tie", () => {
    const ranked = fuse({
      mode: "text",
      text: [{ emailId: "x", bm25: 40 }, { emailId: "y", bm25: 30 }],
      meaning: [],
      ideal: 10,
      calibration: use
    })
    expect(ranked[0]!.score).toBeGreaterThan(ranked[1]!.score)
  })
  it("uses one signal alone in text and vector modes, the union in hybrid", () => {
    const input = { text: [{ emailId: "t", bm25: 5 }], meaning: [{ emailId: "m", similarity: 0.6 }], ideal: 10, calibration: use }
    expect(fuse({ ...input, mode: "text" }).map((r) => r.emailId)).toEqual(["t"])
    expect(fuse({ ...input, mode: "vector" }).map((r) => r.emailId)).toEqual(["m"])
    expect(fuse({ ...input, mode: "hybrid" }).map((r) => r.emailId).sort()).toEqual(["m", "t"])
  })
})

describe("documents", () => {
  it("chunks long text at sentence ends, the subject leading, within the limits", () => {
    const body = Array.from({ length: 200 }, (_, i) => `Sentence number ${i} says something.`).join(" ")
    const chunks = chunkText("Weekly report", body)
    expect(chunks[0]!.startsWith("Weekly report. Sentence number 0")).toBe(true)
    expect(chunks.length).toBeGreaterThan(3)
    expect(chunks.length).toBeLessThanOrEqual(MAX_CHUNKS)
    for (const chunk of chunks) {
      expect(chunk.length).toBeLessThanOrEqual(CHUNK_CHARS)
      expect(chunk.endsWith(".")).toBe(true)
    }
    expect(chunks.join(" ")).toBe(`Weekly report. ${body}`)
  })
  it("never gives the embedder an empty text", () => {
    expect(chunkText("", "   ")).toEqual([""])
    expect(capInput("", 100)).not.toBe("")
    expect(capInput("a   b\n\nc", 100)).toBe("a b c")
    expect(capInput("x".repeat(500), 100)).toHaveLength(100)
  })
  it("searches plain-text attachments after the body, and counts words", () => {
    expect(searchableBody("Body text.", ["  notes.txt says hi  ", ""])).toBe("Body text.\n\nnotes.txt says hi")
    expect(wordCount("Grüße, 3 Äpfel — and e-mail!")).toBe(6)
  })
})

describe("expansionTerms (relevance feedback)", () => {
  const options = { documents: 2, terms: 2, weight: 0.5 }
  const postings = [
    { emailId: "a", lexeme: "disk", frequency: 4, length: 10 },
    { emailId: "a", lexeme: "volum", frequency: 1, length: 10 },
    { emailId: "b", lexeme: "disk", frequency: 1, length: 20 },
    { emailId: "b", lexeme: "storag", frequency: 6, length: 20 },
    { emailId: "b", lexeme: "2025", frequency: 9, length: 20 },
    { emailId: "c", lexeme: "lasagn", frequency: 9, length: 10 }
  ]
  it("weighs each email's words by its share of the feedback's BM25; the strongest word weighs `weight`, numbers never count", () => {
    const added = expansionTerms({ hits: [{ emailId: "a", bm25: 3 }, { emailId: "b", bm25: 1 }, { emailId: "c", bm25: 1 }], postings, options })
    // disk: 0.75 * 0.4 + 0.25 * 0.05 = 0.3125; storag: 0.25 * 0.3 = 0.075; volum: 0.75 * 0.1 = 0.075 (ties by lexeme).
    expect(added.map((a) => a.lexeme)).toEqual(["disk", "storag"])
    expect(added[0]!.weight).toBeCloseTo(0.5)
    expect(added[1]!.weight).toBeCloseTo(0.5 * 0.075 / 0.3125)
  })
  it("reads only the best `documents` hits, and adds nothing without hits, terms or weight", () => {
    const added = expansionTerms({ hits: [{ emailId: "c", bm25: 5 }, { emailId: "a", bm25: 1 }, { emailId: "b", bm25: 1 }], postings, options: { ...options, terms: 5 } })
    expect(added.map((a) => a.lexeme)).toEqual(["lasagn", "disk", "volum"])
    expect(expansionTerms({ hits: [], postings, options })).toEqual([])
    expect(expansionTerms({ hits: [{ emailId: "a", bm25: 1 }], postings, options: { ...options, terms: 0 } })).toEqual([])
    expect(expansionTerms({ hits: [{ emailId: "a", bm25: 1 }], postings, options: { ...options, weight: 0 } })).toEqual([])
  })
})

describe("fuse with a meaning weight", () => {
  it("orders by meaning when meaning weighs more, by words when words do", () => {
    const input = {
      mode: "hybrid" as const,
      text: [{ emailId: "words", bm25: 10 }],
      meaning: [{ emailId: "meaning", similarity: 0.8 }, { emailId: "words", similarity: 0.2 }],
      ideal: 10,
      calibration: use
    }
    expect(fuse({ ...input, meaningWeight: 0.8 })[0]!.emailId).toBe("meaning")
    expect(fuse({ ...input, meaningWeight: 0.2 })[0]!.emailId).toBe("words")
  })
})

describe("fuse, an email holding every query word (exactMatch)", () => {
  // The exact match holds every word once in a long email (words alone 0.50; a longer one 0.33), and
  // the model finds it unrelated (0.15); "near" holds none of the words, "some" as many as one lacks.
  const input = {
    mode: "hybrid" as const,
    text: [{ emailId: "exact", bm25: 3.5, everyWord: true }, { emailId: "longer", bm25: 2, everyWord: true }, { emailId: "some", bm25: 3.5 }],
    meaning: [{ emailId: "near", similarity: 0.6 }, { emailId: "exact", similarity: 0.15 }, { emailId: "longer", similarity: 0.15 }, { emailId: "some", similarity: 0.15 }],
    ideal: 10,
    calibration: use
  }
  const order = (exactMatch?: "fused" | "floor" | "lift") => fuse(exactMatch === undefined ? input : { ...input, exactMatch }).map((r) => r.emailId)
  const scoreOf = (ranked: ReadonlyArray<{ emailId: string; score: number }>, id: string) => ranked.find((r) => r.emailId === id)!.score
  const words = (id: string) => scoreOf(fuse({ ...input, mode: "text" }), id)

  it("fused as any other (round one, and unless asked), mail holding none of the words but near by meaning ranks above exact matches", () => {
    expect(order()).toEqual(["near", "exact", "some", "longer"])
    expect(order("fused")).toEqual(order())
  })
  it("floor: an exact match scores at least its words-only score, which puts a short one first, not a long one", () => {
    const ranked = fuse({ ...input, exactMatch: "floor" })
    expect(ranked.map((r) => r.emailId)).toEqual(["exact", "near", "longer", "some"])
    expect(ranked[0]!.score).toBeCloseTo(words("exact"), 12)
    expect(scoreOf(ranked, "longer")).toBeCloseTo(words("longer"), 12)
  })
  it("lift: exact matches rank above all mail holding none of the words, ordered by their words; one lacking a word stays where meaning puts it", () => {
    const ranked = fuse({ ...input, exactMatch: "lift" })
    expect(ranked.map((r) => r.emailId)).toEqual(["exact", "longer", "near", "some"])
    expect(scoreOf(ranked, "some")).toBe(scoreOf(fuse(input), "some"))
  })
  it("lift: meaning still raises an exact match past that level, and orders exact matches there", () => {
    const meaning = [{ emailId: "near", similarity: 0.45 }, { emailId: "exact", similarity: 0.15 }, { emailId: "longer", similarity: 0.7 }]
    const ranked = fuse({ ...input, meaning, exactMatch: "lift" })
    expect(ranked.map((r) => r.emailId).slice(0, 3)).toEqual(["longer", "exact", "near"])
    // With no mail holding none of the words, nothing is lifted.
    const onlyWords = { ...input, meaning: input.meaning.filter((hit) => hit.emailId !== "near") }
    expect(fuse({ ...onlyWords, exactMatch: "lift" })).toEqual(fuse(onlyWords))
  })
  it("changes nothing in text and vector modes", () => {
    for (const mode of ["text", "vector"] as const) {
      for (const exactMatch of ["floor", "lift"] as const) expect(fuse({ ...input, mode, exactMatch })).toEqual(fuse({ ...input, mode }))
    }
  })
})
