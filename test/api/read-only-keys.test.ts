/**
 * Read-only API keys (`permission: read_only`), over real HTTP and the official MCP client: such a key
 * reads mail and searches, and every route or tool that changes something answers 403 FORBIDDEN with
 * `details.permission`; it cannot make itself a key with more. Given full access, it has it on its next
 * request. Which routes change nothing is src/http/reach.ts's `isReading` (GETs, and POST /v1/search).
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { describe, expect, it } from "vitest"
import { withApiKey } from "../support/accounts.ts"
import { upgrade } from "../support/billing.ts"
import { DOMAIN, fresh, newBox } from "../support/mailboxes.ts"
import { sendMail } from "../support/send-mail.ts"
import { type SuiteServer, useSuiteServer } from "../support/server.ts"
import { withKey, withToken } from "../support/typed-client.ts"
import { until } from "../support/wait.ts"

let suite: SuiteServer

useSuiteServer((s) => {
  suite = s
})

const readOnly = { success: false, error: { code: "FORBIDDEN", message: expect.stringContaining("read-only"), details: { permission: "read_only" } } }

describe("a read-only key", () => {
  it("reads and searches; every change is 403 on details.permission, a new key included; full access applies at once", async () => {
    const user = await withApiKey(suite.url)
    // Pro (100 requests a minute): the walk makes more than free's 20.
    await upgrade(suite.url, user.apiKey, "pro")
    const box = await newBox(suite.url, { user })
    await sendMail(suite.server.smtpPort, { to: box.address, from: "sender@example.com", subject: "Quarterly numbers", text: "Revenue grew." })
    const full = withKey(suite.url, user)
    const email = await until("the email listed", async () => {
      const { data } = await full.GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId: box.mailboxId } } })
      return data?.data[0]
    }, 30_000, 100, 500)

    const created = await withToken(suite.url, user).POST("/v1/api-keys", { body: { name: "summariser", permission: "read_only" } })
    expect(created.response.status).toBe(201)
    expect(created.data?.data).toMatchObject({ name: "summariser", permission: "read_only", mailboxIds: null })
    const listed = (await full.GET("/v1/api-keys")).data!.data
    expect(listed.find((k) => k.keyId === created.data!.data.keyId)?.permission).toBe("read_only")
    expect(listed.find((k) => k.keyId === user.keyId)?.permission).toBe("full_access")
    const reader = withKey(suite.url, created.data!.data)

    // Reading.
    expect((await reader.GET("/v1/api/mailboxes")).response.status).toBe(200)
    expect((await reader.GET("/v1/api/emails/{emailId}", { params: { path: { emailId: email.email_id } } })).data?.data.subject).toBe("Quarterly numbers")
    expect((await reader.POST("/v1/search", { body: { query: "revenue", mode: "text" } })).response.status).toBe(200)
    // A search changes nothing, the account's suggestions included: the reader's query is not among the
    // past queries (the full key's own, written by the same batches, is, so the reader's had its chance).
    expect((await reader.POST("/v1/search", { body: { query: "zebra planted by the reader", mode: "text" } })).response.status).toBe(200)
    expect((await full.POST("/v1/search", { body: { query: "zebra herd", mode: "text" } })).response.status).toBe(200)
    const suggested = await until("the full key's query suggested", async () => {
      const answer = await full.GET("/v1/search/suggestions", { params: { query: { q: "zebra" } } })
      return answer.data?.data.includes("zebra herd") ? answer.data.data : undefined
    })
    expect(suggested).toEqual(["zebra herd"])
    expect((await reader.GET("/v1/api-keys")).response.status).toBe(200)

    // Changing: each refused, nothing done.
    const refusals = [
      await reader.POST("/v1/api/mailboxes", { body: { local_part: fresh("nope"), domain: DOMAIN } }),
      await reader.POST("/v1/api-keys", { body: { name: "escalated" } }),
      await reader.PATCH("/v1/api/emails/{emailId}", { params: { path: { emailId: email.email_id } }, body: { add_labels: ["reviewed"] } }),
      await reader.DELETE("/v1/api/emails/{emailId}", { params: { path: { emailId: email.email_id } } }),
      await reader.POST("/v1/api/mailboxes/{mailboxId}/send", {
        params: { path: { mailboxId: box.mailboxId } },
        body: { to: ["someone@example.com"], subject: "Hi", text: "Hello" }
      }),
      await reader.POST("/v1/api/webhooks", { body: { url: "https://example.com/hook", events: ["email.received"] } })
    ]
    for (const refused of refusals) {
      expect(refused.response.status).toBe(403)
      expect(refused.error).toEqual(readOnly)
    }
    expect((await full.GET("/v1/api/emails/{emailId}", { params: { path: { emailId: email.email_id } } })).data?.data.labels).not.toContain("reviewed")
    expect((await full.GET("/v1/api-keys")).data!.data.map((k) => k.name).sort()).toEqual(["summariser", "test key"])

    // Full access, by a key that has it: the reader's next request may change things.
    const widened = await full.PATCH("/v1/api-keys/{id}", { params: { path: { id: created.data!.data.keyId } }, body: { permission: "full_access" } })
    expect(widened.data?.data.permission).toBe("full_access")
    expect((await reader.PATCH("/v1/api/emails/{emailId}", { params: { path: { emailId: email.email_id } }, body: { add_labels: ["reviewed"] } })).response.status)
      .toBe(200)
  })

  it("is shown the reading MCP tools only, and refused the others", async () => {
    const user = await withApiKey(suite.url)
    const created = await withToken(suite.url, user).POST("/v1/api-keys", { body: { name: "mcp reader", permission: "read_only" } })
    const mcp = new Client({ name: "read-only-key-test", version: "1.0.0" })
    await mcp.connect(new StreamableHTTPClientTransport(new URL(`${suite.url}/mcp`), {
      requestInit: { headers: { "x-api-key": created.data!.data.apiKey } }
    }))
    try {
      const { tools } = await mcp.listTools()
      expect(tools.length).toBeGreaterThan(5)
      for (const tool of tools) expect(tool.annotations?.readOnlyHint, tool.name).toBe(true)
      expect(tools.map((t) => t.name)).toEqual(expect.arrayContaining(["list_mailboxes", "search_emails", "get_email"]))
      expect(tools.map((t) => t.name)).not.toContain("send_email")
      const listed = (await mcp.callTool({ name: "list_mailboxes", arguments: {} })) as { isError?: boolean }
      expect(listed.isError).not.toBe(true)
      const refused = (await mcp.callTool({ name: "create_mailbox", arguments: { local_part: fresh("nope") } })) as unknown as {
        isError?: boolean
        content: Array<{ text: string }>
      }
      expect(refused.isError).toBe(true)
      expect(JSON.parse(refused.content[0]!.text)).toEqual({ error: { code: "FORBIDDEN", message: expect.any(String), details: { permission: "read_only" } } })
      // Refused the tool before its arguments are read: an agent is not sent to mend arguments it may not use.
      const unargued = (await mcp.callTool({ name: "send_email", arguments: {} })) as unknown as { isError?: boolean; content: Array<{ text: string }> }
      expect(unargued.isError).toBe(true)
      expect(JSON.parse(unargued.content[0]!.text)).toMatchObject({ error: { code: "FORBIDDEN", details: { permission: "read_only" } } })
    } finally {
      await mcp.close()
    }
  })

  it("refuses a permission that is not one, by field", async () => {
    const user = await withApiKey(suite.url)
    const bad = await withToken(suite.url, user).POST("/v1/api-keys", { body: { name: "x", permission: "admin" as never } })
    expect(bad.response.status).toBe(400)
    expect(bad.error?.error).toMatchObject({ code: "VALIDATION_ERROR", details: { permission: expect.stringContaining("full_access") } })
  })
})
