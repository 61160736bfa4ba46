/**
 * SPEC "Mailboxes" and DESIGN §4 (quota, deleted mailboxes), over real HTTP through the typed client:
 * the /v1/api routes with API keys and the /api dashboard routes with the session cookie.
 */
import { describe, expect, it } from "vitest"
import type { components } from "../../packages/client/src/fetch-client.ts"
import { isoMillis, signUp, withApiKey } from "../support/accounts.ts"
import { refusedListParams } from "../support/list-params.ts"
import { type Server, useSuiteServer } from "../support/server.ts"
import { anonymous, offContract, rawJsonBody, sessionFrom, withKey, withToken } from "../support/typed-client.ts"

const DOMAIN = "agents.localhost"
const OTHER_SHARED = "bots.localhost"

let server: Server

useSuiteServer((suite) => {
  server = suite.server
}, { SHARED_DOMAINS: `${DOMAIN},${OTHER_SHARED}`, DISALLOWED_EMAIL_NAME: "admin,postmaster,Custom-Bot" })

type User = Awaited<ReturnType<typeof withApiKey>>
type AddressInput = components["schemas"]["MailboxAddressInput"]

let counter = 0
/** A local part no other test uses. */
const fresh = (prefix = "agent") => `${prefix}${Date.now().toString(36)}${counter++}${Math.random().toString(36).slice(2, 6)}`

/** The caller with this user's API key. */
const keyed = (user: User) => withKey(server.url, user)
/** The dashboard's credential: the session cookie, sent from our own origin (no key, no token). */
const session = (user: { cookie: string }) => sessionFrom(user, `http://localhost:${server.port}`)
const dashboard = () => anonymous(server.url)

/** A just-created mailbox as SPEC shows it: exactly these fields. */
const newMailbox = (local: string, userId: string) => ({
  mailbox_id: expect.stringMatching(/^mbx_/),
  email_address: `${local}@${DOMAIN}`,
  domain: DOMAIN,
  status: "active",
  namespace: userId,
  created_at: expect.stringMatching(isoMillis),
  display_name: null
})

const create = (user: User, body: AddressInput) => keyed(user).POST("/v1/api/mailboxes", { body })

const createOk = async (user: User, local = fresh(), domain = DOMAIN) => {
  const reply = await create(user, { local_part: local, domain })
  expect(reply.response.status).toBe(201)
  return reply.data!.mailbox
}

/** The caller's mailboxes (the first page). */
const listed = async (user: User) => (await keyed(user).GET("/v1/api/mailboxes")).data!.mailboxes

const failure = (code: string, details?: unknown) => ({
  success: false,
  error: { code, message: expect.any(String), ...(details !== undefined ? { details } : {}) }
})

describe("POST /v1/api/mailboxes", () => {
  it("creates a mailbox: 201 { success, mailbox } with exactly SPEC's fields", async () => {
    const user = await withApiKey(server.url)
    const local = fresh("Agent.")
    const reply = await create(user, { local_part: local, domain: DOMAIN })
    expect(reply.response.status).toBe(201)
    expect(reply.data).toEqual({ success: true, mailbox: newMailbox(local, user.userId) })
  })

  it("accepts Authorization: Bearer <API key>, email_address as a bare local part or a full address, and any case of the domain", async () => {
    const user = await withApiKey(server.url)
    const bare = fresh()
    const viaBearer = await withToken(server.url, { accessToken: user.apiKey }).POST("/v1/api/mailboxes", {
      body: { email_address: bare, domain: DOMAIN }
    })
    expect(viaBearer.response.status).toBe(201)
    expect(viaBearer.data?.mailbox.email_address).toBe(`${bare}@${DOMAIN}`)
    const full = fresh()
    const viaFull = await create(user, { email_address: `${full}@${OTHER_SHARED.toUpperCase()}`, domain: OTHER_SHARED.toUpperCase() })
    expect(viaFull.response.status).toBe(201)
    expect(viaFull.data?.mailbox).toMatchObject({ email_address: `${full}@${OTHER_SHARED}`, domain: OTHER_SHARED })
  })

  it("ignores privileged fields in the body (namespace is always the caller)", async () => {
    const user = await withApiKey(server.url)
    const reply = await create(user, offContract({ local_part: fresh(), domain: DOMAIN, namespace: "usr_someone_else", status: "deleted" }))
    expect(reply.response.status).toBe(201)
    expect(reply.data?.mailbox).toMatchObject({ namespace: user.userId, status: "active" })
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
    // Not in this server's DISALLOWED_EMAIL_NAME: reserved anyway, Mailroom's own mail comes from it.
    ["the system sender's name", { local_part: "No-Reply", domain: DOMAIN }, 422, "DISALLOWED_LOCAL", { local_part: "No-Reply" }],
    ["a host in email_address other than domain", { email_address: `abcdef@other.example`, domain: DOMAIN }, 422, "DOMAIN_MISMATCH", {
      domain_expected: DOMAIN,
      domain_in_request: "other.example"
    }],
    ["a domain outside the shared pool", { local_part: "abcdef", domain: "example.com" }, 422, "DOMAIN_NOT_ALLOWED", {
      domain: "example.com",
      plan: "free"
    }]
  ])("refuses %s: %i %s", async (_case, body, status, code, details) => {
    const user = await withApiKey(server.url)
    const reply = await create(user, offContract(body))
    expect(reply.response.status).toBe(status)
    expect(reply.error).toEqual(failure(code, details))
    expect(await listed(user)).toEqual([])
  })

  it("refuses a body that is not JSON, or no body, with 400 BAD_REQUEST", async () => {
    const user = await withApiKey(server.url)
    const broken = await keyed(user).POST("/v1/api/mailboxes", rawJsonBody("{ not json"))
    expect(broken.response.status).toBe(400)
    expect(broken.error).toEqual(failure("BAD_REQUEST"))
    const empty = await keyed(user).POST("/v1/api/mailboxes", { body: offContract(undefined) })
    expect(empty.response.status).toBe(400)
    expect(empty.error?.error.code).toBe("BAD_REQUEST")
  })

  it("refuses a missing or invalid credential with 401", async () => {
    expect((await anonymous(server.url).POST("/v1/api/mailboxes", { body: { local_part: fresh(), domain: DOMAIN } })).response.status).toBe(401)
    const reply = await withKey(server.url, { apiKey: "mr_nope" }).GET("/v1/api/mailboxes")
    expect(reply.response.status).toBe(401)
    expect(reply.error?.error.code).toBe("UNAUTHORIZED")
  })
})

