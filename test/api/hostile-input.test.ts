/**
 * Input that used to answer 500 (issue 14, "no 500s from input") and what it answers now: the rules of
 * src/http/input-rules.ts, route by route as a user meets them.
 */
import { describe, expect, it } from "vitest"
import { signUp, withApiKey } from "../support/accounts.ts"
import { rawExchange, type RawReply, rawRequest } from "../support/raw-http.ts"
import { type Server, useSuiteServer } from "../support/server.ts"
import { anonymous, offContract, rawJsonBody, withKey, withToken } from "../support/typed-client.ts"

let server: Server

useSuiteServer((suite) => {
  server = suite.server
})

const NO_NUL = "must not contain NUL characters (\\u0000)"
const NO_LONE_SURROGATE = "must be valid Unicode: it holds half of a character (a lone surrogate such as \\ud800)"
const TOO_DEEP = "must not nest arrays or objects more than 64 levels deep"

const nested = (depth: number, inner = "") => "[".repeat(depth) + inner + "]".repeat(depth)

/** What a typed request answered, as the text of its body. */
const textOf = (reply: { readonly data?: unknown; readonly error?: unknown }) => JSON.stringify(reply.error ?? reply.data)

const expectNoInternals = (text: string) => {
  expect(text).not.toMatch(/RangeError|SqlError|stack|node_modules|\bat .*\.(ts|js):\d+/)
}

const expectValidation = (reply: { readonly response: Response; readonly error?: unknown }, details: Record<string, unknown>) => {
  expect(reply.response.status, textOf(reply)).toBe(400)
  expect(reply.error).toEqual({ success: false, error: { code: "VALIDATION_ERROR", message: expect.any(String), details } })
  expectNoInternals(textOf(reply))
}

const keyCount = async (accessToken: string) => (await withToken(server.url, { accessToken }).GET("/v1/api-keys")).data!.meta.total

describe("deeply nested JSON", () => {
  it.each([10_000, 100_000])("%i levels of arrays is 400 VALIDATION_ERROR on the open login route", async (depth) => {
    const reply = await anonymous(server.url).POST("/api/auth/login", rawJsonBody(nested(depth)))
    expectValidation(reply, { body: TOO_DEEP })
  })

  it("is refused inside a field and on an authenticated route, and nothing is created", async () => {
    const user = await signUp(server.url)
    for (const raw of [`{"name": ${nested(10_000, '"x"')}}`, `{"name": "ok", "a": ${"{\"b\":".repeat(5_000)}1${"}".repeat(5_000)}}`]) {
      const reply = await withToken(server.url, user).POST("/v1/api-keys", rawJsonBody(raw))
      expectValidation(reply, { body: TOO_DEEP })
    }
    expect(await keyCount(user.accessToken)).toBe(0)
  })

  it("64 levels are still read and decoded: the answer is about the field, not the depth", async () => {
    const reply = await anonymous(server.url).POST("/api/auth/login", rawJsonBody(`{"email": ${nested(63, "1")}, "password": "x"}`))
    expect(reply.response.status).toBe(400)
    expect(reply.error?.error.code).toBe("VALIDATION_ERROR")
    expect(Object.keys(reply.error?.error.details ?? {})).toEqual(["email"])
  })

  it("brackets inside strings do not count as nesting", async () => {
    const user = await signUp(server.url)
    const name = "[".repeat(80) + "{".repeat(10)
    const reply = await withToken(server.url, user).POST("/v1/api-keys", { body: { name } })
    expect(reply.response.status, textOf(reply)).toBe(201)
    expect(reply.data?.data.name).toBe(name)
  })
})

describe("lone surrogates (half of a character, which JSON's escapes can write)", () => {
  it("in a body string or key: 400 VALIDATION_ERROR naming the field; a whole character escaped the same way is taken", async () => {
    const user = await signUp(server.url)
    const tokened = withToken(server.url, user)
    expectValidation(await tokened.POST("/v1/api-keys", { body: { name: "half \ud800 a character" } }), { name: NO_LONE_SURROGATE })
    expectValidation(await tokened.POST("/v1/api-keys", { body: offContract({ name: "ok", ["\udfff"]: 1 }) }), { "\udfff": NO_LONE_SURROGATE })
    expect(await keyCount(user.accessToken)).toBe(0)
    const whole = await tokened.POST("/v1/api-keys", { body: { name: "robot \ud83e\udd16" } })
    expect(whole.response.status, textOf(whole)).toBe(201)
    expect(whole.data?.data.name).toBe("robot 🤖")
  })
})

