/**
 * Allow and block lists (issue 20, item 3): what an entry is, and whom it names.
 *
 * - An entry is an address (`ada@example.com`: that sender only), a domain (`example.com`: senders
 *   at exactly that domain) or `*.domain` (`*.example.com`: senders at any subdomain of it, at any
 *   depth, but not at example.com itself; list both to cover both). Entries are case-insensitive:
 *   they are stored lower-cased, with internationalised domains in their ASCII (punycode) form, a
 *   trailing dot dropped.
 * - Each account has an allow and a block list, and so does each mailbox. For a message to one
 *   mailbox, the lists combine as follows:
 *   1. block wins: an entry on the account's or the mailbox's block list refuses the sender, even if
 *      an allow list names it too;
 *   2. every allow list that has entries must name the sender: an account allow list admits only
 *      its senders to every mailbox, and a mailbox allow list narrows that for its mailbox;
 *   3. lists without entries say nothing.
 * - Who is checked: the envelope sender (MAIL FROM) at RCPT, by all four lists (a refusal is
 *   `550 5.7.1` for that recipient); the header From after DATA, by the block lists only (the email
 *   is kept, labelled `blocked`, and not announced). The null sender `<>` (bounces, auto-replies)
 *   matches no entry: no block list can refuse it, and an allow list refuses it, since it cannot name
 *   it. Delivery reports about mail a mailbox sent go to their bounce address (`bounces+…`), which
 *   lists do not apply to, so they still arrive.
 *
 * Only `effect` and node's `url` here: the HTTP contract (and so the published client) reads these
 * schemas.
 */
import { domainToASCII } from "node:url"
import { isIpAddress } from "../dns/addresses.ts"
import { unquotedLocal } from "../mailboxes/rules.ts"
import { Schema } from "effect"
import { rule } from "../schema-rules.ts"

/** The two lists. */
export const ListName = Schema.Literal("allow", "block").annotations({
  identifier: "SenderListName",
  description: "allow: only these senders are accepted (once the list has entries); block: these senders are refused"
})
export type ListName = typeof ListName.Type

export const EntryType = Schema.Literal("address", "domain", "subdomains")
export type EntryType = typeof EntryType.Type

/** The most entries one list holds (each list of the account and of each mailbox). */
export const MAX_ENTRIES_PER_LIST = 1_000

/** An entry as written by a person: the longest address SMTP carries. */
const MAX_ENTRY_LENGTH = 320
const MAX_LOCAL_LENGTH = 64
const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/

export const ENTRY_FORMS = "an address (ada@example.com), a domain (example.com) or *.domain (*.example.com)"

export interface Entry {
  /** The normalised entry, as stored and matched. */
  readonly entry: string
  readonly type: EntryType
}

/**
 * `domain` in ASCII, lower-cased, without a trailing dot; undefined when it is not a host name.
 * domainToASCII reads a URL's host, so what ends one (`/`, `?`, `#`, `\`) or is a URL's escape (`%`)
 * is refused first: it made `a/b` the domain `a` (and `DELETE /lists/block/a%2Fb` remove `a`), and
 * `x%63.example` the domain `xc.example`.
 */
