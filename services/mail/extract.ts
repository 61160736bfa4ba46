/**
 * What an agent wants from a received email without reading it whole (issue 17, item 5): the new
 * text of a reply, the one-time codes, and the links, the confirmation, sign-in, password-reset and
 * unsubscribe ones marked. A pure function of the parsed message, computed once at ingest and
 * stored with the email (`emails.extracted`); an email stored before it existed gets it computed
 * from its stored bodies when read.
 */
import { extractCodes } from "./extract/codes.ts"
import { extractLinks } from "./extract/links.ts"
import { isDerivedText, readHtml } from "./extract/render.ts"
import { extractReplyText } from "./extract/reply.ts"
import type { Extracted } from "./extracted.ts"
import type { Headers } from "./schemas.ts"

export type { Extracted } from "./extracted.ts"

export interface ExtractionInput {
  readonly subject: string
  /** The text body (mailparser's rendering of the HTML when the message has no text part). */
  readonly text: string
  readonly html: string | null
  readonly headers: Headers
}

const headerValues = (headers: Headers, name: string): ReadonlyArray<string> => {
  const value = headers[name]
  return value === undefined ? [] : typeof value === "string" ? [value] : value
}

/**
 * Each answer on its own: one that fails on hostile input (a parser's recursion, say) is left empty
 * and the others are still given; ingest never fails on what a sender wrote.
 */
const guarded = <A>(empty: A, answer: () => A): A => {
  try {
    return answer()
  } catch {
    return empty
  }
}

/**
 * The most of an HTML body read: rendering costs some milliseconds per 100 KB, and what an agent
 * looks for (a code, a button, the new text) is near the top of any real message.
 */
export const MAX_HTML = 256 * 1024
/** The most of a text body (and of a subject) read, for the same reason: each reader's cost grows with what it is given. */
export const MAX_TEXT = 256 * 1024

export const extract = (message: ExtractionInput): Extracted => {
  const source = message.html !== null && message.html.trim() !== "" ? message.html : null
  const html = source === null ? null : readHtml(source.slice(0, MAX_HTML))
  // A text body mailparser derived from the HTML says nothing the HTML does not, and shows what it
  // hides; past MAX_HTML it is taken for derived rather than rendered once more to compare.
  const derived = html !== null && (!html.rendered || source!.length > MAX_HTML || isDerivedText(message.text, source!))
  const text = derived ? "" : message.text.slice(0, MAX_TEXT)
  const subject = message.subject.slice(0, MAX_TEXT)
  return {
    reply_text: guarded(null, () => extractReplyText(text !== "" ? text : html?.text ?? "", subject)),
    codes: guarded([], () => extractCodes(html === null ? [text] : [html.text, text], subject)),
    links: guarded([], () =>
      extractLinks({
        document: html?.document ?? null,
        htmlText: html?.text ?? "",
        text,
        listUnsubscribe: headerValues(message.headers, "list-unsubscribe")
      }))
  }
}
