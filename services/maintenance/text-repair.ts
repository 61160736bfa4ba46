/**
 * Mail stored with an html body and no text: until parsing derived the text of an html body that
 * stands beside attachments (mailparser derives none there), such an email had no snippet, was not
 * found by its words, and, received, had no codes or reply text extracted. `repairText` derives its
 * text as parsing now does, extracts a received email's content again, and indexes the words of the
 * emails it changed afresh; `mailroom reindex` runs it first (src/reindex.ts).
 *
 * Emails of deleted mailboxes are left alone; an html body with no text in it (images only) stays
 * without text, and is looked at again by each run.
 */
import { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"
import { extract } from "../mail/extract.ts"
import { textFromHtml } from "../mail/parse.ts"
import type { Headers } from "../mail/schemas.ts"
import { Indexer } from "../search/indexer.ts"

/** Emails looked at, and indexed again, at a time. */
const PAGE = 200
/** Emails indexed at once (the indexer batches them). */
const CONCURRENCY = 8

interface StoredWithoutText {
  readonly id: string
  readonly direction: "inbound" | "outbound"
  readonly subject: string
  readonly htmlBody: string
  readonly headers: Headers
}

/** A page looked at: where the next one starts (null: none left), and the emails given their text. */
export interface RepairedPage {
  readonly last: string | null
  readonly changed: ReadonlyArray<string>
}

/**
 * One page of emails (after `afterId`, in id order) stored with html and no text: each given the
 * text its html holds, and, received, its content extracted again. Answers the page's last id
 * (null when there are no more) and the ids of the emails changed.
 */
export const deriveMissingText = (sql: SqlClient.SqlClient, afterId: string, pageSize: number): Effect.Effect<RepairedPage, SqlError> =>
  Effect.gen(function*() {
    const page = yield* sql<StoredWithoutText>`
      SELECT e.id, e.direction, e.subject, e.html_body, e.headers
      FROM emails e JOIN mailboxes m ON m.id = e.mailbox_id AND m.status = 'active'
      WHERE e.text_body = '' AND e.html_body <> '' AND e.id > ${afterId}
      ORDER BY e.id
      LIMIT ${pageSize}`
    const derived = page.flatMap((email) => {
      const text = textFromHtml(email.htmlBody)
      if (text.trim() === "") return []
      const extracted = email.direction === "inbound"
        ? JSON.stringify(extract({ subject: email.subject, text, html: email.htmlBody, headers: email.headers }))
        : null
      return [{ id: email.id, text, extracted }]
    })
    const changed = derived.length === 0 ? [] : yield* sql<{ id: string }>`
      UPDATE emails e SET text_body = d.text, extracted = coalesce(d.extracted::jsonb, e.extracted)
      FROM unnest(${derived.map((d) => d.id)}::text[], ${derived.map((d) => d.text)}::text[],
                  ${derived.map((d) => d.extracted)}::text[]) AS d (id, text, extracted)
      WHERE e.id = d.id AND e.text_body = ''
      RETURNING e.id`
    return { last: page.length < pageSize ? null : page[page.length - 1]!.id, changed: changed.map((row) => row.id) }
  })

/**
 * Every email stored with html and no text given its text (`deriveMissingText`), then its search
 * data forgotten and indexed again, so that its words are counted. Answers how many emails changed.
 */
export const repairText = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const indexer = yield* Indexer
  let repaired = 0
  let after: string | null = ""
  while (after !== null) {
    const { changed, last }: RepairedPage = yield* deriveMissingText(sql, after, PAGE)
    yield* indexer.forget(changed)
    yield* Effect.forEach(changed, (id) => indexer.index(id), { concurrency: CONCURRENCY, discard: true })
    repaired += changed.length
    after = last
  }
  return repaired
})
