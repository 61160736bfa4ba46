/**
 * The ranking service over a real database (the suite's migrated database: PGlite, or PostgreSQL
 * with DATABASE_URL): relevance feedback's second word pass finds an email that shares no word
 * with the query, only words with the best first-pass matches, and ranks it below them; without
 * feedback (the product's default) it is not found by words. The embedder is a small
 * deterministic one (hashed words): what is tested is the word ranking's SQL.
 */
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
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
