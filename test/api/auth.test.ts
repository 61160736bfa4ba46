/**
 * SPEC "User authentication" over real HTTP against a started server, through the typed client.
 */
import { describe, expect, it } from "vitest"
import { isoMillis, signUp, withApiKey } from "../support/accounts.ts"
import { type Server, useSuiteServer } from "../support/server.ts"
import { anonymous, type MailroomFetchClient, offContract, sessionFrom, withKey, withToken } from "../support/typed-client.ts"
import { awayFromWindowEdge } from "../support/wait.ts"

let server: Server
/** Registering, logging in and refreshing need no credential. */
let mailroom: MailroomFetchClient

useSuiteServer((suite) => {
  server = suite.server
  mailroom = anonymous(suite.url)
})

const email = () => `user-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}@example.com`

const register = (body: { email: string; password: string; name: string }) => mailroom.POST("/api/auth/register", { body })
const login = (body: { email: string; password: string }) => mailroom.POST("/api/auth/login", { body })
const refresh = (refreshToken: string) => mailroom.POST("/api/auth/refresh", { body: { refreshToken } })
const ownOrigin = () => `http://localhost:${server.port}`

describe("POST /api/auth/register", () => {
  it("creates a user: 201 with userId, email, name, createdAt and never the password", async () => {
    const address = email()
    const reply = await register({ email: address, password: "s3cret-enough", name: "Ada" })
    expect(reply.response.status).toBe(201)
    expect(reply.data?.success).toBe(true)
    expect(reply.data?.data).toEqual({ userId: expect.any(String), email: address, name: "Ada", createdAt: expect.stringMatching(isoMillis) })
    expect(JSON.stringify(reply.data)).not.toContain("s3cret-enough")
    expect(reply.response.headers.get("x-ratelimit-limit")).toBe("300")
  })

  it("refuses an invalid email and a short password with VALIDATION_ERROR details per field", async () => {
    const reply = await register({ email: "not-an-email", password: "short", name: "Ada" })
    expect(reply.response.status).toBe(400)
    expect(reply.error).toEqual({
      success: false,
      error: {
        code: "VALIDATION_ERROR",
        message: expect.any(String),
        details: { email: "must be a valid email address", password: "must be at least 8 characters" }
      }
    })
  })

  it("refuses a name of more than one line: it is shown as one, and mail never carries it", async () => {
    const reply = await register({ email: email(), password: "a long enough password", name: "Ada\nVisit http://phish.example to keep your account" })
    expect(reply.response.status).toBe(400)
    expect(reply.error?.error).toEqual({ code: "VALIDATION_ERROR", message: expect.any(String), details: { name: "must be one line, without control characters" } })
  })

  it("counts the password's length in characters, not UTF-16 units", async () => {
    // Four emoji are eight UTF-16 units but four characters: too short.
    const short = await register({ email: email(), password: "😀😀😀😀", name: "Ada" })
    expect(short.response.status).toBe(400)
    expect(short.error?.error).toEqual({ code: "VALIDATION_ERROR", message: expect.any(String), details: { password: "must be at least 8 characters" } })
    const address = email()
    expect((await register({ email: address, password: "😀".repeat(8), name: "Ada" })).response.status).toBe(201)
    expect((await login({ email: address, password: "😀".repeat(8) })).response.status).toBe(200)
  })

  it("requires every field", async () => {
    const reply = await register(offContract({}))
    expect(reply.response.status).toBe(400)
    expect(reply.error?.error.code).toBe("VALIDATION_ERROR")
    expect(reply.error?.error.details).toEqual({ email: "is required", password: "is required", name: "is required" })
  })

  it("refuses an email already registered, in any letter case, with 409 CONFLICT", async () => {
    const address = email()
    expect((await register({ email: address, password: "password-1", name: "A" })).response.status).toBe(201)
    const again = await register({ email: address.toUpperCase(), password: "password-2", name: "B" })
    expect(again.response.status).toBe(409)
    expect(again.error?.success).toBe(false)
    expect(again.error?.error.code).toBe("CONFLICT")
  })

  it("ignores privileged fields in the body", async () => {
    const reply = await register(offContract({ email: email(), password: "password-1", name: "A", plan: "enterprise", userId: "usr_mine" }))
    expect(reply.response.status).toBe(201)
    expect(reply.data?.data.userId).not.toBe("usr_mine")
    const session = await login({ email: reply.data!.data.email, password: "password-1" })
    const subscription = await withToken(server.url, session.data!.data).GET("/v1/billing/subscription")
    expect(subscription.data?.data.plan).toBe("free")
  })
})

