/**
 * The per-request hot path: resolve a credential to a principal and count the request against the
 * caller's rate limits, without a database round trip in the common case (issue 19):
 *
 * - the credential's owner comes from this process's cache (principals.ts), which a revocation, a
 *   logout or a plan change empties on every node through the bus; a miss asks the database
 *   (`mailroom_principal`, migration 0018), misses that arrive together in one round trip;
 * - the request is counted against a lease of tokens this process took from the shared counters
 *   (ratelimit/leases.ts); a lease is at most 2% of the limit, so low limits stay exact.
 *
 * API keys are limited per key; access tokens per user, with the plan's limits; dashboard cookies per
 * user too, apart from them and with a person's (`dashboardRequests`, plans.ts).
 */
import { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Option } from "effect"
import { groupCommit } from "../batching.ts"
import { Unauthorized } from "../errors.ts"
import { limits, type Plan, type RateWindows } from "../plans/plans.ts"
import { RateLeases } from "../ratelimit/leases.ts"
import { type Decision, planWindows, type Window } from "../ratelimit/rate-limiter.ts"
import { CredentialUse } from "./credential-use.ts"
import type { Principal } from "./principal.ts"
import { type PrincipalRecord, Principals } from "./principals.ts"
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

interface Row {
  readonly idx: string | number
  readonly userId: string
  readonly plan: Plan
  readonly keyId: string | null
  readonly sessionId: string | null
  readonly validUntil: Date | null
  readonly mailboxIds: ReadonlyArray<string> | null
  readonly permission: string
}

/** A plan's request windows, made once per plan: an agent's (key, access token) and a person's (cookie). */
const windowsOf = (pick: (limit: (typeof limits)[Plan]) => RateWindows) =>
  Object.fromEntries(Object.entries(limits).map(([plan, limit]) => [plan, planWindows(pick(limit))])) as Record<Plan, ReadonlyArray<Window>>
const requestWindows = windowsOf((limit) => limit.requests)
const dashboardWindows = windowsOf((limit) => limit.dashboardRequests)

/** The counter a request is taken from, and its windows. */
const bucketOf = (principal: Principal): readonly [string, ReadonlyArray<Window>] =>
  Option.isSome(principal.keyId)
    ? [`key:${principal.keyId.value}`, requestWindows[principal.plan]]
    : principal.via === "cookie"
    ? [`dashboard:${principal.userId}`, dashboardWindows[principal.plan]]
    : [`user:${principal.userId}`, requestWindows[principal.plan]]

export class Authenticator extends Effect.Service<Authenticator>()("mailroom/Authenticator", {
  dependencies: [CredentialUse.layer, RateLeases.Default],
  scoped: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const uses = yield* CredentialUse
    const leases = yield* RateLeases
    const principals = yield* Principals
    const { jwtSecret } = yield* AccountSettings

    /** Cache misses that arrive together share one round trip (group commit). */
    const lookupAll = yield* groupCommit({
      maxBatch: MAX_BATCH,
      parallel: PARALLEL_LOOKUPS,
      run: (batch: ReadonlyArray<Lookup>) =>
        sql<Row>`
          SELECT c.idx, p.*
          FROM unnest(${batch.map((l) => l.kind)}::text[], ${batch.map((l) => l.ref)}::text[],
                      ${batch.map((l) => l.user)}::text[]) WITH ORDINALITY AS c(kind, ref, usr, idx)
          CROSS JOIN LATERAL mailroom_principal(c.kind, c.ref, c.usr) p`.pipe(
          Effect.map((rows) => {
            const byIndex = new Map(rows.map((row) => [Number(row.idx), row]))
            return batch.map((_, i) =>
              Option.map(Option.fromNullable(byIndex.get(i + 1)), (row): PrincipalRecord => ({
                userId: row.userId,
                plan: row.plan,
                keyId: Option.fromNullable(row.keyId),
                sessionId: Option.fromNullable(row.sessionId),
                mailboxes: Option.fromNullable(row.mailboxIds),
                readOnly: row.permission === "read_only",
                validUntil: Option.map(Option.fromNullable(row.validUntil), (at) => new Date(at).getTime())
              }))
            )
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

    /**
     * Who `credential` acts for, counted against no limit: for a surface with limits of its own (MCP),
     * whose requests are not the API's. A key or session that identifies its owner has been used (a key's
     * `lastUsed`, a session's `lastActiveAt`).
     */
    const identify = (credential: Credential): Effect.Effect<Principal, Unauthorized | SqlError> =>
      Effect.gen(function*() {
        const wanted = lookup(credential)
        if (Option.isNone(wanted)) return yield* refusal(credential)
        const { kind, ref, user } = wanted.value
        const found = yield* principals.resolve(`${kind}:${ref}:${user}`, lookupAll(wanted.value))
        if (Option.isNone(found)) return yield* refusal(credential)
        const record = found.value
        if (Option.isSome(record.keyId)) uses.touchKey(record.keyId.value)
        else if (Option.isSome(record.sessionId)) uses.touchSession(record.sessionId.value)
        return { userId: record.userId, plan: record.plan, via: credential.kind, keyId: record.keyId, sessionId: record.sessionId,
          mailboxes: record.mailboxes, readOnly: record.readOnly }
      })

    /** Who `credential` acts for, and this request counted against its limits (per key, else per user). */
    const authenticate = (credential: Credential): Effect.Effect<Authenticated, Unauthorized | SqlError> =>
      Effect.flatMap(identify(credential), (principal) =>
        Effect.map(leases.take(...bucketOf(principal)), (decision) => ({ principal, decision })))

    return { identify, authenticate } as const
  })
}) {}
