/**
 * Query expansion by WordNet's synonyms (services/search/thesaurus.ts, layers/wordnet.ts): the
 * adapter answers the words of a word's commonest senses, inflected words included; the word
 * ranking, given the option, finds an email that shares no word with the question, only synonyms,
 * and ranks an email holding the question's own word above one holding its synonym.
 */
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { describe, it } from "vitest"
import * as WordNet from "../../layers/wordnet.ts"
import { BASELINE_RANKING, DEFAULT_RANKING, Ranker } from "../../services/search/ranker.ts"
import { queryWords, Thesaurus } from "../../services/search/thesaurus.ts"
import { testDatabase } from "../support/database.ts"
import { indexedMail, otherTopics, rankerAndIndexer } from "../support/search-services.ts"

describe("WordNet's thesaurus", () => {
  it("answers the words of a word's first senses, from its base form, without the word itself", () =>
    // One layer for every lookup: the index files are read once, as in the server.
    Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const { synonyms } = yield* Thesaurus
      const physician = yield* synonyms("physician", 1)
      expect(physician).toEqual(expect.arrayContaining(["doctor", "doc", "md"]))
      expect(physician).not.toContain("physician")
      // An inflected word is looked up by its base form, which is left out as the word is.
      const doctors = yield* synonyms("doctors", 1)
      expect(doctors).toContain("physician")
      expect(doctors).not.toContain("doctor")
      expect(yield* synonyms("yearly", 1)).toContain("annual")
      // Only single words: "medical checkup" is not a synonym of "checkup", "medical" is.
      expect((yield* synonyms("checkup", 1)).every((word) => !word.includes(" "))).toBe(true)
      // A second sense adds its words; none asked for, none found; an unknown word has none.
      expect((yield* synonyms("appointment", 2)).length).toBeGreaterThan((yield* synonyms("appointment", 1)).length)
      expect(yield* synonyms("doctor", 0)).toEqual([])
      expect(yield* synonyms("zzxqv", 2)).toEqual([])
    })).pipe(Effect.provide(WordNet.layer))))

  it("finds index lines by bisection, past the licence's header, and brings words to base forms by WordNet's rules", () => {
    const index = "  1 licence text\n  2 more licence\nable a 1 0 1 0 00001\ncat n 2 0 2 1 00002 00003\ndog n 1 0 1 0 00004\n"
    expect(WordNet.findIndexLine(index, "cat")).toBe("cat n 2 0 2 1 00002 00003")
    expect(WordNet.findIndexLine(index, "able")).toBe("able a 1 0 1 0 00001")
    expect(WordNet.findIndexLine(index, "dog")).toBe("dog n 1 0 1 0 00004")
    expect(WordNet.findIndexLine(index, "cow")).toBeUndefined()
    expect(WordNet.findIndexLine(index, "1")).toBeUndefined()
    expect(WordNet.baseForms("boxes", "noun")).toEqual(["boxes", "boxe", "box"])
    expect(WordNet.baseForms("studies", "noun")).toContain("study")
    expect(WordNet.baseForms("running", "verb")).toContain("runn")
    expect(WordNet.baseForms("bigger", "adj")).toEqual(["bigger", "bigg", "bigge"])
    expect(queryWords("When is my yearly check-up with Dr. Who?")).toEqual(["when", "yearly", "check-up", "with", "who"])
  })
})

const mail = [
  ["eml_1", "Annual visit", "Your annual appointment with the doctor is on Monday at nine."],
  ["eml_2", "Physician on call", "The physician on call this week is Dr. Osei."],
  ["eml_3", "Doctor on call", "The doctor on call this week is Dr. Osei."],
  ...otherTopics
] as const

layer(testDatabase, { timeout: "60 seconds" })("the word ranking with the thesaurus", (it) => {
  it.effect("finds by synonyms an email sharing no word with the question, and ranks the question's own word above its synonym", () =>
    Effect.gen(function*() {
      yield* indexedMail(mail)
      const ranker = yield* Ranker
      const thesaurus = { ...BASELINE_RANKING, thesaurus: { senses: 1, weight: 0.3 } }
      const question = "when is my yearly checkup with the physician"

      // Without it, "physician" finds only the email saying "physician".
      expect(DEFAULT_RANKING.thesaurus).toBeUndefined()
      expect((yield* ranker.rank("usr_1", question, "text", undefined)).map((r) => r.emailId)).toEqual(["eml_2"])

      const widened = (yield* ranker.rank("usr_1", question, "text", undefined, thesaurus)).map((r) => r.emailId)
      // "annual" for "yearly", "doctor" for "physician", "medical" (not in the mail) for "checkup":
      // eml_1 holds two synonyms, eml_3 one; eml_2 holds the question's own word and ranks first.
      expect(widened).toEqual(["eml_2", "eml_1", "eml_3"])

      const doctor = yield* ranker.rank("usr_1", "physician", "text", undefined, thesaurus)
      expect(doctor.map((r) => r.emailId).slice(0, 2)).toEqual(["eml_2", "eml_3"])
      expect(doctor[1]!.score).toBeLessThan(doctor[0]!.score)

      // A mailbox scope the mail is not in finds nothing, synonyms or not.
      expect(yield* ranker.rank("usr_1", question, "text", ["mbx_other"], thesaurus)).toEqual([])
    }).pipe(Effect.provide(rankerAndIndexer)))
})
