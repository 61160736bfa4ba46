/**
 * Reading received mail (DESIGN.md §4 "reading mail"). Only the owner of a mailbox reads its mail,
 * and the mail of a deleted mailbox is gone from every read: each query joins an active mailbox of
 * the caller, so anything else is 404.
 */
import { SqlClient, type Statement } from "@effect/sql"
import { Effect } from "effect"
import { NotFound, ValidationError } from "../errors.ts"
import type { Page, Sort } from "../listing.ts"
import { amongMailboxes, ownMailbox } from "../mailboxes/owned.ts"
import { underWay } from "../outbound/claims.ts"
import {
  type AttachmentRow,
  type DeliveryRow,
  type ForwardedRow,
  type EmailBodyRow,
  emailBodyColumnList,
  emailColumnList,
  type EmailRow,
  toEmail,
  toSummary
} from "./records.ts"
import { UNREAD } from "./label-rules.ts"
import { arrivedWithin, bounds, type MailNarrowing, narrowedBy, senderIs, unread } from "./narrowing.ts"
import { checkRange, type ReceivedRange } from "./received-range.ts"
import type { Entry } from "./sender-list-rules.ts"
import type { Direction, EmailSortField, Thread, ThreadEmail, ThreadSortField, ThreadSummary } from "./schemas.ts"

/**
 * Which of a mailbox's emails a list shows: those the narrowing keeps (all of `labels`, from `from`: an
 * address and its subaddresses, a domain, or `*.` a domain's subdomains; `received` within a span), none
 * of `excludeLabels`, read state, direction, conversation.
 */
export interface EmailFilter extends MailNarrowing {
  readonly direction?: Direction | undefined
  /** Only this conversation's mail (a reply awaited: with `after`, mail of the thread newer than the one sent). */
  readonly threadId?: string | undefined
  readonly excludeLabels?: ReadonlyArray<string> | undefined
  readonly unread?: boolean | undefined
  /**
   * Only emails stored after this email, also one deleted since (wait-for-mail's cursor), in the order
   * they were stored (migration 0089): none stored later can come before one already listed.
   */
  readonly after?: string | undefined
  /** Of these mailboxes only (a key limited to them), in the lists of every mailbox. */
  readonly mailboxes?: ReadonlyArray<string> | undefined
}

/**
 * Which conversations a thread list shows, judged over all of a thread's emails: some email is from
 * `from`, some email arrived within `received`, some email carries each of `labels`, none carries any
 * of `excludeLabels`, and `unread` some (true) or none (false) of them is unread.
 */
export interface ThreadFilter {
  /** Only conversations some email of which is from this sender (as `EmailFilter.from`). */
  readonly from?: Entry | undefined
  readonly labels?: ReadonlyArray<string> | undefined
  readonly excludeLabels?: ReadonlyArray<string> | undefined
  readonly unread?: boolean | undefined
  /** Only conversations with mail that arrived within this span (some email of the thread). */
  readonly received?: ReceivedRange | undefined
  /** Of these mailboxes only (a key limited to them), in the list of every mailbox. */
  readonly mailboxes?: ReadonlyArray<string> | undefined
}

/** A thread list's row: the thread's newest email and what is said of the whole thread. */
interface ThreadRow extends EmailRow {
  readonly messageCount: string | number
  readonly unreadCount: string | number
  readonly threadHasAttachments: boolean
  readonly firstReceivedAt: Date
  readonly lastReceivedAt: Date
  readonly threadSubject: string
  readonly senders: ReadonlyArray<string>
  readonly threadLabels: ReadonlyArray<string>
}

const toThreadSummary = (row: ThreadRow): ThreadSummary => ({
  thread_id: row.threadId,
  mailbox_id: row.mailboxId,
  subject: row.threadSubject,
  message_count: Number(row.messageCount),
  unread_count: Number(row.unreadCount),
  has_attachments: row.threadHasAttachments,
  labels: [...row.threadLabels],
  senders: [...row.senders],
  first_received_at: row.firstReceivedAt.toISOString(),
  last_received_at: row.lastReceivedAt.toISOString(),
  latest: toSummary(row)
})

