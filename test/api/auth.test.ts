/**
 * SPEC "User authentication" over real HTTP against a started server.
 */
import { describe, expect, it } from "vitest"
import { type Server, useSuiteServer } from "../support/server.ts"
import { type Client, client, isoMillis, signUp } from "../support/http.ts"

let server: Server
let api: Client

useSuiteServer((suite) => {
  server = suite.server
  api = client(suite.url)
})

const email = () => `user-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}@example.com`

describe("POST /api/auth/register", () => {
  it("creates a user: 201 with userId, email, name, createdAt and never the password", async () => {
    const address = email()
    const reply = await api.post("/api/auth/register", { body: { email: address, password: "s3cret-enough", name: "Ada" } })
    expect(reply.status).toBe(201)
    expect(reply.body.success).toBe(true)
    expect(reply.body.data).toEqual({ userId: expect.any(String), email: address, name: "Ada", createdAt: expect.stringMatching(isoMillis) })
    expect(reply.text).not.toContain("s3cret-enough")
    expect(reply.headers.get("x-ratelimit-limit")).toBe("300")
  })

  it("refuses an invalid email and a short password with VALIDATION_ERROR details per field", async () => {
    const reply = await api.post("/api/auth/register", { body: { email: "not-an-email", password: "short", name: "Ada" } })
    expect(reply.status).toBe(400)
    expect(reply.body).toEqual({
      success: false,
      error: {
        code: "VALIDATION_ERROR",
        message: expect.any(String),
        details: { email: "must be a valid email address", password: "must be at least 8 characters" }
      }
    })
  })

  it("requires every field", async () => {
    const reply = await api.post("/api/auth/register", { body: {} })
    expect(reply.status).toBe(400)
    expect(reply.body.error.code).toBe("VALIDATION_ERROR")
    expect(reply.body.error.details).toEqual({ email: "is required", password: "is required", name: "is required" })
  })

  it("refuses an email already registered, in any letter case, with 409 CONFLICT", async () => {
    const address = email()
    expect((await api.post("/api/auth/register", { body: { email: address, password: "password-1", name: "A" } })).status).toBe(201)
    const again = await api.post("/api/auth/register", { body: { email: address.toUpperCase(), password: "password-2", name: "B" } })
    expect(again.status).toBe(409)
    expect(again.body.success).toBe(false)
    expect(again.body.error.code).toBe("CONFLICT")
  })

  it("ignores privileged fields in the body", async () => {
    const reply = await api.post("/api/auth/register", {
      body: { email: email(), password: "password-1", name: "A", plan: "enterprise", userId: "usr_mine" }
    })
    expect(reply.status).toBe(201)
    expect(reply.body.data.userId).not.toBe("usr_mine")
    const login = await api.post("/api/auth/login", { body: { email: reply.body.data.email, password: "password-1" } })
    const subscription = await api.get("/v1/billing/subscription", { bearer: login.body.data.accessToken })
    expect(subscription.body.data.plan).toBe("free")
  })
})

describe("POST /api/auth/login", () => {
  it("returns accessToken, refreshToken, expiresIn 900 and the user, and sets the session cookie", async () => {
    const address = email()
    const registered = await api.post("/api/auth/register", { body: { email: address, password: "password-1", name: "Grace" } })
    const reply = await api.post("/api/auth/login", { body: { email: address, password: "password-1" } })
    expect(reply.status).toBe(200)
    expect(reply.body).toEqual({
      success: true,
      data: {
        accessToken: expect.any(String),
        refreshToken: expect.any(String),
        expiresIn: 900,
        user: { userId: registered.body.data.userId, email: address, name: "Grace" }
      }
    })
    const cookie = reply.headers.get("set-cookie") ?? ""
    expect(cookie).toMatch(/^mailroom_session=[^;]+/)
    expect(cookie).toMatch(/HttpOnly/i)
    expect(cookie).toMatch(/SameSite=Lax/i)
  })

  it("refuses a wrong password and an unknown email alike with 401 UNAUTHORIZED", async () => {
    const user = await signUp(api)
    const wrong = await api.post("/api/auth/login", { body: { email: user.email, password: "not the password" } })
    const unknown = await api.post("/api/auth/login", { body: { email: email(), password: "whatever-123" } })
    for (const reply of [wrong, unknown]) {
      expect(reply.status).toBe(401)
      expect(reply.body).toEqual({ success: false, error: { code: "UNAUTHORIZED", message: "Invalid email or password" } })
    }
  })

  it("limits failed logins per account to 10 per 15 minutes, then 429 even with the right password", async () => {
    const user = await signUp(api)
    for (let i = 0; i < 10; i++) {
      const reply = await api.post("/api/auth/login", { body: { email: user.email, password: `wrong-${i}-password` } })
      expect(reply.status).toBe(401)
    }
    const blocked = await api.post("/api/auth/login", { body: { email: user.email, password: user.password } })
    expect(blocked.status).toBe(429)
    expect(blocked.body.error.code).toBe("RATE_LIMIT_EXCEEDED")
    expect(blocked.body.error.details).toEqual({ limit: 10, window: "900 seconds", retry_after: expect.any(Number) })
    expect(Number(blocked.headers.get("retry-after"))).toBeGreaterThan(0)
  })
})