describe("bodies that are not UTF-8", () => {
  const bytes = (...parts: ReadonlyArray<string | ReadonlyArray<number>>) =>
    Buffer.concat(parts.map((part) => typeof part === "string" ? Buffer.from(part, "utf8") : Buffer.from(part)))

  it("Latin-1's é as one byte: 400 VALIDATION_ERROR naming the byte and where it is; nothing is made", async () => {
    const user = await signUp(server.url)
    const reply = await rawRequest(`${server.url}/v1/api-keys`, {
      method: "POST",
      headers: { authorization: `Bearer ${user.accessToken}`, "content-type": "application/json" },
      body: bytes('{"name":"caf', [0xe9], '"}')
    })
    const problem = "must be UTF-8: byte 0xE9 at offset 12 is not (send text as UTF-8, as Content-Type: application/json says)"
    expect(reply.status, reply.text).toBe(400)
    expect(reply.json).toEqual({ success: false, error: { code: "VALIDATION_ERROR", message: `Invalid request: body ${problem}`, details: { body: problem } } })
    expect(await keyCount(user.accessToken)).toBe(0)
  })

  it.each([
    ["a cut character", [0xe2, 0x82], 7],
    ["a surrogate written in UTF-8", [0xed, 0xa0, 0x80], 7],
    ["an overlong slash", [0xc0, 0xaf], 7]
  ])("%s is refused too, before any account lookup", async (_, invalid, offset) => {
    const reply = await rawRequest(`${server.url}/api/auth/login`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: bytes('{"a":"b', invalid, '"}')
    })
    expect(reply.status, reply.text).toBe(400)
    expect(reply.json).toMatchObject({ error: { code: "VALIDATION_ERROR", details: { body: expect.stringContaining(`at offset ${offset} is not`) } } })
  })

  it("UTF-8 of every length, sent chunked, reaches the route as written", async () => {
    const user = await signUp(server.url)
    const name = "é ✓ 🤖 Grüße 東京"
    const body = bytes(`{"name":${JSON.stringify(name)}}`)
    const reply = await rawRequest(`${server.url}/v1/api-keys`, {
      method: "POST",
      headers: { authorization: `Bearer ${user.accessToken}`, "content-type": "application/json" },
      body: new ReadableStream({ start: (controller) => { for (const byte of body) controller.enqueue(Uint8Array.of(byte)); controller.close() } }),
      duplex: "half"
    })
    expect(reply.status, reply.text).toBe(201)
    expect((reply.json as { data: { name: string } }).data.name).toBe(name)
  })
})

describe("a field named __proto__", () => {
  it("is named as any other field a route does not take, not a 400 whose message names nothing", async () => {
    const user = await signUp(server.url)
    const reply = await withToken(server.url, user).POST("/v1/api-keys", rawJsonBody('{"name":"k","__proto__":{"admin":true}}'))
    expect(reply.response.status).toBe(400)
    // The message names it (the envelope's encoding of `details` cannot carry a key of that name).
    expect(reply.error?.error).toMatchObject({
      code: "VALIDATION_ERROR",
      message: "Invalid request: __proto__ is not a field here; the fields are name, expirationDays, mailboxIds, permission"
    })
    expect(await keyCount(user.accessToken)).toBe(0)
  })
})

describe("a body of 20,000 fields a route does not take", () => {
  it("is told about the first 20 and how many more, at once and in a few kilobytes (it took the server seconds of CPU)", async () => {
    const user = await signUp(server.url)
    const fields = Object.fromEntries(Array.from({ length: 20_000 }, (_, i) => [`k${i}`, i]))
    const reply = await withToken(server.url, user).POST("/v1/api-keys", rawJsonBody(JSON.stringify({ name: "k", ...fields })))
    const named = Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`k${i}`, "is not a field here; the fields are name, expirationDays, mailboxIds, permission"]))
    expectValidation(reply, named)
    expect(reply.error?.error.message).toMatch(/^Invalid request: k0 is not a field here; .*; k19 is not a field here; [^;]+; and 19980 more fields$/)
    expect(textOf(reply).length).toBeLessThan(5_000)
    expect(await keyCount(user.accessToken)).toBe(0)
  })
})

