/**
 * Which received mail is forwarded, in process over the suite's migrated database: ingest (the
 * forwarded-by fields that end loops count only when Mailroom wrote them) and a person letting held
 * mail through (labels.ts: taking off the last of `spam` and `blocked` forwards it, once, and
 * announces it as received, owed to the bus through the outbox). The copies' delivery is
 * test/outbound's.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as Mailauth from "../../layers/mailauth.ts"
import { sweepOutbox } from "../../services/bus/outbox.ts"
import { DependencyHealth } from "../../services/health/dependency-health.ts"
import { FORWARDED_BY_HEADER, forwardedByValue, ForwardingKey } from "../../services/mail/forward-rules.ts"
import { Ingest } from "../../services/mail/ingest.ts"
import { Labels } from "../../services/mail/labels.ts"
import { emailReceivedEventId, releasedEventId } from "../../services/mail/received.ts"
import { BLOCKED } from "../../services/mail/sender-list-rules.ts"
import { SenderLists } from "../../services/mail/sender-lists.ts"
import { SPAM } from "../../services/mail/spam.ts"
import { MailboxSettings } from "../../services/mailboxes/mailboxes.ts"
import { RecipientDirectory } from "../../services/mail/directory.ts"
import { BounceReports } from "../../services/outbound/bounces.ts"
import { testDatabase } from "../support/database.ts"
import { DOMAIN, inboundMessage, insertMailbox, type Mailbox } from "../support/seed-mail.ts"
import { uniqueName } from "../support/services.ts"
import { makeRefusingBus } from "../support/refusing-bus.ts"
import { insertUser } from "../support/users.ts"

const bus = makeRefusingBus()

const services = Layer.mergeAll(SenderLists.Default, Ingest.Default, Labels.Default).pipe(
  Layer.provide(BounceReports.Default),
  // Its messages carry no connection: nothing asks the checks.
  Layer.provide(Mailauth.none),
  Layer.provideMerge(RecipientDirectory.Default),
  Layer.provide(Layer.succeed(MailboxSettings, { sharedDomains: [DOMAIN], disallowedNames: [] })),
  Layer.provideMerge(bus.layer),
  Layer.provideMerge(DependencyHealth.Default),
  Layer.provideMerge(testDatabase)
)

/** `mailbox` forwards to `address`, confirmed. */
const forwardTo = (mailbox: Mailbox, address: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql`INSERT INTO mailbox_forwards (mailbox_id, user_id, address, domain, token_sha256, confirmed_at)
        VALUES (${mailbox.mailboxId}, ${mailbox.owner.userId}, ${address}, ${address.split("@")[1]!}, ${uniqueName("tok")}, now())`)

/** A mailbox of its own account that forwards to three addresses. */
const forwardingMailbox = Effect.gen(function*() {
  const mailbox = yield* insertMailbox(yield* insertUser())
  for (const who of ["ada", "bob", "cy"]) yield* forwardTo(mailbox, `${who}@partner.test`)
  return mailbox
})

/** Deliver a message to `mailbox` through ingest; answers its email id. */
const deliver = (mailbox: Mailbox, head: ReadonlyArray<string>, options: { readonly spam?: boolean } = {}) =>
  Effect.gen(function*() {
    const emailId = uniqueName("eml")
    const raw = new TextEncoder().encode([...head, `Subject: ${emailId}`, `To: ${mailbox.address}`, "", "Hello", ""].join("\r\n"))
    yield* (yield* Ingest).ingest(yield* inboundMessage(mailbox, raw, {
      email_id: emailId,
      mail_from: "sender@example.com",
      ...(options.spam ? { spam: { status: "checked" as const, score: 15, action: "add header", symbols: [] } } : {})
    }), true)
    return emailId
  })

/** The addresses the email's copies were queued for. */
const copies = (emailId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.map(sql<{ address: string }>`SELECT address FROM forward_deliveries WHERE email_id = ${emailId} ORDER BY address`, (rows) =>
      rows.map((row) => row.address)))

/** Which of `msgIds` the bus was given (the in-process bus keeps every publish as a row). */
const published = (msgIds: ReadonlyArray<string>) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.map(sql<{ msgId: string }>`SELECT msg_id FROM bus_messages WHERE msg_id = ANY(${msgIds}::text[]) ORDER BY msg_id`, (rows) =>
      rows.map((row) => row.msgId)))

