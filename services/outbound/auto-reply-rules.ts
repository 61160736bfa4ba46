/**
 * A mailbox's automatic reply (auto-replies.ts): what the account sets, and which received mail it
 * answers. RFC 3834's rules for a personal responder: never answer automatic mail (Auto-Submitted,
 * bulk and list mail, bounces, system senders), nor mail that did not name the mailbox in To or Cc,
 * nor mail labelled spam or blocked, nor the mailbox itself; and each sender at most once per interval.
 * The answer says it is automatic (`Auto-Submitted: auto-replied`), so that other responders stay quiet.
 * (What the account sets is schemas.ts's `AutoReplyInput`.)
 */
import { flatAddresses } from "../mail/address-fields.ts"
import { routingForm } from "../mail/inbound.ts"
import { firstHeader, type Headers } from "../mail/schemas.ts"
import { BLOCKED } from "../mail/sender-list-rules.ts"
import { SPAM } from "../mail/spam.ts"

/** What the rules read of a received email. */
export interface Received {
  /** The envelope sender: empty for a bounce (the null reverse path). */
  readonly mailFrom: string
  readonly labels: ReadonlyArray<string>
  readonly headers: Headers
  /** The mailbox's address, and the address the email was delivered to (a subaddress, a catch-all's). */
  readonly mailboxAddress: string
  readonly rcptTo: string
}

export type Verdict =
  | { readonly answer: true; readonly to: string }
  | { readonly answer: false; readonly reason: "bounce" | "spam" | "automatic" | "list" | "system sender" | "self" | "not addressed" | "no sender" }

/** Senders that are programs (RFC 3834 §2's examples, and the no-reply addresses of today's mail). */
const PROGRAM_SENDER = /^(mailer-daemon|postmaster|listserv|majordomo|owner-.*|.*-request|bounces?(\+.*)?|no-?reply|do-?not-?reply)$/i

/**
 * A return path that names its message (`bounces+<id>@`, VERP): where Mailroom's own mail, and most
 * mail sent through a sending service, gets its bounces. The person's mail it carries is answered (to
 * its From), as it was not: no agent on Mailroom had an automatic reply from another.
 */
const VERP = /^bounces?\+[^@]+@/i

const LIST_FIELDS = ["list-id", "list-post", "list-unsubscribe", "list-help", "list-subscribe", "list-owner", "list-archive"]

const addresses = (value: string | undefined): Array<string> => {
  if (value === undefined || value.trim() === "") return []
  return flatAddresses(value).flatMap((entry) => (entry.address ? [entry.address] : []))
}

/** Whether (and to whom) `email` gets the automatic reply: to its Reply-To, else its From, as a reply goes. */
export const autoReplyVerdict = (email: Received): Verdict => {
  if (email.mailFrom === "") return { answer: false, reason: "bounce" }
  if (email.labels.includes(SPAM) || email.labels.includes(BLOCKED)) return { answer: false, reason: "spam" }
  const header = (name: string) => firstHeader(email.headers, name)
  const submitted = header("auto-submitted")
  const suppress = header("x-auto-response-suppress") ?? ""
  if (
    (submitted !== undefined && !/^\s*no\b/i.test(submitted)) ||
    /\b(all|oof|autoreply)\b/i.test(suppress) ||
    /^\s*(bulk|junk|list|auto_reply)\b/i.test(header("precedence") ?? "")
  ) return { answer: false, reason: "automatic" }
  if (LIST_FIELDS.some((name) => header(name) !== undefined)) return { answer: false, reason: "list" }

  const to = addresses(header("reply-to"))[0] ?? addresses(header("from"))[0]
  if (to === undefined) return { answer: false, reason: "no sender" }
  // A program is told by the address answered or by the envelope's (RFC 3834 §3.1.2: the return path is whom a response would reach).
  const isProgram = (address: string) => PROGRAM_SENDER.test(address.slice(0, address.lastIndexOf("@")))
  if (isProgram(to) || (isProgram(email.mailFrom) && !VERP.test(email.mailFrom))) return { answer: false, reason: "system sender" }
  const own = new Set([routingForm(email.mailboxAddress), routingForm(email.rcptTo)])
  if (own.has(routingForm(to))) return { answer: false, reason: "self" }
  const named = [...addresses(header("to")), ...addresses(header("cc"))].map(routingForm)
  if (!named.some((address) => own.has(address))) return { answer: false, reason: "not addressed" }
  return { answer: true, to: to.toLowerCase() }
}

/** The fields the answer carries to say it is automatic (RFC 3834 §5; Microsoft's for Exchange's responders). */
export const AUTO_REPLY_HEADERS = { "Auto-Submitted": "auto-replied", "X-Auto-Response-Suppress": "All" } as const
