/**
 * What an operator's commands (`mailroom users …`, `keys revoke`, `usage`) look up that no API route
 * needs: an account by its email, a key's owner, an account's counts. The changes themselves go
 * through the services the API uses (Accounts.register, Billing.changePlan, ApiKeys.revoke), so an
 * operator's change follows the same rules as a user's.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { NotFound } from "../errors.ts"

export class Administration extends Effect.Service<Administration>()("mailroom/Administration", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const userByEmail = Effect.fn("Administration.userByEmail")(function*(email: string) {
      const rows = yield* sql<{ id: string; email: string; name: string }>`
        SELECT id, email, name FROM users WHERE email_normalized = ${email.trim().toLowerCase()}`
      const user = rows[0]
      if (!user) return yield* new NotFound({ message: `No account with the email ${email}`, details: { email } })
      return user
    })

    const keyOwner = Effect.fn("Administration.keyOwner")(function*(keyId: string) {
      const rows = yield* sql<{ userId: string; revokedAt: Date | null }>`SELECT user_id, revoked_at FROM api_keys WHERE id = ${keyId}`
      const key = rows[0]
      if (!key) return yield* new NotFound({ message: `No API key ${keyId}`, details: { keyId } })
      return key
    })

    const counts = Effect.fn("Administration.counts")(function*(userId: string) {
      const rows = yield* sql<{ mailboxes: string; keys: string; emails: string }>`
        SELECT (SELECT count(*) FROM mailboxes WHERE user_id = ${userId} AND status = 'active') AS mailboxes,
               (SELECT count(*) FROM api_keys
                WHERE user_id = ${userId} AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())) AS keys,
               (SELECT count(*) FROM emails WHERE user_id = ${userId}) AS emails`
      const row = rows[0]!
      return { mailboxes: Number(row.mailboxes), keys: Number(row.keys), emails: Number(row.emails) }
    })

    return { userByEmail, keyOwner, counts } as const
  })
}) {}
