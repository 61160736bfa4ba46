/**
 * MX hosts in our own network, as a started server meets them by default (OUTBOUND_ALLOW_PRIVATE unset):
 * a tenant who writes a domain's DNS points its MX at 127.0.0.1, where a receiving SMTP server this test
 * runs listens (an "internal relay"), and sends to it. The mta connects to nothing there; the delivery
 * fails, saying why. (Every other sending suite runs its server with OUTBOUND_ALLOW_PRIVATE=true: their
 * receiving servers are on 127.0.0.1 too.)
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createClient } from "../../packages/client/src/fetch-client.ts"
import { withApiKey } from "../support/accounts.ts"
import { type DnsServer, startDnsServer } from "../support/dns-server.ts"
import { newBox } from "../support/mailboxes.ts"
import { type MxServer, startMxServer } from "../support/mx-server.ts"
import { type SuiteServer, useSuiteServer } from "../support/server.ts"
import { until } from "../support/wait.ts"

let mx: MxServer
let names: DnsServer
let suite: SuiteServer

beforeAll(async () => {
  mx = await startMxServer()
  names = await startDnsServer()
  names.set("ssrf.test", { MX: [{ preference: 10, exchange: "mx.ssrf.test" }] })
  names.set("mx.ssrf.test", { A: ["127.0.0.1"] })
})

afterAll(async () => {
  await mx?.close()
  await names?.close()
})

useSuiteServer((s) => {
  suite = s
}, {
  // Set before the server starts: the suite's beforeAll above runs first.
  get DNS_SERVERS() {
    return names.address
  },
  get OUTBOUND_SMTP_PORT() {
    return String(mx.port)
  },
  OUTBOUND_RETRY_DELAYS: "300ms,600ms"
} as Record<string, string>)

describe("MX hosts on non-public addresses (OUTBOUND_ALLOW_PRIVATE unset)", () => {
  it("are not connected to: the delivery fails, its last_response naming the host and the address", async () => {
    const box = await newBox(suite.url, { user: await withApiKey(suite.url) })
    const mailroom = createClient({ baseUrl: suite.url, apiKey: box.user.apiKey })
    const sent = await mailroom.POST("/v1/api/mailboxes/{mailboxId}/send", {
      params: { path: { mailboxId: box.mailboxId } },
      body: { to: ["admin@ssrf.test"], subject: "Hello, internal relay", text: "Who reads this?" } as never
    })
    expect(sent.response.status).toBe(202)
    const emailId = sent.data!.data.email_id
    const email = await until(`delivery of ${emailId} settled`, async () => {
      const { data } = await mailroom.GET("/v1/api/emails/{emailId}", { params: { path: { emailId } } })
      const delivery = data?.data.delivery ?? []
      return delivery.length > 0 && delivery.every((d) => d.status !== "queued" && d.status !== "deferred") ? data!.data : undefined
    }, 20_000, 100, 500)
    expect(email.delivery).toMatchObject([{
      recipient: "admin@ssrf.test",
      status: "failed",
      attempts: 1,
      last_response: "550 5.4.4 Not sent: mx.ssrf.test resolves only to 127.0.0.1, a loopback address; mail is delivered to public addresses only"
    }])
    // The server on 127.0.0.1 heard nothing: not a transaction, not a recipient.
    expect(mx.delivered()).toEqual([])
    expect(mx.attempts("admin@ssrf.test")).toEqual([])
  })
})
