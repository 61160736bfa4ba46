/**
 * The index actor's service over a real database and vector index (the suite's migrated database,
 * pgvector in it or beside it):
 * indexing is idempotent (a redelivery counts an email's words once), a new model re-embeds without
 * recounting, `refresh` indexes an email afresh (`mailroom reindex --all`), `stale` finds what
 * `mailroom reindex` must embed, and deleting a mailbox lets
 * `purgeDeleted` forget its search data. The embedder is a small deterministic one (hashed words):
 * what is tested here is the bookkeeping, not the model.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Context, Deferred, Duration, Effect, Layer, Option, Schedule, TestServices } from "effect"
import { createHash } from "node:crypto"
import * as DocumentReader from "../../layers/document-reader.ts"
import * as MemoryBus from "../../layers/memory-bus.ts"
import { sentMailConsumers } from "../../services/pipeline/stages.ts"
import { Bus, type BusMessage, type ConsumerSpec, encodeJson, subjects } from "../../services/bus/bus.ts"
import { DependencyHealth } from "../../services/health/dependency-health.ts"
import { Embedder, EmbedderError, readsAnyText } from "../../services/search/embedder.ts"
import { Indexer, IndexerLive, IndexRetries, uncountWords, unsearchableReport } from "../../services/search/indexer.ts"
import { WORDS_VERSION } from "../../services/search/documents.ts"
import { Lifecycle } from "../../services/lifecycle.ts"
import { Vectors } from "../../services/search/vectors.ts"
import { testDatabase } from "../support/database.ts"
import { HASHED_DIMENSIONS, hashedVector, hashedWordsEmbedder, indexerWith, testVectorIndex } from "../support/search-services.ts"

const fixtures = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`INSERT INTO users (id, email, email_normalized, name, password_hash) VALUES ('usr_1', 'a@example.com', 'a@example.com', 'A', 'x')`
  yield* sql`INSERT INTO mailboxes (id, user_id, local_part, domain, address_normalized)
             VALUES ('mbx_keep', 'usr_1', 'keeper', 'agents.localhost', 'keeper@agents.localhost'),
                    ('mbx_gone', 'usr_1', 'leaver', 'agents.localhost', 'leaver@agents.localhost')`
  yield* sql`INSERT INTO blobs (sha256, size, content) VALUES (${"0".repeat(64)}, 1, ${new Uint8Array([1])})`
  const email = (id: string, mailbox: string, subject: string, text: string) =>
    sql`INSERT INTO emails (id, mailbox_id, user_id, message_id, thread_id, subject, from_address, to_addresses, sent_at,
                            received_at, mail_from, rcpt_to, headers, text_body, has_attachments, raw_sha256, size)
        VALUES (${id}, ${mailbox}, 'usr_1', ${`<${id}@test>`}, ${id}, ${subject}, 'x@example.com', ${["y@example.com"]}, now(),
                now() - interval '1 hour', 'x@example.com', 'y@example.com', '{}', ${text}, false, ${"0".repeat(64)}, 1)`
  yield* email("eml_a", "mbx_keep", "Invoice for October", "The invoice for October is attached. Invoice total 120.")
  yield* email("eml_b", "mbx_keep", "Team offsite", "Agenda for the offsite in October.")
  yield* email("eml_c", "mbx_gone", "Invoice reminder", "A reminder about the October invoice.")
})

/** A user `usr_<key>` with one mailbox `mbx_<key>` (`<local>@agents.localhost`), and the blob the emails point at. */
const accountWithMailbox = (key: string, local: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.all([
      sql`INSERT INTO users (id, email, email_normalized, name, password_hash)
          VALUES (${`usr_${key}`}, ${`${key}@example.com`}, ${`${key}@example.com`}, ${key.toUpperCase()}, 'x')`,
      sql`INSERT INTO blobs (sha256, size, content) VALUES (${"0".repeat(64)}, 1, ${new Uint8Array([1])}) ON CONFLICT DO NOTHING`,
      sql`INSERT INTO mailboxes (id, user_id, local_part, domain, address_normalized)
          VALUES (${`mbx_${key}`}, ${`usr_${key}`}, ${local}, 'agents.localhost', ${`${local}@agents.localhost`})`
    ], { discard: true }))

/** An email `id` with `text` as its body in the mailbox `mbx_<key>` of `usr_<key>` (accountWithMailbox's). */
const noteIn = (key: string, id: string, text: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql`INSERT INTO emails (id, mailbox_id, user_id, message_id, thread_id, subject, from_address, to_addresses, sent_at,
                            received_at, mail_from, rcpt_to, headers, text_body, has_attachments, raw_sha256, size)
        VALUES (${id}, ${`mbx_${key}`}, ${`usr_${key}`}, ${`<${id}@test>`}, ${id}, 'Note', 'sender@example.com', ${["y@example.com"]}, now(),
                now(), 'sender@example.com', 'y@example.com', '{}', ${text}, false, ${"0".repeat(64)}, 1)`)

