/**
 * Input that used to answer 500 (issue 14, "no 500s from input") and what it answers now: the rules of
 * src/http/input-rules.ts, route by route as a user meets them.
 */
import * as net from "node:net"
import { describe, expect, it } from "vitest"
import { type Client, client, type Reply, signUp, withApiKey } from "../support/http.ts"
import { type Server, useSuiteServer } from "../support/server.ts"

let server: Server
let api: Client

useSuiteServer((suite) => {
  server = suite.server
  api = client(suite.url)
})

const JSON_TYPE = { "content-type": "application/json" }
const NO_NUL = "must not contain NUL characters (\\u0000)"
const TOO_DEEP = "must not nest arrays or objects more than 64 levels deep"

const nested = (depth: number, inner = "") => "[".repeat(depth) + inner + "]".repeat(depth)

const expectNoInternals = (reply: Reply) => {
  expect(reply.text).not.toMatch(/RangeError|SqlError|stack|node_modules|\bat .*\.(ts|js):\d+/)
}

const expectValidation = (reply: Reply, details: Record<string, unknown>) => {
  expect(reply.status, reply.text).toBe(400)
  expect(reply.body).toEqual({ success: false, error: { code: "VALIDATION_ERROR", message: expect.any(String), details } })
  expectNoInternals(reply)
}

const keyCount = async (bearer: string) => (await api.get("/v1/api-keys", { bearer })).body.meta.total as number

describe("deeply nested JSON", () => {
  it.each([10_000, 100_000])("%i levels of arrays is 400 VALIDATION_ERROR on the open login route", async (depth) => {
    const reply = await api.post("/api/auth/login", { raw: nested(depth), headers: JSON_TYPE })
    expectValidation(reply, { body: TOO_DEEP })
  })

  it("is refused inside a field and on an authenticated route, and nothing is created", async () => {
    const user = await signUp(api)
    for (const raw of [`{"name": ${nested(10_000, '"x"')}}`, `{"name": "ok", "a": ${"{\"b\":".repeat(5_000)}1${"}".repeat(5_000)}}`]) {
      const reply = await api.post("/v1/api-keys", { bearer: user.accessToken, raw, headers: JSON_TYPE })
      expectValidation(reply, { body: TOO_DEEP })
    }
    expect(await keyCount(user.accessToken)).toBe(0)
  })

  it("64 levels are still read and decoded: the answer is about the field, not the depth", async () => {
    const reply = await api.post("/api/auth/login", { raw: `{"email": ${nested(63, "1")}, "password": "x"}`, headers: JSON_TYPE })
    expect(reply.status).toBe(400)
    expect(reply.body.error.code).toBe("VALIDATION_ERROR")
    expect(Object.keys(reply.body.error.details)).toEqual(["email"])
  })

  it("brackets inside strings do not count as nesting", async () => {
    const user = await signUp(api)
    const name = "[".repeat(80) + "{".repeat(10)
    const reply = await api.post("/v1/api-keys", { bearer: user.accessToken, body: { name } })
    expect(reply.status, reply.text).toBe(201)
    expect(reply.body.data.name).toBe(name)
  })
})

describe("NUL characters", () => {
  it("in an API key name: 400 VALIDATION_ERROR naming the field; no key is made", async () => {
    const user = await signUp(api)
    const reply = await api.post("/v1/api-keys", { bearer: user.accessToken, body: { name: "bad\u0000name" } })
    expectValidation(reply, { name: NO_NUL })
    expect(await keyCount(user.accessToken)).toBe(0)
  })

  it("in the login email, before any account lookup", async () => {
    const reply = await api.post("/api/auth/login", { body: { email: "a\u0000@example.com", password: "whatever1" } })
    expectValidation(reply, { email: NO_NUL })
  })

  it("in a search query, in a nested value, and in a key", async () => {
    const user = await withApiKey(api)
    expectValidation(await api.post("/v1/search", { apiKey: user.apiKey, body: { query: "invoice\u0000" } }), { query: NO_NUL })
    expectValidation(
      await api.post("/v1/api/webhooks", { apiKey: user.apiKey, body: { url: "https://example.com/hook", events: ["email.received", "x\u0000"] } }),
      { "events.1": NO_NUL }
    )
    expectValidation(await api.post("/v1/search", { apiKey: user.apiKey, body: { query: "ok", "mo\u0000de": "text" } }), {
      "mo\\u0000de": NO_NUL
    })
  })

  it("in a dashboard body: under details.field_errors, as the dashboard tells field errors", async () => {
    const user = await signUp(api)
    const reply = await api.post("/api/mailboxes", { bearer: user.accessToken, body: { local_part: "agent\u0000x", domain: "agents.localhost" } })
    expectValidation(reply, { field_errors: { local_part: NO_NUL } })
  })

  it("in a path id: 400 VALIDATION_ERROR naming the path parameter", async () => {
    const user = await withApiKey(api)
    expectValidation(await api.get("/v1/api/emails/%00", { apiKey: user.apiKey }), { emailId: NO_NUL })
    expectValidation(await api.get("/v1/api/emails/eml_1/attachments/a%00b", { apiKey: user.apiKey }), { attachmentId: NO_NUL })
    expectValidation(await api.delete("/v1/api-keys/%00", { apiKey: user.apiKey }), { id: NO_NUL })
    // An id without NUL that names nothing is still 404, as before.
    const unknown = await api.get("/v1/api/emails/eml_000000000000000000000000", { apiKey: user.apiKey })
    expect(unknown.status).toBe(404)
    expect(unknown.body.error.code).toBe("NOT_FOUND")
  })

  it("in a query parameter", async () => {
    const user = await withApiKey(api)
    expectValidation(await api.get("/v1/search/suggestions?q=in%00v", { apiKey: user.apiKey }), { q: NO_NUL })
    expectValidation(await api.get("/v1/api/mailboxes/check-email?local_part=a%00&domain=agents.localhost", { apiKey: user.apiKey }), {
      local_part: NO_NUL
    })
  })
})

