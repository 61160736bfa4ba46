/**
 * Reading a raw MIME message into what Mailroom stores: headers, bodies, attachments (mailparser).
 *
 * Received mail is whatever senders wrote, so nothing here may fail on bad input:
 * - a message mailparser refuses (say, more than 1,000 MIME parts) is kept with the headers, sender
 *   and recipients a plain reading finds, and the body when it is a single plain-text part;
 * - NUL characters, which PostgreSQL text cannot hold, are removed;
 * - a header value is kept up to 64 KiB (the raw message keeps it whole);
 * - 8-bit body text that is no UTF-8 and named no charset (or named UTF-8 wrongly) reads as Windows-1252,
 *   its UTF-8 characters as UTF-8, whatever its transfer encoding;
 * - html whose Content-Type names no charset reads in the one its `<meta>` tag names, as browsers read it;
 * - raw header text (an attachment's name too) is UTF-8 when it is, ISO-2022-JP or ISO-2022-KR when it
 *   holds that charset's escapes, HZ when the message's text is HZ and it holds HZ's `~{`, else in the
 *   charset the message's text names, else Windows-1252.
 */
import libmime from "libmime"
import { type ParsedMail, simpleParser } from "mailparser"
import { Effect } from "effect"
import { domainToUnicode } from "node:url"
import { sha256 } from "../accounts/tokens.ts"
import { type AddressEntry, flatAddresses, isGroup, parseAddressField } from "./address-fields.ts"
import { declaredTextCharset, firstInvalidUtf8, headerBytesText, labelledLenientUtf8, legacyBytesAsUtf8, withHtmlMetaCharsets } from "./charsets.ts"
import { dateHeaderMoment } from "./date-header.ts"
import { textOfHtml } from "./extract/render.ts"
import type { Headers } from "./schemas.ts"

export interface ParsedAttachment {
  readonly filename: string | null
  readonly contentType: string
  readonly content: Uint8Array
  readonly size: number
  /** SHA-256 of the decoded bytes, lowercase hex. */
  readonly checksum: string
  readonly contentId: string | null
  /** The charset its Content-Type named, if any: what a text attachment's bytes are read by. */
  readonly charset: string | null
}

export interface ParsedEmail {
  readonly messageId: string | undefined
  readonly subject: string
  readonly from: string | undefined
  /** The From's display name, decoded; empty when it has none. */
  readonly fromName: string
  readonly to: ReadonlyArray<string>
  readonly cc: ReadonlyArray<string>
  readonly replyTo: ReadonlyArray<string>
  readonly date: Date | undefined
  readonly inReplyTo: string | undefined
  readonly references: ReadonlyArray<string>
  readonly text: string
  readonly html: string | null
  readonly headers: Headers
  readonly attachments: ReadonlyArray<ParsedAttachment>
}

const clean = (value: string) => value.replace(/\u0000/g, "")

/** A one-line text a reader is shown (a subject, a name): without control characters, tabs as spaces. */
// eslint-disable-next-line no-control-regex
const oneLine = (value: string) => value.replace(/\t/g, " ").replace(/[\u0000-\u001f\u007f]/g, "")

/** A Date header's time, when it is one a timestamp can show (years 1 to 9999); else none (the received time stands). */
const sentAt = (date: Date | undefined) => {
  const year = date?.getUTCFullYear()
  return year !== undefined && year >= 1 && year <= 9999 ? date : undefined
}

export const MAX_HEADER_VALUE = 64 * 1024
/** Any header block a message we accept can carry (mailparser's own default is 1 MiB). */
const MAX_HEAD_BYTES = 64 * 1024 * 1024

/**
 * The most MIME parts a message is read with (its text, html and attachments); one of more is kept
 * with its headers alone. A message of the largest size a plan takes (25 MB) has fewer unless its
 * parts are nearly empty.
 */
const MAX_PARTS = 10_000

const capped = (value: string) => (value.length > MAX_HEADER_VALUE ? value.slice(0, MAX_HEADER_VALUE) : value)

