/**
 * The allow and block list routes (issue 20, item 3) over real HTTP through the typed client: the
 * account's and a mailbox's lists, under /v1/api with API keys and under /api for dashboard sessions;
 * every error path with its status, `error.code` and `details`. What the lists do to mail is
 * test/smtp/sender-lists.test.ts's subject; their rules (and the 1,000-entry cap, 403
 * SENDER_LIST_FULL) are proved in process by test/domain/sender-lists.test.ts.
 */
import { describe, expect, it } from "vitest"
import { isoMillis, withApiKey } from "../support/accounts.ts"
import { refusedListParams } from "../support/list-params.ts"
import { type Server, useSuiteServer } from "../support/server.ts"
import { anonymous, offContract, rawJsonBody, sessionFrom, withKey } from "../support/typed-client.ts"

const DOMAIN = "agents.localhost"

let server: Server
useSuiteServer((suite) => {
  server = suite.server
})

type User = Awaited<ReturnType<typeof withApiKey>>
const keyed = (user: User) => withKey(server.url, user)
/** The dashboard's credential: the session cookie, sent from our own origin. */
const session = (user: User) => sessionFrom(user, `http://localhost:${server.port}`)

let counter = 0
const fresh = () => `lists${Date.now().toString(36)}${counter++}${Math.random().toString(36).slice(2, 6)}`

const mailboxOf = async (user: User) => {
  const created = await keyed(user).POST("/v1/api/mailboxes", { body: { local_part: fresh(), domain: DOMAIN } })
  expect(created.response.status).toBe(201)
  return created.data!.mailbox.mailbox_id
}

const failure = (code: string, details?: unknown) => ({
  success: false,
  error: { code, message: expect.any(String), ...(details !== undefined ? { details } : {}) }
})

