/**
 * Identifiers (services/accounts/tokens.ts newId): a type prefix and 96 random bits, unique across
 * refills of the random pool they are cut from.
 */
import { describe, expect, it } from "vitest"
import { newId } from "../services/accounts/tokens.ts"

describe("newId", () => {
  it("is the prefix, an underscore and 24 hex digits, and never repeats across pool refills", () => {
    const ids = Array.from({ length: 5_000 }, () => newId("eml"))
    for (const id of ids) expect(id).toMatch(/^eml_[0-9a-f]{24}$/)
    expect(new Set(ids).size).toBe(ids.length)
  })
})
