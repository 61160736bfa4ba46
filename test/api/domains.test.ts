/**
 * Custom domains (SPEC "Domains"): registration, DNS verification against a DNS server the test runs
 * (UDP and TCP), mailboxes and mail on a verified domain, migration and deletion.
 */
import nodemailer from "nodemailer"
import { afterAll, describe, expect, it } from "vitest"
import { upgrade } from "../support/billing.ts"
import { type DnsServer, startDnsServer } from "../support/dns-server.ts"
import { client, type Client, isoMillis, withApiKey } from "../support/http.ts"
import { fresh } from "../support/mailboxes.ts"
import { type SuiteServer, useSuiteServer } from "../support/server.ts"
import { connectSmtp } from "../support/smtp-client.ts"
import { until } from "../support/wait.ts"

const MX_HOST = "mx.agents.localhost"

const dns: DnsServer = await startDnsServer()
afterAll(() => dns.close())

let suite: SuiteServer
let api: Client
useSuiteServer((s) => {
  suite = s
  api = client(s.url)
}, { DNS_SERVERS: dns.address })

type User = Awaited<ReturnType<typeof withApiKey>>

const proUser = async () => {
  const user = await withApiKey(api)
  await upgrade(api, suite.url, user.apiKey, "pro")
  return user
}

const register = async (user: User, name = `${fresh("corp")}.test`) => {
  const reply = await api.post("/v1/api/domains", { apiKey: user.apiKey, body: { domain: name } })
  if (reply.status !== 201) throw new Error(`domain not created: ${reply.status} ${reply.text}`)
  return reply.body.data as {
    domain_id: string
    domain_name: string
    verification_token: string
    dns_records: Array<{ type: string; name: string; value: string }>
  }
}

/** Publish the records SPEC asks for, and verify. */
const verified = async (user: User, name?: string) => {
  const domain = await register(user, name)
  dns.set(domain.domain_name, { TXT: [[domain.verification_token]], MX: [{ preference: 10, exchange: MX_HOST }] })
  const reply = await api.post(`/v1/api/domains/${domain.domain_id}/verify`, { apiKey: user.apiKey })
  if (reply.status !== 200) throw new Error(`not verified: ${reply.status} ${reply.text}`)
  return domain
}

const mailbox = async (user: User, local: string, domain: string) =>
  api.post("/v1/api/mailboxes", { apiKey: user.apiKey, body: { local_part: local, domain } })

const rcpt = async (address: string) => {
  const session = await connectSmtp(suite.server.smtpPort)
  await session.command("EHLO test.example")
  await session.command("MAIL FROM:<sender@example.com>")
  const reply = await session.command(`RCPT TO:<${address}>`)
  await session.close()
  return reply.code
}

const send = async (to: string, subject: string) => {
  const transport = nodemailer.createTransport({ host: "127.0.0.1", port: suite.server.smtpPort, secure: false, ignoreTLS: true })
  await transport.sendMail({ from: "sender@example.com", to, subject, text: "Hello." })
  transport.close()
}

const inbox = (user: User, mailboxId: string, count: number) =>
  until(`${count} emails`, async () => {
    const reply = await api.get(`/v1/api/mailboxes/${mailboxId}/emails`, { apiKey: user.apiKey })
    return reply.body.data?.length >= count ? reply.body.data as Array<{ subject: string }> : undefined
  }, 20_000, 500)

