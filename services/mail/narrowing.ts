/**
 * Conditions on `emails e` that the lists (emails.ts) and search (search/search.ts) narrow mail by
 * alike, each `AND …`: its labels, its sender, and when it arrived (`narrowedBy`); and the sender's as
 * an expression, which a list of conversations asks of some email of each (`bool_or`), as it asks
 * whether some email is unread (`unread`).
 */
import type { SqlClient } from "@effect/sql"
import { domainToUnicode } from "node:url"
import { escapeLike } from "../like.ts"
import { plannedForItsValues } from "../planning.ts"
import { UNREAD } from "./label-rules.ts"
import type { ReceivedRange } from "./received-range.ts"
import type { Entry } from "./sender-list-rules.ts"

/**
 * An entry as stored senders are matched against it: its domain in Unicode (the entry's is in ASCII,
 * a stored From's in Unicode: parse.ts's inUnicode), and an address's local part apart.
 */
const asStored = ({ entry, type }: Entry) => {
  const unicode = (domain: string) => domainToUnicode(domain) || domain
  if (type === "domain") return { type, domain: unicode(entry) } as const
  if (type === "subdomains") return { type, domain: unicode(entry.slice("*.".length)) } as const
  const at = entry.lastIndexOf("@")
  return { type, local: entry.slice(0, at), domain: unicode(entry.slice(at + 1)) } as const
}

/** `text` reversed by character (as SQL's `reverse`), not by UTF-16 unit. */
const reversed = (text: string) => [...text].reverse().join("")

/**
 * Whether the email's sender is `entry`'s, as the sender lists match one (sender-list-rules.ts): an
 * expression, for a group's `bool_or` too. Each is a prefix an index holds: an address, and its `+tag`s,
 * of `lower(from_address)` (`emails_from_prefix_idx`); a domain, read from the end, of
 * `reverse(lower(from_address))` (`emails_from_domain_idx`, migration 0082): `@example.org` ends the
 * address of every sender of example.org, `.example.org` then an `@` further back every sender of a
 * subdomain of it. Its statement is planned for the sender (planning.ts): whether the index or the
 * mailbox's own order reads less depends on how much of the mail is theirs.
 */
export const senderIs = (sql: SqlClient.SqlClient, entry: Entry) => {
  const from = sql`lower(e.from_address)`
  const stored = asStored(entry)
  const planned = plannedForItsValues(sql)
  if (stored.type !== "address") {
    const ending = reversed(stored.type === "domain" ? `@${stored.domain}` : `.${stored.domain}`)
    const pattern = `${escapeLike(ending)}%${stored.type === "domain" ? "" : "@%"}`
    return sql`${planned} reverse(${from}) LIKE ${pattern} ESCAPE '\\'`
  }
  const { domain, local } = stored
  return sql`${planned} (${from} = ${`${local}@${domain}`} OR ${from} LIKE ${`${escapeLike(local)}+%@${escapeLike(domain)}`} ESCAPE '\\')`
}

/**
 * The keys a sender is found by where only keys can be matched (the vector index's points): the
 * address; the address again at each shorter `+tag` of its local part (`nora+news@…` is also
 * `nora@…`'s); `@domain`; and `*.parent` for each domain it is a subdomain of. `senderKey(entry)` is
 * among them exactly when `senderIs(entry)` holds for the address.
 */
export const senderKeys = (address: string): ReadonlyArray<string> => {
  const from = address.toLowerCase()
  const at = from.lastIndexOf("@")
  if (at < 1) return []
  const [local, domain] = [from.slice(0, at), from.slice(at + 1)]
  const keys = [from, `@${domain}`]
  for (let plus = local.indexOf("+", 1); plus !== -1; plus = local.indexOf("+", plus + 1)) keys.push(`${local.slice(0, plus)}@${domain}`)
  for (let dot = domain.indexOf(".", 1); dot !== -1; dot = domain.indexOf(".", dot + 1)) keys.push(`*.${domain.slice(dot + 1)}`)
  return keys
}

/** The key of `senderKeys` that an entry's senders have, and no other sender. */
export const senderKey = (entry: Entry): string => {
  const stored = asStored(entry)
  if (stored.type === "domain") return `@${stored.domain}`
  if (stored.type === "subdomains") return `*.${stored.domain}`
  return `${stored.local}@${stored.domain}`
}

/**
 * Whether the email is unread: the label written into the statement, as the predicate of
 * `emails_unread_idx` (migration 0083) is, so that a plan made without the values still reads the index.
 */
export const unread = (sql: SqlClient.SqlClient) => sql`${sql.literal(`'${UNREAD}'`)} = ANY(e.labels)`

/** `AND` the email's sender is `entry`'s (`senderIs`). */
export const fromIs = (sql: SqlClient.SqlClient, entry: Entry) => sql`AND ${senderIs(sql, entry)}`

/** Whether `range` leaves out any moment. */
export const bounds = ({ after, before }: ReceivedRange) => after !== undefined || before !== undefined

/**
 * Whether the email arrived within `range` (at or after its start, before its end): an expression,
 * for a group's `bool_or` too; `range` must have a bound (`bounds`).
 */
export const arrivedWithin = (sql: SqlClient.SqlClient, { after, before }: ReceivedRange) =>
  sql.and([
    ...(after === undefined ? [] : [sql`e.received_at >= ${after}`]),
    ...(before === undefined ? [] : [sql`e.received_at < ${before}`])
  ])

/** `AND` the email arrived within `range` (`arrivedWithin`); nothing for a span open at both ends. */
export const receivedWithin = (sql: SqlClient.SqlClient, range: ReceivedRange) =>
  bounds(range) ? sql`AND ${arrivedWithin(sql, range)}` : sql``

/** What narrows mail by its own fields, in lists and search alike. */
export interface MailNarrowing {
  /** Every one of these labels. */
  readonly labels?: ReadonlyArray<string> | undefined
  readonly from?: Entry | undefined
  readonly received?: ReceivedRange | undefined
}

/** Whether `narrowing` leaves out any mail at all. */
export const narrows = ({ from, labels, received }: MailNarrowing): boolean =>
  (labels?.length ?? 0) > 0 || from !== undefined || (received !== undefined && bounds(received))

/** `narrowing`'s conditions (`narrowedBy`), or none when it leaves all mail (nothing to join the emails for). */
export const narrowedIfAny = (sql: SqlClient.SqlClient, narrowing: MailNarrowing) => (narrows(narrowing) ? narrowedBy(sql, narrowing) : undefined)

/** `narrowing`'s conditions, each `AND …` (none for what it leaves open). */
export const narrowedBy = (sql: SqlClient.SqlClient, { from, labels, received }: MailNarrowing) =>
  sql.join(" ", false)([
    labels !== undefined && labels.length > 0 ? sql`AND e.labels @> ${[...labels]}::text[]` : sql``,
    from === undefined ? sql`` : fromIs(sql, from),
    received === undefined ? sql`` : receivedWithin(sql, received)
  ])