describe("the account's lists (/v1/api/lists/{list})", () => {
  it("adds normalised entries (201, then 200 for one already there), lists them newest first in pages, removes by naming them", async () => {
    const user = await withApiKey(server.url)
    const mailroom = keyed(user)
    const path = { list: "block" } as const
    const added = await mailroom.POST("/v1/api/lists/{list}", { params: { path }, body: { entry: " Spammer@Example.COM " } })
    expect(added.response.status).toBe(201)
    expect(added.data).toEqual({
      success: true,
      data: { entry: "spammer@example.com", type: "address", list: "block", mailbox_id: null, created_at: expect.stringMatching(isoMillis) }
    })
    const again = await mailroom.POST("/v1/api/lists/{list}", { params: { path }, body: { entry: "spammer@example.com" } })
    expect(again.response.status).toBe(200)
    expect(again.data).toEqual(added.data)
    const wildcard = await mailroom.POST("/v1/api/lists/{list}", { params: { path }, body: { entry: "*.Ads.test" } })
    expect(wildcard.data?.data).toMatchObject({ entry: "*.ads.test", type: "subdomains" })

    const first = await mailroom.GET("/v1/api/lists/{list}", { params: { path, query: { limit: 1 } } })
    expect(first.data).toEqual({
      success: true,
      data: [wildcard.data!.data],
      meta: { total: 2, limit: 1, offset: 0, hasMore: true }
    })
    const second = await mailroom.GET("/v1/api/lists/{list}", { params: { path, query: { limit: 1, offset: 1 } } })
    expect(second.data?.data).toEqual([added.data!.data])
    expect(second.data?.meta.hasMore).toBe(false)
    // Oldest first, or by entry, when asked.
    const entries = (sort: string) => mailroom.GET("/v1/api/lists/{list}", { params: { path, query: { sort } } }).then(({ data }) => data?.data.map((e) => e.entry))
    expect(await entries("created_at:asc")).toEqual(["spammer@example.com", "*.ads.test"])
    expect(await entries("entry:asc")).toEqual(["*.ads.test", "spammer@example.com"])
    // The allow list is another list.
    expect((await mailroom.GET("/v1/api/lists/{list}", { params: { path: { list: "allow" } } })).data?.meta.total).toBe(0)

    const removed = await mailroom.DELETE("/v1/api/lists/{list}/{entry}", { params: { path: { list: "block", entry: "*.ADS.test" } } })
    expect(removed.response.status).toBe(200)
    expect(removed.data).toEqual({ success: true, data: { entry: "*.ads.test", list: "block", mailbox_id: null, deleted: true } })
    const gone = await mailroom.DELETE("/v1/api/lists/{list}/{entry}", { params: { path: { list: "block", entry: "*.ads.test" } } })
    expect(gone.response.status).toBe(404)
    expect(gone.error).toEqual(failure("NOT_FOUND", { entry: "*.ads.test", list: "block" }))
  })

  it.each([
    [{ entry: "not a domain" }, { entry: expect.stringMatching(/^must not contain spaces/) }],
    [{ entry: "*@example.com" }, { entry: expect.stringMatching(/^cannot have a wildcard before the @/) }],
    [{ entry: "mail.*.example.com" }, { entry: expect.stringMatching(/^may use \* only as the first label/) }],
    [{ entry: "" }, { entry: expect.stringMatching(/^must not be empty/) }],
    [{}, { entry: "is required" }],
    [{ entry: 42 }, { entry: expect.any(String) }]
  ])("refuses the body %j: 400 VALIDATION_ERROR with details %j", async (body, details) => {
    const user = await withApiKey(server.url)
    const reply = await keyed(user).POST("/v1/api/lists/{list}", { params: { path: { list: "allow" } }, body: offContract(body) })
    expect(reply.response.status).toBe(400)
    expect(reply.error).toEqual(failure("VALIDATION_ERROR", details))
  })

  it("refuses a list that is neither allow nor block, an entry that names nothing, and a body that is not JSON", async () => {
    const user = await withApiKey(server.url)
    const mailroom = keyed(user)
    const grey = offContract({ list: "grey" })
    for (const reply of [
      await mailroom.GET("/v1/api/lists/{list}", { params: { path: grey } }),
      await mailroom.POST("/v1/api/lists/{list}", { params: { path: grey }, body: { entry: "example.com" } })
    ]) {
      expect(reply.response.status).toBe(400)
      expect(reply.error).toEqual(failure("VALIDATION_ERROR", { list: expect.any(String) }))
    }
    const badEntry = await mailroom.DELETE("/v1/api/lists/{list}/{entry}", { params: { path: { list: "block", entry: "a@b@c.test" } } })
    expect(badEntry.response.status).toBe(400)
    expect(badEntry.error).toEqual(failure("VALIDATION_ERROR", { entry: "must contain at most one @" }))
    const broken = await mailroom.POST("/v1/api/lists/{list}", { params: { path: { list: "block" } }, ...rawJsonBody("{ nope") })
    expect(broken.response.status).toBe(400)
    expect(broken.error).toEqual(failure("BAD_REQUEST"))
  })

  it("reads an entry in the path whole, an encoded / included: an address keeps it, a domain cannot hold one (400, not the domain before it)", async () => {
    const user = await withApiKey(server.url)
    const mailroom = keyed(user)
    const path = { list: "block" } as const
    // A local part may hold a / (RFC 5322): added, and removed by naming it, whole.
    const added = await mailroom.POST("/v1/api/lists/{list}", { params: { path }, body: { entry: "Ops/Alerts@Example.test" } })
    expect(added.data?.data).toMatchObject({ entry: "ops/alerts@example.test", type: "address" })
    await mailroom.POST("/v1/api/lists/{list}", { params: { path }, body: { entry: "a.test" } })
    const removed = await mailroom.DELETE("/v1/api/lists/{list}/{entry}", { params: { path: { list: "block", entry: "ops/alerts@example.test" } } })
    expect(removed.response.url).toContain("/ops%2Falerts%40example.test")
    expect(removed.response.status).toBe(200)
    expect(removed.data).toEqual({ success: true, data: { entry: "ops/alerts@example.test", list: "block", mailbox_id: null, deleted: true } })

    // a.test/b was read as the domain before its / (a.test, removed in its place; a/b answered 404 "a is not on this block list").
    for (const entry of ["a.test/b", "a/b"]) {
      const cut = await mailroom.DELETE("/v1/api/lists/{list}/{entry}", { params: { path: { list: "block", entry } } })
      expect(cut.response.url).toContain("%2Fb")
      expect(cut.response.status).toBe(400)
      expect(cut.error).toEqual(failure("VALIDATION_ERROR", { entry: expect.stringMatching(/^is not a valid domain/) }))
    }
    const refused = await mailroom.POST("/v1/api/lists/{list}", { params: { path }, body: { entry: "spam.test/x" } })
    expect(refused.response.status).toBe(400)
    expect(refused.error).toEqual(failure("VALIDATION_ERROR", { entry: expect.stringMatching(/^is not a valid domain/) }))
    expect((await mailroom.GET("/v1/api/lists/{list}", { params: { path } })).data?.data.map((e) => e.entry)).toEqual(["a.test"])
  })

  it.each(refusedListParams("address:asc", "entry:up"))("refuses %s=%s with 400 VALIDATION_ERROR naming it", async (name, value) => {
    const user = await withApiKey(server.url)
    const { response, error } = await keyed(user).GET("/v1/api/lists/{list}", { params: { path: { list: "block" }, query: { [name]: value } } })
    expect(response.status).toBe(400)
    expect(error?.error.code).toBe("VALIDATION_ERROR")
    expect(Object.keys(error?.error.details ?? {})).toEqual([name])
  })

  it("needs a credential: 401 UNAUTHORIZED", async () => {
    const reply = await anonymous(server.url).GET("/v1/api/lists/{list}", { params: { path: { list: "block" } } })
    expect(reply.response.status).toBe(401)
    expect(reply.error).toEqual(failure("UNAUTHORIZED"))
  })
})

