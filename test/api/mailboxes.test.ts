/**
 * SPEC "Mailboxes" and DESIGN §4 (quota, deleted mailboxes), over real HTTP: the /v1/api routes
 * with API keys and the /api dashboard routes with the session cookie.
 */
import { describe, expect, it } from "vitest"
import { createClient } from "../../packages/client/src/fetch-client.ts"
import { type Server, useSuiteServer } from "../support/server.ts"
import { type Client, client, isoMillis, type RequestOptions, signUp, withApiKey } from "../support/http.ts"

const DOMAIN = "agents.localhost"
const OTHER_SHARED = "bots.localhost"

let server: Server
let api: Client

useSuiteServer((suite) => {
  server = suite.server
  api = client(suite.url)
}, { SHARED_DOMAINS: `${DOMAIN},${OTHER_SHARED}`, DISALLOWED_EMAIL_NAME: "admin,postmaster,Custom-Bot" })

type User = Awaited<ReturnType<typeof withApiKey>>

let counter = 0
/** A local part no other test uses. */
const fresh = (prefix = "agent") => `${prefix}${Date.now().toString(36)}${counter++}${Math.random().toString(36).slice(2, 6)}`

const key = (user: User): RequestOptions => ({ apiKey: user.apiKey })
/** The dashboard's credential: the session cookie, sent from our own origin. */
const session = (user: { cookie: string }, extra: RequestOptions = {}): RequestOptions => ({
  ...extra,
  headers: { cookie: user.cookie.split(";")[0]!, origin: `http://localhost:${server.port}`, ...extra.headers }
})

/** A just-created mailbox as SPEC shows it: exactly these fields. */
const newMailbox = (local: string, userId: string) => ({
  mailbox_id: expect.stringMatching(/^mbx_/),
  email_address: `${local}@${DOMAIN}`,
  domain: DOMAIN,
  status: "active",
  namespace: userId,
  created_at: expect.stringMatching(isoMillis)
})

const create = (user: User, body: unknown) => api.post("/v1/api/mailboxes", { ...key(user), body })

const createOk = async (user: User, local = fresh(), domain = DOMAIN) => {
  const reply = await create(user, { local_part: local, domain })
  expect(reply.status).toBe(201)
  return reply.body.mailbox as { mailbox_id: string; email_address: string; domain: string }
}

const failure = (code: string, details?: unknown) => ({
  success: false,
  error: { code, message: expect.any(String), ...(details !== undefined ? { details } : {}) }
})