describe("POST /api/auth/login", () => {
  it("returns accessToken, refreshToken, expiresIn 900 and the user, and sets the session cookie", async () => {
    const address = email()
    const registered = await register({ email: address, password: "password-1", name: "Grace" })
    const reply = await login({ email: address, password: "password-1" })
    expect(reply.response.status).toBe(200)
    expect(reply.data).toEqual({
      success: true,
      data: {
        accessToken: expect.any(String),
        refreshToken: expect.any(String),
        expiresIn: 900,
        user: { userId: registered.data?.data.userId, email: address, name: "Grace" }
      }
    })
    const cookie = reply.response.headers.get("set-cookie") ?? ""
    expect(cookie).toMatch(/^mailroom_session=[^;]+/)
    expect(cookie).toMatch(/HttpOnly/i)
    expect(cookie).toMatch(/SameSite=Lax/i)
  })

  it("refuses a wrong password and an unknown email alike with 401 UNAUTHORIZED", async () => {
    const user = await signUp(server.url)
    const wrong = await login({ email: user.email, password: "not the password" })
    const unknown = await login({ email: email(), password: "whatever-123" })
    for (const reply of [wrong, unknown]) {
      expect(reply.response.status).toBe(401)
      expect(reply.error).toEqual({ success: false, error: { code: "UNAUTHORIZED", message: "Invalid email or password" } })
    }
  })

  it("limits failed logins per account and client address to 10 per 15 minutes, then 429 even with the right password", async () => {
    const user = await signUp(server.url)
    // The eleven in one window (quarter hours from :00).
    await awayFromWindowEdge(15 * 60, 30)
    for (let i = 0; i < 10; i++) {
      const reply = await login({ email: user.email, password: `wrong-${i}-password` })
      expect(reply.response.status).toBe(401)
    }
    const blocked = await login({ email: user.email, password: user.password })
    expect(blocked.response.status).toBe(429)
    expect(blocked.error?.error.code).toBe("RATE_LIMIT_EXCEEDED")
    expect(blocked.error?.error.details).toEqual({ limit: 10, window: "15 minutes", retry_after: expect.any(Number) })
    const retryAfter = Number(blocked.response.headers.get("retry-after"))
    expect(retryAfter).toBeGreaterThan(0)
    // The headers describe the failed-login limit that refused it, not the address's 300 a minute.
    expect(blocked.response.headers.get("x-ratelimit-limit")).toBe("10")
    expect(blocked.response.headers.get("x-ratelimit-remaining")).toBe("0")
    expect(Math.abs(Number(blocked.response.headers.get("x-ratelimit-reset")) - (Date.now() / 1000 + retryAfter))).toBeLessThanOrEqual(2)
    // The window's end itself: the failed-login window of 15 minutes ends on a multiple of 900 s.
    expect(Number(blocked.response.headers.get("x-ratelimit-reset")) % 900).toBe(0)
  })
})

