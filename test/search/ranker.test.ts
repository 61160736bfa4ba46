/**
 * The ranking service over a real database (the suite's migrated database: PGlite, or PostgreSQL
 * with DATABASE_URL): relevance feedback's second word pass finds an email that shares no word
 * with the query, only words with the best first-pass matches, and ranks it below them; without
 * feedback (the product's default) it is not found by words. The embedder is a small
 * deterministic one (hashed words): what is tested is the word ranking's SQL.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import type { MailNarrowing } from "../../services/mail/narrowing.ts"
import { BASELINE_RANKING, DEFAULT_RANKING, Ranker } from "../../services/search/ranker.ts"
import { testDatabase } from "../support/database.ts"
import { indexedMail, otherTopics, rankerAndIndexer } from "../support/search-services.ts"


const mail = [
  ["eml_1", "Disk full on db-01", "The disk is full: the storage volume is nearly exhausted."],
  ["eml_2", "Disk full alert", "Disk full again, storage volume at 95 percent."],
  ["eml_3", "Running low", "The storage volume of the database host is running low."],
  ...otherTopics
] as const

layer(testDatabase, { timeout: "60 seconds" })("Ranker", (it) => {
  it.effect("feedback finds, below the word matches, an email sharing only their words; without it words do not", () =>
    Effect.gen(function*() {
      yield* indexedMail(mail)
      const ranker = yield* Ranker
      const plain = yield* ranker.rank("usr_1", "disk full", "text", undefined)
      expect(DEFAULT_RANKING.feedback).toBeUndefined()
      expect(plain.map((r) => r.emailId).sort()).toEqual(["eml_1", "eml_2"])

      const widened = yield* ranker.rank("usr_1", "disk full", "text", undefined, {
        ...BASELINE_RANKING,
        feedback: { documents: 2, terms: 5, weight: 0.5 }
      })
      const ids = widened.map((r) => r.emailId)
      expect(ids.slice(0, 2).sort()).toEqual(["eml_1", "eml_2"])
      expect(ids).toContain("eml_3")
      expect(ids.indexOf("eml_3")).toBe(2)
      // Only the query's own words measure the score: the email holding none of them scores lowest.
      expect(widened[2]!.score).toBeLessThan(widened[1]!.score)

      // A mailbox scope the mail is not in finds nothing, with or without feedback.
      expect(yield* ranker.rank("usr_1", "disk full", "text", ["mbx_other"], { ...BASELINE_RANKING, feedback: { documents: 2, terms: 5, weight: 0.5 } })).toEqual([])
    }).pipe(Effect.provide(rankerAndIndexer)))
})

layer(testDatabase, { timeout: "60 seconds" })("Ranker, words no email holds", (it) => {
  it.effect("a query word no email holds still counts against every match: mail holding half the query's words scores as holding half, however the postings are read", () =>
    Effect.gen(function*() {
      yield* indexedMail(mail)
      const ranker = yield* Ranker
      const scores = (query: string, reading: "memory" | "every") =>
        Effect.map(ranker.rank("usr_1", query, "text", undefined, { ...DEFAULT_RANKING, reading }), (ranked) => ranked.map((r) => [r.emailId, r.score] as const))
      const whole = yield* scores("disk full", "every")
      const half = yield* scores("disk full zeppelin quasar", "every")
      expect(half.map(([id]) => id)).toEqual(whole.map(([id]) => id))
      for (const [i, [, score]] of half.entries()) expect(score).toBeLessThan(whole[i]![1] - 0.1)
      expect(yield* scores("disk full zeppelin quasar", "memory")).toEqual(half)
      expect(yield* scores("disk full", "memory")).toEqual(whole)
    }).pipe(Effect.provide(rankerAndIndexer)))
})

const reports = [
  ["eml_1", "Quarterly report", "The report is attached, with the budget."],
  ["eml_2", "Report draft", "A draft of the report and the budget."],
  ["eml_3", "Report review", "Please review the report and its budget."],
  ["eml_10", "Budget", "The budget for next year."],
  ...otherTopics
] as const

layer(testDatabase, { timeout: "60 seconds" })("Ranker, common words", (it) => {
  it.effect("a word in more than the common share of the mail is not read beside a rarer one, unless it is all the query has or under the floor", () =>
    Effect.gen(function*() {
      yield* indexedMail(reports)
      const ranker = yield* Ranker
      const found = (query: string, common = DEFAULT_RANKING.common) =>
        Effect.map(ranker.rank("usr_1", query, "text", undefined, { ...DEFAULT_RANKING, common }), (ranked) => ranked.map((r) => r.emailId))
      // "report" is in 3 of 10 emails: within a third, read by default.
      expect(DEFAULT_RANKING.common.share).toBeCloseTo(1 / 3)
      const both = yield* found("attached report")
      expect(both[0]).toBe("eml_1")
      expect(both.sort()).toEqual(["eml_1", "eml_2", "eml_3"])
      // Past a share of a fifth (2 emails) it is common: only the rarer word is read.
      expect(yield* found("attached report", { share: 0.2, floor: 0 })).toEqual(["eml_1"])
      // Unless it is all the query has,
      expect((yield* found("report", { share: 0.2, floor: 0 })).sort()).toEqual(["eml_1", "eml_2", "eml_3"])
      // or the namespace is small enough that the floor keeps it.
      expect((yield* found("attached report", { share: 0.2, floor: 3 })).sort()).toEqual(["eml_1", "eml_2", "eml_3"])
      // Past a third it is common whatever the share and the floor: "budget" is in 4 of 10.
      expect(yield* found("attached budget", { share: 1, floor: 100 })).toEqual(["eml_1"])
      expect((yield* found("budget")).sort()).toEqual(["eml_1", "eml_10", "eml_2", "eml_3"])
    }).pipe(Effect.provide(rankerAndIndexer)))
})

layer(testDatabase, { timeout: "60 seconds" })("Ranker, narrowed", (it) => {
  it.effect("conditions on the emails narrow the words' ranking before its cut: a sender's email below the depth is found", () =>
    Effect.gen(function*() {
      yield* indexedMail(reports)
      const sql = yield* SqlClient.SqlClient
      const ranker = yield* Ranker
      const ranking = (depth: number, narrowing?: MailNarrowing) =>
        Effect.map(ranker.rank("usr_1", "report", "text", undefined, { ...DEFAULT_RANKING, depth }, narrowing), (ranked) => ranked.map((r) => r.emailId))
      const whole = yield* ranking(10)
      expect(whole.slice().sort()).toEqual(["eml_1", "eml_2", "eml_3"])
      // The last of them (below the others' score) is Ann's: cut at one, the ranking holds another; narrowed to Ann's mail, hers.
      const anns = whole[2]!
      yield* sql`UPDATE emails SET from_address = 'Ann@Example.org' WHERE id = ${anns}`
      const cut = yield* ranking(1)
      expect([cut.length, cut.includes(anns)]).toEqual([1, false])
      const ann = { from: { entry: "ann@example.org", type: "address" } } as const
      expect(yield* ranking(1, ann)).toEqual([anns])
      expect(yield* ranking(10, { from: { entry: "example.net", type: "domain" } })).toEqual([])
      // Labels the same way.
      yield* sql`UPDATE emails SET labels = ${["kept"]} WHERE id = ${anns}`
      expect(yield* ranking(1, { labels: ["kept"] })).toEqual([anns])
      // The memory's reading would not see the condition: a narrowed ranking reads the database.
      expect(yield* Effect.map(ranker.rank("usr_1", "report", "text", undefined, { ...DEFAULT_RANKING, depth: 1, reading: "memory" }, ann),
        (ranked) => ranked.map((r) => r.emailId))).toEqual([anns])
    }).pipe(Effect.provide(rankerAndIndexer)))
})

layer(testDatabase, { timeout: "60 seconds" })("Ranker, narrowed by meaning", (it) => {
  it.effect("the nearest by meaning are the narrowing sender's and arrival's, as the vector index holds them", () =>
    Effect.gen(function*() {
      yield* indexedMail([
        ["eml_1", "Quarterly report", "The report is attached, with the budget.", "Nora+Reports@Example.org"],
        ["eml_2", "Report draft", "A draft of the report and the budget.", "ann@eu.example.org"],
        ["eml_3", "Report review", "Please review the report and its budget.", "bob@example.net"],
        ...otherTopics
      ])
      const ranker = yield* Ranker
      const nearest = (narrowing?: MailNarrowing) =>
        Effect.map(ranker.rank("usr_1", "report budget", "vector", undefined, DEFAULT_RANKING, narrowing), (ranked) => ranked.map((r) => r.emailId).sort())
      // Unnarrowed, mail of other senders is among the nearest too.
      expect(yield* nearest()).toEqual(expect.arrayContaining(["eml_1", "eml_2", "eml_3", "eml_4"]))
      expect(yield* nearest({ from: { entry: "nora@example.org", type: "address" } })).toEqual(["eml_1"])
      expect(yield* nearest({ from: { entry: "nora+reports@example.org", type: "address" } })).toEqual(["eml_1"])
      expect(yield* nearest({ from: { entry: "nora+other@example.org", type: "address" } })).toEqual([])
      expect(yield* nearest({ from: { entry: "example.org", type: "domain" } })).toEqual(["eml_1"])
      expect(yield* nearest({ from: { entry: "*.example.org", type: "subdomains" } })).toEqual(["eml_2"])
      const tomorrow = new Date(Date.now() + 86_400_000)
      expect(yield* nearest({ received: { after: tomorrow } })).toEqual([])
      expect(yield* nearest({ from: { entry: "example.net", type: "domain" }, received: { before: tomorrow } })).toEqual(["eml_3"])
      // Labels change after indexing: the index does not hold them, the caller keeps the labelled.
      expect((yield* nearest({ labels: ["none-such"] })).length).toBeGreaterThan(1)
    }).pipe(Effect.provide(rankerAndIndexer)))
})

const accented = [
  ["eml_1", "Dessert menu", "Caf\u00e9 cr\u00e8me br\u00fbl\u00e9e tonight"],
  // The same words written with combining accents (NFD), as some mail clients send them.
  ["eml_2", "Pastry list", "Pa\u0302tisserie and cre\u0300me anglaise"],
  ...otherTopics
] as const

layer(testDatabase, { timeout: "60 seconds" })("Ranker, accented words", (it) => {
  it.effect("a word finds its mail whichever way its accents are written, in the query or in the mail", () =>
    Effect.gen(function*() {
      yield* indexedMail(accented)
      const ranker = yield* Ranker
      const found = (query: string) => Effect.map(ranker.rank("usr_1", query, "text", undefined), (ranked) => ranked.map((r) => r.emailId))
      expect(yield* found("br\u00fbl\u00e9e")).toEqual(["eml_1"])
      expect(yield* found("bru\u0302le\u0301e")).toEqual(["eml_1"])
      expect(yield* found("p\u00e2tisserie")).toEqual(["eml_2"])
      expect((yield* found("cre\u0300me")).sort()).toEqual(["eml_1", "eml_2"])
    }).pipe(Effect.provide(rankerAndIndexer)))
})
