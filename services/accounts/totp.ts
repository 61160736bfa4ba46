/**
 * Time-based one-time passwords (RFC 6238 over RFC 4226's HOTP), as every authenticator app makes them:
 * HMAC-SHA1, 6 digits, 30-second steps, the secret in base32 (RFC 4648, unpadded) and handed over as
 * an `otpauth://totp/` URI (the de facto format authenticator apps scan from a QR code). And the
 * recovery codes that stand in for the app when it is lost. Pure functions: two-factor.ts keeps them.
 */
import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto"

export const TOTP_DIGITS = 6
export const TOTP_PERIOD_SECONDS = 30
/** Codes of this many steps either side of now are accepted: a phone's clock a little off, a code typed at a step's end. */
const DRIFT_STEPS = 1
/** 160 bits: the size RFC 4226 recommends for HMAC-SHA1's key. */
const SECRET_BYTES = 20

const BASE32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"

export const base32Encode = (bytes: Uint8Array): string => {
  let out = ""
  let bits = 0
  let value = 0
  for (const byte of bytes) {
    value = (value << 8) | byte
    bits += 8
    while (bits >= 5) {
      out += BASE32[(value >>> (bits - 5)) & 31]
      bits -= 5
    }
  }
  if (bits > 0) out += BASE32[(value << (5 - bits)) & 31]
  return out
}

/** Case, spaces and padding ignored (apps and people write secrets all three ways); undefined when not base32. */
export const base32Decode = (text: string): Buffer | undefined => {
  const clean = text.replace(/[\s=]/g, "").toUpperCase()
  const bytes: Array<number> = []
  let bits = 0
  let value = 0
  for (const char of clean) {
    const digit = BASE32.indexOf(char)
    if (digit < 0) return undefined
    value = ((value << 5) | digit) & 0xffff
    bits += 5
    if (bits >= 8) {
      bytes.push((value >>> (bits - 8)) & 255)
      bits -= 8
    }
  }
  return Buffer.from(bytes)
}

/** A new secret, base32. */
export const newTotpSecret = (): string => base32Encode(randomBytes(SECRET_BYTES))

/** The time step `at` falls in. */
export const stepAt = (at: number): number => Math.floor(at / 1000 / TOTP_PERIOD_SECONDS)

/** HOTP (RFC 4226 §5.3): the code of `counter` under `key`, `digits` long. */
export const hotp = (key: Uint8Array, counter: number, digits = TOTP_DIGITS): string => {
  const message = Buffer.alloc(8)
  message.writeBigUInt64BE(BigInt(counter))
  const mac = createHmac("sha1", key).update(message).digest()
  const offset = mac[mac.length - 1]! & 0x0f
  const binary = mac.readUInt32BE(offset) & 0x7fffffff
  return String(binary % 10 ** digits).padStart(digits, "0")
}

/** The code an authenticator app shows for base32 `secret` at time `at` (ms). */
export const totpAt = (secret: string, at: number): string => hotp(base32Decode(secret)!, stepAt(at))

/**
 * The time step whose code `code` is, of those near `at`; undefined when none is. Each candidate is
 * compared in constant time, so a wrong code takes as long as a right one.
 */
export const matchingStep = (secret: string, code: string, at: number): number | undefined => {
  const key = base32Decode(secret)
  if (key === undefined || !/^\d{6}$/.test(code)) return undefined
  const now = stepAt(at)
  let found: number | undefined
  for (let step = now - DRIFT_STEPS; step <= now + DRIFT_STEPS; step++) {
    if (timingSafeEqual(Buffer.from(hotp(key, step)), Buffer.from(code)) && found === undefined) found = step
  }
  return found
}

/** What to call the account in the app's list: `issuer:account` (RFC 6238 has none; Google's Key URI Format). */
export const otpauthUri = (secret: string, issuer: string, account: string): string => {
  const label = `${encodeURIComponent(issuer)}:${encodeURIComponent(account)}`
  const query = new URLSearchParams({
    secret,
    issuer,
    algorithm: "SHA1",
    digits: String(TOTP_DIGITS),
    period: String(TOTP_PERIOD_SECONDS)
  })
  return `otpauth://totp/${label}?${query.toString().replace(/\+/g, "%20")}`
}

/** How many recovery codes an account is given at a time. */
export const RECOVERY_CODES = 10

/**
 * Recovery codes: 10 characters of base32 (50 bits) each, written `xxxxx-xxxxx` in lowercase. Kept
 * only as SHA-256 digests (50 random bits, used once, behind the failed-login limit: a fast hash is enough).
 */
export const newRecoveryCodes = (): ReadonlyArray<string> =>
  Array.from({ length: RECOVERY_CODES }, () => {
    const code = base32Encode(randomBytes(7)).slice(0, 10).toLowerCase()
    return `${code.slice(0, 5)}-${code.slice(5)}`
  })

/** Written with or without its dash, spaces or capitals: the same code. */
export const recoveryCodeDigest = (code: string): string =>
  createHash("sha256").update(code.replace(/[\s-]/g, "").toLowerCase()).digest("hex")

/** Is `code` shaped as a TOTP code (6 digits, spaces allowed as apps show them: `123 456`)? Answers it without the spaces. */
export const asTotpCode = (code: string): string | undefined => {
  const digits = code.replace(/\s/g, "")
  return /^\d{6}$/.test(digits) ? digits : undefined
}