/** An encoded word (RFC 2047): its charset (a language after `*` aside), B or Q, its text. */
const ENCODED_WORD = /=\?([^?*\s]+)((?:\*[^?\s]*)?\?([bq])\?([^?\s]*)\?=)/gi

const wordBytes = (encoding: string, text: string): Buffer =>
  encoding.toLowerCase() === "b"
    ? Buffer.from(text, "base64")
    : Buffer.from(text.replace(/_/g, " ").replace(/=([0-9a-f]{2})/gi, (_, hex: string) => String.fromCharCode(parseInt(hex, 16))), "latin1")

/** Whether `tail` is the start of a UTF-8 character, its lead byte and fewer continuation bytes than it needs. */
const unfinished = (tail: Uint8Array): boolean => {
  const lead = tail[0]!
  const length = lead >= 0xc2 && lead <= 0xdf ? 2 : lead >= 0xe0 && lead <= 0xef ? 3 : lead >= 0xf0 && lead <= 0xf4 ? 4 : 0
  return tail.length < length && tail.subarray(1).every((byte) => byte >= 0x80 && byte <= 0xbf)
}

/**
 * `value` with the encoded words that say UTF-8 and are not (`=?utf-8?Q?caf=E9?=`, the sender's
 * mistake bodies are read past too) saying Windows-1252. Words next to each other (white space
 * between) are judged together: a character's bytes may be split between two of them.
 */
const withWrongUtf8Words = (value: string): string => {
  const words = [...value.matchAll(ENCODED_WORD)]
  if (!words.some((word) => /^utf-?8$/i.test(word[1]!))) return value
  const wrong = new Set<RegExpMatchArray>()
  let run: Array<RegExpMatchArray> = []
  // Each word with the start of a character the word before it left unfinished (`carry`, of `carrier`).
  const judge = () => {
    let carry = Buffer.alloc(0)
    let carrier: RegExpMatchArray | undefined
    for (const word of run) {
      let bytes = Buffer.concat([carry, wordBytes(word[3]!, word[4]!)])
      if (firstInvalidUtf8(bytes) < carry.length) {
        wrong.add(carrier!)
        bytes = bytes.subarray(carry.length)
      }
      const bad = firstInvalidUtf8(bytes)
      const left = bad < bytes.length && unfinished(bytes.subarray(bad))
      if (bad < bytes.length && !left) wrong.add(word)
      carry = left ? bytes.subarray(bad) : Buffer.alloc(0)
      carrier = left ? word : undefined
    }
    if (carrier !== undefined) wrong.add(carrier)
    run = []
  }
  for (const [i, word] of words.entries()) {
    const previous = words[i - 1]
    const adjacent = previous !== undefined && /^\s*$/.test(value.slice(previous.index! + previous[0].length, word.index!))
    if (!adjacent || !/^utf-?8$/i.test(word[1]!)) judge()
    if (/^utf-?8$/i.test(word[1]!)) run.push(word)
  }
  judge()
  if (wrong.size === 0) return value
  let out = ""
  let copied = 0
  for (const word of wrong) {
    out += `${value.slice(copied, word.index!)}=?windows-1252${word[2]!}`
    copied = word.index! + word[0].length
  }
  return out + value.slice(copied)
}

const decodeWords = (value: string) => {
  try {
    return libmime.decodeWords(withWrongUtf8Words(value))
  } catch {
    return value
  }
}

