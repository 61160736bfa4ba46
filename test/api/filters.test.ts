/**
 * Filters over real HTTP through the typed client, against a started server: kept and changed under
 * /v1/api with API keys and under /api for dashboard sessions; mail sent over SMTP arriving labelled
 * by them; one run over mail already received; every error path with its status, `error.code` and
 * `details`. What a filter's conditions match, how filters compose and the cap of 100 (403
 * FILTER_QUOTA) are proved in process by test/domain/filters.test.ts.
 */
import { describe, expect, it } from "vitest"
import { isoMillis, withApiKey } from "../support/accounts.ts"
import { upgrade } from "../support/billing.ts"
import { refusedListParams } from "../support/list-params.ts"
import { arrivedIn, newBox } from "../support/mailboxes.ts"
import { sendMail } from "../support/send-mail.ts"
import { type SuiteServer, useSuiteServer } from "../support/server.ts"
import { anonymous, offContract, rawJsonBody, sessionFrom, withKey } from "../support/typed-client.ts"
import { until } from "../support/wait.ts"

let suite: SuiteServer
useSuiteServer((s) => {
  suite = s
})

type User = Awaited<ReturnType<typeof withApiKey>>
const keyed = (user: User) => withKey(suite.server.url, user)

const failure = (code: string, details?: unknown) => ({
  success: false,
  error: { code, message: expect.any(String), ...(details !== undefined ? { details } : {}) }
})

const newsletters = {
  name: "Newsletters",
  conditions: { from: ["*.News.test"], body_contains: ["unsubscribe"] },
  actions: { add_labels: ["newsletters"], remove_labels: ["unread"] }
}

