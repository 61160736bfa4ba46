/**
 * Received mail an earlier version stored with less than its message says; `repairText` mends it from
 * what is stored, extracts a received email's content again, and indexes the words of the emails it
 * changed afresh; `mailroom reindex` runs it first (src/reindex.ts):
 *
 * - **html and no text**: until parsing derived the text of an html body that stands beside
 *   attachments (mailparser derives none there), such an email had no snippet, was not found by its
 *   words, and, received, had no codes or reply text extracted. Its text is derived as parsing now does.
 * - **characters lost**: until parsing read 8-bit text sent without a charset (or labelled UTF-8
 *   wrongly) as Windows-1252, each such byte was stored as U+FFFD ("Caf� cr�me"). A received email
 *   whose text or html holds U+FFFD is parsed again from its raw message, and takes the text and html
 *   that lost fewer characters.
 *
 * Emails of deleted mailboxes are left alone; an html body with no text in it (images only), and a
 * message whose U+FFFD is its own, stay as they are, and are looked at again by each run.
 */
import { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"
import { retryOnConflict } from "../health/dependency-health.ts"
import { extract } from "../mail/extract.ts"
import { lostIn, parseMessage, textFromHtml } from "../mail/parse.ts"
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

const LOST = "\ufffd"

interface StoredWithLostCharacters {
  readonly id: string
  readonly subject: string
  readonly textBody: string
  readonly htmlBody: string | null
  readonly headers: Headers
  readonly rawSha256: string
}

/**
 * One page of received emails (after `afterId`, in id order) whose text or html holds U+FFFD, each
 * parsed again from its raw message and given the text and html that lost fewer characters, its
 * content extracted again. Answers as `deriveMissingText` does.
 */
export const rereadLostText = (sql: SqlClient.SqlClient, afterId: string, pageSize: number) =>
  Effect.gen(function*() {
    const page = yield* sql<StoredWithLostCharacters>`
      SELECT e.id, e.subject, e.text_body, e.html_body, e.headers, e.raw_sha256
      FROM emails e JOIN mailboxes m ON m.id = e.mailbox_id AND m.status = 'active'
      WHERE e.direction = 'inbound' AND (strpos(e.text_body, ${LOST}) > 0 OR strpos(e.html_body, ${LOST}) > 0) AND e.id > ${afterId}
      ORDER BY e.id
      LIMIT ${pageSize}`
    // One raw message in memory at a time (read one by one): each may be as large as the largest plan allows.
    const reread = yield* Effect.forEach(page, (email) =>
      Effect.gen(function*() {
        const [raw] = yield* sql<{ content: Uint8Array }>`SELECT content FROM blobs WHERE sha256 = ${email.rawSha256}`
        if (raw === undefined) return []
        const parsed = yield* parseMessage(raw.content)
        const text = lostIn(parsed.text) < lostIn(email.textBody) ? parsed.text : email.textBody
        const html = parsed.html !== null && lostIn(parsed.html) < lostIn(email.htmlBody) ? parsed.html : email.htmlBody
        if (text === email.textBody && html === email.htmlBody) return []
        const extracted = JSON.stringify(extract({ subject: email.subject, text, html, headers: email.headers }))
        return [{ id: email.id, text, html, extracted }]
      }))
    const mended = reread.flat()
    const changed = mended.length === 0 ? [] : yield* sql<{ id: string }>`
      UPDATE emails e SET text_body = d.text, html_body = d.html, extracted = d.extracted::jsonb
      FROM unnest(${mended.map((d) => d.id)}::text[], ${mended.map((d) => d.text)}::text[], ${mended.map((d) => d.html)}::text[],
                  ${mended.map((d) => d.extracted)}::text[]) AS d (id, text, html, extracted)
      WHERE e.id = d.id
      RETURNING e.id`
    return { last: page.length < pageSize ? null : page[page.length - 1]!.id, changed: changed.map((row) => row.id) } satisfies RepairedPage
  })

/** What `repairText` mended: emails given the text of their html, and emails whose lost characters were read again. */
export interface Repaired {
  readonly derived: number
  readonly reread: number
}

/**
 * Every email stored with html and no text given its text (`deriveMissingText`), every received one
 * whose characters were lost read again (`rereadLostText`), then each changed email's search data
 * forgotten and indexed again, so that its words are counted.
 */
export const repairText = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const indexer = yield* Indexer
  const repairAll = (pages: (after: string) => Effect.Effect<RepairedPage, SqlError>) =>
    Effect.gen(function*() {
      let repaired = 0
      let after: string | null = ""
      while (after !== null) {
        const { changed, last }: RepairedPage = yield* pages(after)
        // Emails indexed at once share the lexicon's rows: one that loses a deadlock is indexed again.
        yield* retryOnConflict(indexer.forget(changed))
        yield* Effect.forEach(changed, (id) => retryOnConflict(indexer.index(id)), {
          concurrency: CONCURRENCY,
          discard: true
        })
        repaired += changed.length
        after = last
      }
      return repaired
    })
  const derived = yield* repairAll((after) => deriveMissingText(sql, after, PAGE))
  const reread = yield* repairAll((after) => rereadLostText(sql, after, PAGE))
  return { derived, reread } satisfies Repaired
})
