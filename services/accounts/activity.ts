/**
 * The account's security activity: sign-ins (and refused ones), changes of password, email and
 * two-factor sign-in, sessions signed out, API keys made and revoked, each with when and, where a
 * person's request caused it, the address and client it came from. What the account page lists so
 * that a person can tell their own doings from someone else's. Kept 90 days (housekeeping).
 *
 * Recording never fails what is recorded: a write that fails is logged and the action stands.
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Option } from "effect"
import { listMeta, type Page } from "../listing.ts"
import type { ActivityEntry, ActivityKind } from "./schemas.ts"
import { newId } from "./tokens.ts"

/** How long activity is kept. */
export const ACTIVITY_RETENTION_DAYS = 90
/** The most of a User-Agent kept, as for sessions. */
const MAX_USER_AGENT = 512

/** Who a request came from, as the HTTP edge saw it: provided per request, read when activity is recorded. */
export class RequestOrigin extends Context.Tag("mailroom/RequestOrigin")<RequestOrigin, {
  readonly userAgent: string | undefined
  readonly address: string | undefined
}>() {}

export type ActivityDetail = Readonly<Record<string, string | number | boolean>>

export class AccountActivity extends Effect.Service<AccountActivity>()("mailroom/AccountActivity", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    /** Record that `kind` happened to the account now, from the request being served, if any. */
    const record = (userId: string, kind: ActivityKind, detail: ActivityDetail = {}) =>
      Effect.gen(function*() {
        const origin = yield* Effect.serviceOption(RequestOrigin)
        const userAgent = Option.flatMapNullable(origin, (o) => o.userAgent)
        const address = Option.flatMapNullable(origin, (o) => o.address)
        // Characters a header may hold that a column may not (NUL) are dropped.
        const agent = Option.getOrNull(Option.map(userAgent, (a) => Array.from(a.replace(/\u0000/g, "")).slice(0, MAX_USER_AGENT).join("")))
        yield* sql`
          INSERT INTO account_activity (id, user_id, kind, user_agent, client_address, detail)
          VALUES (${newId("act")}, ${userId}, ${kind}, ${agent}, ${Option.getOrNull(address)}, ${JSON.stringify(detail)}::jsonb)`
      }).pipe(
        Effect.catchAll((error) =>
          Effect.logWarning(`Could not record the account's activity (${kind})`).pipe(Effect.annotateLogs({ user_id: userId, error: String(error) }))
        )
      )

    /** The account's activity, newest first. */
    const list = Effect.fn("AccountActivity.list")(function*(userId: string, page: Page) {
      const rows = yield* sql<{
        id: string
        kind: ActivityKind
        at: Date
        clientAddress: string | null
        userAgent: string | null
        detail: ActivityDetail | string
        total: string
      }>`
        SELECT id, kind, at, client_address, user_agent, detail, count(*) OVER () AS total
        FROM account_activity WHERE user_id = ${userId}
        ORDER BY at DESC, id DESC LIMIT ${page.limit} OFFSET ${page.offset}`
      const total = rows.length > 0 ? Number(rows[0]!.total) : page.offset === 0 ? 0 : Number(
        (yield* sql<{ n: string }>`SELECT count(*) AS n FROM account_activity WHERE user_id = ${userId}`)[0]!.n
      )
      const entries = rows.map((row): ActivityEntry => ({
        activityId: row.id,
        kind: row.kind,
        at: row.at.toISOString(),
        clientAddress: row.clientAddress,
        userAgent: row.userAgent,
        detail: typeof row.detail === "string" ? JSON.parse(row.detail) : row.detail
      }))
      return { entries, meta: listMeta(total, page) }
    })

    return { record, list } as const
  })
}) {}
