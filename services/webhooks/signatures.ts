/**
 * How deliveries are signed, and how a receiver checks them. Importable on its own (no Effect, no
 * Mailroom services): `import { verifyWebhook } from "mailroom/webhooks"` (packages/client).
 *
 * Every delivery carries two signatures over the exact bytes of the body:
 *
 * - `X-Service-Signature: sha256=<hex>`: SPEC's signature, the lowercase hex HMAC-SHA256 of the raw
 *   body keyed with the webhook secret (its UTF-8 bytes).
 * - `webhook-id`, `webhook-timestamp`, `webhook-signature: v1,<base64>`: the Standard Webhooks scheme
 *   (https://www.standardwebhooks.com). The signed content is `<id>.<timestamp>.<body>`, which is what
 *   gives a receiver replay protection: a captured delivery cannot be sent again later, because its
 *   timestamp is signed. The key is the secret's base64 part for `whsec_…` secrets (the ones Mailroom
 *   generates), so existing Standard Webhooks libraries verify them as they are; a secret you chose
 *   yourself is used as raw bytes (those libraries' `format: "raw"`).
 *
 * `webhook-id` is the same for every attempt and every redelivery of one event to one endpoint:
 * receivers drop duplicates by it.
 */
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto"

export const SECRET_PREFIX = "whsec_"

/** A new signing secret: `whsec_` and 32 random bytes in base64. */
export const generateSecret = () => `${SECRET_PREFIX}${randomBytes(32).toString("base64")}`

/** A `whsec_<base64>` secret: the Standard Webhooks scheme keys it with the bytes its base64 stands for. */
const standardForm = /^whsec_[A-Za-z0-9+/]+={0,2}$/

/** The secret as the Standard Webhooks scheme keys it. */
const standardKey = (secret: string): Buffer =>
  standardForm.test(secret) ? Buffer.from(secret.slice(SECRET_PREFIX.length), "base64") : Buffer.from(secret, "utf8")

/** The fewest key bytes a chosen `whsec_<base64>` secret may stand for (Standard Webhooks: 24 to 64). */
export const MIN_STANDARD_KEY_BYTES = 24

/**
 * Why a secret someone chose cannot be taken, if it cannot: one in the `whsec_<base64>` form keys the
 * Standard Webhooks signature with the bytes it decodes to, so `whsec_AA` would be a one-byte key.
 */
export const weakStandardSecret = (secret: string): string | undefined =>
  standardForm.test(secret) && standardKey(secret).length < MIN_STANDARD_KEY_BYTES
    ? `must stand for at least ${MIN_STANDARD_KEY_BYTES} bytes when written whsec_<base64> (this one stands for ` +
      `${standardKey(secret).length}); leave it out to have one generated`
    : undefined

const hmac = (key: string | Buffer, content: string | Uint8Array) => createHmac("sha256", key).update(content)

/** `sha256=<lowercase hex HMAC-SHA256 of body keyed with secret>`: the `X-Service-Signature` value. */
export const serviceSignature = (secret: string, body: string | Uint8Array) => `sha256=${hmac(secret, body).digest("hex")}`

/** The `webhook-signature` value for one attempt. */
export const standardSignature = (secret: string, id: string, timestamp: number, body: string | Uint8Array) =>
  `v1,${hmac(standardKey(secret), Buffer.concat([Buffer.from(`${id}.${timestamp}.`), Buffer.from(body)])).digest("base64")}`

/** Every signing header of one attempt. `timestamp` is in seconds since the epoch. */
export const signingHeaders = (input: { readonly secret: string; readonly id: string; readonly timestamp: number; readonly body: string }) => ({
  "x-service-signature": serviceSignature(input.secret, input.body),
  "webhook-id": input.id,
  "webhook-timestamp": String(input.timestamp),
  "webhook-signature": standardSignature(input.secret, input.id, input.timestamp, input.body)
})

/** Equal strings in time that does not depend on where they differ. */
const sameText = (a: string, b: string) => {
  const left = Buffer.from(a)
  const right = Buffer.from(b)
  // The length of a signature is public (it is fixed by the algorithm); only its bytes are secret.
  return left.length === right.length && timingSafeEqual(left, right)
}

/**
 * SPEC's check: does `header` (the `X-Service-Signature` value) sign `body` with `secret`? `body` must
 * be the raw bytes received, before any JSON parsing.
 */
export const verifyServiceSignature = (secret: string, body: string | Uint8Array, header: string | null | undefined): boolean =>
  typeof header === "string" && sameText(header.trim().toLowerCase(), serviceSignature(secret, body))

type HeaderSource = Headers | Record<string, string | ReadonlyArray<string> | undefined>

const header = (headers: HeaderSource, name: string): string | undefined => {
  if (typeof (headers as Headers).get === "function") return (headers as Headers).get(name) ?? undefined
  const record = headers as Record<string, string | ReadonlyArray<string> | undefined>
  const key = Object.keys(record).find((k) => k.toLowerCase() === name)
  const value = key === undefined ? undefined : record[key]
  return Array.isArray(value) ? value[0] : (value as string | undefined)
}

export interface VerifyInput {
  /** The webhook's signing secret, as shown when it was created or rotated. */
  readonly secret: string
  /** The raw request body, exactly as received. */
  readonly body: string | Uint8Array
  /** The request headers (a fetch `Headers`, or Node's `IncomingHttpHeaders`). */
  readonly headers: HeaderSource
  /** How far `webhook-timestamp` may be from now, in seconds. Default 300. */
  readonly toleranceSeconds?: number
  /** Now, in milliseconds since the epoch (for tests). */
  readonly now?: number
}

/**
 * Is this a genuine, fresh Mailroom delivery? Checks, in constant time, `X-Service-Signature` and the
 * Standard Webhooks signature, and that `webhook-timestamp` is within the tolerance. Any header
 * missing is a no.
 */
export const verifyWebhook = (input: VerifyInput): boolean => {
  const id = header(input.headers, "webhook-id")
  const timestampText = header(input.headers, "webhook-timestamp")
  const signatures = header(input.headers, "webhook-signature")
  if (!verifyServiceSignature(input.secret, input.body, header(input.headers, "x-service-signature"))) return false
  if (id === undefined || timestampText === undefined || signatures === undefined || !/^\d+$/.test(timestampText)) return false
  const timestamp = Number(timestampText)
  const now = Math.floor((input.now ?? Date.now()) / 1000)
  if (Math.abs(now - timestamp) > (input.toleranceSeconds ?? 300)) return false
  const expected = standardSignature(input.secret, id, timestamp, input.body)
  // The header may list several space-separated signatures (during a secret rotation, say).
  let matched = false
  for (const candidate of signatures.split(" ")) {
    if (sameText(candidate, expected)) matched = true
  }
  return matched
}

/** The masked form every response but create and rotation carries: the prefix and the last 4 characters. */
export const maskSecret = (secret: string) => {
  const prefix = secret.startsWith(SECRET_PREFIX) ? SECRET_PREFIX : ""
  const rest = secret.slice(prefix.length)
  // A short secret would be half revealed by its last characters: show none of it.
  return rest.length >= 16 ? `${prefix}${"*".repeat(8)}${rest.slice(-4)}` : `${prefix}${"*".repeat(8)}`
}