/** What raw header text headerBytesText may read otherwise than as ASCII: 8-bit bytes, ISO-2022's ESC and SO, HZ's `~{`. */
const RAW_TEXT = /[\x80-\xff\x1b\x0e]|~\{/

/**
 * A header line as its sender wrote it. Lines come as binary strings (a character a byte): raw text
 * is read as charsets.ts headerBytesText reads it (UTF-8, RFC 6532's, when it is; ISO-2022-JP or
 * ISO-2022-KR when it holds that charset's escapes; HZ when the message's text is; else `declared`,
 * the charset the message's text names, or Windows-1252).
 */
const headerText = (line: string, declared: string | undefined): string =>
  RAW_TEXT.test(line) ? headerBytesText(Buffer.from(line, "latin1"), declared) : line

/** Header lines ("Key: value", possibly folded) to lower-cased names and decoded values. */
const headersOf = (lines: ReadonlyArray<string>, declared: string | undefined): Headers => {
  const headers: Record<string, string | Array<string>> = {}
  for (const line of lines) {
    const { key, value } = libmime.decodeHeader(headerText(line, declared))
    if (key === "") continue
    const name = clean(key)
    const decoded = clean(decodeWords(capped(value)))
    const existing = headers[name]
    if (existing === undefined) headers[name] = decoded
    else if (Array.isArray(existing)) existing.push(decoded)
    else headers[name] = [existing, decoded]
  }
  return headers
}

/** The name beside the first address of `entries` (groups read in order); undefined when there is no address. */
const firstName = (entries: ReadonlyArray<AddressEntry>): string | undefined => {
  for (const entry of entries) {
    const name = isGroup(entry) ? firstName(entry.group) : entry.address ? entry.name : undefined
    if (name !== undefined) return name
  }
  return undefined
}

/** mailparser's rule for an address whose domain starts with a punycode label: the domain in Unicode. */
export const inUnicode = (address: string) => {
  if (!/@xn--/.test(address)) return address
  const at = address.lastIndexOf("@")
  return `${address.slice(0, at + 1)}${domainToUnicode(address.slice(at + 1)) || address.slice(at + 1)}`
}

/**
 * Whether a From's address is one a reader could write to: something on each side of an @. A From of
 * "Just A Name", `<<not an address>>` or `<ada>` names none, and the envelope sender stands for it.
 */
const isMailbox = (address: string) => {
  const at = address.lastIndexOf("@")
  return at > 0 && at < address.length - 1
}

/**
 * The name a From that names no address is shown by: the field as written, decoded, on one line, but
 * for an empty address (`<>`, the null sender's) and the quotes around a name (`"Mail Delivery" <>`).
 */
const nameOfNoAddress = (written: string | undefined) => {
  if (written === undefined) return ""
  const name = oneLine(decodeWords(written.replace(/<\s*>/g, ""))).trim()
  return /^"[^"]*"$/.test(name) ? name.slice(1, -1).trim() : name
}

/**
 * The addresses of a message's address fields `values` (each unfolded, its encoded words as written),
 * as mailparser would give them but read by address-fields.ts: groups flattened, a punycode domain in
 * Unicode, and a name that is nothing but base64 encoded words holding addresses read for them.
 */
const fieldAddresses = (values: ReadonlyArray<string>): Array<{ readonly address: string; readonly name: string }> =>
  values.flatMap(flatAddresses).flatMap((entry) =>
    !entry.address && ENCODED_WORDS_ONLY.test(entry.name) ? flatAddresses(decodeWords(entry.name)) : [entry]
  ).flatMap((entry) => (entry.address ? [{ address: inUnicode(clean(entry.address)), name: oneLine(decodeWords(entry.name)).trim() }] : []))

/** A value that is one or more base64 encoded words and nothing else (mailparser reads those for addresses). */
const ENCODED_WORDS_ONLY = /^(=\?[^?]+\?[Bb]\?[^?]*\?=)(\s*=\?[^?]+\?[Bb]\?[^?]*\?=)*$/

/**
 * The message ids of In-Reply-To or References: each `<…>` (RFC 5322 allows them unseparated:
 * `<a@x><b@y>`), else words separated by white space (ids written bare).
 */
const idList = (value: string | Array<string> | undefined): Array<string> =>
  value === undefined
    ? []
    : (Array.isArray(value) ? value : [value])
      .flatMap((item) => item.match(/<[^<>]*>/g) ?? item.split(/\s+/))
      .map((id) => clean(id.trim()))
      .filter((id) => id.length > 0)

/** The `charset` parameter of a Content-Type mailparser read (a value with its parameters), if it names one. */
const charsetOf = (header: unknown): string | null => {
  const charset = typeof header === "object" && header !== null && "params" in header
    ? (header.params as Record<string, unknown> | undefined)?.charset
    : undefined
  return typeof charset === "string" && charset.trim() !== "" ? clean(charset.trim()).toLowerCase() : null
}