/**
 * At most how many emails meeting a thread filter's condition are found first, with their threads
 * (threadsIn): grouping those threads alone then reads their mail, not the whole mailbox's.
 */
const FEW_EMAILS = 1000

const threadSortColumns: Record<ThreadSortField, string> = {
  last_received_at: "t.last_received_at",
  first_received_at: "t.first_received_at"
}

const sortColumns: Record<EmailSortField, string> = {
  received_at: "e.received_at",
  date: "e.sent_at",
  // As a reader expects a list of subjects: "apple" beside "Apple", not after every capital.
  subject: "lower(e.subject)"
}

/** 404 for a thread of no active mailbox of the caller's. */
/** 404 for threads of no active mailbox of the caller's: `details.thread_id` for one, `thread_ids` for more. */
export const threadsNotFound = (threadIds: ReadonlyArray<string>) =>
  threadIds.length === 1
    ? new NotFound({ message: "Thread not found", details: { thread_id: threadIds[0] } })
    : new NotFound({ message: "Threads not found", details: { thread_ids: threadIds } })

export const threadNotFound = (threadId: string) => threadsNotFound([threadId])

/** Those of `threadIds` none of `found` belongs to. */
export const missingThreads = (threadIds: ReadonlyArray<string>, found: ReadonlyArray<{ readonly threadId: string }>) => {
  const present = new Set(found.map((row) => row.threadId))
  return threadIds.filter((id) => !present.has(id))
}

/** 404 for emails of no active mailbox of the caller's: `details.email_id` for one, `email_ids` for more. */
export const emailNotFound = (emailIds: ReadonlyArray<string>) =>
  emailIds.length === 1
    ? new NotFound({ message: "Email not found", details: { email_id: emailIds[0] } })
    : new NotFound({ message: "Emails not found", details: { email_ids: emailIds } })

