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
import { indexedMail, rankerAndIndexer } from "../support/search-services.ts"

const synonymsOf = (word: string, senses: number) =>
  Effect.runPromise(Effect.scoped(Effect.flatMap(Thesaurus, (thesaurus) => thesaurus.synonyms(word, senses))).pipe(Effect.provide(WordNet.layer)))

describe("WordNet's thesaurus", () => {
  it("answers the words of a word's first senses, from its base form, without the word itself", async () => {
    const physician = await synonymsOf("physician", 1)
    expect(physician).toEqual(expect.arrayContaining(["doctor", "doc", "md"]))
    expect(physician).not.toContain("physician")
    // An inflected word is looked up by its base form, which is left out as the word is.
    const doctors = await synonymsOf("doctors", 1)
    expect(doctors).toContain("physician")
    expect(doctors).not.toContain("doctor")
    expect(await synonymsOf("yearly", 1)).toContain("annual")
    // Only single words: "medical checkup" is not a synonym of "checkup", "medical" is.
    expect((await synonymsOf("checkup", 1)).every((word) => !word.includes(" "))).toBe(true)
    // A second sense adds its words; none asked for, none found; an unknown word has none.
    expect((await synonymsOf("appointment", 2)).length).toBeGreaterThan((await synonymsOf("appointment", 1)).length)
    expect(await synonymsOf("doctor", 0)).toEqual([])
    expect(await synonymsOf("zzxqv", 2)).toEqual([])
  })

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
  ["eml_4", "Lunch on Friday", "Shall we have lunch together on Friday at noon?"],
  ["eml_5", "Invoice 42", "Please pay invoice 42 by the end of the month."],
  ["eml_6", "Team offsite", "The agenda for the team offsite in October."],
  ["eml_7", "Password reset", "Click the link to reset your password."],
  ["eml_8", "Flight confirmed", "Your flight to Lisbon leaves at seven."],
  ["eml_9", "Newsletter", "Product news and hiring updates for the quarter."]
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