describe("registering", () => {
  it("the free plan's limit is FREE_MAX_CUSTOM_DOMAINS (0): listed in meta, and a create is 403 DOMAIN_QUOTA", async () => {
    const user = await withApiKey(api)
    const list = await api.get("/v1/api/domains", { apiKey: user.apiKey })
    expect(list.status).toBe(200)
    expect(list.body).toEqual({
      success: true,
      data: [],
      meta: { plan: "free", domain_limit: 0, domain_count: 0, can_add_domain: false, total: 0, limit: 20, offset: 0, hasMore: false }
    })
    const reply = await api.post("/v1/api/domains", { apiKey: user.apiKey, body: { domain: "free-plan.test" } })
    expect(reply.status).toBe(403)
    expect(reply.body).toEqual({
      success: false,
      error: { code: "DOMAIN_QUOTA", message: "The free plan does not include custom domains", details: { count: 0, limit: 0, plan: "free" } }
    })
  })

  it("creates a domain (lower-cased) with its verification token and the records to publish; every list form shows it", async () => {
    const user = await proUser()
    const name = `${fresh("Acme")}.Test.`
    const reply = await api.post("/v1/api/domains", { apiKey: user.apiKey, body: { domain: name } })
    expect(reply.status).toBe(201)
    const expected = name.toLowerCase().replace(/\.$/, "")
    expect(reply.body).toEqual({
      success: true,
      data: {
        domain_id: expect.stringMatching(/^dom_[0-9a-f]{24}$/),
        domain_name: expected,
        verification_token: expect.stringMatching(/^mailroom-verification=[0-9a-f]{32}$/),
        verified: false,
        mx_configured: false,
        dkim_configured: false,
        spf_configured: false,
        created_at: expect.stringMatching(isoMillis),
        mailbox_count: 0,
        dns_records: [
          { type: "TXT", name: "@", value: reply.body.data.verification_token },
          { type: "MX", name: "@", value: MX_HOST, priority: 10 },
          { type: "TXT", name: "@", value: "v=spf1 mx ~all" },
          { type: "TXT", name: "mailroom1._domainkey", value: expect.stringMatching(/^v=DKIM1; k=rsa; p=[A-Za-z0-9+/=]+$/) }
        ]
      }
    })
    const { dns_records: _, ...domain } = reply.body.data
    const meta = { plan: "pro", domain_limit: 10, domain_count: 1, can_add_domain: true }
    const firstPage = { ...meta, total: 1, limit: 20, offset: 0, hasMore: false }
    expect((await api.get("/v1/api/domains", { apiKey: user.apiKey })).body).toEqual({ success: true, data: [domain], meta: firstPage })
    expect((await api.get("/api/domains", { bearer: user.accessToken })).body).toEqual({ success: true, data: [domain], meta: firstPage })
    expect((await api.get("/v1/domains?limit=5", { apiKey: user.apiKey })).body).toEqual({
      success: true,
      data: [domain],
      meta: { ...meta, total: 1, limit: 5, offset: 0, hasMore: false }
    })
    expect((await api.get("/v1/domains?offset=1", { apiKey: user.apiKey })).body.data).toEqual([])
    const second = await register(user)
    const ascending = await api.get("/v1/domains?sort=createdAt:asc&limit=1", { apiKey: user.apiKey })
    expect(ascending.body.data.map((d: { domain_id: string }) => d.domain_id)).toEqual([domain.domain_id])
    expect(ascending.body.meta).toMatchObject({ domain_count: 2, total: 2, limit: 1, offset: 0, hasMore: true })
    const descending = await api.get("/v1/domains?sort=createdAt:desc", { apiKey: user.apiKey })
    expect(descending.body.data.map((d: { domain_id: string }) => d.domain_id)).toEqual([second.domain_id, domain.domain_id])
    const bad = await api.get("/v1/domains?limit=500&sort=name:up", { apiKey: user.apiKey })
    expect(bad.status).toBe(400)
    expect(Object.keys(bad.body.error.details).sort()).toEqual(["limit", "sort"])
  })

  it("stores an internationalized name in punycode", async () => {
    const user = await proUser()
    const domain = await register(user, `bücher-${fresh("x")}.test`)
    expect(domain.domain_name).toMatch(/^xn--bcher-.*\.test$/)
  })

  it.each(["", "localhost", "not a domain", "1.2.3.4", "-bad.test", "a..b.test", "bad-.test", "example.123", `${"a".repeat(64)}.test`])(
    "refuses the name %j: 400 VALIDATION_ERROR on details.domain (dashboard: details.field_errors.domain)",
    async (name) => {
      const user = await proUser()
      const reply = await api.post("/v1/api/domains", { apiKey: user.apiKey, body: { domain: name } })
      expect(reply.status).toBe(400)
      expect(reply.body).toEqual({ success: false, error: { code: "VALIDATION_ERROR", message: expect.any(String), details: { domain: expect.any(String) } } })
      const dashboard = await api.post("/api/domains", { bearer: user.accessToken, body: { domain: name } })
      expect(dashboard.status).toBe(400)
      expect(dashboard.body.error).toEqual({ code: "VALIDATION_ERROR", message: expect.any(String), details: { field_errors: { domain: expect.any(String) } } })
    }
  )

  it("a body without domain, or none at all, is refused", async () => {
    const user = await proUser()
    const missing = await api.post("/v1/api/domains", { apiKey: user.apiKey, body: { name: "x.test" } })
    expect(missing.status).toBe(400)
    expect(missing.body.error).toEqual({ code: "VALIDATION_ERROR", message: expect.any(String), details: { domain: "is required" } })
    const none = await api.post("/v1/api/domains", { apiKey: user.apiKey })
    expect(none.status).toBe(400)
    expect(none.body.error.code).toBe("BAD_REQUEST")
  })

  it("a domain belongs to one account: registered anywhere, or shared, is 409 CONFLICT", async () => {
    const first = await proUser()
    const second = await proUser()
    const domain = await register(first)
    for (const user of [first, second]) {
      const again = await api.post("/v1/api/domains", { apiKey: user.apiKey, body: { domain: domain.domain_name.toUpperCase() } })
      expect(again.status).toBe(409)
      expect(again.body.error).toEqual({
        code: "CONFLICT",
        message: `The domain ${domain.domain_name} is already registered`,
        details: { domain: domain.domain_name }
      })
    }
    const shared = await api.post("/v1/api/domains", { apiKey: first.apiKey, body: { domain: "agents.localhost" } })
    expect(shared.status).toBe(409)
    expect(shared.body.error.code).toBe("CONFLICT")
  })

  it("the pro plan stops at 10 domains", async () => {
    const user = await proUser()
    const made = await Promise.all(Array.from({ length: 11 }, () => api.post("/v1/api/domains", { apiKey: user.apiKey, body: { domain: `${fresh("many")}.test` } })))
    expect(made.filter((r) => r.status === 201)).toHaveLength(10)
    const refused = made.find((r) => r.status === 403)!
    expect(refused.body.error).toEqual({
      code: "DOMAIN_QUOTA",
      message: "The pro plan allows 10 custom domains",
      details: { count: 10, limit: 10, plan: "pro" }
    })
    const list = await api.get("/v1/api/domains?limit=3&offset=8", { apiKey: user.apiKey })
    expect(list.body.data).toHaveLength(2)
    expect(list.body.meta).toEqual({
      plan: "pro",
      domain_limit: 10,
      domain_count: 10,
      can_add_domain: false,
      total: 10,
      limit: 3,
      offset: 8,
      hasMore: false
    })
  })
})

