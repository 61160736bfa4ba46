/**
 * SPEC "API keys" and the credential rules of DESIGN §4, over real HTTP through the typed client.
 */
import { describe, expect, it } from "vitest"
import { isoMillis, signUp, withApiKey } from "../support/accounts.ts"
import { refusedListParams } from "../support/list-params.ts"
import { newBox } from "../support/mailboxes.ts"
import { useSuiteServer } from "../support/server.ts"
import { anonymous, offContract, withKey, withToken } from "../support/typed-client.ts"

let baseUrl: string

useSuiteServer((suite) => {
  baseUrl = suite.url
})

/** Key management is the logged-in user's: the access token. */
const asUser = (user: { accessToken: string }) => withToken(baseUrl, user)
const createKey = (user: { accessToken: string }, name: string) => asUser(user).POST("/v1/api-keys", { body: { name } })

describe("POST /v1/api-keys", () => {
  it("creates a key: 201, the full key once, a masked prefix, the owner's plan and rate limit, and a warning", async () => {
    const user = await signUp(baseUrl)
    const reply = await createKey(user, "production")
    expect(reply.response.status).toBe(201)
    expect(reply.data).toEqual({
      success: true,
      data: {
        keyId: expect.any(String),
        name: "production",
        apiKey: expect.stringMatching(/^mr_[A-Za-z0-9_-]{40,}$/),
        keyPrefix: expect.any(String),
        plan: "free",
        rateLimit: 20,
        expirationTs: null,
        mailboxIds: null,
        permission: "full_access",
        createdAt: expect.stringMatching(isoMillis)
      },
      meta: { warning: expect.stringMatching(/only time/) }
    })
    const { apiKey, keyPrefix } = reply.data!.data
    expect(apiKey.startsWith(keyPrefix.replace(/\*+$/, ""))).toBe(true)
    expect(keyPrefix).toMatch(/\*{4,}$/)
    expect(keyPrefix.replace(/\*+$/, "").length).toBeLessThan(12)

    const listed = await withKey(baseUrl, { apiKey }).GET("/v1/api-keys")
    expect(listed.response.status).toBe(200)
    expect(JSON.stringify(listed.data)).not.toContain(apiKey)
  })

  it("takes mailboxIds null, as a key answers it, for a key of the whole account", async () => {
    const user = await signUp(baseUrl)
    const reply = await asUser(user).POST("/v1/api-keys", { body: { name: "whole account", mailboxIds: null } })
    expect(reply.response.status).toBe(201)
    expect(reply.data?.data.mailboxIds).toBeNull()
    expect((await withKey(baseUrl, { apiKey: reply.data!.data.apiKey }).GET("/v1/api-keys")).response.status).toBe(200)
  })

  it("counts a name's length in characters: 100 emoji are a name of 100 (200 UTF-16 units)", async () => {
    const user = await signUp(baseUrl)
    const name = "😀".repeat(100)
    const reply = await asUser(user).POST("/v1/api-keys", { body: { name } })
    expect(reply.response.status).toBe(201)
    expect(reply.data?.data.name).toBe(name)
  })

  it("sets expirationTs from expirationDays", async () => {
    const user = await signUp(baseUrl)
    const before = Date.now()
    const reply = await asUser(user).POST("/v1/api-keys", { body: { name: "rotating", expirationDays: 30 } })
    expect(reply.response.status).toBe(201)
    const expires = Date.parse(reply.data!.data.expirationTs!)
    expect(expires - before).toBeGreaterThanOrEqual(30 * 86_400_000 - 1000)
    expect(expires - before).toBeLessThanOrEqual(30 * 86_400_000 + 60_000)
  })

  it.each([
    [{ name: "" }, { name: "must be 1-100 characters" }],
    [{ name: "x".repeat(101) }, { name: "must be 1-100 characters" }],
    [{ name: "😀".repeat(101) }, { name: "must be 1-100 characters" }],
    [{ name: "ci\nkey" }, { name: "must be one line, without control characters" }],
    [{}, { name: "is required" }],
    [{ name: "ok", expirationDays: 0 }, { expirationDays: "must be a whole number of days from 1 to 365" }],
    [{ name: "ok", expirationDays: 366 }, { expirationDays: "must be a whole number of days from 1 to 365" }],
    [{ name: "ok", expirationDays: 1.5 }, { expirationDays: "must be a whole number of days from 1 to 365" }],
    [{ name: 7, expirationDays: "30" }, { name: expect.any(String), expirationDays: expect.any(String) }],
    // A misspelt expiry would make a key that never expires.
    [{ name: "ok", expirationTs: "2027-01-01T00:00:00Z" }, { expirationTs: "is not a field here; the fields are name, expirationDays, mailboxIds, permission" }]
  ])("refuses %j with 400 VALIDATION_ERROR details %j", async (body, details) => {
    const user = await signUp(baseUrl)
    const reply = await asUser(user).POST("/v1/api-keys", { body: offContract(body) })
    expect(reply.response.status).toBe(400)
    expect(reply.error).toEqual({ success: false, error: { code: "VALIDATION_ERROR", message: expect.any(String), details } })
  })
})

