/**
 * Reading received mail (DESIGN.md §4 "reading mail"). Only the owner of a mailbox reads its mail,
 * and the mail of a deleted mailbox is gone from every read: each query joins an active mailbox of
 * the caller, so anything else is 404.
 */
import { SqlClient, type Statement } from "@effect/sql"
import { Effect } from "effect"
import { NotFound, ValidationError } from "../errors.ts"
import type { Page, Sort } from "../listing.ts"
import {
  type AttachmentRow,
  type DeliveryRow,
  type EmailBodyRow,
  emailBodyColumnList,
  emailColumnList,
  type EmailRow,
  toEmail,
  toSummary
} from "./records.ts"
import { UNREAD } from "./label-rules.ts"
import type { Direction, EmailSortField, Thread } from "./schemas.ts"

/** Which of a mailbox's emails a list shows: all of `labels`, none of `excludeLabels`, read state, direction. */
export interface EmailFilter {
  readonly direction?: Direction | undefined
  readonly labels?: ReadonlyArray<string> | undefined
  readonly excludeLabels?: ReadonlyArray<string> | undefined
  readonly unread?: boolean | undefined
  /** Only emails that arrived after this email (wait-for-mail's cursor). */
  readonly after?: string | undefined
}

const sortColumns: Record<EmailSortField, string> = {
  received_at: "e.received_at",
  date: "e.sent_at",
  // As a reader expects a list of subjects: "apple" beside "Apple", not after every capital.
  subject: "lower(e.subject)"
}

const emailNotFound = (emailId: string) => new NotFound({ message: "Email not found", details: { email_id: emailId } })