describe("POST /v1/api/mailboxes", () => {
  it("creates a mailbox: 201 { success, mailbox } with exactly SPEC's fields", async () => {
    const user = await withApiKey(api)
    const local = fresh("Agent.")
    const reply = await create(user, { local_part: local, domain: DOMAIN })
    expect(reply.status).toBe(201)
    expect(reply.body).toEqual({ success: true, mailbox: newMailbox(local, user.userId) })
  })

  it("accepts Authorization: Bearer <API key>, email_address as a bare local part or a full address, and any case of the domain", async () => {
    const user = await withApiKey(api)
    const bare = fresh()
    const viaBearer = await api.post("/v1/api/mailboxes", { bearer: user.apiKey, body: { email_address: bare, domain: DOMAIN } })
    expect(viaBearer.status).toBe(201)
    expect(viaBearer.body.mailbox.email_address).toBe(`${bare}@${DOMAIN}`)
    const full = fresh()
    const viaFull = await create(user, { email_address: `${full}@${OTHER_SHARED.toUpperCase()}`, domain: OTHER_SHARED.toUpperCase() })
    expect(viaFull.status).toBe(201)
    expect(viaFull.body.mailbox).toMatchObject({ email_address: `${full}@${OTHER_SHARED}`, domain: OTHER_SHARED })
  })

  it("ignores privileged fields in the body (namespace is always the caller)", async () => {
    const user = await withApiKey(api)
    const reply = await create(user, { local_part: fresh(), domain: DOMAIN, namespace: "usr_someone_else", status: "deleted" })
    expect(reply.status).toBe(201)
    expect(reply.body.mailbox).toMatchObject({ namespace: user.userId, status: "active" })
  })

  it.each<[string, unknown, number, string, unknown]>([
    ["no domain", { local_part: "abcdef" }, 400, "MISSING_FIELDS", expect.anything()],
    ["a blank domain", { local_part: "abcdef", domain: "  " }, 400, "MISSING_FIELDS", expect.anything()],
    ["neither local_part nor email_address", { domain: DOMAIN }, 400, "MISSING_FIELDS", expect.anything()],
    ["an empty body object", {}, 400, "MISSING_FIELDS", expect.anything()],
    ["email_address without a local part", { email_address: `@${DOMAIN}`, domain: DOMAIN }, 400, "BAD_REQUEST", expect.anything()],
    ["local_part and email_address naming different local parts", { local_part: "abcdef", email_address: `ghijkl@${DOMAIN}`, domain: DOMAIN }, 400, "BAD_REQUEST", {
      local_part: "abcdef",
      email_address: `ghijkl@${DOMAIN}`
    }],
    ["a local_part that is not a string", { local_part: 5, domain: DOMAIN }, 400, "BAD_REQUEST", { field_errors: { local_part: "must be a string" } }],
    ["a body that is an array", [1, 2], 400, "BAD_REQUEST", { field_errors: { body: "must be a JSON object" } }],
    ["a body that is a string", "hello", 400, "BAD_REQUEST", { field_errors: { body: "must be a JSON object" } }],
    ["a 3-character local part", { local_part: "abc", domain: DOMAIN }, 422, "LOCAL_TOO_SHORT", { min_length: 5, actual_length: 3 }],
    ["a local part short after trimming", { local_part: "  ab  ", domain: DOMAIN }, 422, "LOCAL_TOO_SHORT", { min_length: 5, actual_length: 2 }],
    ["a disallowed character", { local_part: "ab!cdef", domain: DOMAIN }, 422, "INVALID_LOCAL", { local_part: "ab!cdef" }],
    ["a space inside", { local_part: "ab cdef", domain: DOMAIN }, 422, "INVALID_LOCAL", { local_part: "ab cdef" }],
    ["two dots in a row", { local_part: "ab..cdef", domain: DOMAIN }, 422, "INVALID_LOCAL", { local_part: "ab..cdef" }],
    ["more than 64 characters", { local_part: "a".repeat(65), domain: DOMAIN }, 422, "INVALID_LOCAL", { local_part: "a".repeat(65) }],
    ["a leading dot", { local_part: ".abcdef", domain: DOMAIN }, 422, "INVALID_LOCAL", { local_part: ".abcdef" }],
    ["a trailing hyphen", { local_part: "abcdef-", domain: DOMAIN }, 422, "INVALID_LOCAL", { local_part: "abcdef-" }],
    ["a leading hyphen in email_address", { email_address: `-abcdef@${DOMAIN}`, domain: DOMAIN }, 422, "INVALID_LOCAL", { local_part: "-abcdef" }],
    ["a reserved name in another case", { local_part: "ADMIN", domain: DOMAIN }, 422, "DISALLOWED_LOCAL", { local_part: "ADMIN" }],
    ["an operator-reserved name on another shared domain", { local_part: "custom-bot", domain: OTHER_SHARED }, 422, "DISALLOWED_LOCAL", {
      local_part: "custom-bot"
    }],
    ["a host in email_address other than domain", { email_address: `abcdef@other.example`, domain: DOMAIN }, 422, "DOMAIN_MISMATCH", {
      domain_expected: DOMAIN,
      domain_in_request: "other.example"
    }],
    ["a domain outside the shared pool", { local_part: "abcdef", domain: "example.com" }, 422, "DOMAIN_NOT_ALLOWED", {
      domain: "example.com",
      plan: "free"
    }]
  ])("refuses %s: %i %s", async (_case, body, status, code, details) => {
    const user = await withApiKey(api)
    const reply = await create(user, body)
    expect(reply.status).toBe(status)
    expect(reply.body).toEqual(failure(code, details))
    expect((await api.get("/v1/api/mailboxes", key(user))).body.mailboxes).toEqual([])
  })

  it("refuses a body that is not JSON, or no body, with 400 BAD_REQUEST", async () => {
    const user = await withApiKey(api)
    const broken = await api.post("/v1/api/mailboxes", { ...key(user), raw: "{ not json", headers: { "content-type": "application/json" } })
    expect(broken.status).toBe(400)
    expect(broken.body).toEqual(failure("BAD_REQUEST"))
    const empty = await api.post("/v1/api/mailboxes", key(user))
    expect(empty.status).toBe(400)
    expect(empty.body.error.code).toBe("BAD_REQUEST")
  })

  it("refuses a missing or invalid credential with 401", async () => {
    expect((await api.post("/v1/api/mailboxes", { body: { local_part: fresh(), domain: DOMAIN } })).status).toBe(401)
    const reply = await api.get("/v1/api/mailboxes", { apiKey: "mr_nope" })
    expect(reply.status).toBe(401)
    expect(reply.body.error.code).toBe("UNAUTHORIZED")
  })
})

