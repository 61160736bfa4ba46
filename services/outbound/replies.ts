/**
 * Replying to and forwarding an email of one of the caller's mailboxes (issue 16). The answer is sent
 * from the mailbox that holds the original, so the conversation stays in one place.
 *
 * - Reply: to the original's Reply-To, else its From; for mail the mailbox sent, to its recipients.
 * - Reply all: the same, plus the original's To and Cc, minus the mailbox itself, each address once.
 * - Subjects get one `Re:` / `Fwd:` (none added when one is there already).
 * - In-Reply-To is the original's Message-ID; References its References followed by its Message-ID
 *   (RFC 5322 §3.6.4), so every mail client threads the answer, and so does Mailroom on both sides.
 * - Forward: the original's text below a "Forwarded message" block, and its attachments come along.
 */
import { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Schema } from "effect"
import libmime from "libmime"
import { detectExtension } from "nodemailer/lib/mime-funcs"
import { NotFound, ValidationError } from "../errors.ts"
import { escapeHtml } from "../html.ts"
import { flatAddresses } from "../mail/address-fields.ts"
import { routingForm } from "../mail/inbound.ts"
import { textFromHtml } from "../mail/parse.ts"
import { firstHeader, Headers } from "../mail/schemas.ts"
import { unquotedLocal } from "../mailboxes/rules.ts"
import type { NamedAddress } from "./compose.ts"
import { storedContentType } from "./attachment-types.ts"
import {
  type AddressInput,
  type AttachmentInput,
  type DraftContent,
  type ForwardInput,
  isAddress,
  MAX_ATTACHMENTS,
  MAX_RECIPIENTS,
  type ReplyInput,
  withAsciiDomain
} from "./schemas.ts"
import type { Idempotency } from "./idempotency.ts"
import { named, Outbound, type OutgoingMessage } from "./send.ts"

/** Mail clients keep References bounded; the first id (the conversation's root) and the latest ones matter. */
const MAX_REFERENCES = 20

const OriginalRow = Schema.Struct({
  mailboxId: Schema.String,
  mailboxAddress: Schema.String,
  /** The address the email was delivered to (received mail) or sent from (sent mail). */
  rcptTo: Schema.String,
  direction: Schema.Literal("inbound", "outbound"),
  messageId: Schema.String,
  subject: Schema.String,
  fromAddress: Schema.String,
  toAddresses: Schema.Array(Schema.String),
  sentAt: Schema.DateFromSelf,
  headers: Schema.parseJson(Headers),
  textBody: Schema.String,
  htmlBody: Schema.NullOr(Schema.String),
  /** The start of the message as it came (its header, unless that is longer): the address fields as written. */
  head: Schema.Uint8ArrayFromSelf
})
export type Original = typeof OriginalRow.Type

/** How much of a message is read for its header's address fields. */
const HEAD_BYTES = 64 * 1024

/**
 * The first field `name` (lower case) of the header at the start of `head` as it was written: unfolded,
 * its encoded words as they are. Undefined when there is none, when the header goes on past `head`, or
 * when the field holds 8-bit bytes (raw UTF-8, RFC 6532, which the stored header holds as written).
 */
const writtenField = (head: Uint8Array, name: string): string | undefined => {
  const text = Buffer.from(head.buffer, head.byteOffset, head.byteLength).toString("latin1")
  const end = text.search(/\r?\n\r?\n/)
  if (end < 0 && head.byteLength >= HEAD_BYTES) return undefined
  for (const field of (end < 0 ? text : text.slice(0, end)).split(/\r?\n(?![ \t])/)) {
    const colon = field.indexOf(":")
    if (colon > 0 && field.slice(0, colon).trim().toLowerCase() === name) {
      const value = field.slice(colon + 1).replace(/\r?\n/g, "")
      return /[\x80-\xff]/.test(value) ? undefined : value
    }
  }
  return undefined
}

/** A display name's encoded words decoded, on one line. */
const decodedName = (name: string) => {
  let decoded = name
  try {
    decoded = libmime.decodeWords(name)
  } catch {
    // An encoded word no charset decoder reads stays as it was written, as the stored header has it.
  }
  return decoded.replace(/[\x00-\x1f\x7f]+/g, " ").trim()
}

