/**
 * The account's security activity over real HTTP against a started server: what a person and their
 * agents do to the account's sign-in and keys is listed, newest first, with the address and client of
 * each request; a wrong password of the account is there too. Paged; sessions only. A sign-in from a
 * client and an address neither seen before is told to the account's email.
 */
import * as http from "node:http"
import { describe, expect, it } from "vitest"
import { totpAt } from "../../services/accounts/totp.ts"
import { signUp } from "../support/accounts.ts"
import { arrivedIn, fresh, newBox } from "../support/mailboxes.ts"
import { awayFromMinuteEdge, awayFromWindowEdge } from "../support/wait.ts"
import { type SuiteServer, useSuiteServer } from "../support/server.ts"
import { anonymous, offContract, withKey, withToken } from "../support/typed-client.ts"

let suite: SuiteServer

// Behind a proxy on this host and an inner network's (the last test; no other request sends X-Forwarded-For).
useSuiteServer((s) => {
  suite = s
}, { TRUSTED_PROXIES: "127.0.0.1,10.0.0.0/8" })

const PHONE = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 Version/17.0 Mobile/15E148 Safari/604.1"

describe("GET /api/auth/activity", () => {
  it("lists sign-ins, refused ones, and changes to passwords, sessions, two-factor sign-in and keys, newest first, with where each came from", async () => {
    const person = await signUp(suite.url)
    const session = withToken(suite.url, person)
    const login = (password: string, code?: string) =>
      anonymous(suite.url).POST("/api/auth/login", {
        body: { email: person.email, password, ...(code === undefined ? {} : { code }) },
        headers: { "user-agent": PHONE }
      })
    expect((await login("not the password")).response.status).toBe(401)
    const phone = (await login(person.password)).data!.data
    const key = (await session.POST("/v1/api-keys", { body: { name: "agent one" } })).data!.data
    expect((await session.DELETE("/v1/api-keys/{id}", { params: { path: { id: key.keyId } } })).response.status).toBe(200)
    expect((await session.POST("/api/auth/sessions/end-others")).data?.data.ended).toBe(1)
    const { secret } = (await session.POST("/api/auth/two-factor/setup", { body: { password: person.password } })).data!.data
    const enabledAt = Date.now()
    expect((await session.POST("/api/auth/two-factor/enable", { body: { code: totpAt(secret, enabledAt) } })).response.status).toBe(200)
    expect((await login(person.password, "000000")).response.status).toBe(401)
    expect((await login(person.password, totpAt(secret, enabledAt + 30_000))).response.status).toBe(200)
    expect((await session.POST("/api/auth/password", { body: { currentPassword: "a guess", newPassword: "a newer passphrase" } })).response.status)
      .toBe(400)
    expect((await session.POST("/api/auth/password", { body: { currentPassword: person.password, newPassword: "a newer passphrase" } })).response.status)
      .toBe(200)

    const listed = await session.GET("/api/auth/activity")
    expect(listed.response.status).toBe(200)
    const entries = listed.data!.data
    expect(entries.map((e) => [e.kind, e.detail])).toEqual([
      ["password_changed", { otherSessionsEnded: 1 }],
      // A wrong password asked again from a session is a refused sign-in too.
      ["login_failed", { reason: "password", field: "currentPassword" }],
      ["login", { secondFactor: "app" }],
      ["login_failed", { reason: "code" }],
      ["two_factor_enabled", {}],
      ["sessions_signed_out", { ended: 1 }],
      ["api_key_revoked", { keyId: key.keyId, name: "agent one" }],
      ["api_key_created", { keyId: key.keyId, name: "agent one", permission: "full_access" }],
      ["login", {}],
      ["login_failed", { reason: "password" }],
      // signUp's own login
      ["login", {}]
    ])
    for (const entry of entries) {
      expect(entry.clientAddress).toMatch(/^(::ffff:)?127\.0\.0\.1$|^::1$/)
      expect(entry.activityId).toMatch(/^act_[0-9a-f]{24}$/)
    }
    expect(entries.filter((e) => e.userAgent === PHONE).map((e) => e.kind)).toEqual(["login", "login_failed", "login", "login_failed"])
    const times = entries.map((e) => Date.parse(e.at))
    expect([...times].sort((a, b) => b - a)).toEqual(times)
    expect(listed.data!.meta).toEqual({ total: 11, limit: 20, offset: 0, hasMore: false })

    // The new password's session goes on; pages of 3.
    const paged = await session.GET("/api/auth/activity", { params: { query: { limit: 3, offset: 4 } } })
    expect(paged.data!.data.map((e) => e.kind)).toEqual(["two_factor_enabled", "sessions_signed_out", "api_key_revoked"])
    expect(paged.data!.meta).toEqual({ total: 11, limit: 3, offset: 4, hasMore: true })
    expect((await withToken(suite.url, phone).GET("/api/auth/activity")).response.status).toBe(401)
  })

  it("is the account's own, for its login sessions only; bad paging is 400 by field", async () => {
    const person = await signUp(suite.url)
    const other = await signUp(suite.url)
    const session = withToken(suite.url, person)
    expect((await withToken(suite.url, other).GET("/api/auth/activity")).data!.data.map((e) => e.kind)).toEqual(["login"])

    const key = (await session.POST("/v1/api-keys", { body: { name: "agent" } })).data!.data
    const keyed = withKey(suite.url, key)
    expect((await keyed.GET("/api/auth/activity")).response.status).toBe(401)
    // A key an agent makes with a key is the account's activity too, from where the agent is.
    await keyed.POST("/v1/api-keys", { body: { name: "made by an agent" }, headers: { "user-agent": "agent-sdk/1.0" } })
    const made = (await session.GET("/api/auth/activity")).data!.data[0]!
    expect(made).toMatchObject({ kind: "api_key_created", userAgent: "agent-sdk/1.0", detail: { name: "made by an agent" } })

    const bad = await session.GET("/api/auth/activity", { params: { query: offContract({ limit: 0, offset: "-1" }) } })
    expect(bad.response.status).toBe(400)
    expect(bad.error?.error).toMatchObject({
      code: "VALIDATION_ERROR",
      details: { limit: "must be an integer from 1 to 100", offset: expect.stringContaining("must be an integer") }
    })
  })

  it("a sign-in from a client and an address the account has not signed in from is told to its email; a known either is not", async () => {
    const inbox = await newBox(suite.url, { localPart: fresh("watchful") })
    const person = await signUp(suite.url, { email: inbox.address, name: "Ada" })
    const port = new URL(suite.url).port
    /** A login from `localAddress` (another loopback address: another place), as `userAgent`. */
    const loginFrom = (localAddress: string, userAgent: string) =>
      new Promise<number>((resolve, reject) => {
        const body = JSON.stringify({ email: person.email, password: person.password })
        const request = http.request({
          host: "127.0.0.1",
          port,
          path: "/api/auth/login",
          method: "POST",
          localAddress,
          headers: { "content-type": "application/json", "user-agent": userAgent, "content-length": Buffer.byteLength(body) }
        }, (response) => (response.resume(), resolve(response.statusCode!)))
        request.on("error", reject)
        request.end(body)
      })
    // signUp signed in with Node's fetch from 127.0.0.1: the same client elsewhere, another client here.
    expect(await loginFrom("127.0.0.2", "node")).toBe(200)
    expect(await loginFrom("127.0.0.1", PHONE)).toBe(200)
    expect(await loginFrom("127.0.0.3", "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0")).toBe(200)

    const told = await arrivedIn(suite.url, inbox, "New sign-in to your Mailroom account")
    expect(told.text).toMatch(/Gecko\/20100101 Firefox\/128\.0, from the address (::ffff:)?127\.0\.0\.3, /)
    const { data } = await withKey(suite.url, inbox.user).GET("/v1/api/mailboxes/{mailboxId}/emails", {
      params: { path: { mailboxId: inbox.mailboxId } }
    })
    expect(data!.data.filter((email) => email.subject === "New sign-in to your Mailroom account")).toHaveLength(1)
    const kinds = (await withToken(suite.url, person).GET("/api/auth/activity")).data!.data
      .map((e) => [e.kind, e.clientAddress?.replace(/^::ffff:/, "")])
    expect(kinds.slice(0, 3)).toEqual([["login", "127.0.0.3"], ["login", "127.0.0.1"], ["login", "127.0.0.2"]])
  })

  it("behind a trusted proxy, is from the client its X-Forwarded-For names: limits per address and activity follow the client; any other peer's header is ignored", async () => {
    const person = await signUp(suite.url)
    const port = new URL(suite.url).port
    /** A request to `path` from `localAddress` (127.0.0.1: the trusted proxy), forwarding for `forwardedFor`. */
    const send = (path: string, options: { forwardedFor: string; localAddress?: string; body?: unknown }) =>
      new Promise<http.IncomingMessage>((resolve, reject) => {
        const body = options.body === undefined ? undefined : JSON.stringify(options.body)
        const request = http.request({
          host: "127.0.0.1",
          port,
          path,
          method: body === undefined ? "GET" : "POST",
          localAddress: options.localAddress ?? "127.0.0.1",
          headers: {
            "x-forwarded-for": options.forwardedFor,
            ...(body === undefined ? {} : { "content-type": "application/json", "content-length": Buffer.byteLength(body) })
          }
        }, (response) => (response.resume(), resolve(response)))
        request.on("error", reject)
        request.end(body)
      })
    const login = (forwardedFor: string, password: string, localAddress?: string) =>
      send("/api/auth/login", { forwardedFor, body: { email: person.email, password }, ...(localAddress ? { localAddress } : {}) })
        .then((response) => response.statusCode)

    // Unauthenticated requests count against each client's address, not the proxy's.
    await awayFromMinuteEdge(5)
    const remaining = async (forwardedFor: string) => {
      const response = await send("/v1/api/mailboxes", { forwardedFor })
      expect(response.statusCode).toBe(401)
      return Number(response.headers["x-ratelimit-remaining"])
    }
    const first = await remaining("198.51.100.20")
    expect(await remaining("198.51.100.20")).toBe(first - 1)
    expect(await remaining("198.51.100.21")).toBe(299)

    // Ten wrong passwords from one client lock that client out, not the others behind the same proxy;
    // the address its client wrote itself (198.51.100.1) is not the one counted.
    await awayFromWindowEdge(15 * 60, 30)
    for (let i = 0; i < 10; i++) expect(await login("198.51.100.1, 203.0.113.7", "not the password")).toBe(401)
    expect(await login("203.0.113.7", person.password)).toBe(429)
    expect(await login("198.51.100.1", person.password)).toBe(200)
    // A peer that is no trusted proxy cannot pass for the locked-out client: its own address counts.
    expect(await login("198.51.100.1", person.password, "127.0.0.2")).toBe(200)
    // An IPv6 client with its port, through an inner proxy of the trusted network.
    expect(await login("[2001:db8::5]:4711, 10.1.2.3", person.password)).toBe(200)

    const entries = (await withToken(suite.url, person).GET("/api/auth/activity", { params: { query: { limit: 5 } } })).data!.data
    expect(entries.map((e) => [e.kind, e.clientAddress?.replace(/^::ffff:/, "")])).toEqual([
      ["login", "2001:db8::5"],
      ["login", "127.0.0.2"],
      ["login", "198.51.100.1"],
      ["login_failed", "203.0.113.7"],
      ["login_failed", "203.0.113.7"]
    ])
  })
})