describe("EMAIL_TAKEN", () => {
  it("an address is unique across users, case-insensitively: 409 with details.email_address", async () => {
    const alice = await withApiKey(api)
    const bob = await withApiKey(api)
    const local = fresh("Shared")
    await createOk(alice, local)
    const reply = await create(bob, { local_part: local.toLowerCase(), domain: DOMAIN })
    expect(reply.status).toBe(409)
    expect(reply.body).toEqual(failure("EMAIL_TAKEN", { email_address: `${local.toLowerCase()}@${DOMAIN}` }))
    const again = await create(alice, { email_address: `${local.toUpperCase()}@${DOMAIN}`, domain: DOMAIN })
    expect(again.status).toBe(409)
    expect(again.body.error.code).toBe("EMAIL_TAKEN")
  })

  it("of concurrent creates of one address exactly one wins; the others get 409 EMAIL_TAKEN", async () => {
    const users = await Promise.all([1, 2, 3, 4].map(() => withApiKey(api)))
    const local = fresh("race")
    const replies = await Promise.all(users.map((user, i) => create(user, { local_part: i % 2 === 0 ? local : local.toUpperCase(), domain: DOMAIN })))
    expect(replies.map((reply) => reply.status).sort()).toEqual([201, 409, 409, 409])
    for (const reply of replies.filter((r) => r.status === 409)) expect(reply.body.error.code).toBe("EMAIL_TAKEN")
    const listed = await Promise.all(users.map((user) => api.get("/v1/api/mailboxes", key(user))))
    expect(listed.flatMap((reply) => reply.body.mailboxes)).toHaveLength(1)
  })
})

describe("MAILBOX_QUOTA", () => {
  it("a free account has 3 mailboxes: the 4th gets 403 {count, limit, plan}; deleting one frees a slot", async () => {
    const user = await withApiKey(api)
    const made = []
    for (let i = 0; i < 3; i++) made.push(await createOk(user))
    const fourth = await create(user, { local_part: fresh(), domain: DOMAIN })
    expect(fourth.status).toBe(403)
    expect(fourth.body).toEqual(failure("MAILBOX_QUOTA", { count: 3, limit: 3, plan: "free" }))
    const deleted = await api.delete(`/v1/api/mailboxes/${made[0]!.mailbox_id}`, {
      ...key(user),
      body: { confirm_email_address: made[0]!.email_address }
    })
    expect(deleted.status).toBe(200)
    await createOk(user)
  })
})