/** A header field's first line: a name of printable characters but the colon, then the colon. */
const FIELD_LINE = /^[\x21-\x39\x3b-\x7e]+[ \t]*:/

/**
 * `raw` with an empty line where its header block ends without one: at the first line that is neither
 * a header field nor a folded continuation (a message whose body follows its headers at once). Parsers
 * read the header block to the first empty line and drop the lines that are not fields: that body
 * would be lost. An mbox "From " line first is the block's. The raw message is kept as it came.
 */
const withBodySeparated = (raw: Buffer): Buffer => {
  let start = 0
  while (start < raw.length) {
    const newline = raw.indexOf(10, start)
    const end = newline === -1 ? raw.length : newline
    const line = raw.subarray(start, end > start && raw[end - 1] === 13 ? end - 1 : end).toString("latin1")
    if (line === "") return raw
    const continues = line.startsWith(" ") || line.startsWith("\t") || (start === 0 && line.startsWith("From "))
    if (!continues && !FIELD_LINE.test(line)) {
      if (start === 0) return raw
      return Buffer.concat([raw.subarray(0, start), Buffer.from(raw[end - 1] === 13 || newline === -1 ? "\r\n" : "\n"), raw.subarray(start)])
    }
    if (newline === -1) return raw
    start = newline + 1
  }
  return raw
}

/** Where the header block ends (the first empty line) and the body starts. */
const splitHead = (raw: Buffer): { head: string; body: Buffer } => {
  const crlf = raw.indexOf("\r\n\r\n")
  const lf = raw.indexOf("\n\n")
  const [end, gap] = crlf !== -1 && (lf === -1 || crlf < lf) ? [crlf, 4] : lf !== -1 ? [lf, 2] : [raw.length, 0]
  return { head: raw.subarray(0, end).toString("latin1"), body: raw.subarray(end + gap) }
}

/** The addresses of an address header's value, as a plain reading finds them: groups flattened. */
export const addressList = (value: string | undefined): Array<string> =>
  value === undefined ? [] : flatAddresses(value).flatMap((entry) => (entry.address ? [clean(entry.address)] : []))

/**
 * Every author the From names, in every From field (a message may carry two, and a mail program may
 * show either): `first`, the address parsing took as the sender, and each address of `fields`, the
 * stored From header's values. What the block lists judge and a filter's `from` reads, for mail
 * being received and for mail stored long ago alike.
 */
export const fromAuthors = (first: string | undefined, fields: string | ReadonlyArray<string> | null | undefined): Array<string> => {
  const values = fields === undefined || fields === null ? [] : typeof fields === "string" ? [fields] : fields
  return [...new Set([...(first === undefined || first === "" ? [] : [first]), ...values.flatMap(addressList)])]
}

/** The display name of the first address of an address header, its encoded words decoded; empty when it has none. */
export const displayName = (value: string | undefined): string =>
  value === undefined ? "" : oneLine(decodeWords(firstName(parseAddressField(value)) ?? "")).trim()

/** The first value of header `name` (the one mail programs show, when a message has several). */
export const firstOf = (headers: Headers, name: string): string | undefined => {
  const value = headers[name]
  return typeof value === "string" ? value : value?.[0]
}

/** What a plain reading of a message mailparser refused can still tell (see the module comment). */
const fallback = (raw: Uint8Array): ParsedEmail => {
  const { head, body } = splitHead(Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength))
  const headers = headersOf(head.split(/\r?\n(?![ \t])/).filter((line) => line.includes(":")), declaredTextCharset(Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength)))
  const first = (name: string) => firstOf(headers, name)
  const from = addressList(first("from")).find(isMailbox)
  const date = sentAt(first("date") ? dateHeaderMoment(first("date")!) ?? new Date(first("date")!) : undefined)
  const contentType = (first("content-type") ?? "text/plain").toLowerCase()
  const encoding = (first("content-transfer-encoding") ?? "7bit").toLowerCase().trim()
  const plainText = contentType.startsWith("text/plain") && ["7bit", "8bit", "binary"].includes(encoding)
  return {
    messageId: first("message-id"),
    subject: oneLine(first("subject") ?? "").trim(),
    from,
    fromName: from !== undefined ? displayName(first("from")) : nameOfNoAddress(first("from")),
    to: addressList(first("to")),
    cc: addressList(first("cc")),
    replyTo: addressList(first("reply-to")),
    date,
    inReplyTo: idList(first("in-reply-to"))[0],
    references: idList(first("references")),
    text: plainText ? clean(legacyBytesAsUtf8(body).toString("utf8")) : "",
    html: null,
    headers,
    attachments: []
  }
}

