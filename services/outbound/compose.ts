/**
 * Building an outgoing message: MIME by nodemailer's composer (the library every Node mailer uses),
 * then a DKIM signature (dkim-signature.ts). The bytes made here are stored and sent as they are:
 * the sent email's raw is exactly what every recipient gets, on every attempt.
 *
 * Only bytes the caller gave are used: the composer's file and URL access are off, so an attachment
 * can never name a path on this machine or an address to fetch.
 */
import { Effect } from "effect"
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
  return {
    filename: a.filename,
    content,
    ...(type === undefined ? {} : { contentType: message && !isMailText(content) ? "application/octet-stream" : type }),
    ...(message ? { contentDisposition: "attachment" as const } : {}),
    ...(a.content_id ? { cid: a.content_id } : {})
  }
}

const UNDISCLOSED = "undisclosed-recipients:;"

/** The line length the composer folds a header to where it can (RFC 5322 §2.1.1 asks for 78 at most). */
const FOLD = 76
const FOLDED = 78

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

const toComposer = (address: NamedAddress) => (address.name ? { name: address.name, address: address.address } : address.address)

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
export const compose = (message: Composition): Effect.Effect<Uint8Array, CompositionError> =>
  Effect.tryPromise({
    try: () =>
      new MailComposer({
        from: toComposer(message.from),
        // A message to Bcc recipients only still says whom it is to, as RFC 5322 allows (an empty
        // group): with no To at all, spam filters count it against the sender (SpamAssassin's MISSING_HEADERS).
        to: message.to.length === 0 && message.cc.length === 0 ? UNDISCLOSED : message.to.map(toComposer),
        cc: message.cc.length > 0 ? message.cc.map(toComposer) : undefined,
        replyTo: message.replyTo ? toComposer(message.replyTo) : undefined,
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
        dkimSign(sevenBit(withSubject(unsigned, message.subject)), message.dkim, message.date, Object.keys(message.headers)),
        (cause) => new CompositionError(`The message could not be signed: ${cause.message}`, { cause })
      )
    ),
    Effect.map((signed) => new Uint8Array(signed.buffer, signed.byteOffset, signed.byteLength))
  )