describe("GET /v1/api/mailboxes", () => {
  it("lists the caller's active mailboxes, newest first, and nobody else's", async () => {
    const user = await withApiKey(api)
    const other = await withApiKey(api)
    const first = await createOk(user)
    const second = await createOk(user, fresh(), OTHER_SHARED)
    await createOk(other)
    const reply = await api.get("/v1/api/mailboxes", key(user))
    expect(reply.status).toBe(200)
    expect(reply.body).toEqual({
      success: true,
      mailboxes: [
        { ...second, status: "active", namespace: user.userId, created_at: expect.stringMatching(isoMillis) },
        { ...first, status: "active", namespace: user.userId, created_at: expect.stringMatching(isoMillis) }
      ],
      meta: { total: 2, limit: 20, offset: 0, hasMore: false }
    })
  })

  it("pages with limit and offset (meta total, limit, offset, hasMore) and sorts by createdAt", async () => {
    const user = await withApiKey(api)
    const mailroom = createClient({ baseUrl: server.url, apiKey: user.apiKey })
    const oldest = await createOk(user)
    const middle = await createOk(user)
    const newest = await createOk(user)
    const ids = async (query: { limit?: string; offset?: string; sort?: string }) => {
      const { data } = await mailroom.GET("/v1/api/mailboxes", { params: { query } })
      return { ids: data?.mailboxes.map((m) => m.mailbox_id), meta: data?.meta }
    }
    expect(await ids({ limit: "2" })).toEqual({
      ids: [newest.mailbox_id, middle.mailbox_id],
      meta: { total: 3, limit: 2, offset: 0, hasMore: true }
    })
    expect(await ids({ limit: "2", offset: "2" })).toEqual({ ids: [oldest.mailbox_id], meta: { total: 3, limit: 2, offset: 2, hasMore: false } })
    expect(await ids({ offset: "3" })).toEqual({ ids: [], meta: { total: 3, limit: 20, offset: 3, hasMore: false } })
    expect(await ids({ limit: "100", sort: "createdAt:asc" })).toEqual({
      ids: [oldest.mailbox_id, middle.mailbox_id, newest.mailbox_id],
      meta: { total: 3, limit: 100, offset: 0, hasMore: false }
    })
    expect((await ids({ limit: "1", offset: "1", sort: "createdAt:desc" })).ids).toEqual([middle.mailbox_id])
  })

  it.each([
    ["limit", "0"],
    ["limit", "101"],
    ["limit", "2.5"],
    ["limit", "abc"],
    ["offset", "-1"],
    ["sort", "email_address:asc"]
  ])("refuses %s=%s with 400 VALIDATION_ERROR naming it, on both surfaces", async (name, value) => {
    const user = await withApiKey(api)
    for (const [path, mailroom] of [
      ["/v1/api/mailboxes", createClient({ baseUrl: server.url, apiKey: user.apiKey })],
      ["/api/mailboxes", createClient({ baseUrl: server.url, accessToken: user.accessToken })]
    ] as const) {
      const { response, error } = await mailroom.GET(path, { params: { query: { [name]: value } } })
      expect(response.status).toBe(400)
      expect(error?.error.code).toBe("VALIDATION_ERROR")
      expect(Object.keys(error?.error.details ?? {})).toEqual([name])
    }
  })

  it("reports every bad list parameter at once", async () => {
    const user = await withApiKey(api)
    const mailroom = createClient({ baseUrl: server.url, apiKey: user.apiKey })
    const { response, error } = await mailroom.GET("/v1/api/mailboxes", { params: { query: { limit: "500", offset: "-5" } } })
    expect(response.status).toBe(400)
    expect(error?.error.code).toBe("VALIDATION_ERROR")
    expect(Object.keys(error?.error.details ?? {}).sort()).toEqual(["limit", "offset"])
  })
})

