/**
 * SPEC "Limits": per-key limits, X-RateLimit-* headers, 429 with details and Retry-After, and one
 * shared limit across API processes on one PostgreSQL.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type FakeQdrant, startFakeQdrant } from "../support/fake-qdrant.ts"
import { type Backend, createBackend, type Server, startServer, useSuiteServer } from "../support/server.ts"
import { client, withApiKey } from "../support/http.ts"
import { mode } from "../support/services.ts"
import { awayFromMinuteEdge } from "../support/wait.ts"


describe("one API process", () => {
  let server: Server
  useSuiteServer((suite) => (server = suite.server))

  it("counts every request of a key: headers on each response, the 21st refused with 429", async () => {
    const api = client(server.url)
    const user = await withApiKey(api)
    await awayFromMinuteEdge()
    const remaining: Array<number> = []
    for (let i = 0; i < 20; i++) {
      const reply = await api.get("/v1/api-keys", { apiKey: user.apiKey })
      expect(reply.status).toBe(200)
      expect(reply.headers.get("x-ratelimit-limit")).toBe("20")
      remaining.push(Number(reply.headers.get("x-ratelimit-remaining")))
      const reset = Number(reply.headers.get("x-ratelimit-reset"))
      expect(reset % 60).toBe(0)
      expect(reset).toBeGreaterThan(Date.now() / 1000)
    }
    expect(remaining).toEqual(Array.from({ length: 20 }, (_, i) => 19 - i))

    const refused = await api.get("/v1/api-keys", { apiKey: user.apiKey })
    expect(refused.status).toBe(429)
    expect(refused.body).toEqual({
      success: false,
      error: { code: "RATE_LIMIT_EXCEEDED", message: expect.any(String), details: { limit: 20, window: "minute", retry_after: expect.any(Number) } }
    })
    const retryAfter = Number(refused.headers.get("retry-after"))
    expect(retryAfter).toBe(refused.body.error.details.retry_after)
    expect(retryAfter).toBeGreaterThanOrEqual(1)
    expect(retryAfter).toBeLessThanOrEqual(60)
    expect(refused.headers.get("x-ratelimit-remaining")).toBe("0")

    // Limits are per key: the owner's other credentials are counted apart.
    const other = await api.post("/v1/api-keys", { bearer: user.accessToken, body: { name: "second" } })
    expect(other.status).toBe(201)
    expect((await api.get("/v1/api-keys", { apiKey: other.body.data.apiKey })).status).toBe(200)
  })

  it("reports the limit on error responses too", async () => {
    const api = client(server.url)
    const user = await withApiKey(api)
    const reply = await api.delete("/v1/api-keys/key_missing", { apiKey: user.apiKey })
    expect(reply.status).toBe(404)
    expect(reply.headers.get("x-ratelimit-limit")).toBe("20")
    expect(reply.headers.get("x-ratelimit-remaining")).not.toBeNull()
  })
})

describe("requests without a valid credential", () => {
  let server: Server
  useSuiteServer((suite) => (server = suite.server))

  it("count against the client address: every 401 carries that limiter's headers, and past 300 a minute it is 429", async () => {
    const api = client(server.url)
    await awayFromMinuteEdge()
    const refusals = [
      () => api.get("/v1/billing/usage"), // no credential
      () => api.get("/v1/billing/usage", { apiKey: "mr_live_not_a_real_key" }), // an unknown key
      () => api.get("/v1/billing/usage", { bearer: "not.a.token" }), // a token that does not verify
      () => api.get("/api/mailboxes") // a dashboard route without a session
    ]
    const remaining: Array<number> = []
    for (const [i, refuse] of refusals.entries()) {
      const reply = await refuse()
      expect({ i, status: reply.status, code: reply.body.error?.code }).toEqual({ i, status: 401, code: "UNAUTHORIZED" })
      expect(reply.headers.get("x-ratelimit-limit")).toBe("300")
      expect(Number(reply.headers.get("x-ratelimit-reset")) % 60).toBe(0)
      remaining.push(Number(reply.headers.get("x-ratelimit-remaining")))
    }
    // One counter for the address, whatever the route or the refused credential.
    expect(remaining).toEqual(remaining.map((_, i) => remaining[0]! - i))

    let last = await api.get("/v1/billing/usage")
    for (let n = 0; n < 300 && last.status === 401; n++) last = await api.get("/v1/billing/usage")
    expect(last.status).toBe(429)
    expect(last.body.error).toMatchObject({ code: "RATE_LIMIT_EXCEEDED", details: { limit: 300, window: "minute" } })
    expect(last.headers.get("x-ratelimit-remaining")).toBe("0")
    expect(Number(last.headers.get("retry-after"))).toBeGreaterThanOrEqual(1)
  })
})

// It brings its own PostgreSQL in either run: the PostgreSQL + NATS run alone has it, once.
describe.skipIf(mode !== "postgres")("two API processes on one PostgreSQL", () => {
  let backend: Backend
  let qdrant: FakeQdrant
  let servers: Array<Server> = []

  beforeAll(async () => {
    backend = await createBackend({ forcePostgres: true })
    // A node of a cluster needs a vector index every node shares; this PostgreSQL has no pgvector.
    qdrant = await startFakeQdrant()
    const env = { ...backend.env, ROLES: "api", QDRANT_URL: qdrant.url }
    // Migrate once, then start both: each runs only the api role, sharing database and bus.
    servers = [await startServer(env)]
    servers.push(await startServer(env))
  })

  afterAll(async () => {
    await Promise.all(servers.map((server) => server.stop()))
    await qdrant?.close()
    await backend?.dispose()
  })

  it("share one limit: the 21st free-plan request of a minute is refused whichever process serves it", async () => {
    const [a, b] = servers.map((server) => client(server.url)) as [ReturnType<typeof client>, ReturnType<typeof client>]
    const user = await withApiKey(a)
    await awayFromMinuteEdge()
    const statuses = await Promise.all(
      Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? a : b).get("/v1/api-keys", { apiKey: user.apiKey }).then((r) => r.status))
    )
    expect(statuses).toEqual(Array(20).fill(200))
    const [fromA, fromB] = await Promise.all([
      a.get("/v1/api-keys", { apiKey: user.apiKey }),
      b.get("/v1/api-keys", { apiKey: user.apiKey })
    ])
    expect(fromA.status).toBe(429)
    expect(fromB.status).toBe(429)
    expect(fromB.body.error.details).toEqual({ limit: 20, window: "minute", retry_after: expect.any(Number) })
  })
})