/**
 * The addresses of an address header (groups flattened), as the composer takes them. `value` as written,
 * its encoded words decoded only once the addresses are found (RFC 2047 §6.1), with `decode`: decoded
 * first, `=?…?= <chef@…>` for the name `Dupré, "Le Chef"` reads as two people, its quotes lost.
 */
const addressesOf = (value: string | undefined, decode: (name: string) => string = (name) => name): ReadonlyArray<NamedAddress> => {
  if (value === undefined || value.trim() === "") return []
  return flatAddresses(value).flatMap((entry) => (entry.address ? [{ name: decode(entry.name) || undefined, address: unquoted(entry.address) }] : []))
}

/** The addresses of the original's header field `name` (lower case): as written where it can be read so, else as stored (decoded). */
const addressField = (original: Original, name: string): ReadonlyArray<NamedAddress> => {
  const written = writtenField(original.head, name)
  return written !== undefined ? addressesOf(written, decodedName) : addressesOf(firstHeader(original.headers, name))
}

/** An address whose local part is quoted without need (`"ada"@example.com`) as the same mailbox is written plainly: ada@example.com. */
const unquoted = (address: string) => {
  const at = address.lastIndexOf("@")
  return at < 0 ? address : `${unquotedLocal(address.slice(0, at))}${address.slice(at)}`
}

/** `prefix` once: "Re: Re: x" stays as the sender wrote it, "x" becomes "Re: x". */
export const prefixed = (prefix: "Re" | "Fwd", subject: string): string => {
  const marker = prefix === "Re" ? /^\s*re\s*:/i : /^\s*(fwd?|fw)\s*:/i
  return marker.test(subject) ? subject : `${prefix}: ${subject}`.trim()
}

/** The References of an answer to `original`: its own, then its Message-ID, bounded. */
export const referencesFor = (original: Original): ReadonlyArray<string> => {
  const earlier = (firstHeader(original.headers, "references") ?? "").match(/<[^<>\s]+>/g) ?? []
  const all = [...new Set([...earlier, original.messageId])]
  return all.length <= MAX_REFERENCES ? all : [all[0]!, ...all.slice(all.length - (MAX_REFERENCES - 1))]
}

/**
 * The addresses that are the mailbox itself on an email: its address now, and, for received mail, the
 * one the email was delivered to (the mailbox's address before a rename, or a subaddress of it).
 */
export const mailboxAddresses = (original: Pick<Original, "mailboxAddress" | "direction" | "rcptTo">) =>
  new Set([routingForm(original.mailboxAddress), ...(original.direction === "inbound" ? [routingForm(original.rcptTo)] : [])])

/** Each address once (case-insensitively), leaving out the mailbox's own (`mailboxAddresses`). */
const distinct = (addresses: ReadonlyArray<NamedAddress>, own: ReadonlySet<string>): Array<NamedAddress> => {
  const seen = new Set<string>()
  return addresses.filter((a) => {
    const key = a.address.toLowerCase()
    if (seen.has(key) || own.has(routingForm(key))) return false
    seen.add(key)
    return true
  })
}

/** `addresses` without those in `taken` (case-insensitively): a Cc leaves out who is in To. */
const notIn = (addresses: ReadonlyArray<NamedAddress>, taken: ReadonlyArray<NamedAddress>) => {
  const names = new Set(taken.map((a) => a.address.toLowerCase()))
  return addresses.filter((a) => !names.has(a.address.toLowerCase()))
}

/**
 * Addresses as a mail client shows them: `Name <address>`, or the address alone; a name holding a
 * comma or another special (RFC 5322 §3.2.3) quoted, so "Doe, Jane" reads as one person, not two.
 */
