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
import { referencedIds, threadChoice } from "./threads.ts"
import { BLOCKED } from "./sender-list-rules.ts"
import { SPAM } from "./spam.ts"
import { MAX_FORWARD_HOPS } from "./forward-rules.ts"

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
  /** Inbound mail: its verdicts (authentication.ts), checked on the SMTP node or at ingest. */
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
  /**
   * Inbound mail: the mailboxes that forwarded it before, as the fields Mailroom wrote and signed name
   * them (forward-rules.ts `forwardedBy`: the caller checks them, since a stranger can write the field).
   */
  readonly forwardedBy?: ReadonlyArray<string> | undefined
}

/** A stored email, and the domains its forwarded copies were queued for (forward-rules.ts; none for most). */
export type StoredEmail = EmailRow & { readonly forwardDomains: ReadonlyArray<string> }

/**
 * Store `email` in one statement (atomic, one round trip). Returns the stored row, or `undefined`
 * when it was not stored now: an email with that id exists already (a redelivery stored it), or was
 * deleted since, or its mailbox was with its account, or the mailbox has received the message
 * already (`messageKey`).
 *
 * `alongside` adds the caller's own data-modifying `WITH` items (each starting with a comma) to the
 * same statement, so that they commit or fail with the email without a transaction's extra round
 * trips; they may read the `email` item, which is empty when the email existed already.
 */
export const storeEmail = (sql: SqlClient.SqlClient, email: NewEmail, alongside?: Statement.Fragment) =>
  Effect.map(insertEmails(sql, [email], alongside ?? sql``), (rows) => rows[0])

/**
 * Store `emails` together (the ingest actor's batches): one statement for the lot, so a batch costs
 * one round trip and one commit instead of one each. Answers one result per email, in order: the
 * stored row, or `undefined` when the email existed already (or came twice in the batch: its first
 * result is the stored row).
 *
 * An email that refers to another of the batch in the same mailbox (a reply and its original
 * arriving together) must see it stored to join its thread, which a row of the same statement
 * cannot: the batch is then cut there, and its parts go in one transaction, in order.
 */
export const storeEmails = (sql: SqlClient.SqlClient, emails: ReadonlyArray<NewEmail>) => storeEmailsWith(sql, emails, () => sql``)

/**
 * `storeEmails` with the caller's own `WITH` items for each statement (`storeEmail`'s `alongside`),
 * made for the emails that statement stores.
 */
export const storeEmailsWith = (
  sql: SqlClient.SqlClient,
  emails: ReadonlyArray<NewEmail>,
  alongside: (part: ReadonlyArray<NewEmail>) => Statement.Fragment
) =>
  Effect.gen(function*() {
    // Once per id (a redelivery of the bus's) and per received message (`messageKey`): the first is stored.
    const messages = new Set<string>()
    const unique = [...new Map(emails.map((e) => [e.emailId, e])).values()].filter((e) => {
      const key = messageKey(e)
      return key === undefined || (!messages.has(key) && Boolean(messages.add(key)))
    })
    const parts = dependentParts(unique)
    const stored = parts.length === 1
      ? yield* insertEmails(sql, parts[0]!, alongside(parts[0]!))
      : yield* sql.withTransaction(
        Effect.map(Effect.forEach(parts, (part) => insertEmails(sql, part, alongside(part))), (rows) => rows.flat())
      )
    const byId = new Map(stored.map((row) => [row.id, row]))
    return emails.map((e) => {
      const row = byId.get(e.emailId)
      // Each stored row answers once: a repeat of the id in the batch is a redelivery.
      byId.delete(e.emailId)
      return row
    })
  })

/**
 * What makes two received emails one message come twice to the mailbox: the same Message-ID, From
 * and Date. A sender's MTA sends a message again when it did not hear our 250 (at-least-once
 * delivery), and a post may come both directly and through a list; storing each copy would announce
 * it twice, and an agent would answer it twice. Only received mail that has a Message-ID and a Date
 * of its own has a key: nothing else is taken for a copy. The insert checks what the mailbox holds
 * (an index lookup on `(mailbox_id, message_id)`); copies in one batch are checked here. Two workers
 * storing copies at the same instant may both store theirs.
 */
