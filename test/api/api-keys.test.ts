/**
 * SPEC "API keys" and the credential rules of DESIGN §4, over real HTTP.
 */
import { describe, expect, it } from "vitest"
import { useSuiteServer } from "../support/server.ts"
import { type Client, client, isoMillis, signUp, withApiKey } from "../support/http.ts"

let api: Client

useSuiteServer((suite) => {
  api = client(suite.url)
})

describe("POST /v1/api-keys", () => {
  it("creates a key: 201, the full key once, a masked prefix, the owner's plan and rate limit, and a warning", async () => {
    const user = await signUp(api)
    const reply = await api.post("/v1/api-keys", { bearer: user.accessToken, body: { name: "production" } })
    expect(reply.status).toBe(201)
    expect(reply.body).toEqual({
      success: true,
      data: {
        keyId: expect.any(String),
        name: "production",
        apiKey: expect.stringMatching(/^mr_[A-Za-z0-9_-]{40,}$/),
        keyPrefix: expect.any(String),
        plan: "free",
        rateLimit: 20,
        expirationTs: null,
        createdAt: expect.stringMatching(isoMillis)
      },
      meta: { warning: expect.stringMatching(/only time/) }
    })
    const { apiKey, keyPrefix } = reply.body.data
    expect(apiKey.startsWith(keyPrefix.replace(/\*+$/, ""))).toBe(true)
    expect(keyPrefix).toMatch(/\*{4,}$/)
    expect(keyPrefix.replace(/\*+$/, "").length).toBeLessThan(12)

    const listed = await api.get("/v1/api-keys", { apiKey })
    expect(listed.text).not.toContain(apiKey)
  })

  it("sets expirationTs from expirationDays", async () => {
    const user = await signUp(api)
    const before = Date.now()
    const reply = await api.post("/v1/api-keys", { bearer: user.accessToken, body: { name: "rotating", expirationDays: 30 } })
    expect(reply.status).toBe(201)
    const expires = Date.parse(reply.body.data.expirationTs)
    expect(expires - before).toBeGreaterThanOrEqual(30 * 86_400_000 - 1000)
    expect(expires - before).toBeLessThanOrEqual(30 * 86_400_000 + 60_000)
  })

  it.each([
    [{ name: "" }, { name: "must be 1-100 characters" }],
    [{ name: "x".repeat(101) }, { name: "must be 1-100 characters" }],
    [{}, { name: "is required" }],
    [{ name: "ok", expirationDays: 0 }, { expirationDays: "must be a whole number of days from 1 to 365" }],
    [{ name: "ok", expirationDays: 366 }, { expirationDays: "must be a whole number of days from 1 to 365" }],
    [{ name: "ok", expirationDays: 1.5 }, { expirationDays: "must be a whole number of days from 1 to 365" }],
    [{ name: 7, expirationDays: "30" }, { name: expect.any(String), expirationDays: expect.any(String) }]
  ])("refuses %j with 400 VALIDATION_ERROR details %j", async (body, details) => {
    const user = await signUp(api)
    const reply = await api.post("/v1/api-keys", { bearer: user.accessToken, body })
    expect(reply.status).toBe(400)
    expect(reply.body).toEqual({ success: false, error: { code: "VALIDATION_ERROR", message: expect.any(String), details } })
  })
})

