/**
 * The envelope rules every route shares, billing's read side, health, OpenAPI and docs.
 */
import * as http from "node:http"
import { describe, expect, it } from "vitest"
import { signUp, withApiKey } from "../support/accounts.ts"
import { type Server, useSuiteServer } from "../support/server.ts"
import { anonymous, type MailroomFetchClient, offContract, rawJsonBody, withKey, withToken } from "../support/typed-client.ts"
import { rawRequest } from "../support/raw-http.ts"
import { until } from "../support/wait.ts"

let server: Server
let mailroom: MailroomFetchClient

useSuiteServer((suite) => {
  server = suite.server
  mailroom = anonymous(suite.url)
})

const noInternals = (text: string) => {
  expect(text).not.toMatch(/\bat .*\.(ts|js):\d+/) // stack frames
  expect(text).not.toMatch(/SELECT|INSERT|UPDATE .* SET|node_modules/i)
}

describe("error envelope", () => {
  it("answers an unknown route with 404 NOT_FOUND", async () => {
    // Routes the contract does not have, so plain fetch.
    for (const [method, path] of [["GET", "/v1/nope"], ["POST", "/api/whatever"], ["DELETE", "/"]] as const) {
      const response = await fetch(`${server.url}${path}`, { method })
      expect(response.status).toBe(404)
      expect(await response.json()).toEqual({ success: false, error: { code: "NOT_FOUND", message: "No such route" } })
      expect(response.headers.get("content-type")).toMatch(/application\/json/)
      expect(response.headers.get("x-content-type-options")).toBe("nosniff")
    }
    // A success too: no answer is read as another type than it says.
    const health = await fetch(`${server.url}/healthz`)
    expect(health.headers.get("x-content-type-options")).toBe("nosniff")
  })

  it("answers an id longer than any of ours (past the router's 100 characters) as its route does: 404 naming it", async () => {
    const user = await withApiKey(server.url)
    const long = `eml_${"a".repeat(5_000)}`
    const response = await fetch(`${server.url}/v1/api/emails/${long}`, { headers: { "x-api-key": user.apiKey } })
    expect(response.status).toBe(404)
    expect(await response.json()).toEqual({ success: false, error: { code: "NOT_FOUND", message: "Email not found", details: { email_id: long } } })
  })

  it("puts the address's rate-limit headers, unspent, on answers that reach no route or are refused before authentication", async () => {
    const user = await withApiKey(server.url)
    const key = { "x-api-key": user.apiKey }
    const json = { ...key, "content-type": "application/json" }
    const answers = [
      // No such route, with a key and without one.
      await rawRequest(`${server.url}/v1/nope`, { method: "GET", headers: key }),
      await rawRequest(`${server.url}/api/whatever`, { method: "POST" }),
      // The API's bare prefixes are its paths too.
      await rawRequest(`${server.url}/v1`, { method: "GET" }),
      await rawRequest(`${server.url}/api?x=1`, { method: "GET" }),
      // On a route that takes a key: a body that is not JSON, and one over 1 MiB.
      await rawRequest(`${server.url}/v1/api-keys`, { method: "POST", headers: { ...key, "content-type": "application/x-www-form-urlencoded" }, body: "a=b" }),
      await rawRequest(`${server.url}/v1/api-keys`, { method: "POST", headers: json, body: JSON.stringify({ name: "x".repeat(1024 * 1024) }) })
    ]
    expect(answers.map((answer) => answer.status)).toEqual([404, 404, 404, 404, 415, 413])
    for (const answer of answers) {
      // The client address's limit, which unauthenticated requests count against (DESIGN.md §4: 300 a minute)...
      expect(answer.headers.get("x-ratelimit-limit"), answer.text).toBe("300")
      expect(Number(answer.headers.get("x-ratelimit-reset")) % 60).toBe(0)
    }
    // ...read, not spent: such a refusal costs the address nothing.
    const remaining = answers.map((answer) => Number(answer.headers.get("x-ratelimit-remaining")))
    expect(remaining[0]).toBeGreaterThan(0)
    expect(new Set(remaining).size, String(remaining)).toBe(1)
    // An answer a limiter decided keeps that limiter's headers (the key's: free, 20 a minute).
    expect((await withKey(server.url, user).GET("/v1/api-keys")).response.headers.get("x-ratelimit-limit")).toBe("20")
    // Operators' endpoints are not the API: no limit; nor is a path that only begins like the API's.
    expect((await mailroom.GET("/healthz")).response.headers.get("x-ratelimit-limit")).toBeNull()
    expect((await rawRequest(`${server.url}/v1x`, { method: "GET" })).headers.get("x-ratelimit-limit")).toBeNull()
  })

  it("answers invalid JSON with 400 BAD_REQUEST and no internals", async () => {
    const reply = await mailroom.POST("/api/auth/register", rawJsonBody('{"email": "a@b.c", '))
    expect(reply.response.status).toBe(400)
    expect(reply.error).toEqual({ success: false, error: { code: "BAD_REQUEST", message: "The request body is not valid JSON" } })
    noInternals(JSON.stringify(reply.error))
  })

  it("answers a JSON value that is not an object with 400 VALIDATION_ERROR", async () => {
    const reply = await mailroom.POST("/api/auth/login", { body: offContract([1, 2, 3]) })
    expect(reply.response.status).toBe(400)
    expect(reply.error?.error.code).toBe("VALIDATION_ERROR")
    expect(reply.error?.error.details).toEqual({ body: expect.any(String) })
  })

  it("answers a JSON body over 1 MiB with 413 PAYLOAD_TOO_LARGE, declared or streamed", async () => {
    const big = JSON.stringify({ email: "a@example.com", password: "x".repeat(1024 * 1024 + 10), name: "n" })
    const declared = await mailroom.POST("/api/auth/register", rawJsonBody(big))
    expect(declared.response.status).toBe(413)
    expect(declared.error).toEqual({
      success: false,
      error: { code: "PAYLOAD_TOO_LARGE", message: "The request body is larger than 1 MiB", details: { max_bytes: 1048576 } }
    })

    // Chunked transfer: no Content-Length to check up front, so the cap applies while reading. The
    // server stops keeping the body at 1 MiB, answers 413 while the client is still sending, reads
    // the rest without keeping it and closes the connection: the client reads the answer (no reset).
    const streamed = await new Promise<{ status: number; body: string; connection: string | undefined } | "closed">((resolve) => {
      const req = http.request(`${server.url}/api/auth/register`, { method: "POST", headers: { "content-type": "application/json" } }, (res) => {
        let body = ""
        res.on("data", (chunk) => (body += chunk))
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body, connection: res.headers.connection }))
      })
      req.on("error", () => resolve("closed"))
      for (let i = 0; i < big.length; i += 64 * 1024) req.write(big.slice(i, i + 64 * 1024))
      req.end()
    })
    expect(streamed).toEqual({ status: 413, body: expect.stringContaining('"code":"PAYLOAD_TOO_LARGE"'), connection: "close" })
    expect((await mailroom.GET("/healthz")).response.status).toBe(200)
  })

  it("keeps an idle connection 65 s, past a load balancer's 60, and says so", async () => {
    const answer = await new Promise<http.IncomingMessage>((resolve, reject) => http.get(`${server.url}/healthz`, resolve).on("error", reject))
    answer.resume()
    expect(answer.headers.connection).toBe("keep-alive")
    expect(answer.headers["keep-alive"]).toBe("timeout=65")
  })

  it("omits details when there are none", async () => {
    const reply = await mailroom.GET("/v1/api-keys")
    expect(reply.response.status).toBe(401)
    expect(Object.keys(reply.error?.error ?? {}).sort()).toEqual(["code", "message"])
  })
})