/** The index actor as a worker runs it, over its own bus, with `embedder`, `retries` and the process's `lifecycle`. */
const indexActor = (
  embedder: Layer.Layer<Embedder>,
  retries: typeof IndexRetries.Service,
  lifecycle: Layer.Layer<Lifecycle>,
  bus: Layer.Layer<Bus, never, SqlClient.SqlClient | DependencyHealth> = MemoryBus.layer
) =>
  IndexerLive.pipe(
    Layer.provide(Vectors.Default),
    Layer.provide(Layer.mergeAll(embedder, testVectorIndex, DocumentReader.layer, Layer.succeed(IndexRetries, retries), lifecycle)),
    Layer.provideMerge(bus),
    Layer.provideMerge(DependencyHealth.Default)
  )

/** An in-memory bus that records every message its consumers are handed (a redelivery too) in `handed`. */
const recordingBus = (handed: Array<BusMessage>) =>
  Layer.effect(
    Bus,
    Effect.map(Bus, (bus) => ({
      ...bus,
      consume: <E>(spec: ConsumerSpec<E>) =>
        bus.consume({ ...spec, handler: (message) => Effect.zipRight(Effect.sync(() => handed.push(message)), spec.handler(message)) })
    }))
  ).pipe(Layer.provide(MemoryBus.layer))

/** A slow embedder (100 ms a call) of hashed words that records each call's size in `calls`. */
const slowEmbedder = (model: string, calls: Array<number>) =>
  Layer.succeed(Embedder, {
    model,
    dimensions: HASHED_DIMENSIONS,
    maxInputChars: 2_000,
    reads: readsAnyText,
    embed: (texts) =>
      Effect.sync(() => calls.push(texts.length)).pipe(
        // A wall-clock wait: the suite's TestClock would never end an Effect.sleep.
        Effect.zipRight(Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 100)))),
        Effect.as(texts.map(hashedVector))
      )
  })

const lexicon = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql<{ lexeme: string; documents: number }>`SELECT lexeme, documents FROM search_lexicon WHERE user_id = 'usr_1' ORDER BY lexeme`.pipe(
    Effect.map((rows) => Object.fromEntries(rows.map((r) => [r.lexeme, r.documents])))
  ))