describe("GET /v1/api-keys", () => {
  it("lists the caller's keys with lastUsed, never the key, and meta.total", async () => {
    const user = await withApiKey(baseUrl)
    await createKey(user, "second")
    const reply = await withKey(baseUrl, user).GET("/v1/api-keys")
    expect(reply.response.status).toBe(200)
    expect(reply.data?.meta).toEqual({ total: 2, limit: 20, offset: 0, hasMore: false })
    const keys = reply.data!.data
    expect(keys).toHaveLength(2)
    for (const key of keys) {
      expect(Object.keys(key).sort()).toEqual(["createdAt", "expirationTs", "keyId", "keyPrefix", "lastUsed", "mailboxIds", "name", "permission", "plan", "rateLimit"])
      expect(key.plan).toBe("free")
      expect(key.rateLimit).toBe(20)
    }
    const used = keys.find((key) => key.keyId === user.keyId)
    expect(used?.lastUsed).toMatch(isoMillis)
    const unused = keys.find((key) => key.keyId !== user.keyId)
    expect(unused?.lastUsed).toBeNull()
  })

  it("pages and sorts with the common list parameters", async () => {
    const user = await signUp(baseUrl)
    for (const name of ["alpha", "bravo", "charlie"]) await createKey(user, name)
    const list = (query: { limit?: number; offset?: number; sort?: string }) => asUser(user).GET("/v1/api-keys", { params: { query } })
    const page = await list({ limit: 2, offset: 0, sort: "name:asc" })
    expect(page.data?.data.map((key) => key.name)).toEqual(["alpha", "bravo"])
    expect(page.data?.meta).toEqual({ total: 3, limit: 2, offset: 0, hasMore: true })
    const last = await list({ limit: 2, offset: 2, sort: "name:asc" })
    expect(last.data?.data.map((key) => key.name)).toEqual(["charlie"])
    expect(last.data?.meta).toEqual({ total: 3, limit: 2, offset: 2, hasMore: false })
    const past = await list({ offset: 10 })
    expect(past.data?.data).toEqual([])
    expect(past.data?.meta.total).toBe(3)
    const desc = await list({ sort: "name:desc" })
    expect(desc.data?.data.map((key) => key.name)).toEqual(["charlie", "bravo", "alpha"])
    // The snake_case every other list sorts by is taken for the key's camelCase fields.
    for (const sort of ["createdAt:asc", "created_at:asc"]) {
      expect((await list({ sort })).data?.data.map((key) => key.name), sort).toEqual(["alpha", "bravo", "charlie"])
    }
  })

  it.each(refusedListParams("secret:asc", "name:sideways"))("refuses ?%s=%s with 400 VALIDATION_ERROR naming it", async (field, value) => {
    const user = await signUp(baseUrl)
    const reply = await asUser(user).GET("/v1/api-keys", { params: { query: { [field]: value } } })
    expect(reply.response.status).toBe(400)
    expect(reply.error?.error.code).toBe("VALIDATION_ERROR")
    expect(Object.keys(reply.error?.error.details ?? {})).toEqual([field])
  })
})