describe("NUL characters", () => {
  it("in an API key name: 400 VALIDATION_ERROR naming the field; no key is made", async () => {
    const user = await signUp(server.url)
    const reply = await withToken(server.url, user).POST("/v1/api-keys", { body: { name: "bad\u0000name" } })
    expectValidation(reply, { name: NO_NUL })
    expect(await keyCount(user.accessToken)).toBe(0)
  })

  it("in the login email, before any account lookup", async () => {
    const reply = await anonymous(server.url).POST("/api/auth/login", { body: { email: "a\u0000@example.com", password: "whatever1" } })
    expectValidation(reply, { email: NO_NUL })
  })

  it("in a search query, in a nested value, and in a key", async () => {
    const user = await withApiKey(server.url)
    const keyed = withKey(server.url, user)
    expectValidation(await keyed.POST("/v1/search", { body: { query: "invoice\u0000" } }), { query: NO_NUL })
    expectValidation(
      await keyed.POST("/v1/api/webhooks", { body: offContract({ url: "https://example.com/hook", events: ["email.received", "x\u0000"] }) }),
      { "events.1": NO_NUL }
    )
    expectValidation(await keyed.POST("/v1/search", { body: offContract({ query: "ok", "mo\u0000de": "text" }) }), {
      "mo\\u0000de": NO_NUL
    })
  })

  it("in a dashboard body: under details.field_errors, as the dashboard tells field errors", async () => {
    const user = await signUp(server.url)
    const reply = await withToken(server.url, user).POST("/api/mailboxes", { body: { local_part: "agent\u0000x", domain: "agents.localhost" } })
    expectValidation(reply, { field_errors: { local_part: NO_NUL } })
  })

  it("in a path id: 400 VALIDATION_ERROR naming the path parameter", async () => {
    const user = await withApiKey(server.url)
    const keyed = withKey(server.url, user)
    expectValidation(await keyed.GET("/v1/api/emails/{emailId}", { params: { path: { emailId: "\u0000" } } }), { emailId: NO_NUL })
    expectValidation(
      await keyed.GET("/v1/api/emails/{emailId}/attachments/{attachmentId}", { params: { path: { emailId: "eml_1", attachmentId: "a\u0000b" } } }),
      { attachmentId: NO_NUL }
    )
    expectValidation(await keyed.DELETE("/v1/api-keys/{id}", { params: { path: { id: "\u0000" } } }), { id: NO_NUL })
    // An id without NUL that names nothing is still 404, as before.
    const unknown = await keyed.GET("/v1/api/emails/{emailId}", { params: { path: { emailId: "eml_000000000000000000000000" } } })
    expect(unknown.response.status).toBe(404)
    expect(unknown.error?.error.code).toBe("NOT_FOUND")
  })

  it("in a query parameter", async () => {
    const user = await withApiKey(server.url)
    const keyed = withKey(server.url, user)
    expectValidation(await keyed.GET("/v1/search/suggestions", { params: { query: { q: "in\u0000v" } } }), { q: NO_NUL })
    expectValidation(await keyed.GET("/v1/api/mailboxes/check-email", { params: { query: { local_part: "a\u0000", domain: "agents.localhost" } } }), {
      local_part: NO_NUL
    })
  })
})

describe("a query parameter whose %-escapes are not UTF-8", () => {
  it("is 400 VALIDATION_ERROR naming it and the escape (it searched for 'caf\ufffd' and found nothing); a bare % is a %", async () => {
    const user = await withApiKey(server.url)
    const ask = (query: string) => rawRequest(`${server.url}/v1/search/suggestions?${query}`, { method: "GET", headers: { authorization: `Bearer ${user.apiKey}` } })
    const latin1 = await ask("q=caf%E9")
    expect(latin1.status, latin1.text).toBe(400)
    const problem = "must be UTF-8 once its %-escapes are decoded: %E9 is not (é is %C3%A9 in UTF-8)"
    expect(latin1.json).toEqual({ success: false, error: { code: "VALIDATION_ERROR", message: `Invalid request: q ${problem}`, details: { q: problem } } })
    // A character cut short, in the middle of a value.
    expect((await ask("q=a%C3b")).json).toMatchObject({ error: { details: { q: expect.stringContaining("%C3 is not") } } })
    // UTF-8 escaped, and a % that escapes nothing, are read as written.
    for (const fine of ["q=caf%C3%A9", "q=100%", "q=50%25"]) expect((await ask(fine)).status, fine).toBe(200)
  })
})