describe("filters (/v1/api/filters)", () => {
  it("are created (201), read, listed in the order they apply, changed and deleted", async () => {
    const user = await withApiKey(suite.server.url)
    const mailroom = keyed(user)
    const box = await newBox(suite.server.url, { user })
    const created = await mailroom.POST("/v1/api/filters", { body: newsletters })
    expect(created.response.status).toBe(201)
    const filter = created.data!.data
    expect(created.data).toEqual({
      success: true,
      data: {
        filter_id: expect.stringMatching(/^flt_/),
        name: "Newsletters",
        mailbox_id: null,
        enabled: true,
        conditions: { from: ["*.news.test"], body_contains: ["unsubscribe"] },
        actions: { add_labels: ["newsletters"], remove_labels: ["unread"] },
        matched_count: 0,
        last_matched_at: null,
        created_at: expect.stringMatching(isoMillis),
        updated_at: expect.stringMatching(isoMillis)
      }
    })
    const second = await mailroom.POST("/v1/api/filters", {
      body: { mailbox_id: box.mailboxId, conditions: { has_attachments: true }, actions: { add_labels: ["files"] } }
    })
    expect(second.data?.data).toMatchObject({ mailbox_id: box.mailboxId, name: null })

    expect((await mailroom.GET("/v1/api/filters/{filterId}", { params: { path: { filterId: filter.filter_id } } })).data)
      .toEqual(created.data)
    const all = await mailroom.GET("/v1/api/filters", { params: { query: { limit: 1 } } })
    expect(all.data).toEqual({ success: true, data: [filter], meta: { total: 2, limit: 1, offset: 0, hasMore: true } })
    const ofBox = await mailroom.GET("/v1/api/filters", { params: { query: { mailbox_id: box.mailboxId } } })
    expect(ofBox.data?.data.map((f) => f.filter_id)).toEqual([second.data!.data.filter_id])
    // Sorted as asked: newest first, or by name (one without a name last either way).
    const ids = (sort: string) => mailroom.GET("/v1/api/filters", { params: { query: { sort } } }).then(({ data }) => data?.data.map((f) => f.filter_id))
    expect(await ids("created_at:desc")).toEqual([second.data!.data.filter_id, filter.filter_id])
    expect(await ids("name:asc")).toEqual([filter.filter_id, second.data!.data.filter_id])
    expect(await ids("name:desc")).toEqual([filter.filter_id, second.data!.data.filter_id])

    const changed = await mailroom.PATCH("/v1/api/filters/{filterId}", {
      params: { path: { filterId: filter.filter_id } },
      body: { enabled: false, conditions: { subject_contains: ["Weekly digest"] } }
    })
    expect(changed.response.status).toBe(200)
    expect(changed.data?.data).toMatchObject({
      enabled: false,
      name: "Newsletters",
      conditions: { subject_contains: ["Weekly digest"] },
      actions: filter.actions
    })

    const removed = await mailroom.DELETE("/v1/api/filters/{filterId}", { params: { path: { filterId: filter.filter_id } } })
    expect(removed.data).toEqual({ success: true, data: { filter_id: filter.filter_id, deleted: true } })
    for (
      const reply of [
        await mailroom.GET("/v1/api/filters/{filterId}", { params: { path: { filterId: filter.filter_id } } }),
        await mailroom.PATCH("/v1/api/filters/{filterId}", { params: { path: { filterId: filter.filter_id } }, body: { enabled: true } }),
        await mailroom.DELETE("/v1/api/filters/{filterId}", { params: { path: { filterId: filter.filter_id } } }),
        await mailroom.POST("/v1/api/filters/{filterId}/apply", { params: { path: { filterId: filter.filter_id } }, body: {} })
      ]
    ) {
      expect(reply.response.status).toBe(404)
      expect(reply.error).toEqual(failure("NOT_FOUND", { filter_id: filter.filter_id }))
    }

    // A mailbox's filters go with it.
    await mailroom.DELETE("/v1/api/mailboxes/{mailboxId}", {
      params: { path: { mailboxId: box.mailboxId } },
      body: { confirm_email_address: box.address }
    })
    expect((await mailroom.GET("/v1/api/filters", {})).data?.meta.total).toBe(0)
  })

  it("label mail received over SMTP as it is stored, and run over mail already received on request", async () => {
    const user = await withApiKey(suite.server.url)
    // The suite polls for mail: more requests than the free plan's 20 a minute on a slow machine.
    await upgrade(suite.server.url, user.apiKey, "pro")
    const mailroom = keyed(user)
    const box = await newBox(suite.server.url, { user })
    const before = await sendMail(suite.server.smtpPort, {
      from: "Acme Billing <billing@acme.test>",
      to: box.address,
      subject: "Invoice 41",
      text: "Paid, thank you."
    })
    expect(before).toBeDefined()
    await arrivedIn(suite.server.url, box, "Invoice 41")

    const billing = await mailroom.POST("/v1/api/filters", {
      body: { conditions: { from: ["acme.test"], subject_contains: ["invoice"] }, actions: { add_labels: ["billing"], remove_labels: ["unread"] } }
    })
    const filterId = billing.data!.data.filter_id
    await sendMail(suite.server.smtpPort, { from: "billing@acme.test", to: box.address, subject: "Invoice 42", text: "Please pay by Friday." })
    await sendMail(suite.server.smtpPort, { from: "billing@acme.test", to: box.address, subject: "Lunch?", text: "Noon." })
    // acme.test publishes no SPF record: its mail is unauthenticated, which the filter leaves as it is.
    expect((await arrivedIn(suite.server.url, box, "Invoice 42")).labels).toEqual(["inbound", "unauthenticated", "billing"])
    expect((await arrivedIn(suite.server.url, box, "Lunch?")).labels).toEqual(["inbound", "unread", "unauthenticated"])
    // Counted behind the answer, seen at once by the process that counted.
    const counted = await until("the match counted", async () => {
      const { data } = await mailroom.GET("/v1/api/filters/{filterId}", { params: { path: { filterId } } })
      return data?.data.matched_count === 1 ? data.data : undefined
    })
    expect(counted.last_matched_at).toMatch(isoMillis)

    // The invoice from before the filter: a dry run counts it, a run labels it.
    const path = { filterId }
    // A misspelt dry run is refused, not run for real.
    const misspelt = await mailroom.POST("/v1/api/filters/{filterId}/apply", { params: { path }, body: offContract({ dryRun: true }) })
    expect([misspelt.response.status, misspelt.error?.error.details]).toEqual([400, { dryRun: "is not a field here; the fields are dry_run" }])
    const dry = await mailroom.POST("/v1/api/filters/{filterId}/apply", { params: { path }, body: { dry_run: true } })
    expect(dry.data).toEqual({ success: true, data: { filter_id: filterId, dry_run: true, scanned: 3, matched: 2, changed: 1 } })
    expect((await arrivedIn(suite.server.url, box, "Invoice 41")).labels).toEqual(["inbound", "unread", "unauthenticated"])
    const run = await mailroom.POST("/v1/api/filters/{filterId}/apply", { params: { path }, body: {} })
    expect(run.data?.data).toEqual({ filter_id: filterId, dry_run: false, scanned: 3, matched: 2, changed: 1 })
    expect((await arrivedIn(suite.server.url, box, "Invoice 41")).labels).toEqual(["inbound", "unauthenticated", "billing"])
  })

  it.each([
    [{}, { conditions: "is required", actions: "is required" }],
    [{ conditions: {}, actions: { add_labels: ["x"] } }, { conditions: expect.stringMatching(/^must give at least one of/) }],
    [{ conditions: { from: ["not a domain"] }, actions: { add_labels: ["x"] } }, { "conditions.from.0": expect.stringMatching(/^must not contain spaces/) }],
    [{ conditions: { to: [] }, actions: { add_labels: ["x"] } }, { "conditions.to": expect.stringMatching(/^must list at least one term/) }],
    [{ conditions: { subject_contains: ["  "] }, actions: { add_labels: ["x"] } }, { "conditions.subject_contains.0": "must not be empty" }],
    [{ conditions: { body_contains: ["x".repeat(201)] }, actions: { add_labels: ["x"] } }, { "conditions.body_contains.0": "must be at most 200 characters" }],
    [{ conditions: { has_attachments: "yes" }, actions: { add_labels: ["x"] } }, { "conditions.has_attachments": expect.any(String) }],
    [{ conditions: { has_attachments: true }, actions: {} }, { actions: "must add or remove at least one label" }],
    [{ conditions: { has_attachments: true }, actions: { add_labels: ["a,b"] } }, { "actions.add_labels.0": "must not contain a comma" }],
    [{ conditions: { has_attachments: true }, actions: { add_labels: ["Clients/"] } }, {
      "actions.add_labels.0": "must not start or end with / or hold //: / separates a label's levels (folders over IMAP), and none may be empty"
    }],
    [{ conditions: { has_attachments: true }, actions: { add_labels: ["x", "y"], remove_labels: ["y", "x"] } }, {
      "actions.remove_labels": "x, y are in actions.add_labels too: a filter adds a label or removes it, not both"
    }],
    [{ conditions: { has_attachments: true }, actions: { add_labels: ["blocked"] } }, {
      "actions.add_labels": expect.stringMatching(/^blocked is the block lists' verdict/)
    }],
    [{ name: "", conditions: { has_attachments: true }, actions: { add_labels: ["x"] } }, { name: "must not be empty" }],
    // A misspelt field would widen the filter (a condition, or the mailbox it is held to, left out): refused by name.
    [{ conditions: { from: ["acme.example"], subjet_contains: ["x"] }, actions: { add_labels: ["x"] }, mailboxid: "mbx_1" }, {
      "conditions.subjet_contains": "is not a field here; the fields are from, to, subject_contains, body_contains, has_attachments",
      mailboxid: "is not a field here; the fields are name, mailbox_id, enabled, conditions, actions"
    }],
    [{ conditions: { has_attachments: true }, actions: { add_label: ["x"] } }, {
      "actions.add_label": "is not a field here; the fields are add_labels, remove_labels"
    }]
  ])("refuses the body %j: 400 VALIDATION_ERROR with details %j", async (body, details) => {
    const user = await withApiKey(suite.server.url)
    const reply = await keyed(user).POST("/v1/api/filters", { body: offContract(body) })
    expect(reply.response.status).toBe(400)
    expect(reply.error).toEqual(failure("VALIDATION_ERROR", details))
  })

  it("refuses fact labels (LABEL_READ_ONLY), another account's mailbox and filter (404), bad JSON and bad list parameters", async () => {
    const user = await withApiKey(suite.server.url)
    const mailroom = keyed(user)
    const fact = await mailroom.POST("/v1/api/filters", { body: { conditions: { has_attachments: true }, actions: { remove_labels: ["inbound"] } } })
    expect(fact.response.status).toBe(400)
    expect(fact.error).toEqual(failure("LABEL_READ_ONLY", { labels: ["inbound"] }))

    const stranger = await newBox(suite.server.url)
    const theirs = await keyed(stranger.user).POST("/v1/api/filters", { body: { ...newsletters, mailbox_id: stranger.mailboxId } })
    const elsewhere = await mailroom.POST("/v1/api/filters", { body: { ...newsletters, mailbox_id: stranger.mailboxId } })
    expect(elsewhere.response.status).toBe(404)
    expect(elsewhere.error).toEqual(failure("NOT_FOUND", { mailbox_id: stranger.mailboxId }))
    const listed = await mailroom.GET("/v1/api/filters", { params: { query: { mailbox_id: stranger.mailboxId } } })
    expect(listed.error).toEqual(failure("NOT_FOUND", { mailbox_id: stranger.mailboxId }))
    const filterId = theirs.data!.data.filter_id
    const read = await mailroom.GET("/v1/api/filters/{filterId}", { params: { path: { filterId } } })
    expect(read.response.status).toBe(404)
    expect(read.error).toEqual(failure("NOT_FOUND", { filter_id: filterId }))
    const moved = await mailroom.PATCH("/v1/api/filters/{filterId}", { params: { path: { filterId } }, body: { name: "mine" } })
    expect(moved.error).toEqual(failure("NOT_FOUND", { filter_id: filterId }))

    const broken = await mailroom.POST("/v1/api/filters", rawJsonBody("{ nope"))
    expect(broken.response.status).toBe(400)
    expect(broken.error).toEqual(failure("BAD_REQUEST"))
    const badRun = await mailroom.POST("/v1/api/filters/{filterId}/apply", {
      params: { path: { filterId } },
      body: offContract({ dry_run: "maybe" })
    })
    expect(badRun.response.status).toBe(400)
    expect(badRun.error).toEqual(failure("VALIDATION_ERROR", { dry_run: expect.any(String) }))
  })

  it("apply takes no body as an empty one: a real run; a body that is not an object is still refused", async () => {
    const user = await withApiKey(suite.server.url)
    const mailroom = keyed(user)
    const created = await mailroom.POST("/v1/api/filters", { body: { conditions: { has_attachments: false }, actions: { add_labels: ["x"] } } })
    const path = { filterId: created.data!.data.filter_id }
    const ran = { success: true, data: { filter_id: path.filterId, dry_run: false, scanned: 0, matched: 0, changed: 0 } }
    const none = await mailroom.POST("/v1/api/filters/{filterId}/apply", { params: { path } })
    expect([none.response.status, none.data]).toEqual([200, ran])
    // An empty body labelled JSON, and JSON's null, are no body either.
    for (const text of ["", "null"]) {
      const empty = await mailroom.POST("/v1/api/filters/{filterId}/apply", { params: { path }, ...rawJsonBody(text) })
      expect([empty.response.status, empty.data]).toEqual([200, ran])
    }
    for (const text of ["[]", "true"]) {
      const wrong = await mailroom.POST("/v1/api/filters/{filterId}/apply", { params: { path }, ...rawJsonBody(text) })
      expect(wrong.response.status).toBe(400)
      expect(wrong.error).toEqual(failure("VALIDATION_ERROR", { body: "must be a JSON object" }))
    }
  })

  it.each(refusedListParams("priority:asc", "name:sideways"))("refuses %s=%s with 400 VALIDATION_ERROR naming it", async (name, value) => {
    const user = await withApiKey(suite.server.url)
    const { response, error } = await keyed(user).GET("/v1/api/filters", { params: { query: { [name]: value } } })
    expect(response.status).toBe(400)
    expect(error?.error.code).toBe("VALIDATION_ERROR")
    expect(Object.keys(error?.error.details ?? {})).toEqual([name])
  })

  it("need a credential (401); are the account's: a key limited to mailboxes gets 403, a read-only key reads only", async () => {
    const reply = await anonymous(suite.server.url).GET("/v1/api/filters", {})
    expect(reply.response.status).toBe(401)
    expect(reply.error).toEqual(failure("UNAUTHORIZED"))

    const box = await newBox(suite.server.url)
    const mailroom = keyed(box.user)
    const limited = await mailroom.POST("/v1/api-keys", { body: { name: "agent", mailboxIds: [box.mailboxId] } })
    const limitedKey = withKey(suite.server.url, { apiKey: limited.data!.data.apiKey })
    const refused = await limitedKey.GET("/v1/api/filters", {})
    expect(refused.response.status).toBe(403)
    expect(refused.error).toEqual(failure("FORBIDDEN", expect.anything()))

    const readOnly = await mailroom.POST("/v1/api-keys", { body: { name: "reader", permission: "read_only" } })
    const reader = withKey(suite.server.url, { apiKey: readOnly.data!.data.apiKey })
    expect((await reader.GET("/v1/api/filters", {})).response.status).toBe(200)
    const write = await reader.POST("/v1/api/filters", { body: newsletters })
    expect(write.response.status).toBe(403)
    expect(write.error).toEqual(failure("FORBIDDEN", { permission: "read_only" }))
  })
})

describe("filters for dashboard sessions (/api/filters)", () => {
  it("are the same filters as the API key's", async () => {
    const user = await withApiKey(suite.server.url)
    const created = await anonymous(suite.server.url).POST("/api/filters", {
      body: newsletters,
      ...sessionFrom(user, `http://localhost:${suite.server.port}`)
    })
    expect(created.response.status).toBe(201)
    const listed = await keyed(user).GET("/v1/api/filters", {})
    expect(listed.data?.data).toEqual([created.data!.data])
  })
})