describe("GET /v1/api-keys", () => {
  it("lists the caller's keys with lastUsed, never the key, and meta.total", async () => {
    const user = await withApiKey(api)
    await api.post("/v1/api-keys", { bearer: user.accessToken, body: { name: "second" } })
    const reply = await api.get("/v1/api-keys", { apiKey: user.apiKey })
    expect(reply.status).toBe(200)
    expect(reply.body.meta).toEqual({ total: 2, limit: 20, offset: 0, hasMore: false })
    expect(reply.body.data).toHaveLength(2)
    for (const key of reply.body.data) {
      expect(Object.keys(key).sort()).toEqual(["createdAt", "expirationTs", "keyId", "keyPrefix", "lastUsed", "name", "plan", "rateLimit"])
      expect(key.plan).toBe("free")
      expect(key.rateLimit).toBe(20)
    }
    const used = reply.body.data.find((key: { keyId: string }) => key.keyId === user.keyId)
    expect(used.lastUsed).toMatch(isoMillis)
    const unused = reply.body.data.find((key: { keyId: string }) => key.keyId !== user.keyId)
    expect(unused.lastUsed).toBeNull()
  })

  it("pages and sorts with the common list parameters", async () => {
    const user = await signUp(api)
    for (const name of ["alpha", "bravo", "charlie"]) {
      await api.post("/v1/api-keys", { bearer: user.accessToken, body: { name } })
    }
    const page = await api.get("/v1/api-keys?limit=2&offset=0&sort=name:asc", { bearer: user.accessToken })
    expect(page.body.data.map((key: { name: string }) => key.name)).toEqual(["alpha", "bravo"])
    expect(page.body.meta).toEqual({ total: 3, limit: 2, offset: 0, hasMore: true })
    const last = await api.get("/v1/api-keys?limit=2&offset=2&sort=name:asc", { bearer: user.accessToken })
    expect(last.body.data.map((key: { name: string }) => key.name)).toEqual(["charlie"])
    expect(last.body.meta).toEqual({ total: 3, limit: 2, offset: 2, hasMore: false })
    const past = await api.get("/v1/api-keys?offset=10", { bearer: user.accessToken })
    expect(past.body.data).toEqual([])
    expect(past.body.meta.total).toBe(3)
    const desc = await api.get("/v1/api-keys?sort=name:desc", { bearer: user.accessToken })
    expect(desc.body.data.map((key: { name: string }) => key.name)).toEqual(["charlie", "bravo", "alpha"])
  })

  it.each([
    ["limit=0", "limit"],
    ["limit=101", "limit"],
    ["limit=abc", "limit"],
    ["offset=-1", "offset"],
    ["sort=secret:asc", "sort"],
    ["sort=name:sideways", "sort"]
  ])("refuses ?%s with 400 VALIDATION_ERROR naming %s", async (query, field) => {
    const user = await signUp(api)
    const reply = await api.get(`/v1/api-keys?${query}`, { bearer: user.accessToken })
    expect(reply.status).toBe(400)
    expect(reply.body.error.code).toBe("VALIDATION_ERROR")
    expect(Object.keys(reply.body.error.details)).toEqual([field])
  })
})

describe("DELETE /v1/api-keys/{id}", () => {
  it("revokes: data {keyId, revoked: true}; the key then gets 401 at once", async () => {
    const user = await withApiKey(api)
    expect((await api.get("/v1/api-keys", { apiKey: user.apiKey })).status).toBe(200)
    const reply = await api.delete(`/v1/api-keys/${user.keyId}`, { bearer: user.accessToken })
    expect(reply.status).toBe(200)
    expect(reply.body).toEqual({ success: true, data: { keyId: user.keyId, revoked: true } })
    const after = await api.get("/v1/api-keys", { apiKey: user.apiKey })
    expect(after.status).toBe(401)
    expect(after.body.error.code).toBe("UNAUTHORIZED")
    const again = await api.delete(`/v1/api-keys/${user.keyId}`, { bearer: user.accessToken })
    expect(again.status).toBe(404)
    expect(again.body.error.code).toBe("NOT_FOUND")
  })

  it("one user cannot list, see or revoke another's keys (404)", async () => {
    const alice = await withApiKey(api)
    const mallory = await withApiKey(api)
    const listed = await api.get("/v1/api-keys", { apiKey: mallory.apiKey })
    expect(listed.body.data.map((key: { keyId: string }) => key.keyId)).toEqual([mallory.keyId])
    const revoke = await api.delete(`/v1/api-keys/${alice.keyId}`, { apiKey: mallory.apiKey })
    expect(revoke.status).toBe(404)
    expect(revoke.body).toEqual({ success: false, error: { code: "NOT_FOUND", message: "API key not found", details: { keyId: alice.keyId } } })
    expect((await api.get("/v1/api-keys", { apiKey: alice.apiKey })).status).toBe(200)
  })
})

describe("credentials", () => {
  it("accepts X-API-Key, Bearer API key and Bearer access token", async () => {
    const user = await withApiKey(api)
    expect((await api.get("/v1/api-keys", { apiKey: user.apiKey })).status).toBe(200)
    expect((await api.get("/v1/api-keys", { bearer: user.apiKey })).status).toBe(200)
    expect((await api.get("/v1/api-keys", { bearer: user.accessToken })).status).toBe(200)
  })

  it("refuses a missing, unknown or malformed credential with 401 UNAUTHORIZED", async () => {
    const none = await api.get("/v1/api-keys")
    expect(none.status).toBe(401)
    expect(none.body).toEqual({
      success: false,
      error: { code: "UNAUTHORIZED", message: "Missing credential: send X-API-Key or Authorization: Bearer" }
    })
    for (const options of [{ apiKey: "mr_unknown" }, { bearer: "garbage" }, { headers: { authorization: "Basic Zm9vOmJhcg==" } }]) {
      const reply = await api.get("/v1/api-keys", options)
      expect(reply.status).toBe(401)
      expect(reply.body.error.code).toBe("UNAUTHORIZED")
    }
  })
})