describe("a query parameter given twice", () => {
  it("is 400 VALIDATION_ERROR naming it, on the API and the dashboard alike; one the route does not read is left alone", async () => {
    const user = await withApiKey(server.url)
    const twice = await rawRequest(`${server.url}/v1/api/emails?limit=1&limit=2`, { method: "GET", headers: { authorization: `Bearer ${user.apiKey}` } })
    expect(twice.status, twice.text).toBe(400)
    expect(twice.json).toEqual({
      success: false,
      error: { code: "VALIDATION_ERROR", message: "Invalid request: limit must be given once", details: { limit: "must be given once" } }
    })
    const dashboard = await rawRequest(`${server.url}/api/auth/activity?offset=0&offset=1`, {
      method: "GET",
      headers: { authorization: `Bearer ${user.accessToken}` }
    })
    expect(dashboard.status, dashboard.text).toBe(400)
    // As the dashboard's other query parameters are told (field_errors is for bodies).
    expect(dashboard.json).toMatchObject({ error: { code: "VALIDATION_ERROR", details: { offset: "must be given once" } } })
    const ignored = await rawRequest(`${server.url}/v1/api/emails?utm=a&utm=b`, { method: "GET", headers: { authorization: `Bearer ${user.apiKey}` } })
    expect(ignored.status, ignored.text).toBe(200)
  })
})

describe("bodies that are not JSON", () => {
  const unsupported = (reply: RawReply, received: string | null) => {
    expect(reply.status, reply.text).toBe(415)
    expect(reply.json).toEqual({
      success: false,
      error: { code: "UNSUPPORTED_MEDIA_TYPE", message: expect.any(String), details: { accepted: "application/json", charset: "utf-8", received } }
    })
  }

  it("a form is 415 on register and nobody is registered", async () => {
    const email = `form-${Date.now()}@example.com`
    const form = new URLSearchParams({ email, password: "correct horse battery", name: "Form" }).toString()
    unsupported(
      await rawRequest(`${server.url}/api/auth/register`, { method: "POST", body: form, headers: { "content-type": "application/x-www-form-urlencoded" } }),
      "application/x-www-form-urlencoded"
    )
    const registered = await anonymous(server.url).POST("/api/auth/register", { body: { email, password: "correct horse battery", name: "Form" } })
    expect(registered.response.status).toBe(201)
  })

  it("multipart/form-data is 415 on a JSON route and no key is made", async () => {
    const user = await signUp(server.url)
    const form = new FormData()
    form.set("name", "from a form")
    form.set("file", new Blob(["hello"], { type: "text/plain" }), "hello.txt")
    const response = await fetch(`${server.url}/v1/api-keys`, { method: "POST", headers: { authorization: `Bearer ${user.accessToken}` }, body: form })
    const body = (await response.json()) as { error: { code: string; details: { received: string } } }
    expect(response.status).toBe(415)
    expect(body.error.code).toBe("UNSUPPORTED_MEDIA_TYPE")
    expect(body.error.details.received).toMatch(/^multipart\/form-data; boundary=/)
    expect(await keyCount(user.accessToken)).toBe(0)
  })

  it("an empty body is no body whatever Content-Type it claims: multipart without a boundary is answered as no body is, not a 500", async () => {
    const user = await signUp(server.url)
    const post = async (headers: Record<string, string>) => {
      const response = await fetch(`${server.url}/v1/api-keys`, {
        method: "POST",
        headers: { authorization: `Bearer ${user.accessToken}`, "content-length": "0", ...headers }
      })
      return { status: response.status, body: await response.json() }
    }
    const none = await post({})
    expect(none).toMatchObject({ status: 400, body: { success: false, error: { code: "VALIDATION_ERROR" } } })
    for (const type of ["multipart/form-data", "multipart/form-data; boundary=x", "application/x-www-form-urlencoded", "text/plain"]) {
      expect(await post({ "content-type": type }), type).toEqual(none)
    }
    expect(await keyCount(user.accessToken)).toBe(0)
  })

  it("a body without Content-Type is 415, and so are text and a JSON type in another charset", async () => {
    const user = await signUp(server.url)
    const post = (body: string | Uint8Array, headers: Record<string, string> = {}) =>
      rawRequest(`${server.url}/v1/api-keys`, { method: "POST", headers: { authorization: `Bearer ${user.accessToken}`, ...headers }, body })
    const raw = new TextEncoder().encode(JSON.stringify({ name: "untyped" })) // fetch adds no type for bytes
    unsupported(await post(raw), null)
    unsupported(await post('{"name":"text"}'), "text/plain;charset=UTF-8")
    unsupported(await post('{"name":"latin"}', { "content-type": "application/json; charset=iso-8859-1" }), "application/json; charset=iso-8859-1")
    expect(await keyCount(user.accessToken)).toBe(0)
  })

  it("accepts application/json with a UTF-8 charset and any +json type", async () => {
    const user = await signUp(server.url)
    for (const type of ["application/json; charset=utf-8", "Application/JSON;charset=\"UTF-8\"", "application/vnd.mailroom+json"]) {
      const reply = await withToken(server.url, user).POST("/v1/api-keys", { body: { name: type }, headers: { "content-type": type } })
      expect(reply.response.status, `${type}: ${textOf(reply)}`).toBe(201)
      expect(reply.data?.data.name).toBe(type)
    }
  })

  it("the OpenAPI document declares the 415 answer", async () => {
    // The document itself is untyped JSON (the typed client is generated from it).
    const document = await (await fetch(`${server.url}/v1/openapi.json`)).json() as {
      paths: Record<string, Record<string, { responses: Record<string, unknown> }>>
      components: { schemas: Record<string, unknown> }
    }
    expect(document.paths["/v1/api-keys"]?.["post"]?.responses["415"]).toBeDefined()
    expect(document.components.schemas["UnsupportedMediaType"]).toBeDefined()
  })

  it("a request without a body needs no Content-Type, even when it is sent as an empty chunked body", async () => {
    const user = await signUp(server.url)
    const reply = await withToken(server.url, user).POST("/api/auth/logout")
    expect(reply.response.status, textOf(reply)).toBe(200)

    const again = await signUp(server.url)
    const chunked = await rawExchange(
      server.port,
      `POST /api/auth/logout HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${again.accessToken}\r\n` +
        `Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n0\r\n\r\n`
    )
    expect(chunked).toMatch(/^HTTP\/1\.1 200 /)
  })
})

