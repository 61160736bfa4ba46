/**
 * Mail is found by words by who sent it: the sender's display name (accents folded, CJK in pairs,
 * other scripts as written), its address and the address's domain are indexed beside subject and
 * body, a sender word counting as a body word does (half a subject word) and not in the length. Mail
 * indexed before (words version 2) is given its sender's words in place (`addSenderWords`), the
 * postings and lexicon then as if it were indexed now. Over the suite's real database (PGlite, or
 * PostgreSQL with DATABASE_URL).
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Effect, Layer, Schedule, TestServices } from "effect"
import * as DocumentReader from "../../layers/document-reader.ts"
import * as MemoryBus from "../../layers/memory-bus.ts"
import { DependencyHealth } from "../../services/health/dependency-health.ts"
import { Lifecycle } from "../../services/lifecycle.ts"
import { Vectors } from "../../services/search/vectors.ts"
import { indexedWords, SENDER_WORDS_FROM, senderText, WORDS_VERSION } from "../../services/search/documents.ts"
import { Indexer, IndexerLive, uncountWords } from "../../services/search/indexer.ts"
import { Ranker } from "../../services/search/ranker.ts"
import { testDatabase } from "../support/database.ts"
import { hashedWordsEmbedder, otherTopics, rankerAndIndexer, testVectorIndex } from "../support/search-services.ts"

/** id, subject, body, from address, from name (null: an email stored before names were kept, its name in its From header). */
const mail: ReadonlyArray<readonly [string, string, string, string, string | null]> = [
  ["eml_mu", "Quarterly figures", "Please find the figures attached.", "juergen.mueller@firma.de", "Jürgen Müller"],
  ["eml_an", "Visit next week", "I will be in town on Tuesday.", "andre@example.jp", "André山田"],
  ["eml_nu", "Contract draft", "The draft is ready for review.", "nunez@despacho.mx", null],
  ["eml_te", "Build failed", "The nightly build failed on main.", "ci@builds.example", "Tester"],
  ["eml_yo", "Shabbat dinner", "Are you coming on Friday?", "yosef@example.co.il", "יוסף כהן"],
  // The sender's name in another email's subject: the subject counts double.
  ["eml_sub", "Müller contract renewal", "Renewal terms for the contract.", "legal@example.org", "Legal"],
  ...otherTopics.map(([id, subject, body]) => [id, subject, body, "x@example.com", ""] as const)
]

const store = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`INSERT INTO users (id, email, email_normalized, name, password_hash) VALUES ('usr_1', 'a@example.com', 'a@example.com', 'A', 'x')`
  yield* sql`INSERT INTO mailboxes (id, user_id, local_part, domain, address_normalized)
             VALUES ('mbx_1', 'usr_1', 'ops', 'agents.localhost', 'ops@agents.localhost')`
  yield* sql`INSERT INTO blobs (sha256, size, content) VALUES (${"0".repeat(64)}, 1, ${new Uint8Array([1])})`
  for (const [id, subject, text, from, name] of mail) {
    const headers = name === null ? { from: `"Núñez García" <${from}>` } : {}
    yield* sql`INSERT INTO emails (id, mailbox_id, user_id, message_id, thread_id, subject, from_address, from_name, to_addresses, sent_at,
                                   received_at, mail_from, rcpt_to, headers, text_body, has_attachments, raw_sha256, size)
               VALUES (${id}, 'mbx_1', 'usr_1', ${`<${id}@test>`}, ${id}, ${subject}, ${from}, ${name}, ${["ops@agents.localhost"]}, now(),
                       now(), ${from}, 'ops@agents.localhost', ${JSON.stringify(headers)}::jsonb, ${text}, false, ${"0".repeat(64)}, 1)`
  }
  const indexer = yield* Indexer
  for (const [id] of mail) yield* indexer.index(id)
})

/**
 * The index as the version before left it (words version 2): the same words without the sender's (a
 * sender word the body or subject holds too, "contract" of eml_sub, kept with its own occurrences).
 */
const asIndexedBefore = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const ids = mail.map(([id]) => id)
  yield* uncountWords(sql, ids)
  yield* sql`DELETE FROM search_terms`
  for (const [id, subjectText, bodyText] of mail) {
    const { body, subject } = indexedWords(subjectText, bodyText)
    yield* sql`
      WITH lexemes AS (
        SELECT u.lexeme, (cardinality(u.positions) + (SELECT count(*) FROM unnest(u.weights) AS w WHERE w = 'A'))::real AS frequency
        FROM unnest(setweight(to_tsvector('english', ${subject}), 'A') || setweight(to_tsvector('english', ${body}), 'B')) AS u (lexeme, positions, weights)
      ),
      postings AS (
        INSERT INTO search_terms (user_id, lexeme, email_id, doc, mailbox_id, frequency, length)
        SELECT 'usr_1', l.lexeme, d.email_id, d.doc, d.mailbox_id, l.frequency, d.length FROM lexemes l, search_documents d WHERE d.email_id = ${id}
      )
      INSERT INTO search_lexicon AS x (user_id, lexeme, documents) SELECT 'usr_1', lexeme, 1 FROM lexemes
      ON CONFLICT (user_id, lexeme) DO UPDATE SET documents = x.documents + 1`
  }
  yield* sql`UPDATE search_documents SET words_version = ${SENDER_WORDS_FROM}`
})

