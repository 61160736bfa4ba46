/**
 * Password hashing with scrypt (memory-hard): N = 2^cost, r = 8, p = 1, a 16-byte salt and a 32-byte
 * key. The cost is `PasswordCost` (the operator's `PASSWORD_HASH_COST`), 15 unless set: 32 MiB of
 * memory and ~0.13 s of one core per hash on our 2-core machines. The parameters are stored with each
 * hash and a password is checked with its own, so the cost can change without breaking existing
 * passwords; a login with the right password then hashes it again at the current cost
 * (`needsRehash`), so that in time every password is kept at the operator's choice, and a login
 * for an unknown email (checked against a decoy at the current cost) takes as long as one for a
 * known email.
 */
import { Context, Effect } from "effect"
import { randomBytes, scrypt, timingSafeEqual } from "node:crypto"

export const DEFAULT_PASSWORD_COST = 15
/** The costs an operator may choose: 2^10 (a test suite's, ~4 ms a hash) to 2^17 (128 MiB a hash). */
export const PASSWORD_COSTS = { min: 10, max: 17 } as const

/** scrypt's cost as a power of two, for passwords hashed from now on. */
export class PasswordCost extends Context.Reference<PasswordCost>()("mailroom/PasswordCost", {
  defaultValue: (): number => DEFAULT_PASSWORD_COST
}) {}

const R = 8
const P = 1
const KEY_LENGTH = 32

const derive = (password: string, salt: Buffer, N: number, r: number, p: number, keyLength: number) =>
  Effect.async<Buffer>((resume) => {
    // maxmem must exceed 128 * N * r bytes; scrypt runs on libuv's thread pool, off the event loop.
    scrypt(password.normalize("NFKC"), salt, keyLength, { N, r, p, maxmem: 256 * N * r }, (error, key) => {
      resume(error ? Effect.die(error) : Effect.succeed(key))
    })
  })

/** A new hash of `password` at scrypt cost 2^`cost` (`PasswordCost`). */
export const hashPassword = (password: string, cost: number) =>
  Effect.gen(function*() {
    const N = 2 ** cost
    const salt = randomBytes(16)
    const key = yield* derive(password, salt, N, R, P, KEY_LENGTH)
    return `scrypt$${N}$${R}$${P}$${salt.toString("base64")}$${key.toString("base64")}`
  })

/** Whether `stored` was hashed with other parameters than a new hash at `cost` would be (or is not ours). */
export const needsRehash = (stored: string, cost: number): boolean => {
  const [scheme, n, r, p] = stored.split("$")
  return scheme !== "scrypt" || Number(n) !== 2 ** cost || Number(r) !== R || Number(p) !== P
}

export const verifyPassword = (password: string, stored: string) =>
  Effect.gen(function*() {
    const [scheme, n, r, p, salt, key] = stored.split("$")
    if (scheme !== "scrypt" || !n || !r || !p || !salt || !key) return false
    const expected = Buffer.from(key, "base64")
    const actual = yield* derive(password, Buffer.from(salt, "base64"), Number(n), Number(r), Number(p), expected.length)
    return timingSafeEqual(actual, expected)
  })