/** The text body of a message with html only, as parsing derives it (and text-repair.ts for mail stored without it). */
export const textFromHtml = (html: string): string => clean(textOfHtml(html))

/**
 * The address fields of a message, read from the fields as written (address-fields.ts: mailparser's
 * own reading takes `<"<ceo@bank.example>"@evil.example>` for ceo@bank.example). Names' encoded words
 * are decoded after the addresses are found, as mailparser does, so an encoded comma splits nothing.
 * The From a reader is shown is the first From field (mailparser keeps the last of several); To, Cc
 * and Reply-To list every field's addresses, as mailparser does.
 */
const addressFieldsOf = (headerLines: ReadonlyArray<{ readonly key: string; readonly line: string }>, declared: string | undefined) => {
  const values = (key: string) =>
    headerLines.filter((header) => header.key === key).map((header) => capped(libmime.decodeHeader(headerText(header.line, declared)).value))
  const addresses = (key: string) => fieldAddresses(values(key)).map((entry) => entry.address)
  const written = values("from")[0]
  const from = fieldAddresses(written === undefined ? [] : [written]).find((entry) => isMailbox(entry.address))
  return {
    from: from?.address,
    fromName: from?.name ?? nameOfNoAddress(written),
    to: addresses("to"),
    cc: addresses("cc"),
    replyTo: addresses("reply-to")
  }
}

/** How many characters `body` lost: U+FFFD stands for each. */
export const lostIn = (body: string | null): number => body === null ? 0 : body.split("\ufffd").length - 1

/**
 * A body mailparser read as UTF-8 that was not (8-bit text sent without a charset, or labelled UTF-8
 * wrongly: each byte became U+FFFD, the text lost) is read again with its UTF-8 characters as UTF-8
 * and its other bytes as Windows-1252, which is what such mail is nearly always written in: the
 * message with its 8-bit bytes that are no UTF-8 written as those characters in UTF-8, then (for text
 * sent quoted-printable or base64, whose bytes only the transfer encoding hides) with its text parts
 * that name no charset or name UTF-8 labelled to be read so (LENIENT_UTF8). A character whose bytes a
 * line break splits is then read alike whatever the transfer encoding: its bytes as Windows-1252, the
 * rest of the part as UTF-8. The text and the html are each taken from the reading that lost fewest
 * characters: a part that named its charset was read right the first time.
 */
const withLegacyText = (message: Buffer, parsed: { readonly text: string; readonly html: string | null }) => {
  if (lostIn(parsed.text) === 0 && lostIn(parsed.html) === 0) return Effect.succeed(parsed)
  const readings = [legacyBytesAsUtf8(message), labelledLenientUtf8(message)].filter((reading) => reading !== message)
  const better = (again: string | null, best: string | null): again is string => again !== null && lostIn(again) < lostIn(best)
  return Effect.reduce(readings, parsed, (best, reading) =>
    bodiesOf(reading).pipe(
      Effect.map((again) => ({
        text: better(again.text, best.text) ? again.text : best.text,
        html: better(again.html, best.html) ? again.html : best.html
      })),
      Effect.orElseSucceed(() => best)
    ))
}

const parserOptions = {
  // An html body is what the sender wrote or nothing; a text body is derived from html when missing.
  skipTextToHtml: true,
  skipImageLinks: true,
  // Passed on to mailsplit, whose 1 MiB default would refuse a message we accepted.
  maxHeadSize: MAX_HEAD_BYTES,
  // Likewise its 1,000 parts: a message of 1,500 small files was kept with its headers alone.
  maxChildNodes: MAX_PARTS
} as Parameters<typeof simpleParser>[1]