describe("EMAIL_TAKEN", () => {
  it("an address is unique across users, case-insensitively: 409 with details.email_address", async () => {
    const alice = await withApiKey(server.url)
    const bob = await withApiKey(server.url)
    const local = fresh("Shared")
    await createOk(alice, local)
    const reply = await create(bob, { local_part: local.toLowerCase(), domain: DOMAIN })
    expect(reply.response.status).toBe(409)
    expect(reply.error).toEqual(failure("EMAIL_TAKEN", { email_address: `${local.toLowerCase()}@${DOMAIN}` }))
    const again = await create(alice, { email_address: `${local.toUpperCase()}@${DOMAIN}`, domain: DOMAIN })
    expect(again.response.status).toBe(409)
    expect(again.error?.error.code).toBe("EMAIL_TAKEN")
  })

  it("of concurrent creates of one address exactly one wins; the others get 409 EMAIL_TAKEN", async () => {
    const users = await Promise.all([1, 2, 3, 4].map(() => withApiKey(server.url)))
    const local = fresh("race")
    const replies = await Promise.all(users.map((user, i) => create(user, { local_part: i % 2 === 0 ? local : local.toUpperCase(), domain: DOMAIN })))
    expect(replies.map((reply) => reply.response.status).sort()).toEqual([201, 409, 409, 409])
    for (const reply of replies.filter((r) => r.response.status === 409)) expect(reply.error?.error.code).toBe("EMAIL_TAKEN")
    const lists = await Promise.all(users.map(listed))
    expect(lists.flat()).toHaveLength(1)
  })
})

describe("MAILBOX_QUOTA", () => {
  it("a free account has 3 mailboxes: the 4th gets 403 {count, limit, plan}; deleting one frees a slot", async () => {
    const user = await withApiKey(server.url)
    const made = []
    for (let i = 0; i < 3; i++) made.push(await createOk(user))
    const fourth = await create(user, { local_part: fresh(), domain: DOMAIN })
    expect(fourth.response.status).toBe(403)
    expect(fourth.error).toEqual(failure("MAILBOX_QUOTA", { count: 3, limit: 3, plan: "free" }))
    const deleted = await keyed(user).DELETE("/v1/api/mailboxes/{mailboxId}", {
      params: { path: { mailboxId: made[0]!.mailbox_id } },
      body: { confirm_email_address: made[0]!.email_address }
    })
    expect(deleted.response.status).toBe(200)
    await createOk(user)
  })
})