const shown = (addresses: ReadonlyArray<NamedAddress>) =>
  addresses.map((a) => {
    if (!a.name) return a.address
    const name = /[()<>[\]:;@\\,"]/.test(a.name) ? `"${a.name.replace(/(["\\])/g, "\\$1")}"` : a.name
    return `${name} <${a.address}>`
  }).join(", ")

/** The block above a forwarded email's text: its header fields as it came, display names and Cc included. */
const quoteHeader = (original: Original) => {
  const [from, to, cc] = [addressField(original, "from"), addressField(original, "to"), addressField(original, "cc")]
  return [
    "---------- Forwarded message ---------",
    `From: ${from.length > 0 ? shown(from) : original.fromAddress}`,
    `Date: ${original.sentAt.toUTCString()}`,
    `Subject: ${original.subject}`,
    `To: ${to.length > 0 ? shown(to) : original.toAddresses.join(", ")}`,
    ...(cc.length > 0 ? [`Cc: ${shown(cc)}`] : [])
  ]
}

/** Characters a file name cannot hold on some system (Windows' reserved ones, a path's separators) or should not (controls). */
const UNSAFE_IN_FILENAME = /[\x00-\x1f\x7f/\\:*?"<>|]+/g

/**
 * A name for a part the original carried without one, as a mail client names what it saves: an email
 * (message/rfc822) by its subject, `<subject>.eml` (`message.eml` without one), anything else
 * `attachment-<n>` with its type's usual extension (`.pdf`; `.bin` for opaque bytes). Without an
 * extension, a reader's mail program cannot tell what the file is once saved.
 */
const unnamedPart = (contentType: string, content: Uint8Array, position: number): string => {
  const type = contentType.split(";")[0]!.trim().toLowerCase()
  if (type === "message/rfc822") {
    const subject = writtenField(content.subarray(0, HEAD_BYTES), "subject")
    const name = subject === undefined ? "" : decodedName(subject).replace(UNSAFE_IN_FILENAME, " ").replace(/\s+/g, " ").replace(/^[\s.]+|[\s.]+$/g, "")
    return `${Array.from(name).slice(0, 100).join("").trim() || "message"}.eml`
  }
  const extension = detectExtension(type)
  return `attachment-${position}.${extension === "*" ? "bin" : extension}`
}

/** Whether mail can be sent to `address` as the send routes take one (an internationalized domain in either form). */
const sendable = (address: NamedAddress) => isAddress(withAsciiDomain(address.address))

/**
 * Whom an answer to `original` goes to: its Reply-To, else its From (for mail the mailbox sent, its
 * To); for a reply to all, everyone else on it in `cc`. Each address once, the mailbox's own left out,
 * and only addresses mail can be sent to: a received header may hold anything (`<<not an address>>`),
 * which is left out and told in `unusable` (the primary header's), never sent to or kept in a draft.
 */
const answerRecipients = (original: Original, all: boolean) => {
  const header = (name: string) => addressField(original, name)
  const from = firstHeader(original.headers, "from")
  const primary = original.direction === "outbound"
    ? header("to")
    : header("reply-to").length > 0
    ? header("reply-to")
    : from === undefined
    ? addressesOf(original.fromAddress)
    : header("from")
  const own = mailboxAddresses(original)
  const to = distinct(primary.filter(sendable), own)
  const cc = all ? notIn(distinct([...header("to"), ...header("cc")].filter(sendable), own), to) : []
  // A From that names no address at all ("Just A Name") is unusable as a whole.
  const unusable = primary.length === 0 && original.direction === "inbound" && from !== undefined
    ? [from.trim()]
    : primary.filter((address) => !sendable(address)).map((address) => address.address)
  return { to, cc, unusable }
}

/** What a draft answering an email starts with (`Replies.draftStart`). */
export interface DraftStart {
  readonly to?: ReadonlyArray<AddressInput>
  readonly cc?: ReadonlyArray<AddressInput>
  readonly subject?: string
}

/** A forward carries the original's `carried` attachments beside its own `added`: together, at most a message's. */
export const checkForwardedAttachments = (carried: number, added: number) =>
  carried + added > MAX_ATTACHMENTS
    ? Effect.fail(ValidationError.field(
      "attachments",
      `must list at most ${MAX_ATTACHMENTS - carried} attachments: the email forwarded carries ${carried} of the ${MAX_ATTACHMENTS} a message may have`
    ))
    : Effect.void

/** A composer's address as a request gives it: `{name, address}`, or the address alone. */
const asInput = (address: NamedAddress): AddressInput => address.name ? { name: address.name, address: address.address } : address.address

export class Replies extends Effect.Service<Replies>()("mailroom/Replies", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const outbound = yield* Outbound

    const original = (userId: string, emailId: string) =>
      Effect.gen(function*() {
        const rows = yield* sql`
          SELECT e.mailbox_id, m.local_part || '@' || m.domain AS mailbox_address, e.rcpt_to, e.direction, e.message_id, e.subject,
                 e.from_address, e.to_addresses, e.sent_at, e.headers::text AS headers, e.text_body, e.html_body,
                 substring(b.content FROM 1 FOR ${HEAD_BYTES}) AS head
          FROM emails e JOIN mailboxes m ON m.id = e.mailbox_id AND m.status = 'active' JOIN blobs b ON b.sha256 = e.raw_sha256
          WHERE e.id = ${emailId} AND e.user_id = ${userId}`.pipe(
          Effect.flatMap((rows) => Effect.orDie(Schema.decodeUnknown(Schema.Array(OriginalRow))(rows)))
        )
        const row = rows[0]
        if (!row) return yield* new NotFound({ message: "Email not found", details: { email_id: emailId } })
        return row
      })

    /** The mailbox an email of the caller's belongs to (what a draft answering it must be in). */
    const mailboxOf = (userId: string, emailId: string) => Effect.map(original(userId, emailId), (row) => row.mailboxId)

    /**
     * Send what `content` makes of the email as an answer to it: from the mailbox holding it, with
     * In-Reply-To and References set (a reply, or an invitation's answer).
     */
    const answer = (
      userId: string,
      emailId: string,
      content: (original: Original) => Omit<OutgoingMessage, "inReplyTo" | "references"> | ValidationError,
      idempotency?: Idempotency
    ) =>
      Effect.flatMap(original(userId, emailId), (found) => {
        const made = content(found)
        return made instanceof ValidationError
          ? Effect.fail(made)
          : outbound.submit(userId, found.mailboxId, { ...made, inReplyTo: found.messageId, references: referencesFor(found) }, idempotency)
      })

    /**
     * Reply (to the sender) or reply all (to everyone on it, minus the mailbox). A draft may name its
     * own `to` and `subject` instead of the ones the original gives.
     */
    const reply = Effect.fn("Replies.reply")(function*(
      userId: string,
      emailId: string,
      input: ReplyInput & Pick<DraftContent, "to" | "subject">,
      all: boolean,
      idempotency?: Idempotency
    ) {
      return yield* answer(userId, emailId, (found): Omit<OutgoingMessage, "inReplyTo" | "references"> | ValidationError => {
        const given = answerRecipients(found, all)
        const to = input.to !== undefined ? input.to.map(named) : given.to
        // The mailbox itself is left out of what the original gives; a copy the caller asks for is kept.
        const cc = notIn(distinct([...given.cc, ...(input.cc ?? []).map(named)], new Set()), to)
        if (to.length === 0 && cc.length === 0 && (input.bcc ?? []).length === 0) {
          // A draft that names its recipients (none left) is told as a send is.
          if (input.to !== undefined) return ValidationError.field("to", "must list at least one recipient (to, cc or bcc)")
          if (given.unusable.length > 0) {
            return ValidationError.field(
              "email_id",
              `has no address to reply to: its sender's is ${JSON.stringify(given.unusable[0])}, which mail cannot be sent to; name the recipients in cc or bcc`
            )
          }
          return ValidationError.field(
            "email_id",
            found.direction === "outbound"
              ? "has no one to reply to: it was sent to this mailbox's own address or to Bcc only; name the recipients in cc or bcc"
              : "has no one to reply to: its Reply-To or From is this mailbox's own address; name the recipients in cc or bcc"
          )
        }
        const bcc = (input.bcc ?? []).map(named)
        const everyone = new Set([...to, ...cc, ...bcc].map((a) => a.address.toLowerCase())).size
        // Who a reply to all reaches is the original's doing: the caller can only choose fewer, with a draft.
        if (all && input.to === undefined && everyone > MAX_RECIPIENTS) {
          return ValidationError.field(
            "email_id",
            `has ${everyone} recipients to reply to all, more than the ${MAX_RECIPIENTS} a message may have: ` +
              "reply to the sender alone, or make a draft (in_reply_to) naming whom to answer in to and cc"
          )
        }
        return {
          to,
          cc,
          bcc,
          subject: input.subject ?? prefixed("Re", found.subject),
          text: input.text,
          html: input.html,
          attachments: input.attachments ?? [],
          headers: input.headers ?? {},
          listUnsubscribe: input.list_unsubscribe === true
        }
      }, idempotency)
    })

    /** Forward: the caller's note above the original, the original's attachments along. */
    const forward = Effect.fn("Replies.forward")(function*(
      userId: string,
      emailId: string,
      input: ForwardInput & Pick<DraftContent, "subject">,
      idempotency?: Idempotency
    ) {
      const found = yield* original(userId, emailId)
      const attachments = yield* sql<{ filename: string | null; contentType: string; charset: string | null; contentId: string | null; content: Uint8Array }>`
        SELECT a.filename, a.content_type, a.charset, a.content_id, b.content
        FROM attachments a JOIN blobs b ON b.sha256 = a.checksum
        WHERE a.email_id = ${emailId} ORDER BY a.position`
      const carried: Array<AttachmentInput> = attachments.map((a, i) => ({
        filename: a.filename ?? unnamedPart(a.contentType, a.content, i + 1),
        // With the charset it came in: without it a mail program reads Latin-1 or UTF-8 text as ASCII.
        content_type: storedContentType(a.contentType, a.charset),
        content: Buffer.from(a.content).toString("base64"),
        ...(a.contentId ? { content_id: a.contentId.replace(/^<|>$/g, "") } : {})
      }))
      const added = input.attachments ?? []
      yield* checkForwardedAttachments(carried.length, added.length)
      const header = quoteHeader(found)
      // A note written in HTML alone is in the plain-text part too, as a reader of that part sees it.
      const note = input.text ?? (input.html === undefined ? "" : textFromHtml(input.html))
      const text = [note, "", ...header, "", found.textBody].join("\n").replace(/^\n+/, "")
      const html = input.html !== undefined || found.htmlBody !== null
        ? `${input.html ?? (input.text ? `<p>${escapeHtml(input.text)}</p>` : "")}<br><div>${header.map(escapeHtml).join("<br>")}</div><br>${
          found.htmlBody ?? `<pre>${escapeHtml(found.textBody)}</pre>`
        }`
        : undefined
      const message: OutgoingMessage = {
        to: (input.to ?? []).map(named),
        cc: (input.cc ?? []).map(named),
        bcc: (input.bcc ?? []).map(named),
        subject: input.subject ?? prefixed("Fwd", found.subject),
        text,
        html,
        attachments: [...carried, ...added],
        headers: input.headers ?? {},
        listUnsubscribe: input.list_unsubscribe === true,
        references: referencesFor(found)
      }
      return yield* outbound.submit(userId, found.mailboxId, message, idempotency)
    })

    /**
     * What a draft answering `emailId` starts with, as a mail client fills a reply's or a forward's
     * fields: the recipients the reply goes to (none for a forward, which the caller addresses) and
     * the subject with one Re:/Fwd:.
     */
    const draftStart = Effect.fn("Replies.draftStart")(function*(
      userId: string,
      emailId: string,
      kind: "reply" | "reply_all" | "forward"
    ): Effect.fn.Return<DraftStart, NotFound | SqlError> {
      const found = yield* original(userId, emailId)
      if (kind === "forward") return { subject: prefixed("Fwd", found.subject) }
      const { cc, to } = answerRecipients(found, kind === "reply_all")
      return { to: to.map(asInput), cc: cc.map(asInput), subject: prefixed("Re", found.subject) }
    })

    /** How many attachments a forward of `emailId` carries along. */
    const attachmentsOf = (emailId: string) =>
      Effect.map(sql<{ carried: number }>`SELECT count(*)::int AS carried FROM attachments WHERE email_id = ${emailId}`, (rows) => rows[0]?.carried ?? 0)

    return { reply, answer, forward, mailboxOf, draftStart, attachmentsOf } as const
  })
}) {}