describe("the local payment pages", () => {
  it("still read their own forms, and a portal form in any other shape is a 400 page, not a 500", async () => {
    const user = await withApiKey(server.url)
    const portal = await withKey(server.url, user).POST("/v1/billing/portal", { body: { returnUrl: "https://example.com/back" } })
    expect(portal.response.status).toBe(200)
    const page = `${server.url}${new URL(portal.data!.data.url).pathname}`
    for (const headers of [{ "content-type": "multipart/form-data" }, { "content-type": "application/json" }, {}]) {
      const response = await fetch(page, { method: "POST", headers, body: "action=cancel&x=\u0000", redirect: "manual" })
      expect(response.status, JSON.stringify(headers)).toBeLessThan(500)
    }
    const form = await fetch(page, { method: "POST", headers: { "content-type": "multipart/form-data" }, body: "{}", redirect: "manual" })
    expect(form.status).toBe(400)
    expect(form.headers.get("content-type")).toMatch(/text\/html/)
  })
})

describe("requests node's HTTP parser refuses", () => {
  it.each([
    ["a Content-Length that is not a number", "Content-Length: abc"],
    ["two different Content-Lengths", "Content-Length: 2\r\nContent-Length: 3"],
    ["a negative Content-Length", "Content-Length: -1"]
  ])("%s: 400 with the envelope", async (_, header) => {
    const answer = await rawExchange(server.port, `POST /api/auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n${header}\r\n\r\n{}`)
    const [head, body] = answer.split("\r\n\r\n")
    expect(head).toMatch(/^HTTP\/1\.1 400 /)
    expect(head).toMatch(/content-type: application\/json/i)
    expect(JSON.parse(body!)).toEqual({ success: false, error: { code: "BAD_REQUEST", message: "Malformed HTTP request" } })
    expect((await anonymous(server.url).GET("/healthz")).response.status).toBe(200)
  })

  it("a declared Content-Length far over the limit: 413 before anything is read", async () => {
    const answer = await rawExchange(server.port, `POST /api/auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 99999999999999\r\nConnection: close\r\n\r\n{}`)
    expect(answer).toMatch(/^HTTP\/1\.1 413 /)
    expect(answer).toContain('"code":"PAYLOAD_TOO_LARGE"')
  })
})