export class Emails extends Effect.Service<Emails>()("mailroom/Emails", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const columns = sql.literal(emailColumnList)
    const attempting = (alias: "d" | "f") => sql.literal(underWay(alias))
    const isUnread = unread(sql)

    /** Every active mailbox of `userId`'s (of `only`, when given): a condition on `mailboxes`. */
    const activeOf = (userId: string, only: ReadonlyArray<string> | undefined) =>
      sql`user_id = ${userId} AND status = 'active' ${amongMailboxes(sql, "id", only)}`

    /** The emails `e` of every active mailbox of `userId`'s (of `only`, when given). */
    const activeMailboxesOf = (userId: string, only: ReadonlyArray<string> | undefined) =>
      sql`e.user_id = ${userId} AND e.mailbox_id IN (SELECT id FROM mailboxes WHERE ${activeOf(userId, only)})`

    /**
     * Where each email stands in its mailbox's mail, for a list's `after`: the emails, and those deleted
     * since (deletion.ts keeps their place a while), so that a cursor deleted meanwhile still marks it.
     * One deleted before the order was kept (migration 0089) stands with the mail stored before it.
     */
    const places = sql`(SELECT id, user_id, mailbox_id, stored_seq, received_at FROM emails
      UNION ALL SELECT id, user_id, mailbox_id, COALESCE(stored_seq, 0), received_at FROM deleted_emails WHERE received_at IS NOT NULL)`

    /** The filter's conditions on `emails e`, each one `AND …`. */
    const filtered = (filter: EmailFilter) =>
      sql.join(" ", false)([
        narrowedBy(sql, filter),
        filter.excludeLabels && filter.excludeLabels.length > 0 ? sql`AND NOT (e.labels && ${[...filter.excludeLabels]}::text[])` : sql``,
        filter.direction === undefined ? sql`` : sql`AND e.direction = ${filter.direction}`,
        filter.threadId === undefined ? sql`` : sql`AND e.thread_id = ${filter.threadId}`,
        filter.unread === undefined ? sql`` : filter.unread ? sql`AND ${isUnread}` : sql`AND NOT (${isUnread})`,
        filter.after === undefined
          ? sql``
          : sql`AND (e.stored_seq, e.received_at, e.id) > (SELECT a.stored_seq, a.received_at, a.id FROM ${places} a WHERE a.id = ${filter.after} LIMIT 1)`
      ])

    /**
     * The emails `scope` picks (one mailbox's, or every active mailbox's of an account), newest first
     * unless `sort` says otherwise, those matching `filter` only. The page and the count in one
     * statement, so they describe the same moment even while mail arrives: one row per email, or a
     * single row of nulls with the count when the page is empty. Oldest first, and with `after`, mail
     * by arrival is in the order it was stored (so that a loop that carries on after the last one it
     * saw, from its first page on, misses none and sees none twice).
     */
    const listIn = (scope: Statement.Fragment, page: Page, sort: Sort<EmailSortField>, filter: EmailFilter) =>
      Effect.gen(function*() {
        if (filter.received !== undefined) yield* checkRange(filter.received)
        const direction = sql.literal(sort.direction === "asc" ? "ASC" : "DESC")
        // Oldest first is a loop's order, from its first page on (whose last email is its next call's
        // `after`): the order mail was stored, as `after` reads it. Newest first, for reading, is by arrival.
        const inStoredOrder = sort.field === "received_at" && (filter.after !== undefined || sort.direction === "asc")
        const order = inStoredOrder
          ? sql`e.stored_seq ${direction}, e.received_at ${direction}, e.id ${direction}`
          : sql`${sql.literal(sortColumns[sort.field])} ${direction}, e.received_at ${direction}, e.id ${direction}`
        const rows = yield* sql<(EmailRow & { total: string }) | { id: null; total: string }>`
          SELECT page.*, counted.total
          FROM (SELECT count(*) AS total FROM emails e WHERE ${scope} ${filtered(filter)}) counted
          LEFT JOIN LATERAL (
            SELECT ${columns}, row_number() OVER () AS position
            FROM (
              SELECT e.* FROM emails e
              WHERE ${scope} ${filtered(filter)}
              ORDER BY ${order}
              LIMIT ${page.limit} OFFSET ${page.offset}
            ) e
          ) page ON true
          ORDER BY page.position`
        const total = Number(rows[0]?.total ?? 0)
        const emails = rows.flatMap((row) => (row.id === null ? [] : [toSummary(row)]))
        return { emails, total }
      })

    /** The filter's conditions on a thread's group of `emails e`, each one `AND …`. */
    const threadFiltered = (filter: ThreadFilter) =>
      sql.join(" ", false)([
        ...(filter.labels ?? []).map((label) => sql`AND bool_or(${label} = ANY(e.labels))`),
        filter.from === undefined ? sql`` : sql`AND bool_or(${senderIs(sql, filter.from)})`,
        filter.received === undefined || !bounds(filter.received) ? sql`` : sql`AND bool_or(${arrivedWithin(sql, filter.received)})`,
        filter.excludeLabels && filter.excludeLabels.length > 0 ? sql`AND NOT bool_or(e.labels && ${[...filter.excludeLabels]}::text[])` : sql``,
        filter.unread === undefined
          ? sql``
          : sql`AND count(*) FILTER (WHERE ${isUnread}) ${sql.literal(filter.unread ? "> 0" : "= 0")}`
      ])

    /**
     * What some email of a thread the filter keeps must be, each alone (its sender, when it arrived, each
     * label, unread): conditions an index finds the emails by, where the group's `bool_or` reads every email.
     */
    const someEmailIs = (filter: ThreadFilter): ReadonlyArray<Statement.Fragment> => [
      ...(filter.from === undefined ? [] : [senderIs(sql, filter.from)]),
      ...(filter.received === undefined || !bounds(filter.received) ? [] : [arrivedWithin(sql, filter.received)]),
      ...(filter.labels ?? []).map((label) => sql`e.labels @> ${[label]}::text[]`),
      ...(filter.unread === true ? [isUnread] : [])
    ]

    /**
     * Those of `someEmailIs(filter)` that at most FEW_EMAILS of `userId`'s emails in `scope` meet, counted
     * by their index up to one more (one statement for all).
     */
    const fewEmailsAre = (userId: string, scope: Statement.Fragment, filter: ThreadFilter) =>
      Effect.gen(function*() {
        const conditions = someEmailIs(filter)
        if (conditions.length === 0) return []
        const counted = conditions.map((condition, i) => {
          const meeting = sql`SELECT 1 FROM emails e WHERE e.user_id = ${userId} AND ${scope} AND ${condition} LIMIT ${FEW_EMAILS + 1}`
          return sql`(SELECT count(*) FROM (${meeting}) meeting) AS ${sql(`c${i}`)}`
        })
        const [counts] = yield* sql<Record<string, string>>`SELECT ${sql.join(", ", false)(counted)}`
        return conditions.filter((_, i) => Number(counts![`c${i}`]) <= FEW_EMAILS)
      })

    /**
     * The conversations of `userId`'s emails `scope` picks, the most recently active first unless `sort`
     * says otherwise, those matching `filter` only: the page and the count in one statement, as `listIn`.
     * The threads are grouped from the emails each time (no table of threads to keep up on every
     * stored message), reading `emails_threads_idx` alone (migration 0029); what is said of each thread
     * on the page is read through `emails_thread_idx`. A filter that few emails meet (`fewEmailsAre`:
     * one sender's, say) first finds those emails' threads by its index and groups only them: one
     * sender's 30 conversations among 30,000 are not found by grouping all 30,000. One that many emails
     * meet is judged as the threads are grouped, which then reads less than finding them first.
     */
    const threadsIn = (userId: string, scope: Statement.Fragment, page: Page, sort: Sort<ThreadSortField>, filter: ThreadFilter) =>
      Effect.gen(function*() {
        if (filter.received !== undefined) yield* checkRange(filter.received)
        const direction = sql.literal(sort.direction === "asc" ? "ASC" : "DESC")
        const foundFirst = sql.join(" ", false)(
          (yield* fewEmailsAre(userId, scope, filter)).map((condition) =>
            sql`AND e.thread_id IN (SELECT e.thread_id FROM emails e WHERE e.user_id = ${userId} AND ${scope} AND ${condition})`
          )
        )
        const rows = yield* sql<(ThreadRow & { total: string }) | { id: null; total: string }>`
          WITH threads AS (
            SELECT e.thread_id, min(e.mailbox_id) AS mailbox_id,
                   count(*) AS message_count,
                   count(*) FILTER (WHERE ${isUnread}) AS unread_count,
                   bool_or(e.has_attachments) AS has_attachments,
                   min(e.received_at) AS first_received_at,
                   max(e.received_at) AS last_received_at
            FROM emails e
            WHERE ${scope} ${foundFirst}
            GROUP BY e.thread_id
            HAVING true ${threadFiltered(filter)}
          )
          SELECT page.*, counted.total
          FROM (SELECT count(*) AS total FROM threads) counted
          LEFT JOIN LATERAL (
            SELECT ${columns},
                   t.message_count, t.unread_count, t.has_attachments AS thread_has_attachments,
                   t.first_received_at, t.last_received_at,
                   (SELECT x.subject FROM emails x
                    WHERE x.thread_id = t.thread_id AND x.mailbox_id = t.mailbox_id
                    ORDER BY x.received_at, x.id LIMIT 1) AS thread_subject,
                   -- Each sender once, in any case (as first written), in the order they first wrote.
                   (SELECT coalesce(array_agg(s.from_address ORDER BY s.first_at, s.from_address), '{}')
                    FROM (SELECT (array_agg(x.from_address ORDER BY x.received_at, x.id))[1] AS from_address, min(x.received_at) AS first_at
                          FROM emails x
                          WHERE x.thread_id = t.thread_id AND x.mailbox_id = t.mailbox_id
                          GROUP BY lower(x.from_address)) s) AS senders,
                   (SELECT coalesce(array_agg(DISTINCT l.label ORDER BY l.label), '{}')
                    FROM emails x, unnest(x.labels) AS l(label)
                    WHERE x.thread_id = t.thread_id AND x.mailbox_id = t.mailbox_id) AS thread_labels,
                   row_number() OVER () AS position
            FROM (
              SELECT * FROM threads t
              ORDER BY ${sql.literal(threadSortColumns[sort.field])} ${direction}, t.thread_id ${direction}
              LIMIT ${page.limit} OFFSET ${page.offset}
            ) t
            JOIN LATERAL (
              SELECT * FROM emails x
              WHERE x.thread_id = t.thread_id AND x.mailbox_id = t.mailbox_id
              ORDER BY x.received_at DESC, x.id DESC LIMIT 1
            ) e ON true
          ) page ON true
          ORDER BY page.position`
        const total = Number(rows[0]?.total ?? 0)
        const threads = rows.flatMap((row) => (row.id === null ? [] : [toThreadSummary(row)]))
        return { threads, total }
      })

    /** A mailbox's conversations (`threadsIn`); 404 for a mailbox that is not the caller's. */
    const threads = Effect.fn("Emails.threads")(function*(
      userId: string,
      mailboxId: string,
      page: Page,
      sort: Sort<ThreadSortField>,
      filter: ThreadFilter = {}
    ) {
      yield* ownMailbox(sql, userId, mailboxId)
      return yield* threadsIn(userId, sql`e.mailbox_id = ${mailboxId}`, page, sort, filter)
    })

    /** The conversations of every active mailbox of the caller's (`threadsIn`). */
    const threadsAll = Effect.fn("Emails.threadsAll")(function*(
      userId: string,
      page: Page,
      sort: Sort<ThreadSortField>,
      filter: ThreadFilter = {}
    ) {
      // By mailbox (each one's emails through the threads index), not by account.
      return yield* threadsIn(userId, sql`e.mailbox_id IN (SELECT id FROM mailboxes WHERE ${activeOf(userId, filter.mailboxes)})`, page, sort, filter)
    })

    /** One of the caller's mailboxes' emails (`listIn`); 404 for a mailbox that is not the caller's. */
    const list = Effect.fn("Emails.list")(function*(
      userId: string,
      mailboxId: string,
      page: Page,
      sort: Sort<EmailSortField>,
      filter: EmailFilter = {}
    ) {
      yield* ownMailbox(sql, userId, mailboxId)
      if (filter.after !== undefined) {
        const cursor = yield* sql`SELECT 1 FROM ${places} a WHERE a.id = ${filter.after} AND a.mailbox_id = ${mailboxId}`
        if (cursor.length === 0) return yield* ValidationError.field("after", "must be the id of an email in this mailbox")
      }
      if (filter.threadId !== undefined) {
        const thread = yield* sql`SELECT 1 FROM emails e WHERE e.thread_id = ${filter.threadId} AND e.mailbox_id = ${mailboxId} LIMIT 1`
        if (thread.length === 0) return yield* threadNotFound(filter.threadId)
      }
      // The account too, for the indexes that lead with it (a sender's: narrowing.ts senderIs).
      return yield* listIn(sql`e.user_id = ${userId} AND e.mailbox_id = ${mailboxId}`, page, sort, filter)
    })

    /** The emails of every active mailbox of the caller's (`listIn`). */
    const listAll = Effect.fn("Emails.listAll")(function*(
      userId: string,
      page: Page,
      sort: Sort<EmailSortField>,
      filter: EmailFilter = {}
    ) {
      if (filter.after !== undefined) {
        const cursor = yield* sql`SELECT 1 FROM ${places} e WHERE e.id = ${filter.after} AND ${activeMailboxesOf(userId, filter.mailboxes)}`
        if (cursor.length === 0) return yield* ValidationError.field("after", "must be the id of one of your emails")
      }
      if (filter.threadId !== undefined) {
        const thread = yield* sql`SELECT 1 FROM emails e WHERE e.thread_id = ${filter.threadId} AND ${activeMailboxesOf(userId, filter.mailboxes)} LIMIT 1`
        if (thread.length === 0) return yield* threadNotFound(filter.threadId)
      }
      return yield* listIn(activeMailboxesOf(userId, filter.mailboxes), page, sort, filter)
    })

    /** The email with its bodies, headers and attachments' metadata. */
    const get = Effect.fn("Emails.get")(function*(userId: string, emailId: string) {
      const rows = yield* sql<EmailBodyRow & { readonly forwarded: ReadonlyArray<ForwardedRow> | null }>`
        SELECT ${sql.literal(emailBodyColumnList)},
               (SELECT json_agg(json_build_object('address', f.address, 'status', f.status, 'attempts', f.attempts,
                                                  'lastResponse', f.last_response, 'nextAttemptAt', f.next_attempt_at,
                                                  'attempting', ${attempting("f")}, 'updatedAt', f.updated_at) ORDER BY f.address)
                FROM forward_deliveries f WHERE f.email_id = e.id) AS forwarded
        FROM emails e JOIN mailboxes m ON m.id = e.mailbox_id AND m.status = 'active'
        WHERE e.id = ${emailId} AND e.user_id = ${userId}`
      const row = rows[0]
      if (!row) return yield* emailNotFound([emailId])
      const attachments = yield* sql<AttachmentRow>`
        SELECT id, filename, content_type, size, checksum, content_id FROM attachments
        WHERE email_id = ${emailId} ORDER BY position`
      const deliveries = row.direction === "inbound" ? [] : yield* sql<DeliveryRow>`
        SELECT recipient, status, attempts, last_response, next_attempt_at, ${attempting("d")} AS attempting, complained_at, updated_at
        FROM outbound_deliveries d WHERE email_id = ${emailId} ORDER BY recipient`
      return toEmail(row, attachments, deliveries, row.forwarded ?? [])
    })

    /** The message exactly as it was received. */
    const raw = Effect.fn("Emails.raw")(function*(userId: string, emailId: string) {
      const rows = yield* sql<{ content: Uint8Array }>`
        SELECT b.content
        FROM emails e JOIN mailboxes m ON m.id = e.mailbox_id AND m.status = 'active'
                      JOIN blobs b ON b.sha256 = e.raw_sha256
        WHERE e.id = ${emailId} AND e.user_id = ${userId}`
      if (!rows[0]) return yield* emailNotFound([emailId])
      return rows[0].content
    })

    /** One attachment's decoded bytes and how to present them. */
    const attachment = Effect.fn("Emails.attachment")(function*(userId: string, emailId: string, attachmentId: string) {
      const rows = yield* sql<{ filename: string | null; contentType: string; charset: string | null; content: Uint8Array }>`
        SELECT a.filename, a.content_type, a.charset, b.content
        FROM attachments a JOIN emails e ON e.id = a.email_id
                           JOIN mailboxes m ON m.id = e.mailbox_id AND m.status = 'active'
                           JOIN blobs b ON b.sha256 = a.checksum
        WHERE a.id = ${attachmentId} AND a.email_id = ${emailId} AND e.user_id = ${userId}`
      if (!rows[0]) {
        return yield* new NotFound({ message: "Attachment not found", details: { email_id: emailId, attachment_id: attachmentId } })
      }
      return rows[0]
    })

    /** A conversation: its emails, oldest first. */
    const thread = Effect.fn("Emails.thread")(function*(userId: string, threadId: string) {
      // Each email's new text: received mail's extracted reply, else (sent mail, mail stored before extraction) its text.
      const rows = yield* sql<EmailRow & { readonly replyText: string }>`
        SELECT ${columns}, coalesce(e.extracted->>'reply_text', e.text_body) AS reply_text
        FROM emails e JOIN mailboxes m ON m.id = e.mailbox_id AND m.status = 'active'
        WHERE e.thread_id = ${threadId} AND e.user_id = ${userId}
        ORDER BY e.received_at, e.id`
      const first = rows[0]
      if (!first) return yield* threadNotFound(threadId)
      const emails = rows.map((row): ThreadEmail => ({ ...toSummary(row), reply_text: row.replyText }))
      // What the thread list says of it, as its query reckons it (threads above): each sender once, in any case.
      const senders = new Map<string, string>()
      for (const email of emails) if (!senders.has(email.from.toLowerCase())) senders.set(email.from.toLowerCase(), email.from)
      return {
        thread_id: threadId,
        mailbox_id: first.mailboxId,
        subject: first.subject,
        message_count: emails.length,
        unread_count: emails.filter((email) => email.labels.includes(UNREAD)).length,
        has_attachments: emails.some((email) => email.has_attachments),
        labels: [...new Set(emails.flatMap((email) => email.labels))].sort(),
        senders: [...senders.values()],
        first_received_at: emails[0]!.received_at,
        last_received_at: emails[emails.length - 1]!.received_at,
        emails
      } satisfies Thread
    })

    return { list, listAll, threads, threadsAll, get, raw, attachment, thread } as const
  })
}) {}
