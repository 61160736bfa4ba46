/**
 * `Idempotency-Key` (issue 16): a request made again with the same key and the same body within
 * IDEMPOTENCY_WINDOW_HOURS answers what the first one answered and does nothing new; with another
 * body it is 409 IDEMPOTENCY_KEY_REUSED. A key is the account's: sends, batches, replies, forwards
 * and draft creates share them, each request's fingerprint naming its route.
 *
 * The key is claimed in the transaction that keeps what the request made (`claim`), so of two
 * requests with one key at the same moment one commits and the other, finding the key taken, rolls
 * back and answers the first's answer (`earlierAnswer`).
 */
import type { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { sha256 } from "../accounts/tokens.ts"
import { IdempotencyKeyReused } from "../errors.ts"

/** How long an Idempotency-Key answers its first answer. */
export const IDEMPOTENCY_WINDOW_HOURS = 24

/** A key as a client writes it: 1-255 visible ASCII characters. */
export const IdempotencyKey = Schema.String.pipe(
  Schema.pattern(/^[\x21-\x7e]{1,255}$/, { message: () => "must be 1-255 visible ASCII characters" })
)

export interface Idempotency {
  readonly key: string
  /** What makes two requests the same request: route, mailbox or email, and body. */
  readonly fingerprint: unknown
}

/** A key with its request's fingerprint hashed, as it is stored. */
export interface HashedKey {
  readonly key: string
  readonly fingerprint: string
}

export const hashed = (idempotency: Idempotency): HashedKey => ({
  key: idempotency.key,
  fingerprint: sha256(JSON.stringify(idempotency.fingerprint))
})

/**
 * The stored answer of a key (read as text: the client would rename a jsonb value's keys), decoded
 * as its route answers once the request is known to be the same.
 */
const StoredAnswer = Schema.Struct({ requestSha256: Schema.String, response: Schema.String })

/** The first answer of `key`, when it was given within the window; 409 when it was for another request. */
export const earlierAnswer = <A>(sql: SqlClient.SqlClient, userId: string, key: HashedKey, answer: Schema.Schema<A, string>) =>
  Effect.gen(function*() {
    const rows = yield* sql`
      SELECT request_sha256, response::text AS response FROM idempotency_keys
      WHERE user_id = ${userId} AND key = ${key.key}
        AND created_at > now() - make_interval(hours => ${IDEMPOTENCY_WINDOW_HOURS})`.pipe(
      Effect.flatMap((rows) => Effect.orDie(Schema.decodeUnknown(Schema.Array(StoredAnswer))(rows)))
    )
    const row = rows[0]
    if (!row) return undefined
    if (row.requestSha256 !== key.fingerprint) {
      return yield* new IdempotencyKeyReused({
        message: "This Idempotency-Key was used for a different request within the last 24 hours",
        details: { idempotency_key: key.key }
      })
    }
    return yield* Effect.orDie(Schema.decodeUnknown(answer)(row.response))
  })

/**
 * Claim `key` for `response`, in the transaction keeping what the request made: false when another
 * request holds it (within the window), which then waited for that one to commit.
 */
export const claim = (sql: SqlClient.SqlClient, userId: string, key: HashedKey, response: unknown) =>
  Effect.map(
    sql`
      INSERT INTO idempotency_keys (user_id, key, request_sha256, response)
      VALUES (${userId}, ${key.key}, ${key.fingerprint}, ${JSON.stringify(response)})
      ON CONFLICT (user_id, key) DO UPDATE SET request_sha256 = EXCLUDED.request_sha256, response = EXCLUDED.response,
                                               created_at = now()
        WHERE idempotency_keys.created_at <= now() - make_interval(hours => ${IDEMPOTENCY_WINDOW_HOURS})
      RETURNING 1`,
    (rows) => rows.length > 0
  )
