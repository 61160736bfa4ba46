/**
 * Custom domains (SPEC "Domains"): registration, DNS verification against a DNS server the test runs
 * (UDP and TCP), mailboxes and mail on a verified domain, migration and deletion.
 */
import nodemailer from "nodemailer"
import { afterAll, describe, expect, it } from "vitest"
import { isoMillis, withApiKey } from "../support/accounts.ts"
import { upgrade } from "../support/billing.ts"
import { type DnsServer, startDnsServer } from "../support/dns-server.ts"
import { refusedListParams } from "../support/list-params.ts"
import { fresh } from "../support/mailboxes.ts"
import { type SuiteServer, useSuiteServer } from "../support/server.ts"
import { connectSmtp } from "../support/smtp-client.ts"
import type { components } from "../../packages/client/src/fetch-client.ts"
import { offContract, withKey, withToken } from "../support/typed-client.ts"
import { until } from "../support/wait.ts"

const MX_HOST = "mx.agents.localhost"

const dns: DnsServer = await startDnsServer()
afterAll(() => dns.close())

let suite: SuiteServer
useSuiteServer((s) => {
  suite = s
}, { DNS_SERVERS: dns.address })

type User = Awaited<ReturnType<typeof withApiKey>>

/** The caller with this user's API key (/v1/api), and with its access token (the dashboard's /api). */
const keyed = (user: User) => withKey(suite.url, user)
const asUser = (user: User) => withToken(suite.url, user)
const domainPath = (id: string) => ({ params: { path: { id } } })

const proUser = async () => {
  const user = await withApiKey(suite.url)
  await upgrade(suite.url, user.apiKey, "pro")
  return user
}

const register = async (user: User, name = `${fresh("corp")}.test`) => {
  const reply = await keyed(user).POST("/v1/api/domains", { body: { domain: name } })
  if (!reply.data) throw new Error(`domain not created: ${reply.response.status} ${JSON.stringify(reply.error)}`)
  return reply.data.data
}

/** Publish the records SPEC asks for, and verify. */
const verified = async (user: User, name?: string) => {
  const domain = await register(user, name)
  dns.set(domain.domain_name, { TXT: [[domain.verification_token]], MX: [{ preference: 10, exchange: MX_HOST }] })
  const reply = await keyed(user).POST("/v1/api/domains/{id}/verify", domainPath(domain.domain_id))
  if (!reply.data) throw new Error(`not verified: ${reply.response.status} ${JSON.stringify(reply.error)}`)
  return domain
}

const mailbox = async (user: User, local: string, domain: string) =>
  keyed(user).POST("/v1/api/mailboxes", { body: { local_part: local, domain } })

/** The first page of the user's domains. */
const domainsOf = async (user: User) => (await keyed(user).GET("/v1/api/domains")).data!.data

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
    const reply = await keyed(user).GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId } } })
    return reply.data && reply.data.data.length >= count ? reply.data.data : undefined
  }, 20_000, 500)

