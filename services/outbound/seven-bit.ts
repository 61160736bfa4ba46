/**
 * A submitted message made 7-bit where that keeps its meaning, before it is signed and stored: a
 * receiving server that offers neither 8BITMIME nor SMTPUTF8 may be given 7-bit mail only (RFC 6152
 * §3, RFC 6531 §3.2), and mail programs submit 8-bit bodies and raw UTF-8 subjects as a matter of
 * course. Converting here, once, means every receiver gets the same signed bytes, and the copy the
 * mailbox keeps is the one that was sent.
 *
 * - A part whose body has 8-bit bytes under `7bit`, `8bit` or `binary` (or none) is re-encoded:
 *   quoted-printable for text, base64 for anything else; multiparts and attached messages are walked.
 *   Text that declared no charset is labelled with its own (utf-8, or unknown-8bit when it is no UTF-8):
 *   encoded, it would otherwise be read as US-ASCII.
 * - Header text in UTF-8 becomes RFC 2047 encoded words (Subject and the other unstructured fields,
 *   the display names of address fields) or RFC 2231 parameters (Content-Type, Content-Disposition).
 * - What cannot be written in ASCII is left as written: a non-ASCII address (its mailbox name has no
 *   7-bit form), a structured field holding UTF-8, bytes that are no UTF-8. Such a message needs
 *   SMTPUTF8, and the mta does not hand it to a server that does not offer it (layers/smtp-transport.ts).
 */
import * as base64 from "nodemailer/lib/base64"
import { buildHeaderValue, encodeWord, encodeWords, foldLines, parseHeaderValue } from "nodemailer/lib/mime-funcs"
import * as qp from "nodemailer/lib/qp"
import { flatAddresses, isGroup, parseAddressField } from "../mail/address-fields.ts"

interface Field {
  readonly name: string
  /** As written, continuation lines and the final CRLF included. */
  readonly text: string
}

/** Any byte above 127 (the strings here hold one byte a character, latin1). */
const EIGHT_BIT = /[\x80-\xff]/

/** Fields that name people: their display names are encoded, their addresses cannot be. */
const ADDRESS_FIELDS = new Set([
  "from",
  "sender",
  "reply-to",
  "to",
  "cc",
  "bcc",
  "resent-from",
  "resent-sender",
  "resent-to",
  "resent-cc",
  "disposition-notification-to"
])
/** Unstructured fields (RFC 5322 §3.6.5, RFC 2045 §8), whose whole text may be encoded words. */
const UNSTRUCTURED = new Set(["subject", "comments", "keywords", "content-description", "thread-topic"])

const fieldsOf = (header: string): Array<Field> => {
  const fields: Array<Field> = []
  for (const line of header.split(/(?<=\r\n)/)) {
    if (line === "") continue
    const last = fields[fields.length - 1]
    if ((line.startsWith(" ") || line.startsWith("\t")) && last !== undefined) fields[fields.length - 1] = { name: last.name, text: last.text + line }
    else fields.push({ name: line.slice(0, Math.max(line.indexOf(":"), 0)).trim().toLowerCase(), text: line })
  }
  return fields
}

const valueOf = (text: string) => text.slice(text.indexOf(":") + 1).replace(/\r\n([ \t])/g, "$1").trim()

/** Bytes as UTF-8 text, or undefined when they are no UTF-8. */
const utf8 = (latin1: string): string | undefined => {
  const bytes = Buffer.from(latin1, "latin1")
  const text = bytes.toString("utf8")
  return Buffer.from(text, "utf8").equals(bytes) ? text : undefined
}

