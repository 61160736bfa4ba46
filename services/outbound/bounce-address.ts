/**
 * Bounce addresses (VERP): the envelope sender of every message Mailroom sends for a mailbox, and of a
 * received email's forwarded copies. Delivery reports and feedback-loop complaints come back to it, and
 * it names the email they are about, so they are applied to it (bounces.ts).
 *
 * Everyone a message reaches sees its envelope sender (`Return-Path`), so a bare
 * `bounces+<email_id>@<domain>` would let any recipient send a report naming another recipient and get
 * that address marked `bounced` and suppressed. Each recipient of a sent email is therefore sent an
 * address of its own, `bounces+<email_id>-<tag>@<domain>`, where the tag is an HMAC of the recipient's
 * address under a random key kept with the email (`emails.bounce_key`, migrations/0073), and a report
 * to it may speak only of that recipient. (Its own transaction, then: one SMTP transaction has one
 * envelope sender.) A forwarded copy's address is tagged with the forwarding address's domain instead,
 * and speaks for that domain's addresses: the mailbox's owner chose every one of them. Mail sent before
 * per-recipient tags went with domain tags, which go on working (reports come days later). A domain
 * has no `@` and an address has one, so no tag of one is the tag of the other. A tag is 64 bits:
 * guessing one takes more reports than any SMTP server will take.
 *
 * Mail stored before keys existed has none; its bare address goes on working, about any of its
 * recipients, as before.
 */
import { createHmac, timingSafeEqual } from "node:crypto"

/** Hex characters of a tag (64 bits). */
const TAG_LENGTH = 16

/** `bounces+<email_id>[-<tag>]@`: the email, and the tag when there is one. */
const BOUNCE_ADDRESS = /^bounces\+(eml_[0-9a-f]{24})(?:-([0-9a-f]{16}))?@/i

/** The bare bounce address of `emailId` on `domain`: what `emails.mail_from` keeps for a sent email. */
export const bounceAddress = (emailId: string, domain: string) => `bounces+${emailId}@${domain}`

/** The tag that ties a bounce address to `what`: a recipient's address, or a recipient domain (lower-cased, as stored). */
export const bounceTag = (key: string, what: string) =>
  createHmac("sha256", key).update(what.toLowerCase()).digest("hex").slice(0, TAG_LENGTH)

/**
 * The envelope sender for mail to `what` (a recipient's address, or a domain's recipients): the bare
 * address `base` with its tag, or `base` itself when the email has no key (stored before keys).
 */
export const bounceAddressFor = (base: string, key: string | null, what: string) => {
  if (key === null) return base
  const at = base.lastIndexOf("@")
  return `${base.slice(0, at)}-${bounceTag(key, what)}${base.slice(at)}`
}

/** What a bounce address names: its email and, when tagged, the tag. Undefined for any other address. */
export const parseBounceAddress = (address: string): { readonly emailId: string; readonly tag: string | undefined } | undefined => {
  const match = BOUNCE_ADDRESS.exec(address)
  return match === null ? undefined : { emailId: match[1]!.toLowerCase(), tag: match[2]?.toLowerCase() }
}

/** Whom a report to a bounce address may speak of: one recipient, or a domain's recipients. */
export type BounceScope =
  | { readonly recipient: string; readonly domain?: undefined }
  | { readonly domain: string; readonly recipient?: undefined }

/**
 * Of the email's `recipients` (addresses) and their `domains`, the one `tag` was made for under `key`;
 * undefined when none.
 */
export const taggedScope = (
  key: string,
  tag: string,
  recipients: ReadonlyArray<string>,
  domains: ReadonlyArray<string>
): BounceScope | undefined => {
  const given = Buffer.from(tag, "latin1")
  const made = (what: string) => timingSafeEqual(Buffer.from(bounceTag(key, what), "latin1"), given)
  const recipient = recipients.find(made)
  if (recipient !== undefined) return { recipient: recipient.toLowerCase() }
  const domain = domains.find(made)
  return domain === undefined ? undefined : { domain: domain.toLowerCase() }
}
