/**
 * The envelope rules every route shares, billing's read side, health, OpenAPI and docs.
 */
import * as http from "node:http"
import { describe, expect, it } from "vitest"
import { type Server, useSuiteServer } from "../support/server.ts"
import { type Client, client, signUp, withApiKey } from "../support/http.ts"

let server: Server
let api: Client

useSuiteServer((suite) => {
  server = suite.server
  api = client(suite.url)
})

const noInternals = (text: string) => {
  expect(text).not.toMatch(/\bat .*\.(ts|js):\d+/) // stack frames
  expect(text).not.toMatch(/SELECT|INSERT|UPDATE .* SET|node_modules/i)
}

describe("error envelope", () => {
  it("answers an unknown route with 404 NOT_FOUND", async () => {
    for (const [method, path] of [["GET", "/v1/nope"], ["POST", "/api/whatever"], ["DELETE", "/"]] as const) {
      const reply = await api[method === "GET" ? "get" : method === "POST" ? "post" : "delete"](path)
      expect(reply.status).toBe(404)
      expect(reply.body).toEqual({ success: false, error: { code: "NOT_FOUND", message: "No such route" } })
      expect(reply.headers.get("content-type")).toMatch(/application\/json/)
    }
  })

  it("answers invalid JSON with 400 BAD_REQUEST and no internals", async () => {
    const reply = await api.post("/api/auth/register", { raw: '{"email": "a@b.c", ', headers: { "content-type": "application/json" } })
    expect(reply.status).toBe(400)
    expect(reply.body).toEqual({ success: false, error: { code: "BAD_REQUEST", message: "The request body is not valid JSON" } })
    noInternals(reply.text)
  })

  it("answers a JSON value that is not an object with 400 VALIDATION_ERROR", async () => {
    const reply = await api.post("/api/auth/login", { raw: "[1,2,3]", headers: { "content-type": "application/json" } })
    expect(reply.status).toBe(400)
    expect(reply.body.error.code).toBe("VALIDATION_ERROR")
    expect(reply.body.error.details).toEqual({ body: expect.any(String) })
  })

  it("answers a JSON body over 1 MiB with 413 PAYLOAD_TOO_LARGE, declared or streamed", async () => {
    const big = JSON.stringify({ email: "a@example.com", password: "x".repeat(1024 * 1024 + 10), name: "n" })
    const declared = await api.post("/api/auth/register", { raw: big, headers: { "content-type": "application/json" } })
    expect(declared.status).toBe(413)
    expect(declared.body).toEqual({
      success: false,
      error: { code: "PAYLOAD_TOO_LARGE", message: "The request body is larger than 1 MiB", details: { max_bytes: 1048576 } }
    })

    // Chunked transfer: no Content-Length to check up front, so the cap applies while reading. The
    // server stops reading at 1 MiB; depending on timing the client sees the 413 or a closed
    // connection, but never an accepted body, and the server keeps serving.
    const streamed = await new Promise<{ status: number; body: string } | "closed">((resolve) => {
      const req = http.request(`${server.url}/api/auth/register`, { method: "POST", headers: { "content-type": "application/json" } }, (res) => {
        let body = ""
        res.on("data", (chunk) => (body += chunk))
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }))
      })
      req.on("error", () => resolve("closed"))
      for (let i = 0; i < big.length; i += 64 * 1024) req.write(big.slice(i, i + 64 * 1024))
      req.end()
    })
    if (streamed !== "closed") {
      expect(streamed.status).toBe(413)
      expect(JSON.parse(streamed.body).error.code).toBe("PAYLOAD_TOO_LARGE")
    }
    expect((await api.get("/healthz")).status).toBe(200)
  })

  it("omits details when there are none", async () => {
    const reply = await api.get("/v1/api-keys")
    expect(reply.status).toBe(401)
    expect(Object.keys(reply.body.error).sort()).toEqual(["code", "message"])
  })
})

describe("billing, read side", () => {
  it("a new user holds an active free subscription for the current calendar month", async () => {
    const user = await withApiKey(api)
    const reply = await api.get("/v1/billing/subscription", { apiKey: user.apiKey })
    expect(reply.status).toBe(200)
    const now = new Date()
    expect(reply.body).toEqual({
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
    const user = await signUp(api)
    const reply = await api.get("/v1/billing/usage", { bearer: user.accessToken })
    expect(reply.status).toBe(200)
    expect(reply.body).toEqual({
      success: true,
      data: { emailsUsed: 0, emailsLimit: 100, searchesUsed: 0, searchesLimit: 100, storageUsed: 0, storageLimit: 1073741824, emailsSent: 0, emailsSentLimit: 100 }
    })
  })

  it("needs a credential", async () => {
    for (const path of ["/v1/billing/subscription", "/v1/billing/usage"]) {
      const reply = await api.get(path)
      expect(reply.status).toBe(401)
      expect(reply.body.error.code).toBe("UNAUTHORIZED")
    }
  })
})

describe("health, OpenAPI and docs", () => {
  it("/healthz and /readyz answer 200 when the database and bus are reachable", async () => {
    expect((await api.get("/healthz")).body).toEqual({ success: true, data: { status: "ok" } })
    expect((await api.get("/readyz")).body).toEqual({ success: true, data: { status: "ok", database: "ok", bus: "ok" } })
  })

  it("serves an OpenAPI 3.1 document generated from the contract", async () => {
    const reply = await api.get("/v1/openapi.json")
    expect(reply.status).toBe(200)
    expect(reply.body.openapi).toMatch(/^3\.1/)
    for (const path of ["/api/auth/register", "/api/auth/login", "/api/auth/logout", "/api/auth/refresh", "/v1/api-keys", "/v1/api-keys/{id}", "/v1/billing/subscription", "/v1/billing/usage"]) {
      expect(Object.keys(reply.body.paths)).toContain(path)
    }
  })

  it("serves a docs page at /docs", async () => {
    const response = await fetch(`${server.url}/docs`)
    expect(response.status).toBe(200)
    expect(response.headers.get("content-type")).toMatch(/text\/html/)
    expect(await response.text()).toMatch(/swagger/i)
  })
})
