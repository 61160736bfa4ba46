/**
 * Which mailboxes are the caller's: one it names (else its 404), or several (a shared schedule's, else
 * the first other one's 404); a list of ids it names (a webhook's `mailbox_ids`, a key's `mailboxIds`),
 * each of which must be an active mailbox of the account (else a VALIDATION_ERROR of the field); the
 * condition that keeps a statement to some mailboxes (a key limited to them), or to one or every one
 * (`mailboxScope`); and the 404 for a
 * mailbox that is not the caller's, which a mailbox outside a key's limit gets too.
 */
import type { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { NotFound, ValidationError } from "../errors.ts"

/** 404 for a mailbox that is not an active mailbox of the caller's (or outside its key's limit). */
export const mailboxNotFound = (mailboxId: string) => new NotFound({ message: "Mailbox not found", details: { mailbox_id: mailboxId } })

/** Nothing when `mailboxId` is an active mailbox of `userId`'s; else its 404. */
export const ownMailbox = (sql: SqlClient.SqlClient, userId: string, mailboxId: string) =>
  Effect.flatMap(
    sql`SELECT 1 FROM mailboxes WHERE id = ${mailboxId} AND user_id = ${userId} AND status = 'active'`,
    (rows) => rows.length === 0 ? Effect.fail(mailboxNotFound(mailboxId)) : Effect.void
  )

/** `mailboxIds`, each once in the order given, and those of them that are not active mailboxes of `userId`'s. */
const sortOut = (sql: SqlClient.SqlClient, userId: string, mailboxIds: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const ids = Array.from(new Set(mailboxIds))
    const found = yield* sql<{ id: string }>`
      SELECT id FROM mailboxes WHERE id = ANY(${ids}::text[]) AND user_id = ${userId} AND status = 'active'`
    const known = new Set(found.map((row) => row.id))
    return { ids, unknown: ids.filter((id) => !known.has(id)) }
  })

/** `mailboxIds`, each once in the order given, if every one is an active mailbox of `userId`'s; else the first other one's 404. */
export const ownMailboxes = (sql: SqlClient.SqlClient, userId: string, mailboxIds: ReadonlyArray<string>) =>
  Effect.flatMap(sortOut(sql, userId, mailboxIds), ({ ids, unknown }) => unknown.length === 0 ? Effect.succeed(ids) : Effect.fail(mailboxNotFound(unknown[0]!)))

/** `AND <column> = ANY(only)` when `only` is given (a key limited to those mailboxes); else nothing. */
export const amongMailboxes = (sql: SqlClient.SqlClient, column: string, only: ReadonlyArray<string> | undefined) =>
  only === undefined ? sql`` : sql`AND ${sql.literal(column)} = ANY(${[...only]}::text[])`

/**
 * What a statement about "one mailbox, or every mailbox" reads: the condition on a mailbox column that
 * keeps it to the mailbox the caller names (its 404 when that is not an active mailbox of `userId`'s, or
 * lies outside `only`, a limited key's mailboxes), else to every active mailbox of the account (within `only`).
 */
export const mailboxScope = (
  sql: SqlClient.SqlClient,
  userId: string,
  options: { readonly mailboxId?: string | undefined; readonly only?: ReadonlyArray<string> | undefined }
) =>
  Effect.gen(function*() {
    const { mailboxId, only } = options
    if (mailboxId === undefined) {
      return (column: string) =>
        sql`${sql.literal(column)} IN (SELECT id FROM mailboxes WHERE user_id = ${userId} AND status = 'active' ${amongMailboxes(sql, "id", only)})`
    }
    // A mailbox outside a limited key's is, to it, one that does not exist.
    if (only !== undefined && !only.includes(mailboxId)) return yield* mailboxNotFound(mailboxId)
    yield* ownMailbox(sql, userId, mailboxId)
    return (column: string) => sql`${sql.literal(column)} = ${mailboxId}`
  })

/** `mailboxIds`, each once in the order given, if every one is an active mailbox of `userId`; else `field`'s VALIDATION_ERROR. */
export const ownedMailboxes = (sql: SqlClient.SqlClient, userId: string, mailboxIds: ReadonlyArray<string>, field: string) =>
  Effect.flatMap(sortOut(sql, userId, mailboxIds), ({ ids, unknown }) =>
    unknown.length === 0 ? Effect.succeed(ids) : Effect.fail(ValidationError.field(field, `not a mailbox of this account: ${unknown.join(", ")}`)))
