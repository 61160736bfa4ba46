/**
 * The account's suppression list (issue 16): addresses that bounced for good, whose owners
 * unsubscribed or reported the mail as spam, and those the account added itself. Sending to one is
 * refused (422 RECIPIENT_SUPPRESSED) until the account removes it, say after the recipient fixed
 * their mailbox.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { NotFound } from "../errors.ts"
import type { Page, Sort } from "../listing.ts"
import { type Suppression, type SuppressionReason, type SuppressionSortField, withAsciiDomain } from "./schemas.ts"


interface SuppressionRow {
  readonly address: string
  readonly reason: SuppressionReason
  readonly lastResponse: string | null
  readonly emailId: string | null
  readonly createdAt: Date
}

const toSuppression = (row: SuppressionRow): Suppression => ({
  address: row.address,
  reason: row.reason,
  last_response: row.lastResponse,
  email_id: row.emailId,
  created_at: row.createdAt.toISOString()
})

export class Suppressions extends Effect.Service<Suppressions>()("mailroom/Suppressions", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const list = Effect.fn("Suppressions.list")(function*(userId: string, page: Page, sort: Sort<SuppressionSortField>) {
      const direction = sort.direction === "asc" ? "ASC" : "DESC"
      const order = sql.literal(sort.field === "address" ? `address ${direction}` : `created_at ${direction}, address`)
      const rows = yield* sql<SuppressionRow>`
        SELECT address, reason, last_response, email_id, created_at FROM suppressions WHERE user_id = ${userId}
        ORDER BY ${order} LIMIT ${page.limit} OFFSET ${page.offset}`
      const counted = yield* sql<{ total: string }>`SELECT count(*) AS total FROM suppressions WHERE user_id = ${userId}`
      const total = Number(counted[0]?.total ?? 0)
      return { data: rows.map(toSuppression), total }
    })

    /**
     * Stop sending to `address`. An address on the list already stays as it was (its reason too):
     * `created` says which.
     */
    const add = Effect.fn("Suppressions.add")(function*(userId: string, address: string) {
      // An update that changes nothing, so that the row is answered either way; `xmax = 0`: a row this
      // statement inserted (an updated one carries its updating transaction there).
      const rows = yield* sql<SuppressionRow & { readonly created: boolean }>`
        INSERT INTO suppressions (user_id, address, reason) VALUES (${userId}, ${address.toLowerCase()}, 'manual')
        ON CONFLICT (user_id, address) DO UPDATE SET reason = suppressions.reason
        RETURNING address, reason, last_response, email_id, created_at, (xmax = 0) AS created`
      const row = rows[0]!
      return { suppression: toSuppression(row), created: row.created }
    })

    /** Send to `address` again: named as it was added, an internationalized domain in Unicode or punycode, any case. */
    const remove = Effect.fn("Suppressions.remove")(function*(userId: string, address: string) {
      const kept = withAsciiDomain(address).toLowerCase()
      const deleted = yield* sql`DELETE FROM suppressions WHERE user_id = ${userId} AND address = ${kept} RETURNING 1`
      if (deleted.length === 0) return yield* new NotFound({ message: "This address is not suppressed", details: { address: kept } })
      return { address: kept, deleted: true as const }
    })

    return { list, add, remove } as const
  })
}) {}
