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
import { Indexer } from "../../services/search/indexer.ts"
import { BASELINE_RANKING, DEFAULT_RANKING, Ranker } from "../../services/search/ranker.ts"
import { testDatabase } from "../support/database.ts"
import { rankerAndIndexer } from "../support/search-services.ts"


const mail = [
  ["eml_1", "Disk full on db-01", "The disk is full: the storage volume is nearly exhausted."],
  ["eml_2", "Disk full alert", "Disk full again, storage volume at 95 percent."],
  ["eml_3", "Running low", "The storage volume of the database host is running low."],
  ["eml_4", "Lunch on Friday", "Shall we have lunch together on Friday at noon?"],
  ["eml_5", "Invoice 42", "Please pay invoice 42 by the end of the month."],
  ["eml_6", "Team offsite", "The agenda for the team offsite in October."],
  ["eml_7", "Password reset", "Click the link to reset your password."],
  ["eml_8", "Flight confirmed", "Your flight to Lisbon leaves at seven."],
  ["eml_9", "Newsletter", "Product news and hiring updates for the quarter."]
] as const

const fixtures = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`INSERT INTO users (id, email, email_normalized, name, password_hash) VALUES ('usr_1', 'a@example.com', 'a@example.com', 'A', 'x')`
  yield* sql`INSERT INTO mailboxes (id, user_id, local_part, domain, address_normalized)
             VALUES ('mbx_1', 'usr_1', 'ops', 'agents.localhost', 'ops@agents.localhost')`
  yield* sql`INSERT INTO blobs (sha256, size, content) VALUES (${"0".repeat(64)}, 1, ${new Uint8Array([1])})`
  for (const [id, subject, text] of mail) {
    yield* sql`INSERT INTO emails (id, mailbox_id, user_id, message_id, thread_id, subject, from_address, to_addresses, sent_at,
                                   received_at, mail_from, rcpt_to, headers, text_body, has_attachments, raw_sha256, size)
               VALUES (${id}, 'mbx_1', 'usr_1', ${`<${id}@test>`}, ${id}, ${subject}, 'x@example.com', ${["y@example.com"]}, now(),
                       now(), 'x@example.com', 'y@example.com', '{}', ${text}, false, ${"0".repeat(64)}, 1)`
  }
  const indexer = yield* Indexer
  for (const [id] of mail) yield* indexer.index(id)
})

layer(testDatabase, { timeout: "60 seconds" })("Ranker", (it) => {
  it.effect("feedback finds, below the word matches, an email sharing only their words; without it words do not", () =>
    Effect.gen(function*() {
      yield* fixtures
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
