/**
 * Building an outgoing message: MIME by nodemailer's composer (the library every Node mailer uses),
 * then a DKIM signature (dkim-signature.ts). The bytes made here are stored and sent as they are:
 * the sent email's raw is exactly what every recipient gets, on every attempt.
 *
 * Only bytes the caller gave are used: the composer's file and URL access are off, so an attachment
 * can never name a path on this machine or an address to fetch.
 */
import { Effect } from "effect"
import { randomBytes } from "node:crypto"
import MailComposer from "nodemailer/lib/mail-composer"
import { detectMimeType, encodeWord, foldLines } from "nodemailer/lib/mime-funcs"
import { textOfHtml } from "../mail/extract/render.ts"
import { outgoingContentType } from "./attachment-types.ts"
import { type DkimKey, dkimSign } from "./dkim-signature.ts"
import type { AttachmentInput } from "./schemas.ts"
import { sevenBit } from "./seven-bit.ts"

export interface NamedAddress {
  readonly name?: string | undefined
  readonly address: string
}

export interface Composition {
  readonly from: NamedAddress
  readonly to: ReadonlyArray<NamedAddress>
  readonly cc: ReadonlyArray<NamedAddress>
  readonly replyTo?: NamedAddress | undefined
  readonly subject: string
  readonly text?: string | undefined
  readonly html?: string | undefined
  readonly attachments: ReadonlyArray<AttachmentInput>
  /**
   * A calendar message (iMIP, RFC 6047): its iCalendar text as a `text/calendar; method=…` alternative
   * to the body, and as an `invite.ics` attachment for clients that read only attachments.
   */
  readonly calendar?: { readonly method: string; readonly content: string } | undefined
  readonly headers: Readonly<Record<string, string>>
  /** With the angle brackets. */
  readonly messageId: string
  readonly inReplyTo?: string | undefined
  readonly references: ReadonlyArray<string>
  readonly date: Date
  readonly dkim: DkimKey
}

export class CompositionError extends Error {}

/** The longest line a message may hold, without its CRLF (RFC 5322 §2.1.1). */
export const MAX_LINE = 998

/** The line length the composer folds a header to where it can (RFC 5322 §2.1.1 asks for 78 at most). */
const FOLD = 76
const FOLDED = 78

/**
 * Whether `content` can travel as a message/rfc822 part: such a part is never base64 (RFC 2046
 * §5.2.1), so it must already be mail: no NUL, no line over 998 octets.
 */
const isMailText = (content: Buffer) => {
  let lineStart = 0
  for (let i = 0; i < content.length; i++) {
    const byte = content[i]!
    if (byte === 0) return false
    if (byte === 10) {
      if (i - lineStart > MAX_LINE + 1) return false
      lineStart = i + 1
    }
  }
  return content.length - lineStart <= MAX_LINE
}

/**
 * An attachment as the composer takes it. An email attached (message/rfc822, say a forwarded .eml)
 * is an attachment, not part of the text (the composer would show it inline, and readers, ours too,
 * would take it for more of the body); one whose bytes are no mail a part of that type may carry goes
 * as application/octet-stream, in base64, under its own filename.
 */
const attachmentPart = (a: AttachmentInput) => {
  const content = Buffer.from(a.content, "base64")
  // The media type in lower case (MIME reads it in any case; mail programs do not all), a text one with its charset (attachment-types.ts).
  const type = outgoingContentType(a.content_type, detectMimeType(a.filename), content)
  const message = type?.split(";")[0] === "message/rfc822"
  const contentType = type === undefined ? undefined : message && !isMailText(content) ? "application/octet-stream" : type
  const typed = contentType ?? detectMimeType(a.filename)
  const named = unfoldableFilename(a.filename)
    ? {
      // Both parameters given as the composer reads them, so that it writes each as RFC 2231 continuations;
      // inline for an image with a content id, as the composer has it.
      filename: false as const,
      contentType: `${typed}; name=${quoted(a.filename)}`,
      contentDisposition: `${/^image\//i.test(typed) && a.content_id ? "inline" : "attachment"}; filename=${quoted(a.filename)}`
    }
    : { filename: a.filename, ...(contentType === undefined ? {} : { contentType }), ...(message ? { contentDisposition: "attachment" as const } : {}) }
  // A content id no line can hold (a forward's, as received) is left out, as a message id is (fitsALine).
  return { ...named, content, ...(a.content_id && fitsALine(`Content-ID: <${a.content_id}>`) ? { cid: a.content_id } : {}) }
}

