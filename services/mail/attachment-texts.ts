/**
 * Attachments' text (attachment-text.ts says which can be read, and how): one attachment's for the
 * API and MCP, and every readable attachment's of a batch of emails for the search index.
 *
 * A document (PDF, Word) is read by the DocumentReader once per distinct file and reader: its text
 * (or why it has none) is kept in `document_texts` by the file's SHA-256, so the same invoice in a
 * hundred emails, an index pass and a later request all read it once. Text, HTML and email
 * attachments cost little to read and are read where asked.
 */
import { SqlClient, type SqlError, type Statement } from "@effect/sql"
import { Cause, Deferred, Duration, Effect, Either, FiberId, Metric, MetricBoundaries } from "effect"
import { AttachmentUnreadable, NotFound } from "../errors.ts"
import {
  type AttachmentText,
  capText,
  claimsPdf,
  type DocumentFormat,
  DocumentReader,
  type DocumentText,
  DocumentUnreadable,
  formatOf,
  MAX_DOCUMENT_BYTES,
  MAX_TEXT_CHARS,
  mayBeReadable,
  type UnreadableReason
} from "./attachment-text.ts"
import { decodeText } from "./charsets.ts"
import { readHtml } from "./extract/render.ts"
import { firstOf, type ParsedEmail, parseMessage } from "./parse.ts"

/** A document's text as kept, or why it has none. */
interface KeptText {
  readonly format: DocumentFormat
  readonly text: string
  readonly pages: number | null
  readonly truncated: boolean
  readonly reason: Exclude<UnreadableReason, "unsupported_type"> | null
}

/** An attachment, with its document's kept text when there is one. */
interface AttachmentRow {
  readonly emailId: string
  readonly filename: string | null
  readonly contentType: string
  readonly charset: string | null
  readonly size: string | number
  readonly checksum: string
  readonly kept: boolean
  readonly format: DocumentFormat | null
  readonly text: string | null
  readonly pages: number | null
  readonly truncated: boolean | null
  readonly reason: KeptText["reason"]
}

/** How reading an attachment ended: its text and format, or why it has none. */
type Reading = Either.Either<{ readonly format: AttachmentText["format"]; readonly read: DocumentText }, UnreadableReason>

/** Bytes of a text attachment decoded at most: enough for MAX_TEXT_CHARS in any encoding. */
const MAX_TEXT_BYTES = MAX_TEXT_CHARS * 4

/** The text of a text or HTML attachment (documents are the DocumentReader's), its bytes read by `charset` (charsets.ts). */
export const readInline = (format: "text" | "html", charset: string | null, bytes: Uint8Array): DocumentText => {
  const cut = bytes.byteLength > MAX_TEXT_BYTES
  const decoded = decodeText(cut ? bytes.subarray(0, MAX_TEXT_BYTES) : bytes, charset)
  const capped = capText(format === "html" ? readHtml(decoded).text : decoded)
  return { text: capped.text, pages: null, truncated: cut || capped.truncated }
}

/** The fields of a whole attached email a reader is shown before its text, as they are named there. */
const SHOWN_FIELDS = ["From", "To", "Cc", "Date", "Subject"]

/** The text of an email attached whole (format `email`): its shown fields, its attachments' names, then its text. */
const readEmail = (parsed: ParsedEmail): DocumentText => {
  const fields = SHOWN_FIELDS.flatMap((name) => {
    const first = firstOf(parsed.headers, name.toLowerCase())?.trim()
    return first === undefined || first === "" ? [] : [`${name}: ${first}`]
  })
  const files = parsed.attachments.map((attachment) => attachment.filename ?? attachment.contentType)
  const capped = capText([...fields, ...(files.length > 0 ? [`Attachments: ${files.join(", ")}`] : []), "", parsed.text.trimEnd()].join("\n"))
  return { text: capped.text, pages: null, truncated: capped.truncated }
}

const documentReads = Metric.counter("mailroom_document_reads_total", {
  description: "Documents (PDF, Word) the reader was given, by format and outcome (read, or why not)"
})
const documentReadDuration = Metric.histogram(
  "mailroom_document_read_duration_seconds",
  MetricBoundaries.fromIterable([0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20]),
  "How long the reader took for one document, by format, whatever the outcome"
)

/** Count one reading of a `format` document that ended in `outcome` after `elapsed`. */
const countReading = (format: DocumentFormat, outcome: string, elapsed: Duration.Duration) =>
  Effect.zipRight(
    Metric.increment(Metric.tagged(Metric.tagged(documentReads, "format", format), "outcome", outcome)),
    Metric.update(Metric.tagged(documentReadDuration, "format", format), Duration.toSeconds(elapsed))
  )

