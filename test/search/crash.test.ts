/**
 * A worker killed (SIGKILL) in the middle of indexing loses nothing: after the restart every email
 * that was accepted becomes searchable by meaning and is announced as `email.processed` under one
 * event id per email. Runs on the embedded stores and on PostgreSQL + NATS (where the unfinished
 * events come back after the index consumer's 20 s ack wait). Embedded by the stand-in for OpenAI,
 * which takes 100 ms a text: indexing takes seconds, as with the offline model, without its CPU
 * (which, beside three other suites on two cores, made this one take minutes).
 */
import nodemailer from "nodemailer"
import { afterAll, beforeAll, expect, it } from "vitest"
import { upgrade } from "../support/billing.ts"
import { type FakeOpenAi, fakeOpenAiEnv, startFakeOpenAi } from "../support/fake-openai.ts"
import { newBox } from "../support/mailboxes.ts"
import { type Receiver, startReceiver } from "../support/receiver.ts"
import { type Backend, createBackend, startServer } from "../support/server.ts"
import { withKey } from "../support/typed-client.ts"
import { until } from "../support/wait.ts"

const EMAILS = 24

let backend: Backend
let receiver: Receiver
let openai: FakeOpenAi

beforeAll(async () => {
  receiver = await startReceiver()
  openai = await startFakeOpenAi({ millisecondsPerInput: 100 })
  backend = await createBackend()
})

afterAll(async () => {
  await receiver?.close()
  await openai?.close()
  await backend?.dispose()
})

it("finishes indexing after a crash: every email searchable, one email.processed event id each", async () => {
  const env = { ...backend.env, ...fakeOpenAiEnv(openai), WEBHOOK_ALLOW_PRIVATE: "true" }
  const first = await startServer(env)
  const box = await newBox(first.url)
  await upgrade(first.url, box.user.apiKey, "enterprise")
  const hook = await withKey(first.url, box.user).POST("/v1/api/webhooks", {
    body: { url: `${receiver.url}/processed`, events: ["email.processed"] }
  })
  expect(hook.response.status).toBe(201)

  // Long bodies: more than one text each to embed.
  const body = (i: number) => `Report number ${i}. ${"The shipment of spare parts was delayed at the port and will arrive next week. ".repeat(25)}`
  const transport = nodemailer.createTransport({ host: "127.0.0.1", port: first.smtpPort, secure: false, ignoreTLS: true, pool: true })
  for (let i = 0; i < EMAILS; i++) await transport.sendMail({ from: "ops@example.com", to: box.address, subject: `Status ${i}`, text: body(i) })
  transport.close()

  await until("some emails are processed", async () => (receiver.received("/processed").length >= 3 ? true : undefined), 60_000, 50)
  await first.kill()
  const beforeCrash = new Set(receiver.received("/processed").map((r) => JSON.parse(r.body).data.email_id)).size
  console.info(`[search crash] ${beforeCrash} of ${EMAILS} announced before the kill`)
  // Otherwise the restart would have nothing to finish and the test would prove nothing.
  expect(beforeCrash).toBeLessThan(EMAILS)

  const second = await startServer(env)
  try {
    const events = await until("every email is announced", async () => {
      const all = receiver.received("/processed")
      const ids = new Set(all.map((r) => JSON.parse(r.body).data.email_id))
      return ids.size === EMAILS ? all : undefined
    }, 120_000, 200)
    // At least once to the receiver, but one event per email: redeliveries carry the same webhook-id.
    const eventIds = new Map<string, Set<string>>()
    for (const event of events) {
      const emailId = JSON.parse(event.body).data.email_id as string
      if (!eventIds.has(emailId)) eventIds.set(emailId, new Set())
      eventIds.get(emailId)!.add(String(event.headers["webhook-id"]))
    }
    expect([...eventIds.values()].every((ids) => ids.size === 1)).toBe(true)

    const found = await withKey(second.url, box.user).POST("/v1/search", { body: { query: "delayed shipment of spare parts", mode: "vector", limit: 100 } })
    expect(found.response.status).toBe(200)
    expect(found.data?.meta.total).toBe(EMAILS)
    const subjects = new Set(found.data?.data.map((r) => r.subject))
    expect(subjects.size).toBe(EMAILS)
  } finally {
    await second.stop()
  }
}, 240_000)
