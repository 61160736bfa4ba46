/**
 * Hybrid search with the real offline model (its vocabulary and vectors) over the suite's database:
 * an email holding every word of the query is not buried under mail that holds none of them but
 * that the model finds near. The model takes little meaning from a rare name (`Zürich`) and none
 * worth having from a calendar invitation's text, so the one email holding the word, only in its
 * invitation (a text/calendar attachment), was near the bottom by meaning, and hybrid search ranked
 * it below mail about Swiss francs and Alpine trips. It scores at least what words alone give it
 * (ranking.ts `wordsFloor`), however the postings are read.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as DocumentReader from "../../layers/document-reader.ts"
import * as LocalEmbedder from "../../layers/local-embedder.ts"
import * as WordNet from "../../layers/wordnet.ts"
import { Indexer } from "../../services/search/indexer.ts"
import { DEFAULT_RANKING, Ranker } from "../../services/search/ranker.ts"
import type { SearchMode } from "../../services/search/schemas.ts"
import { Vectors } from "../../services/search/vectors.ts"
import { testDatabase } from "../support/database.ts"
import { indexedMail, otherTopics, testVectorIndex } from "../support/search-services.ts"

const withTheModel = Layer.merge(Ranker.Default, Indexer.Default).pipe(
  Layer.provideMerge(Vectors.Default),
  Layer.provide(Layer.mergeAll(LocalEmbedder.layer({ threads: 1 }), testVectorIndex, WordNet.layer, DocumentReader.layer))
)

/** What Outlook writes in an online meeting's invitation, in its text and again in its calendar. */
const boilerplate = [
  "Grace Hopper has invited you to a meeting: review of the draft contract, the payment terms and the notice period.",
  "________________________________________________________________________________",
  "Microsoft Teams meeting",
  "Join on your computer, mobile app or room device",
  "Click here to join the meeting",
  "Meeting ID: 364 221 907 553",
  "Passcode: Hx7Tq2",
  "Download Teams | Join on the web",
  "Join with a video conferencing device",
  "Video Conference ID: 118 429 336 2",
  "Alternate VTC instructions",
  "Or call in (audio only)",
  "+1 646-838-1601,,728119344# United States, New York City",
  "Phone Conference ID: 728 119 344#",
  "Find a local number | Reset PIN",
  "Learn More | Meeting options",
  "For organizers: Meeting options | Reset dial-in PIN",
  "This meeting is recorded. By joining you agree to the recording and to the organisation's privacy notice.",
  "Need help? Contact the service desk from the company portal, available around the clock in every office.",
  "________________________________________________________________________________"
]

/** An Outlook invitation: the place is named in its calendar only. */
const invitation = [
  "BEGIN:VCALENDAR", "METHOD:REQUEST", "PRODID:Microsoft Exchange Server 2010", "VERSION:2.0",
  "BEGIN:VTIMEZONE", "TZID:W. Europe Standard Time",
  "BEGIN:STANDARD", "DTSTART:16010101T030000", "TZOFFSETFROM:+0200", "TZOFFSETTO:+0100", "RRULE:FREQ=YEARLY;INTERVAL=1;BYDAY=-1SU;BYMONTH=10", "END:STANDARD",
  "BEGIN:DAYLIGHT", "DTSTART:16010101T020000", "TZOFFSETFROM:+0100", "TZOFFSETTO:+0200", "RRULE:FREQ=YEARLY;INTERVAL=1;BYDAY=-1SU;BYMONTH=3", "END:DAYLIGHT",
  "END:VTIMEZONE", "BEGIN:VEVENT",
  "ORGANIZER;CN=Grace Hopper:mailto:grace@partner.test",
  "ATTENDEE;ROLE=REQ-PARTICIPANT;PARTSTAT=NEEDS-ACTION;RSVP=TRUE;CN=Scheduling Agent:mailto:agent@mailroom.test",
  `DESCRIPTION;LANGUAGE=en-US:${boilerplate.join("\\n")}`,
  `X-ALT-DESC;FMTTYPE=text/html:<html><body><div>${boilerplate.join("</div><div>")}</div></body></html>`,
  "SUMMARY;LANGUAGE=en-US:Contract review",
  "DTSTART;TZID=W. Europe Standard Time:20261203T150000", "DTEND;TZID=W. Europe Standard Time:20261203T160000",
  "UID:040000008200E00074C5B7101A82E00800000000", "CLASS:PUBLIC", "PRIORITY:5", "DTSTAMP:20261125T120000Z",
  "TRANSP:OPAQUE", "STATUS:CONFIRMED", "SEQUENCE:0", "LOCATION;LANGUAGE=en-US:Bahnhofstrasse 3\\, Zürich",
  "END:VEVENT", "END:VCALENDAR", ""
].join("\r\n")

