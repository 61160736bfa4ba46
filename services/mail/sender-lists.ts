/**
 * The account's and its mailboxes' allow and block lists (the rules are sender-list-rules.ts):
 * listing, adding and removing entries. Enforcing them is not done here: the SMTP node's recipient
 * lookup (inbound.ts) and the email's store statement (store.ts) read the table within the queries
 * they make anyway, so the lists cost no round trip of their own.
 *
 * - A mailbox that is not the caller's (or is deleted) is 404, as if it did not exist.
 * - Adding an entry already on the list is idempotent: it answers the entry as it was (`created:
 *   false`), and the HTTP edge says 200 instead of 201.
 * - A list holds at most MAX_ENTRIES_PER_LIST entries (403 SENDER_LIST_FULL). Two adds racing for
 *   the last place may both get it: the cap bounds the lookups' cost, not a promise to the byte.
 */
import { SqlClient, SqlSchema } from "@effect/sql"
import { Effect, Option, Schema } from "effect"
import { NotFound, SenderListFull, ValidationError } from "../errors.ts"
import type { Page, Sort } from "../listing.ts"
import { ownMailbox } from "../mailboxes/owned.ts"
import { RecipientDirectory } from "./directory.ts"
import {
  type Entry,
  type EntrySortField,
  entrySortFields,
  entryType,
  ListName,
  MAX_ENTRIES_PER_LIST,
  parseEntry,
  type SenderListEntry
} from "./sender-list-rules.ts"

/** Whose list: the account's (mailboxId null) or one of its mailboxes'. */
export interface ListOwner {
  readonly userId: string
  readonly mailboxId: string | null
}

/**
 * An entry as its table holds it, decoded as it is read (SqlSchema): a row that does not read so is a
 * bug here or in a migration, a defect rather than a failure of the request.
 */
const EntryRow = Schema.Struct({ entry: Schema.String, createdAt: Schema.DateFromSelf })
type EntryRow = typeof EntryRow.Type

/** A count(*) as `total`: a bigint, which the client reads as a string. */
const CountRow = Schema.Struct({ total: Schema.NumberFromString })

/** Whose list, as a statement's parameters. */
const ListRequest = {
  userId: Schema.String,
  mailboxId: Schema.NullOr(Schema.String),
  list: ListName
}

const toEntry = (owner: ListOwner, list: ListName) => (row: EntryRow): SenderListEntry => ({
  entry: row.entry,
  type: entryType(row.entry),
  list,
  mailbox_id: owner.mailboxId,
  created_at: row.createdAt.toISOString()
})

/** The entry `raw` stands for, or 400 VALIDATION_ERROR naming the field. */
export const entryOrInvalid = (raw: string): Effect.Effect<Entry, ValidationError> => {
  const parsed = parseEntry(raw)
  return typeof parsed === "string" ? Effect.fail(ValidationError.field("entry", parsed)) : Effect.succeed(parsed)
}