describe("listing", () => {
  it("GET /v1/api/domains and /api/domains page with limit, offset and sort; domain_count counts every domain", async () => {
    const user = await proUser()
    const older = await register(user)
    const newer = await register(user)
    for (const [path, credential] of [["/v1/api/domains", { apiKey: user.apiKey }], ["/api/domains", { bearer: user.accessToken }]] as const) {
      const first = await api.get(`${path}?limit=1`, credential)
      expect(first.status).toBe(200)
      expect(first.body.data.map((d: { domain_id: string }) => d.domain_id)).toEqual([newer.domain_id])
      expect(first.body.meta).toEqual({
        plan: "pro",
        domain_limit: 10,
        domain_count: 2,
        can_add_domain: true,
        total: 2,
        limit: 1,
        offset: 0,
        hasMore: true
      })
      const second = await api.get(`${path}?limit=1&offset=1`, credential)
      expect(second.body.data.map((d: { domain_id: string }) => d.domain_id)).toEqual([older.domain_id])
      expect(second.body.meta).toMatchObject({ domain_count: 2, total: 2, limit: 1, offset: 1, hasMore: false })
      const ascending = await api.get(`${path}?sort=createdAt:asc`, credential)
      expect(ascending.body.data.map((d: { domain_id: string }) => d.domain_id)).toEqual([older.domain_id, newer.domain_id])
      const past = await api.get(`${path}?offset=5`, credential)
      expect(past.body.data).toEqual([])
      expect(past.body.meta).toMatchObject({ domain_count: 2, total: 2, offset: 5, hasMore: false })
    }
  })

  it.each([
    ["limit=0", "limit"],
    ["limit=101", "limit"],
    ["limit=ten", "limit"],
    ["offset=-1", "offset"],
    ["offset=1.5", "offset"],
    ["sort=domain_name:asc", "sort"]
  ])("refuses ?%s with 400 VALIDATION_ERROR naming %s, on every list form", async (query, field) => {
    const user = await withApiKey(api)
    for (const [path, credential] of [
      ["/v1/api/domains", { apiKey: user.apiKey }],
      ["/api/domains", { bearer: user.accessToken }],
      ["/v1/domains", { apiKey: user.apiKey }]
    ] as const) {
      const reply = await api.get(`${path}?${query}`, credential)
      expect(reply.status).toBe(400)
      expect(reply.body.success).toBe(false)
      expect(reply.body.error.code).toBe("VALIDATION_ERROR")
      expect(Object.keys(reply.body.error.details)).toEqual([field])
    }
  })
})

