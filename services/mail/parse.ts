/**
 * Reading a raw MIME message into what Mailroom stores: headers, bodies, attachments (mailparser).
 *
 * Received mail is whatever senders wrote, so nothing here may fail on bad input: a message that
 * mailparser cannot read is kept with the headers a plain split finds and an empty body; NUL
 * characters, which PostgreSQL text cannot hold, are removed.
 */
import { createHash } from "node:crypto"
import libmime from "libmime"
import { type AddressObject, type EmailAddress, simpleParser } from "mailparser"
import { Effect } from "effect"
import type { Headers } from "./schemas.ts"

export interface ParsedAttachment {
  readonly filename: string | null
  readonly contentType: string
  readonly content: Uint8Array
  readonly size: number
  /** SHA-256 of the decoded bytes, lowercase hex. */
  readonly checksum: string
  readonly contentId: string | null
}

export interface ParsedEmail {
  readonly messageId: string | undefined
  readonly subject: string
  readonly from: string | undefined
  readonly to: ReadonlyArray<string>
  readonly date: Date | undefined
  readonly inReplyTo: string | undefined
  readonly references: ReadonlyArray<string>
  readonly text: string
  readonly html: string | null
  readonly headers: Headers
  readonly attachments: ReadonlyArray<ParsedAttachment>
}

const clean = (value: string) => value.replace(/\u0000/g, "")

const decodeWords = (value: string) => {
  try {
    return libmime.decodeWords(value)
  } catch {
    return value
  }
}

/** Header lines ("Key: value", possibly folded) to lower-cased names and decoded values. */
const headersOf = (lines: ReadonlyArray<string>): Headers => {
  const headers: Record<string, string | Array<string>> = {}
  for (const line of lines) {
    const { key, value } = libmime.decodeHeader(line)
    if (key === "") continue
    const name = clean(key)
    const decoded = clean(decodeWords(value))
    const existing = headers[name]
    if (existing === undefined) headers[name] = decoded
    else if (Array.isArray(existing)) existing.push(decoded)
    else headers[name] = [existing, decoded]
  }
  return headers
}

const addresses = (field: AddressObject | Array<AddressObject> | undefined): Array<string> => {
  const flatten = (entries: ReadonlyArray<EmailAddress>): Array<string> =>
    entries.flatMap((entry) => (entry.group ? flatten(entry.group) : entry.address ? [clean(entry.address)] : []))
  if (field === undefined) return []
  return (Array.isArray(field) ? field : [field]).flatMap((object) => flatten(object.value))
}

const idList = (value: string | Array<string> | undefined): Array<string> =>
  value === undefined ? [] : (Array.isArray(value) ? value : value.split(/\s+/)).map((id) => clean(id.trim())).filter((id) => id.length > 0)

const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex")

/** The header block of a raw message, split the simple way (for messages mailparser cannot read). */
const rawHeaderLines = (raw: Uint8Array): Array<string> => {
  const text = Buffer.from(raw.subarray(0, Math.min(raw.byteLength, 1024 * 1024))).toString("utf8")
  const end = text.search(/\r?\n\r?\n/)
  const head = end === -1 ? text : text.slice(0, end)
  return head.split(/\r?\n(?![ \t])/).filter((line) => line.includes(":"))
}

const fallback = (raw: Uint8Array): ParsedEmail => {
  const headers = headersOf(rawHeaderLines(raw))
  const first = (name: string) => {
    const value = headers[name]
    return Array.isArray(value) ? value[0] : value
  }
  const date = first("date") ? new Date(first("date")!) : undefined
  return {
    messageId: first("message-id"),
    subject: first("subject") ?? "",
    from: undefined,
    to: [],
    date: date && !Number.isNaN(date.getTime()) ? date : undefined,
    inReplyTo: first("in-reply-to"),
    references: idList(first("references")),
    text: "",
    html: null,
    headers,
    attachments: []
  }
}

/** Parse `raw`; never fails (see the module comment). */
export const parseMessage = (raw: Uint8Array): Effect.Effect<ParsedEmail> =>
  Effect.tryPromise(() =>
    simpleParser(Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength), {
      // An html body is what the sender wrote or nothing; a text body is derived from html when missing.
      skipTextToHtml: true,
      skipImageLinks: true
    })
  ).pipe(
    Effect.map((parsed): ParsedEmail => {
      const date = parsed.date && !Number.isNaN(parsed.date.getTime()) ? parsed.date : undefined
      return {
        messageId: parsed.messageId ? clean(parsed.messageId) : undefined,
        subject: clean(parsed.subject ?? ""),
        from: addresses(parsed.from)[0],
        to: addresses(parsed.to),
        date,
        inReplyTo: idList(parsed.inReplyTo)[0],
        references: idList(parsed.references),
        text: clean(parsed.text ?? ""),
        html: typeof parsed.html === "string" ? clean(parsed.html) : null,
        headers: headersOf(parsed.headerLines.map((header) => header.line)),
        attachments: parsed.attachments.map((attachment) => ({
          filename: attachment.filename ? clean(attachment.filename) : null,
          contentType: clean(attachment.contentType || "application/octet-stream"),
          content: attachment.content,
          size: attachment.content.byteLength,
          checksum: sha256(attachment.content),
          contentId: attachment.contentId ? clean(attachment.contentId) : null
        }))
      }
    }),
    Effect.catchAll((error) =>
      Effect.logWarning("A message could not be parsed; keeping its headers only", error).pipe(Effect.as(fallback(raw)))
    ),
    Effect.withSpan("parseMessage")
  )