describe("DELETE /v1/api-keys/{id}", () => {
  const revoke = (caller: ReturnType<typeof withKey>, id: string) => caller.DELETE("/v1/api-keys/{id}", { params: { path: { id } } })

  it("revokes: data {keyId, revoked: true}; the key then gets 401 at once", async () => {
    const user = await withApiKey(baseUrl)
    expect((await withKey(baseUrl, user).GET("/v1/api-keys")).response.status).toBe(200)
    const reply = await revoke(asUser(user), user.keyId)
    expect(reply.response.status).toBe(200)
    expect(reply.data).toEqual({ success: true, data: { keyId: user.keyId, revoked: true } })
    const after = await withKey(baseUrl, user).GET("/v1/api-keys")
    expect(after.response.status).toBe(401)
    expect(after.error?.error.code).toBe("UNAUTHORIZED")
    const again = await revoke(asUser(user), user.keyId)
    expect(again.response.status).toBe(404)
    expect(again.error?.error.code).toBe("NOT_FOUND")
  })

  it("one user cannot list, see or revoke another's keys (404)", async () => {
    const alice = await withApiKey(baseUrl)
    const mallory = await withApiKey(baseUrl)
    const listed = await withKey(baseUrl, mallory).GET("/v1/api-keys")
    expect(listed.data?.data.map((key) => key.keyId)).toEqual([mallory.keyId])
    const refused = await revoke(withKey(baseUrl, mallory), alice.keyId)
    expect(refused.response.status).toBe(404)
    expect(refused.error).toEqual({ success: false, error: { code: "NOT_FOUND", message: "API key not found", details: { keyId: alice.keyId } } })
    expect((await withKey(baseUrl, alice).GET("/v1/api-keys")).response.status).toBe(200)
  })
})