describe("POST /api/auth/refresh", () => {
  it("exchanges the refresh token for a new access token and rotates the refresh token", async () => {
    const user = await signUp(server.url)
    const first = await refresh(user.refreshToken)
    expect(first.response.status).toBe(200)
    expect(first.data?.data).toEqual({ accessToken: expect.any(String), expiresIn: 900, refreshToken: expect.any(String) })
    expect(first.data?.data.refreshToken).not.toBe(user.refreshToken)
    const keys = await withToken(server.url, first.data!.data).GET("/v1/api-keys")
    expect(keys.response.status).toBe(200)

    const second = await refresh(first.data!.data.refreshToken)
    expect(second.response.status).toBe(200)
  })

  it("refuses a used (rotated) refresh token, and then ends the session it came from", async () => {
    const user = await signUp(server.url)
    const rotated = await refresh(user.refreshToken)
    const replay = await refresh(user.refreshToken)
    expect(replay.response.status).toBe(401)
    expect(replay.error?.error.code).toBe("UNAUTHORIZED")
    // Reuse means the token leaked: the session is ended for the legitimate holder too.
    const after = await refresh(rotated.data!.data.refreshToken)
    expect(after.response.status).toBe(401)
  })

  it("a token exchanged several rotations ago, presented again, ends the session too (a thief who refreshed twice is found out)", async () => {
    const user = await signUp(server.url)
    const once = await refresh(user.refreshToken)
    const twice = await refresh(once.data!.data.refreshToken)
    expect(twice.response.status).toBe(200)
    expect((await refresh(user.refreshToken)).response.status).toBe(401)
    expect((await refresh(twice.data!.data.refreshToken)).response.status).toBe(401)
    const keys = await withToken(server.url, twice.data!.data).GET("/v1/api-keys")
    expect(keys.response.status).toBe(401)
  })

  it("refuses an unknown refresh token with 401 and a missing one with 400", async () => {
    const unknown = await refresh("mrr_nope")
    expect(unknown.response.status).toBe(401)
    expect(unknown.error).toEqual({ success: false, error: { code: "UNAUTHORIZED", message: "Invalid or expired refresh token" } })
    const missing = await mailroom.POST("/api/auth/refresh", { body: offContract({}) })
    expect(missing.response.status).toBe(400)
    expect(missing.error?.error).toEqual({ code: "VALIDATION_ERROR", message: expect.any(String), details: { refreshToken: "is required" } })
  })
})

describe("POST /api/auth/logout", () => {
  it("ends that session only: its access token, refresh token and cookie stop working", async () => {
    const user = await signUp(server.url)
    const other = await login({ email: user.email, password: user.password })

    const reply = await withToken(server.url, user).POST("/api/auth/logout")
    expect(reply.response.status).toBe(200)
    expect(reply.data).toEqual({ success: true, data: { message: expect.any(String) } })
    expect(reply.response.headers.get("set-cookie")).toMatch(/mailroom_session=;.*Max-Age=0/i)

    const access = await withToken(server.url, user).GET("/v1/api-keys")
    expect(access.response.status).toBe(401)
    expect(access.error?.error.code).toBe("UNAUTHORIZED")
    expect((await refresh(user.refreshToken)).response.status).toBe(401)
    const cookie = await mailroom.POST("/api/auth/logout", sessionFrom(user, ownOrigin()))
    expect(cookie.response.status).toBe(401)

    const otherSession = await withToken(server.url, other.data!.data).GET("/v1/api-keys")
    expect(otherSession.response.status).toBe(200)
  })

  it("needs a credential: 401 without one, 401 with a forged token", async () => {
    const none = await mailroom.POST("/api/auth/logout")
    expect(none.response.status).toBe(401)
    expect(none.error?.error.code).toBe("UNAUTHORIZED")
    const user = await signUp(server.url)
    const [head, payload] = user.accessToken.split(".")
    const forged = await withToken(server.url, { accessToken: `${head}.${payload}.AAAA` }).POST("/api/auth/logout")
    expect(forged.response.status).toBe(401)
  })

  it("accepts the session cookie from our own origin and refuses it cross-origin", async () => {
    const user = await signUp(server.url)
    const crossSite = await mailroom.POST("/api/auth/logout", sessionFrom(user, "https://evil.example"))
    expect(crossSite.response.status).toBe(403)
    expect(crossSite.error?.error.code).toBe("FORBIDDEN")
    // Refused before authentication: the address's limit in its headers, as on a 401.
    expect(crossSite.response.headers.get("x-ratelimit-limit")).toBe("300")
    const sameSite = await mailroom.POST("/api/auth/logout", sessionFrom(user, ownOrigin()))
    expect(sameSite.response.status).toBe(200)
  })

  it("takes APP_URL's loopback name and the others for this machine's port (the server says it listens on 127.0.0.1), not another port", async () => {
    for (const origin of [`http://127.0.0.1:${server.port}`, `http://[::1]:${server.port}`]) {
      const user = await signUp(server.url)
      expect([origin, (await mailroom.POST("/api/auth/logout", sessionFrom(user, origin))).response.status]).toEqual([origin, 200])
    }
    const user = await signUp(server.url)
    for (const origin of [`http://localhost:${server.port + 1}`, `https://localhost:${server.port}`, "http://127.0.0.2"]) {
      expect([origin, (await mailroom.POST("/api/auth/logout", sessionFrom(user, origin))).response.status]).toEqual([origin, 403])
    }
  })
})