const messageKey = ({ direction, mailboxId, mailFrom, messageId, parsed }: NewEmail): string | undefined =>
  direction === "inbound" && parsed.messageId !== undefined && parsed.date !== undefined
    ? [mailboxId, messageId, parsed.from ?? mailFrom, parsed.date.getTime()].join("\n")
    : undefined

/**
 * The batch in parts, cut before each email that refers to an earlier one of its part in its mailbox,
 * is referred to by it, or refers to a message it refers to (threads.ts: each must see the other stored).
 */
const dependentParts = (emails: ReadonlyArray<NewEmail>): Array<Array<NewEmail>> => {
  const referencedBy = new Map(emails.map((email) => [email, referencedIds(email.parsed.references, email.parsed.inReplyTo)]))
  const parts: Array<Array<NewEmail>> = [[]]
  for (const email of emails) {
    const part = parts[parts.length - 1]!
    const referenced = referencedBy.get(email)!
    const related = part.some((earlier) => {
      if (earlier.mailboxId !== email.mailboxId) return false
      const earlierReferenced = referencedBy.get(earlier)!
      return referenced.includes(earlier.messageId) || earlierReferenced.includes(email.messageId) ||
        referenced.some((id) => earlierReferenced.includes(id))
    })
    if (related) parts.push([email])
    else part.push(email)
  }
  return parts
}

/**
 * The most of a value the emails' indexes hold (a subject, a sender's address, a Message-ID and those
 * it refers to), in UTF-8 bytes: an index row holds at most 2,704, and lower() may make a text half as
 * long again. A header may be longer (a folded Subject of 3,000 characters is RFC 5322's), and such a
 * row would be refused, the message accepted and never stored. The column keeps the value cut at a
 * character; the header stays whole in `headers` and the raw message. Message-IDs are cut alike
 * wherever they are stored, so that a reply still finds a long one it refers to.
 */
export const MAX_INDEXED_BYTES = 1500

export const indexable = (value: string): string => {
  if (value.length * 3 <= MAX_INDEXED_BYTES) return value
  const { read } = new TextEncoder().encodeInto(value, new Uint8Array(MAX_INDEXED_BYTES))
  return value.slice(0, read)
}

/**
 * The statement: the emails as rows of one JSON parameter (a statement's size does not grow with its
 * number of placeholders), each picking its thread and its `blocked` label in the database; their
 * numbers in their account's stored order (migration 0089: taken first, so that the account's row
 * stays locked until the statement commits, and a later store's numbers are later and commit later);
 * their attachments; the storage they add, per account in lock order. Answers the rows inserted.
 */