const mail = [
  ["eml_1", "Contract review", boilerplate.join("\n")],
  ["eml_10", "Basel office", "The Basel office moves to a new building next month."],
  ["eml_11", "Vienna trip", "The hotel in Vienna is booked for the conference."],
  ["eml_12", "German course", "Your German course in Munich starts in January."],
  ["eml_13", "Bank transfer", "The euro fell against the Swiss franc today."],
  ["eml_14", "Holiday photos", "Photos from our holiday in Switzerland: the lakes and the mountains."],
  ...otherTopics
] as const

const ranked = (query: string, mode: SearchMode, reading: "memory" | "every" = "memory", exactMatch = DEFAULT_RANKING.exactMatch) =>
  Effect.flatMap(Ranker, (ranker) => ranker.rank("usr_1", query, mode, undefined, { ...DEFAULT_RANKING, reading, exactMatch }))

layer(testDatabase, { timeout: "120 seconds" })("An email holding every query word, in hybrid search", (it) => {
  it.effect("ranks above all mail holding none of the words, though the model finds that mail nearer; fused as any other, it fell below it", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* indexedMail(mail, { eml_1: [{ filename: "invite.ics", contentType: "text/calendar; charset=utf-8; method=REQUEST", text: invitation }] })
      const ids = (hits: ReadonlyArray<{ readonly emailId: string }>) => hits.map((hit) => hit.emailId)
      // Its words find it alone, by its invitation: the words are in no email's text.
      for (const query of ["Zürich", "zurich", "Bahnhofstrasse Zürich"]) expect([query, ids(yield* ranked(query, "text"))]).toEqual([query, ["eml_1"]])
      expect(yield* sql`SELECT id FROM emails WHERE text_body ILIKE '%zürich%' OR subject ILIKE '%zürich%' OR text_body ILIKE '%bahnhof%'`).toEqual([])
      // By meaning, mail about Switzerland or travel that never names the street or the city is nearer.
      expect(ids(yield* ranked("Zürich", "vector")).indexOf("eml_1")).toBeGreaterThan(2)
      // Fused as any other email (round one), it fell below such mail.
      for (const query of ["Zürich", "Bahnhofstrasse Zürich"]) {
        expect([query, ids(yield* ranked(query, "hybrid", "memory", "fused")).indexOf("eml_1")]).toEqual([query, 3])
      }

      expect(DEFAULT_RANKING.exactMatch).toBe("lift")
      for (const query of ["Zürich", "zurich", "Bahnhofstrasse Zürich", "Bahnhofstrasse"]) {
        for (const reading of ["memory", "every"] as const) {
          const hybrid = yield* ranked(query, "hybrid", reading)
          expect([query, reading, hybrid[0]!.emailId]).toEqual([query, reading, "eml_1"])
          // Mail holding none of the words keeps its place and score below it.
          const fused = yield* ranked(query, "hybrid", reading, "fused")
          expect(hybrid.slice(1)).toEqual(fused.filter((hit) => hit.emailId !== "eml_1"))
        }
      }
    }).pipe(Effect.provide(withTheModel)), 180_000)
})