/** A display name as a phrase: all encoded words when it is not ASCII (its specials too), quoted when it holds specials. */
const phrase = (name: string) =>
  /[^\x20-\x7e]/.test(name) ? encodeWord(name, "Q", 52) : /^[\w !#$%&'*+\-/=?^`{|}~]*$/.test(name) ? name : `"${name.replace(/(["\\])/g, "\\$1")}"`

const mailbox = (a: { readonly name: string; readonly address?: string | undefined }) => (a.name ? `${phrase(a.name)} <${a.address ?? ""}>` : a.address ?? "")

/** A field's 7-bit text (folded, with its CRLF), or undefined when it cannot have one. */
const sevenBitField = (field: Field): string | undefined => {
  const colon = field.text.indexOf(":")
  const name = field.text.slice(0, colon)
  const value = utf8(valueOf(field.text))
  if (value === undefined) return undefined
  let encoded: string | undefined
  if (ADDRESS_FIELDS.has(field.name)) {
    if (flatAddresses(value).some((a) => /[^\x00-\x7f]/.test(a.address))) return undefined
    encoded = parseAddressField(value).map((a) => (isGroup(a) ? `${phrase(a.name)}: ${a.group.map(mailbox).join(", ")};` : mailbox(a))).join(", ")
  } else if (field.name === "content-type" || field.name === "content-disposition") {
    encoded = buildHeaderValue(parseHeaderValue(value))
  } else if (UNSTRUCTURED.has(field.name) || field.name.startsWith("x-")) {
    encoded = encodeWords(value, "Q", 52)
  }
  if (encoded === undefined || EIGHT_BIT.test(encoded)) return undefined
  return `${foldLines(`${name}: ${encoded}`, 76)}\r\n`
}

/** Fields with `name`'s value replaced (the first kept in place, or added at the end). */
const withField = (fields: ReadonlyArray<Field>, name: string, value: string): Array<Field> => {
  const text = `${name}: ${value}\r\n`
  const at = fields.findIndex((f) => f.name === name.toLowerCase())
  if (at === -1) return [...fields, { name: name.toLowerCase(), text }]
  return fields.flatMap((f, i) => (f.name !== name.toLowerCase() ? [f] : i === at ? [{ name: f.name, text }] : []))
}

const wrapped = (lines: string) => lines.replace(/\r?\n/g, "\r\n")

/** The parts of a multipart body, between its preamble and epilogue (RFC 2046 §5.1.1). */
const splitMultipart = (body: string, boundary: string) => {
  const delimiter = new RegExp(`(?:^|\\r\\n)--${boundary.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}(--)?[ \\t]*(?=\\r\\n|$)`, "g")
  const pieces: Array<{ readonly start: number; readonly end: number; readonly close: boolean }> = []
  for (const match of body.matchAll(delimiter)) pieces.push({ start: match.index, end: match.index + match[0].length, close: match[1] === "--" })
  return pieces
}

/** One entity (a message, a part) with 7-bit text where it can have it. */
const sevenBitEntity = (entity: string, top = false): string => {
  const split = entity.startsWith("\r\n") ? 0 : entity.indexOf("\r\n\r\n")
  const header = split === -1 ? entity : entity.slice(0, split === 0 ? 0 : split + 2)
  let body = split === -1 ? "" : entity.slice(split === 0 ? 2 : split + 4)
  let fields = fieldsOf(header).map((field) => (EIGHT_BIT.test(field.text) ? { name: field.name, text: sevenBitField(field) ?? field.text } : field))
  const contentType = parseHeaderValue(valueOf(fields.find((f) => f.name === "content-type")?.text ?? "Content-Type: text/plain"))
  const type = contentType.value.toLowerCase()
  const cteField = fields.find((f) => f.name === "content-transfer-encoding")
  const encoding = cteField === undefined ? "7bit" : valueOf(cteField.text).toLowerCase()
  const identity = encoding === "7bit" || encoding === "8bit" || encoding === "binary"
  const boundary = contentType.params["boundary"]
  let reencoded = false

  if (type.startsWith("multipart/") && boundary) {
    const pieces = splitMultipart(body, boundary)
    if (pieces.length >= 2) {
      let out = ""
      // A preamble and an epilogue are not shown by readers (RFC 2046 §5.1.1): 8-bit ones are dropped.
      const preamble = body.slice(0, pieces[0]!.start)
      out += EIGHT_BIT.test(preamble) ? "" : preamble
      for (let i = 0; i < pieces.length; i++) {
        const piece = pieces[i]!
        out += body.slice(piece.start, piece.end)
        if (piece.close) {
          const epilogue = body.slice(piece.end)
          out += EIGHT_BIT.test(epilogue) ? "\r\n" : epilogue
          break
        }
        const next = pieces[i + 1]
        const part = body.slice(piece.end, next?.start ?? body.length)
        out += part.startsWith("\r\n") ? `\r\n${sevenBitEntity(part.slice(2))}` : part
      }
      body = out
    }
  } else if (type === "message/rfc822" && identity) {
    // A message of its own (RFC 2046 §5.2.1): a part it re-encodes needs its own MIME-Version to be read so.
    body = sevenBitEntity(body, true)
  } else if (EIGHT_BIT.test(body) && identity) {
    reencoded = true
    const bytes = Buffer.from(body, "latin1")
    const text = type.startsWith("text/")
    const isUtf8 = text && utf8(body) !== undefined
    body = text ? wrapped(qp.wrap(qp.encode(bytes), 76)) : `${base64.wrap(base64.encode(bytes), 76)}\r\n`
    fields = withField(fields, "Content-Transfer-Encoding", text ? "quoted-printable" : "base64")
    // Encoded, text without a charset would be read as US-ASCII (RFC 2045 §5.2): it is labelled with the
    // charset its bytes are in, utf-8 when they are UTF-8 (8-bit UTF-8 almost never happens by chance in
    // another charset), unknown-8bit (RFC 1428 §3) otherwise, so a reader falls back to its own guess. A
    // charset the sender declared is kept, whatever the bytes.
    if (text && contentType.params["charset"] === undefined) {
      const charset = isUtf8 ? "utf-8" : "unknown-8bit"
      const value = buildHeaderValue({ value: type, params: { ...contentType.params, charset } })
      fields = withField(fields, "Content-Type", foldLines(`Content-Type: ${value}`, 76).slice("Content-Type: ".length))
    }
    // A reader heeds Content-Transfer-Encoding in a MIME message only (RFC 2045 §4).
    if (top && !fields.some((f) => f.name === "mime-version")) fields = withField(fields, "MIME-Version", "1.0")
  }
  // A multipart or message labelled 8bit whose content is 7-bit now says so.
  if (!reencoded && cteField !== undefined && encoding !== "7bit" && identity && !EIGHT_BIT.test(body)) fields = withField(fields, "Content-Transfer-Encoding", "7bit")
  return `${fields.map((f) => f.text).join("")}${split === -1 ? "" : "\r\n"}${body}`
}

/** `raw` (CRLF line ends) with 7-bit text wherever the meaning allows; unchanged when it is 7-bit already. */
export const sevenBit = (raw: Buffer): Buffer => {
  const text = raw.toString("latin1")
  return EIGHT_BIT.test(text) ? Buffer.from(sevenBitEntity(text, true), "latin1") : raw
}
