/**
 * A message a client composed itself and submitted over SMTP (RFC 6409), made ready to send: what a
 * message submission agent checks and completes before the message leaves (§8), and nothing more.
 * Its MIME, headers and body are the client's and go out as written, so that what the client kept
 * as sent is what its recipients get, save 8-bit text, which is made 7-bit where that keeps its
 * meaning (seven-bit.ts: quoted-printable bodies, encoded words): not every receiving server takes 8-bit mail.
 *
 * - The header From must be the sending mailbox's address, alone: the client cannot send as anyone
 *   else, and the DKIM signature vouches for that address's domain. A Sender (or Resent-From,
 *   Resent-Sender) may only name it too.
 * - Bcc fields (Resent-Bcc too, RFC 5322 §3.6.6) are taken out (their recipients are in the envelope; the others must not see them),
 *   and so is a Return-Path (the receiving server writes the envelope sender there).
 * - A message without a Message-ID or a Date gets Mailroom's (`<email id@domain>`, now).
 */
import { flatAddresses } from "../mail/address-fields.ts"
import { MAX_LINE } from "./compose.ts"
import { sevenBit } from "./seven-bit.ts"

export interface SubmittedHeaders {
  /** The message to sign and send, with CRLF line ends. */
  readonly raw: Buffer
  /** The message's Message-ID with its angle brackets: the client's, else the one given. */
  readonly messageId: string
}

/** Why a submitted message cannot be sent as it is: the field at fault and what is wrong with it. */
export interface SubmittedRefusal {
  readonly field: "from" | "message"
  readonly message: string
}

interface Field {
  readonly name: string
  /** The field as written, folded lines and line ends included. */
  readonly text: string
}

/** Header fields as written, each with its continuation lines (RFC 5322 §2.2.3). */
const fieldsOf = (header: string): Array<Field> => {
  const fields: Array<Field> = []
  for (const line of header.split(/(?<=\r\n)/)) {
    const last = fields[fields.length - 1]
    if ((line.startsWith(" ") || line.startsWith("\t")) && last !== undefined) {
      fields[fields.length - 1] = { name: last.name, text: last.text + line }
    } else {
      // A field name is printable characters but the colon (RFC 5322 §3.6.8; obsolete syntax lets space precede the colon).
      const colon = line.indexOf(":")
      const name = colon > 0 ? line.slice(0, colon) : ""
      fields.push({ name: /^[\x21-\x39\x3b-\x7e]+[ \t]*$/.test(name) ? name.trimEnd().toLowerCase() : "", text: line })
    }
  }
  return fields
}

/** A field's value, unfolded. */
const valueOf = (field: Field) => field.text.slice(field.text.indexOf(":") + 1).replace(/\r\n([ \t])/g, "$1").trim()

/** The single address a From value names, or undefined when it names none or several. */
const singleAddress = (value: string): string | undefined => {
  const flat = flatAddresses(value)
  return flat.length === 1 && flat[0]!.address ? flat[0]!.address : undefined
}

/** The fields besides From that name who sends a message (RFC 5322 §3.6.2, §3.6.6). */
const SENDERS = new Set(["sender", "resent-from", "resent-sender"])

/** RFC 5322's date-time, as nodemailer writes it: `Tue, 24 Nov 2026 09:30:00 +0000`. */
const rfc5322Date = (date: Date) => date.toUTCString().replace(/GMT$/, "+0000")

/**
 * `raw` made ready to send from `mailboxAddress`, or why it cannot be. Line ends become CRLF (a
 * client may submit bare LFs; the wire and the signature need CRLF).
 */
export const prepareSubmitted = (
  raw: Uint8Array,
  options: { readonly mailboxAddress: string; readonly messageId: string; readonly date: Date }
): { readonly ok: SubmittedHeaders } | { readonly refused: SubmittedRefusal } => {
  const text = Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength).toString("latin1").replace(/\r?\n/g, "\r\n")
  const end = text.indexOf("\r\n\r\n")
  const header = end === -1 ? (text.endsWith("\r\n") ? text : `${text}\r\n`) : text.slice(0, end + 2)
  const body = end === -1 ? "" : text.slice(end + 4)
  const fields = fieldsOf(header)
  if (fields.some((field) => field.name === "")) {
    return { refused: { field: "message", message: "the message's header has a line that is not a field (Name: value)" } }
  }
  // What receiving servers refuse or cut (RFC 5322 §2.1.1, §2.3): refused here, where the client can be told.
  if (header.split("\r\n").some((line) => line.length > MAX_LINE)) {
    return { refused: { field: "message", message: `the message's header has a line longer than ${MAX_LINE} characters: fold it` } }
  }
  if (text.includes("\u0000")) return { refused: { field: "message", message: "the message holds a NUL character, which mail may not carry" } }

  const froms = fields.filter((field) => field.name === "from")
  if (froms.length !== 1) {
    return {
      refused: { field: "from", message: froms.length === 0 ? "the message has no From field" : "the message has more than one From field" }
    }
  }
  const from = singleAddress(valueOf(froms[0]!))
  if (from === undefined || from.toLowerCase() !== options.mailboxAddress.toLowerCase()) {
    return { refused: { field: "from", message: `From must be the sending mailbox's address, ${options.mailboxAddress}, alone` } }
  }
  // Nor on whose behalf it is sent: mail programs show a Sender as "X on behalf of" the From.
  for (const field of fields.filter((field) => SENDERS.has(field.name))) {
    const named = singleAddress(valueOf(field))
    if (named === undefined || named.toLowerCase() !== options.mailboxAddress.toLowerCase()) {
      const name = field.text.slice(0, field.text.indexOf(":")).trim()
      return { refused: { field: "from", message: `${name} must be the sending mailbox's address, ${options.mailboxAddress}, alone, or left out` } }
    }
  }

  const kept = fields.filter((field) => field.name !== "bcc" && field.name !== "resent-bcc" && field.name !== "return-path")
  const ids = kept.filter((field) => field.name === "message-id").map(valueOf)
  const clientId = ids.length === 1 && /^<[^<>\s]+@[^<>\s]+>$/.test(ids[0]!) ? ids[0]! : undefined
  const added = [
    ...(clientId === undefined ? [`Message-ID: ${options.messageId}\r\n`] : []),
    ...(kept.some((field) => field.name === "date") ? [] : [`Date: ${rfc5322Date(options.date)}\r\n`])
  ]
  // A malformed or repeated Message-ID is replaced: threads, replies and bounces go by it.
  const fieldsOut = clientId === undefined ? kept.filter((field) => field.name !== "message-id") : kept
  return {
    ok: {
      raw: sevenBit(Buffer.from(added.join("") + fieldsOut.map((field) => field.text).join("") + "\r\n" + body, "latin1")),
      messageId: clientId ?? options.messageId
    }
  }
}
