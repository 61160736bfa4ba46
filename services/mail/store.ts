/**
 * Storing an email: the one statement that writes an email row, its attachments (their bytes once,
 * content-addressed) and its storage usage, and picks its thread, for mail received (the ingest
 * actor) and mail sent (outbound) alike. The raw message's blob must be stored already.
 */
import type { SqlClient, Statement } from "@effect/sql"
import { Effect } from "effect"
import { newId } from "../accounts/tokens.ts"
import { inLockOrder } from "../batching.ts"
import type { ParsedEmail } from "./parse.ts"
import { emailColumnList, type EmailRow } from "./records.ts"
import type { Authentication } from "./authentication.ts"
import type { Spam } from "./spam.ts"
import type { Extracted } from "./extract.ts"
import type { Direction } from "./schemas.ts"
import { threadChoice } from "./threads.ts"
import { BLOCKED } from "./sender-list-rules.ts"

export interface NewEmail {
  readonly emailId: string
  readonly mailboxId: string
  readonly userId: string
  readonly direction: Direction
  readonly labels: ReadonlyArray<string>
  /** The stored raw message. */
  readonly rawSha256: string
  readonly size: number
  /** The envelope: MAIL FROM, and the mailbox address the email belongs to. */
  readonly mailFrom: string
  readonly rcptTo: string
  readonly receivedAt: Date
  readonly messageId: string
  readonly parsed: ParsedEmail
  /** Inbound mail: the SMTP node's verdicts (authentication.ts). */
  readonly authentication?: Authentication | undefined
  readonly authenticationResults?: string | undefined
  /** Inbound mail with RSPAMD_URL set: rspamd's verdict (spam.ts). */
  readonly spam?: Spam | undefined
  /** Inbound mail: its reply text, codes and links (extract.ts). */
  readonly extracted?: Extracted | undefined
  /**
   * Inbound mail: the forms of its header From (sender-list-rules.ts `senderForms`). When an entry
   * of the account's or the mailbox's block list names one, the email is labelled `blocked`: decided
   * in the insert itself, so the lists cost ingest no round trip of their own.
   */
  readonly headerFromForms?: ReadonlyArray<string> | undefined
}

/**
 * Store `email` in one statement (atomic, one round trip). Returns the stored row, or `undefined`
 * when an email with that id exists already (a redelivery stored it).
 *
 * `alongside` adds the caller's own data-modifying `WITH` items (each starting with a comma) to the
 * same statement, so that they commit or fail with the email without a transaction's extra round
 * trips; they may read the `email` item, which is empty when the email existed already.
 */
export const storeEmail = (sql: SqlClient.SqlClient, email: NewEmail, alongside?: Statement.Fragment) =>
  Effect.gen(function*() {
    const { parsed } = email
    const thread = threadChoice(email.mailboxId, parsed, email.messageId)
    // Each distinct content once, in lock order: concurrent stores may hold the same attachment.
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
        emailId: email.emailId,
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
    const forms = email.headerFromForms ?? []
    const labels = forms.length === 0 ? sql`${[...email.labels]}::text[]` : sql`${[...email.labels]}::text[] || CASE WHEN EXISTS (
        SELECT 1 FROM sender_list_entries b
        WHERE b.user_id = ${email.userId} AND (b.mailbox_id IS NULL OR b.mailbox_id = ${email.mailboxId})
          AND b.list = 'block' AND b.entry = ANY(${[...forms]}::text[])
      ) THEN ARRAY[${BLOCKED}]::text[] ELSE '{}'::text[] END`
    const inserted = yield* sql<EmailRow>`
      WITH thread AS (
        SELECT coalesce(
          (SELECT t.thread_id FROM emails t
           WHERE t.mailbox_id = ${email.mailboxId} AND t.message_id = ANY(${thread.referenced}::text[])
           ORDER BY t.received_at DESC LIMIT 1),
          (SELECT ${thread.own}::text WHERE EXISTS (
             SELECT 1 FROM emails t WHERE t.mailbox_id = ${email.mailboxId} AND t.thread_id = ${thread.own}::text)),
          ${thread.fallback}::text
        ) AS id
      ),
      email AS (
        INSERT INTO emails AS e (id, mailbox_id, user_id, message_id, thread_id, subject, from_address, to_addresses,
                                 sent_at, received_at, mail_from, rcpt_to, headers, text_body, html_body,
                                 has_attachments, raw_sha256, size, labels, direction,
                                 authentication, authentication_results, spam, extracted)
        VALUES (${email.emailId}, ${email.mailboxId}, ${email.userId}, ${email.messageId}, (SELECT id FROM thread),
                ${parsed.subject}, ${parsed.from ?? email.mailFrom},
                ${parsed.to.length > 0 ? [...parsed.to] : [email.rcptTo]}, ${parsed.date ?? email.receivedAt}, ${email.receivedAt},
                ${email.mailFrom}, ${email.rcptTo},
                -- A jsonb column: PostgreSQL reads the JSON text as the column's type.
                ${JSON.stringify(parsed.headers)}, ${parsed.text}, ${parsed.html}, ${parsed.attachments.length > 0},
                ${email.rawSha256}, ${email.size}, ${labels}, ${email.direction},
                ${email.authentication === undefined ? null : JSON.stringify(email.authentication)}::jsonb,
                ${email.authenticationResults ?? null},
                ${email.spam === undefined ? null : JSON.stringify(email.spam)}::jsonb,
                ${email.extracted === undefined ? null : JSON.stringify(email.extracted)}::jsonb)
        ON CONFLICT (id) DO NOTHING
        RETURNING ${sql.literal(emailColumnList)}
      ),
      storage AS (
        INSERT INTO storage_usage (user_id, bytes) SELECT user_id, size FROM email
        ON CONFLICT (user_id) DO UPDATE SET bytes = storage_usage.bytes + EXCLUDED.bytes
      )${attachments}${alongside ?? sql``}
      SELECT * FROM email`
    return inserted[0]
  })
