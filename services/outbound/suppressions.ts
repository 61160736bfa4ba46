/**
 * The account's suppression list (issue 16): addresses that bounced for good, whose owners
 * unsubscribed or reported the mail as spam, and those the account added itself. Sending to one is
 * refused (422 RECIPIENT_SUPPRESSED) until the account removes it, say after the recipient fixed
 * their mailbox.
 */
import { SqlClient, SqlSchema } from "@effect/sql"
import { Effect, Schema } from "effect"
import { NotFound } from "../errors.ts"
import type { Page, Sort } from "../listing.ts"
import { type Suppression, SuppressionReason, type SuppressionSortField, suppressionSortFields, withAsciiDomain } from "./schemas.ts"

/**
 * A suppression as its table holds it, decoded as it is read (SqlSchema): a row that does not read so is
 * a bug here or in a migration, a defect rather than a failure of the request.
 */
const SuppressionRow = Schema.Struct({
  address: Schema.String,
  reason: SuppressionReason,
  lastResponse: Schema.NullOr(Schema.String),
  emailId: Schema.NullOr(Schema.String),
  createdAt: Schema.DateFromSelf
})
type SuppressionRow = typeof SuppressionRow.Type

const SUPPRESSION_COLUMNS = "address, reason, last_response, email_id, created_at"

/** A count(*) as `total`: a bigint, which the client reads as a string. */
const CountRow = Schema.Struct({ total: Schema.NumberFromString })

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

    const suppressionRows = SqlSchema.findAll({
      Request: Schema.Struct({
        userId: Schema.String,
        sort: Schema.Struct({ field: Schema.Literal(...suppressionSortFields), ascending: Schema.Boolean }),
        page: Schema.Struct({ limit: Schema.Number, offset: Schema.Number })
      }),
      Result: SuppressionRow,
      execute: ({ page, sort, userId }) => {
        const direction = sort.ascending ? "ASC" : "DESC"
        const order = sql.literal(sort.field === "address" ? `address ${direction}` : `created_at ${direction}, address`)
        return sql`
          SELECT ${sql.literal(SUPPRESSION_COLUMNS)} FROM suppressions WHERE user_id = ${userId}
          ORDER BY ${order} LIMIT ${page.limit} OFFSET ${page.offset}`
      }
    })

    const countRow = SqlSchema.single({
      Request: Schema.String,
      Result: CountRow,
      execute: (userId) => sql`SELECT count(*) AS total FROM suppressions WHERE user_id = ${userId}`
    })

    const list = Effect.fn("Suppressions.list")(function*(userId: string, page: Page, sort: Sort<SuppressionSortField>) {
      const rows = yield* suppressionRows({ userId, sort: { field: sort.field, ascending: sort.direction === "asc" }, page }).pipe(
        Effect.catchTag("ParseError", Effect.die)
      )
      const counted = yield* countRow(userId).pipe(Effect.catchTags({ ParseError: Effect.die, NoSuchElementException: Effect.die }))
      return { data: rows.map(toSuppression), total: counted.total }
    })

    /** The address suppressed by hand, or the row it had already; `created`: whether this statement inserted it. */
    const addRow = SqlSchema.single({
      Request: Schema.Struct({ userId: Schema.String, address: Schema.String }),
      Result: Schema.Struct({ ...SuppressionRow.fields, created: Schema.Boolean }),
      // An update that changes nothing, so that the row is answered either way; `xmax = 0`: a row this
      // statement inserted (an updated one carries its updating transaction there).
      execute: ({ address, userId }) =>
        sql`
          INSERT INTO suppressions (user_id, address, reason) VALUES (${userId}, ${address}, 'manual')
          ON CONFLICT (user_id, address) DO UPDATE SET reason = suppressions.reason
          RETURNING ${sql.literal(SUPPRESSION_COLUMNS)}, (xmax = 0) AS created`
    })

    /**
     * Stop sending to `address`. An address on the list already stays as it was (its reason too):
     * `created` says which.
     */
    const add = Effect.fn("Suppressions.add")(function*(userId: string, address: string) {
      const row = yield* addRow({ userId, address: address.toLowerCase() }).pipe(
        Effect.catchTags({ ParseError: Effect.die, NoSuchElementException: Effect.die })
      )
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
