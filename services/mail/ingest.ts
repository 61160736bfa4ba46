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
import { Bus, type BusError, type BusMessage, decodeJson, encodeJson, subjects } from "../bus/bus.ts"
import { type ParsedEmail, parseMessage } from "./parse.ts"
import { emailColumnList, type EmailRow, toFields } from "./records.ts"
import { InboundMessage } from "./schemas.ts"
import { fallbackKey, referencedIds, threadId } from "./threads.ts"

/** Messages one worker process parses at once. Parsing is CPU; storing waits on the database. */
const CONCURRENCY = 8

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

    /** The thread `parsed` joins in `mailboxId` (see threads.ts). */
    const threadOf = (mailboxId: string, parsed: ParsedEmail, messageId: string) =>
      Effect.gen(function*() {
        const referenced = referencedIds(parsed.references, parsed.inReplyTo)
        if (referenced.length > 0) {
          const known = yield* sql<{ threadId: string }>`
            SELECT thread_id FROM emails WHERE mailbox_id = ${mailboxId} AND message_id = ANY(${referenced}::text[])
            ORDER BY received_at DESC LIMIT 1`
          if (known[0]) return known[0].threadId
        } else {
          // Replies to this message may have arrived before it.
          const own = threadId(mailboxId, { kind: "conversation", rootMessageId: messageId })
          const answered = yield* sql`SELECT 1 FROM emails WHERE mailbox_id = ${mailboxId} AND thread_id = ${own} LIMIT 1`
          if (answered.length > 0) return own
        }
        return threadId(mailboxId, fallbackKey(referenced, parsed.subject, messageId))
      })

    /**
     * Store the email, its attachments and its storage usage in one statement (atomic, one round
     * trip). Returns the stored row: the new one, or the one a previous delivery stored.
     */
    const store = (message: InboundMessage, parsed: ParsedEmail, thread: string, messageId: string) =>
      Effect.gen(function*() {
        const receivedAt = new Date(message.received_at)
        const email = sql.insert({
          id: message.email_id,
          mailboxId: message.mailbox_id,
          userId: message.user_id,
          messageId,
          threadId: thread,
          subject: parsed.subject,
          fromAddress: parsed.from ?? message.mail_from,
          toAddresses: parsed.to.length > 0 ? [...parsed.to] : [message.rcpt_to],
          sentAt: parsed.date ?? receivedAt,
          receivedAt,
          mailFrom: message.mail_from,
          rcptTo: message.rcpt_to,
          // A jsonb column: PostgreSQL reads the JSON text as the column's type.
          headers: JSON.stringify(parsed.headers),
          textBody: parsed.text,
          htmlBody: parsed.html,
          hasAttachments: parsed.attachments.length > 0,
          rawSha256: message.raw_sha256,
          size: message.size
        })
        // Sorted, so that concurrent ingests take the blob rows' locks in one order (no deadlock).
        const contents = [...new Map(parsed.attachments.map((a) => [a.checksum, a])).values()].sort((a, b) => (a.checksum < b.checksum ? -1 : 1))
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
          WITH email AS (
            INSERT INTO emails AS e ${email} ON CONFLICT (id) DO NOTHING
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
      if (!blob[0]) {
        // Cannot happen while blobs outlive the bus's retention; nothing could be done about it.
        return yield* Effect.logError("An accepted message's raw bytes are missing; it cannot be ingested", {
          emailId: message.email_id,
          sha256: message.raw_sha256
        })
      }
      const parsed = yield* parseMessage(blob[0].content)
      const messageId = parsed.messageId ?? `<${message.email_id}@mailroom.invalid>`
      const thread = yield* threadOf(message.mailbox_id, parsed, messageId)
      const stored = yield* store(message, parsed, thread, messageId)
      if (stored) yield* announce(stored)
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
    yield* bus.consume({
      name: "ingest",
      stream: "mail",
      filter: subjects.allInboundMail,
      concurrency: CONCURRENCY,
      // A crashed worker's messages come back after this; a long parse keeps its message with progress signals.
      ackWait: Duration.seconds(20),
      handler: handle
    })
  })
).pipe(Layer.provide(Ingest.Default))
