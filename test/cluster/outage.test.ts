/**
 * SMTP under outages (DESIGN.md §4 "SMTP refusals"): while the bus or the database is unreachable a
 * message is answered 451 4.3.0, never 250, and nothing of it is stored; once the service is back the
 * same send is answered 250 and the email becomes readable. PostgreSQL sits behind a TCP proxy the test
 * cuts; the bus is a private nats-server the test stops. All roles run in one process.
 */
import { jetstreamManager } from "@nats-io/jetstream"
import { connect } from "@nats-io/transport-node"
import { randomUUID } from "node:crypto"
import pg from "pg"
import { afterAll, beforeAll, expect, it } from "vitest"
import { streamName } from "../../layers/nats-bus.ts"
import { withApiKey } from "../support/accounts.ts"
import { createFragileBackend, type FragileBackend } from "../support/fragile-backend.ts"
import type { PrivateNats } from "../support/nats-server.ts"
import { startServer, type Server } from "../support/server.ts"
import { connectSmtp, envelope, type SmtpReply } from "../support/smtp-client.ts"
import type { TcpProxy } from "../support/tcp-proxy.ts"
import { anonymous, type MailroomFetchClient, withKey } from "../support/typed-client.ts"
import { sleep, until } from "../support/wait.ts"

/** One SMTP transaction with the bare client, so every reply is seen as it is. */
const send = async (port: number, to: string, message: string): Promise<{ rcpt: SmtpReply; data?: SmtpReply }> => {
  const session = await connectSmtp(port)
  try {
    const { replies } = await envelope(session, "sender@example.com", [to])
    const rcpt = replies[0]!
    if (rcpt.code !== 250) return { rcpt }
    return { rcpt, data: await session.data(message) }
  } finally {
    await session.close()
  }
}

const message = (subject: string) =>
  [
    "From: Sender <sender@example.com>",
    "To: agent@agents.localhost",
    `Subject: ${subject}`,
    `Message-ID: <${randomUUID()}@example.com>`,
    "",
    `Body of ${subject}.`
  ].join("\r\n")

let backend: FragileBackend
let proxy: TcpProxy
let nats: PrivateNats
let server: Server
let db: pg.Client

beforeAll(async () => {
  backend = await createFragileBackend()
  ;({ proxy, nats } = backend)
  server = await startServer(backend.env)
  // The test reads the database directly, around the proxy, to see what was stored whatever it cuts.
  db = new pg.Client({ connectionString: backend.directDatabaseUrl })
  await db.connect()
})

afterAll(async () => {
  await db?.end()
  await server?.stop()
  await backend?.dispose()
})

const newMailbox = async () => {
  const user = await withApiKey(server.url)
  const mailroom = withKey(server.url, user)
  const created = await mailroom.POST("/v1/api/mailboxes", {
    body: { local_part: `outage-${Date.now().toString(36)}`, domain: "agents.localhost" }
  })
  expect(created.response.status).toBe(201)
  return { user, mailroom, mailbox: created.data!.mailbox }
}

const storedIn = async (mailboxId: string) =>
  Number((await db.query("SELECT count(*) AS n FROM emails WHERE mailbox_id = $1", [mailboxId])).rows[0].n)

/** Readable over the API: listed in its mailbox and fetched with its body. */
const readable = async (mailroom: MailroomFetchClient, mailboxId: string, subject: string) => {
  const email = await until(
    `email "${subject}" listed`,
    async () => {
      const list = await mailroom.GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId } } })
      return list.response.status === 200 ? list.data?.data.find((e) => e.subject === subject) : undefined
    },
    30_000,
    250
  )
  const one = await mailroom.GET("/v1/api/emails/{emailId}", { params: { path: { emailId: email.email_id } } })
  expect(one.response.status).toBe(200)
  expect(one.data?.data.text).toContain(`Body of ${subject}.`)
}

it("answers 451 while the bus is down, stores nothing of it, and takes the same message once it is back", async () => {
  const { user, mailroom, mailbox } = await newMailbox()
  const mail = message("Sent while NATS was down")

  await nats.stop()
  const refused = await send(server.smtpPort, mailbox.email_address, mail)
  // RCPT needs only the database; the bus refuses the message itself.
  expect(refused.rcpt.code).toBe(250)
  expect(refused.data).toEqual({ code: 451, text: expect.stringMatching(/^4\.3\.0 /) })

  await nats.start()
  // Wait for the node to be connected again (its readiness pings JetStream), then send once.
  await until("ready again", async () => ((await anonymous(server.url).GET("/readyz")).response.status === 200 ? true : undefined), 60_000, 250)
  const accepted = await send(server.smtpPort, mailbox.email_address, mail)
  expect(accepted.rcpt.code).toBe(250)
  expect(accepted.data?.code).toBe(250)
  await readable(mailroom, mailbox.mailbox_id, "Sent while NATS was down")

  // The refused copy never reaches the bus, not even late (a publish buffered during the outage and
  // flushed on reconnection would be a second email for one accepted message).
  const bus = await connect({ servers: nats.url })
  try {
    const jsm = await jetstreamManager(bus)
    const subject = `mail.inbound.${mailbox.mailbox_id}`
    await until("ingest caught up", async () => {
      const info = await jsm.consumers.info(streamName("", "mail"), "ingest")
      return info.num_pending === 0 && info.num_ack_pending === 0 ? true : undefined
    }, 30_000, 250)
    await sleep(2000)
    const stream = await jsm.streams.info(streamName("", "mail"), { subjects_filter: subject })
    expect(stream.state.subjects?.[subject]).toBe(1)
  } finally {
    await bus.close()
  }
  expect(await storedIn(mailbox.mailbox_id)).toBe(1)
  // The refused message's count was given back: only the accepted one counts against the plan.
  const counted = await db.query("SELECT coalesce(sum(emails), 0) AS n FROM mail_daily_counters WHERE user_id = $1", [user.userId])
  expect(Number(counted.rows[0].n)).toBe(1)
}, 120_000)

it("answers 451 at RCPT while PostgreSQL is cut, and 250 again once it is back", async () => {
  const { mailroom, mailbox } = await newMailbox()
  const mail = message("Sent while PostgreSQL was cut")

  await proxy.cut()
  try {
    const refused = await send(server.smtpPort, mailbox.email_address, mail)
    // The recipient lookup needs the database, so the refusal comes at RCPT and DATA is never reached.
    expect(refused.rcpt).toEqual({ code: 451, text: expect.stringMatching(/^4\.3\.0 /) })
    expect(refused.data).toBeUndefined()
  } finally {
    await proxy.restore()
  }

  await until("ready again", async () => ((await anonymous(server.url).GET("/readyz")).response.status === 200 ? true : undefined), 60_000, 250)
  const accepted = await send(server.smtpPort, mailbox.email_address, mail)
  expect(accepted.rcpt.code).toBe(250)
  expect(accepted.data?.code).toBe(250)
  await readable(mailroom, mailbox.mailbox_id, "Sent while PostgreSQL was cut")
  await sleep(1000)
  expect(await storedIn(mailbox.mailbox_id)).toBe(1)
}, 120_000)