describe("verifying", () => {
  it("fails with VERIFICATION_FAILED until the TXT record exists, then succeeds; the MX is reported", async () => {
    const user = await proUser()
    const domain = await register(user)
    const path = `/v1/api/domains/${domain.domain_id}/verify`

    const before = await api.post(path, { apiKey: user.apiKey })
    expect(before.status).toBe(400)
    expect(before.body).toEqual({
      success: false,
      error: {
        code: "VERIFICATION_FAILED",
        message: expect.any(String),
        details: { expected_txt_record: domain.verification_token, instructions: expect.stringContaining(domain.verification_token) }
      }
    })
    expect(before.body.error.details.instructions).toContain(MX_HOST)

    // Someone else's TXT value is not ownership.
    dns.set(domain.domain_name, { TXT: [["mailroom-verification=0000"], ["v=spf1 -all"]] })
    expect((await api.post(path, { apiKey: user.apiKey })).body.error.code).toBe("VERIFICATION_FAILED")

    dns.set(domain.domain_name, { TXT: [["v=spf1 -all"], [domain.verification_token]] })
    const txtOnly = await api.post(path, { apiKey: user.apiKey })
    expect(txtOnly.status).toBe(200)
    expect(txtOnly.body).toEqual({
      success: true,
      data: {
        domain_id: domain.domain_id,
        domain_name: domain.domain_name,
        verification_token: domain.verification_token,
        verified: true,
        mx_configured: false,
        // "v=spf1 -all" lets no host send: not the record asked for.
        dkim_configured: false,
        spf_configured: false,
        created_at: expect.stringMatching(isoMillis),
        mailbox_count: 0
      }
    })

    // An MX with a trailing dot, as zone files write it; the most preferred MX must be ours.
    dns.set(domain.domain_name, {
      TXT: [[domain.verification_token]],
      MX: [{ preference: 5, exchange: "mail.elsewhere.test." }, { preference: 10, exchange: `${MX_HOST}.` }]
    })
    expect((await api.post(path, { apiKey: user.apiKey })).body.data.mx_configured).toBe(false)
    dns.set(domain.domain_name, { TXT: [[domain.verification_token]], MX: [{ preference: 10, exchange: `${MX_HOST}.` }] })
    const full = await api.post(path, { apiKey: user.apiKey })
    expect(full.body.data).toMatchObject({ verified: true, mx_configured: true, dkim_configured: false, spf_configured: false })
    expect((await api.get("/v1/api/domains", { apiKey: user.apiKey })).body.data[0]).toMatchObject({ verified: true, mx_configured: true })

    // The sending records, as dns_records asked: SPF beside the token, the DKIM key in 255-byte strings.
    const dkim = domain.dns_records.find((r) => r.name.endsWith("._domainkey"))!
    dns.set(domain.domain_name, {
      TXT: [[domain.verification_token], ["v=spf1 mx ~all"]],
      MX: [{ preference: 10, exchange: `${MX_HOST}.` }]
    })
    dns.set(`${dkim.name}.${domain.domain_name}`, { TXT: [dkim.value.match(/.{1,255}/g)!] })
    const sending = await api.post(path, { apiKey: user.apiKey })
    expect(sending.body.data).toMatchObject({ verified: true, mx_configured: true, dkim_configured: true, spf_configured: true })
  })

  it("a TXT record split into several strings verifies, over TCP when the UDP answer is truncated", async () => {
    const user = await proUser()
    const domain = await register(user)
    const token = domain.verification_token
    dns.set(domain.domain_name, {
      TXT: [[token.slice(0, 12), token.slice(12, 30), token.slice(30)]],
      MX: [{ preference: 10, exchange: MX_HOST }],
      tcpOnly: true
    })
    const reply = await api.post(`/api/domains/${domain.domain_id}/verify`, { bearer: user.accessToken })
    expect(reply.status).toBe(200)
    expect(reply.body.data).toMatchObject({ verified: true, mx_configured: true })
    expect(dns.questions()).toContain(`TXT ${domain.domain_name} udp`)
    expect(dns.questions()).toContain(`TXT ${domain.domain_name} tcp`)
  })

  it("another account's domain is not found", async () => {
    const owner = await proUser()
    const stranger = await proUser()
    const domain = await register(owner)
    const notFound = { success: false, error: { code: "NOT_FOUND", message: "Domain not found", details: { domain_id: domain.domain_id } } }
    expect((await api.post(`/v1/api/domains/${domain.domain_id}/verify`, { apiKey: stranger.apiKey })).body).toEqual(notFound)
    expect((await api.delete(`/v1/api/domains/${domain.domain_id}`, { apiKey: stranger.apiKey })).body).toEqual(notFound)
    const migrate = await api.post(`/v1/api/domains/${domain.domain_id}/migrate-mailboxes`, {
      apiKey: stranger.apiKey,
      body: { target_domain: "agents.localhost", dry_run: true }
    })
    expect(migrate.body).toEqual(notFound)
  })
})

