/**
 * The recipient directory (services/mail/directory.ts) behind RCPT, in process over the suite's
 * database: what it answers without the database, how long it may, and every change that must
 * reach the very next RCPT (rename, delete, a list entry, a plan change), and the limits it must
 * leave exact. Across processes, over NATS: test/cluster/cluster.test.ts.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Duration, Effect, Layer } from "effect"
import { randomBytes } from "node:crypto"
import { domainToASCII } from "node:url"
import * as MemoryBus from "../../layers/memory-bus.ts"
import { Principals } from "../../services/accounts/principals.ts"
import { Billing } from "../../services/billing/billing.ts"
import { DependencyHealth } from "../../services/health/dependency-health.ts"
import { FRESH_FOR, nearLimit, RecipientDirectory } from "../../services/mail/directory.ts"
import { WebhookSubscriptions } from "../../services/webhooks/subscriptions.ts"
import { Inbound, type Recipient } from "../../services/mail/inbound.ts"
import { SenderLists } from "../../services/mail/sender-lists.ts"
import { bounceTag } from "../../services/outbound/bounce-address.ts"
import { Mailboxes, MailboxSettings } from "../../services/mailboxes/mailboxes.ts"
import { limits } from "../../services/plans/plans.ts"
import { testDatabase } from "../support/database.ts"
import { DOMAIN, insertEmail, insertMailbox, type Mailbox } from "../support/seed-mail.ts"
import { uniqueName } from "../support/services.ts"
import { insertUser } from "../support/users.ts"

const services = Layer.mergeAll(Inbound.Default, Mailboxes.Default, SenderLists.Default, Billing.Default).pipe(
  Layer.provideMerge(Layer.mergeAll(RecipientDirectory.Default, Principals.Default, WebhookSubscriptions.Default)),
  Layer.provide(Layer.succeed(MailboxSettings, { sharedDomains: [DOMAIN], disallowedNames: [] })),
  Layer.provideMerge(MemoryBus.layer),
  Layer.provideMerge(DependencyHealth.Default),
  Layer.provideMerge(testDatabase)
)

const SENDER = "ada@example.com"

/**
 * How RCPT answers `address`: accepted, or the refusal's tag. Asked as the SMTP node asks
 * (src/smtp/server.ts): the directory's immediate answer when it has one, else `recipient`.
 */
const rcpt = (address: string, sender = SENDER) =>
  Effect.flatMap(Inbound, (inbound) => {
    const kept = inbound.keptRecipient(address, undefined)
    const answer: ReturnType<typeof inbound.recipient> = kept ?? inbound.recipient(address, undefined, sender)
    return Effect.match(answer, { onSuccess: () => "accepted", onFailure: (refusal) => refusal._tag })
  })

/** Wall-clock time (the directory's clock), past FRESH_FOR. */
const outlive = Effect.promise(() => new Promise((resolve) => setTimeout(resolve, Duration.toMillis(FRESH_FOR) + 100)))

/** Deleted with SQL, so nothing tells the directory: what it keeps is all that answers. */
const deleteBehindItsBack = (mailbox: Mailbox) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => sql`UPDATE mailboxes SET status = 'deleted', deleted_at = now() WHERE id = ${mailbox.mailboxId}`)

/** `count` emails accepted for `mailbox`, as the SMTP node accepts them (each its own message). */
const accept = (mailbox: Mailbox, count: number) =>
  Effect.gen(function*() {
    const inbound = yield* Inbound
    for (let i = 0; i < count; i++) {
      const recipient: Recipient = yield* inbound.recipient(mailbox.address, undefined, SENDER)
      const raw = new TextEncoder().encode(`From: ${SENDER}\r\nSubject: ${uniqueName("n")}\r\n\r\nhello\r\n`)
      yield* inbound.accept({ mailFrom: SENDER, recipients: [recipient], raw, receivedAt: new Date() })
    }
  })

const setTodaysCount = (mailbox: Mailbox, emails: number) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql`INSERT INTO mail_daily_counters (user_id, day, emails) VALUES (${mailbox.owner.userId}, (now() AT TIME ZONE 'UTC')::date, ${emails})
        ON CONFLICT (user_id, day) DO UPDATE SET emails = EXCLUDED.emails`)

