/**
 * The words stage (issue 18): mail is found by its words at ingest's pace, before the embedder gets
 * to it. Over the suite's real database (PGlite, or PostgreSQL with DATABASE_URL): the words stage
 * stores an email's document without a model, the index stage then names the model without counting
 * a word twice (and stores the words itself when it comes first), and the actor on the bus stores
 * received and sent mail's words, and leaves an email whose words keep failing to the index stage
 * rather than holding its consumer.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Context, Duration, Effect, Layer, Option, Schedule, TestServices } from "effect"
import * as DocumentReader from "../../layers/document-reader.ts"
import * as MemoryBus from "../../layers/memory-bus.ts"
import { Bus, type ConsumerRef, encodeJson, subjects } from "../../services/bus/bus.ts"
import { DependencyHealth } from "../../services/health/dependency-health.ts"
import { sentMailConsumers, stageConsumers } from "../../services/pipeline/stages.ts"
import { Indexer } from "../../services/search/indexer.ts"
import { Ranker } from "../../services/search/ranker.ts"
import { documentOf, loadEmails, storeDocuments } from "../../services/search/stored-documents.ts"
import { Vectors } from "../../services/search/vectors.ts"
import { WordIndexer, WordIndexerLive, WordRetries } from "../../services/search/word-indexer.ts"
import { testDatabase } from "../support/database.ts"
import { rankerAndIndexer } from "../support/search-services.ts"

const blob = "9".repeat(64)

/** An account `usr_<key>` with the mailboxes `mbx_<key>` and `mbx_<key>_gone`, and `emails` (id, subject, body) in the first. */
const mailOf = (key: string, emails: ReadonlyArray<readonly [id: string, subject: string, body: string]>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`INSERT INTO users (id, email, email_normalized, name, password_hash)
               VALUES (${`usr_${key}`}, ${`${key}@example.com`}, ${`${key}@example.com`}, ${key}, 'x')`
    yield* sql`INSERT INTO mailboxes (id, user_id, local_part, domain, address_normalized)
               VALUES (${`mbx_${key}`}, ${`usr_${key}`}, ${key}, 'agents.localhost', ${`${key}@agents.localhost`}),
                      (${`mbx_${key}_gone`}, ${`usr_${key}`}, ${`${key}-gone`}, 'agents.localhost', ${`${key}-gone@agents.localhost`})`
    yield* sql`INSERT INTO blobs (sha256, size, content) VALUES (${blob}, 1, ${new Uint8Array([1])}) ON CONFLICT DO NOTHING`
    for (const [id, subject, text] of emails) {
      const mailbox = id.endsWith("_gone") ? `mbx_${key}_gone` : `mbx_${key}`
      yield* sql`INSERT INTO emails (id, mailbox_id, user_id, message_id, thread_id, subject, from_address, to_addresses, sent_at,
                                     received_at, mail_from, rcpt_to, headers, text_body, has_attachments, raw_sha256, size)
                 VALUES (${id}, ${mailbox}, ${`usr_${key}`}, ${`<${id}@test>`}, ${id}, ${subject}, 'x@example.com', ${["y@example.com"]},
                         now(), now(), 'x@example.com', 'y@example.com', '{}', ${text}, false, ${blob}, 1)`
    }
  })

const documents = (userId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ emailId: string; model: string | null; chunks: number }>`
      SELECT email_id, model, chunks FROM search_documents WHERE user_id = ${userId} ORDER BY email_id`)

const lexicon = (userId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ lexeme: string; documents: number }>`SELECT lexeme, documents FROM search_lexicon WHERE user_id = ${userId} ORDER BY lexeme`.pipe(
      Effect.map((rows) => Object.fromEntries(rows.map((r) => [r.lexeme, r.documents])))
    ))

const found = (userId: string, query: string, mode: "text" | "vector" | "hybrid") =>
  Effect.flatMap(Ranker, (ranker) => ranker.rank(userId, query, mode, undefined)).pipe(Effect.map((ranked) => ranked.map((r) => r.emailId)))

const wordsAndVectors = Layer.merge(rankerAndIndexer, WordIndexer.Default.pipe(Layer.provide(DocumentReader.layer)))