describe("mailboxes and mail on a custom domain", () => {
  it("pro: no mailbox before verification (422 DOMAIN_NOT_ALLOWED), one after; mail to it arrives, mail to other names on it is refused", async () => {
    const user = await proUser()
    const domain = await register(user)
    const early = await mailbox(user, "sales-team", domain.domain_name)
    expect(early.status).toBe(422)
    expect(early.body.error).toEqual({
      code: "DOMAIN_NOT_ALLOWED",
      message: expect.any(String),
      details: { domain: domain.domain_name, plan: "pro" }
    })
    expect(await rcpt(`sales-team@${domain.domain_name}`)).toBe(550)

    dns.set(domain.domain_name, { TXT: [[domain.verification_token]], MX: [{ preference: 10, exchange: MX_HOST }] })
    expect((await api.post(`/v1/api/domains/${domain.domain_id}/verify`, { apiKey: user.apiKey })).status).toBe(200)
    const created = await mailbox(user, "sales-team", domain.domain_name.toUpperCase())
    expect(created.status).toBe(201)
    expect(created.body.mailbox).toMatchObject({ email_address: `sales-team@${domain.domain_name}`, domain: domain.domain_name })

    await send(`Sales-Team@${domain.domain_name}`, "Custom domain mail")
    expect((await inbox(user, created.body.mailbox.mailbox_id, 1))[0]!.subject).toBe("Custom domain mail")
    expect(await rcpt(`nobody-here@${domain.domain_name}`)).toBe(550)
    expect((await api.get("/v1/api/domains", { apiKey: user.apiKey })).body.data[0].mailbox_count).toBe(1)
  })

  it("a registered but unverified domain gets no mail, and another account cannot use someone's verified domain", async () => {
    const owner = await proUser()
    const domain = await verified(owner)
    const other = await proUser()
    const reply = await mailbox(other, "intruder", domain.domain_name)
    expect(reply.status).toBe(422)
    expect(reply.body.error.code).toBe("DOMAIN_NOT_ALLOWED")
    const unverified = await register(owner)
    expect(await rcpt(`anyone-at@${unverified.domain_name}`)).toBe(550)
  })
})