describe("GET /v1/api/mailboxes", () => {
  it("lists the caller's active mailboxes, newest first, and nobody else's", async () => {
    const user = await withApiKey(server.url)
    const other = await withApiKey(server.url)
    const first = await createOk(user)
    const second = await createOk(user, fresh(), OTHER_SHARED)
    await createOk(other)
    const reply = await keyed(user).GET("/v1/api/mailboxes")
    expect(reply.response.status).toBe(200)
    expect(reply.data).toEqual({
      success: true,
      mailboxes: [
        { ...second, status: "active", namespace: user.userId, created_at: expect.stringMatching(isoMillis), display_name: null },
        { ...first, status: "active", namespace: user.userId, created_at: expect.stringMatching(isoMillis), display_name: null }
      ],
      meta: { total: 2, limit: 20, offset: 0, hasMore: false }
    })
  })

  it("pages with limit and offset (meta total, limit, offset, hasMore) and sorts by created_at (or createdAt)", async () => {
    const user = await withApiKey(server.url)
    const mailroom = keyed(user)
    const oldest = await createOk(user)
    const middle = await createOk(user)
    const newest = await createOk(user)
    const ids = async (query: { limit?: number; offset?: number; sort?: string }) => {
      const { data } = await mailroom.GET("/v1/api/mailboxes", { params: { query } })
      return { ids: data?.mailboxes.map((m) => m.mailbox_id), meta: data?.meta }
    }
    expect(await ids({ limit: 2 })).toEqual({
      ids: [newest.mailbox_id, middle.mailbox_id],
      meta: { total: 3, limit: 2, offset: 0, hasMore: true }
    })
    expect(await ids({ limit: 2, offset: 2 })).toEqual({ ids: [oldest.mailbox_id], meta: { total: 3, limit: 2, offset: 2, hasMore: false } })
    expect(await ids({ offset: 3 })).toEqual({ ids: [], meta: { total: 3, limit: 20, offset: 3, hasMore: false } })
    expect(await ids({ limit: 100, sort: "created_at:asc" })).toEqual({
      ids: [oldest.mailbox_id, middle.mailbox_id, newest.mailbox_id],
      meta: { total: 3, limit: 100, offset: 0, hasMore: false }
    })
    expect((await ids({ limit: 1, offset: 1, sort: "created_at:desc" })).ids).toEqual([middle.mailbox_id])
    expect((await ids({ sort: "createdAt:asc" })).ids).toEqual([oldest.mailbox_id, middle.mailbox_id, newest.mailbox_id])
  })

  it.each(refusedListParams("email_address:asc", "createdAt:sideways"))("refuses %s=%s with 400 VALIDATION_ERROR naming it, on both surfaces", async (name, value) => {
    const user = await withApiKey(server.url)
    for (const [path, mailroom] of [
      ["/v1/api/mailboxes", keyed(user)],
      ["/api/mailboxes", withToken(server.url, user)]
    ] as const) {
      const { response, error } = await mailroom.GET(path, { params: { query: { [name]: value } } })
      expect(response.status).toBe(400)
      expect(error?.error.code).toBe("VALIDATION_ERROR")
      expect(Object.keys(error?.error.details ?? {})).toEqual([name])
      // Said in words: what the parameter must be, never the decoder's own phrase.
      expect(error?.error.details?.[name]).toMatch(/^must be (an integer from \d+ to \d+|<field>:<asc\|desc> with field one of .+)$/)
    }
  })

  it("reports every bad list parameter at once", async () => {
    const user = await withApiKey(server.url)
    const { response, error } = await keyed(user).GET("/v1/api/mailboxes", { params: { query: { limit: 500, offset: offContract("-5") } } })
    expect(response.status).toBe(400)
    expect(error?.error.code).toBe("VALIDATION_ERROR")
    expect(Object.keys(error?.error.details ?? {}).sort()).toEqual(["limit", "offset"])
  })
})

describe("GET /v1/api/mailboxes/{mailboxId}", () => {
  it("reads one of the caller's mailboxes as the list shows it; another's, a deleted or an unknown one is 404", async () => {
    const user = await withApiKey(server.url)
    const other = await withApiKey(server.url)
    const mailbox = await createOk(user)
    const reply = await keyed(user).GET("/v1/api/mailboxes/{mailboxId}", { params: { path: { mailboxId: mailbox.mailbox_id } } })
    expect(reply.response.status).toBe(200)
    expect(reply.data).toEqual({ success: true, mailbox: (await listed(user))[0] })

    const notFound = (mailboxId: string) => failure("NOT_FOUND", { mailbox_id: mailboxId })
    const theirs = await keyed(other).GET("/v1/api/mailboxes/{mailboxId}", { params: { path: { mailboxId: mailbox.mailbox_id } } })
    expect([theirs.response.status, theirs.error]).toEqual([404, notFound(mailbox.mailbox_id)])
    const unknown = await keyed(user).GET("/v1/api/mailboxes/{mailboxId}", { params: { path: { mailboxId: "mbx_nope" } } })
    expect([unknown.response.status, unknown.error]).toEqual([404, notFound("mbx_nope")])
    await keyed(user).DELETE("/v1/api/mailboxes/{mailboxId}", {
      params: { path: { mailboxId: mailbox.mailbox_id } },
      body: { confirm_email_address: mailbox.email_address }
    })
    const deleted = await keyed(user).GET("/v1/api/mailboxes/{mailboxId}", { params: { path: { mailboxId: mailbox.mailbox_id } } })
    expect([deleted.response.status, deleted.error]).toEqual([404, notFound(mailbox.mailbox_id)])
  })
})

