/**
 * The one-time passwords of two-factor sign-in against the RFCs' own test vectors (RFC 4648's base32,
 * RFC 4226's HOTP, RFC 6238's TOTP), the window of steps a login accepts, and the shapes handed to
 * authenticator apps and people (the otpauth URI, recovery codes).
 */
import { describe, expect, it } from "vitest"
import {
  asTotpCode,
  base32Decode,
  base32Encode,
  hotp,
  matchingStep,
  newRecoveryCodes,
  newTotpSecret,
  otpauthUri,
  recoveryCodeDigest,
  totpAt
} from "../../services/accounts/totp.ts"

describe("base32 (RFC 4648 §10)", () => {
  const vectors: ReadonlyArray<readonly [string, string]> = [
    ["", ""],
    ["f", "MY"],
    ["fo", "MZXQ"],
    ["foo", "MZXW6"],
    ["foob", "MZXW6YQ"],
    ["fooba", "MZXW6YTB"],
    ["foobar", "MZXW6YTBOI"]
  ]
  it("encodes the RFC's vectors unpadded, and decodes them padded or not, in either case, with spaces", () => {
    for (const [text, encoded] of vectors) {
      expect(base32Encode(Buffer.from(text))).toBe(encoded)
      expect(base32Decode(encoded)!.toString()).toBe(text)
      expect(base32Decode(`${encoded.toLowerCase()}${"=".repeat((8 - (encoded.length % 8)) % 8)}`)!.toString()).toBe(text)
    }
    expect(base32Decode("mzxw 6ytb oi")!.toString()).toBe("foobar")
    expect(base32Decode("MZXW1")).toBeUndefined()
  })
})

describe("HOTP and TOTP", () => {
  const key = Buffer.from("12345678901234567890")

  it("makes RFC 4226's HOTP values (Appendix D)", () => {
    const expected = ["755224", "287082", "359152", "969429", "338314", "254676", "287922", "162583", "399871", "520489"]
    expect(expected.map((_, counter) => hotp(key, counter))).toEqual(expected)
  })

  it("makes RFC 6238's SHA-1 TOTP values (Appendix B), 8 digits as there and 6 as apps show them", () => {
    const vectors: ReadonlyArray<readonly [number, string]> = [
      [59, "94287082"],
      [1111111109, "07081804"],
      [1111111111, "14050471"],
      [1234567890, "89005924"],
      [2000000000, "69279037"],
      [20000000000, "65353130"]
    ]
    const secret = base32Encode(key)
    expect(secret).toBe("GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ")
    for (const [seconds, code] of vectors) {
      expect(hotp(key, Math.floor(seconds / 30), 8)).toBe(code)
      expect(totpAt(secret, seconds * 1000)).toBe(code.slice(2))
    }
  })

  it("accepts the code of the step before and after now, not two away; finds which step a code is", () => {
    const secret = newTotpSecret()
    expect(secret).toMatch(/^[A-Z2-7]{32}$/)
    const now = 1_700_000_000_000
    const step = Math.floor(now / 30_000)
    for (const offset of [-1, 0, 1]) expect(matchingStep(secret, totpAt(secret, now + offset * 30_000), now)).toBe(step + offset)
    for (const offset of [-2, 2]) {
      const far = totpAt(secret, now + offset * 30_000)
      const near = [-1, 0, 1].map((o) => totpAt(secret, now + o * 30_000))
      if (!near.includes(far)) expect(matchingStep(secret, far, now)).toBeUndefined()
    }
    expect(matchingStep(secret, "12345", now)).toBeUndefined()
    expect(matchingStep(secret, "abcdef", now)).toBeUndefined()
  })

  it("reads a code written with spaces, as apps show it; nothing else is a code", () => {
    expect(asTotpCode(" 123 456 ")).toBe("123456")
    expect(asTotpCode("12345")).toBeUndefined()
    expect(asTotpCode("abcde-fghij")).toBeUndefined()
  })
})

describe("what apps and people are given", () => {
  it("an otpauth URI naming the issuer and the account, with the secret and the parameters spelled out", () => {
    const uri = new URL(otpauthUri("JBSWY3DPEHPK3PXP", "Mailroom", "ada+work@example.com"))
    expect(uri.protocol).toBe("otpauth:")
    expect(uri.host).toBe("totp")
    expect(decodeURIComponent(uri.pathname)).toBe("/Mailroom:ada+work@example.com")
    expect(Object.fromEntries(uri.searchParams)).toEqual({
      secret: "JBSWY3DPEHPK3PXP",
      issuer: "Mailroom",
      algorithm: "SHA1",
      digits: "6",
      period: "30"
    })
  })

  it("10 recovery codes, xxxxx-xxxxx, all different, each the same code however it is typed", () => {
    const codes = newRecoveryCodes()
    expect(codes).toHaveLength(10)
    expect(new Set(codes).size).toBe(10)
    for (const code of codes) expect(code).toMatch(/^[a-z2-7]{5}-[a-z2-7]{5}$/)
    const code = codes[0]!
    const typed = [code.replace("-", ""), code.toUpperCase(), ` ${code.slice(0, 3)} ${code.slice(3)} `]
    for (const variant of typed) expect(recoveryCodeDigest(variant)).toBe(recoveryCodeDigest(code))
    expect(recoveryCodeDigest(codes[1]!)).not.toBe(recoveryCodeDigest(code))
  })
})
