/**
 * The embedded single process (PGlite + the in-process bus kept in SQL) keeps its promise across a
 * crash: messages answered 250 but not yet ingested when the process is killed (SIGKILL) are ingested
 * after a restart on the same DATA_DIR, each exactly once. Always embedded, whatever the mode.
 */
import nodemailer from "nodemailer"
import { randomUUID } from "node:crypto"
import { afterAll, beforeAll, expect, it } from "vitest"
import { type Client, client, withApiKey } from "../support/http.ts"
import { type FakeOpenAi, fakeOpenAiEnv, startFakeOpenAi } from "../support/fake-openai.ts"
import { type Server, startServer } from "../support/server.ts"
import { createDataDir } from "../support/services.ts"
import { sleep } from "../support/wait.ts"

const MESSAGES = 150
/**
 * Sessions sending at once. With 6, ingestion kept pace with acceptance (149 or 150 of 150 stored by
 * the last 250) and there was nothing left to resume; with 16 roughly 60 of 150 were stored by then.
 */
const CONNECTIONS = 16

/** The pro plan through the local payment provider: 150 emails a day are above the free plan's 100. */
const upgradeToPro = async (server: Server, api: Client, apiKey: string) => {
  const checkout = await api.post("/v1/billing/checkout", {
    apiKey,
    body: { plan: "pro", successUrl: "https://agent.example/done", cancelUrl: "https://agent.example/cancel" }
  })
  if (checkout.status !== 200) throw new Error(`checkout: ${checkout.status} ${checkout.text}`)
  const confirm = await fetch(`${server.url}${new URL(checkout.body.data.url).pathname}`, { method: "POST", redirect: "manual" })
  if (confirm.status !== 303) throw new Error(`confirm: ${confirm.status}`)
}

/** Every email of a mailbox (subjects), over as many pages as it takes. */
const listSubjects = async (api: Client, apiKey: string, mailboxId: string) => {
  const subjects: Array<string> = []
  for (let offset = 0; ; offset += 100) {
    const page = await api.get(`/v1/api/mailboxes/${mailboxId}/emails?limit=100&offset=${offset}`, { apiKey })
    if (page.status !== 200) throw new Error(`list: ${page.status} ${page.text}`)
    subjects.push(...(page.body.data as Array<{ subject: string }>).map((email) => email.subject))
    if (!page.body.meta.hasMore) return subjects
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
  const api = client(first.url)
  const user = await withApiKey(api)
  await upgradeToPro(first, api, user.apiKey)
  const created = await api.post("/v1/api/mailboxes", {
    apiKey: user.apiKey,
    body: { local_part: `resume-${Date.now().toString(36)}`, domain: "agents.localhost" }
  })
  expect(created.status).toBe(201)
  const mailbox = created.body.mailbox as { mailbox_id: string; email_address: string }

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
  const before = await api.get(`/v1/api/mailboxes/${mailbox.mailbox_id}/emails?limit=1`, { apiKey: user.apiKey })
  await first.kill()
  expect(before.status).toBe(200)
  const storedBeforeKill = before.body.meta.total as number
  console.info(`[resume] ${accepted.length} accepted; ${storedBeforeKill} stored just before the kill`)
  expect(accepted).toHaveLength(MESSAGES)
  // Otherwise the restart would have nothing to resume and the test would prove nothing.
  expect(storedBeforeKill).toBeLessThan(accepted.length)

  const second = await startServer(env)
  servers.push(second)
  const again = client(second.url)
  // Pro allows 100 requests a minute; one list every 2 s stays well within it.
  const deadline = Date.now() + 90_000
  let total = -1
  while (Date.now() < deadline) {
    const list = await again.get(`/v1/api/mailboxes/${mailbox.mailbox_id}/emails?limit=1`, { apiKey: user.apiKey })
    expect(list.status).toBe(200)
    total = list.body.meta.total
    if (total >= accepted.length) break
    await sleep(2000)
  }
  expect(total).toBe(accepted.length)
  // Hold a moment: a duplicate delivered late would show up now.
  await sleep(3000)
  const subjects = await listSubjects(again, user.apiKey, mailbox.mailbox_id)
  expect(subjects).toHaveLength(accepted.length)
  expect([...subjects].sort()).toEqual([...accepted].sort())
}, 180_000)