describe("GET /v1/api/mailboxes/check-email", () => {
  const check = (user: User, query: Record<string, string>) =>
    keyed(user).GET("/v1/api/mailboxes/check-email", { params: { query } })

  it("answers valid with the address it would create, without creating it", async () => {
    const user = await withApiKey(server.url)
    const local = fresh("Check")
    const reply = await check(user, { local_part: local, domain: DOMAIN })
    expect(reply.response.status).toBe(200)
    expect(reply.data).toEqual({ success: true, valid: true, email_address: `${local}@${DOMAIN}` })
    const viaEmail = await check(user, { email_address: `${local}@${DOMAIN}`, domain: DOMAIN })
    expect(viaEmail.data).toEqual({ success: true, valid: true, email_address: `${local}@${DOMAIN}` })
    expect(await listed(user)).toEqual([])
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
    const user = await withApiKey(server.url)
    const reply = await check(user, query)
    expect(reply.response.status).toBe(200)
    expect(reply.data).toEqual({ success: true, valid: false, code, message: expect.any(String), details })
  })

  it("answers EMAIL_TAKEN for an address in use; exclude_mailbox_id frees only the caller's own mailbox", async () => {
    const alice = await withApiKey(server.url)
    const bob = await withApiKey(server.url)
    const mailbox = await createOk(alice)
    const local = mailbox.email_address.split("@")[0]!
    const taken = await check(alice, { local_part: local, domain: DOMAIN })
    expect(taken.data).toEqual({
      success: true,
      valid: false,
      code: "EMAIL_TAKEN",
      message: expect.any(String),
      details: { email_address: mailbox.email_address }
    })
    const own = await check(alice, { local_part: local.toUpperCase(), domain: DOMAIN, exclude_mailbox_id: mailbox.mailbox_id })
    expect(own.data).toEqual({ success: true, valid: true, email_address: `${local.toUpperCase()}@${DOMAIN}` })
    const notTheirs = await check(bob, { local_part: local, domain: DOMAIN, exclude_mailbox_id: mailbox.mailbox_id })
    expect(notTheirs.data).toMatchObject({ success: true, valid: false, code: "EMAIL_TAKEN" })
  })

  it("refuses a missing domain (or a missing local part) with 400 MISSING_FIELDS", async () => {
    const user = await withApiKey(server.url)
    const noDomain = await check(user, { local_part: "abcdef" })
    expect(noDomain.response.status).toBe(400)
    expect(noDomain.error).toEqual(failure("MISSING_FIELDS", expect.anything()))
    const noLocal = await check(user, { domain: DOMAIN })
    expect(noLocal.response.status).toBe(400)
    expect(noLocal.error?.error.code).toBe("MISSING_FIELDS")
    const noLocalPart = await check(user, { email_address: `@${DOMAIN}`, domain: DOMAIN })
    expect(noLocalPart.response.status).toBe(400)
    expect(noLocalPart.error?.error.code).toBe("BAD_REQUEST")
  })
})

