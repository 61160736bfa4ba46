/**
 * An email's search document as both index stages store it (issue 18): its words, then its vectors.
 *
 * - The words stage (word-indexer.ts) stores the document with its postings and lexicon counts and
 *   no model, at ingest's pace: the email is found by its words at once, whatever the embedder's
 *   backlog.
 * - The index stage (indexer.ts) embeds the email, stores its vectors, then names the model on the
 *   document. If the words stage has not been there (it gave up, or the email is indexed afresh), the
 *   index stage stores the words itself, in the same statement.
 *
 * Either order, and either stage twice, counts an email's words once: the document's first writer
 * stores its postings; a later one only names the model (or, without one, changes nothing).
 */
import type { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { fromNameColumns, fromNameOf, type HeaderValue } from "../mail/records.ts"
import { chunkText, indexedWords, searchableBody, searchableText, senderText, SUBJECT_BOOST, wordCount, WORDS_VERSION } from "./documents.ts"

export interface EmailToIndex {
  readonly userId: string
  readonly mailboxId: string
  readonly domain: string
  readonly active: boolean
  readonly subject: string
  readonly textBody: string
  readonly sentAt: Date
  readonly fromAddress: string
  /** The From's display name (`fromNameOf`: the column, or for older mail its stored header). */
  readonly fromName: string | null
  readonly fromHeader: HeaderValue | null
  readonly receivedAt: Date
  /** Whether it has a document: its words are indexed (by either stage). */
  readonly documented: boolean
  /** Its document's: the model its vectors were made with (null: words only, so far), how many, and how long that took. */
  readonly model: string | null
  readonly chunks: number | null
  readonly processingMs: number | null
}

/** An email's searchable text, made ready for its vectors and its document. */
export interface Document {
  readonly emailId: string
  readonly email: EmailToIndex
  /** Its subject, body and sender as their words are indexed (documents.ts `wordForm`, `senderText`). */
  readonly words: { readonly subject: string; readonly body: string; readonly sender: string }
  readonly chunks: ReadonlyArray<string>
  readonly length: number
}

/** A document as it is stored: the email's words, and what its vectors were made with (null: none yet). */
export interface DocumentRow {
  readonly document: Document
  readonly model: string | null
  readonly chunks: number
  readonly processingMs: number
}

/** The emails to index, by id (a missing one is gone), with their documents' state. */
export const loadEmails = (sql: SqlClient.SqlClient, emailIds: ReadonlyArray<string>) =>
  sql<EmailToIndex & { readonly id: string }>`
    SELECT e.id, e.user_id, e.mailbox_id, m.domain, m.status = 'active' AS active, e.subject, e.text_body, e.sent_at,
           e.from_address, ${sql.literal(fromNameColumns)}, e.received_at, d.email_id IS NOT NULL AS documented,
           d.model, d.chunks, d.processing_ms
    FROM emails e
    JOIN mailboxes m ON m.id = e.mailbox_id
    LEFT JOIN search_documents d ON d.email_id = e.id
    WHERE e.id = ANY(${emailIds}::text[])`.pipe(Effect.map((rows) => new Map(rows.map((row) => [row.id, row]))))

/** `email`'s document, its attachments' texts read (`attachments`). */
export const documentOf = (emailId: string, email: EmailToIndex, attachments: ReadonlyArray<string>): Document => {
  const body = searchableBody(email.textBody, attachments)
  const subject = searchableText(email.subject)
  const words = indexedWords(subject, body, senderText(fromNameOf(email), email.fromAddress))
  // The length BM25 normalises by is the subject's and the body's: the sender's words leave it as it was.
  return { emailId, email, words, chunks: chunkText(subject, body), length: wordCount(words.subject) + wordCount(words.body) }
}

/**
 * The documents, their postings and the lexicon's counts, for every email of a batch in one
 * statement, their words read by this version (WORDS_VERSION): a subject word counts
 * SUBJECT_BOOST times, a body or sender word once. A document seen before keeps its postings, and
 * the version that read them, and is counted in the lexicon once: a row with a model names it on
 * the document (its vectors are stored: a new model, or the words stage was there first); a row
 * without one leaves the document as it is. Rows are written in key order (documents by email, the
 * lexicon by namespace and lexeme), so that concurrent batches lock shared rows in one order.
 */
export const storeDocuments = (sql: SqlClient.SqlClient, rows: ReadonlyArray<DocumentRow>) => {
  const column = <A>(f: (row: DocumentRow) => A) => rows.map(f)
  return sql`
    WITH input AS (
      SELECT * FROM unnest(${column((r) => r.document.emailId)}::text[], ${column((r) => r.document.email.userId)}::text[],
                           ${column((r) => r.document.email.mailboxId)}::text[], ${column((r) => r.model)}::text[],
                           ${column((r) => r.chunks)}::int[], ${column((r) => r.processingMs)}::int[],
                           ${column((r) => r.document.length)}::int[], ${column((r) => r.document.words.subject)}::text[],
                           ${column((r) => r.document.words.body)}::text[], ${column((r) => r.document.words.sender)}::text[])
        AS i (email_id, user_id, mailbox_id, model, chunks, processing_ms, length, subject, body, sender)
    ),
    document AS (
      INSERT INTO search_documents AS d (email_id, user_id, mailbox_id, model, chunks, length, processing_ms, words_version)
      SELECT email_id, user_id, mailbox_id, model, chunks, length, processing_ms, ${WORDS_VERSION} FROM input ORDER BY email_id
      ON CONFLICT (email_id) DO UPDATE SET model = EXCLUDED.model, chunks = EXCLUDED.chunks,
        processing_ms = EXCLUDED.processing_ms, indexed_at = now()
        WHERE EXCLUDED.model IS NOT NULL
      RETURNING d.email_id, d.doc, (xmax = 0) AS fresh
    ),
    lexemes AS (
      SELECT i.email_id, d.doc, i.user_id, i.mailbox_id, i.length, u.lexeme,
             (cardinality(u.positions) + ${sql.literal(String(SUBJECT_BOOST - 1))} *
               (SELECT count(*) FROM unnest(u.weights) AS w WHERE w = 'A'))::real AS frequency
      FROM input i JOIN document d ON d.email_id = i.email_id AND d.fresh
      CROSS JOIN LATERAL unnest(setweight(to_tsvector('english', i.subject), 'A') || setweight(to_tsvector('english', i.body), 'B') ||
                                setweight(to_tsvector('english', i.sender), 'C'))
        AS u (lexeme, positions, weights)
    ),
    postings AS (
      INSERT INTO search_terms (user_id, lexeme, email_id, doc, mailbox_id, frequency, length)
      SELECT user_id, lexeme, email_id, doc, mailbox_id, frequency, length FROM lexemes
      ON CONFLICT DO NOTHING
    )
    INSERT INTO search_lexicon AS l (user_id, lexeme, documents)
    SELECT user_id, lexeme, count(*) FROM lexemes GROUP BY user_id, lexeme ORDER BY user_id, lexeme
    ON CONFLICT (user_id, lexeme) DO UPDATE SET documents = l.documents + EXCLUDED.documents`
}