layer(services, { timeout: "120 seconds" })("Recipient directory", (it) => {
  it("near a limit means within 2% of it (and at least one email); no limit is never near", () => {
    expect(nearLimit(97, 100)).toBe(false)
    expect(nearLimit(98, 100)).toBe(true)
    expect(nearLimit(9_799, 10_000)).toBe(false)
    expect(nearLimit(9_800, 10_000)).toBe(true)
    expect(nearLimit(8, 10)).toBe(false)
    expect(nearLimit(9, 10)).toBe(true)
    expect(nearLimit(1_000_000, null)).toBe(false)
  })

  it.effect("a mailbox on an internationalized domain (stored in punycode) is found in either form (smtp-server hands RCPT over in Unicode)", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const owner = yield* insertUser("pro")
      const label = uniqueName("bücher").replace(/_/g, "-")
      const ascii = `${domainToASCII(label)}.example`
      yield* sql`INSERT INTO domains (id, user_id, name, verification_token, verified)
                 VALUES (${uniqueName("dom")}, ${owner.userId}, ${ascii}, 'mailroom-verification=x', true)`
      yield* sql`INSERT INTO mailboxes (id, user_id, local_part, domain, address_normalized)
                 VALUES (${uniqueName("mbx")}, ${owner.userId}, 'agent', ${ascii}, ${`agent@${ascii}`})`
      expect(yield* rcpt(`agent@${label}.example`)).toBe("accepted")
      expect(yield* rcpt(`Agent@${label.toUpperCase()}.example`)).toBe("accepted")
      expect(yield* rcpt(`agent@${ascii.toUpperCase()}`)).toBe("accepted")
      expect(yield* rcpt(`agent@${label.replace("ü", "u")}.example`)).toBe("UnknownRecipient")
      // A bounce of mail sent from that domain finds its message too (its envelope sender is stored in punycode).
      const mailbox = { owner, mailboxId: (yield* sql<{ id: string }>`SELECT id FROM mailboxes WHERE address_normalized = ${`agent@${ascii}`}`)[0]!.id, address: `agent@${ascii}` }
      const sent = yield* insertEmail(mailbox, { subject: "Sent", receivedMinutesAgo: 1 })
      const emailId = `eml_${randomBytes(12).toString("hex")}`
      yield* sql`UPDATE emails SET id = ${emailId}, direction = 'outbound', mail_from = ${`bounces+${emailId}@${ascii}`} WHERE id = ${sent.id}`
      yield* sql`INSERT INTO outbound_deliveries (email_id, recipient, domain) VALUES (${emailId}, 'ada@partner.test', 'partner.test')`
      const key = (yield* sql<{ key: string }>`SELECT bounce_key::text AS key FROM emails WHERE id = ${emailId}`)[0]!.key
      const tagged = (domain: string) => `bounces+${emailId}-${bounceTag(key, domain)}@${label}.example`
      expect(yield* rcpt(tagged("ada@partner.test"))).toBe("accepted")
      expect(yield* rcpt(tagged("Ada@PARTNER.test").toUpperCase())).toBe("accepted")
      // The recipient domain's address, as mail sent before per-recipient addresses went with, still finds it.
      expect(yield* rcpt(tagged("partner.test"))).toBe("accepted")
      // Only its recipients' addresses (and their domains'), and not the bare one: everyone it reached saw that.
      expect(yield* rcpt(tagged("bob@partner.test"))).toBe("UnknownRecipient")
      expect(yield* rcpt(tagged("elsewhere.test"))).toBe("UnknownRecipient")
      expect(yield* rcpt(`bounces+${emailId}@${label}.example`)).toBe("UnknownRecipient")
      // Mail stored before bounce keys went with the bare address, which still finds it, and no tagged one.
      yield* sql`UPDATE emails SET bounce_key = NULL WHERE id = ${emailId}`
      expect(yield* rcpt(`bounces+${emailId}@${label}.example`)).toBe("accepted")
      expect(yield* rcpt(tagged("ada@partner.test"))).toBe("UnknownRecipient")
    }))

  it.effect("a local part quoted without need (\"agent\"@) is its mailbox; quotes that change it name nobody", () =>
    Effect.gen(function*() {
      const mailbox = yield* insertMailbox(yield* insertUser())
      const [local, domain] = mailbox.address.split("@") as [string, string]
      expect(yield* rcpt(`"${local}"@${domain}`)).toBe("accepted")
      expect(yield* rcpt(`"${local}+tag"@${domain}`)).toBe("accepted")
      expect(yield* rcpt(`"${local} "@${domain}`)).toBe("UnknownRecipient")
    }))

  it.effect("a subaddress (local+tag@) is its mailbox's mail, one email however many of its addresses a message names; a tag alone is nobody's", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const inbound = yield* Inbound
      const mailbox = yield* insertMailbox(yield* insertUser())
      const [local, domain] = mailbox.address.split("@") as [string, string]
      expect(yield* rcpt(`${local}+newsletters@${domain}`)).toBe("accepted")
      expect(yield* rcpt(`${local.toUpperCase()}+A+B@${domain}`)).toBe("accepted")
      expect(yield* rcpt(`+${local}@${domain}`)).toBe("UnknownRecipient")
      expect(yield* rcpt(`${local}x+tag@${domain}`)).toBe("UnknownRecipient")

      const first = yield* inbound.recipient(`${local}+a@${domain}`, undefined, SENDER)
      const second = yield* inbound.recipient(`${local}+b@${domain}`, undefined, SENDER)
      const raw = new TextEncoder().encode(`From: ${SENDER}\r\nSubject: to two tags\r\n\r\nhello\r\n`)
      const ids = yield* inbound.accept({ mailFrom: SENDER, recipients: [first, second], raw, receivedAt: new Date() })
      expect(ids).toHaveLength(1)
      const [row] = yield* sql<{ emails: number }>`
        SELECT emails FROM mail_daily_counters WHERE user_id = ${mailbox.owner.userId} AND day = (now() AT TIME ZONE 'UTC')::date`
      expect(Number(row!.emails)).toBe(1)
    }))

  it.effect("an address RCPT found is answered from memory for FRESH_FOR, in any case, then asked again", () =>
    Effect.gen(function*() {
      const mailbox = yield* insertMailbox(yield* insertUser())
      expect(yield* rcpt(mailbox.address)).toBe("accepted")
      yield* deleteBehindItsBack(mailbox)
      // Nothing told the directory: it still answers, for every spelling of the address.
      expect(yield* rcpt(mailbox.address.toUpperCase())).toBe("accepted")
      yield* outlive
      expect(yield* rcpt(mailbox.address)).toBe("UnknownRecipient")
    }))

  it.effect("an unknown address is not kept: a mailbox made after a refused RCPT receives on the next one", () =>
    Effect.gen(function*() {
      const owner = yield* insertUser()
      const sql = yield* SqlClient.SqlClient
      const local = uniqueName("late").replace(/_/g, "-")
      const address = `${local}@${DOMAIN}`
      expect(yield* rcpt(address)).toBe("UnknownRecipient")
      yield* sql`INSERT INTO mailboxes (id, user_id, local_part, domain, address_normalized)
                 VALUES (${uniqueName("mbx")}, ${owner.userId}, ${local}, ${DOMAIN}, ${address})`
      expect(yield* rcpt(address)).toBe("accepted")
    }))

  it.effect("a rename or a delete through Mailboxes reaches the very next RCPT", () =>
    Effect.gen(function*() {
      const mailboxes = yield* Mailboxes
      const owner = yield* insertUser()
      const renamed = yield* insertMailbox(owner)
      const deleted = yield* insertMailbox(owner)
      expect(yield* rcpt(renamed.address)).toBe("accepted")
      expect(yield* rcpt(deleted.address)).toBe("accepted")

      const next = uniqueName("renamed").replace(/_/g, "-")
      yield* mailboxes.rename(owner, renamed.mailboxId, { local_part: next, domain: DOMAIN })
      expect(yield* rcpt(renamed.address)).toBe("UnknownRecipient")
      expect(yield* rcpt(`${next}@${DOMAIN}`)).toBe("accepted")

      yield* mailboxes.remove(owner, deleted.mailboxId, deleted.address)
      expect(yield* rcpt(deleted.address)).toBe("UnknownRecipient")
    }))

  it.effect("a list entry reaches the very next RCPT, and an owner with lists is asked the database on every RCPT", () =>
    Effect.gen(function*() {
      const lists = yield* SenderLists
      const mailbox = yield* insertMailbox(yield* insertUser())
      expect(yield* rcpt(mailbox.address)).toBe("accepted")
      yield* lists.add({ userId: mailbox.owner.userId, mailboxId: null }, "block", SENDER)
      expect(yield* rcpt(mailbox.address)).toBe("SenderRefused")
      expect(yield* rcpt(mailbox.address, "grace@example.com")).toBe("accepted")
      // Not kept: a delete nothing tells the directory about is seen at once.
      yield* deleteBehindItsBack(mailbox)
      expect(yield* rcpt(mailbox.address, "grace@example.com")).toBe("UnknownRecipient")
    }))

  it.effect("a plan change reaches the very next RCPT: back on free, a custom domain's mailbox is refused for now (450 4.2.1), not unknown, and receives again on pro", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const billing = yield* Billing
      const owner = yield* insertUser("pro")
      const domain = `${uniqueName("d").replace(/_/g, "-")}.example`
      yield* sql`INSERT INTO domains (id, user_id, name, verification_token, verified)
                 VALUES (${uniqueName("dom")}, ${owner.userId}, ${domain}, 'mailroom-verification=x', true)`
      const address = `agent@${domain}`
      yield* sql`INSERT INTO mailboxes (id, user_id, local_part, domain, address_normalized)
                 VALUES (${uniqueName("mbx")}, ${owner.userId}, 'agent', ${domain}, ${address})`
      expect(yield* rcpt(address)).toBe("accepted")
      yield* billing.changePlan(owner.userId, "free")
      const refused = yield* Effect.flip(Effect.flatMap(Inbound, (inbound) => inbound.recipient(address, undefined, SENDER)))
      expect(refused._tag).toBe("PlanExcludesDomain")
      expect(refused.reply).toEqual({ code: 450, text: `4.2.1 <${address}>: not receiving for now: the account's plan does not include custom domains` })
      yield* billing.changePlan(owner.userId, "pro")
      expect(yield* rcpt(address)).toBe("accepted")
      // A domain no longer verified (another account proved it theirs) takes no mail: its mailbox is unknown here.
      yield* sql`UPDATE domains SET verified = false WHERE name = ${domain}`
      yield* Effect.flatMap(RecipientDirectory, (directory) => directory.changed(owner.userId))
      expect(yield* rcpt(address)).toBe("UnknownRecipient")
    }))

  it.effect("the daily limit stays exact: what this process accepts is counted in memory, and near the limit the database decides", () =>
    Effect.gen(function*() {
      const mailbox = yield* insertMailbox(yield* insertUser())
      // Free: 100 a day. The directory keeps the address at 95.
      yield* setTodaysCount(mailbox, 95)
      yield* accept(mailbox, 5)
      expect(yield* rcpt(mailbox.address)).toBe("DailyLimitReached")
      const sql = yield* SqlClient.SqlClient
      const [row] = yield* sql<{ emails: number }>`
        SELECT emails FROM mail_daily_counters WHERE user_id = ${mailbox.owner.userId} AND day = (now() AT TIME ZONE 'UTC')::date`
      expect(Number(row!.emails)).toBe(100)
    }))

  it.effect("near a limit, a count raised elsewhere is seen at once", () =>
    Effect.gen(function*() {
      const mailbox = yield* insertMailbox(yield* insertUser())
      yield* setTodaysCount(mailbox, 98)
      expect(yield* rcpt(mailbox.address)).toBe("accepted")
      // Another node took the last two: this one's kept count (98) is near the limit, so it asks.
      yield* setTodaysCount(mailbox, 100)
      expect(yield* rcpt(mailbox.address)).toBe("DailyLimitReached")
    }))

  it.effect("an account whose stored mail fills its plan's storage is refused (452 4.2.2) until a mailbox's deletion frees some", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const inbound = yield* Inbound
      const mailboxes = yield* Mailboxes
      const owner = yield* insertUser()
      const kept = yield* insertMailbox(owner)
      const full = yield* insertMailbox(owner)
      const stored = (bytes: number) =>
        sql`INSERT INTO storage_usage (user_id, bytes) VALUES (${owner.userId}, ${bytes})
            ON CONFLICT (user_id) DO UPDATE SET bytes = EXCLUDED.bytes`
      const free = limits.free.storageBytes!
      // 1 MB short of the plan's 1 GB: a message of that size fits, one byte more (declared) does not.
      yield* stored(free - 1_000_000)
      expect(yield* Effect.either(inbound.recipient(kept.address, 1_000_000, SENDER))).toMatchObject({ _tag: "Right" })
      const refused = yield* Effect.flip(inbound.recipient(kept.address, 1_000_001, SENDER))
      expect(refused).toMatchObject({ _tag: "StorageFull", reply: { code: 452 } })
      expect(refused.reply.text).toBe(`4.2.2 <${kept.address}>: mailbox full: the account's storage of ${free} bytes is used`)
      // Full: nothing more, whatever its size.
      yield* stored(free)
      expect(yield* rcpt(kept.address)).toBe("StorageFull")
      // Its mail in the other mailbox (2 MB of it) is gone with that mailbox: room again.
      const big = yield* insertEmail(full, { subject: "Big", receivedMinutesAgo: 1 })
      yield* sql`UPDATE emails SET size = 2000000 WHERE id = ${big.id}`
      yield* mailboxes.remove(owner, full.mailboxId, full.address)
      const [row] = yield* sql<{ bytes: string }>`SELECT bytes FROM storage_usage WHERE user_id = ${owner.userId}`
      expect(Number(row!.bytes)).toBe(free - 2_000_000)
      expect(yield* rcpt(kept.address)).toBe("accepted")
    }))
})