describe("PATCH /api/mailboxes/{mailboxId} (rename)", () => {
  const rename = (user: User, mailboxId: string, body: AddressInput) =>
    dashboard().PATCH("/api/mailboxes/{mailboxId}", { params: { path: { mailboxId } }, body, ...session(user) })

  it("changes the address and keeps mailbox_id; the old address stays its owner's to take back, held from others", async () => {
    const alice = await withApiKey(server.url)
    const bob = await withApiKey(server.url)
    const mailbox = await createOk(alice)
    const next = fresh("renamed")
    const reply = await rename(alice, mailbox.mailbox_id, { local_part: next, domain: OTHER_SHARED })
    expect(reply.response.status).toBe(200)
    expect(reply.data).toEqual({
      success: true,
      data: {
        previous_email_address: mailbox.email_address,
        mailbox: {
          mailbox_id: mailbox.mailbox_id,
          email_address: `${next}@${OTHER_SHARED}`,
          domain: OTHER_SHARED,
          status: "active",
          display_name: null
        }
      }
    })
    expect((await listed(alice)).map((m) => [m.mailbox_id, m.email_address])).toEqual([[mailbox.mailbox_id, `${next}@${OTHER_SHARED}`]])
    const old = mailbox.email_address.split("@")[0]!
    // Mail may still be sent to the old address: for 30 days nobody else may take it over.
    const held = await keyed(bob).GET("/v1/api/mailboxes/check-email", { params: { query: { local_part: old, domain: DOMAIN } } })
    expect(held.data).toMatchObject({ success: true, valid: false, code: "EMAIL_TAKEN" })
    const available = await keyed(alice).GET("/v1/api/mailboxes/check-email", { params: { query: { local_part: old, domain: DOMAIN } } })
    expect(available.data).toEqual({ success: true, valid: true, email_address: mailbox.email_address })
    await createOk(alice, old)
  })

  it("its own current address is not taken (a change of case), another's is 409; rules apply; other users get 404", async () => {
    const alice = await withApiKey(server.url)
    const bob = await withApiKey(server.url)
    const mine = await createOk(alice)
    const theirs = await createOk(bob)
    const local = mine.email_address.split("@")[0]!
    const recased = await rename(alice, mine.mailbox_id, { email_address: `${local.toUpperCase()}@${DOMAIN}`, domain: DOMAIN })
    expect(recased.response.status).toBe(200)
    expect(recased.data?.data.mailbox.email_address).toBe(`${local.toUpperCase()}@${DOMAIN}`)
    const taken = await rename(alice, mine.mailbox_id, { email_address: theirs.email_address, domain: DOMAIN })
    expect(taken.response.status).toBe(409)
    expect(taken.error).toEqual(failure("EMAIL_TAKEN", { email_address: theirs.email_address }))
    const short = await rename(alice, mine.mailbox_id, { local_part: "abc", domain: DOMAIN })
    expect(short.response.status).toBe(422)
    expect(short.error).toEqual(failure("LOCAL_TOO_SHORT", { min_length: 5, actual_length: 3 }))
    const notMine = await rename(alice, theirs.mailbox_id, { local_part: fresh(), domain: DOMAIN })
    expect(notMine.response.status).toBe(404)
    expect(notMine.error?.error.code).toBe("NOT_FOUND")
    const unknown = await rename(alice, "mbx_nope", { local_part: fresh(), domain: DOMAIN })
    expect(unknown.response.status).toBe(404)
  })

  it("the dashboard reports a body of the wrong shape as 400 VALIDATION_ERROR with details.field_errors", async () => {
    const user = await withApiKey(server.url)
    const mailbox = await createOk(user)
    const wrong = await rename(user, mailbox.mailbox_id, offContract({ local_part: 5, domain: DOMAIN }))
    expect(wrong.response.status).toBe(400)
    expect(wrong.error).toEqual(failure("VALIDATION_ERROR", { field_errors: { local_part: "must be a string" } }))
    const array = await rename(user, mailbox.mailbox_id, offContract(["x"]))
    expect(array.response.status).toBe(400)
    expect(array.error).toEqual(failure("VALIDATION_ERROR", { field_errors: { body: "must be a JSON object" } }))
  })

  it("is also served under /v1/api for API keys", async () => {
    const user = await withApiKey(server.url)
    const mailbox = await createOk(user)
    const next = fresh()
    const path = { params: { path: { mailboxId: mailbox.mailbox_id } } }
    const reply = await keyed(user).PATCH("/v1/api/mailboxes/{mailboxId}", { ...path, body: { local_part: next, domain: DOMAIN } })
    expect(reply.response.status).toBe(200)
    expect(reply.data?.data).toEqual({
      previous_email_address: mailbox.email_address,
      mailbox: { mailbox_id: mailbox.mailbox_id, email_address: `${next}@${DOMAIN}`, domain: DOMAIN, status: "active", display_name: null }
    })
    const wrong = await keyed(user).PATCH("/v1/api/mailboxes/{mailboxId}", { ...path, body: offContract({ local_part: 5, domain: DOMAIN }) })
    expect(wrong.response.status).toBe(400)
    expect(wrong.error?.error.code).toBe("BAD_REQUEST")
  })
})