/** `text` as a quoted string (RFC 5322 §3.2.4). */
const quoted = (text: string) => `"${text.replace(/["\\]/g, "\\$&")}"`

/**
 * Whether an attachment's ASCII file name holds a word no fold can bring within 78 octets. The composer
 * writes a file name twice: in Content-Disposition's filename, in RFC 2231 continuations when long, and
 * in Content-Type's name (what some mail programs read), there as it is, so a long one (a forward's, as
 * received: any length) went as one line of it, past 998 octets for the longest. Such a name is given
 * to the composer as both parameters, which it then writes in continuations that fold. A name with other
 * characters the composer encodes itself, in words that fold.
 */
const unfoldableFilename = (filename: string): boolean =>
  /^[\x20-\x7e]*$/.test(filename) && foldLines(`Content-Type: x; name=${quoted(filename)}`, FOLD).split("\r\n").some((line) => line.length > FOLDED)

const UNDISCLOSED = "undisclosed-recipients:;"

/**
 * An unstructured field's ASCII value (a subject, a sender's X- field) as the composer can fold within
 * `limit`: as given when its words allow that, else as encoded words (RFC 2047 lets ASCII be encoded
 * too), which fold between one another. A word is never broken: a subject of one 1,140-character URL
 * (an answer's `Re:` keeps it whole) would go as a line over the 998 octets strict receivers take.
 * A value holding other characters is the composer's to encode whole, as it does.
 */
const foldable = (name: string, value: string, limit: number): string =>
  /[^\x20-\x7e\t]/.test(value) || foldLines(`${name}: ${value}`, FOLD).split("\r\n").every((line) => line.length <= limit)
    ? value
    : encodeWord(value, "B", 52)

/**
 * Whether a message id fits a line: the composer folds In-Reply-To and References between ids, so each
 * id is a line of its own behind one space at most. One that does not fit is left out (RFC 5322 §3.6.4
 * lets References be trimmed): received mail may name itself by an id of any length.
 */
const fitsALine = (id: string) => Buffer.byteLength(id) + 1 <= MAX_LINE

/**
 * Whether display name `name` in field `key` holds a word no fold can bring within 78 octets (a run of
 * 200 letters, a long token a reply-all took from received mail): the composer writes an ASCII name as
 * it is, or quoted, and never breaks a word, so the field would go as one line of it, past 998 octets
 * for the longest. A name with other characters the composer encodes itself, in words that fold.
 */
const unfoldableName = (key: string, name: string): boolean =>
  /^[\x20-\x7e]*$/.test(name) &&
  foldLines(`${key}: "${name.replace(/["\\]/g, "\\$&")}"`, FOLD).split("\r\n").some((line) => line.length > FOLDED)

/**
 * The address fields' display names the composer could not fold (unfoldableName), each under a
 * stand-in name the composer writes as it is (letters and digits), and the encoded words (RFC 2047 Q,
 * at most 75 characters each, which fold between one another) that take its place (withEncodedNames):
 * a receiver decodes them to the name as given.
 */
class EncodedNames {
  readonly words = new Map<string, string>()
  private readonly tag = randomBytes(6).toString("hex")

  address(key: string, address: NamedAddress) {
    if (!address.name) return address.address
    if (!unfoldableName(key, address.name)) return { name: address.name, address: address.address }
    const standIn = `mailroomname${this.words.size}x${this.tag}`
    this.words.set(standIn, encodeWord(address.name, "Q", 52))
    return { name: standIn, address: address.address }
  }
}

/**
 * `unsigned` with each stand-in name of `names` in its header replaced by the name's encoded words,
 * each field so changed folded again at 76 (between the words, and the addresses as before).
 */
