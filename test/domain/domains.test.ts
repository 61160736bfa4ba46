/**
 * Custom domains in process, over the suite's migrated database and a fake Dns (SPEC "Domains",
 * DESIGN.md §4): names normalised (IDN to punycode), a name claimed by any account and held by the
 * first to verify it, the plan's domain limit, verification from TXT and MX records, mailbox
 * migration, and no delete while mailboxes use a domain. Verification against a real DNS server is test/api/domains.test.ts's.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Duration, Effect, Layer, Option } from "effect"
import { DEFAULT_SPF_RECORD, Domains, DomainSettings, type Owner } from "../../services/domains/domains.ts"
import * as MemoryBus from "../../layers/memory-bus.ts"
import { DependencyHealth } from "../../services/health/dependency-health.ts"
import { RecipientDirectory } from "../../services/mail/directory.ts"
import { Inbound } from "../../services/mail/inbound.ts"
import { Mailboxes, MailboxSettings } from "../../services/mailboxes/mailboxes.ts"
import { DkimKeys } from "../../services/outbound/dkim.ts"
import { defaultRetryDelays, OutboundSettings } from "../../services/outbound/settings.ts"
import { testDatabase } from "../support/database.ts"
import { makeFakeDns } from "../support/fake-dns.ts"
import { uniqueName } from "../support/services.ts"
import { insertUser } from "../support/users.ts"

const SHARED = "agents.localhost"
const MX_HOST = "mx.agents.localhost"
const PREFIX = "mailroom-verification"

const dns = makeFakeDns()

const outboundSettings = {
  relay: Option.none(),
  mxPort: 25,
  allowPrivate: false,
  heloName: MX_HOST,
  maxAge: Duration.hours(48),
  retryDelays: defaultRetryDelays,
  dkimSelector: "mailroom",
  dkimPrivateKey: Option.none(),
  appUrl: "http://mailroom.test",
  timeouts: { connect: Duration.seconds(30), command: Duration.seconds(60) }
}

const domainsWith = (freeMaxCustomDomains: number, spfRecord = DEFAULT_SPF_RECORD) =>
  Layer.mergeAll(Domains.Default, Mailboxes.Default, Inbound.Default).pipe(
    Layer.provide(Layer.mergeAll(
      dns.layer,
      Layer.succeed(DomainSettings, { verifyPrefix: PREFIX, mxHost: MX_HOST, freeMaxCustomDomains, spfRecord }),
      DkimKeys.Default.pipe(Layer.provide(Layer.succeed(OutboundSettings, outboundSettings)))
    )),
    Layer.provideMerge(RecipientDirectory.Default),
    Layer.provideMerge(Layer.merge(MemoryBus.layer, Layer.succeed(MailboxSettings, { sharedDomains: [SHARED], disallowedNames: [], freeMaxCustomDomains }))),
    Layer.provideMerge(DependencyHealth.Default)
  )

/** A hostname no other test uses. */
const freshName = (suffix = "example") => `${uniqueName("d").replace(/_/g, "-")}.${suffix}`

const create = (owner: Owner, name: string) => Effect.flatMap(Domains, (domains) => domains.create(owner, name))

/** A domain of `owner`'s whose TXT record is published and verified. */
const verifiedDomain = (owner: Owner) =>
  Effect.gen(function*() {
    const domains = yield* Domains
    const domain = yield* domains.create(owner, freshName())
    dns.records.txt.set(domain.domain_name, [domain.verification_token])
    return yield* domains.verify(owner, domain.domain_id)
  })