describe("display_name", () => {
  const change = (user: User, mailboxId: string, body: AddressInput) =>
    keyed(user).PATCH("/v1/api/mailboxes/{mailboxId}", { params: { path: { mailboxId } }, body })
  const read = async (user: User, mailboxId: string) =>
    (await keyed(user).GET("/v1/api/mailboxes/{mailboxId}", { params: { path: { mailboxId } } })).data!.mailbox

  it("is set on create (trimmed), changed alone or with the address, kept by a rename without it, and cleared by null or \"\"", async () => {
    const user = await withApiKey(server.url)
    const local = fresh()
    const created = await create(user, { local_part: local, domain: DOMAIN, display_name: "  Support Agent " })
    expect(created.response.status).toBe(201)
    expect(created.data?.mailbox).toEqual({ ...newMailbox(local, user.userId), display_name: "Support Agent" })
    const id = created.data!.mailbox.mailbox_id

    // A change naming only display_name keeps the address: the previous address is the current one.
    const named = await change(user, id, { display_name: "Zoë Ödegaard, Billing" })
    expect(named.response.status).toBe(200)
    expect(named.data?.data).toEqual({
      previous_email_address: `${local}@${DOMAIN}`,
      mailbox: { mailbox_id: id, email_address: `${local}@${DOMAIN}`, domain: DOMAIN, status: "active", display_name: "Zoë Ödegaard, Billing" }
    })
    expect((await listed(user)).find((m) => m.mailbox_id === id)?.display_name).toBe("Zoë Ödegaard, Billing")

    const next = fresh()
    const renamed = await change(user, id, { local_part: next, domain: DOMAIN })
    expect(renamed.data?.data.mailbox).toMatchObject({ email_address: `${next}@${DOMAIN}`, display_name: "Zoë Ödegaard, Billing" })
    const both = await change(user, id, { local_part: local, domain: DOMAIN, display_name: "Billing" })
    expect(both.data?.data).toMatchObject({ previous_email_address: `${next}@${DOMAIN}`, mailbox: { email_address: `${local}@${DOMAIN}`, display_name: "Billing" } })

    expect((await change(user, id, { display_name: "" })).data?.data.mailbox.display_name).toBeNull()
    await change(user, id, { display_name: "Billing" })
    expect((await change(user, id, { display_name: null })).data?.data.mailbox.display_name).toBeNull()
    expect(await read(user, id)).toMatchObject({ email_address: `${local}@${DOMAIN}`, display_name: null })
  })

  it("refuses a line break, a control or direction-override character and more than 100 characters: 400 VALIDATION_ERROR, nothing changed", async () => {
    const user = await withApiKey(server.url)
    const mailbox = await createOk(user)
    const refusals = [
      ["Support\r\nBcc: victim@example.com", "must not hold line breaks, control characters or direction overrides"],
      ["Tab\there", "must not hold line breaks, control characters or direction overrides"],
      ["Pay\u202Eliaven", "must not hold line breaks, control characters or direction overrides"],
      ["x".repeat(101), "must be at most 100 characters"]
    ] as const
    for (const [name, message] of refusals) {
      const reply = await change(user, mailbox.mailbox_id, { display_name: name })
      expect(reply.response.status).toBe(400)
      expect(reply.error).toEqual(failure("VALIDATION_ERROR", { display_name: message }))
    }
    // 100 characters (emoji count as one) are fine.
    const longest = "😀".repeat(100)
    expect((await change(user, mailbox.mailbox_id, { display_name: longest })).data?.data.mailbox.display_name).toBe(longest)

    const refusedCreate = await create(user, { local_part: fresh(), domain: DOMAIN, display_name: "a\nb" })
    expect(refusedCreate.response.status).toBe(400)
    expect(refusedCreate.error).toEqual(failure("VALIDATION_ERROR", { display_name: "must not hold line breaks, control characters or direction overrides" }))
    expect((await listed(user)).map((m) => m.mailbox_id)).toEqual([mailbox.mailbox_id])

    const notString = await change(user, mailbox.mailbox_id, offContract({ display_name: 7 }))
    expect(notString.response.status).toBe(400)
    expect(notString.error).toEqual(failure("BAD_REQUEST", { field_errors: { display_name: "must be a string or null" } }))
    expect((await read(user, mailbox.mailbox_id)).display_name).toBe(longest)
  })

  it("the dashboard reports the same refusals under details.field_errors; another user's mailbox is 404 NOT_FOUND", async () => {
    const alice = await signUp(server.url)
    const bob = await withApiKey(server.url)
    const mine = await dashboard().POST("/api/mailboxes", { body: { local_part: fresh(), domain: DOMAIN, display_name: "Alice's agent" }, ...session(alice) })
    expect(mine.response.status).toBe(201)
    expect(mine.data?.mailbox.display_name).toBe("Alice's agent")
    const path = (mailboxId: string) => ({ params: { path: { mailboxId } }, ...session(alice) })
    const refused = await dashboard().PATCH("/api/mailboxes/{mailboxId}", { ...path(mine.data!.mailbox.mailbox_id), body: { display_name: "x".repeat(101) } })
    expect(refused.response.status).toBe(400)
    expect(refused.error).toEqual(failure("VALIDATION_ERROR", { field_errors: { display_name: "must be at most 100 characters" } }))
    const theirs = await createOk(bob)
    const notMine = await dashboard().PATCH("/api/mailboxes/{mailboxId}", { ...path(theirs.mailbox_id), body: { display_name: "Mine now" } })
    expect(notMine.response.status).toBe(404)
    expect(notMine.error).toEqual(failure("NOT_FOUND", { mailbox_id: theirs.mailbox_id }))
    expect((await read(bob, theirs.mailbox_id)).display_name).toBeNull()
  })
})

