/**
 * The embedded single process (PGlite + the in-process bus kept in SQL) keeps its promise across a
 * crash: messages answered 250 but not yet ingested when the process is killed (SIGKILL) are ingested
 * after a restart on the same DATA_DIR, each exactly once. Always embedded, whatever the mode.
 */
import nodemailer from "nodemailer"
import { randomUUID } from "node:crypto"
import { afterAll, beforeAll, expect, it } from "vitest"
import { withApiKey } from "../support/accounts.ts"
import { upgrade } from "../support/billing.ts"
import { type FakeOpenAi, fakeOpenAiEnv, startFakeOpenAi } from "../support/fake-openai.ts"
import { type Server, startServer } from "../support/server.ts"
import { createDataDir } from "../support/services.ts"
import { type MailroomFetchClient, withKey } from "../support/typed-client.ts"
import { sleep } from "../support/wait.ts"

const MESSAGES = 150
/**
 * Sessions sending at once. With 6, ingestion kept pace with acceptance (149 or 150 of 150 stored by
 * the last 250) and there was nothing left to resume; with 16 roughly 60 of 150 were stored by then.
 */
const CONNECTIONS = 16

/** Every email of a mailbox (subjects), over as many pages as it takes. */
const listSubjects = async (mailroom: MailroomFetchClient, mailboxId: string) => {
  const subjects: Array<string> = []
  for (let offset = 0; ; offset += 100) {
    const page = await mailroom.GET("/v1/api/mailboxes/{mailboxId}/emails", {
      params: { path: { mailboxId }, query: { limit: 100, offset } }
    })
    if (page.response.status !== 200 || !page.data) throw new Error(`list: ${page.response.status} ${JSON.stringify(page.error)}`)
    subjects.push(...page.data.data.map((email) => email.subject))
    if (!page.data.meta.hasMore) return subjects
  }
}

const dataDir = createDataDir()
const servers: Array<Server> = []
let openai: FakeOpenAi

beforeAll(async () => {
  // Embeddings through a stand-in for OpenAI's API: what this suite measures is ingest, and the
  // offline model would spend the CPU it races against on 150 emails.
  openai = await startFakeOpenAi()
})

afterAll(async () => {
  for (const server of servers) await server.stop()
  await openai?.close()
  dataDir.remove()
})

it("ingests after a restart exactly the messages accepted before a SIGKILL", async () => {
  const env = { DATA_DIR: dataDir.dir, ...fakeOpenAiEnv(openai) }
  const first = await startServer(env)
  servers.push(first)
  const user = await withApiKey(first.url)
  // The pro plan: 150 emails a day are above the free plan's 100.
  await upgrade(first.url, user.apiKey, "pro")
  const created = await withKey(first.url, user).POST("/v1/api/mailboxes", {
    body: { local_part: `resume-${Date.now().toString(36)}`, domain: "agents.localhost" }
  })
  expect(created.response.status).toBe(201)
  const mailbox = created.data!.mailbox

  // Quickly, over several connections at once: acceptance outpaces ingestion, leaving a backlog.
  const transport = nodemailer.createTransport({
    host: "127.0.0.1",
    port: first.smtpPort,
    secure: false,
    ignoreTLS: true,
    pool: true,
    maxConnections: CONNECTIONS,
    maxMessages: Infinity
  })
  const accepted: Array<string> = []
  await Promise.all(
    Array.from({ length: MESSAGES }, async (_, n) => {
      const subject = `Resume ${n}`
      try {
        const info = await transport.sendMail({
          from: "load@example.com",
          to: mailbox.email_address,
          subject,
          text: `Message ${n}, unique body ${randomUUID()}`,
          headers: { "X-Test-Seq": String(n) }
        })
        if (/^250[ -]/.test(info.response)) accepted.push(subject)
      } catch {
        // Not accepted: the sender keeps it; it must not show up below.
      }
    })
  )
  transport.close()

  // Right after the last 250: how far ingestion got, then the crash.
  const before = await withKey(first.url, user).GET("/v1/api/mailboxes/{mailboxId}/emails", {
    params: { path: { mailboxId: mailbox.mailbox_id }, query: { limit: 1 } }
  })
  await first.kill()
  expect(before.response.status).toBe(200)
  const storedBeforeKill = before.data!.meta.total
  console.info(`[resume] ${accepted.length} accepted; ${storedBeforeKill} stored just before the kill`)
  expect(accepted).toHaveLength(MESSAGES)
  // Otherwise the restart would have nothing to resume and the test would prove nothing.
  expect(storedBeforeKill).toBeLessThan(accepted.length)

  const second = await startServer(env)
  servers.push(second)
  const again = withKey(second.url, user)
  // Pro allows 100 requests a minute; one list every 2 s stays well within it.
  const deadline = Date.now() + 90_000
  let total = -1
  while (Date.now() < deadline) {
    const list = await again.GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId: mailbox.mailbox_id }, query: { limit: 1 } } })
    expect(list.response.status).toBe(200)
    total = list.data!.meta.total
    if (total >= accepted.length) break
    await sleep(2000)
  }
  expect(total).toBe(accepted.length)
  // Hold a moment: a duplicate delivered late would show up now.
  await sleep(3000)
  const subjects = await listSubjects(again, mailbox.mailbox_id)
  expect(subjects).toHaveLength(accepted.length)
  expect([...subjects].sort()).toEqual([...accepted].sort())
}, 180_000)