const insertEmails = (sql: SqlClient.SqlClient, emails: ReadonlyArray<NewEmail>, alongside: Statement.Fragment) =>
  Effect.gen(function*() {
    // Each email's place among its account's emails of the statement (1, 2, …), and how many those are.
    const ofAccount = new Map<string, number>()
    const ranks = emails.map((email) => {
      const rank = (ofAccount.get(email.userId) ?? 0) + 1
      ofAccount.set(email.userId, rank)
      return rank
    })
    const rows = emails.map((email, position) => {
      const { parsed } = email
      const thread = threadChoice(email.mailboxId, parsed, parsed.from ?? email.mailFrom, email.messageId, email.direction)
      return {
        position,
        id: email.emailId,
        mailbox_id: email.mailboxId,
        user_id: email.userId,
        account_rank: ranks[position]!,
        account_count: ofAccount.get(email.userId)!,
        message_id: indexable(email.messageId),
        subject: indexable(parsed.subject),
        from_address: indexable(parsed.from ?? email.mailFrom),
        from_name: parsed.fromName,
        // Received mail with no To (a Bcc copy, a list) was still delivered to the mailbox; sent mail is
        // addressed as its headers say, so one sent to Bcc alone has no To.
        to_addresses: parsed.to.length > 0 || email.direction === "outbound" ? parsed.to : [email.rcptTo],
        cc_addresses: parsed.cc,
        reply_to_addresses: parsed.replyTo,
        // Milliseconds: JSON would write a year past 9999 as "+010000-…", which PostgreSQL cannot read.
        sent_at_ms: (parsed.date ?? email.receivedAt).getTime(),
        received_at_ms: email.receivedAt.getTime(),
        mail_from: email.mailFrom,
        rcpt_to: email.rcptTo,
        headers: parsed.headers,
        text_body: parsed.text,
        html_body: parsed.html,
        has_attachments: parsed.attachments.length > 0,
        raw_sha256: email.rawSha256,
        size: email.size,
        labels: email.labels,
        direction: email.direction,
        authentication: email.authentication ?? null,
        authentication_results: email.authenticationResults ?? null,
        spam: email.spam ?? null,
        extracted: email.extracted ?? null,
        referenced: thread.referenced.map(indexable),
        own_thread: thread.own,
        fallback_thread: thread.fallback,
        header_from_forms: email.headerFromForms ?? [],
        once: messageKey(email) !== undefined
      }
    })
    // The mailboxes that forwarded each email before (forward-rules.ts), for the few that name any: apart from
    // `input`, which a second reference would make PostgreSQL copy whole (bodies and all) for every batch.
    const forwarded = emails.flatMap((email) => email.forwardedBy !== undefined && email.forwardedBy.length > 0 ? [{ id: email.emailId, by: email.forwardedBy }] : [])
    const all = emails.flatMap((email) => email.parsed.attachments.map((a, position) => ({ email, a, position })))
    // Each distinct content once, in lock order: concurrent stores may hold the same attachment.
    const contents = inLockOrder(new Map(all.map(({ a }) => [a.checksum, a])))
    // The rows of the emails this statement stores: not those of a copy dropped, a redelivery (they
    // exist already) or an email deleted since (a row would name no email, and fail the statement).
    const attachmentRows = all.map(({ a, email, position }) => ({
      id: newId("att"),
      email_id: email.emailId,
      position,
      filename: a.filename,
      content_type: a.contentType,
      size: a.size,
      checksum: a.checksum,
      content_id: a.contentId,
      charset: a.charset
    }))
    const attachments = all.length === 0 ? sql`` : sql`,
      attachment_blobs AS (
        INSERT INTO blobs ${sql.insert(contents.map((a) => ({ sha256: a.checksum, size: a.size, content: a.content })))}
        ON CONFLICT (sha256) DO UPDATE SET created_at = now()
      ),
      attachment_rows AS (
        INSERT INTO attachments (id, email_id, position, filename, content_type, size, checksum, content_id, charset)
        SELECT a.* FROM jsonb_to_recordset(${JSON.stringify(attachmentRows)}::jsonb) AS a(
          id text, email_id text, position integer, filename text, content_type text, size bigint, checksum text, content_id text, charset text)
        WHERE a.email_id IN (SELECT id FROM email)
        ORDER BY a.email_id, a.position
        ON CONFLICT (email_id, position) DO NOTHING
      )`
    return yield* sql<StoredEmail>`
      WITH input AS (
        SELECT * FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) AS r(
          position int, id text, mailbox_id text, user_id text, account_rank int, account_count int, message_id text, subject text, from_address text, from_name text,
          to_addresses text[], cc_addresses text[], reply_to_addresses text[], sent_at_ms double precision, received_at_ms double precision, mail_from text, rcpt_to text, headers jsonb,
          text_body text, html_body text, has_attachments boolean, raw_sha256 text, size bigint, labels text[],
          direction text, authentication jsonb, authentication_results text, spam jsonb, extracted jsonb,
          referenced text[], own_thread text, fallback_thread text, header_from_forms text[], once boolean)
      ),
      numbers AS (
        -- The account's next numbers, its row locked until commit (the accounts in lock order). Mail of
        -- a mailbox gone with its account since it was accepted takes none (and is not stored, below);
        -- an owner that does not exist is refused, as the email would be.
        INSERT INTO email_order AS o (user_id, last)
        SELECT DISTINCT r.user_id, r.account_count FROM input r WHERE EXISTS (SELECT 1 FROM mailboxes m WHERE m.id = r.mailbox_id)
        ORDER BY r.user_id
        ON CONFLICT (user_id) DO UPDATE SET last = o.last + EXCLUDED.last
        RETURNING o.user_id, o.last
      ),
      email AS (
        INSERT INTO emails AS e (id, mailbox_id, user_id, stored_seq, message_id, thread_id, subject, from_address, from_name, to_addresses,
                                 cc_addresses, reply_to_addresses, sent_at, received_at, mail_from, rcpt_to, headers, text_body, html_body,
                                 has_attachments, raw_sha256, size, labels, direction,
                                 authentication, authentication_results, spam, extracted, referenced)
        SELECT r.id, r.mailbox_id, r.user_id, n.last - r.account_count + r.account_rank, r.message_id,
               -- The thread (threads.ts), the first found of: the mailbox's email with the same Message-ID
               -- (the same message: the copy of mail it sent itself); the newest of those it refers to;
               -- a sibling's; that of replies to it that arrived first; its fallback.
               coalesce(
                 (SELECT t.thread_id FROM emails t
                  WHERE t.mailbox_id = r.mailbox_id AND t.message_id = r.message_id
                  ORDER BY t.received_at LIMIT 1),
                 (SELECT t.thread_id FROM emails t
                  WHERE t.mailbox_id = r.mailbox_id AND t.message_id = ANY(r.referenced)
                  ORDER BY t.received_at DESC LIMIT 1),
                 -- Another answer to a message it answers (a sibling), that message not being here.
                 -- (OFFSET 0 keeps each lookup on the emails_referenced_idx: a Message-ID is named by
                 -- a handful of emails, where ordering by time would walk the mailbox's.)
                 (SELECT t.thread_id FROM (
                    SELECT thread_id, mailbox_id, received_at FROM emails
                    WHERE cardinality(r.referenced) > 0 AND referenced && r.referenced OFFSET 0) t
                  WHERE t.mailbox_id = r.mailbox_id ORDER BY t.received_at DESC LIMIT 1),
                 -- Replies to it that arrived first: by what they refer to, or (mail stored before
                 -- emails.referenced) by the thread they keyed on it.
                 (SELECT t.thread_id FROM (
                    SELECT thread_id, mailbox_id, received_at FROM emails WHERE referenced @> ARRAY[r.message_id] OFFSET 0) t
                  WHERE t.mailbox_id = r.mailbox_id ORDER BY t.received_at LIMIT 1),
                 (SELECT r.own_thread WHERE EXISTS (
                    SELECT 1 FROM emails t WHERE t.mailbox_id = r.mailbox_id AND t.thread_id = r.own_thread)),
                 r.fallback_thread),
               r.subject, r.from_address, r.from_name, r.to_addresses, r.cc_addresses, r.reply_to_addresses, to_timestamp(r.sent_at_ms / 1000), to_timestamp(r.received_at_ms / 1000),
               r.mail_from, r.rcpt_to,
               r.headers, r.text_body, r.html_body, r.has_attachments, r.raw_sha256, r.size,
               -- Blocked when an entry of the account's or the mailbox's block list names its header From.
               r.labels || CASE WHEN cardinality(r.header_from_forms) > 0 AND EXISTS (
                 SELECT 1 FROM sender_list_entries b
                 WHERE b.user_id = r.user_id AND (b.mailbox_id IS NULL OR b.mailbox_id = r.mailbox_id)
                   AND b.list = 'block' AND b.entry = ANY(r.header_from_forms)
               ) THEN ARRAY[${BLOCKED}]::text[] ELSE '{}'::text[] END,
               r.direction, r.authentication, r.authentication_results, r.spam, r.extracted, nullif(r.referenced, '{}')
        FROM input r JOIN numbers n ON n.user_id = r.user_id
        -- An email deleted since (deletion.ts) whose message the bus delivers again stays deleted, and
        -- mail of an account deleted since it was accepted (accounts/closure.ts) is not stored.
        WHERE NOT EXISTS (SELECT 1 FROM deleted_emails x WHERE x.id = r.id)
          AND EXISTS (SELECT 1 FROM mailboxes m WHERE m.id = r.mailbox_id)
          -- A message the mailbox has received already (messageKey) is not stored again.
          AND NOT (r.once AND EXISTS (
            SELECT 1 FROM emails d
            WHERE d.mailbox_id = r.mailbox_id AND d.message_id = r.message_id AND d.direction = 'inbound'
              AND d.from_address = r.from_address AND d.sent_at = to_timestamp(r.sent_at_ms / 1000)))
        ORDER BY r.position
        ON CONFLICT (id) DO NOTHING
        RETURNING ${sql.literal(emailColumnList)}
      ),
      storage AS (
        -- Mail of a mailbox deleted since it was accepted is stored, hidden, and not counted: the
        -- delete gave back what its mailbox held (mailboxes.ts remove).
        INSERT INTO storage_usage (user_id, bytes)
        SELECT email.user_id, sum(email.size) FROM email JOIN mailboxes m ON m.id = email.mailbox_id AND m.status = 'active'
        GROUP BY email.user_id ORDER BY email.user_id
        ON CONFLICT (user_id) DO UPDATE SET bytes = storage_usage.bytes + EXCLUDED.bytes
      ),
      forwards AS (
        -- Received mail's copies to the mailbox's confirmed forwarding addresses, queued with the
        -- email: the ingest actor hands them to the mta.
        ${queueForwards(sql, forwarded)}
      )${attachments}${alongside}
      SELECT email.*, coalesce((SELECT array_agg(DISTINCT f.domain) FROM forwards f WHERE f.email_id = email.id), '{}') AS forward_domains
      FROM email`
  })