describe("GET /v1/api/mailboxes/check-email", () => {
  const check = (user: User, query: Record<string, string>) =>
    api.get(`/v1/api/mailboxes/check-email?${new URLSearchParams(query)}`, key(user))

  it("answers valid with the address it would create, without creating it", async () => {
    const user = await withApiKey(api)
    const local = fresh("Check")
    const reply = await check(user, { local_part: local, domain: DOMAIN })
    expect(reply.status).toBe(200)
    expect(reply.body).toEqual({ success: true, valid: true, email_address: `${local}@${DOMAIN}` })
    const viaEmail = await check(user, { email_address: `${local}@${DOMAIN}`, domain: DOMAIN })
    expect(viaEmail.body).toEqual({ success: true, valid: true, email_address: `${local}@${DOMAIN}` })
    expect((await api.get("/v1/api/mailboxes", key(user))).body.mailboxes).toEqual([])
  })

  it.each<[string, Record<string, string>, string, unknown]>([
    ["too short", { local_part: "abc", domain: DOMAIN }, "LOCAL_TOO_SHORT", { min_length: 5, actual_length: 3 }],
    ["invalid", { local_part: "abc$def", domain: DOMAIN }, "INVALID_LOCAL", { local_part: "abc$def" }],
    ["reserved", { local_part: "Postmaster", domain: DOMAIN }, "DISALLOWED_LOCAL", { local_part: "Postmaster" }],
    ["mismatched", { email_address: "abcdef@elsewhere.example", domain: DOMAIN }, "DOMAIN_MISMATCH", {
      domain_expected: DOMAIN,
      domain_in_request: "elsewhere.example"
    }],
    ["not allowed", { local_part: "abcdef", domain: "example.org" }, "DOMAIN_NOT_ALLOWED", { domain: "example.org", plan: "free" }]
  ])("answers 200 valid: false for a %s address, with code, message and details", async (_case, query, code, details) => {
    const user = await withApiKey(api)
    const reply = await check(user, query)
    expect(reply.status).toBe(200)
    expect(reply.body).toEqual({ success: true, valid: false, code, message: expect.any(String), details })
  })

  it("answers EMAIL_TAKEN for an address in use; exclude_mailbox_id frees only the caller's own mailbox", async () => {
    const alice = await withApiKey(api)
    const bob = await withApiKey(api)
    const mailbox = await createOk(alice)
    const local = mailbox.email_address.split("@")[0]!
    const taken = await check(alice, { local_part: local, domain: DOMAIN })
    expect(taken.body).toEqual({
      success: true,
      valid: false,
      code: "EMAIL_TAKEN",
      message: expect.any(String),
      details: { email_address: mailbox.email_address }
    })
    const own = await check(alice, { local_part: local.toUpperCase(), domain: DOMAIN, exclude_mailbox_id: mailbox.mailbox_id })
    expect(own.body).toEqual({ success: true, valid: true, email_address: `${local.toUpperCase()}@${DOMAIN}` })
    const notTheirs = await check(bob, { local_part: local, domain: DOMAIN, exclude_mailbox_id: mailbox.mailbox_id })
    expect(notTheirs.body).toMatchObject({ success: true, valid: false, code: "EMAIL_TAKEN" })
  })

  it("refuses a missing domain (or a missing local part) with 400 MISSING_FIELDS", async () => {
    const user = await withApiKey(api)
    const noDomain = await check(user, { local_part: "abcdef" })
    expect(noDomain.status).toBe(400)
    expect(noDomain.body).toEqual(failure("MISSING_FIELDS", expect.anything()))
    const noLocal = await check(user, { domain: DOMAIN })
    expect(noLocal.status).toBe(400)
    expect(noLocal.body.error.code).toBe("MISSING_FIELDS")
    const noLocalPart = await check(user, { email_address: `@${DOMAIN}`, domain: DOMAIN })
    expect(noLocalPart.status).toBe(400)
    expect(noLocalPart.body.error.code).toBe("BAD_REQUEST")
  })
})