describe("DELETE /v1/api/mailboxes/{mailboxId}", () => {
  const remove = (user: User, mailboxId: string, body: components["schemas"]["DeleteMailboxInput"]) =>
    keyed(user).DELETE("/v1/api/mailboxes/{mailboxId}", { params: { path: { mailboxId } }, body })

  it("refuses a missing body, a missing or wrong confirmation; then soft-deletes on the exact address", async () => {
    const user = await withApiKey(server.url)
    const mailbox = await createOk(user, fresh("Case"))
    const noBody = await remove(user, mailbox.mailbox_id, offContract(undefined))
    expect(noBody.response.status).toBe(400)
    expect(noBody.error).toEqual(failure("BAD_REQUEST"))
    const missing = await remove(user, mailbox.mailbox_id, {})
    expect(missing.response.status).toBe(400)
    expect(missing.error).toEqual(failure("VALIDATION_ERROR", { confirm_email_address: "is required" }))
    const wrong = await remove(user, mailbox.mailbox_id, { confirm_email_address: mailbox.email_address.toLowerCase() })
    expect(wrong.response.status).toBe(400)
    expect(wrong.error).toEqual(failure("VALIDATION_ERROR", { confirm_email_address: "must equal the mailbox's full address exactly" }))
    const notText = await remove(user, mailbox.mailbox_id, offContract({ confirm_email_address: 5 }))
    expect(notText.response.status).toBe(400)
    expect(notText.error).toEqual(failure("VALIDATION_ERROR", { confirm_email_address: "must be a string" }))
    expect(await listed(user)).toHaveLength(1)

    const deleted = await remove(user, mailbox.mailbox_id, { confirm_email_address: mailbox.email_address })
    expect(deleted.response.status).toBe(200)
    expect(deleted.data).toEqual({ success: true, data: { deleted: true } })
    expect(await listed(user)).toEqual([])
    const again = await remove(user, mailbox.mailbox_id, { confirm_email_address: mailbox.email_address })
    expect(again.response.status).toBe(404)
    expect(again.error?.error.code).toBe("NOT_FOUND")
    const rename = await keyed(user).PATCH("/v1/api/mailboxes/{mailboxId}", {
      params: { path: { mailboxId: mailbox.mailbox_id } },
      body: { local_part: fresh(), domain: DOMAIN }
    })
    expect(rename.response.status).toBe(404)
  })

  it("another user's mailbox is 404 and stays", async () => {
    const alice = await withApiKey(server.url)
    const mallory = await withApiKey(server.url)
    const mailbox = await createOk(alice)
    const reply = await remove(mallory, mailbox.mailbox_id, { confirm_email_address: mailbox.email_address })
    expect(reply.response.status).toBe(404)
    expect(reply.error?.error.code).toBe("NOT_FOUND")
    expect(await listed(alice)).toHaveLength(1)
  })

  it("a deleted address is free again for its owner at once, and still taken for anyone else", async () => {
    const owner = await withApiKey(server.url)
    const other = await withApiKey(server.url)
    const mailbox = await createOk(owner)
    const local = mailbox.email_address.split("@")[0]!
    expect((await remove(owner, mailbox.mailbox_id, { confirm_email_address: mailbox.email_address })).response.status).toBe(200)
    const byOther = await create(other, { local_part: local, domain: DOMAIN })
    expect(byOther.response.status).toBe(409)
    expect(byOther.error).toEqual(failure("EMAIL_TAKEN", { email_address: mailbox.email_address }))
    const checked = await keyed(other).GET("/v1/api/mailboxes/check-email", { params: { query: { local_part: local, domain: DOMAIN } } })
    expect(checked.data).toMatchObject({ valid: false, code: "EMAIL_TAKEN" })
    const again = await createOk(owner, local)
    expect(again.email_address).toBe(mailbox.email_address)
    expect(again.mailbox_id).not.toBe(mailbox.mailbox_id)
  })
})