layer(testDatabase, { timeout: "60 seconds" })("Indexer", (it) => {
  it("at start, mail waiting in the index stage is told as such; only other models' mail and what nothing waits for want reindex", () => {
    const report = (otherModel: number, unindexed: number, waiting: number) =>
      unsearchableReport({ model: "m1", otherModel, unindexed, waiting }).map(({ level, message }) => [level, message.split(" ")[0]])
    // A backlog after a restart (18,832 emails waiting): no call to reindex.
    expect(report(0, 18_832, 19_022)).toEqual([["info", "18832"]])
    expect(report(0, 5, 0)).toEqual([["warning", "5"]])
    // More not indexed than the stage holds: those it does not hold were forgotten.
    expect(report(2, 10, 4)).toEqual([["warning", "2"], ["warning", "6"], ["info", "4"]])
    expect(report(0, 0, 7)).toEqual([])
  })

  it.effect("indexes once, re-embeds for a new model without recounting, and forgets deleted mailboxes' mail", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* fixtures
      const first = yield* Effect.provide(Effect.gen(function*() {
        const indexer = yield* Indexer
        expect(yield* indexer.stale()).toEqual(["eml_a", "eml_b", "eml_c"])
        const later = new Date(Date.now() + 60_000)
        expect(yield* indexer.unsearchable(later)).toEqual({ otherModel: 0, unindexed: 3 })
        for (const id of ["eml_a", "eml_b", "eml_c"]) expect((yield* indexer.index(id)).outcome).toBe("indexed")
        expect(yield* indexer.unsearchable(later)).toEqual({ otherModel: 0, unindexed: 0 })
        // A redelivery: nothing is embedded or counted again.
        expect((yield* indexer.index("eml_a")).outcome).toBe("already-indexed")
        expect(yield* indexer.stale()).toEqual([])
        return yield* lexicon
      }), indexerWith(hashedWordsEmbedder("words-v1")))
      // "invoice" is in a (subject and body), c; "octob" in all three.
      expect(first).toMatchObject({ invoic: 2, octob: 3, offsit: 1, remind: 1 })
      const postings = yield* sql<{ frequency: number }>`
        SELECT frequency FROM search_terms WHERE email_id = 'eml_a' AND lexeme = 'invoic'`
      // Once in the subject (counted double) and twice in the body.
      expect(postings[0]!.frequency).toBe(4)

      yield* Effect.provide(Effect.gen(function*() {
        const indexer = yield* Indexer
        // A new model: every email is stale until embedded again, and the lexicon is not recounted.
        expect(yield* indexer.stale()).toEqual(["eml_a", "eml_b", "eml_c"])
        expect(yield* indexer.unsearchable(new Date(Date.now() + 60_000))).toEqual({ otherModel: 3, unindexed: 0 })
        for (const id of ["eml_a", "eml_b", "eml_c"]) expect((yield* indexer.index(id)).outcome).toBe("indexed")
        expect(yield* indexer.stale()).toEqual([])
        expect(yield* lexicon).toEqual(first)
        const { collection } = yield* Vectors
        const vectors = yield* collection
        expect(yield* vectors.count("usr_1")).toBe(3)

        yield* sql`UPDATE mailboxes SET status = 'deleted', deleted_at = now() WHERE id = 'mbx_gone'`
        expect(yield* indexer.purgeDeleted()).toBe(1)
        expect(yield* indexer.purgeDeleted()).toBe(0)
        expect(yield* vectors.count("usr_1")).toBe(2)
        const after = yield* lexicon
        expect(after).toMatchObject({ invoic: 1, octob: 2, offsit: 1 })
        expect(after.remind).toBeUndefined()
        const documents = yield* sql<{ emailId: string }>`SELECT email_id FROM search_documents ORDER BY email_id`
        expect(documents.map((d) => d.emailId)).toEqual(["eml_a", "eml_b"])
        // A late event for the deleted mailbox's email indexes nothing.
        expect((yield* indexer.index("eml_c")).outcome).toBe("gone")
      }), indexerWith(hashedWordsEmbedder("words-v2")))
    }))

  it.effect("emails indexed at the same moment share embedder calls, and each keeps its own vectors", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`INSERT INTO users (id, email, email_normalized, name, password_hash) VALUES ('usr_b', 'b@example.com', 'b@example.com', 'B', 'x')`
      yield* sql`INSERT INTO mailboxes (id, user_id, local_part, domain, address_normalized)
                 VALUES ('mbx_b', 'usr_b', 'batched', 'agents.localhost', 'batched@agents.localhost')`
      yield* sql`INSERT INTO blobs (sha256, size, content) VALUES (${"1".repeat(64)}, 1, ${new Uint8Array([1])}) ON CONFLICT DO NOTHING`
      // Words in distinct buckets of the hashed-words embedder, so that each topic finds one email only.
      const topics = ["harbour", "glacier", "orchard", "comet", "lantern", "meadow", "canyon", "falcon", "pottery", "tulip"]
      const ids = topics.map((_, i) => `eml_batch${i}`)
      for (const [i, topic] of topics.entries()) {
        yield* sql`INSERT INTO emails (id, mailbox_id, user_id, message_id, thread_id, subject, from_address, to_addresses, sent_at,
                                      received_at, mail_from, rcpt_to, headers, text_body, has_attachments, raw_sha256, size)
            VALUES (${ids[i]!}, 'mbx_b', 'usr_b', ${`<${ids[i]}@test>`}, ${ids[i]!}, ${topic}, 'x@example.com', ${["y@example.com"]}, now(),
                    now(), 'x@example.com', 'y@example.com', '{}', ${`${topic} ${topic} ${topic}`}, false, ${"1".repeat(64)}, 1)`
      }
      // Callers arriving while calls are out wait and go together.
      const calls: Array<number> = []
      const counting = slowEmbedder("words-batched", calls)
      yield* Effect.provide(
        Effect.gen(function*() {
          const indexer = yield* Indexer
          const outcomes = yield* Effect.forEach(ids, (id) => indexer.index(id), { concurrency: "unbounded" })
          expect(outcomes.map((o) => o.outcome)).toEqual(ids.map(() => "indexed"))
          // Two calls go at once (one email each); the eight that waited share the next one.
          expect(calls.length).toBeLessThan(ids.length)
          expect(calls.reduce((a, b) => a + b, 0)).toBe(ids.length)
          expect(Math.max(...calls)).toBeGreaterThan(1)
          // Each email got its own vector back: its topic finds it first.
          const { collection } = yield* Vectors
          const vectors = yield* collection
          for (const [i, topic] of topics.entries()) {
            const query = hashedVector(`${topic} ${topic}`)
            const hits = yield* vectors.search(query, { namespace: "usr_b" }, 1, { exact: true })
            expect(hits[0]?.emailId).toBe(ids[i])
          }
        }),
        indexerWith(counting)
      )
    }))
  it.effect("emails indexed together are stored together: each counted once per namespace, one asked for twice indexed once", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`INSERT INTO users (id, email, email_normalized, name, password_hash)
                 VALUES ('usr_x', 'x@example.com', 'x@example.com', 'X', 'x'), ('usr_y', 'y@example.com', 'y@example.com', 'Y', 'x')`
      yield* sql`INSERT INTO mailboxes (id, user_id, local_part, domain, address_normalized)
                 VALUES ('mbx_x', 'usr_x', 'ex', 'agents.localhost', 'ex@agents.localhost'),
                        ('mbx_y', 'usr_y', 'why', 'agents.localhost', 'why@agents.localhost')`
      yield* sql`INSERT INTO blobs (sha256, size, content) VALUES (${"2".repeat(64)}, 1, ${new Uint8Array([1])}) ON CONFLICT DO NOTHING`
      const emails = [
        { id: "eml_x1", mailbox: "mbx_x", user: "usr_x", subject: "Harbour lights", text: "The harbour lights are out." },
        { id: "eml_x2", mailbox: "mbx_x", user: "usr_x", subject: "Harbour fees", text: "Fees for the harbour, due Monday." },
        { id: "eml_y1", mailbox: "mbx_y", user: "usr_y", subject: "Harbour tour", text: "A tour of the harbour." },
        { id: "eml_y2", mailbox: "mbx_y", user: "usr_y", subject: "Lights", text: "Lights for the garden." }
      ]
      for (const e of emails) {
        yield* sql`INSERT INTO emails (id, mailbox_id, user_id, message_id, thread_id, subject, from_address, to_addresses, sent_at,
                                      received_at, mail_from, rcpt_to, headers, text_body, has_attachments, raw_sha256, size)
            VALUES (${e.id}, ${e.mailbox}, ${e.user}, ${`<${e.id}@test>`}, ${e.id}, ${e.subject}, 'x@example.com', ${["y@example.com"]}, now(),
                    now(), 'x@example.com', 'y@example.com', '{}', ${e.text}, false, ${"2".repeat(64)}, 1)`
      }
      const calls: Array<number> = []
      const slow = slowEmbedder("words-together", calls)
      const counts = (user: string) =>
        sql<{ lexeme: string; documents: number }>`SELECT lexeme, documents FROM search_lexicon WHERE user_id = ${user} ORDER BY lexeme`.pipe(
          Effect.map((rows) => Object.fromEntries(rows.map((r) => [r.lexeme, r.documents])))
        )
      yield* Effect.provide(
        Effect.gen(function*() {
          const indexer = yield* Indexer
          // The first two go at once, a batch each; the last three wait and go together, eml_x1 in
          // it twice. Every one is indexed, and no word counted twice.
          const asked = ["eml_x2", "eml_y1", "eml_x1", "eml_x1", "eml_y2"]
          const outcomes = yield* Effect.forEach(asked, (id) => indexer.index(id), { concurrency: "unbounded" })
          expect(outcomes.map((o) => o.outcome)).toEqual(asked.map(() => "indexed"))
          // Four emails of one chunk each: eml_x1's was embedded once.
          expect(calls.reduce((a, b) => a + b, 0)).toBe(4)
          // The sender's words too (x@example.com: its address and domain).
          const sender = { "example.com": 2, "x@example.com": 2 }
          expect(yield* counts("usr_x")).toEqual({ due: 1, fee: 1, harbour: 2, light: 1, monday: 1, ...sender })
          expect(yield* counts("usr_y")).toEqual({ garden: 1, harbour: 1, light: 1, tour: 1, ...sender })
          const postings = yield* sql<{ emailId: string; n: string }>`
            SELECT email_id, count(*) AS n FROM search_terms WHERE email_id LIKE 'eml_x%' OR email_id LIKE 'eml_y%'
            GROUP BY email_id ORDER BY email_id`
          expect(postings.map((p) => [p.emailId, Number(p.n)])).toEqual([["eml_x1", 4], ["eml_x2", 6], ["eml_y1", 4], ["eml_y2", 4]])
          const documents = yield* sql<{ emailId: string; userId: string; chunks: number }>`
            SELECT email_id, user_id, chunks FROM search_documents WHERE email_id LIKE 'eml_x%' OR email_id LIKE 'eml_y%' ORDER BY email_id`
          expect(documents).toEqual(emails.map((e) => ({ emailId: e.id, userId: e.user, chunks: 1 })))
          // Asked again together: each already indexed, nothing counted again.
          const again = yield* Effect.forEach(asked, (id) => indexer.index(id), { concurrency: "unbounded" })
          expect(again.map((o) => o.outcome)).toEqual(asked.map(() => "already-indexed"))
          expect(calls.reduce((a, b) => a + b, 0)).toBe(4)
          expect(yield* counts("usr_x")).toMatchObject({ harbour: 2 })
          const { collection } = yield* Vectors
          const vectors = yield* collection
          expect(yield* vectors.count("usr_x")).toBe(2)
          expect(yield* vectors.count("usr_y")).toBe(2)
        }),
        indexerWith(slow)
      )
    }))
  it.effect("finds the accounts whose vectors the index lost, and the emails to embed again (mailroom reindex)", () =>
    Effect.gen(function*() {
      yield* accountWithMailbox("lost", "lost-vectors")
      yield* accountWithMailbox("kept", "kept-vectors")
      yield* noteIn("lost", "eml_lost1", "The quarterly report is ready.")
      yield* noteIn("lost", "eml_lost2", "Lunch on Friday?")
      yield* noteIn("kept", "eml_kept1", "The garden needs water.")
      yield* Effect.provide(Effect.gen(function*() {
        const indexer = yield* Indexer
        for (const id of ["eml_lost1", "eml_lost2", "eml_kept1"]) expect((yield* indexer.index(id)).outcome).toBe("indexed")
        expect(yield* indexer.lostVectors).toEqual([])
        // The index loses one account's vectors (a fresh volume would lose them all): its documents stay.
        const vectors = yield* Effect.flatMap(Vectors, (v) => v.collection)
        yield* vectors.remove(["eml_lost2"])
        // Indexed with this model, as far as the database knows: not stale.
        expect(yield* indexer.stale()).not.toContain("eml_lost2")
        expect(yield* indexer.lostVectors).toEqual([{ userId: "usr_lost", points: 2, emails: 2 }])
        const again = yield* indexer.embeddedOf(["usr_lost"])
        expect(again).toEqual(["eml_lost1", "eml_lost2"])
        for (const id of again) expect((yield* indexer.refresh(id)).outcome).toBe("indexed")
        expect(yield* indexer.lostVectors).toEqual([])
        expect(yield* vectors.count("usr_lost")).toBe(2)
        expect(yield* vectors.count("usr_kept")).toBe(1)
      }), indexerWith(hashedWordsEmbedder("words-lost")))
    }))

  it.effect("gives the vectors an earlier version stored their email's sender and arrival; an email gone since loses its vectors", () =>
    Effect.gen(function*() {
      yield* accountWithMailbox("old", "old-vectors")
      yield* noteIn("old", "eml_old1", "The quarterly report is ready.")
      yield* Effect.provide(Effect.gen(function*() {
        const indexer = yield* Indexer
        const vectors = yield* Effect.flatMap(Vectors, (v) => v.collection)
        // As an earlier version stored them: no sender or arrival; one of an email deleted since.
        const vector = hashedVector("The quarterly report is ready.")
        const stored = { chunk: 0, namespace: "usr_old", mailboxId: "mbx_old", domain: "agents.localhost", date: new Date(), vector }
        yield* vectors.upsert([{ emailId: "eml_old1", ...stored }, { emailId: "eml_deleted", ...stored }])
        const nora = (namespace: string) => vectors.search(vector, { namespace, senderKey: "nora@example.org" }, 10)
        expect((yield* nora("usr_old")).map((hit) => hit.emailId).sort()).toEqual(["eml_deleted", "eml_old1"])
        expect(yield* indexer.describeVectors()).toBe(1)
        expect(yield* vectors.undescribed(undefined, 10)).toEqual({ emailIds: [], next: undefined })
        expect(yield* nora("usr_old")).toEqual([])
        const sender = yield* vectors.search(vector, { namespace: "usr_old", senderKey: "@example.com" }, 10)
        expect(sender.map((hit) => hit.emailId)).toEqual(["eml_old1"])
        expect(yield* vectors.count("usr_old")).toBe(1)
        // Nothing left to describe: the next start's walk is one empty page.
        expect(yield* indexer.describeVectors()).toBe(0)
      }), indexerWith(hashedWordsEmbedder("words-described")))
    }))

  it.effect("refreshes an email afresh, words and vectors: an attachment readable since it was indexed is then found by its words", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* accountWithMailbox("r", "reader")
      yield* sql`INSERT INTO emails (id, mailbox_id, user_id, message_id, thread_id, subject, from_address, to_addresses, sent_at,
                                     received_at, mail_from, rcpt_to, headers, text_body, has_attachments, raw_sha256, size)
                 VALUES ('eml_r', 'mbx_r', 'usr_r', '<eml_r@test>', 'eml_r', 'Lab results', 'x@example.com', ${["y@example.com"]}, now(),
                         now(), 'x@example.com', 'y@example.com', '{}', 'See the attachment.', true, ${"0".repeat(64)}, 1)`
      const words = Effect.map(
        sql<{ lexeme: string }>`SELECT lexeme FROM search_terms WHERE email_id = 'eml_r' ORDER BY lexeme`,
        (rows) => rows.map((row) => row.lexeme)
      )
      const counted = Effect.map(
        sql<{ lexeme: string; documents: number }>`SELECT lexeme, documents FROM search_lexicon WHERE user_id = 'usr_r' ORDER BY lexeme`,
        (rows) => Object.fromEntries(rows.map((row) => [row.lexeme, row.documents]))
      )
      yield* Effect.provide(Effect.gen(function*() {
        const indexer = yield* Indexer
        expect((yield* indexer.index("eml_r")).outcome).toBe("indexed")
        // Its sender's words too (x@example.com: its address and domain).
        expect(yield* words).toEqual(["attach", "example.com", "lab", "result", "see", "x@example.com"])
        // An attachment this version reads, that the one which indexed the email did not.
        const report = new TextEncoder().encode("The zeolite catalyst doubled the yield.")
        const checksum = createHash("sha256").update(report).digest("hex")
        yield* sql`INSERT INTO blobs (sha256, size, content) VALUES (${checksum}, ${report.length}, ${report})`
        yield* sql`INSERT INTO attachments (id, email_id, position, filename, content_type, size, checksum)
                   VALUES ('att_r', 'eml_r', 0, 'report.txt', 'text/plain', ${report.length}, ${checksum})`
        expect((yield* indexer.index("eml_r")).outcome).toBe("already-indexed")
        expect(yield* words).not.toContain("zeolit")
        expect((yield* indexer.refresh("eml_r")).outcome).toBe("indexed")
        expect(yield* words).toEqual(["attach", "catalyst", "doubl", "example.com", "lab", "result", "see", "x@example.com", "yield", "zeolit"])
        // Its words counted once each, the old ones not twice.
        expect(yield* counted).toEqual({
          attach: 1,
          catalyst: 1,
          doubl: 1,
          "example.com": 1,
          lab: 1,
          result: 1,
          see: 1,
          "x@example.com": 1,
          yield: 1,
          zeolit: 1
        })
        const vectors = yield* (yield* Vectors).collection
        expect(yield* vectors.count("usr_r")).toBe(1)
      }), indexerWith())
    }))

  it.effect("reads again the words an earlier version indexed (reindex), keeping the vectors: counted as if indexed now, under a new number", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* accountWithMailbox("w", "worder")
      yield* noteIn("w", "eml_w", "ABC株式会社のiPhone用アプリ")
      yield* noteIn("w", "eml_x", "An iPhone app for ABC")
      const postings = sql<{ lexeme: string; frequency: number; length: number }>`
        SELECT lexeme, frequency, length FROM search_terms WHERE email_id = 'eml_w' ORDER BY lexeme`
      const counted = Effect.map(
        sql<{ lexeme: string; documents: number }>`SELECT lexeme, documents FROM search_lexicon WHERE user_id = 'usr_w' ORDER BY lexeme`,
        (rows) => Object.fromEntries(rows.map((row) => [row.lexeme, row.documents]))
      )
      const documentOf = Effect.map(
        sql<{ doc: string; length: number; wordsVersion: number; model: string }>`
          SELECT doc, length, words_version, model FROM search_documents WHERE email_id = 'eml_w'`,
        (rows) => rows[0]!
      )
      const now = yield* Effect.provide(Effect.gen(function*() {
        const indexer = yield* Indexer
        for (const id of ["eml_w", "eml_x"]) expect((yield* indexer.index(id)).outcome).toBe("indexed")
        expect(yield* indexer.staleWords).toEqual([])
        return { postings: yield* postings, lexicon: yield* counted, document: yield* documentOf }
      }), indexerWith())
      expect(now.document.wordsVersion).toBe(WORDS_VERSION)
      expect(now.postings.map((p) => p.lexeme)).toEqual(expect.arrayContaining(["abc", "iphon", "株式", "会社"]))

      // As an earlier version left it: the run and the Latin letters against it one word each.
      yield* uncountWords(sql, ["eml_w"])
      yield* sql`DELETE FROM search_terms WHERE email_id = 'eml_w'`
      yield* sql`
        WITH old AS (SELECT unnest(tsvector_to_array(to_tsvector('english', 'Note ABC株式会社のiPhone用アプリ'))) AS lexeme),
        postings AS (
          INSERT INTO search_terms (user_id, lexeme, email_id, doc, mailbox_id, frequency, length)
          SELECT 'usr_w', lexeme, 'eml_w', ${now.document.doc}, 'mbx_w', 1, 3 FROM old
        )
        INSERT INTO search_lexicon AS l (user_id, lexeme, documents) SELECT 'usr_w', lexeme, 1 FROM old
        ON CONFLICT (user_id, lexeme) DO UPDATE SET documents = l.documents + 1`
      yield* sql`UPDATE search_documents SET words_version = 1, length = 3 WHERE email_id = 'eml_w'`
      expect((yield* postings).map((p) => p.lexeme)).not.toContain("iphon")

      // Read again by an indexer whose embedder fails: nothing is embedded.
      const refusing = Layer.succeed(Embedder, {
        model: "words-v1",
        dimensions: HASHED_DIMENSIONS,
        maxInputChars: 2_000,
        reads: readsAnyText,
        embed: () => Effect.fail(new EmbedderError({ message: "no embedding here" }))
      })
      yield* Effect.provide(Effect.gen(function*() {
        const indexer = yield* Indexer
        expect(yield* indexer.staleWords).toEqual(["eml_w"])
        expect(yield* indexer.staleWordsCount).toBe(1)
        expect(yield* indexer.reword(["eml_w", "eml_gone"])).toBe(1)
        expect(yield* indexer.staleWords).toEqual([])
        const vectors = yield* (yield* Vectors).collection
        expect(yield* vectors.count("usr_w")).toBe(2)
      }), indexerWith(refusing))
      expect(yield* postings).toEqual(now.postings)
      expect(yield* counted).toEqual(now.lexicon)
      const after = yield* documentOf
      expect({ ...after, doc: undefined }).toEqual({ ...now.document, doc: undefined })
      // A new number: every process's postings held in memory see the email's words changed.
      expect(Number(after.doc)).toBeGreaterThan(Number(now.document.doc))
    }))

  // On the live clock: the actor's pass runs in the background.
  it.effect("reads again by itself, once a start, the words an earlier version read differently: no reindex needed", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* accountWithMailbox("u", "upgrader")
      yield* noteIn("u", "eml_u1", "The zeolite catalyst report is attached.")
      yield* noteIn("u", "eml_u2", "Minutes of the zeolite meeting.")
      yield* Effect.provide(Effect.forEach(["eml_u1", "eml_u2"], (id) => Effect.flatMap(Indexer, (indexer) => indexer.index(id))), indexerWith())
      const zeolite = Effect.map(
        sql<{ emailId: string }>`SELECT email_id FROM search_terms WHERE user_id = 'usr_u' AND lexeme = 'zeolit' ORDER BY email_id`,
        (rows) => rows.map((row) => row.emailId)
      )
      const versions = Effect.map(
        sql<{ wordsVersion: number }>`SELECT words_version FROM search_documents WHERE user_id = 'usr_u' ORDER BY email_id`,
        (rows) => rows.map((row) => row.wordsVersion)
      )
      expect(yield* zeolite).toEqual(["eml_u1", "eml_u2"])
      // As a version that did not read that word left them (as round one left the words of attachments).
      yield* sql`DELETE FROM search_terms WHERE user_id = 'usr_u' AND lexeme = 'zeolit'`
      yield* sql`DELETE FROM search_lexicon WHERE user_id = 'usr_u' AND lexeme = 'zeolit'`
      yield* sql`UPDATE search_documents SET words_version = 1 WHERE user_id = 'usr_u'`
      expect(yield* zeolite).toEqual([])

      yield* Effect.scoped(Effect.gen(function*() {
        yield* Layer.build(indexActor(hashedWordsEmbedder("words-v1"), { retryDelay: () => Duration.millis(100), giveUpAfter: 4, stopGrace: Duration.seconds(5) }, Lifecycle.forever))
        yield* Effect.repeat(versions, { until: (now) => now.every((v) => v === WORDS_VERSION), schedule: Schedule.spaced("50 millis") }).pipe(
          Effect.timeout("15 seconds")
        )
      }))
      expect(yield* zeolite).toEqual(["eml_u1", "eml_u2"])
      const counted = yield* sql<{ documents: number }>`SELECT documents FROM search_lexicon WHERE user_id = 'usr_u' AND lexeme = 'catalyst'`
      expect(counted[0]?.documents).toBe(1)
    }).pipe(TestServices.provideLive))

  // On the live clock: the bus's waits between deliveries are real.
  it.effect("gives up on an email that keeps failing alone while other mail is indexed; in an outage it retries everything", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* accountWithMailbox("p", "sender")
      yield* noteIn("p", "eml_poison", "A poison text the embedder refuses.")
      for (const id of ["eml_fine", "eml_later", "eml_outage"]) yield* noteIn("p", id, "An ordinary note.")

      // The embedder refuses any call holding the poison text, after 150 ms (each delivery's work comes on
      // top of the waits between deliveries), and every call while `down`.
      let down = false
      const embedder = Layer.succeed(Embedder, {
        model: "words-poison",
        dimensions: HASHED_DIMENSIONS,
        maxInputChars: 2_000,
        reads: readsAnyText,
        embed: (texts) =>
          Effect.suspend(() =>
            down
              ? Effect.fail(new EmbedderError({ message: "The embedder is down" }))
              : texts.some((text) => text.includes("poison"))
              ? Effect.zipRight(Effect.sleep("150 millis"), Effect.fail(new EmbedderError({ message: "The embedder refused the input" })))
              : Effect.succeed(texts.map(hashedVector))
          )
      })
      // How often the bus handed the indexer an email: the embedder's calls do not tell, as emails
      // indexed at once share a call that is made again an email at a time when refused.
      const handed: Array<BusMessage> = []
      const actor = indexActor(
        embedder,
        { retryDelay: () => Duration.millis(100), giveUpAfter: 4, stopGrace: Duration.seconds(5) },
        Lifecycle.forever,
        recordingBus(handed)
      )
      const indexed = (id: string) => Effect.map(sql`SELECT 1 FROM search_documents WHERE email_id = ${id}`, (rows) => rows.length === 1)
      const deliveriesOf = (id: string) => handed.filter((message) => message.subject === subjects.outboundMail(id)).map((message) => message.deliveryCount)
      const until = <E, R>(check: Effect.Effect<boolean, E, R>) =>
        Effect.repeat(check, { until: (done) => done, schedule: Schedule.spaced("50 millis") }).pipe(Effect.timeout("15 seconds"))

      yield* Effect.scoped(Effect.gen(function*() {
        const context = yield* Layer.build(actor)
        const bus = Context.get(context, Bus)
        const sent = (id: string) => bus.publish(subjects.outboundMail(id), encodeJson({ email_id: id, domain: "example.com" }), { msgId: `job:${id}` })
        const settled = Effect.map(
          bus.lag(sentMailConsumers.index),
          (lag) => Option.exists(lag, ({ inFlight, pending }) => inFlight === 0 && pending === 0)
        )
        // Sent at once: when they share the embedder's call, it is made again an email at a time, so the fine one is indexed at once.
        yield* Effect.all([sent("eml_poison"), sent("eml_fine")], { concurrency: "unbounded" })
        yield* until(indexed("eml_fine"))
        // Mail indexed after the poison's first failure: the indexer works, the poison is given up on its 4th delivery.
        yield* Effect.sleep("150 millis")
        yield* sent("eml_later")
        yield* until(Effect.zipWith(indexed("eml_later"), settled, (a, b) => a && b))
        expect(yield* indexed("eml_poison")).toBe(false)
        expect(deliveriesOf("eml_poison")).toEqual([1, 2, 3, 4])

        // An outage (every call refused): nothing is given up, however often it fails; once it ends, the email is indexed.
        down = true
        yield* sent("eml_outage")
        yield* until(Effect.sync(() => deliveriesOf("eml_outage").length >= 7))
        expect(yield* settled).toBe(false)
        down = false
        yield* until(indexed("eml_outage"))
      }))
      // What it gave up on is what `mailroom reindex` embeds.
      expect(yield* Effect.provide(Effect.flatMap(Indexer, (indexer) => indexer.stale()), indexerWith(hashedWordsEmbedder("words-poison"))))
        .toContain("eml_poison")
    }).pipe(TestServices.provideLive))
  // On the live clock: the grace is a real wait.
  it.effect("stops without waiting for an embedding that does not end: the email is left for the next start, which indexes it", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* accountWithMailbox("s", "stopper")
      yield* noteIn("s", "eml_stop", "A note sent as the worker stops.")
      // The first worker's embedder never answers (a model still loading on a starved core); the next one's does.
      const embedding = yield* Deferred.make<void>()
      const stuck = Layer.succeed(Embedder, {
        model: "words-stop",
        dimensions: HASHED_DIMENSIONS,
        maxInputChars: 2_000,
        reads: readsAnyText,
        embed: () => Effect.zipRight(Deferred.succeed(embedding, undefined), Effect.never)
      })
      const worker = (embedder: Layer.Layer<Embedder>, stopping: Effect.Effect<void>) =>
        indexActor(embedder, { retryDelay: () => Duration.millis(100), giveUpAfter: 4, stopGrace: Duration.millis(300) }, Layer.succeed(Lifecycle, { stopping }))
      const indexed = Effect.map(sql`SELECT 1 FROM search_documents WHERE email_id = 'eml_stop'`, (rows) => rows.length === 1)

      const stop = yield* Deferred.make<void>()
      const stopped = yield* Effect.scoped(Effect.gen(function*() {
        const bus = Context.get(yield* Layer.build(worker(stuck, Deferred.await(stop))), Bus)
        yield* bus.publish(subjects.outboundMail("eml_stop"), encodeJson({ email_id: "eml_stop", domain: "example.com" }), { msgId: "job:eml_stop" })
        yield* Deferred.await(embedding)
        yield* Deferred.succeed(stop, undefined)
        return Date.now()
      }))
      // The scope closed (the consumer drained) soon after the grace, not when the embedding ended (never).
      expect(Date.now() - stopped).toBeLessThan(300 + 3_000)
      expect(yield* indexed).toBe(false)

      yield* Effect.scoped(Effect.gen(function*() {
        yield* Layer.build(worker(hashedWordsEmbedder("words-stop"), Effect.never))
        yield* Effect.repeat(indexed, { until: (done) => done, schedule: Schedule.spaced("50 millis") }).pipe(Effect.timeout("15 seconds"))
      }))
    }).pipe(TestServices.provideLive))
})