/**
 * The statement that queues copies of the received emails of the enclosing statement's `email` item
 * (its `id`, `mailbox_id`, `direction` and `labels`) for their mailboxes' confirmed forwarding addresses
 * (forward-rules.ts): not of mail labelled spam or blocked, nor of a message that names the mailbox,
 * or MAX_FORWARD_HOPS mailboxes, among those that forwarded it before (`hops`, for the emails that
 * name any). `also` adds conditions on `email`. Answers the copies queued (`email_id`, `domain`).
 * Used where mail is stored and where a person lets held mail through (labels.ts).
 */
export const queueForwards = (
  sql: SqlClient.SqlClient,
  hops: ReadonlyArray<{ readonly id: string; readonly by: ReadonlyArray<string> }>,
  also: Statement.Fragment = sql``
) =>
  sql`
        INSERT INTO forward_deliveries (email_id, address, domain)
        SELECT email.id, f.address, f.domain
        FROM email
        JOIN mailboxes m ON m.id = email.mailbox_id AND m.status = 'active'
        JOIN mailbox_forwards f ON f.mailbox_id = email.mailbox_id AND f.confirmed_at IS NOT NULL AND f.suspended_at IS NULL
        WHERE email.direction = 'inbound' AND NOT (email.labels && ${[BLOCKED, SPAM]}::text[]) ${also}
          AND NOT EXISTS (
            SELECT 1 FROM unnest(${hops.map((f) => f.id)}::text[], ${hops.map((f) => f.by.join("\n"))}::text[]) AS h(id, by)
            WHERE h.id = email.id
              AND (cardinality(string_to_array(h.by, chr(10))) >= ${MAX_FORWARD_HOPS}
                   OR lower(m.local_part || '@' || m.domain) = ANY(string_to_array(h.by, chr(10)))))
        ORDER BY email.id, f.address
        ON CONFLICT DO NOTHING
        RETURNING email_id, domain`
