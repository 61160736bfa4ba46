/**
 * API keys (SPEC "API keys"): the full key is shown once and stored only as a hash; a key acts with
 * its owner's rights (within the mailboxes it is limited to, when it is: `mailboxIds`), and its `plan`
 * and `rateLimit` follow the owner's current plan.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { AccountActivity } from "../accounts/activity.ts"
import { CredentialUse } from "../accounts/credential-use.ts"
import { Principals } from "../accounts/principals.ts"
import { apiKeyPrefix, maskKey, newId, opaqueToken, sha256 } from "../accounts/tokens.ts"
import { Bus, encodeJson, subjects } from "../bus/bus.ts"
import { deliver, stage } from "../bus/outbox.ts"
import { NotFound } from "../errors.ts"
import { type ListMeta, listMeta, type Page, type Sort } from "../listing.ts"
import { ownedMailboxes } from "../mailboxes/owned.ts"
import { limits, type Plan } from "../plans/plans.ts"
import type { ApiKey, CreatedApiKey, CreateKeyInput, KeyPermission, KeySortField, UpdateKeyInput } from "./schemas.ts"


const sortColumns: Record<KeySortField, string> = {
  createdAt: "k.created_at",
  name: "k.name",
  lastUsed: "k.last_used_at",
  expirationTs: "k.expires_at"
}

interface KeyRow {
  readonly id: string
  readonly name: string
  readonly keyPrefix: string
  readonly plan: Plan
  readonly createdAt: Date
  readonly expiresAt: Date | null
  readonly lastUsedAt: Date | null
  readonly mailboxIds: ReadonlyArray<string> | null
  readonly permission: KeyPermission
  readonly total: string
}

export class ApiKeys extends Effect.Service<ApiKeys>()("mailroom/ApiKeys", {
  dependencies: [CredentialUse.layer, AccountActivity.Default],
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const activity = yield* AccountActivity
    const usage = yield* CredentialUse
    const bus = yield* Bus
    const principals = yield* Principals

    const create = Effect.fn("ApiKeys.create")(function*(userId: string, input: CreateKeyInput) {
      const keyId = newId("key")
      const apiKey = opaqueToken(apiKeyPrefix)
      const expiresAt = input.expirationDays === undefined ? null : new Date(Date.now() + input.expirationDays * 86_400_000)
      const permission = input.permission ?? "full_access"
      const mailboxIds = input.mailboxIds === undefined || input.mailboxIds === null
        ? null
        : yield* ownedMailboxes(sql, userId, input.mailboxIds, "mailboxIds")
      // The key and its announcement are written together (bus/outbox.ts): a bus that is down delays
      // api_key.created, never loses it.
      const { created, owed } = yield* sql.withTransaction(Effect.gen(function*() {
        const rows = yield* sql<{ createdAt: Date; plan: Plan }>`
          WITH inserted AS (
            INSERT INTO api_keys ${
          sql.insert({ id: keyId, userId, name: input.name, keyHash: sha256(apiKey), keyPrefix: maskKey(apiKey), expiresAt, mailboxIds, permission })
        }
            RETURNING created_at, user_id)
          SELECT i.created_at, s.plan FROM inserted i JOIN subscriptions s ON s.user_id = i.user_id`
        const row = rows[0]!
        const created: CreatedApiKey = {
          keyId,
          name: input.name,
          apiKey,
          keyPrefix: maskKey(apiKey),
          plan: row.plan,
          rateLimit: limits[row.plan].requests.perMinute,
          createdAt: row.createdAt.toISOString(),
          expirationTs: expiresAt?.toISOString() ?? null,
          mailboxIds,
          permission
        }
        const owed = [{
          subject: subjects.event("api_key.created"),
          data: encodeJson({
            event: "api_key.created",
            timestamp: new Date().toISOString(),
            namespace: userId,
            data: {
              keyId,
              name: created.name,
              keyPrefix: created.keyPrefix,
              createdAt: created.createdAt,
              expirationTs: created.expirationTs,
              mailboxIds,
              permission
            }
          }),
          msgId: `api_key.created:${keyId}`
        }]
        yield* stage(sql, owed)
        return { created, owed }
      }))
      yield* deliver(sql, bus, owed)
      yield* activity.record(userId, "api_key_created", { keyId, name: created.name, permission })
      return created
    })

    const toKey = (row: Omit<KeyRow, "total">): ApiKey => ({
      keyId: row.id,
      name: row.name,
      keyPrefix: row.keyPrefix,
      plan: row.plan,
      rateLimit: limits[row.plan].requests.perMinute,
      lastUsed: usage.keyLastUsed(row.id, row.lastUsedAt)?.toISOString() ?? null,
      createdAt: row.createdAt.toISOString(),
      expirationTs: row.expiresAt?.toISOString() ?? null,
      mailboxIds: row.mailboxIds,
      permission: row.permission
    })

    const list = Effect.fn("ApiKeys.list")(
      function*(userId: string, page: Page, sort: Sort<KeySortField>) {
        const order = sql.literal(
          `${sortColumns[sort.field]} ${sort.direction === "asc" ? "ASC NULLS FIRST" : "DESC NULLS LAST"}, k.id`
        )
        // The page and the count in one statement (as the email list does), so they describe the same
        // moment: a single row of nulls carries the count when the page is empty.
        const rows = yield* sql<KeyRow | { readonly id: null; readonly total: string }>`
          SELECT page.*, counted.total
          FROM (SELECT count(*) AS total FROM api_keys WHERE user_id = ${userId} AND revoked_at IS NULL) counted
          LEFT JOIN LATERAL (
            SELECT k.id, k.name, k.key_prefix, s.plan, k.created_at, k.expires_at, k.last_used_at, k.mailbox_ids, k.permission, k.position
            FROM (
              -- Numbered before the join, which need not keep the order.
              SELECT k.*, row_number() OVER (ORDER BY ${order}) AS position FROM api_keys k
              WHERE k.user_id = ${userId} AND k.revoked_at IS NULL
              ORDER BY ${order}
              LIMIT ${page.limit} OFFSET ${page.offset}
            ) k JOIN subscriptions s ON s.user_id = k.user_id
          ) page ON true
          ORDER BY page.position`
        const total = Number(rows[0]?.total ?? 0)
        const keys: Array<ApiKey> = rows.flatMap((row) => row.id === null ? [] : [toKey(row)])
        return { keys, meta: listMeta(total, page) satisfies ListMeta }
      }
    )

    /**
     * Rename a key, or change the mailboxes it is limited to or its permission. A new limit applies before the answer,
     * here and on every other node as soon as it hears (the cached principal goes).
     */
    const update = Effect.fn("ApiKeys.update")(function*(userId: string, keyId: string, input: UpdateKeyInput) {
      const mailboxIds = input.mailboxIds === undefined || input.mailboxIds === null
        ? input.mailboxIds
        : yield* ownedMailboxes(sql, userId, input.mailboxIds, "mailboxIds")
      const rows = yield* sql<Omit<KeyRow, "total">>`
        UPDATE api_keys k SET
          name = coalesce(${input.name ?? null}, k.name),
          mailbox_ids = CASE WHEN ${mailboxIds === undefined} THEN k.mailbox_ids ELSE ${mailboxIds ?? null}::text[] END,
          permission = coalesce(${input.permission ?? null}, k.permission)
        FROM subscriptions s
        WHERE k.id = ${keyId} AND k.user_id = ${userId} AND k.revoked_at IS NULL AND s.user_id = k.user_id
        RETURNING k.id, k.name, k.key_prefix, s.plan, k.created_at, k.expires_at, k.last_used_at, k.mailbox_ids, k.permission`
      const row = rows[0]
      if (!row) return yield* new NotFound({ message: "API key not found", details: { keyId } })
      if (mailboxIds !== undefined || input.permission !== undefined) yield* principals.changed(userId)
      return toKey(row)
    })

    const revoke = Effect.fn("ApiKeys.revoke")(function*(userId: string, keyId: string) {
      const rows = yield* sql<{ id: string; name: string }>`
        UPDATE api_keys SET revoked_at = now()
        WHERE id = ${keyId} AND user_id = ${userId} AND revoked_at IS NULL RETURNING id, name`
      if (rows.length === 0) return yield* new NotFound({ message: "API key not found", details: { keyId } })
      // Refused here before the answer, and on every other node as soon as it hears.
      yield* principals.changed(userId)
      yield* activity.record(userId, "api_key_revoked", { keyId, name: rows[0]!.name })
      return { keyId, revoked: true as const }
    })

    return { create, list, update, revoke } as const
  })
}) {}