const withEncodedNames = (unsigned: Buffer, names: EncodedNames): Buffer => {
  const end = unsigned.indexOf("\r\n\r\n")
  if (names.words.size === 0 || end < 0) return unsigned
  // A binary string: an address's UTF-8 (SMTPUTF8) stays its bytes, and lengths are octets.
  const fields = unsigned.subarray(0, end).toString("latin1").split(/\r\n(?![ \t])/).map((field) => {
    const unfolded = field.replace(/\r\n(?=[ \t])/g, "")
    let named = unfolded
    for (const [standIn, words] of names.words) named = named.split(standIn).join(words)
    return named === unfolded ? field : foldLines(named, FOLD)
  })
  return Buffer.concat([Buffer.from(fields.join("\r\n"), "latin1"), unsigned.subarray(end)])
}

/**
 * `unsigned` with an empty Subject field when the message has no subject: the composer leaves the
 * field out then, and mail without one counts against its sender (SpamAssassin's MISSING_SUBJECT).
 * RFC 5322 lets a Subject be empty.
 */
const withSubject = (unsigned: Buffer, subject: string): Buffer => {
  const end = unsigned.indexOf("\r\n\r\n")
  if (subject.trim() !== "" || end < 0) return unsigned
  return Buffer.concat([unsigned.subarray(0, end), Buffer.from("\r\nSubject: "), unsigned.subarray(end)])
}

/** The message, signed, as bytes with CRLF line ends. */
export const compose = (message: Composition): Effect.Effect<Uint8Array, CompositionError> => {
  const names = new EncodedNames()
  return Effect.tryPromise({
    try: () =>
      new MailComposer({
        from: names.address("From", message.from),
        // A message to Bcc recipients only still says whom it is to, as RFC 5322 allows (an empty
        // group): with no To at all, spam filters count it against the sender (SpamAssassin's MISSING_HEADERS).
        to: message.to.length === 0 && message.cc.length === 0 ? UNDISCLOSED : message.to.map((to) => names.address("To", to)),
        cc: message.cc.length > 0 ? message.cc.map((cc) => names.address("Cc", cc)) : undefined,
        replyTo: message.replyTo ? names.address("Reply-To", message.replyTo) : undefined,
        subject: foldable("Subject", message.subject, FOLDED),
        // An HTML body goes with a text alternative, its text as a mail reader renders it, when none is
        // given: some readers show text only, and HTML alone counts against the sender (MIME_HTML_ONLY).
        text: message.text ?? (message.html === undefined ? undefined : textOfHtml(message.html)),
        html: message.html,
        attachments: message.attachments.map(attachmentPart),
        ...(message.calendar ? { icalEvent: { method: message.calendar.method, content: message.calendar.content } } : {}),
        // A sender's own X- field is encoded only when it could not be sent otherwise: a receiver's automation
        // reads it. The others here (List-Unsubscribe) are structured, and Mailroom's own.
        headers: Object.fromEntries(
          Object.entries(message.headers).map(([name, value]) => [name, /^x-/i.test(name) ? foldable(name, value, MAX_LINE) : value])
        ),
        messageId: message.messageId,
        inReplyTo: message.inReplyTo !== undefined && fitsALine(message.inReplyTo) ? message.inReplyTo : undefined,
        references: message.references.some(fitsALine) ? message.references.filter(fitsALine) : undefined,
        date: message.date,
        newline: "\r\n",
        disableFileAccess: true,
        disableUrlAccess: true,
        xMailer: false
      }).compile().build(),
    catch: (cause) => new CompositionError(`The message could not be built: ${cause instanceof Error ? cause.message : String(cause)}`, { cause })
  }).pipe(
    Effect.flatMap((unsigned) =>
      // The sender's own fields (`headers`: X-Ticket, …) are signed too: a receiver's automation may act on them.
      // Made 7-bit first (seven-bit.ts): the composer writes 7-bit parts, but an attached email (message/rfc822,
      // never base64) keeps its 8-bit bytes, which a server without 8BITMIME may not be given.
      Effect.mapError(
        dkimSign(sevenBit(withEncodedNames(withSubject(unsigned, message.subject), names)), message.dkim, message.date, Object.keys(message.headers)),
        (cause) => new CompositionError(`The message could not be signed: ${cause.message}`, { cause })
      )
    ),
    Effect.map((signed) => new Uint8Array(signed.buffer, signed.byteOffset, signed.byteLength))
  )
}
