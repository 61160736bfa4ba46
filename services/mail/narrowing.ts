/**
 * Conditions on `emails e` that the lists (emails.ts) and search (search/search.ts) narrow mail by
 * alike, each `AND …`: its labels, its sender, and when it arrived (`narrowedBy`); and the sender's as
 * an expression, which a list of conversations asks of some email of each (`bool_or`).
 */
import type { SqlClient } from "@effect/sql"
import { domainToUnicode } from "node:url"
import { escapeLike } from "../like.ts"
import type { ReceivedRange } from "./received-range.ts"
import type { Entry } from "./sender-list-rules.ts"

/**
 * Whether the email's sender is `entry`'s, as the sender lists match one (sender-list-rules.ts): an
 * expression, for a group's `bool_or` too. The entry's domain is in ASCII, a stored From's in Unicode
 * (parse.ts's inUnicode): matched as stored.
 */
export const senderIs = (sql: SqlClient.SqlClient, { entry, type }: Entry) => {
  const from = sql`lower(e.from_address)`
  const unicode = (domain: string) => domainToUnicode(domain) || domain
  if (type === "domain") return sql`${from} LIKE ${`%@${escapeLike(unicode(entry))}`} ESCAPE '\\'`
  if (type === "subdomains") return sql`${from} LIKE ${`%@%.${escapeLike(unicode(entry.slice("*.".length)))}`} ESCAPE '\\'`
  const at = entry.lastIndexOf("@")
  const [local, domain] = [entry.slice(0, at), unicode(entry.slice(at + 1))]
  return sql`(${from} = ${`${local}@${domain}`} OR ${from} LIKE ${`${escapeLike(local)}+%@${escapeLike(domain)}`} ESCAPE '\\')`
}

/** `AND` the email's sender is `entry`'s (`senderIs`). */
export const fromIs = (sql: SqlClient.SqlClient, entry: Entry) => sql`AND ${senderIs(sql, entry)}`

/** `AND` the email arrived within `range` (at or after its start, before its end). */
export const receivedWithin = (sql: SqlClient.SqlClient, { after, before }: ReceivedRange) =>
  sql.join(" ", false)([
    after === undefined ? sql`` : sql`AND e.received_at >= ${after}`,
    before === undefined ? sql`` : sql`AND e.received_at < ${before}`
  ])

/** What narrows mail by its own fields, in lists and search alike. */
export interface MailNarrowing {
  /** Every one of these labels. */
  readonly labels?: ReadonlyArray<string> | undefined
  readonly from?: Entry | undefined
  readonly received?: ReceivedRange | undefined
}

/** Whether `narrowing` leaves out any mail at all. */
export const narrows = ({ from, labels, received }: MailNarrowing): boolean =>
  (labels?.length ?? 0) > 0 || from !== undefined || received?.after !== undefined || received?.before !== undefined

/** `narrowing`'s conditions, each `AND …` (none for what it leaves open). */
export const narrowedBy = (sql: SqlClient.SqlClient, { from, labels, received }: MailNarrowing) =>
  sql.join(" ", false)([
    labels !== undefined && labels.length > 0 ? sql`AND e.labels @> ${[...labels]}::text[]` : sql``,
    from === undefined ? sql`` : fromIs(sql, from),
    received === undefined ? sql`` : receivedWithin(sql, received)
  ])
