/**
 * Credentials on the wire.
 * - Access tokens: compact JWS (HS256) naming the user and the login session; verified locally,
 *   and the session must still be open (checked with the request's rate-limit round trip).
 * - Refresh tokens, session cookies and API keys: opaque random strings, stored only as SHA-256
 *   hashes (they carry 256 bits of entropy, so a fast hash is enough).
 */
import { Option, Redacted, Schema } from "effect"
import { createHash, createHmac, randomBytes, randomFillSync, timingSafeEqual } from "node:crypto"

export const ACCESS_TOKEN_SECONDS = 900
export const REFRESH_TOKEN_SECONDS = 30 * 24 * 3600

/** SHA-256, lowercase hex: stored token digests, content addresses of mail, thread ids. */
export const sha256 = (value: string | Uint8Array) => createHash("sha256").update(value).digest("hex")

export const opaqueToken = (prefix: string) => `${prefix}${randomBytes(32).toString("base64url")}`

/** Bytes of randomness in an identifier (96 bits). */
const ID_BYTES = 12
/**
 * Identifiers are cut from a pooled buffer of random bytes, refilled when used up: every accepted
 * message and attachment takes an id, and one system call per 512 ids beats one per id.
 */
const idPool = Buffer.alloc(ID_BYTES * 512)
let idOffset = idPool.length

/** Identifiers: a short type prefix and 96 random bits, e.g. `usr_3f9c…`. */
export const newId = (prefix: string) => {
  if (idOffset + ID_BYTES > idPool.length) {
    randomFillSync(idPool)
    idOffset = 0
  }
  const random = idPool.toString("hex", idOffset, idOffset + ID_BYTES)
  idOffset += ID_BYTES
  return `${prefix}_${random}`
}

export const apiKeyPrefix = "mr_"
export const refreshTokenPrefix = "mrr_"
export const cookieTokenPrefix = "mrc_"

const AccessClaims = Schema.Struct({
  sub: Schema.String,
  sid: Schema.String,
  iat: Schema.Number,
  exp: Schema.Number,
  typ: Schema.Literal("access")
})
export type AccessClaims = typeof AccessClaims.Type
const decodeClaims = Schema.decodeUnknownOption(Schema.parseJson(AccessClaims))

const header = Buffer.from(JSON.stringify({ alg: "HS256", typ: "JWT" })).toString("base64url")

const sign = (secret: Redacted.Redacted, input: string) =>
  createHmac("sha256", Redacted.value(secret)).update(input).digest()

export const signAccessToken = (
  secret: Redacted.Redacted,
  claims: { readonly userId: string; readonly sessionId: string },
  nowSeconds = Math.floor(Date.now() / 1000)
) => {
  const payload = Buffer.from(
    JSON.stringify({ sub: claims.userId, sid: claims.sessionId, iat: nowSeconds, exp: nowSeconds + ACCESS_TOKEN_SECONDS, typ: "access" })
  ).toString("base64url")
  const input = `${header}.${payload}`
  return `${input}.${sign(secret, input).toString("base64url")}`
}

/** The claims of a well-signed, unexpired access token; None for anything else. */
export const verifyAccessToken = (
  secret: Redacted.Redacted,
  token: string,
  nowSeconds = Math.floor(Date.now() / 1000)
): Option.Option<AccessClaims> => {
  const parts = token.split(".")
  if (parts.length !== 3 || parts[0] !== header) return Option.none()
  const expected = sign(secret, `${parts[0]}.${parts[1]}`)
  const actual = Buffer.from(parts[2]!, "base64url")
  if (actual.length !== expected.length || !timingSafeEqual(actual, expected)) return Option.none()
  return decodeClaims(Buffer.from(parts[1]!, "base64url").toString("utf8")).pipe(
    Option.filter((claims) => claims.exp > nowSeconds)
  )
}

export const looksLikeAccessToken = (token: string) => token.startsWith(`${header}.`)

/** What a key looks like in lists: the start of it, never enough to use. */
export const maskKey = (key: string) => `${key.slice(0, apiKeyPrefix.length + 6)}${"*".repeat(8)}`