describe("registering", () => {
  it("the free plan's limit is FREE_MAX_CUSTOM_DOMAINS (0): listed in meta, and a create is 403 DOMAIN_QUOTA", async () => {
    const user = await withApiKey(suite.url)
    const list = await keyed(user).GET("/v1/api/domains")
    expect(list.response.status).toBe(200)
    expect(list.data).toEqual({
      success: true,
      data: [],
      meta: { plan: "free", domain_limit: 0, domain_count: 0, can_add_domain: false, total: 0, limit: 20, offset: 0, hasMore: false }
    })
    const reply = await keyed(user).POST("/v1/api/domains", { body: { domain: "free-plan.test" } })
    expect(reply.response.status).toBe(403)
    expect(reply.error).toEqual({
      success: false,
      error: { code: "DOMAIN_QUOTA", message: "The free plan does not include custom domains", details: { count: 0, limit: 0, plan: "free" } }
    })
  })

  it("creates a domain (lower-cased) with its verification token and the records to publish; every list form shows it", async () => {
    const user = await proUser()
    const name = `${fresh("Acme")}.Test.`
    const reply = await keyed(user).POST("/v1/api/domains", { body: { domain: name } })
    expect(reply.response.status).toBe(201)
    const expected = name.toLowerCase().replace(/\.$/, "")
    expect(reply.data).toEqual({
      success: true,
      data: {
        domain_id: expect.stringMatching(/^dom_[0-9a-f]{24}$/),
        domain_name: expected,
        verification_token: expect.stringMatching(/^mailroom-verification=[0-9a-f]{32}$/),
        verified: false,
        receives_mail: false,
        mx_configured: false,
        dkim_configured: false,
        spf_configured: false,
        dmarc_configured: false,
        created_at: expect.stringMatching(isoMillis),
        mailbox_count: 0,
        catch_all_mailbox_id: null,
        dns_records: [
          { type: "TXT", name: "@", value: reply.data?.data.verification_token },
          { type: "MX", name: "@", value: MX_HOST, priority: 10 },
          { type: "TXT", name: "@", value: "v=spf1 mx ~all" },
          { type: "TXT", name: "mailroom1._domainkey", value: expect.stringMatching(/^v=DKIM1; k=rsa; p=[A-Za-z0-9+/=]+$/) },
          { type: "TXT", name: "_dmarc", value: "v=DMARC1; p=none" }
        ]
      }
    })
    const domain = reply.data!.data
    // One domain by its id, as the list shows it, records included (they are not shown at creation only).
    expect((await keyed(user).GET("/v1/api/domains/{id}", domainPath(domain.domain_id))).data).toEqual({ success: true, data: domain })
    expect((await asUser(user).GET("/api/domains/{id}", domainPath(domain.domain_id))).data).toEqual({ success: true, data: domain })
    const meta = { plan: "pro", domain_limit: 10, domain_count: 1, can_add_domain: true }
    const firstPage = { ...meta, total: 1, limit: 20, offset: 0, hasMore: false }
    expect((await keyed(user).GET("/v1/api/domains")).data).toEqual({ success: true, data: [domain], meta: firstPage })
    expect((await asUser(user).GET("/api/domains")).data).toEqual({ success: true, data: [domain], meta: firstPage })
    const generic = (query: { limit?: number; offset?: number; sort?: string }) => keyed(user).GET("/v1/domains", { params: { query } })
    expect((await generic({ limit: 5 })).data).toEqual({
      success: true,
      data: [domain],
      meta: { ...meta, total: 1, limit: 5, offset: 0, hasMore: false }
    })
    expect((await generic({ offset: 1 })).data?.data).toEqual([])
    const second = await register(user)
    const ascending = await generic({ sort: "created_at:asc", limit: 1 })
    expect(ascending.data?.data.map((d) => d.domain_id)).toEqual([domain.domain_id])
    expect(ascending.data?.meta).toMatchObject({ domain_count: 2, total: 2, limit: 1, offset: 0, hasMore: true })
    const descending = await generic({ sort: "createdAt:desc" })
    expect(descending.data?.data.map((d) => d.domain_id)).toEqual([second.domain_id, domain.domain_id])
    expect((await generic({ sort: "created_at:asc" })).data?.data.map((d) => d.domain_id)).toEqual([domain.domain_id, second.domain_id])
    const bad = await generic({ limit: 500, sort: "name:up" })
    expect(bad.response.status).toBe(400)
    expect(Object.keys(bad.error?.error.details ?? {}).sort()).toEqual(["limit", "sort"])
  })

  it("stores an internationalized name in punycode", async () => {
    const user = await proUser()
    const domain = await register(user, `bücher-${fresh("x")}.test`)
    expect(domain.domain_name).toMatch(/^xn--bcher-.*\.test$/)
  })

  it.each(["", "localhost", "not a domain", "1.2.3.4", "-bad.test", "a..b.test", "bad-.test", "example.123", `${"a".repeat(64)}.test`, "xn--zz.test"])(
    "refuses the name %j: 400 VALIDATION_ERROR on details.domain (dashboard: details.field_errors.domain)",
    async (name) => {
      const user = await proUser()
      const reply = await keyed(user).POST("/v1/api/domains", { body: { domain: name } })
      expect(reply.response.status).toBe(400)
      expect(reply.error).toEqual({ success: false, error: { code: "VALIDATION_ERROR", message: expect.any(String), details: { domain: expect.any(String) } } })
      const dashboard = await asUser(user).POST("/api/domains", { body: { domain: name } })
      expect(dashboard.response.status).toBe(400)
      expect(dashboard.error?.error).toEqual({ code: "VALIDATION_ERROR", message: expect.any(String), details: { field_errors: { domain: expect.any(String) } } })
    }
  )

  it("a body without domain, or none at all, is refused", async () => {
    const user = await proUser()
    const missing = await keyed(user).POST("/v1/api/domains", { body: offContract({ name: "x.test" }) })
    expect(missing.response.status).toBe(400)
    expect(missing.error?.error).toEqual({ code: "VALIDATION_ERROR", message: expect.any(String), details: { domain: "is required" } })
    const none = await keyed(user).POST("/v1/api/domains", { body: offContract(undefined) })
    expect(none.response.status).toBe(400)
    expect(none.error?.error.code).toBe("BAD_REQUEST")
  })

  it("an unverified claim keeps no one out; the first to verify holds the name; the account's own again, or a shared one, is 409 CONFLICT", async () => {
    const first = await proUser()
    const second = await proUser()
    const domain = await register(first)
    const claimed = await keyed(second).POST("/v1/api/domains", { body: { domain: domain.domain_name.toUpperCase() } })
    expect(claimed.response.status).toBe(201)
    expect(claimed.data?.data).toMatchObject({ domain_name: domain.domain_name, verified: false })
    expect(claimed.data?.data.verification_token).not.toBe(domain.verification_token)
    const again = await keyed(first).POST("/v1/api/domains", { body: { domain: domain.domain_name.toUpperCase() } })
    expect(again.response.status).toBe(409)
    expect(again.error?.error).toEqual({
      code: "CONFLICT",
      message: `The domain ${domain.domain_name} is already on this account`,
      details: { domain: domain.domain_name }
    })
    const shared = await keyed(first).POST("/v1/api/domains", { body: { domain: "agents.localhost" } })
    expect(shared.response.status).toBe(409)
    expect(shared.error?.error).toEqual({ code: "CONFLICT", message: expect.any(String), details: { domain: "agents.localhost" } })

    // The first to verify holds the name; the other claim's verification, and any new claim, is 409.
    dns.set(domain.domain_name, { TXT: [[domain.verification_token], [claimed.data!.data.verification_token]] })
    const won = await keyed(second).POST("/v1/api/domains/{id}/verify", domainPath(claimed.data!.data.domain_id))
    expect(won.data?.data.verified).toBe(true)
    const heldElsewhere = {
      code: "CONFLICT",
      message: `The domain ${domain.domain_name} is verified by another account`,
      details: { domain: domain.domain_name }
    }
    const lost = await keyed(first).POST("/v1/api/domains/{id}/verify", domainPath(domain.domain_id))
    expect(lost.response.status).toBe(409)
    expect(lost.error?.error).toEqual(heldElsewhere)
    const late = await keyed(await proUser()).POST("/v1/api/domains", { body: { domain: domain.domain_name } })
    expect(late.response.status).toBe(409)
    expect(late.error?.error).toEqual(heldElsewhere)
  })

  it("the pro plan stops at 10 domains", async () => {
    const user = await proUser()
    const made = await Promise.all(Array.from({ length: 11 }, () => keyed(user).POST("/v1/api/domains", { body: { domain: `${fresh("many")}.test` } })))
    expect(made.filter((r) => r.response.status === 201)).toHaveLength(10)
    const refused = made.find((r) => r.response.status === 403)!
    expect(refused.error?.error).toEqual({
      code: "DOMAIN_QUOTA",
      message: "The pro plan allows 10 custom domains",
      details: { count: 10, limit: 10, plan: "pro" }
    })
    const list = await keyed(user).GET("/v1/api/domains", { params: { query: { limit: 3, offset: 8 } } })
    expect(list.data?.data).toHaveLength(2)
    expect(list.data?.meta).toEqual({
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
  type ListQuery = { limit?: number; offset?: number; sort?: string }
  /** The domain list at /v1/api (key) and at /api (dashboard, access token); the generic /v1/domains is registering's subject. */
  const lists = (user: User) => [
    (query: ListQuery) => keyed(user).GET("/v1/api/domains", { params: { query } }),
    (query: ListQuery) => asUser(user).GET("/api/domains", { params: { query } })
  ]

  it("GET /v1/api/domains and /api/domains page with limit, offset and sort; domain_count counts every domain", async () => {
    const user = await proUser()
    const older = await register(user)
    const newer = await register(user)
    for (const list of lists(user)) {
      const first = await list({ limit: 1 })
      expect(first.response.status).toBe(200)
      expect(first.data?.data.map((d) => d.domain_id)).toEqual([newer.domain_id])
      expect(first.data?.meta).toEqual({
        plan: "pro",
        domain_limit: 10,
        domain_count: 2,
        can_add_domain: true,
        total: 2,
        limit: 1,
        offset: 0,
        hasMore: true
      })
      const second = await list({ limit: 1, offset: 1 })
      expect(second.data?.data.map((d) => d.domain_id)).toEqual([older.domain_id])
      expect(second.data?.meta).toMatchObject({ domain_count: 2, total: 2, limit: 1, offset: 1, hasMore: false })
      const ascending = await list({ sort: "createdAt:asc" })
      expect(ascending.data?.data.map((d) => d.domain_id)).toEqual([older.domain_id, newer.domain_id])
      const past = await list({ offset: 5 })
      expect(past.data?.data).toEqual([])
      expect(past.data?.meta).toMatchObject({ domain_count: 2, total: 2, offset: 5, hasMore: false })
    }
  })

  it.each(refusedListParams("domain_name:asc"))("refuses ?%s=%s with 400 VALIDATION_ERROR naming it, on every list form", async (field, value) => {
    const user = await withApiKey(suite.url)
    const generic = (query: ListQuery) => keyed(user).GET("/v1/domains", { params: { query } })
    for (const list of [...lists(user), generic]) {
      const reply = await list({ [field]: value })
      expect(reply.response.status).toBe(400)
      expect(reply.error?.success).toBe(false)
      expect(reply.error?.error.code).toBe("VALIDATION_ERROR")
      expect(Object.keys(reply.error?.error.details ?? {})).toEqual([field])
    }
  })
})

describe("verifying", () => {
  it("fails with VERIFICATION_FAILED until the TXT record exists, then succeeds; the MX is reported", async () => {
    const user = await proUser()
    const domain = await register(user)
    const verify = () => keyed(user).POST("/v1/api/domains/{id}/verify", domainPath(domain.domain_id))

    const before = await verify()
    expect(before.response.status).toBe(400)
    expect(before.error).toEqual({
      success: false,
      error: {
        code: "VERIFICATION_FAILED",
        message: expect.any(String),
        details: { expected_txt_record: domain.verification_token, instructions: expect.stringContaining(domain.verification_token) }
      }
    })
    expect(before.error?.error.details?.instructions).toContain(MX_HOST)

    // Someone else's TXT value is not ownership.
    dns.set(domain.domain_name, { TXT: [["mailroom-verification=0000"], ["v=spf1 -all"]] })
    expect((await verify()).error?.error.code).toBe("VERIFICATION_FAILED")

    dns.set(domain.domain_name, { TXT: [["v=spf1 -all"], [domain.verification_token]] })
    const txtOnly = await verify()
    expect(txtOnly.response.status).toBe(200)
    expect(txtOnly.data).toEqual({
      success: true,
      data: {
        domain_id: domain.domain_id,
        domain_name: domain.domain_name,
        verification_token: domain.verification_token,
        verified: true,
        receives_mail: true,
        mx_configured: false,
        // "v=spf1 -all" lets no host send: not the record asked for.
        dkim_configured: false,
        spf_configured: false,
        dmarc_configured: false,
        created_at: expect.stringMatching(isoMillis),
        mailbox_count: 0,
        catch_all_mailbox_id: null,
        dns_records: domain.dns_records
      }
    })

    // An MX with a trailing dot, as zone files write it; the most preferred MX must be ours.
    dns.set(domain.domain_name, {
      TXT: [[domain.verification_token]],
      MX: [{ preference: 5, exchange: "mail.elsewhere.test." }, { preference: 10, exchange: `${MX_HOST}.` }]
    })
    expect((await verify()).data?.data.mx_configured).toBe(false)
    dns.set(domain.domain_name, { TXT: [[domain.verification_token]], MX: [{ preference: 10, exchange: `${MX_HOST}.` }] })
    const full = await verify()
    expect(full.data?.data).toMatchObject({ verified: true, mx_configured: true, dkim_configured: false, spf_configured: false })
    expect((await domainsOf(user))[0]).toMatchObject({ verified: true, mx_configured: true })

    // The sending records, as dns_records asked: SPF beside the token, the DKIM key in 255-byte strings.
    const dkim = domain.dns_records.find((r) => r.name.endsWith("._domainkey"))!
    dns.set(domain.domain_name, {
      TXT: [[domain.verification_token], ["v=spf1 mx ~all"]],
      MX: [{ preference: 10, exchange: `${MX_HOST}.` }]
    })
    dns.set(`${dkim.name}.${domain.domain_name}`, { TXT: [dkim.value.match(/.{1,255}/g)!] })
    const dmarc = domain.dns_records.find((r) => r.name === "_dmarc")!
    dns.set(`_dmarc.${domain.domain_name}`, { TXT: [[dmarc.value]] })
    const sending = await verify()
    expect(sending.data?.data).toMatchObject({ verified: true, mx_configured: true, dkim_configured: true, spf_configured: true, dmarc_configured: true })
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
    const reply = await asUser(user).POST("/api/domains/{id}/verify", domainPath(domain.domain_id))
    expect(reply.response.status).toBe(200)
    expect(reply.data?.data).toMatchObject({ verified: true, mx_configured: true })
    expect(dns.questions()).toContain(`TXT ${domain.domain_name} udp`)
    expect(dns.questions()).toContain(`TXT ${domain.domain_name} tcp`)
  })

  it("another account's domain is not found", async () => {
    const owner = await proUser()
    const stranger = await proUser()
    const domain = await register(owner)
    const notFound = { success: false, error: { code: "NOT_FOUND", message: "Domain not found", details: { domain_id: domain.domain_id } } }
    expect((await keyed(stranger).POST("/v1/api/domains/{id}/verify", domainPath(domain.domain_id))).error).toEqual(notFound)
    expect((await keyed(stranger).DELETE("/v1/api/domains/{id}", domainPath(domain.domain_id))).error).toEqual(notFound)
    expect((await keyed(stranger).GET("/v1/api/domains/{id}", domainPath(domain.domain_id))).error).toEqual(notFound)
    const migrate = await keyed(stranger).POST("/v1/api/domains/{id}/migrate-mailboxes", {
      ...domainPath(domain.domain_id),
      body: { target_domain: "agents.localhost", dry_run: true }
    })
    expect(migrate.error).toEqual(notFound)
  })
})

describe("mailboxes and mail on a custom domain", () => {
  it("pro: no mailbox before verification (422 DOMAIN_NOT_ALLOWED), one after; mail to it arrives, mail to other names on it is refused", async () => {
    const user = await proUser()
    const domain = await register(user)
    const early = await mailbox(user, "sales-team", domain.domain_name)
    expect(early.response.status).toBe(422)
    expect(early.error?.error).toEqual({
      code: "DOMAIN_NOT_ALLOWED",
      message: expect.any(String),
      details: { domain: domain.domain_name, plan: "pro" }
    })
    expect(await rcpt(`sales-team@${domain.domain_name}`)).toBe(550)

    dns.set(domain.domain_name, { TXT: [[domain.verification_token]], MX: [{ preference: 10, exchange: MX_HOST }] })
    expect((await keyed(user).POST("/v1/api/domains/{id}/verify", domainPath(domain.domain_id))).response.status).toBe(200)
    const created = await mailbox(user, "sales-team", domain.domain_name.toUpperCase())
    expect(created.response.status).toBe(201)
    expect(created.data?.mailbox).toMatchObject({ email_address: `sales-team@${domain.domain_name}`, domain: domain.domain_name })

    await send(`Sales-Team@${domain.domain_name}`, "Custom domain mail")
    expect((await inbox(user, created.data!.mailbox.mailbox_id, 1))[0]!.subject).toBe("Custom domain mail")
    expect(await rcpt(`nobody-here@${domain.domain_name}`)).toBe(550)
    expect((await domainsOf(user))[0]!.mailbox_count).toBe(1)
  })

  it("a registered but unverified domain gets no mail, and another account cannot use someone's verified domain", async () => {
    const owner = await proUser()
    const domain = await verified(owner)
    const other = await proUser()
    const reply = await mailbox(other, "intruder", domain.domain_name)
    expect(reply.response.status).toBe(422)
    expect(reply.error?.error.code).toBe("DOMAIN_NOT_ALLOWED")
    const unverified = await register(owner)
    expect(await rcpt(`anyone-at@${unverified.domain_name}`)).toBe(550)
  })
})

describe("a domain's catch-all", () => {
  it("takes mail to addresses no mailbox has into the chosen mailbox, until a mailbox takes the address or the catch-all is off", async () => {
    const user = await proUser()
    const domain = await verified(user)
    const desk = (await mailbox(user, "front-desk", domain.domain_name)).data!.mailbox
    // Any mailbox of the account, on any of its domains.
    const shared = (await mailbox(user, fresh("catch"), "agents.localhost")).data!.mailbox
    expect(await rcpt(`anything@${domain.domain_name}`)).toBe(550)

    const set = await keyed(user).PATCH("/v1/api/domains/{id}", { ...domainPath(domain.domain_id), body: { catch_all_mailbox_id: shared.mailbox_id } })
    expect(set.response.status).toBe(200)
    expect(set.data!.data).toMatchObject({ domain_id: domain.domain_id, catch_all_mailbox_id: shared.mailbox_id })
    expect((await domainsOf(user))[0]!.catch_all_mailbox_id).toBe(shared.mailbox_id)

    await send(`Invoices+March@${domain.domain_name}`, "To an address nobody has")
    const [caught] = await inbox(user, shared.mailbox_id, 1)
    expect(caught).toMatchObject({ subject: "To an address nobody has", to: [`Invoices+March@${domain.domain_name}`], mailbox_id: shared.mailbox_id })
    // A Bcc to such an address: its To names someone else, and the email says where it was delivered.
    const transport = nodemailer.createTransport({ host: "127.0.0.1", port: suite.server.smtpPort, secure: false, ignoreTLS: true })
    await transport.sendMail({
      from: "sender@example.com",
      to: "someone@else.example",
      envelope: { from: "sender@example.com", to: [`hidden@${domain.domain_name}`] },
      subject: "Blind copy",
      text: "Hello."
    })
    transport.close()
    const blind = (await inbox(user, shared.mailbox_id, 2)).find((e) => e.subject === "Blind copy")!
    const read = await keyed(user).GET("/v1/api/emails/{emailId}", { params: { path: { emailId: blind.email_id } } })
    expect(read.data!.data).toMatchObject({ to: ["someone@else.example"], delivered_to: `hidden@${domain.domain_name}` })
    // A mailbox's own address still reaches it; a shared domain has no catch-all.
    await send(`front-desk@${domain.domain_name}`, "For the desk")
    expect((await inbox(user, desk.mailbox_id, 1))[0]!.subject).toBe("For the desk")
    expect(await rcpt(`${fresh("nobody")}@agents.localhost`)).toBe(550)

    // A mailbox made for an address takes it from then on.
    const invoices = (await mailbox(user, "invoices", domain.domain_name)).data!.mailbox
    await send(`invoices@${domain.domain_name}`, "For the invoices mailbox")
    expect((await inbox(user, invoices.mailbox_id, 1))[0]!.subject).toBe("For the invoices mailbox")
    expect((await inbox(user, shared.mailbox_id, 2)).map((e) => e.subject)).toEqual(["Blind copy", "To an address nobody has"])

    // Off again (the dashboard's surface): refused again.
    const off = await asUser(user).PATCH("/api/domains/{id}", { ...domainPath(domain.domain_id), body: { catch_all_mailbox_id: null } })
    expect(off.data!.data.catch_all_mailbox_id).toBeNull()
    expect(await rcpt(`anything@${domain.domain_name}`)).toBe(550)
  })

  it("is off once its mailbox is deleted; another account's mailbox, an unknown one, a bad body and another's domain are refused", async () => {
    const user = await proUser()
    const domain = await verified(user)
    const box = (await mailbox(user, "catcher", domain.domain_name)).data!.mailbox
    await keyed(user).PATCH("/v1/api/domains/{id}", { ...domainPath(domain.domain_id), body: { catch_all_mailbox_id: box.mailbox_id } })
    expect(await rcpt(`someone@${domain.domain_name}`)).toBe(250)
    await keyed(user).DELETE("/v1/api/mailboxes/{mailboxId}", {
      params: { path: { mailboxId: box.mailbox_id } },
      body: { confirm_email_address: box.email_address }
    })
    expect((await domainsOf(user))[0]!.catch_all_mailbox_id).toBeNull()
    expect(await rcpt(`someone@${domain.domain_name}`)).toBe(550)

    const other = await proUser()
    const theirs = (await mailbox(other, fresh("theirs"), "agents.localhost")).data!.mailbox
    for (const id of [theirs.mailbox_id, box.mailbox_id, "mbx_000000000000000000000000"]) {
      const refused = await keyed(user).PATCH("/v1/api/domains/{id}", { ...domainPath(domain.domain_id), body: { catch_all_mailbox_id: id } })
      expect(refused.response.status).toBe(400)
      expect(refused.error?.error).toMatchObject({
        code: "VALIDATION_ERROR",
        details: { catch_all_mailbox_id: `is not an active mailbox of this account: ${id}` }
      })
    }
    const wrongType = await keyed(user).PATCH("/v1/api/domains/{id}", { ...domainPath(domain.domain_id), body: { catch_all_mailbox_id: 42 } as never })
    expect(wrongType.response.status).toBe(400)
    expect(wrongType.error?.error).toMatchObject({ code: "VALIDATION_ERROR", details: { catch_all_mailbox_id: expect.any(String) } })
    const notTheirs = await keyed(other).PATCH("/v1/api/domains/{id}", { ...domainPath(domain.domain_id), body: { catch_all_mailbox_id: theirs.mailbox_id } })
    expect(notTheirs.response.status).toBe(404)
    expect(notTheirs.error?.error).toMatchObject({ code: "NOT_FOUND", details: { domain_id: domain.domain_id } })
  })
})

describe("migrating and deleting", () => {
  it("previews, then moves every mailbox with its id and mail; a taken address gets a 6-hex suffix; the old addresses stop receiving", async () => {
    const user = await proUser()
    const source = await verified(user)
    const alice = (await mailbox(user, fresh("alice"), source.domain_name)).data!.mailbox
    const bobby = (await mailbox(user, fresh("bobby"), source.domain_name)).data!.mailbox
    const aliceLocal = alice.email_address.split("@")[0]!
    // Someone else already has alice's name on the shared domain.
    const stranger = await withApiKey(suite.url)
    expect((await mailbox(stranger, aliceLocal, "agents.localhost")).response.status).toBe(201)
    await send(alice.email_address, "Before the move")
    await inbox(user, alice.mailbox_id, 1)

    const migrate = (dry_run: boolean) =>
      keyed(user).POST("/v1/api/domains/{id}/migrate-mailboxes", { ...domainPath(source.domain_id), body: { target_domain: "agents.localhost", dry_run } })
    const preview = await migrate(true)
    expect(preview.response.status).toBe(200)
    const renamed = expect.stringMatching(new RegExp(`^${aliceLocal}\\.[0-9a-f]{6}@agents\\.localhost$`))
    expect(preview.data).toEqual({
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
    const listed = await keyed(user).GET("/v1/api/mailboxes")
    expect(listed.data?.mailboxes.map((m) => m.email_address).sort()).toEqual([alice.email_address, bobby.email_address].sort())

    const applied = await migrate(false)
    expect(applied.response.status).toBe(200)
    expect(applied.data?.data).toEqual({ ...preview.data?.data, dry_run: false })
    const moved = applied.data!.data.migrations[0]!.to_email

    const after = await keyed(user).GET("/v1/api/mailboxes")
    const byId = new Map(after.data?.mailboxes.map((m) => [m.mailbox_id, m.email_address]))
    expect(byId.get(alice.mailbox_id)).toBe(moved)
    expect(byId.get(bobby.mailbox_id)).toBe(applied.data?.data.migrations[1]!.to_email)
    // Mail stays with the mailbox; the new address receives, the old one is refused.
    expect((await inbox(user, alice.mailbox_id, 1))[0]!.subject).toBe("Before the move")
    expect(await rcpt(alice.email_address)).toBe(550)
    await send(moved, "After the move")
    expect((await inbox(user, alice.mailbox_id, 2)).map((e) => e.subject).sort()).toEqual(["After the move", "Before the move"])

    // Now unused, the domain can go.
    const removed = await keyed(user).DELETE("/v1/api/domains/{id}", domainPath(source.domain_id))
    expect(removed.response.status).toBe(200)
    expect(removed.data).toEqual({ success: true, data: { deleted: true } })
    expect(await domainsOf(user)).toEqual([])
  })

  it("delete is 409 DOMAIN_HAS_MAILBOXES while active mailboxes use the domain, and nothing changes", async () => {
    const user = await proUser()
    const domain = await verified(user)
    await mailbox(user, fresh("keep"), domain.domain_name)
    await mailbox(user, fresh("keep"), domain.domain_name)
    const reply = await asUser(user).DELETE("/api/domains/{id}", domainPath(domain.domain_id))
    expect(reply.response.status).toBe(409)
    expect(reply.error).toEqual({
      success: false,
      error: { code: "DOMAIN_HAS_MAILBOXES", message: expect.any(String), details: { mailbox_count: 2, domain_name: domain.domain_name } }
    })
    expect((await domainsOf(user))[0]).toMatchObject({ domain_id: domain.domain_id, mailbox_count: 2 })
  })

  it("refuses a target that is not allowed, the same domain, or a missing target", async () => {
    const user = await proUser()
    const domain = await verified(user)
    const unverified = await register(user)
    const migrate = (body: components["schemas"]["MigrateMailboxesInput"]) =>
      keyed(user).POST("/v1/api/domains/{id}/migrate-mailboxes", { ...domainPath(domain.domain_id), body })
    const notAllowed = await migrate({ target_domain: unverified.domain_name, dry_run: false })
    expect(notAllowed.response.status).toBe(422)
    expect(notAllowed.error?.error).toEqual({
      code: "DOMAIN_NOT_ALLOWED",
      message: expect.any(String),
      details: { domain: unverified.domain_name, plan: "pro" }
    })
    const same = await migrate({ target_domain: domain.domain_name })
    expect(same.response.status).toBe(400)
    expect(same.error?.error).toEqual({
      code: "VALIDATION_ERROR",
      message: expect.any(String),
      details: { target_domain: "must differ from the domain being migrated" }
    })
    const missing = await migrate(offContract({ dry_run: true }))
    expect(missing.error?.error).toEqual({ code: "VALIDATION_ERROR", message: expect.any(String), details: { target_domain: "is required" } })
    const dashboard = await asUser(user).POST("/api/domains/{id}/migrate-mailboxes", {
      ...domainPath(domain.domain_id),
      body: offContract({ target_domain: 5 })
    })
    expect(dashboard.response.status).toBe(400)
    expect(dashboard.error?.error.details).toEqual({ field_errors: { target_domain: expect.any(String) } })
  })
})