describe("PATCH /v1/api-keys/{id}", () => {
  it("renames a key and changes its mailboxes, which applies to its next request", async () => {
    const user = await withApiKey(baseUrl)
    const first = await newBox(baseUrl, { user })
    const second = await newBox(baseUrl, { user })
    const agent = await asUser(user).POST("/v1/api-keys", { body: { name: "agent", mailboxIds: [first.mailboxId] } })
    const { apiKey, keyId } = agent.data!.data
    const reached = async () => (await withKey(baseUrl, { apiKey }).GET("/v1/api/mailboxes")).data?.mailboxes.map((box) => box.mailbox_id).sort()
    expect(await reached()).toEqual([first.mailboxId])

    const path = { params: { path: { id: keyId } } }
    const widened = await asUser(user).PATCH("/v1/api-keys/{id}", { ...path, body: { name: "ops agent", mailboxIds: [first.mailboxId, second.mailboxId] } })
    expect(widened.response.status).toBe(200)
    expect(widened.data?.data).toMatchObject({ keyId, name: "ops agent", mailboxIds: [first.mailboxId, second.mailboxId], lastUsed: expect.any(String) })
    expect(await reached()).toEqual([first.mailboxId, second.mailboxId].sort())
    const renamed = await asUser(user).PATCH("/v1/api-keys/{id}", { ...path, body: { name: "ops" } })
    expect(renamed.data?.data).toMatchObject({ name: "ops", mailboxIds: [first.mailboxId, second.mailboxId] })
    const whole = await asUser(user).PATCH("/v1/api-keys/{id}", { ...path, body: { mailboxIds: null } })
    expect(whole.data?.data.mailboxIds).toBeNull()
    expect((await withKey(baseUrl, { apiKey }).GET("/v1/api-keys")).response.status).toBe(200)
    const narrowed = await asUser(user).PATCH("/v1/api-keys/{id}", { ...path, body: { mailboxIds: [second.mailboxId] } })
    expect(narrowed.data?.data.mailboxIds).toEqual([second.mailboxId])
    expect((await withKey(baseUrl, { apiKey }).GET("/v1/api-keys")).response.status).toBe(403)
    // A key limited to mailboxes changes no key, its own included.
    const itself = await withKey(baseUrl, { apiKey }).PATCH("/v1/api-keys/{id}", { ...path, body: { mailboxIds: null } })
    expect(itself.response.status).toBe(403)
    expect(itself.error?.error.code).toBe("FORBIDDEN")
  })

  it.each([
    [{ name: "" }, { name: "must be 1-100 characters" }],
    [{ name: "a\u0085b" }, { name: "must be one line, without control characters" }],
    [{ mailboxIds: [] }, { mailboxIds: "must list at least one mailbox id (left out: the whole account)" }],
    [{ mailboxIds: ["mbx_nowhere"] }, { mailboxIds: "not a mailbox of this account: mbx_nowhere" }]
  ])("refuses %j with 400 VALIDATION_ERROR details %j, changing nothing", async (body, details) => {
    const user = await withApiKey(baseUrl)
    const reply = await asUser(user).PATCH("/v1/api-keys/{id}", { params: { path: { id: user.keyId } }, body: offContract(body) })
    expect(reply.response.status).toBe(400)
    expect(reply.error).toEqual({ success: false, error: { code: "VALIDATION_ERROR", message: expect.any(String), details } })
    const listed = await asUser(user).GET("/v1/api-keys")
    expect(listed.data?.data[0]).toMatchObject({ name: "test key", mailboxIds: null })
  })

  it("answers 404 for another user's key, or a revoked one", async () => {
    const alice = await withApiKey(baseUrl)
    const mallory = await withApiKey(baseUrl)
    const refused = await asUser(mallory).PATCH("/v1/api-keys/{id}", { params: { path: { id: alice.keyId } }, body: { name: "mine now" } })
    expect(refused.response.status).toBe(404)
    expect(refused.error).toEqual({ success: false, error: { code: "NOT_FOUND", message: "API key not found", details: { keyId: alice.keyId } } })
    await asUser(alice).DELETE("/v1/api-keys/{id}", { params: { path: { id: alice.keyId } } })
    const revoked = await asUser(alice).PATCH("/v1/api-keys/{id}", { params: { path: { id: alice.keyId } }, body: { name: "back" } })
    expect(revoked.response.status).toBe(404)
  })
})

describe("credentials", () => {
  it("accepts X-API-Key, Bearer API key and Bearer access token", async () => {
    const user = await withApiKey(baseUrl)
    expect((await withKey(baseUrl, user).GET("/v1/api-keys")).response.status).toBe(200)
    expect((await withToken(baseUrl, { accessToken: user.apiKey }).GET("/v1/api-keys")).response.status).toBe(200)
    expect((await asUser(user).GET("/v1/api-keys")).response.status).toBe(200)
  })

  it("refuses a missing, unknown or malformed credential with 401 UNAUTHORIZED", async () => {
    const none = await anonymous(baseUrl).GET("/v1/api-keys")
    expect(none.response.status).toBe(401)
    expect(none.error).toEqual({
      success: false,
      error: { code: "UNAUTHORIZED", message: "Missing credential: send X-API-Key or Authorization: Bearer" }
    })
    const refusals = [
      () => withKey(baseUrl, { apiKey: "mr_unknown" }).GET("/v1/api-keys"),
      () => withToken(baseUrl, { accessToken: "garbage" }).GET("/v1/api-keys"),
      () => anonymous(baseUrl).GET("/v1/api-keys", { headers: { authorization: "Basic Zm9vOmJhcg==" } })
    ]
    for (const refused of refusals) {
      const reply = await refused()
      expect(reply.response.status).toBe(401)
      expect(reply.error?.error.code).toBe("UNAUTHORIZED")
    }
  })
})
