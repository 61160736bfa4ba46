/**
 * The per-request hot path: resolve a credential to a principal and count the request against the
 * caller's rate limits, in one database round trip.
 *
 * API keys are limited per key; access tokens and dashboard cookies per user. A revoked or expired
 * key, or a token of a session that was logged out, is refused at once on every node.
 */
import { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import type { Fragment } from "@effect/sql/Statement"
import { Effect, Option } from "effect"
import { Unauthorized } from "../errors.ts"
import { KeyUsage } from "../keys/last-used.ts"
import { limits, type Plan } from "../plans/plans.ts"
import { type Decision, type DecisionRow, intArray, planWindows, toDecision } from "../ratelimit/rate-limiter.ts"
import type { Principal } from "./principal.ts"
import { AccountSettings } from "./settings.ts"
import { apiKeyPrefix, looksLikeAccessToken, sha256, verifyAccessToken } from "./tokens.ts"

export type Credential =
  | { readonly kind: "apiKey"; readonly secret: string }
  | { readonly kind: "accessToken"; readonly secret: string }
  | { readonly kind: "cookie"; readonly secret: string }

/** `Authorization: Bearer` carries either an access token or an API key. */
export const bearerCredential = (secret: string): Credential =>
  looksLikeAccessToken(secret) ? { kind: "accessToken", secret } : { kind: "apiKey", secret }

export interface Authenticated {
  readonly principal: Principal
  readonly decision: Decision
}

const windowSeconds = intArray(planWindows(limits.free.requests).map((w) => w.seconds))
const limitsOf = (plan: Plan) => intArray(planWindows(limits[plan].requests).map((w) => w.limit))

interface Row extends DecisionRow {
  readonly userId: string
  readonly plan: Plan
  readonly keyId: string | null
  readonly sessionId: string | null
}

export class Authenticator extends Effect.Service<Authenticator>()("mailroom/Authenticator", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const keyUsage = yield* KeyUsage
    const { jwtSecret } = yield* AccountSettings

    const rate = (subject: Fragment) =>
      sql`CROSS JOIN LATERAL mailroom_rate_take(${subject}, ${windowSeconds}::int[],
            CASE sub.plan WHEN 'free' THEN ${limitsOf("free")}::int[]
                          WHEN 'pro' THEN ${limitsOf("pro")}::int[]
                          ELSE ${limitsOf("enterprise")}::int[] END) rl`

    const byKey = (secret: string) =>
      sql<Row>`
        SELECT k.user_id, sub.plan, k.id AS key_id, NULL AS session_id, rl.*
        FROM api_keys k JOIN subscriptions sub ON sub.user_id = k.user_id
        ${rate(sql.literal("'key:' || k.id"))}
        WHERE k.key_hash = ${sha256(secret)} AND k.revoked_at IS NULL
          AND (k.expires_at IS NULL OR k.expires_at > now())`

    const bySession = (condition: Fragment) =>
      sql<Row>`
        SELECT s.user_id, sub.plan, NULL AS key_id, s.id AS session_id, rl.*
        FROM sessions s JOIN subscriptions sub ON sub.user_id = s.user_id
        ${rate(sql.literal("'user:' || s.user_id"))}
        WHERE ${condition} AND s.revoked_at IS NULL AND s.refresh_expires_at > now()`

    const lookup = (credential: Credential): Effect.Effect<ReadonlyArray<Row>, SqlError> => {
      switch (credential.kind) {
        case "apiKey":
          return credential.secret.startsWith(apiKeyPrefix) ? byKey(credential.secret) : Effect.succeed([])
        case "accessToken":
          return Option.match(verifyAccessToken(jwtSecret, credential.secret), {
            onNone: () => Effect.succeed([]),
            onSome: (claims) => bySession(sql`s.id = ${claims.sid} AND s.user_id = ${claims.sub}`)
          })
        case "cookie":
          return bySession(sql`s.cookie_hash = ${sha256(credential.secret)}`)
      }
    }

    const refusal = (credential: Credential) =>
      Unauthorized.of(
        credential.kind === "apiKey"
          ? "Invalid, expired or revoked API key"
          : credential.kind === "accessToken"
          ? "Invalid or expired access token"
          : "Invalid or expired session"
      )

    const authenticate = (credential: Credential): Effect.Effect<Authenticated, Unauthorized | SqlError> =>
      lookup(credential).pipe(
        Effect.flatMap((rows) => {
          const row = rows[0]
          if (!row) return Effect.fail(refusal(credential))
          const keyId = Option.fromNullable(row.keyId)
          if (Option.isSome(keyId) && row.allowed) keyUsage.touch(keyId.value)
          return Effect.succeed({
            principal: {
              userId: row.userId,
              plan: row.plan,
              via: credential.kind,
              keyId,
              sessionId: Option.fromNullable(row.sessionId)
            },
            decision: toDecision(row)
          })
        }),
        Effect.withSpan("Authenticator.authenticate", { attributes: { via: credential.kind } })
      )

    return { authenticate } as const
  })
}) {}