describe("POST /api/auth/password", () => {
  const change = (user: { accessToken: string }, body: { currentPassword: string; newPassword: string }) =>
    withToken(server.url, user).POST("/api/auth/password", { body })

  it("changes it from a session: the new one signs in, the old one no longer; every other session ends, this one and the keys go on", async () => {
    const user = await withApiKey(server.url)
    const other = (await login({ email: user.email, password: user.password })).data!.data

    const reply = await change(user, { currentPassword: user.password, newPassword: "a new passphrase" })
    expect(reply.response.status).toBe(200)
    expect(reply.data).toEqual({ success: true, data: { message: expect.any(String), otherSessionsEnded: 1 } })

    expect((await login({ email: user.email, password: user.password })).response.status).toBe(401)
    expect((await login({ email: user.email, password: "a new passphrase" })).response.status).toBe(200)
    // The other login: its access token and its refresh token stop working at once.
    expect((await withToken(server.url, other).GET("/v1/api-keys")).response.status).toBe(401)
    expect((await refresh(other.refreshToken)).response.status).toBe(401)
    // This session goes on, and so do API keys.
    expect((await withToken(server.url, user).GET("/v1/api-keys")).response.status).toBe(200)
    expect((await withKey(server.url, user).GET("/v1/api-keys")).response.status).toBe(200)
    // The dashboard's cookie (this same session's) works the same way: the one other session now is the
    // sign-in with the new password above.
    const byCookie = await mailroom.POST("/api/auth/password", {
      ...sessionFrom(user, ownOrigin()),
      body: { currentPassword: "a new passphrase", newPassword: "a third passphrase" }
    })
    expect(byCookie.data?.data.otherSessionsEnded).toBe(1)
  })

  it("refuses a wrong current password, a short or unchanged new one (400 per field), and callers without a session (401)", async () => {
    const user = await withApiKey(server.url)
    const wrong = await change(user, { currentPassword: "not my password", newPassword: "a new passphrase" })
    expect(wrong.response.status).toBe(400)
    expect(wrong.error).toEqual({
      success: false,
      error: { code: "VALIDATION_ERROR", message: expect.any(String), details: { currentPassword: "is not the account's password" } }
    })
    const short = await change(user, { currentPassword: user.password, newPassword: "short" })
    expect(short.response.status).toBe(400)
    expect(short.error?.error).toMatchObject({ code: "VALIDATION_ERROR", details: { newPassword: "must be at least 8 characters" } })
    const same = await change(user, { currentPassword: user.password, newPassword: user.password })
    expect(same.error?.error).toMatchObject({ code: "VALIDATION_ERROR", details: { newPassword: "must differ from the current password" } })
    // An API key is no login session.
    const byKey = await withToken(server.url, { accessToken: user.apiKey }).POST("/api/auth/password", {
      body: { currentPassword: user.password, newPassword: "a new passphrase" }
    })
    expect(byKey.response.status).toBe(401)
    const none = await mailroom.POST("/api/auth/password", { body: { currentPassword: user.password, newPassword: "a new passphrase" } })
    expect(none.response.status).toBe(401)
    expect((await login({ email: user.email, password: user.password })).response.status).toBe(200)
  })

  it("counts wrong current passwords as failed logins: the tenth is the last, then 429 even for the right one", async () => {
    const user = await signUp(server.url)
    await awayFromWindowEdge(15 * 60, 30)
    for (let i = 0; i < 10; i++) {
      expect((await change(user, { currentPassword: `wrong-${i}-password`, newPassword: "a new passphrase" })).response.status).toBe(400)
    }
    const blocked = await change(user, { currentPassword: user.password, newPassword: "a new passphrase" })
    expect(blocked.response.status).toBe(429)
    expect(blocked.error?.error).toMatchObject({ code: "RATE_LIMIT_EXCEEDED", details: { limit: 10, window: "15 minutes" } })
    // The same count as logins: signing in is refused too.
    expect((await login({ email: user.email, password: user.password })).response.status).toBe(429)
  })
})

