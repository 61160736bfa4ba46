/**
 * The index actor (worker role): makes each received email searchable, by meaning and by words,
 * then announces it (`email.processed`).
 *
 * For every `email.received` it embeds the email's text (subject, body and plain-text attachments,
 * in chunks), stores the vectors in the vector index, then writes the email's full-text document
 * and the model it was embedded with (`search_documents`). Only then is the bus message
 * acknowledged, so a worker that dies part-way leaves the event to be handled again.
 *
 * Idempotent: vectors are keyed by (email, chunk), the document by email, and the announcement's
 * event id is the email's; an email already indexed with the current model is only announced again.
 */
import { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Duration, Effect, Layer, Schema } from "effect"
import { Bus, type BusError, type BusMessage, decodeJson, encodeJson, subjects } from "../bus/bus.ts"
import { EmailFields } from "../mail/schemas.ts"
import { chunkText, MAX_ATTACHMENT_BYTES, searchableBody, wordCount } from "./documents.ts"
import { capInput, type EmbedderError } from "./embedder.ts"
import type { VectorIndexError } from "./vector-index.ts"
import { Vectors } from "./vectors.ts"

/** Emails indexed at once by one worker process; the embedder's threads do the heavy part. */
const CONCURRENCY = 8

export const emailProcessedEventId = (emailId: string) => `email.processed:${emailId}`

const ReceivedEvent = Schema.Struct({
  event: Schema.Literal("email.received"),
  namespace: Schema.String,
  data: EmailFields
})

interface EmailToIndex {
  readonly userId: string
  readonly mailboxId: string
  readonly domain: string
  readonly active: boolean
  readonly subject: string
  readonly textBody: string
  readonly sentAt: Date
  readonly model: string | null
  readonly processingMs: number | null
}

export type IndexOutcome = "indexed" | "already-indexed" | "gone"

export class Indexer extends Effect.Service<Indexer>()("mailroom/Indexer", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const bus = yield* Bus
    const vectors = yield* Vectors
    const { embedder } = vectors

    const load = (emailId: string) =>
      sql<EmailToIndex>`
        SELECT e.user_id, e.mailbox_id, m.domain, m.status = 'active' AS active, e.subject, e.text_body, e.sent_at,
               d.model, d.processing_ms
        FROM emails e
        JOIN mailboxes m ON m.id = e.mailbox_id
        LEFT JOIN search_documents d ON d.email_id = e.id
        WHERE e.id = ${emailId}`.pipe(Effect.map((rows) => rows[0]))

    const plainTextAttachments = (emailId: string) =>
      sql<{ content: Uint8Array }>`
        SELECT b.content FROM attachments a JOIN blobs b ON b.sha256 = a.checksum
        WHERE a.email_id = ${emailId} AND a.content_type LIKE 'text/plain%' AND a.size <= ${MAX_ATTACHMENT_BYTES}
        ORDER BY a.position`.pipe(
        Effect.map((rows) => rows.map((row) => new TextDecoder().decode(row.content)))
      )

    /**
     * Embed and store one email with the current model. Answers how long that took, or nothing
     * when there is nothing to index (the email is gone, or its mailbox was deleted).
     */
    const index = Effect.fn("Indexer.index")(function*(emailId: string) {
      const email = yield* load(emailId)
      if (!email || !email.active) return { outcome: "gone" as const }
      if (email.model === embedder.model) return { outcome: "already-indexed" as const, processingMs: email.processingMs ?? 0 }
      const started = Date.now()
      const body = searchableBody(email.textBody, yield* plainTextAttachments(emailId))
      const chunks = chunkText(email.subject, body)
      const embedded = yield* embedder.embed(chunks.map((chunk) => capInput(chunk, embedder.maxInputChars)))
      const collection = yield* vectors.collection
      yield* collection.upsert(embedded.map((vector, chunk) => ({
        emailId,
        chunk,
        namespace: email.userId,
        mailboxId: email.mailboxId,
        domain: email.domain,
        date: email.sentAt,
        vector
      })))
      const processingMs = Date.now() - started
      yield* sql`
        INSERT INTO search_documents (email_id, user_id, mailbox_id, model, chunks, document, length, processing_ms)
        VALUES (${emailId}, ${email.userId}, ${email.mailboxId}, ${embedder.model}, ${chunks.length},
                setweight(to_tsvector('english', ${email.subject}), 'A') || setweight(to_tsvector('english', ${body}), 'B'),
                ${wordCount(email.subject) + wordCount(body)}, ${processingMs})
        ON CONFLICT (email_id) DO UPDATE SET model = EXCLUDED.model, chunks = EXCLUDED.chunks, document = EXCLUDED.document,
          length = EXCLUDED.length, processing_ms = EXCLUDED.processing_ms, indexed_at = now()`
      return { outcome: "indexed" as const, processingMs }
    })

    const announce = (event: typeof ReceivedEvent.Type, processingMs: number) =>
      bus.publish(
        subjects.event("email.processed"),
        encodeJson({
          event: "email.processed",
          timestamp: new Date().toISOString(),
          namespace: event.namespace,
          data: { ...event.data, embedding_model: embedder.model, processing_ms: processingMs }
        }),
        { msgId: emailProcessedEventId(event.data.email_id) }
      )

    /** The bus handler: index, then announce; an event that is not an email.received is dropped. */
    const handle = (message: BusMessage): Effect.Effect<void, SqlError | BusError | EmbedderError | VectorIndexError> =>
      Effect.try(() => decodeJson(message.data)).pipe(
        Effect.flatMap(Schema.decodeUnknown(ReceivedEvent)),
        Effect.matchEffect({
          onFailure: (error) => Effect.logError("Dropping a malformed email.received event", { subject: message.subject, error }),
          onSuccess: (event) =>
            Effect.flatMap(index(event.data.email_id), (result) =>
              result.outcome === "gone" ? Effect.void : announce(event, result.processingMs))
        })
      )

    return { index, handle } as const
  })
}) {}

/** The index actor: consumes `events.email.received` while the worker runs. */
export const IndexerLive = Layer.scopedDiscard(
  Effect.gen(function*() {
    const bus = yield* Bus
    const { handle } = yield* Indexer
    yield* bus.consume({
      name: "index",
      stream: "events",
      filter: subjects.event("email.received"),
      concurrency: CONCURRENCY,
      // Embedding a long email behind a queue of others takes seconds, not minutes.
      ackWait: Duration.seconds(60),
      handler: (message) =>
        handle(message).pipe(
          Effect.tapError((error) => Effect.logWarning("Indexing failed; the event comes back", { subject: message.subject, error: error.message }))
        )
    })
  })
).pipe(Layer.provide(Indexer.Default))
