/**
 * Conditions on `emails e` that the lists (emails.ts) and search (search/search.ts) narrow mail by
 * alike, each `AND …`: its sender, and when it arrived; and the sender's as an expression, which a
 * list of conversations asks of some email of each (`bool_or`).
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