describe("billing, read side", () => {
  it("a new user holds an active free subscription for the current calendar month", async () => {
    const user = await withApiKey(server.url)
    const reply = await withKey(server.url, user).GET("/v1/billing/subscription")
    expect(reply.response.status).toBe(200)
    const now = new Date()
    expect(reply.data).toEqual({
      success: true,
      data: {
        status: "active",
        plan: "free",
        currentPeriodStart: new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1)).toISOString(),
        currentPeriodEnd: new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1)).toISOString(),
        cancelAtPeriodEnd: false
      }
    })
  })

  it("usage reports the free plan's limits: 100 emails, 100 searches, 1 GiB", async () => {
    const user = await signUp(server.url)
    const reply = await withToken(server.url, user).GET("/v1/billing/usage")
    expect(reply.response.status).toBe(200)
    const subscription = await withToken(server.url, user).GET("/v1/billing/subscription")
    const now = new Date()
    expect(reply.data).toEqual({
      success: true,
      data: {
        emailsUsed: 0,
        emailsLimit: 100,
        searchesUsed: 0,
        searchesLimit: 100,
        storageUsed: 0,
        storageLimit: 1073741824,
        emailsSent: 0,
        emailsSentLimit: 100,
        // When the period's counts start again, and the day's (the next midnight UTC).
        periodEnd: subscription.data?.data.currentPeriodEnd,
        emailsToday: 0,
        emailsDailyLimit: 100,
        emailsSentToday: 0,
        emailsSentDailyLimit: 100,
        dayEnd: new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1)).toISOString()
      }
    })
  })

  it("needs a credential", async () => {
    for (const path of ["/v1/billing/subscription", "/v1/billing/usage"] as const) {
      const reply = await mailroom.GET(path)
      expect(reply.response.status).toBe(401)
      expect(reply.error?.error.code).toBe("UNAUTHORIZED")
    }
  })
})