describe("bodies that are not JSON", () => {
  const unsupported = (reply: Reply, received: string | null) => {
    expect(reply.status, reply.text).toBe(415)
    expect(reply.body).toEqual({
      success: false,
      error: { code: "UNSUPPORTED_MEDIA_TYPE", message: expect.any(String), details: { accepted: "application/json", charset: "utf-8", received } }
    })
  }

  it("a form is 415 on register and nobody is registered", async () => {
    const email = `form-${Date.now()}@example.com`
    const form = new URLSearchParams({ email, password: "correct horse battery", name: "Form" }).toString()
    unsupported(
      await api.post("/api/auth/register", { raw: form, headers: { "content-type": "application/x-www-form-urlencoded" } }),
      "application/x-www-form-urlencoded"
    )
    const registered = await api.post("/api/auth/register", { body: { email, password: "correct horse battery", name: "Form" } })
    expect(registered.status).toBe(201)
  })

  it("multipart/form-data is 415 on a JSON route and no key is made", async () => {
    const user = await signUp(api)
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

  it("a body without Content-Type is 415, and so are text and a JSON type in another charset", async () => {
    const user = await signUp(api)
    const raw = new TextEncoder().encode(JSON.stringify({ name: "untyped" })) // fetch adds no type for bytes
    unsupported(await api.post("/v1/api-keys", { bearer: user.accessToken, raw }), null)
    unsupported(await api.post("/v1/api-keys", { bearer: user.accessToken, raw: '{"name":"text"}' }), "text/plain;charset=UTF-8")
    unsupported(
      await api.post("/v1/api-keys", { bearer: user.accessToken, raw: '{"name":"latin"}', headers: { "content-type": "application/json; charset=iso-8859-1" } }),
      "application/json; charset=iso-8859-1"
    )
    expect(await keyCount(user.accessToken)).toBe(0)
  })

  it("accepts application/json with a UTF-8 charset and any +json type", async () => {
    const user = await signUp(api)
    for (const type of ["application/json; charset=utf-8", "Application/JSON;charset=\"UTF-8\"", "application/vnd.mailroom+json"]) {
      const reply = await api.post("/v1/api-keys", { bearer: user.accessToken, raw: JSON.stringify({ name: type }), headers: { "content-type": type } })
      expect(reply.status, `${type}: ${reply.text}`).toBe(201)
      expect(reply.body.data.name).toBe(type)
    }
  })

  it("the OpenAPI document declares the 415 answer", async () => {
    const document = (await api.get("/v1/openapi.json")).body
    expect(document.paths["/v1/api-keys"].post.responses["415"]).toBeDefined()
    expect(document.components.schemas.UnsupportedMediaType).toBeDefined()
  })

  it("a request without a body needs no Content-Type, even when it is sent as an empty chunked body", async () => {
    const user = await signUp(api)
    const reply = await api.post("/api/auth/logout", { bearer: user.accessToken })
    expect(reply.status, reply.text).toBe(200)

    const again = await signUp(api)
    const chunked = await new Promise<string>((resolve, reject) => {
      const socket = net.connect(server.port, "127.0.0.1", () =>
        socket.write(
          `POST /api/auth/logout HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${again.accessToken}\r\n` +
            `Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n0\r\n\r\n`
        ))
      let received = ""
      socket.on("data", (chunk) => (received += chunk))
      socket.on("end", () => resolve(received))
      socket.on("error", reject)
    })
    expect(chunked).toMatch(/^HTTP\/1\.1 200 /)
  })
})

describe("the local payment pages", () => {
  it("still read their own forms, and a portal form in any other shape is a 400 page, not a 500", async () => {
    const user = await withApiKey(api)
    const portal = await api.post("/v1/billing/portal", { apiKey: user.apiKey, body: { returnUrl: "https://example.com/back" } })
    expect(portal.status).toBe(200)
    const page = `${server.url}${new URL(portal.body.data.url).pathname}`
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
  const rawRequest = (head: string) =>
    new Promise<string>((resolve, reject) => {
      const socket = net.connect(server.port, "127.0.0.1", () => socket.write(head))
      let received = ""
      socket.on("data", (chunk) => (received += chunk))
      socket.on("end", () => resolve(received))
      socket.on("error", reject)
    })

  it.each([
    ["a Content-Length that is not a number", "Content-Length: abc"],
    ["two different Content-Lengths", "Content-Length: 2\r\nContent-Length: 3"],
    ["a negative Content-Length", "Content-Length: -1"]
  ])("%s: 400 with the envelope", async (_, header) => {
    const answer = await rawRequest(`POST /api/auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n${header}\r\n\r\n{}`)
    const [head, body] = answer.split("\r\n\r\n")
    expect(head).toMatch(/^HTTP\/1\.1 400 /)
    expect(head).toMatch(/content-type: application\/json/i)
    expect(JSON.parse(body!)).toEqual({ success: false, error: { code: "BAD_REQUEST", message: "Malformed HTTP request" } })
    expect((await api.get("/healthz")).status).toBe(200)
  })

  it("a declared Content-Length far over the limit: 413 before anything is read", async () => {
    const answer = await rawRequest(`POST /api/auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 99999999999999\r\nConnection: close\r\n\r\n{}`)
    expect(answer).toMatch(/^HTTP\/1\.1 413 /)
    expect(answer).toContain('"code":"PAYLOAD_TOO_LARGE"')
  })
})