layer(testDatabase, { timeout: "120 seconds" })("Domains", (it) => {
  it.layer(domainsWith(0))("with FREE_MAX_CUSTOM_DOMAINS=0", (it) => {
    it.effect("create lower-cases the name, issues a TXT token and answers the records to publish", () =>
      Effect.gen(function*() {
        const owner = yield* insertUser("pro")
        const name = freshName()
        const created = yield* create(owner, ` ${name.toUpperCase()}. `)
        expect(created).toEqual({
          domain_id: expect.stringMatching(/^dom_/),
          domain_name: name,
          verification_token: expect.stringMatching(new RegExp(`^${PREFIX}=[0-9a-f]{32}$`)),
          verified: false,
          receives_mail: false,
          mx_configured: false,
          dkim_configured: false,
          spf_configured: false,
          dmarc_configured: false,
          created_at: expect.any(String),
          mailbox_count: 0,
          catch_all_mailbox_id: null,
          dns_records: [
            { type: "TXT", name: "@", value: created.verification_token },
            { type: "MX", name: "@", value: MX_HOST, priority: 10 },
            { type: "TXT", name: "@", value: "v=spf1 mx ~all" },
            { type: "TXT", name: "mailroom1._domainkey", value: expect.stringMatching(/^v=DKIM1; k=rsa; p=[A-Za-z0-9+/=]+$/) },
            { type: "TXT", name: "_dmarc", value: "v=DMARC1; p=none" }
          ]
        })
        const listed = yield* Effect.flatMap(Domains, (domains) => domains.list(owner))
        expect(listed.domains).toEqual([created])
        expect(yield* Effect.flatMap(Domains, (domains) => domains.get(owner, created.domain_id))).toEqual(created)
      }))

    it.effect("an internationalized name is stored in punycode", () =>
      Effect.gen(function*() {
        const owner = yield* insertUser("pro")
        const unique = uniqueName("idn").replace(/_/g, "-")
        expect((yield* create(owner, `Bücher.${unique}.example`)).domain_name).toBe(`xn--bcher-kva.${unique}.example`)
        // The same name written in Unicode or in punycode is one name.
        expect(yield* Effect.flip(create(owner, `xn--bcher-kva.${unique}.example`))).toMatchObject({ code: "CONFLICT", status: 409 })
      }))

    it.effect("a name that is not a registrable hostname, or too long for its DKIM key's name, is 400 VALIDATION_ERROR with details.domain", () =>
      Effect.gen(function*() {
        const owner = yield* insertUser("pro")
        for (const name of ["", "   ", "localhost", "192.0.2.1", "[2001:db8::1]", "-bad.example", "bad-.example", "under_score.example", "example.123", `${"a".repeat(64)}.example`]) {
          expect(yield* Effect.flip(create(owner, name)), name).toMatchObject({
            code: "VALIDATION_ERROR",
            status: 400,
            details: { domain: expect.any(String) }
          })
        }
        // Its DKIM key's name (mailroom1._domainkey.<domain>) must fit DNS's 253 characters too.
        const tail = `${uniqueName("d").replace(/_/g, "-")}.example`
        const longest = `${"a".repeat(63)}.${"b".repeat(63)}.${"c".repeat(63)}.${"d".repeat(232 - 192 - tail.length - 1)}.${tail}`
        expect(longest).toHaveLength(232)
        expect(yield* Effect.flip(create(owner, `x.${longest}`))).toMatchObject({
          code: "VALIDATION_ERROR",
          details: { domain: "must be at most 232 characters, so that its DKIM key's name (mailroom1._domainkey.<domain>) fits in DNS" }
        })
        expect((yield* Effect.flatMap(Domains, (domains) => domains.list(owner))).domains).toEqual([])
        expect((yield* create(owner, longest)).domain_name).toBe(longest)
      }))

    it.effect("any account may claim a name until one verifies it: the first to verify holds it; an account's own name again, or a shared one, is 409", () =>
      Effect.gen(function*() {
        const domains = yield* Domains
        const mailboxes = yield* Mailboxes
        const [first, second, third] = [yield* insertUser("pro"), yield* insertUser("pro"), yield* insertUser("pro")]
        const name = freshName()
        const conflict = (input: string, message: string) => ({ code: "CONFLICT", status: 409, message, details: { domain: input.toLowerCase() } })
        const claims = [yield* create(first, name), yield* create(second, name.toUpperCase())]
        expect(claims[0]!.verification_token).not.toBe(claims[1]!.verification_token)
        for (const [owner, input] of [[first, name], [second, name.toUpperCase()]] as const) {
          expect(yield* Effect.flip(create(owner, input)), input).toMatchObject(conflict(input, `The domain ${name} is already on this account`))
        }
        expect(yield* Effect.flip(create(first, SHARED))).toMatchObject({ code: "CONFLICT", status: 409, details: { domain: SHARED } })

        // The name's DNS carries both tokens: whoever verifies first holds it, the other claim cannot verify.
        dns.records.txt.set(name, claims.map((claim) => claim.verification_token))
        expect(yield* domains.verify(second, claims[1]!.domain_id)).toMatchObject({ verified: true })
        expect(yield* Effect.flip(domains.verify(first, claims[0]!.domain_id))).toMatchObject(conflict(name, `The domain ${name} is verified by another account`))
        expect(yield* domains.get(first, claims[0]!.domain_id)).toMatchObject({ verified: false })
        // Nor with the holder's record alone: the answer is who holds it, not a record to publish.
        dns.records.txt.set(name, [claims[1]!.verification_token])
        expect(yield* Effect.flip(domains.verify(first, claims[0]!.domain_id))).toMatchObject(conflict(name, `The domain ${name} is verified by another account`))
        expect(yield* Effect.flip(create(third, name))).toMatchObject(conflict(name, `The domain ${name} is verified by another account`))
        expect((yield* domains.list(third)).domains).toEqual([])

        // Two claims verifying at the same moment: one holds the name, the other is 409.
        const raced = freshName()
        const racing = [yield* create(first, raced), yield* create(third, raced)]
        dns.records.txt.set(raced, racing.map((claim) => claim.verification_token))
        const outcomes = yield* Effect.all(
          [domains.verify(first, racing[0]!.domain_id), domains.verify(third, racing[1]!.domain_id)].map((verifying) =>
            Effect.match(verifying, { onSuccess: (domain) => domain.verified, onFailure: (error) => ("code" in error ? error.code : error._tag) })
          ),
          { concurrency: 2 }
        )
        expect([...outcomes].sort()).toEqual(["CONFLICT", true].sort())

        // The holder's mailboxes are the holder's: the other claim counts none and is deleted as it is.
        yield* mailboxes.create(second, { local_part: "agent", domain: name })
        expect(yield* domains.get(second, claims[1]!.domain_id)).toMatchObject({ mailbox_count: 1 })
        expect(yield* domains.get(first, claims[0]!.domain_id)).toMatchObject({ mailbox_count: 0 })
        expect(yield* Effect.flip(mailboxes.create(first, { local_part: "agent-2", domain: name }))).toMatchObject({ code: "DOMAIN_NOT_ALLOWED" })
        expect(yield* domains.remove(first, claims[0]!.domain_id)).toEqual({ deleted: true })
      }))

    it.effect("DOMAIN_QUOTA (403): free gets FREE_MAX_CUSTOM_DOMAINS (0), pro 10, enterprise no limit; the list's meta says so", () =>
      Effect.gen(function*() {
        const domains = yield* Domains
        const free = yield* insertUser("free")
        expect(yield* Effect.flip(create(free, freshName()))).toMatchObject({
          code: "DOMAIN_QUOTA",
          status: 403,
          details: { count: 0, limit: 0, plan: "free" }
        })
        expect((yield* domains.list(free)).meta).toEqual({ plan: "free", domain_limit: 0, domain_count: 0, can_add_domain: false })

        const pro = yield* insertUser("pro")
        for (let i = 0; i < 9; i++) yield* create(pro, freshName())
        expect((yield* domains.list(pro)).meta).toEqual({ plan: "pro", domain_limit: 10, domain_count: 9, can_add_domain: true })
        yield* create(pro, freshName())
        expect(yield* Effect.flip(create(pro, freshName()))).toMatchObject({
          code: "DOMAIN_QUOTA",
          status: 403,
          details: { count: 10, limit: 10, plan: "pro" }
        })
        expect((yield* domains.list(pro)).meta).toEqual({ plan: "pro", domain_limit: 10, domain_count: 10, can_add_domain: false })

        const enterprise = yield* insertUser("enterprise")
        for (let i = 0; i < 11; i++) yield* create(enterprise, freshName())
        expect((yield* domains.list(enterprise)).meta).toEqual({ plan: "enterprise", domain_limit: -1, domain_count: 11, can_add_domain: true })
      }))

    it.effect("verify: VERIFICATION_FAILED (400) with expected_txt_record and instructions until the TXT record matches", () =>
      Effect.gen(function*() {
        const domains = yield* Domains
        const owner = yield* insertUser("pro")
        const domain = yield* create(owner, freshName())
        const failed = {
          code: "VERIFICATION_FAILED",
          status: 400,
          details: { expected_txt_record: domain.verification_token, instructions: expect.stringContaining(MX_HOST) }
        }
        expect(yield* Effect.flip(domains.verify(owner, domain.domain_id))).toMatchObject(failed)
        dns.records.txt.set(domain.domain_name, ["v=spf1 -all", `${PREFIX}=not-the-token`])
        dns.records.mx.set(domain.domain_name, [{ priority: 10, exchange: MX_HOST }])
        expect(yield* Effect.flip(domains.verify(owner, domain.domain_id))).toMatchObject(failed)
        expect((yield* domains.list(owner)).domains[0]).toMatchObject({ verified: false })
      }))

    it.effect("verify succeeds on the TXT record alone and reports the MX as found; a verified domain stays verified, and receives mail on a paid plan only", () =>
      Effect.gen(function*() {
        const domains = yield* Domains
        const owner = yield* insertUser("pro")
        const domain = yield* create(owner, freshName())
        dns.records.txt.set(domain.domain_name, ["v=spf1 -all", domain.verification_token])

        expect(yield* domains.verify(owner, domain.domain_id)).toMatchObject({ domain_id: domain.domain_id, verified: true, mx_configured: false })

        dns.records.mx.set(domain.domain_name, [{ priority: 20, exchange: "backup.example" }, { priority: 10, exchange: MX_HOST }])
        expect(yield* domains.verify(owner, domain.domain_id)).toMatchObject({ verified: true, mx_configured: true })

        // The most preferred MX must be ours; and the TXT record may go once ownership is proven.
        dns.records.mx.set(domain.domain_name, [{ priority: 5, exchange: "elsewhere.example" }, { priority: 10, exchange: MX_HOST }])
        dns.records.txt.delete(domain.domain_name)
        expect(yield* domains.verify(owner, domain.domain_id)).toMatchObject({ verified: true, mx_configured: false })
        expect((yield* domains.list(owner)).domains[0]).toMatchObject({ verified: true, receives_mail: true, mx_configured: false })
        // Back on free, the domain is kept but takes no mail for now (SPEC rule 6; mail/inbound.ts answers 450 4.2.1).
        expect(yield* domains.get({ ...owner, plan: "free" }, domain.domain_id)).toMatchObject({ verified: true, receives_mail: false })
      }))

    it.effect("verify: DNS that cannot answer is 503 SERVICE_UNAVAILABLE; another account's domain is 404", () =>
      Effect.gen(function*() {
        const domains = yield* Domains
        const owner = yield* insertUser("pro")
        const other = yield* insertUser("pro")
        const domain = yield* create(owner, freshName())
        dns.records.txt.set(domain.domain_name, [domain.verification_token])
        expect(yield* Effect.flip(domains.verify(other, domain.domain_id))).toMatchObject({ code: "NOT_FOUND", status: 404 })
        dns.records.down.add(domain.domain_name)
        expect(yield* Effect.flip(domains.verify(owner, domain.domain_id))).toMatchObject({ code: "SERVICE_UNAVAILABLE", status: 503 })
        dns.records.down.delete(domain.domain_name)
        expect((yield* domains.verify(owner, domain.domain_id)).verified).toBe(true)
        expect(yield* Effect.flip(domains.get(other, domain.domain_id))).toMatchObject({ code: "NOT_FOUND", status: 404 })

        // The DKIM key is only reported: its lookup failing neither refuses verification nor forgets what was found.
        const dkim = domain.dns_records.find((record) => record.name.endsWith("._domainkey"))!
        const dkimName = `${dkim.name}.${domain.domain_name}`
        dns.records.txt.set(dkimName, [dkim.value])
        expect(yield* domains.verify(owner, domain.domain_id)).toMatchObject({ verified: true, dkim_configured: true })
        dns.records.down.add(dkimName)
        expect(yield* domains.verify(owner, domain.domain_id)).toMatchObject({ verified: true, dkim_configured: true })
        dns.records.down.delete(dkimName)
        dns.records.txt.delete(dkimName)
        expect(yield* domains.verify(owner, domain.domain_id)).toMatchObject({ verified: true, dkim_configured: false })

        // DMARC likewise: one record at _dmarc, whatever its policy; two are none (RFC 7489 §6.6.3).
        const dmarcName = `_dmarc.${domain.domain_name}`
        const dmarcWith = (...records: Array<string>) =>
          Effect.gen(function*() {
            dns.records.txt.set(dmarcName, records)
            return (yield* domains.verify(owner, domain.domain_id)).dmarc_configured
          })
        expect(yield* dmarcWith("v=DMARC1; p=none")).toBe(true)
        dns.records.down.add(dmarcName)
        expect(yield* domains.verify(owner, domain.domain_id)).toMatchObject({ verified: true, dmarc_configured: true })
        dns.records.down.delete(dmarcName)
        expect(yield* dmarcWith("v=DMARC1; p=reject; rua=mailto:reports@example.com", "some other text")).toBe(true)
        expect(yield* dmarcWith("v=DMARC1; p=none", "v=DMARC1; p=reject")).toBe(false)
        expect(yield* dmarcWith("v=spf1 -all")).toBe(false)
        expect(yield* dmarcWith()).toBe(false)
      }))

    it.effect("verify reads SPF as receivers do (first match wins, include and redirect followed) and accepts a DKIM key record of p= alone", () =>
      Effect.gen(function*() {
        const domains = yield* Domains
        const owner = yield* insertUser("pro")
        const domain = yield* create(owner, freshName())
        const included = `_spf.${domain.domain_name}`
        dns.records.txt.set(included, [`v=spf1 mx:${domain.domain_name} ~all`])
        const spfWith = (record: string) =>
          Effect.gen(function*() {
            dns.records.txt.set(domain.domain_name, [domain.verification_token, record])
            return (yield* domains.verify(owner, domain.domain_id)).spf_configured
          })
        expect(yield* spfWith("v=spf1 mx ~all")).toBe(true)
        expect(yield* spfWith("v=spf1 -all mx")).toBe(false)
        expect(yield* spfWith("v=spf1 -mx mx ~all")).toBe(false)
        expect(yield* spfWith(`v=spf1 mx:${domain.domain_name} ~all`)).toBe(true)
        expect(yield* spfWith(`v=spf1 include:${included} ~all`)).toBe(true)
        expect(yield* spfWith("v=spf1 -all")).toBe(false)
        expect(yield* spfWith(`v=spf1 redirect=${included}`)).toBe(true)
        // The included record's lookup failing keeps the last finding, as the DKIM and DMARC lookups do.
        dns.records.down.add(included)
        expect(yield* spfWith(`v=spf1 include:${included} ~all`)).toBe(true)
        dns.records.down.delete(included)

        const dkim = domain.dns_records.find((record) => record.name.endsWith("._domainkey"))!
        const dkimName = `${dkim.name}.${domain.domain_name}`
        dns.records.txt.set(dkimName, [dkim.value.replace(/^v=DKIM1; k=rsa; /, "")])
        expect(yield* domains.verify(owner, domain.domain_id)).toMatchObject({ dkim_configured: true })
      }))

    it.effect("delete is 409 DOMAIN_HAS_MAILBOXES (mailbox_count, domain_name) while an active mailbox uses it, and nothing changes; once deleted, the name and (verified) its addresses are free to another account", () =>
      Effect.gen(function*() {
        const domains = yield* Domains
        const mailboxes = yield* Mailboxes
        const owner = yield* insertUser("pro")
        const other = yield* insertUser("pro")
        const domain = yield* verifiedDomain(owner)
        const mailbox = yield* mailboxes.create(owner, { local_part: "agent-one", domain: domain.domain_name })
        yield* mailboxes.create(owner, { local_part: "agent-two", domain: domain.domain_name })
        expect((yield* domains.list(owner)).domains[0]).toMatchObject({ domain_id: domain.domain_id, mailbox_count: 2 })

        expect(yield* Effect.flip(domains.remove(owner, domain.domain_id))).toMatchObject({
          code: "DOMAIN_HAS_MAILBOXES",
          status: 409,
          details: { mailbox_count: 2, domain_name: domain.domain_name }
        })
        expect((yield* domains.list(owner)).domains.map((d) => d.domain_id)).toEqual([domain.domain_id])
        expect((yield* mailboxes.list(owner)).length).toBe(2)

        // Deleted mailboxes do not count.
        yield* mailboxes.remove(owner, mailbox.mailbox_id, mailbox.email_address)
        expect(yield* Effect.flip(domains.remove(owner, domain.domain_id))).toMatchObject({
          code: "DOMAIN_HAS_MAILBOXES",
          details: { mailbox_count: 1 }
        })
        for (const left of yield* mailboxes.list(owner)) yield* mailboxes.remove(owner, left.mailbox_id, left.email_address)

        expect(yield* Effect.flip(domains.remove(other, domain.domain_id))).toMatchObject({ code: "NOT_FOUND", status: 404 })
        expect(yield* domains.remove(owner, domain.domain_id)).toEqual({ deleted: true })
        expect((yield* domains.list(owner)).domains).toEqual([])
        expect(yield* Effect.flip(domains.remove(owner, domain.domain_id))).toMatchObject({ code: "NOT_FOUND" })
        // The name is free to register again, by anyone; once it is theirs (verified), so are its addresses,
        // which the hold keeps from strangers on a shared domain only: its new owner receives all its mail anyway.
        const again = yield* create(other, domain.domain_name)
        expect(again.domain_name).toBe(domain.domain_name)
        expect(yield* Effect.flip(mailboxes.create(other, { local_part: "agent-one", domain: domain.domain_name }))).toMatchObject({
          code: "DOMAIN_NOT_ALLOWED"
        })
        dns.records.txt.set(domain.domain_name, [again.verification_token])
        yield* domains.verify(other, again.domain_id)
        expect(yield* mailboxes.create(other, { local_part: "agent-one", domain: domain.domain_name })).toMatchObject({
          email_address: `agent-one@${domain.domain_name}`
        })
      }))

    it.effect("migrate previews, then moves every mailbox keeping its id; a taken address gets '.' and 6 hex characters", () =>
      Effect.gen(function*() {
        const domains = yield* Domains
        const mailboxes = yield* Mailboxes
        const sql = yield* SqlClient.SqlClient
        const owner = yield* insertUser("pro")
        const other = yield* insertUser("pro")
        const domain = yield* verifiedDomain(owner)
        const free = `${uniqueName("free").replace(/_/g, "-")}`
        const clash = `${uniqueName("clash").replace(/_/g, "-")}`
        const kept = yield* mailboxes.create(owner, { local_part: free, domain: domain.domain_name })
        const moved = yield* mailboxes.create(owner, { local_part: clash, domain: domain.domain_name })
        yield* mailboxes.create(other, { local_part: clash, domain: SHARED })

        const preview = yield* domains.migrate(owner, domain.domain_id, SHARED, true)
        expect(preview).toEqual({
          dry_run: true,
          migrated_count: 2,
          renamed_count: 1,
          migrations: expect.arrayContaining([
            { mailbox_id: kept.mailbox_id, from_email: kept.email_address, to_email: `${free}@${SHARED}`, renamed: false },
            {
              mailbox_id: moved.mailbox_id,
              from_email: moved.email_address,
              to_email: expect.stringMatching(new RegExp(`^${clash}\\.[0-9a-f]{6}@${SHARED.replace(".", "\\.")}$`)),
              renamed: true
            }
          ])
        })
        const untouched = yield* sql<{ domain: string }>`SELECT domain FROM mailboxes WHERE user_id = ${owner.userId}`
        expect(untouched.map((row) => row.domain)).toEqual([domain.domain_name, domain.domain_name])
        expect(yield* sql`SELECT 1 FROM released_addresses WHERE user_id = ${owner.userId}`).toEqual([])

        const applied = yield* domains.migrate(owner, domain.domain_id, SHARED, false)
        expect(applied).toEqual({ ...preview, dry_run: false })
        const after = yield* mailboxes.list(owner)
        expect(after.map((m) => [m.mailbox_id, m.email_address]).sort()).toEqual(
          applied.migrations.map((m) => [m.mailbox_id, m.to_email]).sort()
        )
        expect((yield* domains.list(owner)).domains[0]).toMatchObject({ mailbox_count: 0 })
        // The addresses left behind are held from other accounts, as a rename's are (the dry run held none).
        const left = [kept.email_address, moved.email_address].map((a) => a.toLowerCase())
        expect([...(yield* mailboxes.taken(other, left))].sort()).toEqual(left.sort())
        expect((yield* mailboxes.taken(owner, left)).size).toBe(0)
        expect(yield* domains.remove(owner, domain.domain_id)).toEqual({ deleted: true })
      }))

    it.effect("migrate refuses a target the account may not use, or the same domain", () =>
      Effect.gen(function*() {
        const domains = yield* Domains
        const owner = yield* insertUser("pro")
        const other = yield* insertUser("pro")
        const domain = yield* verifiedDomain(owner)
        const unverified = yield* create(owner, freshName())
        const theirs = yield* verifiedDomain(other)
        for (const target of [unverified.domain_name, theirs.domain_name, "nowhere.example"]) {
          expect(yield* Effect.flip(domains.migrate(owner, domain.domain_id, target, true)), target).toMatchObject({
            code: "DOMAIN_NOT_ALLOWED",
            status: 422,
            details: { domain: target, plan: "pro" }
          })
        }
        expect(yield* Effect.flip(domains.migrate(owner, domain.domain_id, domain.domain_name.toUpperCase(), true))).toMatchObject({
          code: "VALIDATION_ERROR",
          status: 400,
          details: { target_domain: expect.any(String) }
        })
        expect(yield* Effect.flip(domains.migrate(other, domain.domain_id, SHARED, true))).toMatchObject({ code: "NOT_FOUND", status: 404 })
      }))
  })

  it.layer(domainsWith(1))("with FREE_MAX_CUSTOM_DOMAINS=1", (it) => {
    it.effect("the free plan's limit is the operator's setting", () =>
      Effect.gen(function*() {
        const domains = yield* Domains
        const free = yield* insertUser("free")
        expect((yield* domains.list(free)).meta).toEqual({ plan: "free", domain_limit: 1, domain_count: 0, can_add_domain: true })
        yield* create(free, freshName())
        expect(yield* Effect.flip(create(free, freshName()))).toMatchObject({
          code: "DOMAIN_QUOTA",
          status: 403,
          details: { count: 1, limit: 1, plan: "free" }
        })
      }))

    it.effect("a free account's verified domain is its to use: it receives mail, and takes mailboxes that receive", () =>
      Effect.gen(function*() {
        const mailboxes = yield* Mailboxes
        const inbound = yield* Inbound
        const free = yield* insertUser("free")
        const domain = yield* verifiedDomain(free)
        expect(domain).toMatchObject({ verified: true, receives_mail: true })
        const mailbox = yield* mailboxes.create(free, { local_part: "agent", domain: domain.domain_name })
        expect(mailbox.email_address).toBe(`agent@${domain.domain_name}`)
        const accepted = yield* inbound.recipient(mailbox.email_address, undefined, "ada@example.com")
        expect(accepted).toMatchObject({ mailboxId: mailbox.mailbox_id })
      }))
  })

  it.layer(domainsWith(0, "v=spf1 include:relay.example ~all"))("behind a relay, SPF_RECORD=v=spf1 include:relay.example ~all", (it) => {
    it.effect("the domain is asked for the relay's SPF record; verify finds it configured when its one SPF record lets the relay send", () =>
      Effect.gen(function*() {
        const domains = yield* Domains
        const owner = yield* insertUser("pro")
        const domain = yield* create(owner, freshName())
        expect(domain.dns_records).toContainEqual({ type: "TXT", name: "@", value: "v=spf1 include:relay.example ~all" })
        const spfWith = (...records: Array<string>) =>
          Effect.gen(function*() {
            dns.records.txt.set(domain.domain_name, [domain.verification_token, ...records])
            return (yield* domains.verify(owner, domain.domain_id)).spf_configured
          })
        // The MX hosts alone are not where the mail leaves from.
        expect(yield* spfWith("v=spf1 mx ~all")).toBe(false)
        expect(yield* spfWith("v=spf1 mx +INCLUDE:relay.example -all")).toBe(true)
        // Two SPF records are an SPF error (RFC 7208 §4.5): receivers trust neither.
        expect(yield* spfWith("v=spf1 include:relay.example ~all", "v=spf1 mx ~all")).toBe(false)
      }))
  })
})