/** Why an attachment has no text, as a person reads it. */
const unreadableMessage = (reason: UnreadableReason, contentType: string): string => {
  switch (reason) {
    case "unsupported_type":
      return `Attachments of type ${contentType} have no text to read (text, HTML, PDF and Word documents do)`
    case "encrypted":
      return "The document is protected by a password: its text cannot be read"
    case "damaged":
      return "The document is damaged or is not what its type says: its text cannot be read"
    case "too_large":
      return `The document is larger than ${MAX_DOCUMENT_BYTES / 1024 / 1024} MB: its text is not read`
    case "too_complex":
      return "The document needs more time or memory than one reading may take: its text cannot be read"
  }
}

/** Attachments in a batch of emails read for search at most, per email (the rest is left out). */
const MAX_READ_PER_EMAIL = 10

export class AttachmentTexts extends Effect.Service<AttachmentTexts>()("mailroom/AttachmentTexts", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const reader = yield* DocumentReader

    const keptOf = (row: AttachmentRow): KeptText | undefined =>
      row.kept && row.format !== null
        ? { format: row.format, text: row.text ?? "", pages: row.pages, truncated: row.truncated ?? false, reason: row.reason }
        : undefined

    const fromKept = (kept: KeptText): Reading =>
      kept.reason === null
        ? Either.right({ format: kept.format, read: { text: kept.text, pages: kept.pages, truncated: kept.truncated } })
        : Either.left(kept.reason)

    /** Read a document with the DocumentReader and keep what it gave, text or reason. */
    const readDocument = (format: DocumentFormat, checksum: string, bytes: Uint8Array) =>
      Effect.gen(function*() {
        const [elapsed, outcome] = bytes.byteLength > MAX_DOCUMENT_BYTES
          ? [Duration.zero, Either.left(new DocumentUnreadable({ reason: "too_large", message: `Larger than ${MAX_DOCUMENT_BYTES} bytes` }))]
          : yield* Effect.timed(Effect.either(reader.read(format, bytes)))
        yield* countReading(format, Either.isRight(outcome) ? "read" : outcome.left.reason, elapsed)
        const kept: KeptText = Either.match(outcome, {
          onRight: (read) => ({ format, text: read.text, pages: read.pages, truncated: read.truncated, reason: null }),
          onLeft: (unreadable) => ({ format, text: "", pages: null, truncated: false, reason: unreadable.reason })
        })
        if (Either.isLeft(outcome)) {
          yield* Effect.logInfo("A document attachment could not be read", { format, checksum, reason: kept.reason, cause: outcome.left.message })
        }
        yield* sql`
          INSERT INTO document_texts (checksum, format, reader, text, pages, truncated, reason)
          VALUES (${checksum}, ${format}, ${reader.versions[format]}, ${kept.text}, ${kept.pages}, ${kept.truncated}, ${kept.reason})
          ON CONFLICT (checksum) DO UPDATE SET format = EXCLUDED.format, reader = EXCLUDED.reader, text = EXCLUDED.text,
            pages = EXCLUDED.pages, truncated = EXCLUDED.truncated, reason = EXCLUDED.reason, read_at = now()`
        return fromKept(kept)
      })

    /** What a current reader kept for the file `checksum`, if it has been read. */
    const keptNow = (checksum: string) =>
      Effect.map(
        sql<KeptText>`SELECT format, text, pages, truncated, reason FROM document_texts
                      WHERE checksum = ${checksum} AND reader = ANY(${Object.values(reader.versions)}::text[])`,
        (rows) => rows[0]
      )

    /**
     * One reading per file at a time in this process: an agent asking for a new email's PDF while
     * the indexer reads it waits for that reading instead of starting another. A waiter whose
     * reading was given up on (interrupted) reads for itself. A caller that found no text kept may
     * come after a reading has ended (here, or on another node): the kept text is looked for again
     * before the file is read.
     */
    const inFlight = new Map<string, Deferred.Deferred<Reading, SqlError.SqlError>>()
    const readDocumentOnce = (format: DocumentFormat, checksum: string, bytes: Uint8Array): Effect.Effect<Reading, SqlError.SqlError> =>
      Effect.suspend(() => {
        const running = inFlight.get(checksum)
        if (running !== undefined) {
          return Deferred.await(running).pipe(
            Effect.catchAllCause((cause) => (Cause.isInterruptedOnly(cause) ? readDocumentOnce(format, checksum, bytes) : Effect.failCause(cause)))
          )
        }
        const done = Deferred.unsafeMake<Reading, SqlError.SqlError>(FiberId.none)
        inFlight.set(checksum, done)
        return Effect.flatMap(keptNow(checksum), (kept) => (kept !== undefined ? Effect.succeed(fromKept(kept)) : readDocument(format, checksum, bytes))).pipe(
          Effect.onExit((exit) => Effect.zipRight(Effect.sync(() => inFlight.delete(checksum)), Deferred.done(done, exit)))
        )
      })

    /** Read an attachment whose text is not kept, from its bytes. */
    const readBytes = (row: AttachmentRow, bytes: Uint8Array): Effect.Effect<Reading, SqlError.SqlError> => {
      const format = formatOf(row.contentType, row.filename, bytes)
      if (format === undefined) return Effect.succeed(Either.left(claimsPdf(row.contentType, row.filename) ? "damaged" : "unsupported_type"))
      if (format === "pdf" || format === "docx") return readDocumentOnce(format, row.checksum, bytes)
      if (format === "email") return Effect.map(parseMessage(bytes), (parsed) => Either.right({ format, read: readEmail(parsed) }))
      return Effect.succeed(Either.right({ format, read: readInline(format, row.charset, bytes) }))
    }

    /** The bytes of these blobs, by SHA-256. */
    const contents = (checksums: ReadonlyArray<string>) =>
      checksums.length === 0
        ? Effect.succeed(new Map<string, Uint8Array>())
        : Effect.map(
          sql<{ sha256: string; content: Uint8Array }>`SELECT sha256, content FROM blobs WHERE sha256 = ANY(${checksums}::text[])`,
          (rows) => new Map(rows.map((row) => [row.sha256, row.content]))
        )

    /** Attachments `which` picks, with their document's kept text by a current reader. */
    const attachments = (which: Statement.Fragment) =>
      sql<AttachmentRow>`
        SELECT a.email_id, a.filename, a.content_type, a.charset, a.size, a.checksum,
               t.checksum IS NOT NULL AS kept, t.format, t.text, t.pages, t.truncated, t.reason
        FROM attachments a
        LEFT JOIN document_texts t ON t.checksum = a.checksum AND t.reader = ANY(${Object.values(reader.versions)}::text[])
        WHERE ${which}
        ORDER BY a.email_id, a.position`

    /** One attachment's text; 404 when it is not the caller's, 422 when it has none. */
    const read = Effect.fn("AttachmentTexts.read")(function*(userId: string, emailId: string, attachmentId: string) {
      const rows = yield* attachments(sql`a.id = ${attachmentId} AND a.email_id = ${emailId} AND EXISTS (
        SELECT 1 FROM emails e JOIN mailboxes m ON m.id = e.mailbox_id AND m.status = 'active'
        WHERE e.id = a.email_id AND e.user_id = ${userId})`)
      const row = rows[0]
      if (row === undefined) {
        return yield* new NotFound({ message: "Attachment not found", details: { email_id: emailId, attachment_id: attachmentId } })
      }
      const kept = keptOf(row)
      const reading = kept !== undefined
        ? fromKept(kept)
        : yield* Effect.flatMap(contents([row.checksum]), (bytes) => readBytes(row, bytes.get(row.checksum) ?? new Uint8Array()))
      if (Either.isLeft(reading)) {
        return yield* new AttachmentUnreadable({
          message: unreadableMessage(reading.left, row.contentType),
          details: { email_id: emailId, attachment_id: attachmentId, content_type: row.contentType, reason: reading.left }
        })
      }
      const { format, read: { pages, text, truncated } } = reading.right
      return {
        attachment_id: attachmentId,
        filename: row.filename,
        content_type: row.contentType,
        size: Number(row.size),
        format,
        text,
        characters: text.length,
        pages,
        truncated
      } satisfies AttachmentText
    })

    /**
     * The text of every readable attachment of these emails, by email, in their order in each (at
     * most MAX_READ_PER_EMAIL each): what search indexes beside the body. Documents not read before
     * are read now, one at a time, and kept.
     */
    const ofEmails = (emailIds: ReadonlyArray<string>) =>
      Effect.gen(function*() {
        const rows = yield* attachments(sql`a.email_id = ANY(${emailIds}::text[])`)
        const perEmail = new Map<string, number>()
        const wanted = rows.filter((row) => {
          if (row.kept ? row.reason !== null : !mayBeReadable(row.contentType, row.filename) || Number(row.size) > MAX_DOCUMENT_BYTES) return false
          const n = (perEmail.get(row.emailId) ?? 0) + 1
          perEmail.set(row.emailId, n)
          return n <= MAX_READ_PER_EMAIL
        })
        const bytes = yield* contents([...new Set(wanted.filter((row) => !row.kept).map((row) => row.checksum))])
        const texts = new Map<string, Array<string>>()
        // The same file twice in the batch is read once. inFlight only joins readings under way; once
        // this batch's first reading of a file has ended it is gone from there, and its text is not
        // in this batch's rows (read before it was kept), so the batch keeps what it read itself.
        const readings = new Map<string, Reading>()
        for (const row of wanted) {
          const kept = keptOf(row)
          const reading = kept !== undefined
            ? fromKept(kept)
            : readings.get(`${row.checksum} ${row.contentType} ${row.charset}`) ?? (yield* readBytes(row, bytes.get(row.checksum) ?? new Uint8Array()))
          readings.set(`${row.checksum} ${row.contentType} ${row.charset}`, reading)
          if (Either.isRight(reading)) texts.set(row.emailId, [...(texts.get(row.emailId) ?? []), reading.right.read.text])
        }
        return texts
      })

    return { read, ofEmails } as const
  })
}) {}