const found = (query: string, mode: "text" | "hybrid" = "text") =>
  Effect.flatMap(Ranker, (ranker) => ranker.rank("usr_1", query, mode, undefined)).pipe(Effect.map((ranked) => ranked.map((r) => r.emailId)))

/** Queries of a sender, each with the email it should find (first, in hybrid search). */
const bySender = [
  ["Müller", "eml_mu"],
  ["jürgen", "eml_mu"],
  ["juergen.mueller@firma.de", "eml_mu"],
  ["firma.de", "eml_mu"],
  ["André", "eml_an"],
  ["andre", "eml_an"],
  ["山田", "eml_an"],
  ["Núñez", "eml_nu"],
  ["garcia", "eml_nu"],
  ["Tester", "eml_te"],
  ["יוסף כהן", "eml_yo"],
  ["כהן", "eml_yo"]
] as const

layer(testDatabase, { timeout: "60 seconds" })("Mail found by its sender", (it) => {
  it("a sender's words: name, address and domain, the name not twice when it is the address", () => {
    expect(senderText("Jürgen Müller", "juergen.mueller@firma.de")).toBe("Jürgen Müller juergen.mueller@firma.de firma.de")
    expect(senderText(null, "a@b.example")).toBe("a@b.example b.example")
    expect(senderText("A@b.example", "a@b.example")).toBe("A@b.example b.example")
  })

  it.effect("by the sender's name in any script, its address and its domain, in text and hybrid search", () =>
    Effect.gen(function*() {
      yield* store
      for (const [query, email] of bySender) {
        expect([query, yield* found(query)]).toEqual([query, query === "Müller" ? ["eml_sub", "eml_mu"] : [email]])
        const hybrid = yield* found(query, "hybrid")
        expect([query, hybrid.indexOf(email)]).toEqual([query, query === "Müller" ? 1 : 0])
      }
    }).pipe(Effect.provide(rankerAndIndexer)))
})

layer(testDatabase, { timeout: "60 seconds" })("A sender's words in the ranking", (it) => {
  it.effect("a sender's word weighs as a body word: below the same word in a subject, the length unchanged", () =>
    Effect.gen(function*() {
      yield* store
      const sql = yield* SqlClient.SqlClient
      const rows = yield* sql<{ emailId: string; frequency: number; length: number }>`
        SELECT email_id, frequency, length FROM search_terms WHERE lexeme = 'muller' ORDER BY email_id`
      expect(rows.map((row) => [row.emailId, Number(row.frequency), Number(row.length)])).toEqual([["eml_mu", 1, 7], ["eml_sub", 2, 8]])
    }).pipe(Effect.provide(rankerAndIndexer)))
})

layer(testDatabase, { timeout: "60 seconds" })("Senders of mail indexed before", (it) => {
  it.effect("mail indexed before senders were is given their words in place, as if indexed now", () =>
    Effect.gen(function*() {
      yield* store
      const sql = yield* SqlClient.SqlClient
      const postings = sql<{ emailId: string; lexeme: string; doc: string; frequency: number; length: number }>`
        SELECT email_id, lexeme, doc, frequency, length FROM search_terms ORDER BY email_id, lexeme`
      const lexicon = sql<{ lexeme: string; documents: number }>`SELECT lexeme, documents FROM search_lexicon ORDER BY lexeme`
      const now = { postings: yield* postings, lexicon: yield* lexicon }

      yield* asIndexedBefore
      expect(yield* found("Tester")).toEqual([])

      const indexer = yield* Indexer
      // Not stale for `reindex`: nothing but the sender is missing.
      expect(yield* indexer.staleWords).toEqual([])
      expect(yield* indexer.addSenderWords()).toBe(mail.length)
      expect(yield* indexer.addSenderWords()).toBe(0)
      expect(yield* postings).toEqual(now.postings)
      expect(yield* lexicon).toEqual(now.lexicon)
      const versions = yield* sql<{ wordsVersion: number }>`SELECT DISTINCT words_version FROM search_documents`
      expect(versions.map((row) => row.wordsVersion)).toEqual([WORDS_VERSION])
      for (const [query, email] of bySender.filter(([query]) => query !== "Müller")) expect([query, yield* found(query)]).toEqual([query, [email]])
    }).pipe(Effect.provide(rankerAndIndexer)))
})

layer(testDatabase, { timeout: "60 seconds" })("Senders of mail indexed before, at the worker's start", (it) => {
  it.effect("the index actor gives them their words as it starts", () =>
    Effect.gen(function*() {
      yield* store
      yield* asIndexedBefore
      expect(yield* found("Tester")).toEqual([])
      const actor = IndexerLive.pipe(
        Layer.provide(Vectors.Default),
        Layer.provide(Layer.mergeAll(hashedWordsEmbedder("words-v1"), testVectorIndex, DocumentReader.layer, Layer.succeed(Lifecycle, { stopping: Effect.never }))),
        Layer.provide(MemoryBus.layer),
        Layer.provideMerge(DependencyHealth.Default)
      )
      yield* Effect.scoped(Effect.gen(function*() {
        yield* Layer.build(actor)
        yield* Effect.repeat(found("Tester"), { until: (ids) => ids.length > 0, schedule: Schedule.spaced("50 millis") }).pipe(Effect.timeout("15 seconds"))
      }))
      expect(yield* found("Tester")).toEqual(["eml_te"])
    }).pipe(Effect.provide(rankerAndIndexer), TestServices.provideLive))
})