/**
 * The text and html of a parsed message. mailparser derives text from html only for a message whose
 * html stands alone or beside a text alternative: an html body beside attachments would have none
 * (and no snippet, no search by its words). A text alternative of white space alone beside html (what
 * some senders' templates send) is read from the html too: it is all the message says.
 */
const bodies = (parsed: ParsedMail) => {
  const html = typeof parsed.html === "string" ? parsed.html : undefined
  const text = typeof parsed.text === "string" ? parsed.text : undefined
  return {
    text: html !== undefined && (text === undefined || !/\S/.test(text)) ? textFromHtml(html) : clean(text ?? ""),
    html: html === undefined ? null : clean(html)
  }
}

const bodiesOf = (message: Buffer) => Effect.map(Effect.tryPromise(() => simpleParser(message, parserOptions)), bodies)

/**
 * An attachment's name as its sender wrote it. The parser reads a name written raw in 8-bit bytes that
 * are no UTF-8 as Latin-1 (`見積書` in Shift_JIS as "\u008c©\u0090Ï\u008f\u0091"), and one in raw
 * ISO-2022-JP as its escapes: such a name, found so in the message (`raw`, a binary string), is read
 * again as header text is (headerBytesText). No name keeps a C1 control character (U+0080 to U+009F).
 */
const filenameOf = (name: string, raw: () => string, declared: string | undefined): string => {
  const parsed = clean(name)
  const written = RAW_TEXT.test(parsed) && !/[^\x00-\xff]/.test(parsed) && raw().includes(parsed)
  // eslint-disable-next-line no-control-regex
  return (written ? headerBytesText(Buffer.from(parsed, "latin1"), declared) : parsed).replace(/[\u0080-\u009f]/g, "")
}

/** Parse `raw`; never fails (see the module comment). */
export const parseMessage = (raw: Uint8Array): Effect.Effect<ParsedEmail> => {
  const message = withHtmlMetaCharsets(withBodySeparated(Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength)))
  const declared = declaredTextCharset(message)
  // The message as a binary string, made only for an attachment name that needs it (filenameOf).
  let binary: string | undefined
  const asBinary = () => (binary ??= message.toString("latin1"))
  return Effect.tryPromise(() => simpleParser(message, parserOptions)).pipe(
    Effect.flatMap((parsed) => Effect.map(withLegacyText(message, bodies(parsed)), (body) => ({ parsed, body }))),
    Effect.map(({ body, parsed }): ParsedEmail => {
      const headers = headersOf(parsed.headerLines.map((header) => header.line), declared)
      // As RFC 5322 reads the field (years below 1000, two-digit years), else as mailparser read it.
      const written = firstOf(headers, "date")
      const date = sentAt((written === undefined ? undefined : dateHeaderMoment(written)) ?? parsed.date)
      return {
        messageId: parsed.messageId ? clean(parsed.messageId) : undefined,
        // As the headers read it: the first Subject, raw 8-bit bytes as UTF-8 or else Windows-1252
        // (mailparser's own has U+FFFD for each Latin-1 byte, and is the last of several).
        subject: oneLine(firstOf(headers, "subject") ?? "").trim(),
        ...addressFieldsOf(parsed.headerLines, declared),
        date,
        inReplyTo: idList(parsed.inReplyTo)[0],
        references: idList(parsed.references),
        text: body.text,
        html: body.html,
        headers,
        attachments: parsed.attachments.map((attachment) => ({
          filename: attachment.filename ? filenameOf(attachment.filename, asBinary, declared) : null,
          contentType: clean(attachment.contentType || "application/octet-stream"),
          content: attachment.content,
          size: attachment.content.byteLength,
          checksum: sha256(attachment.content),
          contentId: attachment.contentId ? clean(attachment.contentId) : null,
          charset: charsetOf(attachment.headers.get("content-type"))
        }))
      }
    }),
    Effect.catchAll((error) =>
      Effect.logWarning("A message could not be parsed; keeping its headers only", error).pipe(Effect.as(fallback(message)))
    ),
    Effect.withSpan("parseMessage")
  )
}
