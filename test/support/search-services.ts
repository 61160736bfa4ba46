/**
 * Search's services over the suite's migrated database for in-process suites: a small deterministic
 * embedder (a bag of hashed words: texts sharing words get similar vectors) and pgvector in the test
 * database when it has the extension (PGlite does), else in a PGlite beside it. What such suites test
 * is the SQL and the bookkeeping, not the model.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Layer } from "effect"
import * as DocumentReader from "../../layers/document-reader.ts"
import * as PgvectorIndex from "../../layers/pgvector-index.ts"
import * as WordNet from "../../layers/wordnet.ts"
import { Embedder, normalize, readsAnyText } from "../../services/search/embedder.ts"
import { Indexer } from "../../services/search/indexer.ts"
import { Ranker } from "../../services/search/ranker.ts"
import { Vectors } from "../../services/search/vectors.ts"
import { TestDataDir } from "./database.ts"
import { storeBlob } from "./seed-mail.ts"
import { hashedWords } from "./fake-openai.ts"
import { testPgliteSharedBuffers } from "./services.ts"

export const HASHED_DIMENSIONS = 32

/** The hashed-words vector of `text`, as the embedder below makes it. */
export const hashedVector = (text: string) => normalize(Float32Array.from(hashedWords(text, HASHED_DIMENSIONS)))

export const hashedWordsEmbedder = (model: string) =>
  Layer.succeed(Embedder, {
    model,
    dimensions: HASHED_DIMENSIONS,
    maxInputChars: 2_000,
    reads: readsAnyText,
    embed: (texts) => Effect.succeed(texts.map(hashedVector))
  })

export const testVectorIndex = Layer.unwrapEffect(
  Effect.map(TestDataDir, (dataDir) => PgvectorIndex.autoLayer({ dataDir, embedded: "allow", sharedBuffers: testPgliteSharedBuffers }))
)

/** The indexer, with its Vectors, over `embedder` (the hashed-words one by default). */
export const indexerWith = (embedder: Layer.Layer<Embedder> = hashedWordsEmbedder("words-v1")) =>
  Indexer.Default.pipe(Layer.provideMerge(Vectors.Default), Layer.provide(Layer.mergeAll(embedder, testVectorIndex, DocumentReader.layer)))

/** The ranker and the indexer sharing one Vectors, over the hashed-words embedder; WordNet's thesaurus. */
export const rankerAndIndexer = Layer.merge(Ranker.Default, Indexer.Default).pipe(
  Layer.provideMerge(Vectors.Default),
  Layer.provide(Layer.mergeAll(hashedWordsEmbedder("words-v1"), testVectorIndex, WordNet.layer, DocumentReader.layer))
)

/**
 * Mail on topics no suite asks about (`eml_4` to `eml_9`), beside a suite's own: enough emails that
 * a word of two or three of the suite's is not dropped as common (in over a third of the mail).
 */
export const otherTopics = [
  ["eml_4", "Lunch on Friday", "Shall we have lunch together on Friday at noon?"],
  ["eml_5", "Invoice 42", "Please pay invoice 42 by the end of the month."],
  ["eml_6", "Team offsite", "The agenda for the team offsite in October."],
  ["eml_7", "Password reset", "Click the link to reset your password."],
  ["eml_8", "Flight confirmed", "Your flight to Lisbon leaves at seven."],
  ["eml_9", "Newsletter", "Product news and hiring updates for the quarter."]
] as const

/** A text attachment of an email in `indexedMail`, read as the indexer reads one. */
export interface TextAttachment {
  readonly filename: string
  readonly contentType: string
  readonly text: string
}

/**
 * One user (`usr_1`) with one mailbox (`mbx_1`) holding `mail` (id, subject, body, and its sender,
 * x@example.com unless given) and, by email id, its `attachments`, each email indexed: the
 * collection an in-process ranking suite asks its questions of.
 */
export const indexedMail = (
  mail: ReadonlyArray<readonly [id: string, subject: string, body: string, from?: string]>,
  attachments: Readonly<Record<string, ReadonlyArray<TextAttachment>>> = {}
) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`INSERT INTO users (id, email, email_normalized, name, password_hash) VALUES ('usr_1', 'a@example.com', 'a@example.com', 'A', 'x')`
    yield* sql`INSERT INTO mailboxes (id, user_id, local_part, domain, address_normalized)
               VALUES ('mbx_1', 'usr_1', 'ops', 'agents.localhost', 'ops@agents.localhost')`
    yield* sql`INSERT INTO blobs (sha256, size, content) VALUES (${"0".repeat(64)}, 1, ${new Uint8Array([1])})`
    for (const [id, subject, text, from = "x@example.com"] of mail) {
      yield* sql`INSERT INTO emails (id, mailbox_id, user_id, message_id, thread_id, subject, from_address, to_addresses, sent_at,
                                     received_at, mail_from, rcpt_to, headers, text_body, has_attachments, raw_sha256, size)
                 VALUES (${id}, 'mbx_1', 'usr_1', ${`<${id}@test>`}, ${id}, ${subject}, ${from}, ${["y@example.com"]}, now(),
                         now(), ${from}, 'y@example.com', '{}', ${text}, ${(attachments[id] ?? []).length > 0}, ${"0".repeat(64)}, 1)`
      for (const [position, attachment] of (attachments[id] ?? []).entries()) {
        const bytes = new TextEncoder().encode(attachment.text)
        const checksum = yield* storeBlob(bytes)
        yield* sql`INSERT INTO attachments (id, email_id, position, filename, content_type, size, checksum)
                   VALUES (${`att_${id}_${position}`}, ${id}, ${position}, ${attachment.filename}, ${attachment.contentType}, ${bytes.length}, ${checksum})`
      }
    }
    const indexer = yield* Indexer
    for (const [id] of mail) yield* indexer.index(id)
  })
