/**
 * A conversation across two Mailroom instances (issue 16), each the mail host of its own domain,
 * finding the other through MX records a DNS server this test runs publishes: Ann's agent on A
 * writes to Bob on B, Bob's agent replies, Ann's agent replies again. Both sides hold one thread of
 * three, and the last message names the whole conversation in In-Reply-To and References.
 */
import { simpleParser } from "mailparser"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { withApiKey } from "../support/accounts.ts"
import { upgrade } from "../support/billing.ts"
import { type DnsServer, startDnsServer } from "../support/dns-server.ts"
import { fresh } from "../support/mailboxes.ts"
import { type Backend, createBackend, freePort, type Server, startServer } from "../support/server.ts"
import { type MailroomFetchClient, withKey } from "../support/typed-client.ts"
import { until } from "../support/wait.ts"

interface Side {
  readonly backend: Backend
  readonly server: Server
  readonly mailroom: MailroomFetchClient
  readonly apiKey: string
  readonly mailboxId: string
  readonly address: string
}

let names: DnsServer
let a: Side
let b: Side

/** An instance hosting `domain`, delivering outbound mail to `peerSmtpPort` (the other instance). */
const instance = async (domain: string, smtpPort: number, peerSmtpPort: number): Promise<Side> => {
  const backend = await createBackend()
  const server = await startServer({
    ...backend.env,
    SMTP_PORT: String(smtpPort),
    SHARED_DOMAINS: domain,
    DNS_SERVERS: names.address,
    OUTBOUND_SMTP_PORT: String(peerSmtpPort),
    // The other instance is on 127.0.0.1, which the mta refuses by default.
    OUTBOUND_ALLOW_PRIVATE: "true"
  })
  const user = await withApiKey(server.url)
  // Waiting for mail between two busy instances can take many polls: more than the free plan's 20 a minute.
  await upgrade(server.url, user.apiKey, "pro")
  const mailroom = withKey(server.url, user)
  const created = await mailroom.POST("/v1/api/mailboxes", { body: { local_part: fresh("agent"), domain } })
  const mailbox = created.data!.mailbox
  return {
    backend,
    server,
    mailroom,
    apiKey: user.apiKey,
    mailboxId: mailbox.mailbox_id,
    address: mailbox.email_address
  }
}

beforeAll(async () => {
  names = await startDnsServer()
  for (const domain of ["alpha.test", "beta.test"]) {
    names.set(domain, { MX: [{ preference: 10, exchange: `mx.${domain}` }] })
    names.set(`mx.${domain}`, { A: ["127.0.0.1"] })
  }
  const [portA, portB] = [await freePort(), await freePort()]
  ;[a, b] = await Promise.all([instance("alpha.test", portA, portB), instance("beta.test", portB, portA)])
})

afterAll(async () => {
  for (const side of [a, b]) {
    await side?.server.stop()
    await side?.backend.dispose()
  }
  await names?.close()
})

/** The newest email of `side`'s mailbox once it has `count`; polling more gently the longer it waits. */
const inbox = (side: Side, count: number) =>
  until(`${count} emails at ${side.address}`, async () => {
    const { data, response } = await side.mailroom.GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId: side.mailboxId } } })
    if (!data) throw new Error(`listing ${side.address}: HTTP ${response.status}`)
    return data.data.length >= count ? data.data : undefined
  }, 30_000, 100, 1_000)

const raw = async (side: Side, emailId: string) =>
  simpleParser(Buffer.from((await side.mailroom.GET("/v1/api/emails/{emailId}/raw", { params: { path: { emailId } }, parseAs: "arrayBuffer" })).data!))

describe("a conversation between two Mailroom instances", () => {
  it("A writes, B's agent replies, A's agent replies again: one thread of three on each side", async () => {
    const first = await a.mailroom.POST("/v1/api/mailboxes/{mailboxId}/send", {
      params: { path: { mailboxId: a.mailboxId } },
      body: { to: [b.address], subject: "Quarterly numbers", text: "Bob, can you send the Q3 numbers?" }
    })
    expect(first.response.status).toBe(202)

    const [atB] = await inbox(b, 1)
    expect(atB).toMatchObject({ subject: "Quarterly numbers", from: a.address, direction: "inbound", message_id: first.data!.data.message_id })
    const second = await b.mailroom.POST("/v1/api/emails/{emailId}/reply", {
      params: { path: { emailId: atB!.email_id } },
      body: { text: "Here they are: 42." }
    })
    expect(second.response.status).toBe(202)
    expect(second.data!.data.thread_id).toBe(atB!.thread_id)

    const atA = (await inbox(a, 2)).find((e) => e.direction === "inbound")!
    expect(atA).toMatchObject({ subject: "Re: Quarterly numbers", from: b.address, thread_id: first.data!.data.thread_id })
    const third = await a.mailroom.POST("/v1/api/emails/{emailId}/reply", {
      params: { path: { emailId: atA.email_id } },
      body: { text: "Thanks!" }
    })
    expect(third.response.status).toBe(202)
    expect(third.data!.data.thread_id).toBe(first.data!.data.thread_id)

    const lastAtB = (await inbox(b, 3))[0]!
    expect(lastAtB).toMatchObject({ subject: "Re: Quarterly numbers", thread_id: atB!.thread_id })
    const parsed = await raw(b, lastAtB.email_id)
    expect(parsed.inReplyTo).toBe(second.data!.data.message_id)
    expect(parsed.references).toEqual([first.data!.data.message_id, second.data!.data.message_id])

    for (const [side, threadId] of [[a, first.data!.data.thread_id], [b, atB!.thread_id]] as const) {
      const thread = await side.mailroom.GET("/v1/api/threads/{threadId}", { params: { path: { threadId } } })
      expect(thread.response.status).toBe(200)
      expect(thread.data?.data.emails.map((e) => [e.direction, e.subject])).toEqual([
        [side === a ? "outbound" : "inbound", "Quarterly numbers"],
        [side === a ? "inbound" : "outbound", "Re: Quarterly numbers"],
        [side === a ? "outbound" : "inbound", "Re: Quarterly numbers"]
      ])
    }
  })
})