describe("a mailbox's lists (/mailboxes/{mailbox_id}/lists/{list})", () => {
  it("are the mailbox's own, apart from the account's, on both surfaces", async () => {
    const user = await withApiKey(server.url)
    const mailboxId = await mailboxOf(user)
    const added = await keyed(user).POST("/v1/api/mailboxes/{mailboxId}/lists/{list}", {
      params: { path: { mailboxId, list: "allow" } },
      body: { entry: "Partner.test." }
    })
    expect(added.response.status).toBe(201)
    expect(added.data?.data).toEqual({ entry: "partner.test", type: "domain", list: "allow", mailbox_id: mailboxId, created_at: expect.stringMatching(isoMillis) })
    expect((await keyed(user).GET("/v1/api/lists/{list}", { params: { path: { list: "allow" } } })).data?.meta.total).toBe(0)

    // The dashboard session sees and changes the same list.
    const dashboard = anonymous(server.url)
    const listed = await dashboard.GET("/api/mailboxes/{mailboxId}/lists/{list}", { params: { path: { mailboxId, list: "allow" } }, ...session(user) })
    expect(listed.response.status).toBe(200)
    expect(listed.data).toEqual({ success: true, data: [added.data!.data], meta: { total: 1, limit: 20, offset: 0, hasMore: false } })
    const duplicate = await dashboard.POST("/api/mailboxes/{mailboxId}/lists/{list}", {
      params: { path: { mailboxId, list: "allow" } },
      body: { entry: "PARTNER.TEST" },
      ...session(user)
    })
    expect(duplicate.response.status).toBe(200)
    const removed = await dashboard.DELETE("/api/mailboxes/{mailboxId}/lists/{list}/{entry}", {
      params: { path: { mailboxId, list: "allow", entry: "partner.test" } },
      ...session(user)
    })
    expect(removed.data).toEqual({ success: true, data: { entry: "partner.test", list: "allow", mailbox_id: mailboxId, deleted: true } })
    const accountLevel = await dashboard.POST("/api/lists/{list}", { params: { path: { list: "block" } }, body: { entry: "x.test" }, ...session(user) })
    expect(accountLevel.response.status).toBe(201)
  })

  it("another account's mailbox, an unknown one and a deleted one are 404 NOT_FOUND on every route", async () => {
    const owner = await withApiKey(server.url)
    const stranger = await withApiKey(server.url)
    const theirs = await mailboxOf(owner)
    await keyed(owner).POST("/v1/api/mailboxes/{mailboxId}/lists/{list}", { params: { path: { mailboxId: theirs, list: "block" } }, body: { entry: "x.test" } })
    const deleted = await mailboxOf(stranger)
    const address = (await keyed(stranger).GET("/v1/api/mailboxes")).data!.mailboxes.find((m) => m.mailbox_id === deleted)!.email_address
    await keyed(stranger).DELETE("/v1/api/mailboxes/{mailboxId}", { params: { path: { mailboxId: deleted } }, body: { confirm_email_address: address } })
    for (const mailboxId of [theirs, "mbx_000000000000000000000000", deleted]) {
      const mailroom = keyed(stranger)
      const replies = [
        await mailroom.GET("/v1/api/mailboxes/{mailboxId}/lists/{list}", { params: { path: { mailboxId, list: "block" } } }),
        await mailroom.POST("/v1/api/mailboxes/{mailboxId}/lists/{list}", { params: { path: { mailboxId, list: "block" } }, body: { entry: "y.test" } }),
        await mailroom.DELETE("/v1/api/mailboxes/{mailboxId}/lists/{list}/{entry}", { params: { path: { mailboxId, list: "block", entry: "x.test" } } })
      ]
      for (const reply of replies) {
        expect(reply.response.status).toBe(404)
        expect(reply.error).toEqual(failure("NOT_FOUND", { mailbox_id: mailboxId }))
      }
    }
    // The owner's entry is untouched, and the stranger's account list never held it.
    const kept = await keyed(owner).GET("/v1/api/mailboxes/{mailboxId}/lists/{list}", { params: { path: { mailboxId: theirs, list: "block" } } })
    expect(kept.data?.data.map((e) => e.entry)).toEqual(["x.test"])
    const notMine = await keyed(stranger).DELETE("/v1/api/lists/{list}/{entry}", { params: { path: { list: "block", entry: "x.test" } } })
    expect(notMine.error).toEqual(failure("NOT_FOUND", { entry: "x.test", list: "block" }))
  })

  it("refuses a bad entry before anything else: 400 VALIDATION_ERROR naming it", async () => {
    const user = await withApiKey(server.url)
    const mailboxId = await mailboxOf(user)
    const reply = await keyed(user).POST("/v1/api/mailboxes/{mailboxId}/lists/{list}", {
      params: { path: { mailboxId, list: "block" } },
      body: { entry: "@example.com" }
    })
    expect(reply.response.status).toBe(400)
    expect(reply.error).toEqual(failure("VALIDATION_ERROR", { entry: "has nothing before the @; for a whole domain write the domain alone (example.com)" }))
  })
})
