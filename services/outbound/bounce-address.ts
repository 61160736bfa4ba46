/**
 * Bounce addresses (VERP): the envelope sender of every message Mailroom sends for a mailbox, and of a
 * received email's forwarded copies. Delivery reports and feedback-loop complaints come back to it, and
 * it names the email they are about, so they are applied to it (bounces.ts).
 *
 * Everyone a message reaches sees its envelope sender (`Return-Path`), so a bare
 * `bounces+<email_id>@<domain>` would let any recipient send a report naming another recipient and get
 * that address marked `bounced` and suppressed. Each recipient domain is therefore sent an address of
 * its own, `bounces+<email_id>-<tag>@<domain>`, where the tag is an HMAC of the recipient domain under a
 * random key kept with the email (`emails.bounce_key`, migrations/0073). A report to it may speak only of
 * that domain's recipients: the domain's own mail system, which is what sends reports, can still report
 * on all of them, and nobody outside it can. A tag is 64 bits: guessing one takes more reports than any
 * SMTP server will take.
 *
 * Mail stored before keys existed has none; its bare address goes on working (reports come days later),
 * about any of its recipients, as before.
 */
import { createHmac, timingSafeEqual } from "node:crypto"

/** Hex characters of a tag (64 bits). */
const TAG_LENGTH = 16

/** `bounces+<email_id>[-<tag>]@`: the email, and the tag when there is one. */
const BOUNCE_ADDRESS = /^bounces\+(eml_[0-9a-f]{24})(?:-([0-9a-f]{16}))?@/i

/** The bare bounce address of `emailId` on `domain`: what `emails.mail_from` keeps for a sent email. */
export const bounceAddress = (emailId: string, domain: string) => `bounces+${emailId}@${domain}`

/** The tag that ties a bounce address to the recipient `domain` (lower-cased, as outbound_deliveries keep it). */
export const bounceTag = (key: string, domain: string) =>
  createHmac("sha256", key).update(domain.toLowerCase()).digest("hex").slice(0, TAG_LENGTH)

/**
 * The envelope sender for mail to `domain`: the bare address `base` with the domain's tag, or `base`
 * itself when the email has no key (stored before keys).
 */
export const bounceAddressFor = (base: string, key: string | null, domain: string) => {
  if (key === null) return base
  const at = base.lastIndexOf("@")
  return `${base.slice(0, at)}-${bounceTag(key, domain)}${base.slice(at)}`
}

/** What a bounce address names: its email and, when tagged, the tag. Undefined for any other address. */
export const parseBounceAddress = (address: string): { readonly emailId: string; readonly tag: string | undefined } | undefined => {
  const match = BOUNCE_ADDRESS.exec(address)
  return match === null ? undefined : { emailId: match[1]!.toLowerCase(), tag: match[2]?.toLowerCase() }
}

/** Of the email's recipient `domains`, the one `tag` was made for under `key`; undefined when none. */
export const taggedDomain = (key: string, tag: string, domains: ReadonlyArray<string>) => {
  const given = Buffer.from(tag, "latin1")
  return domains.find((domain) => timingSafeEqual(Buffer.from(bounceTag(key, domain), "latin1"), given))
}
