/**
 * What search costs a plan, as SPEC's usage and limits say: every search that runs is counted in
 * `searchesUsed` (and nothing else is), the period's quota refuses the next one with 403
 * SEARCH_QUOTA, the per-minute search rate with 429, and a plan change moves the quota at once.
 * Usage after N emails and M searches is exact.
 *
 * The quota is 100 searches a month on free, and free may run 10 a minute: reaching it honestly
 * would take ten minutes, so the test sets the period's counter to 99 in the database (which is
 * why this suite runs on PostgreSQL in both modes).
 */
import nodemailer from "nodemailer"
import pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { components } from "../../packages/client/src/fetch-client.ts"
import { upgrade } from "../support/billing.ts"
import { type Box, newBox } from "../support/mailboxes.ts"
import { type Backend, createBackend, type Server, startServer } from "../support/server.ts"
import { withKey } from "../support/typed-client.ts"
import { awayFromMinuteEdge, until } from "../support/wait.ts"

let backend: Backend
let server: Server
let db: pg.Client

beforeAll(async () => {
  backend = await createBackend({ forcePostgres: true })
  server = await startServer({ ...backend.env })
  db = new pg.Client({ connectionString: backend.env.DATABASE_URL })
  await db.connect()
}, 120_000)

afterAll(async () => {
  await db?.end()
  await server?.stop()
  await backend?.dispose()
})

const send = async (to: string, subject: string) => {
  const transport = nodemailer.createTransport({ host: "127.0.0.1", port: server.smtpPort, secure: false, ignoreTLS: true })
  await transport.sendMail({ from: "sender@example.com", to, subject, text: `About ${subject}.` })
  transport.close()
}

const usage = async (box: Box) => {
  const reply = await withKey(server.url, box.user).GET("/v1/billing/usage")
  expect(reply.response.status).toBe(200)
  return reply.data!.data
}

const search = (box: Box, body: components["schemas"]["SearchInput"]) => withKey(server.url, box.user).POST("/v1/search", { body })

describe("search usage and limits", () => {
  it("counts exactly: N emails and M searches; refused searches and suggestions are free", async () => {
    const box = await newBox(server.url)
    const subjects = ["Quarterly report", "Meeting notes", "Travel receipt"]
    for (const subject of subjects) await send(box.address, subject)
    await until("the three emails are stored", async () => {
      const list = await withKey(server.url, box.user).GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId: box.mailboxId } } })
      return list.data?.data.length === 3 ? true : undefined
    }, 60_000, 500)
    for (const query of ["report", "notes", "receipt", "anything at all"]) {
      expect((await search(box, { query })).response.status).toBe(200)
    }
    expect((await search(box, { query: "" })).response.status).toBe(400)
    expect((await search(box, { query: "report", limit: 500 })).response.status).toBe(400)
    expect((await withKey(server.url, box.user).GET("/v1/search/suggestions", { params: { query: { q: "re" } } })).response.status).toBe(200)
    const used = await usage(box)
    expect(used.emailsUsed).toBe(3)
    expect(used.searchesUsed).toBe(4)
    expect(used.searchesLimit).toBe(100)
  })

  it("refuses the search past the period's quota with 403 SEARCH_QUOTA, and counts it not; pro lifts it at once", async () => {
    const box = await newBox(server.url)
    expect((await search(box, { query: "first" })).response.status).toBe(200)
    await db.query("UPDATE usage_counters SET searches = 99 WHERE user_id = (SELECT user_id FROM mailboxes WHERE id = $1)", [box.mailboxId])
    const last = await search(box, { query: "the hundredth" })
    expect(last.response.status).toBe(200)
    const refused = await search(box, { query: "one too many" })
    expect(refused.response.status).toBe(403)
    expect(refused.error?.success).toBe(false)
    expect(refused.error?.error.code).toBe("SEARCH_QUOTA")
    expect(refused.error?.error.details).toEqual({ used: 100, limit: 100, plan: "free", period_end: expect.any(String) })
    expect((await usage(box)).searchesUsed).toBe(100)

    await upgrade(server.url, box.user.apiKey, "pro")
    const after = await search(box, { query: "on pro now" })
    expect(after.response.status).toBe(200)
    const used = await usage(box)
    expect(used.searchesLimit).toBe(5_000)
    // A paid plan starts a new period: its count starts again.
    expect(used.searchesUsed).toBe(1)
  })

  it("without a quota (enterprise), searches are counted behind the answer: usage shows them at once, the database within seconds", async () => {
    const box = await newBox(server.url)
    await upgrade(server.url, box.user.apiKey, "enterprise")
    for (const query of ["one", "two", "three"]) expect((await search(box, { query })).response.status).toBe(200)
    expect((await search(box, { query: "" })).response.status).toBe(400)
    expect((await usage(box)).searchesUsed).toBe(3)
    const stored = async () => {
      const rows = await db.query("SELECT sum(searches)::int AS n FROM usage_counters WHERE user_id = (SELECT user_id FROM mailboxes WHERE id = $1)", [box.mailboxId])
      return rows.rows[0]?.n === 3 ? true : undefined
    }
    await until("the three searches are written", stored, 5_000, 100)
    expect((await usage(box)).searchesUsed).toBe(3)
  })

  it("limits searches per minute apart from requests: the 11th on free is 429 with Retry-After", async () => {
    const box = await newBox(server.url)
    // The eleven searches must fall in one minute's window (CI once crossed a minute's edge between them).
    await awayFromMinuteEdge(20)
    for (let i = 0; i < 10; i++) {
      const searched = await search(box, { query: `query ${i}` })
      expect(searched.response.status).toBe(200)
      // The headers say the limit that refuses first: here the search limit's (the request limit has more left).
      expect([searched.response.headers.get("x-ratelimit-limit"), searched.response.headers.get("x-ratelimit-remaining")]).toEqual(["10", String(9 - i)])
    }
    const limited = await search(box, { query: "one more" })
    expect(limited.response.status).toBe(429)
    expect(limited.error?.error.code).toBe("RATE_LIMIT_EXCEEDED")
    expect(limited.error?.error.details).toEqual({ limit: 10, window: "minute", retry_after: expect.any(Number) })
    expect(Number(limited.response.headers.get("retry-after"))).toBeGreaterThanOrEqual(1)
    // Its X-RateLimit-* describe the search limit that refused it, not the request limit (20, 9 left).
    expect(limited.response.headers.get("x-ratelimit-limit")).toBe("10")
    expect(limited.response.headers.get("x-ratelimit-remaining")).toBe("0")
    const reset = Number(limited.response.headers.get("x-ratelimit-reset"))
    expect(reset - Date.now() / 1000).toBeGreaterThan(0)
    expect(reset - Date.now() / 1000).toBeLessThanOrEqual(61)
    // Other requests are not held back by the search limit.
    expect((await withKey(server.url, box.user).GET("/v1/billing/usage")).response.status).toBe(200)
    expect((await usage(box)).searchesUsed).toBe(10)
  })

  it("says the request limit's headers on a search when that limit has less left", async () => {
    const box = await newBox(server.url)
    await awayFromMinuteEdge(20)
    for (let i = 0; i < 12; i++) await usage(box)
    const searched = await search(box, { query: "late in the minute" })
    expect(searched.response.status).toBe(200)
    const remaining = Number(searched.response.headers.get("x-ratelimit-remaining"))
    expect(searched.response.headers.get("x-ratelimit-limit")).toBe("20")
    expect(remaining).toBeLessThan(9)
  })
})