describe("PATCH /api/mailboxes/{mailboxId} (rename)", () => {
  it("changes the address and keeps mailbox_id; the old address becomes available", async () => {
    const alice = await withApiKey(api)
    const bob = await withApiKey(api)
    const mailbox = await createOk(alice)
    const next = fresh("renamed")
    const reply = await api.patch(`/api/mailboxes/${mailbox.mailbox_id}`, session(alice, { body: { local_part: next, domain: OTHER_SHARED } }))
    expect(reply.status).toBe(200)
    expect(reply.body).toEqual({
      success: true,
      data: {
        previous_email_address: mailbox.email_address,
        mailbox: { mailbox_id: mailbox.mailbox_id, email_address: `${next}@${OTHER_SHARED}`, domain: OTHER_SHARED, status: "active" }
      }
    })
    const listed = await api.get("/v1/api/mailboxes", key(alice))
    expect(listed.body.mailboxes.map((m: { mailbox_id: string; email_address: string }) => [m.mailbox_id, m.email_address])).toEqual([
      [mailbox.mailbox_id, `${next}@${OTHER_SHARED}`]
    ])
    const old = mailbox.email_address.split("@")[0]!
    const available = await api.get(`/v1/api/mailboxes/check-email?local_part=${old}&domain=${DOMAIN}`, key(bob))
    expect(available.body).toEqual({ success: true, valid: true, email_address: mailbox.email_address })
    await createOk(bob, old)
  })

  it("its own current address is not taken (a change of case), another's is 409; rules apply; other users get 404", async () => {
    const alice = await withApiKey(api)
    const bob = await withApiKey(api)
    const mine = await createOk(alice)
    const theirs = await createOk(bob)
    const local = mine.email_address.split("@")[0]!
    const recased = await api.patch(`/api/mailboxes/${mine.mailbox_id}`, session(alice, { body: { email_address: `${local.toUpperCase()}@${DOMAIN}`, domain: DOMAIN } }))
    expect(recased.status).toBe(200)
    expect(recased.body.data.mailbox.email_address).toBe(`${local.toUpperCase()}@${DOMAIN}`)
    const taken = await api.patch(`/api/mailboxes/${mine.mailbox_id}`, session(alice, { body: { email_address: theirs.email_address, domain: DOMAIN } }))
    expect(taken.status).toBe(409)
    expect(taken.body).toEqual(failure("EMAIL_TAKEN", { email_address: theirs.email_address }))
    const short = await api.patch(`/api/mailboxes/${mine.mailbox_id}`, session(alice, { body: { local_part: "abc", domain: DOMAIN } }))
    expect(short.status).toBe(422)
    expect(short.body).toEqual(failure("LOCAL_TOO_SHORT", { min_length: 5, actual_length: 3 }))
    const notMine = await api.patch(`/api/mailboxes/${theirs.mailbox_id}`, session(alice, { body: { local_part: fresh(), domain: DOMAIN } }))
    expect(notMine.status).toBe(404)
    expect(notMine.body.error.code).toBe("NOT_FOUND")
    const unknown = await api.patch(`/api/mailboxes/mbx_nope`, session(alice, { body: { local_part: fresh(), domain: DOMAIN } }))
    expect(unknown.status).toBe(404)
  })

  it("the dashboard reports a body of the wrong shape as 400 VALIDATION_ERROR with details.field_errors", async () => {
    const user = await withApiKey(api)
    const mailbox = await createOk(user)
    const wrong = await api.patch(`/api/mailboxes/${mailbox.mailbox_id}`, session(user, { body: { local_part: 5, domain: DOMAIN } }))
    expect(wrong.status).toBe(400)
    expect(wrong.body).toEqual(failure("VALIDATION_ERROR", { field_errors: { local_part: "must be a string" } }))
    const array = await api.patch(`/api/mailboxes/${mailbox.mailbox_id}`, session(user, { body: ["x"] }))
    expect(array.status).toBe(400)
    expect(array.body).toEqual(failure("VALIDATION_ERROR", { field_errors: { body: "must be a JSON object" } }))
  })

  it("is also served under /v1/api for API keys", async () => {
    const user = await withApiKey(api)
    const mailbox = await createOk(user)
    const next = fresh()
    const reply = await api.patch(`/v1/api/mailboxes/${mailbox.mailbox_id}`, { ...key(user), body: { local_part: next, domain: DOMAIN } })
    expect(reply.status).toBe(200)
    expect(reply.body.data).toEqual({
      previous_email_address: mailbox.email_address,
      mailbox: { mailbox_id: mailbox.mailbox_id, email_address: `${next}@${DOMAIN}`, domain: DOMAIN, status: "active" }
    })
    const wrong = await api.patch(`/v1/api/mailboxes/${mailbox.mailbox_id}`, { ...key(user), body: { local_part: 5, domain: DOMAIN } })
    expect(wrong.status).toBe(400)
    expect(wrong.body.error.code).toBe("BAD_REQUEST")
  })
})