layer(testDatabase, { timeout: "60 seconds" })("The words stage", (it) => {
  it.effect("finds mail by its words before its vectors; the index stage then adds them without counting a word twice", () =>
    Effect.gen(function*() {
      yield* mailOf("w", [
        ["eml_w1", "Invoice for October", "The invoice for October is attached."],
        ["eml_w2", "Team offsite", "Agenda for the offsite in October."],
        ["eml_w3", "Harbour fees", "Fees for the harbour, due Monday."],
        ["eml_w4_gone", "Invoice reminder", "A reminder about the invoice."]
      ])
      const sql = yield* SqlClient.SqlClient
      yield* sql`UPDATE mailboxes SET status = 'deleted', deleted_at = now() WHERE id = 'mbx_w_gone'`
      const words = yield* WordIndexer
      const indexer = yield* Indexer

      // Two at once share a statement; one asked for twice, a deleted mailbox's and a missing one are not stored.
      const stored = yield* Effect.forEach(["eml_w1", "eml_w2", "eml_w1", "eml_w4_gone", "eml_missing"], (id) => words.index(id), {
        concurrency: "unbounded"
      })
      expect([stored[0], stored[1], stored[3], stored[4]]).toEqual([true, true, false, false])
      expect(yield* documents("usr_w")).toEqual([
        { emailId: "eml_w1", model: null, chunks: 0 },
        { emailId: "eml_w2", model: null, chunks: 0 }
      ])
      expect(yield* words.index("eml_w1")).toBe(false)
      const counted = yield* lexicon("usr_w")
      expect(counted).toMatchObject({ invoic: 1, octob: 2, offsit: 1 })
      expect(counted.harbour).toBeUndefined()

      // Found by its words, not yet by its meaning.
      expect(yield* found("usr_w", "invoice", "text")).toEqual(["eml_w1"])
      expect(yield* found("usr_w", "offsite agenda", "hybrid")).toEqual(["eml_w2"])
      expect(yield* found("usr_w", "invoice", "vector")).toEqual([])
      // Not embedded: still waiting for the index stage (the start report's `unindexed`), and for `reindex`.
      expect(yield* indexer.unsearchable(new Date(Date.now() + 60_000))).toEqual({ otherModel: 0, unindexed: 3 })
      expect(yield* indexer.stale()).toEqual(["eml_w1", "eml_w2", "eml_w3"])

      // The index stage names the model and stores the vectors; the words are as they were.
      for (const id of ["eml_w1", "eml_w2"]) expect((yield* indexer.index(id)).outcome).toBe("indexed")
      expect(yield* lexicon("usr_w")).toEqual(counted)
      // The index stage first: it stores the words itself, and the words stage then changes nothing.
      expect((yield* indexer.index("eml_w3")).outcome).toBe("indexed")
      expect(yield* words.index("eml_w3")).toBe(false)
      // Nor does a words stage that read the email before the index stage stored it, and writes after.
      const late = (yield* loadEmails(sql, ["eml_w3"])).get("eml_w3")!
      yield* storeDocuments(sql, [{ document: documentOf("eml_w3", { ...late, documented: false, model: null }, []), model: null, chunks: 0, processingMs: 0 }])
      expect(yield* documents("usr_w")).toEqual(["eml_w1", "eml_w2", "eml_w3"].map((emailId) => ({ emailId, model: "words-v1", chunks: 1 })))
      expect(yield* lexicon("usr_w")).toMatchObject({ invoic: 1, octob: 2, offsit: 1, harbour: 1, fee: 1 })
      expect(yield* found("usr_w", "invoice", "vector")).toContain("eml_w1")
      expect(yield* indexer.unsearchable(new Date(Date.now() + 60_000))).toEqual({ otherModel: 0, unindexed: 0 })
      const vectors = yield* (yield* Vectors).collection
      expect(yield* vectors.count("usr_w")).toBe(3)

      // `reindex`'s reading of words again takes a document of words only as it takes any other.
      yield* mailOf("r", [["eml_r1", "Garden", "The garden needs water."]])
      expect(yield* words.index("eml_r1")).toBe(true)
      expect(yield* indexer.reword(["eml_r1"])).toBe(1)
      expect(yield* documents("usr_r")).toEqual([{ emailId: "eml_r1", model: null, chunks: 0 }])
      expect(yield* lexicon("usr_r")).toMatchObject({ garden: 1, water: 1 })
    }).pipe(Effect.provide(wordsAndVectors)))

  // On the live clock: the bus's redeliveries are real waits.
  it.effect("the actor indexes each email.received's and each sent email's words; an email whose words keep failing is left to the index stage", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* mailOf("a", [
        ["eml_a1", "Lunch on Friday", "Shall we have lunch on Friday?"],
        ["eml_a2", "Flight confirmed", "Your flight to Lisbon leaves at seven."],
        ["eml_a3", "Password reset", "Click the link to reset your password."],
        ["eml_a4", "Quarterly figures", "The quarterly figures you asked for."],
        ["eml_a5", "Forwarded parcel", "A parcel notice forwarded on."]
      ])
      yield* sql`UPDATE emails SET direction = 'outbound' WHERE id = 'eml_a4'`
      // The database refuses eml_a2's document: a fault of that email alone.
      yield* sql`CREATE FUNCTION refuse_a2() RETURNS trigger LANGUAGE plpgsql AS $$
                 BEGIN IF NEW.email_id = 'eml_a2' THEN RAISE EXCEPTION 'refused for the test'; END IF; RETURN NEW; END $$`
      yield* sql`CREATE TRIGGER refuse_a2 BEFORE INSERT ON search_documents FOR EACH ROW EXECUTE FUNCTION refuse_a2()`
      const actor = WordIndexerLive.pipe(
        Layer.provide(Layer.mergeAll(DocumentReader.layer, Layer.succeed(WordRetries, { retryDelay: () => Duration.millis(50), giveUpAfter: 3 }))),
        Layer.provideMerge(MemoryBus.layer),
        Layer.provideMerge(DependencyHealth.Default)
      )
      const documented = (id: string) => Effect.map(sql`SELECT 1 FROM search_documents WHERE email_id = ${id}`, (rows) => rows.length === 1)
      const until = <E, R>(check: Effect.Effect<boolean, E, R>) =>
        Effect.repeat(check, { until: (done) => done, schedule: Schedule.spaced("50 millis") }).pipe(Effect.timeout("15 seconds"))

      yield* Effect.scoped(Effect.gen(function*() {
        const bus = Context.get(yield* Layer.build(actor), Bus)
        const received = (id: string) =>
          bus.publish(subjects.event("email.received"), encodeJson({ event: "email.received", namespace: "usr_a", data: { email_id: id } }), {
            msgId: `email.received:${id}`
          })
        const sent = (id: string, subject = subjects.outboundMail(id)) =>
          bus.publish(subject, encodeJson({ email_id: id, domain: "example.com" }), { msgId: `${subject}:example.com` })
        const idle = (consumer: ConsumerRef) => Effect.map(bus.lag(consumer), (lag) => Option.exists(lag, (l) => l.pending === 0 && l.inFlight === 0))
        const settled = Effect.zipWith(idle(stageConsumers.words), idle(sentMailConsumers.words), (a, b) => a && b)
        yield* bus.publish(subjects.event("email.received"), new TextEncoder().encode("not json"), { msgId: "malformed" })
        yield* Effect.all([received("eml_a1"), received("eml_a2")], { concurrency: "unbounded" })
        yield* until(Effect.zipWith(documented("eml_a1"), settled, (a, b) => a && b))
        // Acknowledged after its third failure: the consumer holds nothing, and the email has no document.
        expect(yield* documented("eml_a2")).toBe(false)
        yield* received("eml_a3")
        yield* until(Effect.zipWith(documented("eml_a3"), settled, (a, b) => a && b))

        // Sent mail, by its delivery jobs: one per recipient domain, the second finding its words stored.
        // A forwarded copy of received mail is passed over (its words are stored as received mail).
        yield* bus.publish(subjects.outboundMail("eml_bad"), new TextEncoder().encode("{}"), { msgId: "malformed job" })
        yield* sent("eml_a5", subjects.forwardedMail("eml_a5"))
        yield* sent("eml_a4")
        yield* bus.publish(subjects.outboundMail("eml_a4"), encodeJson({ email_id: "eml_a4", domain: "example.org" }), { msgId: "eml_a4:example.org" })
        yield* until(Effect.zipWith(documented("eml_a4"), settled, (a, b) => a && b))
        expect(yield* documented("eml_a5")).toBe(false)
        expect(yield* found("usr_a", "quarterly figures", "text").pipe(Effect.provide(rankerAndIndexer))).toEqual(["eml_a4"])
      }))
      yield* sql`DROP TRIGGER refuse_a2 ON search_documents`
      yield* sql`DROP FUNCTION refuse_a2()`
      // What the words stage left, the index stage stores with its vectors.
      expect((yield* Effect.provide(Effect.flatMap(Indexer, (indexer) => indexer.index("eml_a2")), rankerAndIndexer)).outcome).toBe("indexed")
      expect(yield* lexicon("usr_a")).toMatchObject({ flight: 1, lisbon: 1, lunch: 1, password: 1 })
    }).pipe(TestServices.provideLive))
})
