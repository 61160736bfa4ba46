/**
 * MX hosts in our own network, as a started server meets them by default (OUTBOUND_ALLOW_PRIVATE unset):
 * a tenant who writes a domain's DNS points its MX at 127.0.0.1, where a receiving SMTP server this test
 * runs listens (an "internal relay"), and sends to it. The mta connects to nothing there; the delivery
 * fails, saying why. (Every other sending suite runs its server with OUTBOUND_ALLOW_PRIVATE=true: their
 * receiving servers are on 127.0.0.1 too.)
 */
import { beforeAll, describe, expect, it } from "vitest"
import { createClient } from "../../packages/client/src/fetch-client.ts"
import { withApiKey } from "../support/accounts.ts"
import { newBox } from "../support/mailboxes.ts"
import { useOutboundWorld } from "../support/outbound-world.ts"
import { type SuiteServer, useSuiteServer } from "../support/server.ts"
import { settled } from "../support/settled-delivery.ts"

let suite: SuiteServer

const world = useOutboundWorld({ allowPrivate: false })
beforeAll(() => {
  world.names.set("ssrf.test", { MX: [{ preference: 10, exchange: "mx.ssrf.test" }] })
  world.names.set("mx.ssrf.test", { A: ["127.0.0.1"] })
})

useSuiteServer((s) => {
  suite = s
}, world.env({ OUTBOUND_RETRY_DELAYS: "300ms,600ms" }))

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
    const email = await settled(mailroom, emailId)
    expect(email.delivery).toMatchObject([{
      recipient: "admin@ssrf.test",
      status: "failed",
      attempts: 1,
      last_response: "550 5.4.4 Not sent: mx.ssrf.test resolves only to 127.0.0.1, a loopback address; mail is delivered to public addresses only"
    }])
    // The server on 127.0.0.1 heard nothing: not a transaction, not a recipient.
    expect(world.mx.delivered()).toEqual([])
    expect(world.mx.attempts("admin@ssrf.test")).toEqual([])
  })
})