const asciiDomain = (domain: string): string | undefined => {
  if (/[/?#\\%]/.test(domain)) return undefined
  const trimmed = domain.endsWith(".") ? domain.slice(0, -1) : domain
  const ascii = domainToASCII(trimmed).toLowerCase()
  if (ascii.length === 0 || ascii.length > 253) return undefined
  return ascii.split(".").every((label) => LABEL.test(label)) ? ascii : undefined
}

/** The entry `raw` stands for, or why it stands for none (a message for `details.entry`). */
export const parseEntry = (raw: string): Entry | string => {
  const text = raw.trim().toLowerCase()
  if (text.length === 0) return `must not be empty; write ${ENTRY_FORMS}`
  if (text.length > MAX_ENTRY_LENGTH) return `must be at most ${MAX_ENTRY_LENGTH} characters`
  // eslint-disable-next-line no-control-regex
  if (/[\s\u0000-\u001f\u007f<>,;]/.test(text)) return `must not contain spaces, control characters, <, >, commas or semicolons; write ${ENTRY_FORMS}`
  const at = text.lastIndexOf("@")
  if (at >= 0) {
    // Quoted without need (`"ada"@x`), the local part is the sender's `ada@x`, and is stored so.
    const local = unquotedLocal(text.slice(0, at))
    if (local.length === 0) return `has nothing before the @; for a whole domain write the domain alone (${text.slice(at + 1)})`
    if (local.length > MAX_LOCAL_LENGTH) return `has a local part over ${MAX_LOCAL_LENGTH} characters`
    if (local.includes("@")) return "must contain at most one @"
    if (local.includes("*")) return "cannot have a wildcard before the @; for every sender of a domain write the domain alone"
    const domain = asciiDomain(text.slice(at + 1))
    if (domain === undefined) return `has no valid domain after the @; write ${ENTRY_FORMS}`
    return { entry: `${local}@${domain}`, type: "address" }
  }
  if (text.startsWith("*.")) {
    const domain = asciiDomain(text.slice(2))
    if (domain === undefined) return `must name a valid domain after *.; write ${ENTRY_FORMS}`
    return { entry: `*.${domain}`, type: "subdomains" }
  }
  if (text.includes("*")) return `may use * only as the first label (*.example.com); write ${ENTRY_FORMS}`
  // The lists name senders by address and domain: a client's IP address is not what they match.
  if (isIpAddress(text.replace(/^\[(.*)\]$/, "$1"))) {
    return `is an IP address: the lists match the sender's address or domain, not the connecting client's address`
  }
  const domain = asciiDomain(text)
  if (domain === undefined) return `is not a valid domain; write ${ENTRY_FORMS}`
  return { entry: domain, type: "domain" }
}

/**
 * A sender named as the lists name one (ENTRY_FORMS), decoded to its entry: what a list of mail's
 * `from` keeps (ada@example.com, and her subaddresses; example.com; *.example.com). Refused in
 * parseEntry's words.
 */
export const SenderPattern = Schema.String.pipe(
  rule((raw) => {
    const parsed = parseEntry(raw)
    return typeof parsed === "string" ? parsed : true
  }),
  Schema.transform(Schema.Struct({ entry: Schema.String, type: EntryType }), {
    strict: true,
    // The filter above has let only what parses through.
    decode: (raw) => parseEntry(raw) as Entry,
    encode: ({ entry }) => entry
  })
)

/** The type of a stored (normalised) entry. */
export const entryType = (entry: string): EntryType =>
  entry.includes("@") ? "address" : entry.startsWith("*.") ? "subdomains" : "domain"

/**
 * Every entry that names `sender`: its address, the address without a subaddress (`ada+news@x` is
 * `ada@x`'s mailbox, as Mailroom's own addresses are), its domain, and `*.` each domain above it. A
 * local part quoted without need (`"ada"@x`, the same mailbox to SMTP) is read unquoted. A sender is
 * named by a list when one of these is on it, so a lookup is one index probe per form. The null
 * sender (empty) and a sender without a usable domain have no forms: no entry names them.
 */
export const senderForms = (sender: string): ReadonlyArray<string> => {
  const text = sender.trim().toLowerCase()
  const at = text.lastIndexOf("@")
  // eslint-disable-next-line no-control-regex
  if (at <= 0 || /[\u0000-\u001f\u007f]/.test(text)) return []
  const domain = asciiDomain(text.slice(at + 1))
  if (domain === undefined) return []
  const local = unquotedLocal(text.slice(0, at))
  const plus = local.indexOf("+")
  const addresses = [`${local}@${domain}`, ...(plus > 0 ? [`${local.slice(0, plus)}@${domain}`] : [])]
  const labels = domain.split(".")
  return [...addresses, domain, ...labels.slice(1).map((_, i) => `*.${labels.slice(i + 1).join(".")}`)]
}

/** What the lists of one account and one of its mailboxes say about a sender. */
export interface ListMatches {
  /** Some entry of either block list names the sender. */
  readonly blocked: boolean
  /** The account's allow list has entries; and whether one names the sender. */
  readonly accountAllowList: boolean
  readonly accountAllows: boolean
  /** The mailbox's allow list has entries; and whether one names the sender. */
  readonly mailboxAllowList: boolean
  readonly mailboxAllows: boolean
}

/** Whether the lists admit the envelope sender (the rules in the module comment). */
export const admitsSender = (m: ListMatches): boolean =>
  !m.blocked && (!m.accountAllowList || m.accountAllows) && (!m.mailboxAllowList || m.mailboxAllows)

/** The label an email whose header From is on a block list gets (label-rules.ts "verdict labels"). */
/** What a list of entries sorts by: created_at:desc (newest first) when left out. */
export const entrySortFields = ["created_at", "entry"] as const
export type EntrySortField = (typeof entrySortFields)[number]

export const BLOCKED = "blocked"

/** An entry as the API shows it. */
export const SenderListEntry = Schema.Struct({
  entry: Schema.String.annotations({ description: "Normalised: lower case, ASCII domain" }),
  type: EntryType.annotations({ description: "address: that sender; domain: senders at exactly that domain; subdomains (*.domain): at any subdomain of it" }),
  list: ListName,
  mailbox_id: Schema.NullOr(Schema.String).annotations({ description: "The mailbox whose list it is; null on the account's list" }),
  created_at: Schema.String
}).annotations({ identifier: "SenderListEntry" })
export type SenderListEntry = typeof SenderListEntry.Type

/** POST body: the entry to add. */
export const EntryInput = Schema.Struct({
  entry: Schema.String.annotations({ description: `${ENTRY_FORMS}; case-insensitive` })
}).annotations({ identifier: "SenderListEntryInput", parseOptions: { errors: "all", onExcessProperty: "error" } })
