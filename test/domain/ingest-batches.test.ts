/**
 * Ingest in batches (issue 18, item 4), in process over the suite's migrated database: emails stored
 * together by one statement (store.ts `storeEmails`) come out as emails stored one at a time do
 * (threads, the blocked label, attachments, storage per account, a redelivery stored once), and the
 * ingest actor, given many messages at once, stores each once and lets one email the database refuses
 * fail alone. A message the SMTP node answered without checking is checked here, with the connection
 * it carried (a stand-in Authenticator records what it was asked).
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Effect, Exit, Layer } from "effect"
import * as MemoryBus from "../../layers/memory-bus.ts"
import { DependencyHealth } from "../../services/health/dependency-health.ts"
import { type Authentication, Authenticator, type Envelope } from "../../services/mail/authentication.ts"
import { Ingest } from "../../services/mail/ingest.ts"
import type { InboundMessage } from "../../services/mail/schemas.ts"
import { BLOCKED } from "../../services/mail/sender-list-rules.ts"
import { MAX_INDEXED_BYTES, type NewEmail, storeEmails } from "../../services/mail/store.ts"
import { BounceReports } from "../../services/outbound/bounces.ts"
import { testDatabase } from "../support/database.ts"
import { inboundMessage, insertMailbox, type Mailbox, newInbound } from "../support/seed-mail.ts"
import { uniqueName } from "../support/services.ts"
import { insertUser } from "../support/users.ts"

/** What the stand-in checks were asked, in order. */
const checked: Array<Envelope> = []
/** DMARC fails for mail from 192.0.2.66; everything else passes. */
const verdictFor = (clientIp: string): Authentication => {
  const result = clientIp === "192.0.2.66" ? "fail" : "pass"
  return {
    spf: { result, domain: "example.test", aligned: true },
    dkim: [],
    dmarc: { result, domain: "example.test", policy: "none" },
    arc: { result: "none", domain: null }
  }
}
const checks = Layer.succeed(Authenticator, {
  verify: (envelope) =>
    Effect.sync(() => {
      checked.push(envelope)
      return { authentication: verdictFor(envelope.clientIp), results: `mx.test; checked for ${envelope.clientIp}` }
    })
})

const services = Ingest.Default.pipe(
  Layer.provide(BounceReports.Default),
  Layer.provide(checks),
  Layer.provideMerge(MemoryBus.layer),
  Layer.provideMerge(DependencyHealth.Default),
  Layer.provideMerge(testDatabase)
)

interface Message {
  readonly from?: string
  readonly subject: string
  readonly messageId: string
  readonly inReplyTo?: string
  /** References, when it is not In-Reply-To alone. */
  readonly references?: string
  readonly attachment?: string
  readonly date?: string
}

const rawOf = (m: Message) => {
  const head = [
    `From: ${m.from ?? "Ada <ada@example.test>"}`,
    `Subject: ${m.subject}`,
    `Message-ID: ${m.messageId}`,
    ...(m.inReplyTo === undefined ? [] : [`In-Reply-To: ${m.inReplyTo}`, `References: ${m.references ?? m.inReplyTo}`]),
    ...(m.date === undefined ? [] : [`Date: ${m.date}`])
  ]
  const body = m.attachment === undefined
    ? `${head.join("\r\n")}\r\n\r\nHello.\r\n`
    : [
      ...head,
      "MIME-Version: 1.0",
      'Content-Type: multipart/mixed; boundary="b"',
      "",
      "--b",
      "Content-Type: text/plain",
      "",
      "Hello.",
      "--b",
      'Content-Type: text/plain; name="notes.txt"',
      'Content-Disposition: attachment; filename="notes.txt"',
      "",
      m.attachment,
      "--b--",
      ""
    ].join("\r\n")
  return new TextEncoder().encode(body)
}

/** What the ingest actor would store for `m` in `mailbox`. */
const newEmail = (mailbox: Mailbox, m: Message, emailId?: string) => newInbound(mailbox, rawOf(m), m.messageId, emailId)

const storageOf = (userId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.map(sql<{ bytes: string }>`SELECT bytes FROM storage_usage WHERE user_id = ${userId}`, (rows) => Number(rows[0]?.bytes ?? 0)))

