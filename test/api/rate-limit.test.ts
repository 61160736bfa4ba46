/**
 * SPEC "Limits": per-key limits, X-RateLimit-* headers, 429 with details and Retry-After, and one
 * shared limit across API processes on one PostgreSQL; across processes, the cached credentials'
 * guarantees (issue 19): a revocation or a plan change reaches every node within 1 s, also when a
 * node cannot hear the bus, and leased limits overshoot by no more than a lease per process.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { withApiKey } from "../support/accounts.ts"
import { upgrade } from "../support/billing.ts"
import { type FakeQdrant, startFakeQdrant } from "../support/fake-qdrant.ts"
import { type Backend, createBackend, type Server, startServer, useSuiteServer } from "../support/server.ts"
import { mode } from "../support/services.ts"
import { startTcpProxy, type TcpProxy } from "../support/tcp-proxy.ts"
import { anonymous, sessionFrom, withKey, withToken } from "../support/typed-client.ts"
import { awayFromMinuteEdge, sleep } from "../support/wait.ts"

describe("one API process", () => {
  let server: Server
  useSuiteServer((suite) => (server = suite.server))

  it("counts every request of a key: headers on each response, the 21st refused with 429", async () => {
    const user = await withApiKey(server.url)
    await awayFromMinuteEdge()
    const remaining: Array<number> = []
    for (let i = 0; i < 20; i++) {
      const reply = await withKey(server.url, user).GET("/v1/api-keys")
      expect(reply.response.status).toBe(200)
      expect(reply.response.headers.get("x-ratelimit-limit")).toBe("20")
      remaining.push(Number(reply.response.headers.get("x-ratelimit-remaining")))
      const reset = Number(reply.response.headers.get("x-ratelimit-reset"))
      expect(reset % 60).toBe(0)
      expect(reset).toBeGreaterThan(Date.now() / 1000)
    }
    expect(remaining).toEqual(Array.from({ length: 20 }, (_, i) => 19 - i))

    const refused = await withKey(server.url, user).GET("/v1/api-keys")
    expect(refused.response.status).toBe(429)
    expect(refused.error).toEqual({
      success: false,
      error: { code: "RATE_LIMIT_EXCEEDED", message: expect.any(String), details: { limit: 20, window: "minute", retry_after: expect.any(Number) } }
    })
    // The same window's end the 200s gave, not a second later.
    expect(Number(refused.response.headers.get("x-ratelimit-reset")) % 60).toBe(0)
    const retryAfter = Number(refused.response.headers.get("retry-after"))
    expect(retryAfter).toBe(refused.error?.error.details?.["retry_after"])
    expect(retryAfter).toBeGreaterThanOrEqual(1)
    expect(retryAfter).toBeLessThanOrEqual(60)
    expect(refused.response.headers.get("x-ratelimit-remaining")).toBe("0")

    // Limits are per key: the owner's other credentials are counted apart.
    const other = await withToken(server.url, user).POST("/v1/api-keys", { body: { name: "second" } })
    expect(other.response.status).toBe(201)
    expect((await withKey(server.url, other.data!.data).GET("/v1/api-keys")).response.status).toBe(200)
  })

  it("counts a person in the dashboard (the session cookie) apart, with at least Pro's limits; the access token keeps the plan's", async () => {
    const user = await withApiKey(server.url)
    await awayFromMinuteEdge()
    const remainingOf = (reply: { response: Response }) => Number(reply.response.headers.get("x-ratelimit-remaining"))
    const before = remainingOf(await withToken(server.url, user).GET("/api/api-keys"))
    const dashboard = anonymous(server.url)
    const cookie = sessionFrom(user, server.url)
    // A free account's person reads on past the plan's 20 a minute (and so past its 100 an hour).
    for (let i = 0; i < 25; i++) {
      const reply = await dashboard.GET("/api/api-keys", cookie)
      expect(reply.response.status).toBe(200)
      expect(reply.response.headers.get("x-ratelimit-limit")).toBe("100")
      expect(reply.response.headers.get("x-ratelimit-remaining")).toBe(String(99 - i))
    }
    // What the dashboard spent is not the agents': the access token and the key still have their 20.
    const token = await withToken(server.url, user).GET("/api/api-keys")
    expect([token.response.status, token.response.headers.get("x-ratelimit-limit"), remainingOf(token)]).toEqual([200, "20", before - 1])
    const key = await withKey(server.url, user).GET("/v1/api-keys")
    expect([key.response.status, key.response.headers.get("x-ratelimit-remaining")]).toEqual([200, "19"])
  })

  it("reports the limit on error responses too", async () => {
    const user = await withApiKey(server.url)
    const reply = await withKey(server.url, user).DELETE("/v1/api-keys/{id}", { params: { path: { id: "key_missing" } } })
    expect(reply.response.status).toBe(404)
    expect(reply.response.headers.get("x-ratelimit-limit")).toBe("20")
    expect(reply.response.headers.get("x-ratelimit-remaining")).not.toBeNull()
  })
})

describe("requests without a valid credential", () => {
  let server: Server
  useSuiteServer((suite) => (server = suite.server))

  it("count against the client address: every 401 carries that limiter's headers, and past 300 a minute it is 429", async () => {
    const nobody = anonymous(server.url)
    await awayFromMinuteEdge()
    const refusals = [
      () => nobody.GET("/v1/billing/usage"), // no credential
      () => withKey(server.url, { apiKey: "mr_live_not_a_real_key" }).GET("/v1/billing/usage"), // an unknown key
      () => withToken(server.url, { accessToken: "not.a.token" }).GET("/v1/billing/usage"), // a token that does not verify
      () => nobody.GET("/api/mailboxes") // a dashboard route without a session
    ]
    const remaining: Array<number> = []
    for (const [i, refuse] of refusals.entries()) {
      const { response, error } = await refuse()
      expect({ i, status: response.status, code: error?.error.code }).toEqual({ i, status: 401, code: "UNAUTHORIZED" })
      expect(response.headers.get("x-ratelimit-limit")).toBe("300")
      expect(Number(response.headers.get("x-ratelimit-reset")) % 60).toBe(0)
      remaining.push(Number(response.headers.get("x-ratelimit-remaining")))
    }
    // One counter for the address, whatever the route or the refused credential.
    expect(remaining).toEqual(remaining.map((_, i) => remaining[0]! - i))

    let last = await nobody.GET("/v1/billing/usage")
    for (let n = 0; n < 300 && last.response.status === 401; n++) last = await nobody.GET("/v1/billing/usage")
    expect(last.response.status).toBe(429)
    expect(last.error?.error).toMatchObject({ code: "RATE_LIMIT_EXCEEDED", details: { limit: 300, window: "minute" } })
    expect(last.response.headers.get("x-ratelimit-remaining")).toBe("0")
    expect(Number(last.response.headers.get("x-ratelimit-reset")) % 60).toBe(0)
    expect(Number(last.response.headers.get("retry-after"))).toBeGreaterThanOrEqual(1)
  })
})

// It brings its own PostgreSQL in either run: the PostgreSQL + NATS run alone has it, once.
describe.skipIf(mode !== "postgres")("two API processes on one PostgreSQL", () => {
  let backend: Backend
  let qdrant: FakeQdrant
  let servers: Array<Server> = []
  /** A third node, whose way to NATS the test can cut. */
  let deaf: Server
  let natsProxy: TcpProxy

  beforeAll(async () => {
    backend = await createBackend({ forcePostgres: true })
    // A node of a cluster needs a vector index every node shares; this PostgreSQL has no pgvector.
    qdrant = await startFakeQdrant()
    const env = { ...backend.env, ROLES: "api", QDRANT_URL: qdrant.url }
    // Migrate once, then start the others: each runs only the api role, sharing database and bus.
    servers = [await startServer(env)]
    const nats = new URL((backend.env as Record<string, string>)["NATS_URL"]!)
    natsProxy = await startTcpProxy({ host: nats.hostname, port: Number(nats.port || 4222) })
    ;[deaf] = await Promise.all([
      startServer({ ...env, NATS_URL: `nats://127.0.0.1:${natsProxy.port}` }),
      startServer(env).then((server) => void servers.push(server))
    ])
  })

  afterAll(async () => {
    await Promise.all([...servers, deaf].filter((server) => server !== undefined).map((server) => server.stop()))
    await natsProxy?.close()
    await qdrant?.close()
    await backend?.dispose()
  })

  /** How long until `node` refuses `apiKey` with 401, polling every 50 ms (below the free plan's limit) for up to 3 s. */
  const refusedWithin = async (node: Server, apiKey: string) => {
    const start = Date.now()
    while (Date.now() - start < 3000) {
      const reply = await withKey(node.url, { apiKey }).GET("/v1/api-keys")
      if (reply.response.status === 401) return Date.now() - start
      expect(reply.response.status).toBe(200)
      await sleep(50)
    }
    return Number.POSITIVE_INFINITY
  }

  /** `GET /v1/api-keys` with `apiKey` on `node`: what the limits and the credential cache are tried with. */
  const keysOn = (node: Server, apiKey: string) => withKey(node.url, { apiKey }).GET("/v1/api-keys")
  const revoke = (node: Server, user: { accessToken: string }, id: string) =>
    withToken(node.url, user).DELETE("/v1/api-keys/{id}", { params: { path: { id } } })

  it("a revoked key is refused at once by the node that revoked it and within 1 s by the others", async () => {
    const [a, b] = servers as [Server, Server]
    const user = await withApiKey(a.url)
    // Both nodes have the key cached.
    expect((await keysOn(a, user.apiKey)).response.status).toBe(200)
    expect((await keysOn(b, user.apiKey)).response.status).toBe(200)

    const revoked = await revoke(a, user, user.keyId)
    expect(revoked.response.status).toBe(200)
    const onA = await keysOn(a, user.apiKey)
    expect(onA.response.status).toBe(401)
    expect(onA.error?.error.code).toBe("UNAUTHORIZED")
    expect(await refusedWithin(b, user.apiKey)).toBeLessThan(1000)
  })

  it("a node that cannot hear the bus trusts what it cached for 1 s at most: a revocation it never hears still holds", async () => {
    const a = servers[0]!
    const c = deaf
    const user = await withApiKey(a.url)
    expect((await keysOn(c, user.apiKey)).response.status).toBe(200)
    await natsProxy.cut()
    try {
      const revoked = await revoke(a, user, user.keyId)
      expect(revoked.response.status).toBe(200)
      expect(await refusedWithin(c, user.apiKey)).toBeLessThan(1000)
      // Still deaf, it keeps working from the database: a new key works, and is not kept past 1 s.
      const fresh = (await withToken(a.url, user).POST("/v1/api-keys", { body: { name: "while deaf" } })).data!.data
      expect((await keysOn(c, fresh.apiKey)).response.status).toBe(200)
      expect((await revoke(a, user, fresh.keyId)).response.status).toBe(200)
      expect(await refusedWithin(c, fresh.apiKey)).toBeLessThan(1000)
    } finally {
      await natsProxy.restore()
    }
  })

  it("a plan change applies to the limits at once on the node that made it and within 1 s on the others", async () => {
    const [a, b] = servers as [Server, Server]
    const user = await withApiKey(a.url)
    await awayFromMinuteEdge()
    expect((await keysOn(a, user.apiKey)).response.headers.get("x-ratelimit-limit")).toBe("20")
    expect((await keysOn(b, user.apiKey)).response.headers.get("x-ratelimit-limit")).toBe("20")

    await upgrade(servers[0]!.url, user.apiKey, "pro")
    expect((await keysOn(a, user.apiKey)).response.headers.get("x-ratelimit-limit")).toBe("100")
    const start = Date.now()
    let limit = (await keysOn(b, user.apiKey)).response.headers.get("x-ratelimit-limit")
    while (limit !== "100" && Date.now() - start < 3000) {
      await sleep(20)
      limit = (await keysOn(b, user.apiKey)).response.headers.get("x-ratelimit-limit")
    }
    expect(limit).toBe("100")
    expect(Date.now() - start).toBeLessThan(1000)
  })

  it("two processes hammering one key grant at most its limit plus a lease each (enterprise: 500 a minute, leases of 10)", async () => {
    const [a, b] = servers as [Server, Server]
    const user = await withApiKey(a.url)
    await upgrade(servers[0]!.url, user.apiKey, "enterprise")
    // A key of its own, so the checkout's requests are not in its count.
    const key = await withToken(a.url, user).POST("/v1/api-keys", { body: { name: "hammer" } })
    await awayFromMinuteEdge(20)
    const statuses: Array<number> = []
    let next = 0
    const worker = async (node: Server) => {
      while (next < 600) {
        next++
        statuses.push((await keysOn(node, key.data!.data.apiKey)).response.status)
      }
    }
    await Promise.all(Array.from({ length: 16 }, (_, i) => worker(i % 2 === 0 ? a : b)))
    const granted = statuses.filter((status) => status === 200).length
    expect(statuses.filter((status) => status !== 200 && status !== 429)).toEqual([])
    expect(granted).toBeLessThanOrEqual(500 + 2 * 10)
    // Each process may hold back one lease it has not used yet, no more.
    expect(granted).toBeGreaterThanOrEqual(500 - 2 * 10)
  })

  it("lastUsed of a key used on one node is written, and read on another, within a few seconds", async () => {
    const [a, b] = servers as [Server, Server]
    const user = await withApiKey(a.url)
    expect((await withKey(b.url, user).GET("/v1/billing/usage")).response.status).toBe(200)
    const start = Date.now()
    let lastUsed: string | null = null
    // A read a second: the session token is a free-plan credential too (20 requests a minute), and
    // the node writes its uses every 5 s, so polling faster would run out of requests first.
    while (lastUsed === null && Date.now() - start < 15_000) {
      await sleep(1_000)
      const listed = await withToken(a.url, user).GET("/v1/api-keys")
      expect(listed.response.status).toBe(200)
      lastUsed = listed.data?.data.find((key) => key.keyId === user.keyId)?.lastUsed ?? null
    }
    expect(lastUsed).not.toBeNull()
  })

  it("share one limit: the 21st free-plan request of a minute is refused whichever process serves it", async () => {
    const [a, b] = servers as [Server, Server]
    const user = await withApiKey(a.url)
    await awayFromMinuteEdge()
    const statuses = await Promise.all(
      Array.from({ length: 20 }, (_, i) => keysOn(i % 2 === 0 ? a : b, user.apiKey).then((r) => r.response.status))
    )
    expect(statuses.join(" "), JSON.stringify(statuses)).toEqual(Array(20).fill(200).join(" "))
    const [fromA, fromB] = await Promise.all([keysOn(a, user.apiKey), keysOn(b, user.apiKey)])
    expect(fromA.response.status).toBe(429)
    expect(fromB.response.status).toBe(429)
    expect(fromB.error?.error.details).toEqual({ limit: 20, window: "minute", retry_after: expect.any(Number) })
  })
})
