/**
 * Lists of mailbox ids a caller names (a webhook's `mailbox_ids`, a key's `mailboxIds`): each must be
 * an active mailbox of the account.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { ValidationError } from "../errors.ts"

/** `mailboxIds`, each once in the order given, if every one is an active mailbox of `userId`; else `field`'s VALIDATION_ERROR. */
export const ownedMailboxes = (userId: string, mailboxIds: ReadonlyArray<string>, field: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const ids = Array.from(new Set(mailboxIds))
    const found = yield* sql<{ id: string }>`
      SELECT id FROM mailboxes WHERE id = ANY(${ids}::text[]) AND user_id = ${userId} AND status = 'active'`
    const known = new Set(found.map((row) => row.id))
    const unknown = ids.filter((id) => !known.has(id))
    if (unknown.length > 0) return yield* ValidationError.field(field, `not a mailbox of this account: ${unknown.join(", ")}`)
    return ids
  })