layer(services, { timeout: "120 seconds" })("Ingest in batches", (it) => {
  it.effect("one statement stores a batch as one at a time would: threads, blocked label, attachments, storage per account", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const first = yield* insertMailbox(yield* insertUser())
      const second = yield* insertMailbox(yield* insertUser())
      yield* sql`INSERT INTO sender_list_entries (user_id, mailbox_id, list, entry) VALUES (${first.owner.userId}, NULL, 'block', 'spam.test')`
      const original = yield* newEmail(first, { subject: "Quarterly report", messageId: "<q1@example.test>" })
      const batch = [
        original,
        // A reply in the same batch joins its original's thread: the batch is cut before it.
        yield* newEmail(first, { subject: "Re: Quarterly report", messageId: "<q2@example.test>", inReplyTo: "<q1@example.test>" }),
        yield* newEmail(first, { subject: "Offer", messageId: "<s1@spam.test>", from: "Deals <deals@spam.test>" }),
        yield* newEmail(second, { subject: "Notes", messageId: "<n1@example.test>", attachment: "Some notes." }),
        yield* newEmail(second, { subject: "More notes", messageId: "<n2@example.test>", attachment: "Some notes." }),
        // The same email twice (a redelivery while the first was in flight): stored once.
        original
      ]
      const stored = yield* storeEmails(sql, batch)
      expect(stored.map((row) => row?.id)).toEqual([...batch.slice(0, 5).map((e) => e.emailId), undefined])
      expect(stored[1]!.threadId).toBe(stored[0]!.threadId)
      expect(stored[3]!.threadId).not.toBe(stored[4]!.threadId)
      expect(stored[2]!.labels).toEqual(["inbound", BLOCKED])
      expect(stored[0]!.labels).toEqual(["inbound"])
      // The second account's block list is its own: nothing of it is blocked.
      expect(stored[3]!.labels).toEqual(["inbound"])
      const attachments = yield* sql<{ emailId: string; filename: string }>`
        SELECT email_id, filename FROM attachments WHERE email_id IN (${batch[3]!.emailId}, ${batch[4]!.emailId}) ORDER BY email_id`
      expect(attachments.map((a) => a.filename)).toEqual(["notes.txt", "notes.txt"])
      const size = (emails: ReadonlyArray<NewEmail>) => emails.reduce((sum, e) => sum + e.size, 0)
      expect(yield* storageOf(first.owner.userId)).toBe(size(batch.slice(0, 3)))
      expect(yield* storageOf(second.owner.userId)).toBe(size(batch.slice(3, 5)))

      // Stored again (every message redelivered): nothing new, nothing counted twice.
      expect(yield* storeEmails(sql, batch)).toEqual(batch.map(() => undefined))
      expect(yield* storageOf(first.owner.userId)).toBe(size(batch.slice(0, 3)))

      // Mail of a mailbox deleted since it was accepted is stored (hidden) but not counted: the delete
      // gave back what the mailbox held, and nothing would give this back.
      yield* sql`UPDATE mailboxes SET status = 'deleted', deleted_at = now() WHERE id = ${second.mailboxId}`
      const late = yield* newEmail(second, { subject: "Late", messageId: "<late@example.test>" })
      expect((yield* storeEmails(sql, [late]))[0]?.id).toBe(late.emailId)
      expect(yield* storageOf(second.owner.userId)).toBe(size(batch.slice(3, 5)))
    }))

  it.effect("a reply stored in the batch before its original: both in one thread", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const mailbox = yield* insertMailbox(yield* insertUser())
      const reply = yield* newEmail(mailbox, { subject: "Re: Lunch", messageId: "<l2@example.test>", inReplyTo: "<l1@example.test>" })
      const original = yield* newEmail(mailbox, { subject: "Lunch", messageId: "<l1@example.test>" })
      const [first, second] = yield* storeEmails(sql, [reply, original])
      expect(second!.threadId).toBe(first!.threadId)
    }))

  it.effect("a message the mailbox holds already (the copy of mail it sent itself) joins that one's thread, whatever its subject", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const mailbox = yield* insertMailbox(yield* insertUser())
      const [first] = yield* storeEmails(sql, [yield* newEmail(mailbox, { subject: "Note to self", messageId: "<self1@example.test>" })])
      const [copy] = yield* storeEmails(sql, [yield* newEmail(mailbox, { subject: "Another subject", messageId: "<self1@example.test>" })])
      const [other] = yield* storeEmails(sql, [yield* newEmail(mailbox, { subject: "Another subject", messageId: "<self2@example.test>" })])
      expect(copy!.threadId).toBe(first!.threadId)
      expect(other!.threadId).not.toBe(first!.threadId)
    }))

  it.effect("two answers to a message the mailbox does not hold are one thread, whichever comes first, in one batch too; a reply first naming the root then its original joins it", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const threadsOf = (mailbox: Mailbox, ...messages: ReadonlyArray<Message>) =>
        Effect.flatMap(Effect.forEach(messages, (m) => newEmail(mailbox, m)), (emails) =>
          Effect.forEach(emails, (email) => Effect.map(storeEmails(sql, [email]), ([row]) => row!.threadId)))
      // One answers with In-Reply-To alone; the other names the conversation's root too.
      const plain = (n: number): Message => ({ subject: "Re: Plan", messageId: `<plain${n}@example.test>`, inReplyTo: `<plan${n}@example.test>` })
      const full = (n: number): Message => ({
        subject: "Re: Plan",
        messageId: `<full${n}@example.test>`,
        inReplyTo: `<plan${n}@example.test>`,
        references: `<root${n}@example.test> <plan${n}@example.test>`
      })
      for (const [n, order] of [[1, [plain, full]], [2, [full, plain]]] as const) {
        const [a, b] = yield* threadsOf(yield* insertMailbox(yield* insertUser()), order[0](n), order[1](n))
        expect(b, `order ${n}`).toBe(a)
      }
      const mailbox = yield* insertMailbox(yield* insertUser())
      const batch = [yield* newEmail(mailbox, full(3)), yield* newEmail(mailbox, plain(3))]
      const [first, second] = yield* storeEmails(sql, batch)
      expect(second!.threadId).toBe(first!.threadId)
      // The original, come after a reply that named the root first, joins the reply's conversation;
      // a stranger's answer to something else does not.
      const [reply, original, other] = yield* threadsOf(
        yield* insertMailbox(yield* insertUser()),
        full(4),
        { subject: "Plan", messageId: "<plan4@example.test>" },
        { subject: "Re: Other", messageId: "<x4@example.test>", inReplyTo: "<other4@example.test>" }
      )
      expect(original).toBe(reply)
      expect(other).not.toBe(reply)
    }))

  it.effect("a message the mailbox has received already (its Message-ID, From and Date: a sender's retry) is not stored again; anything less alike is", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const mailbox = yield* insertMailbox(yield* insertUser())
      const elsewhere = yield* insertMailbox(yield* insertUser())
      const date = "Thu, 03 Dec 2026 10:00:00 +0000"
      const post = { subject: "Minutes", messageId: "<minutes@example.test>", date }
      const [first] = yield* storeEmails(sql, [yield* newEmail(mailbox, post)])
      expect(first?.id).toBeDefined()
      // Sent again under a new id (the sender did not hear our 250), twice in one batch too: none stored.
      const retries = [yield* newEmail(mailbox, post), yield* newEmail(mailbox, { ...post, subject: "Minutes (list copy)" })]
      expect(yield* storeEmails(sql, retries)).toEqual([undefined, undefined])
      const [alone] = yield* storeEmails(sql, [yield* newEmail(mailbox, post)])
      expect(alone).toBeUndefined()
      // Not the same message: another Date, another From, another mailbox; and mail without a Date is never taken for a copy.
      const others = [
        yield* newEmail(mailbox, { ...post, date: "Thu, 03 Dec 2026 10:00:01 +0000" }),
        yield* newEmail(mailbox, { ...post, from: "Bob <bob@example.test>" }),
        yield* newEmail(elsewhere, post),
        yield* newEmail(mailbox, { subject: "Undated", messageId: "<undated@example.test>" }),
        yield* newEmail(mailbox, { subject: "Undated", messageId: "<undated@example.test>" })
      ]
      expect((yield* storeEmails(sql, others)).map((row) => row?.id)).toEqual(others.map((e) => e.emailId))
      // One batch holding a message twice stores the first.
      const twice = { subject: "Agenda", messageId: "<agenda@example.test>", date }
      const batch = [yield* newEmail(mailbox, twice), yield* newEmail(mailbox, twice)]
      expect((yield* storeEmails(sql, batch)).map((row) => row?.id)).toEqual([batch[0]!.emailId, undefined])
      const held = yield* sql<{ n: string }>`SELECT count(*) AS n FROM emails WHERE mailbox_id = ${mailbox.mailboxId}`
      expect(Number(held[0]!.n)).toBe(1 + 2 + 2 + 1)
    }))

  it.effect("a copy dropped, or an email deleted since it was accepted, stores none of its attachments: the statement stores the rest of its batch", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const mailbox = yield* insertMailbox(yield* insertUser())
      const report = { subject: "Report", messageId: "<report@example.test>", date: "Thu, 03 Dec 2026 10:00:00 +0000", attachment: "Figures." }
      const [first] = yield* storeEmails(sql, [yield* newEmail(mailbox, report)])
      expect(first?.hasAttachments).toBe(true)
      // A sender's retry of it, and a message deleted before the bus delivered it again, beside a new one.
      const deleted = yield* newEmail(mailbox, { subject: "Gone", messageId: "<gone@example.test>", attachment: "Old." })
      yield* sql`INSERT INTO deleted_emails (id) VALUES (${deleted.emailId})`
      const fresh = yield* newEmail(mailbox, { subject: "New", messageId: "<new@example.test>", attachment: "New figures." })
      const stored = yield* storeEmails(sql, [yield* newEmail(mailbox, report), deleted, fresh])
      expect(stored.map((row) => row?.id)).toEqual([undefined, undefined, fresh.emailId])
      const attachments = yield* sql<{ emailId: string }>`
        SELECT email_id FROM attachments WHERE email_id IN (SELECT id FROM emails WHERE mailbox_id = ${mailbox.mailboxId})`
      expect(attachments.map((a) => a.emailId).sort()).toEqual([first!.id, fresh.emailId].sort())
    }))

  it.effect("a header longer than an index row holds (a long folded Subject, a Message-ID, a sender) is stored cut, whole in the headers; a reply to the long Message-ID joins its thread", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const mailbox = yield* insertMailbox(yield* insertUser())
      // Letters that do not compress (an index keeps a long value compressed when it can).
      let seed = 7
      const letters = (n: number) =>
        Array.from({ length: n }, () => "abcdefghijklmnopqrstuvwxyzäöüéèñçß"[(seed = (seed * 48271) % 2147483647) % 34]).join("")
      const words = Array.from({ length: 400 }, () => letters(8)).join(" ")
      const folded = words.match(/.{1,70}(?: |$)/g)!.join("\r\n ")
      const longId = `<${letters(3000)}@example.test>`
      const sender = `${letters(3000)}@example.test`
      const [stored] = yield* storeEmails(sql, [yield* newEmail(mailbox, { subject: folded, messageId: longId, from: sender })])
      expect(stored).toBeDefined()
      expect(new TextEncoder().encode(stored!.subject).length).toBeLessThanOrEqual(MAX_INDEXED_BYTES)
      expect(stored!.subject.length).toBeGreaterThan(MAX_INDEXED_BYTES / 2)
      expect(words.startsWith(stored!.subject.replace(/\s+/g, " "))).toBe(true)
      expect(sender.startsWith(stored!.fromAddress)).toBe(true)
      const headers = yield* sql<{ subject: string }>`SELECT headers->>'subject' AS subject FROM emails WHERE id = ${stored!.id}`
      expect(headers[0]!.subject.replace(/\s+/g, " ")).toBe(words)
      const [reply] = yield* storeEmails(sql, [yield* newEmail(mailbox, { subject: "Re: it", messageId: "<reply@example.test>", inReplyTo: longId })])
      expect(reply!.threadId).toBe(stored!.threadId)
    }))

  it.effect("a Date past the year 9999 (a sender's to choose) is stored, not refused, dated when it was received (no client reads a five-digit year)", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const mailbox = yield* insertMailbox(yield* insertUser())
      const far = yield* newEmail(mailbox, { subject: "From the future", messageId: "<f1@example.test>", date: "Sat, 01 Jan 10000 00:00:00 +0000" })
      const [stored] = yield* storeEmails(sql, [far])
      expect(stored!.sentAt.getTime()).toBe(far.receivedAt.getTime())
      expect(stored!.receivedAt.getTime()).toBe(far.receivedAt.getTime())
    }))

  it.effect("the actor, given many messages at once, stores each once; one the database refuses fails alone", () =>
    Effect.gen(function*() {
      const ingest = yield* Ingest
      const sql = yield* SqlClient.SqlClient
      const mailbox = yield* insertMailbox(yield* insertUser())
      const message = (i: number, mailboxId = mailbox.mailboxId, userId = mailbox.owner.userId) =>
        Effect.gen(function*() {
          const raw = rawOf({ subject: `Message ${i}`, messageId: `<m${i}.${uniqueName("x")}@example.test>` })
          return yield* inboundMessage(mailbox, raw, { mailbox_id: mailboxId, user_id: userId })
        })
      const messages = yield* Effect.forEach([0, 1, 2, 3, 4, 5, 6, 7, 8, 9], (i) => message(i))
      // Naming an owner that does not exist: the database refuses its email.
      const refused = yield* message(10, mailbox.mailboxId, "usr_nobody")
      // Its mailbox gone with its account since it was accepted: dropped, not refused (store.ts).
      const dropped = yield* message(11, "mbx_deleted_since")
      const all = [...messages.slice(0, 5), refused, ...messages.slice(5, 8), dropped, ...messages.slice(8)]
      const exits = yield* Effect.forEach(all, (m) => Effect.exit(ingest.ingest(m, true)), { concurrency: "unbounded" })
      expect(exits.map(Exit.isSuccess)).toEqual(all.map((m) => m !== refused))
      expect(yield* sql`SELECT 1 FROM emails WHERE id = ${dropped.email_id}`).toEqual([])
      const stored = yield* sql<{ id: string }>`SELECT id FROM emails WHERE mailbox_id = ${mailbox.mailboxId} ORDER BY id`
      expect(stored.map((row) => row.id)).toEqual(messages.map((m) => m.email_id).sort())
    }))

  it.effect("checks at ingest what the SMTP node left unchecked, with the connection it passed on; keeps the verdicts it did check", () =>
    Effect.gen(function*() {
      const ingest = yield* Ingest
      const sql = yield* SqlClient.SqlClient
      const mailbox = yield* insertMailbox(yield* insertUser())
      const message = (subject: string, extra: Partial<InboundMessage>) =>
        Effect.gen(function*() {
          const raw = rawOf({ subject, messageId: `<${uniqueName("c")}@example.test>` })
          return yield* inboundMessage(mailbox, raw, extra)
        })
      const forged = yield* message("forged", { connection: { client_ip: "192.0.2.66", helo: "mx.forger.test" } })
      const genuine = yield* message("genuine", { connection: { client_ip: "198.51.100.7" } })
      const alreadyChecked = yield* message("checked at the SMTP node", {
        authentication: verdictFor("192.0.2.66"),
        authentication_results: "mx.test; checked before the 250"
      })
      const unchecked = yield* message("VERIFY_INBOUND=false", {})
      checked.length = 0
      for (const m of [forged, genuine, alreadyChecked, unchecked]) yield* ingest.ingest(m, true)

      // Only the two that carried their connection were checked, each with its own.
      expect(checked.map(({ clientIp, helo, mailFrom }) => ({ clientIp, helo, mailFrom }))).toEqual([
        { clientIp: "192.0.2.66", helo: "mx.forger.test", mailFrom: "ada@example.test" },
        { clientIp: "198.51.100.7", helo: undefined, mailFrom: "ada@example.test" }
      ])
      expect(new TextDecoder().decode(checked[0]!.raw)).toContain("Subject: forged")
      const rows = yield* sql<{ id: string; labels: Array<string>; authentication: Authentication | null; authenticationResults: string | null }>`
        SELECT id, labels, authentication, authentication_results FROM emails WHERE mailbox_id = ${mailbox.mailboxId}`
      const row = (m: { readonly email_id: string }) => rows.find((r) => r.id === m.email_id)!
      expect(row(forged)).toMatchObject({ authentication: verdictFor("192.0.2.66"), authenticationResults: "mx.test; checked for 192.0.2.66" })
      expect(row(forged).labels).toContain("unauthenticated")
      expect(row(genuine)).toMatchObject({ authentication: verdictFor("198.51.100.7"), authenticationResults: "mx.test; checked for 198.51.100.7" })
      expect(row(genuine).labels).not.toContain("unauthenticated")
      expect(row(alreadyChecked)).toMatchObject({ authentication: verdictFor("192.0.2.66"), authenticationResults: "mx.test; checked before the 250" })
      expect(row(alreadyChecked).labels).toContain("unauthenticated")
      expect(row(unchecked)).toMatchObject({ authentication: null, authenticationResults: null })
      expect(row(unchecked).labels).not.toContain("unauthenticated")
    }))
})
