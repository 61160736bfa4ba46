/**
 * The ingest actor is idempotent: an accepted message delivered again (a worker that died before
 * acknowledging, a publish repeated under a new id) yields one email, one storage charge and one
 * `email.received` event. Runs on real PostgreSQL and NATS in both modes: the test plays the
 * redelivering bus by publishing the stored payload again.
 */
import { jetstreamManager } from "@nats-io/jetstream"
import { connect, type NatsConnection } from "@nats-io/transport-node"
import nodemailer from "nodemailer"
import pg from "pg"
import { afterAll, beforeAll, expect, it } from "vitest"
import { streamName } from "../../layers/nats-bus.ts"
import { withApiKey } from "../support/accounts.ts"
import { type Backend, createBackend, type Server, startServer } from "../support/server.ts"
import { withKey } from "../support/typed-client.ts"
import { until } from "../support/wait.ts"

let backend: Backend
let server: Server
let nats: NatsConnection
let db: pg.Client

beforeAll(async () => {
  backend = await createBackend({ forcePostgres: true })
  server = await startServer(backend.env)
  nats = await connect({ servers: backend.env.NATS_URL! })
  db = new pg.Client({ connectionString: backend.env.DATABASE_URL! })
  await db.connect()
})

afterAll(async () => {
  await db?.end()
  await nats?.close()
  await server?.stop()
  await backend?.dispose()
})

const scalar = async (query: string, params: Array<unknown> = []) => Number((await db.query(query, params)).rows[0].n)

it("stores a redelivered message once, charges it once and announces it once", async () => {
  const user = await withApiKey(server.url)
  const created = await withKey(server.url, user).POST("/v1/api/mailboxes", { body: { local_part: `ingest${Date.now()}`, domain: "agents.localhost" } })
  expect(created.response.status).toBe(201)
  const mailbox = created.data!.mailbox

  const transport = nodemailer.createTransport({ host: "127.0.0.1", port: server.smtpPort, secure: false, ignoreTLS: true })
  const sent = await transport.sendMail({
    from: "sender@example.com",
    to: mailbox.email_address,
    subject: "Once only",
    text: "Deliver me twice, store me once.",
    attachments: [{ filename: "note.txt", content: "attached" }]
  })
  transport.close()
  expect(sent.response).toMatch(/^250 /)

  const emailId = await until("the email stored", async () => {
    const rows = (await db.query("SELECT id FROM emails WHERE mailbox_id = $1", [mailbox.mailbox_id])).rows
    return rows[0]?.id as string | undefined
  }, 30_000, 200)
  const storageBefore = await scalar("SELECT bytes AS n FROM storage_usage WHERE user_id = $1", [user.userId])

  // The message the SMTP node published, as the bus would hand it out again.
  const prefix = backend.env.NATS_PREFIX!
  const jsm = await jetstreamManager(nats)
  const original = await jsm.streams.getMessage(streamName(prefix, "mail"), { last_by_subj: `${prefix}.mail.inbound.${mailbox.mailbox_id}` })
  expect(JSON.parse(new TextDecoder().decode(original!.data))).toMatchObject({ email_id: emailId, mailbox_id: mailbox.mailbox_id })

  // Two more copies under new message ids (so the bus's own de-duplication cannot hide them).
  const js = jsm.jetstream()
  for (const copy of ["again-1", "again-2"]) {
    await js.publish(`${prefix}.mail.inbound.${mailbox.mailbox_id}`, original!.data, { msgID: `${emailId}-${copy}` })
  }
  // Wait until the ingest consumer has acknowledged everything in the stream.
  const mailStream = streamName(prefix, "mail")
  await until("ingest caught up", async () => {
    const info = await jsm.consumers.info(mailStream, "ingest")
    return info.num_pending === 0 && info.num_ack_pending === 0 && info.delivered.stream_seq >= 3 ? true : undefined
  }, 30_000, 200)

  expect(await scalar("SELECT count(*) AS n FROM emails WHERE mailbox_id = $1", [mailbox.mailbox_id])).toBe(1)
  expect(await scalar("SELECT count(*) AS n FROM attachments WHERE email_id = $1", [emailId])).toBe(1)
  expect(await scalar("SELECT bytes AS n FROM storage_usage WHERE user_id = $1", [user.userId])).toBe(storageBefore)

  // One email.received event for it: the announcements share one event id, which the bus keeps once.
  const events = await jsm.streams.info(streamName(prefix, "events"), { subjects_filter: `${prefix}.events.email.received` })
  expect(events.state.subjects?.[`${prefix}.events.email.received`]).toBe(1)
  const event = await jsm.streams.getMessage(streamName(prefix, "events"), { last_by_subj: `${prefix}.events.email.received` })
  expect(JSON.parse(new TextDecoder().decode(event!.data))).toMatchObject({
    event: "email.received",
    namespace: user.userId,
    data: { email_id: emailId, mailbox_id: mailbox.mailbox_id, subject: "Once only", has_attachments: true }
  })
})