describe("DELETE /v1/api/mailboxes/{mailboxId}", () => {
  it("refuses a missing body, a missing or wrong confirmation; then soft-deletes on the exact address", async () => {
    const user = await withApiKey(api)
    const mailbox = await createOk(user, fresh("Case"))
    const path = `/v1/api/mailboxes/${mailbox.mailbox_id}`
    const noBody = await api.delete(path, key(user))
    expect(noBody.status).toBe(400)
    expect(noBody.body).toEqual(failure("BAD_REQUEST"))
    const missing = await api.delete(path, { ...key(user), body: {} })
    expect(missing.status).toBe(400)
    expect(missing.body).toEqual(failure("VALIDATION_ERROR", { confirm_email_address: "is required" }))
    const wrong = await api.delete(path, { ...key(user), body: { confirm_email_address: mailbox.email_address.toLowerCase() } })
    expect(wrong.status).toBe(400)
    expect(wrong.body).toEqual(failure("VALIDATION_ERROR", { confirm_email_address: expect.any(String) }))
    expect((await api.get("/v1/api/mailboxes", key(user))).body.mailboxes).toHaveLength(1)

    const deleted = await api.delete(path, { ...key(user), body: { confirm_email_address: mailbox.email_address } })
    expect(deleted.status).toBe(200)
    expect(deleted.body).toEqual({ success: true, data: { deleted: true } })
    expect((await api.get("/v1/api/mailboxes", key(user))).body.mailboxes).toEqual([])
    const again = await api.delete(path, { ...key(user), body: { confirm_email_address: mailbox.email_address } })
    expect(again.status).toBe(404)
    expect(again.body.error.code).toBe("NOT_FOUND")
    const rename = await api.patch(path, { ...key(user), body: { local_part: fresh(), domain: DOMAIN } })
    expect(rename.status).toBe(404)
  })

  it("another user's mailbox is 404 and stays", async () => {
    const alice = await withApiKey(api)
    const mallory = await withApiKey(api)
    const mailbox = await createOk(alice)
    const reply = await api.delete(`/v1/api/mailboxes/${mailbox.mailbox_id}`, { ...key(mallory), body: { confirm_email_address: mailbox.email_address } })
    expect(reply.status).toBe(404)
    expect(reply.body.error.code).toBe("NOT_FOUND")
    expect((await api.get("/v1/api/mailboxes", key(alice))).body.mailboxes).toHaveLength(1)
  })

  it("a deleted address is free again for its owner at once, and still taken for anyone else", async () => {
    const owner = await withApiKey(api)
    const other = await withApiKey(api)
    const mailbox = await createOk(owner)
    const local = mailbox.email_address.split("@")[0]!
    expect(
      (await api.delete(`/v1/api/mailboxes/${mailbox.mailbox_id}`, { ...key(owner), body: { confirm_email_address: mailbox.email_address } })).status
    ).toBe(200)
    const byOther = await create(other, { local_part: local, domain: DOMAIN })
    expect(byOther.status).toBe(409)
    expect(byOther.body).toEqual(failure("EMAIL_TAKEN", { email_address: mailbox.email_address }))
    const checked = await api.get(`/v1/api/mailboxes/check-email?local_part=${local}&domain=${DOMAIN}`, key(other))
    expect(checked.body).toMatchObject({ valid: false, code: "EMAIL_TAKEN" })
    const again = await createOk(owner, local)
    expect(again.email_address).toBe(mailbox.email_address)
    expect(again.mailbox_id).not.toBe(mailbox.mailbox_id)
  })
})