const ALL = ["ada@partner.test", "bob@partner.test", "cy@partner.test"]

layer(services, { timeout: "120 seconds" })("Forwarding", (it) => {
  it.effect("a stranger's X-Mailroom-Forwarded-By switches nothing off; Mailroom's own ends a loop", () =>
    Effect.gen(function*() {
      const { key } = yield* ForwardingKey
      const mailbox = yield* forwardingMailbox
      const messageId = (name: string) => `Message-ID: <${uniqueName(name)}@example.com>`
      /** The field Mailroom writes on a copy `by` forwarded of the message with `id`. */
      const signed = (by: string, id: string) => `${FORWARDED_BY_HEADER}: ${forwardedByValue(key, by, { "message-id": id.slice("Message-ID: ".length) })}`

      expect(yield* copies(yield* deliver(mailbox, [messageId("plain")]))).toEqual(ALL)
      // Naming the mailbox itself, five others, or with a MAC made up: forwarded as any other mail.
      expect(yield* copies(yield* deliver(mailbox, [messageId("self"), `${FORWARDED_BY_HEADER}: ${mailbox.address}`]))).toEqual(ALL)
      const five = Array.from({ length: 5 }, (_, i) => `${FORWARDED_BY_HEADER}: hop${i}@elsewhere.test`)
      expect(yield* copies(yield* deliver(mailbox, [messageId("five"), ...five]))).toEqual(ALL)
      const forged = `${FORWARDED_BY_HEADER}: ${mailbox.address}; mac=${"0".repeat(32)}`
      expect(yield* copies(yield* deliver(mailbox, [messageId("forged"), forged]))).toEqual(ALL)
      // Mailroom's field for another message (another Message-ID) stops nothing either.
      const other = messageId("other")
      expect(yield* copies(yield* deliver(mailbox, [messageId("moved"), signed(mailbox.address, other)]))).toEqual(ALL)

      // A copy that comes back to the mailbox that forwarded it (A → B → A, through a provider that keeps the fields) stops there.
      const looped = messageId("loop")
      expect(yield* copies(yield* deliver(mailbox, [looped, signed("b@elsewhere.test", looped), signed(mailbox.address, looped)]))).toEqual([])
      // As does one that five mailboxes forwarded, whichever they are; four are not enough.
      const far = messageId("far")
      const hops = (n: number) => Array.from({ length: n }, (_, i) => signed(`hop${i}@elsewhere.test`, far))
      expect(yield* copies(yield* deliver(mailbox, [far, ...hops(5)]))).toEqual([])
      const near = messageId("near")
      expect(yield* copies(yield* deliver(mailbox, [near, ...Array.from({ length: 4 }, (_, i) => signed(`hop${i}@elsewhere.test`, near))]))).toEqual(ALL)
    }))

  it.effect("mail let through (the last of spam and blocked taken off) is forwarded once and announced as received", () =>
    Effect.gen(function*() {
      const labels = yield* Labels
      const lists = yield* SenderLists
      const mailbox = yield* forwardingMailbox
      const userId = mailbox.owner.userId
      yield* lists.add({ userId, mailboxId: mailbox.mailboxId }, "block", "spammer.test")

      // Blocked on arrival: neither forwarded nor announced; let through: both.
      const blocked = yield* deliver(mailbox, ["From: Offers <deals@spammer.test>", `Message-ID: <${uniqueName("b")}@t>`])
      expect(yield* copies(blocked)).toEqual([])
      expect(yield* published([emailReceivedEventId(blocked)])).toEqual([])
      yield* labels.update(userId, [blocked], { add: [], remove: [BLOCKED] })
      expect(yield* copies(blocked)).toEqual(ALL)
      expect(yield* published([emailReceivedEventId(blocked), `forward:${blocked}:partner.test`]))
        .toEqual([emailReceivedEventId(blocked), `forward:${blocked}:partner.test`].sort())

      // Spam on arrival: announced then (with its label), not forwarded; let through: forwarded, and
      // announced again, as received mail the automatic reply answers.
      const spam = yield* deliver(mailbox, ["From: friend@example.com", `Message-ID: <${uniqueName("s")}@t>`], { spam: true })
      expect(yield* copies(spam)).toEqual([])
      expect(yield* published([emailReceivedEventId(spam), releasedEventId(spam)])).toEqual([emailReceivedEventId(spam)])
      yield* labels.update(userId, [spam], { add: [], remove: [SPAM] })
      expect(yield* copies(spam)).toEqual(ALL)
      expect(yield* published([releasedEventId(spam), `forward:${spam}:partner.test`])).toEqual([releasedEventId(spam), `forward:${spam}:partner.test`].sort())

      // Spam put back and taken off again: forwarded once, not again (not even to an address added since).
      yield* forwardTo(mailbox, "dee@later.test")
      yield* labels.update(userId, [spam], { add: [SPAM], remove: [] })
      yield* labels.update(userId, [spam], { add: [], remove: [SPAM] })
      expect(yield* copies(spam)).toEqual(ALL)
      // Nor is mail forwarded on arrival forwarded again when a person marks it spam and then not.
      const plain = yield* deliver(mailbox, ["From: friend@example.com", `Message-ID: <${uniqueName("p")}@t>`])
      expect(yield* copies(plain)).toEqual([...ALL, "dee@later.test"])
      yield* forwardTo(mailbox, "eve@later.test")
      yield* labels.update(userId, [plain], { add: [SPAM], remove: [] })
      yield* labels.update(userId, [plain], { add: [], remove: [SPAM] })
      expect(yield* copies(plain)).toEqual([...ALL, "dee@later.test"])

      // Blocked and spam: without `blocked`, announced as spam is on arrival; let through once both are off.
      const both = yield* deliver(mailbox, ["From: deals@spammer.test", `Message-ID: <${uniqueName("x")}@t>`], { spam: true })
      yield* labels.update(userId, [both], { add: [], remove: [BLOCKED] })
      expect(yield* copies(both)).toEqual([])
      expect(yield* published([emailReceivedEventId(both), releasedEventId(both)])).toEqual([emailReceivedEventId(both)])
      yield* labels.update(userId, [both], { add: [], remove: [SPAM] })
      expect((yield* copies(both)).length).toBe(5)
      expect(yield* published([emailReceivedEventId(both), releasedEventId(both)])).toEqual([emailReceivedEventId(both), releasedEventId(both)])
    }))

  it.effect("a release the bus refuses is owed, not lost: the outbox sweep publishes its copies' job and its announcement", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const labels = yield* Labels
      const lists = yield* SenderLists
      const mailbox = yield* forwardingMailbox
      const userId = mailbox.owner.userId
      yield* lists.add({ userId, mailboxId: mailbox.mailboxId }, "block", "spammer.test")
      const blocked = yield* deliver(mailbox, ["From: deals@spammer.test", `Message-ID: <${uniqueName("o")}@t>`])
      // What the suite's other changes owed was published as they were made: the outbox holds only this one's.
      const outbox = () => Effect.map(sql<{ msgId: string }>`SELECT msg_id FROM outbox ORDER BY position`, (rows) => rows.map((row) => row.msgId))
      const backdate = sql`UPDATE outbox SET attempted_at = now() - interval '1 minute'`

      // The bus is down as the person lets the mail through: the change stands, its copies are
      // queued, and what the bus did not take waits in the outbox, in the order it is owed.
      const [updated] = yield* bus.whileRefusing(labels.update(userId, [blocked], { add: [], remove: [BLOCKED] }))
      expect(updated!.labels).not.toContain(BLOCKED)
      expect(yield* copies(blocked)).toEqual(ALL)
      const owed = yield* outbox()
      expect(owed).toEqual([expect.stringMatching(/^email\.labels_changed:/), `forward:${blocked}:partner.test`, emailReceivedEventId(blocked)])
      expect(yield* published(owed)).toEqual([])

      // Not swept while the change may still be publishing; a sweep the bus refuses leaves them owed.
      expect(yield* sweepOutbox).toBe(0)
      yield* backdate
      expect(yield* bus.whileRefusing(Effect.flip(sweepOutbox))).toMatchObject({ _tag: "BusError" })
      expect(yield* outbox()).toEqual(owed)

      // The bus is back: the next sweep past their wait publishes them, once.
      yield* backdate
      expect(yield* sweepOutbox).toBe(3)
      expect(yield* published(owed)).toEqual([...owed].sort())
      expect(yield* outbox()).toEqual([])
    }))
})