describe("dashboard routes (/api/mailboxes, session cookie)", () => {
  it("create, list, check-email, read and delete with the cookie from our own origin", async () => {
    const user = await signUp(server.url)
    const local = fresh()
    const created = await dashboard().POST("/api/mailboxes", { body: { local_part: local, domain: DOMAIN }, ...session(user) })
    expect(created.response.status).toBe(201)
    expect(created.data).toEqual({ success: true, mailbox: newMailbox(local, user.userId) })
    const list = await dashboard().GET("/api/mailboxes", session(user))
    expect(list.response.status).toBe(200)
    expect(list.data).toEqual({ success: true, mailboxes: [created.data!.mailbox], meta: { total: 1, limit: 20, offset: 0, hasMore: false } })
    const checked = await dashboard().GET("/api/mailboxes/check-email", { params: { query: { local_part: local, domain: DOMAIN } }, ...session(user) })
    expect(checked.data).toMatchObject({ success: true, valid: false, code: "EMAIL_TAKEN" })
    const noDomain = await dashboard().GET("/api/mailboxes/check-email", { params: { query: { local_part: local } }, ...session(user) })
    expect(noDomain.response.status).toBe(400)
    expect(noDomain.error?.success).toBe(false)

    const path = { params: { path: { mailboxId: created.data!.mailbox.mailbox_id } }, ...session(user) }
    const read = await dashboard().GET("/api/mailboxes/{mailboxId}", path)
    expect(read.data).toEqual({ success: true, mailbox: created.data!.mailbox })
    const wrong = await dashboard().DELETE("/api/mailboxes/{mailboxId}", { ...path, body: { confirm_email_address: "nope@agents.localhost" } })
    expect(wrong.response.status).toBe(400)
    expect(wrong.error).toEqual(failure("VALIDATION_ERROR", { field_errors: { confirm_email_address: expect.any(String) } }))
    const deleted = await dashboard().DELETE("/api/mailboxes/{mailboxId}", { ...path, body: { confirm_email_address: `${local}@${DOMAIN}` } })
    expect(deleted.data).toEqual({ success: true, data: { deleted: true } })
  })

  it("reports rule failures with SPEC's codes and a wrong body shape as VALIDATION_ERROR with details.field_errors", async () => {
    const user = await signUp(server.url)
    const post = (body: AddressInput) => dashboard().POST("/api/mailboxes", { body, ...session(user) })
    const short = await post({ local_part: "abcd", domain: DOMAIN })
    expect(short.response.status).toBe(422)
    expect(short.error).toEqual(failure("LOCAL_TOO_SHORT", { min_length: 5, actual_length: 4 }))
    const missing = await post({ local_part: "abcdef" })
    expect(missing.response.status).toBe(400)
    expect(missing.error?.error.code).toBe("MISSING_FIELDS")
    const wrongType = await post(offContract({ local_part: 5, domain: DOMAIN }))
    expect(wrongType.response.status).toBe(400)
    expect(wrongType.error).toEqual(failure("VALIDATION_ERROR", { field_errors: { local_part: "must be a string" } }))
    const notObject = await post(offContract(42))
    expect(notObject.response.status).toBe(400)
    expect(notObject.error).toEqual(failure("VALIDATION_ERROR", { field_errors: { body: "must be a JSON object" } }))
    const notJson = await dashboard().POST("/api/mailboxes", { ...rawJsonBody("{"), ...session(user) })
    expect(notJson.response.status).toBe(400)
    expect(notJson.error?.error.code).toBe("BAD_REQUEST")
  })

  it("refuses a cookie write from another origin (403) and a request without a session (401)", async () => {
    const user = await signUp(server.url)
    const crossSite = await dashboard().POST("/api/mailboxes", {
      ...sessionFrom(user, "https://evil.example"),
      body: { local_part: fresh(), domain: DOMAIN }
    })
    expect(crossSite.response.status).toBe(403)
    expect(crossSite.error?.error.code).toBe("FORBIDDEN")
    expect((await dashboard().GET("/api/mailboxes")).response.status).toBe(401)
    expect((await dashboard().GET("/api/mailboxes", session(user))).data?.mailboxes).toEqual([])
  })
})

describe("OpenAPI", () => {
  it("documents the mailbox routes", async () => {
    // The document itself is untyped JSON (the typed client is generated from it).
    const document = await (await fetch(`${server.url}/v1/openapi.json`)).json() as {
      paths: Record<string, Record<string, { parameters?: Array<{ name: string; in: string }>; requestBody?: { content: Record<string, { schema: unknown }> }; responses: object }>>
      components: { schemas: Record<string, { properties: object }> }
    }
    for (const path of ["/v1/api/mailboxes", "/v1/api/mailboxes/check-email", "/v1/api/mailboxes/{mailboxId}", "/api/mailboxes", "/api/mailboxes/{mailboxId}"]) {
      expect(Object.keys(document.paths)).toContain(path)
    }
    const create = document.paths["/v1/api/mailboxes"]!.post!
    expect(create.requestBody?.content["application/json"]?.schema).toEqual({ $ref: "#/components/schemas/MailboxAddressInput" })
    expect(Object.keys(document.components.schemas.MailboxAddressInput!.properties).sort()).toEqual(["display_name", "domain", "email_address", "local_part"])
    expect(Object.keys(create.responses)).toEqual(expect.arrayContaining(["201", "400", "401", "403", "409", "422"]))
    for (const path of ["/v1/api/mailboxes", "/api/mailboxes"]) {
      const list = document.paths[path]!.get!
      expect(list.parameters!.map((p) => `${p.in}:${p.name}`)).toEqual(["query:limit", "query:offset", "query:sort"])
      expect(Object.keys(list.responses)).toEqual(expect.arrayContaining(["200", "400"]))
    }
  })
})