describe("health, OpenAPI and docs", () => {
  it("/healthz and /readyz answer 200 when the database and bus are reachable", async () => {
    expect((await mailroom.GET("/healthz")).data).toEqual({ success: true, data: { status: "ok" } })
    // Sampled every second from the start (sent mail waiting, every 5 s); a consumer's lag is known once its stage has started.
    const ready = await until("stages sampled", async () => {
      const data = (await mailroom.GET("/readyz")).data
      return data?.data.stages?.index.pending !== null && data?.data.stages?.words.pending !== null &&
          data?.data.stages?.ingest.pending !== null && data?.data.outbound?.oldest_queued_age_seconds !== null
        ? data
        : undefined
    }, 15_000, 200)
    // The API searches, so it tells its vector index too (pgvector, in a PGlite of its own here).
    expect(ready).toMatchObject({ success: true, data: { status: "ok", database: "ok", bus: "ok", vector_index: "ok" } })
    // Every inbound stage, each with its rate and its lag (the embedded bus knows every consumer).
    const stage = {
      rate_per_second: expect.any(Number),
      handled: expect.any(Number),
      pending: expect.any(Number),
      in_flight: expect.any(Number),
      oldest_age_seconds: expect.any(Number),
      lagging: false
    }
    expect(ready?.data.stages).toEqual({
      accept: { ...stage, pending: null, oldest_age_seconds: null },
      ingest: stage,
      words: stage,
      index: stage
    })
    // Sent mail waiting to go (counted in test/domain/outbound-backlog.test.ts).
    expect(ready?.data.outbound).toEqual({ queued: expect.any(Number), deferred: expect.any(Number), oldest_queued_age_seconds: expect.any(Number) })
  })

  it("serves an OpenAPI 3.1 document generated from the contract", async () => {
    // The document is not a route of itself: plain fetch.
    const response = await fetch(`${server.url}/v1/openapi.json`)
    expect(response.status).toBe(200)
    const document = await response.json() as { openapi: string; paths: Record<string, unknown> }
    expect(document.openapi).toMatch(/^3\.1/)
    for (const path of ["/api/auth/register", "/api/auth/login", "/api/auth/logout", "/api/auth/refresh", "/v1/api-keys", "/v1/api-keys/{id}", "/v1/billing/subscription", "/v1/billing/usage"]) {
      expect(Object.keys(document.paths)).toContain(path)
    }
  })

  it("serves a docs page at /docs", async () => {
    const response = await fetch(`${server.url}/docs`)
    expect(response.status).toBe(200)
    expect(response.headers.get("content-type")).toMatch(/text\/html/)
    expect(await response.text()).toMatch(/swagger/i)
  })
})
