/**
 * Password hashing with scrypt (memory-hard). Parameters: N = 2^15, r = 8, p = 1 (32 MiB of memory
 * and ~0.1 s of one core per hash on our 2-core machines), 16-byte salt, 32-byte key. They are stored
 * with each hash, so they can be raised later without breaking existing passwords.
 */
import { Effect } from "effect"
import { randomBytes, scrypt, timingSafeEqual } from "node:crypto"

const params = { N: 2 ** 15, r: 8, p: 1, keyLength: 32 }

const derive = (password: string, salt: Buffer, N: number, r: number, p: number, keyLength: number) =>
  Effect.async<Buffer>((resume) => {
    // maxmem must exceed 128 * N * r bytes; scrypt runs on libuv's thread pool, off the event loop.
    scrypt(password.normalize("NFKC"), salt, keyLength, { N, r, p, maxmem: 256 * N * r }, (error, key) => {
      resume(error ? Effect.die(error) : Effect.succeed(key))
    })
  })

export const hashPassword = (password: string) =>
  Effect.gen(function*() {
    const salt = randomBytes(16)
    const key = yield* derive(password, salt, params.N, params.r, params.p, params.keyLength)
    return `scrypt$${params.N}$${params.r}$${params.p}$${salt.toString("base64")}$${key.toString("base64")}`
  })

export const verifyPassword = (password: string, stored: string) =>
  Effect.gen(function*() {
    const [scheme, n, r, p, salt, key] = stored.split("$")
    if (scheme !== "scrypt" || !n || !r || !p || !salt || !key) return false
    const expected = Buffer.from(key, "base64")
    const actual = yield* derive(password, Buffer.from(salt, "base64"), Number(n), Number(r), Number(p), expected.length)
    return timingSafeEqual(actual, expected)
  })