describe("migrating and deleting", () => {
  it("previews, then moves every mailbox with its id and mail; a taken address gets a 6-hex suffix; the old addresses stop receiving", async () => {
    const user = await proUser()
    const source = await verified(user)
    const alice = (await mailbox(user, fresh("alice"), source.domain_name)).body.mailbox
    const bobby = (await mailbox(user, fresh("bobby"), source.domain_name)).body.mailbox
    const aliceLocal = alice.email_address.split("@")[0]
    // Someone else already has alice's name on the shared domain.
    const stranger = await withApiKey(api)
    expect((await mailbox(stranger, aliceLocal, "agents.localhost")).status).toBe(201)
    await send(alice.email_address, "Before the move")
    await inbox(user, alice.mailbox_id, 1)

    const path = `/v1/api/domains/${source.domain_id}/migrate-mailboxes`
    const preview = await api.post(path, { apiKey: user.apiKey, body: { target_domain: "agents.localhost", dry_run: true } })
    expect(preview.status).toBe(200)
    const renamed = expect.stringMatching(new RegExp(`^${aliceLocal}\\.[0-9a-f]{6}@agents\\.localhost$`))
    expect(preview.body).toEqual({
      success: true,
      data: {
        dry_run: true,
        migrated_count: 2,
        renamed_count: 1,
        migrations: [
          { mailbox_id: alice.mailbox_id, from_email: alice.email_address, to_email: renamed, renamed: true },
          { mailbox_id: bobby.mailbox_id, from_email: bobby.email_address, to_email: bobby.email_address.replace(source.domain_name, "agents.localhost"), renamed: false }
        ]
      }
    })
    // A preview changes nothing.
    const listed = await api.get("/v1/api/mailboxes", { apiKey: user.apiKey })
    expect(listed.body.mailboxes.map((m: { email_address: string }) => m.email_address).sort()).toEqual([alice.email_address, bobby.email_address].sort())

    const applied = await api.post(path, { apiKey: user.apiKey, body: { target_domain: "agents.localhost", dry_run: false } })
    expect(applied.status).toBe(200)
    expect(applied.body.data).toEqual({ ...preview.body.data, dry_run: false })
    const moved = applied.body.data.migrations[0].to_email

    const after = await api.get("/v1/api/mailboxes", { apiKey: user.apiKey })
    const byId = new Map(after.body.mailboxes.map((m: { mailbox_id: string; email_address: string }) => [m.mailbox_id, m.email_address]))
    expect(byId.get(alice.mailbox_id)).toBe(moved)
    expect(byId.get(bobby.mailbox_id)).toBe(applied.body.data.migrations[1].to_email)
    // Mail stays with the mailbox; the new address receives, the old one is refused.
    expect((await inbox(user, alice.mailbox_id, 1))[0]!.subject).toBe("Before the move")
    expect(await rcpt(alice.email_address)).toBe(550)
    await send(moved, "After the move")
    expect((await inbox(user, alice.mailbox_id, 2)).map((e) => e.subject).sort()).toEqual(["After the move", "Before the move"])

    // Now unused, the domain can go.
    const removed = await api.delete(`/v1/api/domains/${source.domain_id}`, { apiKey: user.apiKey })
    expect(removed.status).toBe(200)
    expect(removed.body).toEqual({ success: true, data: { deleted: true } })
    expect((await api.get("/v1/api/domains", { apiKey: user.apiKey })).body.data).toEqual([])
  })

  it("delete is 409 DOMAIN_HAS_MAILBOXES while active mailboxes use the domain, and nothing changes", async () => {
    const user = await proUser()
    const domain = await verified(user)
    await mailbox(user, fresh("keep"), domain.domain_name)
    await mailbox(user, fresh("keep"), domain.domain_name)
    const reply = await api.delete(`/api/domains/${domain.domain_id}`, { bearer: user.accessToken })
    expect(reply.status).toBe(409)
    expect(reply.body).toEqual({
      success: false,
      error: { code: "DOMAIN_HAS_MAILBOXES", message: expect.any(String), details: { mailbox_count: 2, domain_name: domain.domain_name } }
    })
    expect((await api.get("/v1/api/domains", { apiKey: user.apiKey })).body.data[0]).toMatchObject({ domain_id: domain.domain_id, mailbox_count: 2 })
  })

  it("refuses a target that is not allowed, the same domain, or a missing target", async () => {
    const user = await proUser()
    const domain = await verified(user)
    const unverified = await register(user)
    const path = `/v1/api/domains/${domain.domain_id}/migrate-mailboxes`
    const notAllowed = await api.post(path, { apiKey: user.apiKey, body: { target_domain: unverified.domain_name, dry_run: false } })
    expect(notAllowed.status).toBe(422)
    expect(notAllowed.body.error).toEqual({
      code: "DOMAIN_NOT_ALLOWED",
      message: expect.any(String),
      details: { domain: unverified.domain_name, plan: "pro" }
    })
    const same = await api.post(path, { apiKey: user.apiKey, body: { target_domain: domain.domain_name } })
    expect(same.status).toBe(400)
    expect(same.body.error).toEqual({
      code: "VALIDATION_ERROR",
      message: expect.any(String),
      details: { target_domain: "must differ from the domain being migrated" }
    })
    const missing = await api.post(path, { apiKey: user.apiKey, body: { dry_run: true } })
    expect(missing.body.error).toEqual({ code: "VALIDATION_ERROR", message: expect.any(String), details: { target_domain: "is required" } })
    const dashboard = await api.post(`/api/domains/${domain.domain_id}/migrate-mailboxes`, { bearer: user.accessToken, body: { target_domain: 5 } })
    expect(dashboard.status).toBe(400)
    expect(dashboard.body.error.details).toEqual({ field_errors: { target_domain: expect.any(String) } })
  })
})