describe("GET /api/auth/sessions, DELETE /api/auth/sessions/{id}, POST /api/auth/sessions/end-others", () => {
  const loginFrom = async (user: { email: string; password: string }, userAgent: string) => {
    const reply = await mailroom.POST("/api/auth/login", { body: { email: user.email, password: user.password }, headers: { "user-agent": userAgent } })
    return reply.data!.data
  }

  it("lists where the account is signed in (client, address, times), this session marked; signs one out, then every other", async () => {
    const user = await signUp(server.url)
    const laptop = await loginFrom(user, "Mozilla/5.0 (X11; Linux x86_64) Firefox/132.0")
    const phone = await loginFrom(user, "Mailroom-Test-Phone/1.0")

    const listed = await withToken(server.url, laptop).GET("/api/auth/sessions")
    expect(listed.response.status).toBe(200)
    const sessions = listed.data!.data
    expect(sessions).toHaveLength(3)
    expect(sessions.filter((s) => s.current).map((s) => s.userAgent)).toEqual(["Mozilla/5.0 (X11; Linux x86_64) Firefox/132.0"])
    expect(sessions.map((s) => s.userAgent)).toEqual(expect.arrayContaining(["Mailroom-Test-Phone/1.0", "Mozilla/5.0 (X11; Linux x86_64) Firefox/132.0"]))
    for (const session of sessions) {
      expect(session).toEqual({
        sessionId: expect.stringMatching(/^ses_/),
        current: expect.any(Boolean),
        userAgent: expect.any(String),
        clientAddress: expect.stringMatching(/127\.0\.0\.1/),
        createdAt: expect.stringMatching(isoMillis),
        lastActiveAt: expect.stringMatching(isoMillis),
        expiresAt: expect.stringMatching(isoMillis)
      })
    }

    // The phone is lost: signed out from the laptop. Its token stops working; the others go on.
    const phoneSession = sessions.find((s) => s.userAgent === "Mailroom-Test-Phone/1.0")!
    const ended = await withToken(server.url, laptop).DELETE("/api/auth/sessions/{sessionId}", { params: { path: { sessionId: phoneSession.sessionId } } })
    expect(ended.data).toEqual({ success: true, data: { ended: 1 } })
    expect((await withToken(server.url, phone).GET("/v1/api-keys")).response.status).toBe(401)
    expect((await refresh(phone.refreshToken)).response.status).toBe(401)
    expect((await withToken(server.url, user).GET("/v1/api-keys")).response.status).toBe(200)
    // Gone, or never the account's: 404.
    const again = await withToken(server.url, laptop).DELETE("/api/auth/sessions/{sessionId}", { params: { path: { sessionId: phoneSession.sessionId } } })
    expect(again.response.status).toBe(404)
    expect(again.error).toMatchObject({ error: { code: "NOT_FOUND", details: { sessionId: phoneSession.sessionId } } })
    const stranger = await signUp(server.url)
    const notTheirs = await withToken(server.url, stranger).DELETE("/api/auth/sessions/{sessionId}", {
      params: { path: { sessionId: sessions.find((s) => s.current)!.sessionId } }
    })
    expect(notTheirs.response.status).toBe(404)
    expect((await withToken(server.url, laptop).GET("/api/auth/sessions")).response.status).toBe(200)

    // Everywhere else: the sign-up's session ends, the laptop's goes on.
    const others = await withToken(server.url, laptop).POST("/api/auth/sessions/end-others")
    expect(others.data).toEqual({ success: true, data: { ended: 1 } })
    expect((await withToken(server.url, user).GET("/v1/api-keys")).response.status).toBe(401)
    const left = await withToken(server.url, laptop).GET("/api/auth/sessions")
    expect(left.data!.data.map((s) => [s.current, s.userAgent])).toEqual([[true, "Mozilla/5.0 (X11; Linux x86_64) Firefox/132.0"]])
  })

  it("is a login session's business: an API key or no credential is 401", async () => {
    const user = await withApiKey(server.url)
    expect((await withToken(server.url, { accessToken: user.apiKey }).GET("/api/auth/sessions")).response.status).toBe(401)
    expect((await mailroom.GET("/api/auth/sessions")).response.status).toBe(401)
    expect((await mailroom.POST("/api/auth/sessions/end-others")).error?.error.code).toBe("UNAUTHORIZED")
  })
})