export class Emails extends Effect.Service<Emails>()("mailroom/Emails", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const columns = sql.literal(emailColumnList)

    /** The filter's conditions on `emails e`, each one `AND …`. */
    const filtered = (filter: EmailFilter) =>
      sql.join(" ", false)([
        filter.labels && filter.labels.length > 0 ? sql`AND e.labels @> ${[...filter.labels]}::text[]` : sql``,
        filter.excludeLabels && filter.excludeLabels.length > 0 ? sql`AND NOT (e.labels && ${[...filter.excludeLabels]}::text[])` : sql``,
        filter.direction === undefined ? sql`` : sql`AND e.direction = ${filter.direction}`,
        filter.unread === undefined ? sql`` : filter.unread ? sql`AND ${UNREAD} = ANY(e.labels)` : sql`AND NOT (${UNREAD} = ANY(e.labels))`,
        filter.after === undefined
          ? sql``
          : sql`AND (e.received_at, e.id) > (SELECT a.received_at, a.id FROM emails a WHERE a.id = ${filter.after})`
      ])

    /**
     * The emails `scope` picks (one mailbox's, or every active mailbox's of an account), newest first
     * unless `sort` says otherwise, those matching `filter` only. The page and the count in one
     * statement, so they describe the same moment even while mail arrives: one row per email, or a
     * single row of nulls with the count when the page is empty.
     */
    const listIn = (scope: Statement.Fragment, page: Page, sort: Sort<EmailSortField>, filter: EmailFilter) =>
      Effect.gen(function*() {
        const direction = sql.literal(sort.direction === "asc" ? "ASC" : "DESC")
        const rows = yield* sql<(EmailRow & { total: string }) | { id: null; total: string }>`
          SELECT page.*, counted.total
          FROM (SELECT count(*) AS total FROM emails e WHERE ${scope} ${filtered(filter)}) counted
          LEFT JOIN LATERAL (
            SELECT ${columns}, row_number() OVER () AS position
            FROM (
              SELECT e.* FROM emails e
              WHERE ${scope} ${filtered(filter)}
              ORDER BY ${sql.literal(sortColumns[sort.field])} ${direction}, e.received_at ${direction}, e.id ${direction}
              LIMIT ${page.limit} OFFSET ${page.offset}
            ) e
          ) page ON true
          ORDER BY page.position`
        const total = Number(rows[0]?.total ?? 0)
        const emails = rows.flatMap((row) => (row.id === null ? [] : [toSummary(row)]))
        return { emails, total }
      })

    /** One of the caller's mailboxes' emails (`listIn`); 404 for a mailbox that is not the caller's. */
    const list = Effect.fn("Emails.list")(function*(
      userId: string,
      mailboxId: string,
      page: Page,
      sort: Sort<EmailSortField>,
      filter: EmailFilter = {}
    ) {
      const mailbox = yield* sql`SELECT 1 FROM mailboxes WHERE id = ${mailboxId} AND user_id = ${userId} AND status = 'active'`
      if (mailbox.length === 0) return yield* new NotFound({ message: "Mailbox not found", details: { mailbox_id: mailboxId } })
      if (filter.after !== undefined) {
        const cursor = yield* sql`SELECT 1 FROM emails WHERE id = ${filter.after} AND mailbox_id = ${mailboxId}`
        if (cursor.length === 0) return yield* ValidationError.field("after", "must be the id of an email in this mailbox")
      }
      return yield* listIn(sql`e.mailbox_id = ${mailboxId}`, page, sort, filter)
    })

    /** The emails of every active mailbox of the caller's (`listIn`). */
    const listAll = Effect.fn("Emails.listAll")(function*(
      userId: string,
      page: Page,
      sort: Sort<EmailSortField>,
      filter: EmailFilter = {}
    ) {
      if (filter.after !== undefined) {
        const cursor = yield* sql`
          SELECT 1 FROM emails e JOIN mailboxes m ON m.id = e.mailbox_id AND m.status = 'active'
          WHERE e.id = ${filter.after} AND e.user_id = ${userId}`
        if (cursor.length === 0) return yield* ValidationError.field("after", "must be the id of one of your emails")
      }
      return yield* listIn(
        sql`e.user_id = ${userId} AND e.mailbox_id IN (SELECT id FROM mailboxes WHERE user_id = ${userId} AND status = 'active')`,
        page,
        sort,
        filter
      )
    })

    /** The email with its bodies, headers and attachments' metadata. */
    const get = Effect.fn("Emails.get")(function*(userId: string, emailId: string) {
      const rows = yield* sql<EmailBodyRow>`
        SELECT ${sql.literal(emailBodyColumnList)}
        FROM emails e JOIN mailboxes m ON m.id = e.mailbox_id AND m.status = 'active'
        WHERE e.id = ${emailId} AND e.user_id = ${userId}`
      const row = rows[0]
      if (!row) return yield* emailNotFound(emailId)
      const attachments = yield* sql<AttachmentRow>`
        SELECT id, filename, content_type, size, checksum, content_id FROM attachments
        WHERE email_id = ${emailId} ORDER BY position`
      const deliveries = row.direction === "inbound" ? [] : yield* sql<DeliveryRow>`
        SELECT recipient, status, attempts, last_response, next_attempt_at, updated_at FROM outbound_deliveries
        WHERE email_id = ${emailId} ORDER BY recipient`
      return toEmail(row, attachments, deliveries)
    })

    /** The message exactly as it was received. */
    const raw = Effect.fn("Emails.raw")(function*(userId: string, emailId: string) {
      const rows = yield* sql<{ content: Uint8Array }>`
        SELECT b.content
        FROM emails e JOIN mailboxes m ON m.id = e.mailbox_id AND m.status = 'active'
                      JOIN blobs b ON b.sha256 = e.raw_sha256
        WHERE e.id = ${emailId} AND e.user_id = ${userId}`
      if (!rows[0]) return yield* emailNotFound(emailId)
      return rows[0].content
    })

    /** One attachment's decoded bytes and how to present them. */
    const attachment = Effect.fn("Emails.attachment")(function*(userId: string, emailId: string, attachmentId: string) {
      const rows = yield* sql<{ filename: string | null; contentType: string; content: Uint8Array }>`
        SELECT a.filename, a.content_type, b.content
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
      const rows = yield* sql<EmailRow>`
        SELECT ${columns}
        FROM emails e JOIN mailboxes m ON m.id = e.mailbox_id AND m.status = 'active'
        WHERE e.thread_id = ${threadId} AND e.user_id = ${userId}
        ORDER BY e.received_at, e.id`
      const first = rows[0]
      if (!first) return yield* new NotFound({ message: "Thread not found", details: { thread_id: threadId } })
      return {
        thread_id: threadId,
        mailbox_id: first.mailboxId,
        subject: first.subject,
        message_count: rows.length,
        emails: rows.map(toSummary)
      } satisfies Thread
    })

    return { list, listAll, get, raw, attachment, thread } as const
  })
}) {}
