/**
 * The ingest actor (worker role): turns each accepted message on the bus into a stored email, then
 * announces it (`email.received`).
 *
 * Idempotent: the email's id was chosen when the message was accepted, so a redelivered message
 * (a worker that died before acknowledging, a publish retried) finds its email already stored and
 * only announces it again, under the same event id.
 */
import { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Duration, Effect, Layer, Schema } from "effect"
import { newId } from "../accounts/tokens.ts"
import { inLockOrder } from "../batching.ts"
import { Bus, type BusError, type BusMessage, decodeJson, encodeJson, subjects } from "../bus/bus.ts"
import { measured } from "../bus/metrics.ts"
import { inboundLabels } from "./label-rules.ts"
import { type ParsedEmail, parseMessage } from "./parse.ts"
import { emailColumnList, type EmailRow, toFields } from "./records.ts"
import { InboundMessage } from "./schemas.ts"
import { StageLimits } from "../stage-limits.ts"
import { threadChoice } from "./threads.ts"

export const emailReceivedEventId = (emailId: string) => `email.received:${emailId}`

export class Ingest extends Effect.Service<Ingest>()("mailroom/Ingest", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const bus = yield* Bus

    const findEmail = (emailId: string) =>
      sql<EmailRow>`SELECT ${sql.literal(emailColumnList)} FROM emails e WHERE e.id = ${emailId}`.pipe(
        Effect.map((rows) => rows[0])
      )

    const announce = (row: EmailRow) =>
      bus.publish(
        subjects.event("email.received"),
        encodeJson({ event: "email.received", timestamp: row.createdAt.toISOString(), namespace: row.userId, data: toFields(row) }),
        { msgId: emailReceivedEventId(row.id) }
      )

    /**
     * Store the email, its attachments and its storage usage in one statement (atomic, one round
     * trip), choosing its thread in the same statement (threads.ts). Returns the stored row: the new
     * one, or the one a previous delivery stored.
     */
    const store = (message: InboundMessage, parsed: ParsedEmail, messageId: string) =>
      Effect.gen(function*() {
        const receivedAt = new Date(message.received_at)
        const thread = threadChoice(message.mailbox_id, parsed, messageId)
        // Each distinct content once, in lock order: concurrent ingests may store the same attachment.
        const contents = inLockOrder(new Map(parsed.attachments.map((a) => [a.checksum, a])))
        // Attachment rows of a redelivered message exist already: (email_id, position) keeps them once.
        const attachments = parsed.attachments.length === 0 ? sql`` : sql`,
          attachment_blobs AS (
            INSERT INTO blobs ${sql.insert(contents.map((a) => ({ sha256: a.checksum, size: a.size, content: a.content })))}
            ON CONFLICT (sha256) DO UPDATE SET created_at = now()
          ),
          attachment_rows AS (
            INSERT INTO attachments ${
          sql.insert(parsed.attachments.map((a, position) => ({
            id: newId("att"),
            emailId: message.email_id,
            position,
            filename: a.filename,
            contentType: a.contentType,
            size: a.size,
            checksum: a.checksum,
            contentId: a.contentId
          })))
        }
            ON CONFLICT (email_id, position) DO NOTHING
          )`
        const inserted = yield* sql<EmailRow>`
          WITH thread AS (
            SELECT coalesce(
              (SELECT t.thread_id FROM emails t
               WHERE t.mailbox_id = ${message.mailbox_id} AND t.message_id = ANY(${thread.referenced}::text[])
               ORDER BY t.received_at DESC LIMIT 1),
              (SELECT ${thread.own}::text WHERE EXISTS (
                 SELECT 1 FROM emails t WHERE t.mailbox_id = ${message.mailbox_id} AND t.thread_id = ${thread.own}::text)),
              ${thread.fallback}::text
            ) AS id
          ),
          email AS (
            INSERT INTO emails AS e (id, mailbox_id, user_id, message_id, thread_id, subject, from_address, to_addresses,
                                     sent_at, received_at, mail_from, rcpt_to, headers, text_body, html_body,
                                     has_attachments, raw_sha256, size, labels)
            VALUES (${message.email_id}, ${message.mailbox_id}, ${message.user_id}, ${messageId}, (SELECT id FROM thread),
                    ${parsed.subject}, ${parsed.from ?? message.mail_from},
                    ${parsed.to.length > 0 ? [...parsed.to] : [message.rcpt_to]}, ${parsed.date ?? receivedAt}, ${receivedAt},
                    ${message.mail_from}, ${message.rcpt_to},
                    -- A jsonb column: PostgreSQL reads the JSON text as the column's type.
                    ${JSON.stringify(parsed.headers)}, ${parsed.text}, ${parsed.html}, ${parsed.attachments.length > 0},
                    ${message.raw_sha256}, ${message.size}, ${[...inboundLabels]}::text[])
            ON CONFLICT (id) DO NOTHING
            RETURNING ${sql.literal(emailColumnList)}
          ),
          storage AS (
            INSERT INTO storage_usage (user_id, bytes) SELECT user_id, size FROM email
            ON CONFLICT (user_id) DO UPDATE SET bytes = storage_usage.bytes + EXCLUDED.bytes
          )${attachments}
          SELECT * FROM email`
        // Stored by an earlier delivery of the same message: that row is the email.
        return inserted[0] ?? (yield* findEmail(message.email_id))
      })

    /**
     * Store `message` as an email (once) and announce it. Untraced: it runs for every message, and
     * a traced Effect.fn captures a stack trace per call.
     */
    const ingest = Effect.fnUntraced(function*(message: InboundMessage, firstDelivery: boolean) {
      // A redelivery usually finds its email stored: announce it again without parsing anything.
      if (!firstDelivery) {
        const existing = yield* findEmail(message.email_id)
        if (existing) return yield* announce(existing)
      }
      const blob = yield* sql<{ content: Uint8Array }>`SELECT content FROM blobs WHERE sha256 = ${message.raw_sha256}`
      const raw = blob[0]?.content
      if (raw === undefined) {
        // Cannot happen while blobs outlive the bus's retention; nothing could be done about it.
        return yield* Effect.logError("An accepted message's raw bytes are missing; it cannot be ingested", {
          emailId: message.email_id,
          sha256: message.raw_sha256
        })
      }
      const parsed = yield* parseMessage(raw)
      const messageId = parsed.messageId ?? `<${message.email_id}@mailroom.invalid>`
      const stored = yield* store(message, parsed, messageId)
      if (stored) yield* announce(stored)
      yield* Effect.logInfo("Email delivered to its mailbox").pipe(Effect.annotateLogs({
        email_id: message.email_id,
        mailbox_id: message.mailbox_id,
        size: message.size,
        attachments: parsed.attachments.length
      }))
    })

    /** The bus handler: a payload that is not an inbound message is logged and dropped, never retried. */
    const handle = (message: BusMessage): Effect.Effect<void, SqlError | BusError> =>
      Effect.try(() => decodeJson(message.data)).pipe(
        Effect.flatMap(Schema.decodeUnknown(InboundMessage)),
        Effect.matchEffect({
          onFailure: (error) => Effect.logError("Dropping a malformed inbound message", { subject: message.subject, error }),
          onSuccess: (inbound) => ingest(inbound, message.deliveryCount === 1)
        })
      )

    return { ingest, handle } as const
  })
}) {}

/** The ingest actor: consumes `mail.inbound.>` while the worker runs. */
export const IngestLive = Layer.scopedDiscard(
  Effect.gen(function*() {
    const bus = yield* Bus
    const { handle } = yield* Ingest
    // Messages parsed at once: parsing is CPU, storing waits on the database (stage-limits.ts).
    const { ingest: concurrency } = yield* StageLimits
    yield* bus.consume(measured({
      name: "ingest",
      stream: "mail",
      filter: subjects.allInboundMail,
      concurrency,
      // A crashed worker's messages come back after this; a long parse keeps its message with progress signals.
      ackWait: Duration.seconds(20),
      handler: handle
    }))
  })
).pipe(Layer.provide(Ingest.Default))