export class SenderLists extends Effect.Service<SenderLists>()("mailroom/SenderLists", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const directory = yield* RecipientDirectory

    const ofOwner = (owner: ListOwner, list: ListName) =>
      sql`user_id = ${owner.userId} AND list = ${list} AND ${
        owner.mailboxId === null ? sql`mailbox_id IS NULL` : sql`mailbox_id = ${owner.mailboxId}`
      }`

    const entryRows = SqlSchema.findAll({
      Request: Schema.Struct({
        ...ListRequest,
        sort: Schema.Struct({ field: Schema.Literal(...entrySortFields), ascending: Schema.Boolean }),
        page: Schema.Struct({ limit: Schema.Number, offset: Schema.Number })
      }),
      Result: EntryRow,
      execute: ({ list, page, sort, ...owner }) => {
        const order = sql.literal(`${sort.field} ${sort.ascending ? "ASC" : "DESC"}, entry`)
        return sql`
          SELECT entry, created_at FROM sender_list_entries WHERE ${ofOwner(owner, list)}
          ORDER BY ${order} LIMIT ${page.limit} OFFSET ${page.offset}`
      }
    })

    const countRow = SqlSchema.single({
      Request: Schema.Struct(ListRequest),
      Result: CountRow,
      execute: ({ list, ...owner }) => sql`SELECT count(*) AS total FROM sender_list_entries WHERE ${ofOwner(owner, list)}`
    })

    /** None when the entry is on the list already, or the list is full. */
    const insertRow = SqlSchema.findOne({
      Request: Schema.Struct({ ...ListRequest, entry: Schema.String }),
      Result: EntryRow,
      execute: ({ entry, list, ...owner }) =>
        sql`
          INSERT INTO sender_list_entries (user_id, mailbox_id, list, entry)
          SELECT ${owner.userId}, ${owner.mailboxId}::text, ${list}, ${entry}
          WHERE (SELECT count(*) FROM sender_list_entries WHERE ${ofOwner(owner, list)}) < ${MAX_ENTRIES_PER_LIST}
          ON CONFLICT DO NOTHING
          RETURNING entry, created_at`
    })

    const entryRow = SqlSchema.findOne({
      Request: Schema.Struct({ ...ListRequest, entry: Schema.String }),
      Result: EntryRow,
      execute: ({ entry, list, ...owner }) =>
        sql`SELECT entry, created_at FROM sender_list_entries WHERE ${ofOwner(owner, list)} AND entry = ${entry}`
    })

    /** A mailbox list's owner must own the mailbox, and it must be active: otherwise 404. */
    const checkOwner = (owner: ListOwner) =>
      Effect.gen(function*() {
        if (owner.mailboxId === null) return
        yield* ownMailbox(sql, owner.userId, owner.mailboxId)
      })

    /** Newest first, unless `sort` says otherwise. */
    const list = Effect.fn("SenderLists.list")(function*(
      owner: ListOwner,
      name: ListName,
      page: Page,
      sort: Sort<EntrySortField> = { field: "created_at", direction: "desc" }
    ) {
      yield* checkOwner(owner)
      const which = { userId: owner.userId, mailboxId: owner.mailboxId, list: name }
      const rows = yield* entryRows({ ...which, sort: { field: sort.field, ascending: sort.direction === "asc" }, page }).pipe(
        Effect.catchTag("ParseError", Effect.die)
      )
      const counted = yield* countRow(which).pipe(Effect.catchTags({ ParseError: Effect.die, NoSuchElementException: Effect.die }))
      return { data: rows.map(toEntry(owner, name)), total: counted.total }
    })

    /** Add `raw` (normalised) to the list; an entry already there is answered as it was. */
    const add = Effect.fn("SenderLists.add")(function*(owner: ListOwner, name: ListName, raw: string) {
      const { entry } = yield* entryOrInvalid(raw)
      yield* checkOwner(owner)
      const which = { userId: owner.userId, mailboxId: owner.mailboxId, list: name, entry }
      // Inserted only while the list has room; an entry already there conflicts and is left as it is.
      const inserted = yield* insertRow(which).pipe(Effect.catchTag("ParseError", Effect.die))
      if (Option.isSome(inserted)) {
        // The owner's addresses are now judged per sender: no node may answer RCPT from its directory.
        yield* directory.changed(owner.userId)
        return { entry: toEntry(owner, name)(inserted.value), created: true }
      }
      const existing = yield* entryRow(which).pipe(Effect.catchTag("ParseError", Effect.die))
      if (Option.isSome(existing)) return { entry: toEntry(owner, name)(existing.value), created: false }
      return yield* new SenderListFull({
        message: `The ${name} list already holds ${MAX_ENTRIES_PER_LIST} entries; remove some first`,
        details: { list: name, limit: MAX_ENTRIES_PER_LIST, mailbox_id: owner.mailboxId }
      })
    })

    /** Remove `raw` (normalised) from the list; 404 when it is not on it. */
    const remove = Effect.fn("SenderLists.remove")(function*(owner: ListOwner, name: ListName, raw: string) {
      const { entry } = yield* entryOrInvalid(raw)
      yield* checkOwner(owner)
      const deleted = yield* sql`
        DELETE FROM sender_list_entries WHERE ${ofOwner(owner, name)} AND entry = ${entry} RETURNING 1`
      if (deleted.length === 0) {
        return yield* new NotFound({ message: `${entry} is not on this ${name} list`, details: { entry, list: name } })
      }
      yield* directory.changed(owner.userId)
      return { entry, list: name, mailbox_id: owner.mailboxId, deleted: true as const }
    })

    return { list, add, remove } as const
  })
}) {}
