/**
 * The per-request hot path: resolve a credential to a principal and count the request against the
 * caller's rate limits (the `mailroom_authenticate` function, migration 0001).
 *
 * Requests that arrive together share one database round trip: while a lookup is in flight, new
 * credentials queue, and the next lookup takes them all (group commit, services/batching.ts). The database stays the one
 * judge of every limit, so several API processes still enforce one exact limit together.
 *
 * API keys are limited per key; access tokens and dashboard cookies per user. A revoked or expired
 * key, or a token of a logged-out session, is refused at once on every node.
 */
import { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Option } from "effect"
import { Unauthorized } from "../errors.ts"
import { KeyUsage } from "../keys/last-used.ts"
import { groupCommit } from "../batching.ts"
import type { Plan } from "../plans/plans.ts"
import { authenticationLimits, type Decision, type DecisionRow, toDecision } from "../ratelimit/rate-limiter.ts"
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

/** Lookups in flight at once; each carries every credential queued when it started. */
const PARALLEL_LOOKUPS = 1
/** Credentials in one lookup at most. */
const MAX_BATCH = 256

/** A credential as the database looks it up: kind, reference, and the user an access token names. */
interface Lookup {
  readonly kind: "key" | "session" | "cookie"
  readonly ref: string
  readonly user: string
}

interface Row extends DecisionRow {
  readonly idx: string | number
  readonly userId: string
  readonly plan: Plan
  readonly keyId: string | null
  readonly sessionId: string | null
}

export class Authenticator extends Effect.Service<Authenticator>()("mailroom/Authenticator", {
  dependencies: [KeyUsage.layer],
  scoped: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const keyUsage = yield* KeyUsage
    const { jwtSecret } = yield* AccountSettings
    const { limits: planLimits, plans, windowSeconds } = authenticationLimits

    /** Credentials that arrive together share one round trip (group commit). */
    const lookupAll = yield* groupCommit({
      maxBatch: MAX_BATCH,
      parallel: PARALLEL_LOOKUPS,
      run: (batch: ReadonlyArray<Lookup>) =>
        sql<Row>`
          SELECT c.idx, a.*
          FROM unnest(${batch.map((l) => l.kind)}::text[], ${batch.map((l) => l.ref)}::text[],
                      ${batch.map((l) => l.user)}::text[]) WITH ORDINALITY AS c(kind, ref, usr, idx)
          CROSS JOIN LATERAL mailroom_authenticate(c.kind, c.ref, c.usr, ${windowSeconds}::int[], ${plans}::text[],
                                                   ${planLimits}::int[]) a`.pipe(
          Effect.map((rows) => {
            const byIndex = new Map(rows.map((row) => [Number(row.idx), row]))
            return batch.map((_, i) => Option.fromNullable(byIndex.get(i + 1)))
          }),
          Effect.withSpan("Authenticator.lookupAll", { attributes: { size: batch.length } })
        )
    })

    const lookup = (credential: Credential): Option.Option<Lookup> => {
      switch (credential.kind) {
        case "apiKey":
          return credential.secret.startsWith(apiKeyPrefix)
            ? Option.some({ kind: "key", ref: sha256(credential.secret), user: "" })
            : Option.none()
        case "accessToken":
          return Option.map(verifyAccessToken(jwtSecret, credential.secret), (claims) => ({ kind: "session", ref: claims.sid, user: claims.sub }))
        case "cookie":
          return Option.some({ kind: "cookie", ref: sha256(credential.secret), user: "" })
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
      Effect.gen(function*() {
        const wanted = lookup(credential)
        if (Option.isNone(wanted)) return yield* refusal(credential)
        const found = yield* lookupAll(wanted.value)
        if (Option.isNone(found)) return yield* refusal(credential)
        const row = found.value
        const keyId = Option.fromNullable(row.keyId)
        if (Option.isSome(keyId) && row.allowed) keyUsage.touch(keyId.value)
        return {
          principal: { userId: row.userId, plan: row.plan, via: credential.kind, keyId, sessionId: Option.fromNullable(row.sessionId) },
          decision: toDecision(row)
        }
      })

    return { authenticate } as const
  })
}) {}
