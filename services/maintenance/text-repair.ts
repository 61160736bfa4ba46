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
 * - **HZ and ISO-2022-KR**: until charsets.ts read these two 7-bit charsets (RFC 1843, RFC 1557), a
 *   received email in them was stored as its bytes ("~{<:Ky2;~}", "$)C" and shifted letters). One
 *   whose subject, sender's name, text or html holds what they leave (`~{`, SO, ESC, `$)C`) and whose
 *   message names either charset is parsed again from its raw message: its subject, sender's name,
 *   headers, text, html and attachments' names as parsing now reads them, its content extracted again.
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
import { indexable } from "../mail/store.ts"
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

/** What HZ (`~{`) and ISO-2022-KR (SO, ESC, and `$)C` once a subject loses its ESC) leave in text stored as their bytes. */
const SEVEN_BIT_MARKS = ["~{", "\u000e", "\u001b", "$)C"]

/** The charsets a message names: Content-Type's `charset=`, an encoded word's (`=?…?`), an RFC 2231 parameter's (`*=…'`). */
const NAMED_CHARSET = /(?:\bcharset\s*=\s*["']?|=\?|\*=\s*["']?)([\w.:+-]+)/gi

/** Whether `raw` names HZ or ISO-2022-KR anywhere, by any of their names (as iconv-lite reads names: case and punctuation aside). */
export const namesSevenBitCharset = (raw: Uint8Array): boolean => {
  for (const [, name] of Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength).toString("latin1").matchAll(NAMED_CHARSET)) {
    if (["hzgb2312", "hz", "iso2022kr", "csiso2022kr"].includes(name!.toLowerCase().replace(/[^0-9a-z]/g, ""))) return true
  }
  return false
}

interface StoredInSevenBit {
  readonly id: string
  readonly subject: string
  readonly fromName: string | null
  readonly textBody: string
  readonly htmlBody: string | null
  readonly rawSha256: string
}

/**
 * One page of received emails (after `afterId`, in id order) whose subject, sender's name, text or
 * html holds what HZ or ISO-2022-KR stored as its bytes leaves (SEVEN_BIT_MARKS), each whose message
 * names either charset parsed again from its raw message: given the subject, sender's name, headers,
 * text, html and attachments' names (an attachment of the same bytes at the same place) parsing now
 * reads, its content extracted again, when they differ. Answers as `deriveMissingText` does.
 */
export const rereadSevenBitText = (sql: SqlClient.SqlClient, afterId: string, pageSize: number) =>
  Effect.gen(function*() {
    const holds = (column: string) => sql.or(SEVEN_BIT_MARKS.map((mark) => sql`strpos(${sql(column)}, ${mark}) > 0`))
    const page = yield* sql<StoredInSevenBit>`
      SELECT e.id, e.subject, e.from_name, e.text_body, e.html_body, e.raw_sha256
      FROM emails e JOIN mailboxes m ON m.id = e.mailbox_id AND m.status = 'active'
      WHERE e.direction = 'inbound' AND e.id > ${afterId}
        AND (${holds("text_body")} OR ${holds("html_body")} OR ${holds("subject")} OR ${holds("from_name")})
      ORDER BY e.id
      LIMIT ${pageSize}`
    const reread = yield* Effect.forEach(page, (email) =>
      Effect.gen(function*() {
        const [raw] = yield* sql<{ content: Uint8Array }>`SELECT content FROM blobs WHERE sha256 = ${email.rawSha256}`
        if (raw === undefined || !namesSevenBitCharset(raw.content)) return []
        const parsed = yield* parseMessage(raw.content)
        const subject = indexable(parsed.subject)
        const unchanged = subject === email.subject && parsed.fromName === (email.fromName ?? "") && parsed.text === email.textBody &&
          parsed.html === email.htmlBody
        if (unchanged) return []
        return [{
          id: email.id,
          subject,
          fromName: parsed.fromName,
          headers: JSON.stringify(parsed.headers),
          text: parsed.text,
          html: parsed.html,
          extracted: JSON.stringify(extract(parsed)),
          attachments: parsed.attachments.map((a, position) => ({ position, checksum: a.checksum, filename: a.filename }))
        }]
      }))
    const mended = reread.flat()
    if (mended.length === 0) return { last: page.length < pageSize ? null : page[page.length - 1]!.id, changed: [] } satisfies RepairedPage
    const changed = yield* sql<{ id: string }>`
      UPDATE emails e SET subject = d.subject, from_name = d.from_name, headers = d.headers::jsonb, text_body = d.text,
                          html_body = d.html, extracted = d.extracted::jsonb
      FROM unnest(${mended.map((d) => d.id)}::text[], ${mended.map((d) => d.subject)}::text[], ${mended.map((d) => d.fromName)}::text[],
                  ${mended.map((d) => d.headers)}::text[], ${mended.map((d) => d.text)}::text[], ${mended.map((d) => d.html)}::text[],
                  ${mended.map((d) => d.extracted)}::text[]) AS d (id, subject, from_name, headers, text, html, extracted)
      WHERE e.id = d.id
      RETURNING e.id`
    const named = mended.flatMap((d) => d.attachments.map((a) => ({ id: d.id, ...a })))
    if (named.length > 0) {
      yield* sql`
        UPDATE attachments a SET filename = d.filename
        FROM unnest(${named.map((a) => a.id)}::text[], ${named.map((a) => a.position)}::int[], ${named.map((a) => a.checksum)}::text[],
                    ${named.map((a) => a.filename)}::text[]) AS d (email_id, position, checksum, filename)
        WHERE a.email_id = d.email_id AND a.position = d.position AND a.checksum = d.checksum AND a.filename IS DISTINCT FROM d.filename`
    }
    return { last: page.length < pageSize ? null : page[page.length - 1]!.id, changed: changed.map((row) => row.id) } satisfies RepairedPage
  })

/**
 * What `repairText` mended: emails given the text of their html, emails whose lost characters were
 * read again, and emails in HZ or ISO-2022-KR read again.
 */
export interface Repaired {
  readonly derived: number
  readonly reread: number
  readonly sevenBit: number
}

/**
 * Every email stored with html and no text given its text (`deriveMissingText`), every received one
 * whose characters were lost read again (`rereadLostText`), every received one in HZ or ISO-2022-KR
 * read again (`rereadSevenBitText`), then each changed email's search data forgotten and indexed
 * again, so that its words are counted.
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
  const sevenBit = yield* repairAll((after) => rereadSevenBitText(sql, after, PAGE))
  return { derived, reread, sevenBit } satisfies Repaired
})