describe("dashboard routes (/api/mailboxes, session cookie)", () => {
  it("create, list, check-email and delete with the cookie from our own origin", async () => {
    const user = await signUp(api)
    const local = fresh()
    const created = await api.post("/api/mailboxes", session(user, { body: { local_part: local, domain: DOMAIN } }))
    expect(created.status).toBe(201)
    expect(created.body).toEqual({ success: true, mailbox: newMailbox(local, user.userId) })
    const listed = await api.get("/api/mailboxes", session(user))
    expect(listed.status).toBe(200)
    expect(listed.body).toEqual({ success: true, mailboxes: [created.body.mailbox], meta: { total: 1, limit: 20, offset: 0, hasMore: false } })
    const checked = await api.get(`/api/mailboxes/check-email?local_part=${local}&domain=${DOMAIN}`, session(user))
    expect(checked.body).toMatchObject({ success: true, valid: false, code: "EMAIL_TAKEN" })
    const noDomain = await api.get(`/api/mailboxes/check-email?local_part=${local}`, session(user))
    expect(noDomain.status).toBe(400)
    expect(noDomain.body.success).toBe(false)

    const path = `/api/mailboxes/${created.body.mailbox.mailbox_id}`
    const wrong = await api.delete(path, session(user, { body: { confirm_email_address: "nope@agents.localhost" } }))
    expect(wrong.status).toBe(400)
    expect(wrong.body).toEqual(failure("VALIDATION_ERROR", { field_errors: { confirm_email_address: expect.any(String) } }))
    const deleted = await api.delete(path, session(user, { body: { confirm_email_address: `${local}@${DOMAIN}` } }))
    expect(deleted.body).toEqual({ success: true, data: { deleted: true } })
  })

  it("reports rule failures with SPEC's codes and a wrong body shape as VALIDATION_ERROR with details.field_errors", async () => {
    const user = await signUp(api)
    const short = await api.post("/api/mailboxes", session(user, { body: { local_part: "abcd", domain: DOMAIN } }))
    expect(short.status).toBe(422)
    expect(short.body).toEqual(failure("LOCAL_TOO_SHORT", { min_length: 5, actual_length: 4 }))
    const missing = await api.post("/api/mailboxes", session(user, { body: { local_part: "abcdef" } }))
    expect(missing.status).toBe(400)
    expect(missing.body.error.code).toBe("MISSING_FIELDS")
    const wrongType = await api.post("/api/mailboxes", session(user, { body: { local_part: 5, domain: DOMAIN } }))
    expect(wrongType.status).toBe(400)
    expect(wrongType.body).toEqual(failure("VALIDATION_ERROR", { field_errors: { local_part: "must be a string" } }))
    const notObject = await api.post("/api/mailboxes", session(user, { body: 42 }))
    expect(notObject.status).toBe(400)
    expect(notObject.body).toEqual(failure("VALIDATION_ERROR", { field_errors: { body: "must be a JSON object" } }))
    const notJson = await api.post("/api/mailboxes", session(user, { raw: "{", headers: { "content-type": "application/json" } }))
    expect(notJson.status).toBe(400)
    expect(notJson.body.error.code).toBe("BAD_REQUEST")
  })

  it("refuses a cookie write from another origin (403) and a request without a session (401)", async () => {
    const user = await signUp(api)
    const crossSite = await api.post("/api/mailboxes", {
      headers: { cookie: user.cookie.split(";")[0]!, origin: "https://evil.example" },
      body: { local_part: fresh(), domain: DOMAIN }
    })
    expect(crossSite.status).toBe(403)
    expect(crossSite.body.error.code).toBe("FORBIDDEN")
    expect((await api.get("/api/mailboxes")).status).toBe(401)
    expect((await api.get("/api/mailboxes", session(user))).body.mailboxes).toEqual([])
  })
})

describe("OpenAPI", () => {
  it("documents the mailbox routes", async () => {
    const reply = await api.get("/v1/openapi.json")
    for (const path of ["/v1/api/mailboxes", "/v1/api/mailboxes/check-email", "/v1/api/mailboxes/{mailboxId}", "/api/mailboxes", "/api/mailboxes/{mailboxId}"]) {
      expect(Object.keys(reply.body.paths)).toContain(path)
    }
    const create = reply.body.paths["/v1/api/mailboxes"].post
    expect(create.requestBody.content["application/json"].schema).toEqual({ $ref: "#/components/schemas/MailboxAddressInput" })
    expect(Object.keys(reply.body.components.schemas.MailboxAddressInput.properties).sort()).toEqual(["domain", "email_address", "local_part"])
    expect(Object.keys(create.responses)).toEqual(expect.arrayContaining(["201", "400", "401", "403", "409", "422"]))
    for (const path of ["/v1/api/mailboxes", "/api/mailboxes"]) {
      const list = reply.body.paths[path].get
      expect(list.parameters.map((p: { name: string; in: string }) => `${p.in}:${p.name}`)).toEqual(["query:limit", "query:offset", "query:sort"])
      expect(Object.keys(list.responses)).toEqual(expect.arrayContaining(["200", "400"]))
    }
  })
})
