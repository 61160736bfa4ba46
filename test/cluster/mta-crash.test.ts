/**
 * The mta killed with SIGKILL mid-delivery (issue 16), in the PostgreSQL + NATS run: an API process
 * takes sends, a separate mta process delivers them to a receiving server that hangs in DATA. After
 * the kill and a restart every queued message is delivered, at least once, each repeat with the
 * same Message-ID (the stored raw is what is sent again).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createClient } from "../../packages/client/src/fetch-client.ts"
import { withApiKey } from "../support/accounts.ts"
import { type DnsServer, startDnsServer } from "../support/dns-server.ts"
import { upgrade } from "../support/billing.ts"
import { type FakeQdrant, startFakeQdrant } from "../support/fake-qdrant.ts"
import { fresh, newBox } from "../support/mailboxes.ts"
import { type MxServer, startMxServer } from "../support/mx-server.ts"
import { type Backend, createBackend, type Server, startServer } from "../support/server.ts"
import { mode } from "../support/services.ts"
import { until } from "../support/wait.ts"

const MESSAGES = 20

let backend: Backend
let qdrant: FakeQdrant
let names: DnsServer
let mx: MxServer
let api: Server
let mta: Server
let env: Record<string, string>

describe.skipIf(mode !== "postgres")("an mta killed mid-delivery", () => {
  beforeAll(async () => {
    backend = await createBackend()
    qdrant = await startFakeQdrant()
    names = await startDnsServer()
    mx = await startMxServer()
    names.set("partner.test", { MX: [{ preference: 10, exchange: "mx.partner.test" }] })
    names.set("mx.partner.test", { A: ["127.0.0.1"] })
    env = { ...backend.env, QDRANT_URL: qdrant.url, DNS_SERVERS: names.address, OUTBOUND_SMTP_PORT: String(mx.port),
      // The receiving server is on 127.0.0.1, which the mta refuses by default.
      OUTBOUND_ALLOW_PRIVATE: "true" }
    api = await startServer({ ...env, ROLES: "api" })
  })

  afterAll(async () => {
    await mta?.kill()
    await api?.stop()
    await backend?.dispose()
    await qdrant?.close()
    await names?.close()
    await mx?.close()
  })

  it("delivers every queued message after a restart, repeats keeping their Message-ID", async () => {
    const box = await newBox(api.url, { user: await withApiKey(api.url) })
    // Enterprise: 500 requests a minute, for the sends and the polling.
    await upgrade(api.url, box.user.apiKey, "enterprise")
    const mailroom = createClient({ baseUrl: api.url, apiKey: box.user.apiKey })
    mx.hold(true)
    mta = await startServer({ ...env, ROLES: "mta" }, { ready: "none" })
    const sent = await Promise.all(Array.from({ length: MESSAGES }, async (_, i) => {
      const answer = await mailroom.POST("/v1/api/mailboxes/{mailboxId}/send", {
        params: { path: { mailboxId: box.mailboxId } },
        body: { to: [`${fresh("r")}@partner.test`], subject: `Message ${i}`, text: `Number ${i}` }
      })
      expect(answer.response.status).toBe(202)
      return answer.data!.data
    }))
    // The mta is in the middle of deliveries: the receiver has read messages it never answered.
    await until("deliveries in flight", async () => (mx.held() > 0 ? true : undefined), 20_000)
    await mta.kill()
    mx.hold(false)
    mta = await startServer({ ...env, ROLES: "mta" }, { ready: "none" })

    const ids = new Set(sent.map((s) => s.message_id))
    await until("every message delivered", async () => {
      const arrived = new Set(mx.delivered().map((m) => /^Message-ID: (\S+)/mi.exec(m.raw.toString("latin1"))?.[1]))
      return [...ids].every((id) => arrived.has(id)) ? true : undefined
    }, 60_000)
    for (const message of mx.delivered()) {
      expect(ids.has(/^Message-ID: (\S+)/mi.exec(message.raw.toString("latin1"))![1]!)).toBe(true)
    }
    await until("every delivery recorded as sent", async () => {
      const statuses = await Promise.all(sent.map(async (s) => {
        const { data } = await mailroom.GET("/v1/api/emails/{emailId}", { params: { path: { emailId: s.email_id } } })
        return data?.data.delivery?.[0]?.status
      }))
      return statuses.every((status) => status === "sent") ? true : undefined
    }, 30_000)
  }, 120_000)
})