describe("POST /api/auth/refresh", () => {
  it("exchanges the refresh token for a new access token and rotates the refresh token", async () => {
    const user = await signUp(api)
    const first = await api.post("/api/auth/refresh", { body: { refreshToken: user.refreshToken } })
    expect(first.status).toBe(200)
    expect(first.body.data).toEqual({ accessToken: expect.any(String), expiresIn: 900, refreshToken: expect.any(String) })
    expect(first.body.data.refreshToken).not.toBe(user.refreshToken)
    const keys = await api.get("/v1/api-keys", { bearer: first.body.data.accessToken })
    expect(keys.status).toBe(200)

    const second = await api.post("/api/auth/refresh", { body: { refreshToken: first.body.data.refreshToken } })
    expect(second.status).toBe(200)
  })

  it("refuses a used (rotated) refresh token, and then ends the session it came from", async () => {
    const user = await signUp(api)
    const rotated = await api.post("/api/auth/refresh", { body: { refreshToken: user.refreshToken } })
    const replay = await api.post("/api/auth/refresh", { body: { refreshToken: user.refreshToken } })
    expect(replay.status).toBe(401)
    expect(replay.body.error.code).toBe("UNAUTHORIZED")
    // Reuse means the token leaked: the session is ended for the legitimate holder too.
    const after = await api.post("/api/auth/refresh", { body: { refreshToken: rotated.body.data.refreshToken } })
    expect(after.status).toBe(401)
  })

  it("refuses an unknown refresh token with 401 and a missing one with 400", async () => {
    const unknown = await api.post("/api/auth/refresh", { body: { refreshToken: "mrr_nope" } })
    expect(unknown.status).toBe(401)
    expect(unknown.body).toEqual({ success: false, error: { code: "UNAUTHORIZED", message: "Invalid or expired refresh token" } })
    const missing = await api.post("/api/auth/refresh", { body: {} })
    expect(missing.status).toBe(400)
    expect(missing.body.error).toEqual({ code: "VALIDATION_ERROR", message: expect.any(String), details: { refreshToken: "is required" } })
  })
})

describe("POST /api/auth/logout", () => {
  it("ends that session only: its access token, refresh token and cookie stop working", async () => {
    const user = await signUp(api)
    const other = await api.post("/api/auth/login", { body: { email: user.email, password: user.password } })

    const reply = await api.post("/api/auth/logout", { bearer: user.accessToken })
    expect(reply.status).toBe(200)
    expect(reply.body).toEqual({ success: true, data: { message: expect.any(String) } })
    expect(reply.headers.get("set-cookie")).toMatch(/mailroom_session=;.*Max-Age=0/i)

    const access = await api.get("/v1/api-keys", { bearer: user.accessToken })
    expect(access.status).toBe(401)
    expect(access.body.error.code).toBe("UNAUTHORIZED")
    const refresh = await api.post("/api/auth/refresh", { body: { refreshToken: user.refreshToken } })
    expect(refresh.status).toBe(401)
    const cookie = await api.post("/api/auth/logout", { headers: { cookie: user.cookie.split(";")[0]!, origin: `http://localhost:${server.port}` } })
    expect(cookie.status).toBe(401)

    const otherSession = await api.get("/v1/api-keys", { bearer: other.body.data.accessToken })
    expect(otherSession.status).toBe(200)
  })

  it("needs a credential: 401 without one, 401 with a forged token", async () => {
    const none = await api.post("/api/auth/logout")
    expect(none.status).toBe(401)
    expect(none.body.error.code).toBe("UNAUTHORIZED")
    const user = await signUp(api)
    const [head, payload] = user.accessToken.split(".")
    const forged = await api.post("/api/auth/logout", { bearer: `${head}.${payload}.AAAA` })
    expect(forged.status).toBe(401)
  })

  it("accepts the session cookie from our own origin and refuses it cross-origin", async () => {
    const user = await signUp(api)
    const cookie = user.cookie.split(";")[0]!
    const crossSite = await api.post("/api/auth/logout", { headers: { cookie, origin: "https://evil.example" } })
    expect(crossSite.status).toBe(403)
    expect(crossSite.body.error.code).toBe("FORBIDDEN")
    const sameSite = await api.post("/api/auth/logout", { headers: { cookie, origin: `http://localhost:${server.port}` } })
    expect(sameSite.status).toBe(200)
  })
})
