/**
 * The plan's send limits (services/outbound/send.ts) in process, over the suite's migrated database:
 * sends accepted at the same moment are stored together and each one counts, per day and per billing
 * period; the send past the day's limit is 403 SEND_QUOTA with its window, count, limit and plan,
 * and nothing of it is stored or counted; the billing period's limit likewise. Sends at the same
 * moment, each reading the counters below the limit, cannot together pass it (the counters' checks).
 */
import { SqlClient } from "@effect/sql"
import * as fs from "node:fs"
import { expect, layer } from "@effect/vitest"
import { Duration, Effect, Either, Exit, Fiber, Layer, Option, Schema } from "effect"
import { BusError, type BusMessage, type ComeBackAfter, ComeBackAfterTypeId, encodeJson, subjects } from "../../services/bus/bus.ts"
import { Dns } from "../../services/dns/dns.ts"
import { Lifecycle } from "../../services/lifecycle.ts"
import { RecipientDirectory } from "../../services/mail/directory.ts"
import { Inbound, utcDay } from "../../services/mail/inbound.ts"
import { Mailboxes } from "../../services/mailboxes/mailboxes.ts"
import { Drafts } from "../../services/outbound/drafts.ts"
import { ArcSeal } from "../../services/outbound/arc-seal.ts"
import { ForwardedCopies } from "../../services/outbound/forwards.ts"
import { Mta } from "../../services/outbound/mta.ts"
import { Replies } from "../../services/outbound/replies.ts"
import { requeueStranded } from "../../services/outbound/requeue.ts"
import { SendInput } from "../../services/outbound/schemas.ts"
import { fromSendInput, Outbound } from "../../services/outbound/send.ts"
import { SmtpTransport } from "../../services/outbound/transport.ts"
import { migrationsDirectory } from "../../src/database.ts"
import { testDatabase } from "../support/database.ts"
import { inProcessOutbound as outbound, inProcessOutboundOver } from "../support/outbound-services.ts"
import { DOMAIN, insertEmail, insertMailbox } from "../support/seed-mail.ts"
import { insertUser } from "../support/users.ts"

const message = (i: number) => fromSendInput({ to: [`reader${i}@partner.test`], subject: `Report ${i}`, text: "Figures attached." })

/** The account's sends counted today and in its current period. */
const counted = (userId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ today: number | null; period: number | null; emails: string }>`
      SELECT (SELECT sent::int FROM mail_daily_counters WHERE user_id = ${userId} AND day = ${utcDay(new Date())}::date) AS today,
             (SELECT sum(emails_sent)::int FROM usage_counters WHERE user_id = ${userId}) AS period,
             (SELECT count(*) FROM emails WHERE user_id = ${userId} AND direction = 'outbound') AS emails`).pipe(
    Effect.map((rows) => ({ today: rows[0]!.today ?? 0, period: rows[0]!.period ?? 0, emails: Number(rows[0]!.emails) }))
  )

layer(testDatabase, { timeout: "120 seconds" })("send limits", (it) => {
  it.layer(outbound)("the Outbound service", (it) => {
    it.effect("sends accepted at once are each counted; past the day's 100 (free) the next is 403 SEND_QUOTA and nothing is stored", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const sending = yield* Outbound
        const owner = yield* insertUser("pro")
        const box = yield* insertMailbox(owner)
        // Thirty sends at the same moment: stored in batches, counted one each.
        const sent = yield* Effect.forEach(Array.from({ length: 30 }, (_, i) => i), (i) => sending.submit(owner.userId, box.mailboxId, message(i)), {
          concurrency: "unbounded"
        })
        expect(new Set(sent.map((s) => s.email_id)).size).toBe(30)
        expect(yield* counted(owner.userId)).toEqual({ today: 30, period: 30, emails: 30 })
        const deliveries = yield* sql<{ n: string }>`SELECT count(*) AS n FROM outbound_deliveries d JOIN emails e ON e.id = d.email_id WHERE e.user_id = ${owner.userId}`
        expect(Number(deliveries[0]!.n)).toBe(30)

        const free = yield* insertUser("free")
        const freeBox = yield* insertMailbox(free)
        yield* sql`INSERT INTO mail_daily_counters (user_id, day, sent) VALUES (${free.userId}, ${utcDay(new Date())}::date, 98)`
        const last = yield* Effect.forEach([1, 2], (i) => sending.submit(free.userId, freeBox.mailboxId, message(i)), { concurrency: "unbounded" })
        expect(last).toHaveLength(2)
        const refused = yield* Effect.either(sending.submit(free.userId, freeBox.mailboxId, message(3)))
        expect(Either.isLeft(refused) && refused.left).toMatchObject({
          code: "SEND_QUOTA",
          status: 403,
          details: { window: "day", used: 100, limit: 100, plan: "free" }
        })
        expect(yield* counted(free.userId)).toEqual({ today: 100, period: 2, emails: 2 })
      }))

    it.effect("a send whose copy would pass the plan's storage is 403 STORAGE_QUOTA, nothing stored or counted; one that fits is sent and counted as storage", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const sending = yield* Outbound
        const free = yield* insertUser("free")
        const box = yield* insertMailbox(free)
        const storage = () =>
          Effect.map(sql<{ bytes: string }>`SELECT bytes FROM storage_usage WHERE user_id = ${free.userId}`, (rows) => Number(rows[0]?.bytes ?? 0))
        // 1 GB less 100 KB stored: a short message fits, one with a 200 KB attachment does not.
        const GB = 2 ** 30
        yield* sql`INSERT INTO storage_usage (user_id, bytes) VALUES (${free.userId}, ${GB - 100 * 1024})
                   ON CONFLICT (user_id) DO UPDATE SET bytes = EXCLUDED.bytes`
        const large = fromSendInput({
          to: ["reader@partner.test"],
          subject: "Archive",
          text: "Attached.",
          attachments: [{ filename: "archive.bin", content_type: "application/octet-stream", content: Buffer.alloc(200 * 1024, 7).toString("base64") }]
        })
        const refused = yield* Effect.flip(sending.submit(free.userId, box.mailboxId, large))
        expect(refused).toMatchObject({
          code: "STORAGE_QUOTA",
          status: 403,
          details: { used: GB - 100 * 1024, limit: GB, plan: "free" }
        })
        expect((refused as unknown as { details: { size: number } }).details.size).toBeGreaterThan(200 * 1024)
        expect(yield* counted(free.userId)).toEqual({ today: 0, period: 0, emails: 0 })
        expect(yield* storage()).toBe(GB - 100 * 1024)

        yield* sending.submit(free.userId, box.mailboxId, message(1))
        expect(yield* counted(free.userId)).toEqual({ today: 1, period: 1, emails: 1 })
        const stored = yield* storage()
        expect(stored).toBeGreaterThan(GB - 100 * 1024)
        // Now full to within less than the large message: refused again; a pro account's 50 GB takes it.
        yield* sql`UPDATE storage_usage SET bytes = ${GB} WHERE user_id = ${free.userId}`
        expect(yield* Effect.flip(sending.submit(free.userId, box.mailboxId, message(2)))).toMatchObject({ code: "STORAGE_QUOTA" })
        const pro = yield* insertUser("pro")
        const proBox = yield* insertMailbox(pro)
        yield* sql`INSERT INTO storage_usage (user_id, bytes) VALUES (${pro.userId}, ${GB}) ON CONFLICT (user_id) DO UPDATE SET bytes = EXCLUDED.bytes`
        yield* sending.submit(pro.userId, proBox.mailboxId, large)
      }))

    it.effect("a message a mail program composed goes to the envelope's addresses as the API's would: one that is no address refuses it, a Unicode domain goes as punycode", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const sending = yield* Outbound
        const owner = yield* insertUser("pro")
        const box = yield* insertMailbox(owner)
        const raw = new TextEncoder().encode(`From: ${box.address}\r\nTo: ada@partner.test\r\nSubject: Hello\r\n\r\nHi.\r\n`)
        for (const nowhere of ["postmaster", "ada@partner", "ada@[127.0.0.1]"]) {
          expect(yield* Effect.flip(sending.submitComposed(owner.userId, box.mailboxId, { raw, recipients: ["ada@partner.test", nowhere] }))).toMatchObject({
            code: "VALIDATION_ERROR",
            details: { to: `${nowhere} is not an email address such as name@example.com` }
          })
        }
        expect(yield* counted(owner.userId)).toEqual({ today: 0, period: 0, emails: 0 })
        const sent = yield* sending.submitComposed(owner.userId, box.mailboxId, { raw, recipients: ["ada@partner.test", "jo@bücher.example"] })
        const recipients = yield* sql<{ recipient: string }>`SELECT recipient FROM outbound_deliveries WHERE email_id = ${sent.email_id} ORDER BY recipient`
        expect(recipients.map((r) => r.recipient)).toEqual(["ada@partner.test", "jo@xn--bcher-kva.example"])
      }))

    it.effect("sends at the same moment cannot together pass a limit: of ten with five left, five are sent and five refused; of two batches of 60 with 100 left, one, and the other is told the 40 left", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const sending = yield* Outbound
        const ten = (userId: string, mailboxId: string) =>
          Effect.forEach(Array.from({ length: 10 }, (_, i) => i), (i) => Effect.either(sending.submit(userId, mailboxId, message(i))), {
            concurrency: "unbounded"
          })
        const refusals = (results: ReadonlyArray<Either.Either<unknown, unknown>>) =>
          results.flatMap((result) => (Either.isLeft(result) ? [result.left] : []))

        // The day's limit: every send reads 95 of 100 used, each would pass alone.
        const daily = yield* insertUser("free")
        const dailyBox = yield* insertMailbox(daily)
        yield* sql`INSERT INTO mail_daily_counters (user_id, day, sent) VALUES (${daily.userId}, ${utcDay(new Date())}::date, 95)`
        const byDay = refusals(yield* ten(daily.userId, dailyBox.mailboxId))
        expect(byDay).toHaveLength(5)
        for (const refusal of byDay) {
          expect(refusal).toMatchObject({ code: "SEND_QUOTA", status: 403, details: { window: "day", used: 100, limit: 100, plan: "free" } })
        }
        expect(yield* counted(daily.userId)).toEqual({ today: 100, period: 5, emails: 5 })

        // The billing period's likewise.
        const monthly = yield* insertUser("free")
        const monthlyBox = yield* insertMailbox(monthly)
        yield* sql`INSERT INTO usage_counters (user_id, period_start, emails_sent)
                   SELECT user_id, current_period_start, 95 FROM subscriptions WHERE user_id = ${monthly.userId}`
        const byPeriod = refusals(yield* ten(monthly.userId, monthlyBox.mailboxId))
        expect(byPeriod).toHaveLength(5)
        expect(byPeriod[0]).toMatchObject({ code: "SEND_QUOTA", details: { window: "period", used: 100, limit: 100 } })
        expect(yield* counted(monthly.userId)).toEqual({ today: 5, period: 100, emails: 5 })

        // Two batches of 60 with 100 left: each would pass alone; the one refused says what the other left.
        const batches = yield* insertUser("free")
        const batchesBox = yield* insertMailbox(batches)
        const sixty = Array.from({ length: 60 }, (_, i) => message(i))
        const both = yield* Effect.all([0, 1].map(() => Effect.either(sending.submitBatch(batches.userId, batchesBox.mailboxId, sixty))), {
          concurrency: "unbounded"
        })
        // Both of free's limits are 100: the period is told, as waiting for tomorrow would not help (the day's check refused the statement).
        expect(refusals(both)).toEqual([expect.objectContaining({
          code: "SEND_QUOTA",
          message: "The free plan sends at most 100 messages a billing period: 60 sent, 40 left, fewer than these 60",
          details: { window: "period", used: 60, limit: 100, plan: "free" }
        })])
        expect(yield* counted(batches.userId)).toEqual({ today: 60, period: 60, emails: 60 })
      }))

    it.effect("null for an optional field of a send is its absence, as a draft answers its fields and an SDK writes None", () =>
      Effect.gen(function*() {
        const sending = yield* Outbound
        const owner = yield* insertUser("free")
        const box = yield* insertMailbox(owner)
        const body = { to: ["reader@partner.test"], cc: null, bcc: null, subject: null, reply_to: null, text: "Hi.", html: null, attachments: null, headers: null, list_unsubscribe: null }
        const input = yield* Schema.decodeUnknown(SendInput)(body)
        expect(input).toEqual({ to: ["reader@partner.test"], text: "Hi." })
        expect(yield* sending.submit(owner.userId, box.mailboxId, fromSendInput(input))).toMatchObject({ status: "queued" })
        // A value of the wrong type is still refused.
        expect(Exit.isFailure(yield* Effect.exit(Schema.decodeUnknown(SendInput)({ ...body, cc: "a@partner.test" })))).toBe(true)
      }))

    it.effect("what an email gives a reply to all or a forward is counted when the reply or the draft is made: past 50 recipients or 100 attachments, refused naming what to change", () =>
      Effect.gen(function*() {
        const drafts = yield* Drafts
        const replies = yield* Replies
        const owner = yield* insertUser("pro")
        const box = yield* insertMailbox(owner)
        const crowd = Array.from({ length: 60 }, (_, i) => `reader${i}@partner.test`)
        const announced = yield* insertEmail(box, { subject: "To all", receivedMinutesAgo: 1, headers: { to: [box.address, ...crowd].join(", ") } })
        const tooMany = "makes 61 recipients (the email's and the draft's), more than the 50 a message may have: leave reply_all out and name whom to answer in to and cc"
        expect(yield* Effect.flip(drafts.create(owner.userId, box.mailboxId, { in_reply_to: announced.id, reply_all: true, text: "Noted." }))).toMatchObject({
          code: "VALIDATION_ERROR",
          details: { reply_all: tooMany }
        })
        // Made a reply to all by an edit, likewise; a reply to the sender alone is fine, as is naming fewer.
        const plain = yield* drafts.create(owner.userId, box.mailboxId, { in_reply_to: announced.id, text: "Noted." })
        expect(plain.to).toEqual(["sender@example.com"])
        expect(yield* Effect.flip(drafts.update(owner.userId, box.mailboxId, plain.draft_id, { reply_all: true }))).toMatchObject({ details: { reply_all: tooMany } })
        expect(yield* Effect.flip(drafts.update(owner.userId, box.mailboxId, plain.draft_id, { cc: crowd }))).toMatchObject({
          details: { to: "must list at most 50 recipients (to, cc and bcc together)" }
        })
        expect(yield* Effect.flip(replies.reply(owner.userId, announced.id, { text: "Noted." }, true))).toMatchObject({
          code: "VALIDATION_ERROR",
          details: {
            email_id: "has 61 recipients to reply to all, more than the 50 a message may have: " +
              "reply to the sender alone, or make a draft (in_reply_to) naming whom to answer in to and cc"
          }
        })

        // A forward carries the original's attachments: with the draft's own, at most 100, told when made or edited.
        const file = (i: number) => ({ filename: `${i}.txt`, content_type: "text/plain", content: "aGk=" })
        const carrying = yield* insertEmail(box, {
          subject: "Files",
          receivedMinutesAgo: 1,
          attachments: [1, 2].map((i) => ({ filename: `${i}.txt`, contentType: "text/plain", bytes: new TextEncoder().encode(`file ${i}`) }))
        })
        const past = { attachments: "must list at most 98 attachments: the email forwarded carries 2 of the 100 a message may have" }
        expect(yield* Effect.flip(drafts.create(owner.userId, box.mailboxId, {
          forward_of: carrying.id,
          to: ["desk@partner.test"],
          attachments: Array.from({ length: 99 }, (_, i) => file(i))
        }))).toMatchObject({ code: "VALIDATION_ERROR", details: past })
        const forward = yield* drafts.create(owner.userId, box.mailboxId, { forward_of: carrying.id, to: ["desk@partner.test"], attachments: [file(0)] })
        expect(yield* Effect.flip(drafts.update(owner.userId, box.mailboxId, forward.draft_id, { attachments: Array.from({ length: 99 }, (_, i) => file(i)) })))
          .toMatchObject({ details: past })
        const full = yield* drafts.update(owner.userId, box.mailboxId, forward.draft_id, { attachments: Array.from({ length: 98 }, (_, i) => file(i)) })
        expect(full.attachments).toHaveLength(98)
        // Made a forward of it by an edit, a plain draft with 99 attachments is refused too.
        const own = yield* drafts.create(owner.userId, box.mailboxId, { to: ["desk@partner.test"], attachments: Array.from({ length: 99 }, (_, i) => file(i)) })
        expect(yield* Effect.flip(drafts.update(owner.userId, box.mailboxId, own.draft_id, { forward_of: carrying.id }))).toMatchObject({ details: past })
      }))

    it.effect("a sender whose local part is quoted without need (\"ada\"@…, the same mailbox) is answered at its plain address", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const replies = yield* Replies
        const owner = yield* insertUser("pro")
        const box = yield* insertMailbox(owner)
        const quoted = yield* insertEmail(box, { subject: "Quoted", receivedMinutesAgo: 1, headers: { from: 'Quoted <"sub2"@human.example>' } })
        const sent = yield* replies.reply(owner.userId, quoted.id, { text: "Got it." }, false)
        const to = yield* sql<{ recipient: string }>`SELECT recipient FROM outbound_deliveries WHERE email_id = ${sent.email_id}`
        expect(to.map((r) => r.recipient)).toEqual(["sub2@human.example"])
      }))

    it.effect("drafts count as storage until sent or deleted (their mailbox's deletion too); a draft past the plan's storage is 403 STORAGE_QUOTA", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const drafts = yield* Drafts
        const owner = yield* insertUser("free")
        const box = yield* insertMailbox(owner)
        const storage = () =>
          Effect.map(sql<{ bytes: string }>`SELECT bytes FROM storage_usage WHERE user_id = ${owner.userId}`, (rows) => Number(rows[0]?.bytes ?? 0))
        const attachment = (kb: number) => [{ filename: "notes.bin", content_type: "application/octet-stream", content: Buffer.alloc(kb * 1024, 1).toString("base64") }]

        const draft = yield* drafts.create(owner.userId, box.mailboxId, { to: ["reader@partner.test"], subject: "Notes", text: "Attached.", attachments: attachment(300) })
        const afterCreate = yield* storage()
        expect(afterCreate).toBeGreaterThan(400 * 1024) // 300 KB in base64
        const second = yield* drafts.create(owner.userId, box.mailboxId, { subject: "Later", text: "Short." })
        const withSecond = yield* storage()
        expect(withSecond).toBeGreaterThan(afterCreate)
        expect(withSecond).toBeLessThan(afterCreate + 1024)
        // An edit counts what it changes: the attachment gone, the drafts hold a few bytes; back, as before.
        yield* drafts.update(owner.userId, box.mailboxId, draft.draft_id, { attachments: [] })
        expect(yield* storage()).toBeLessThan(2048)
        yield* drafts.update(owner.userId, box.mailboxId, draft.draft_id, { attachments: attachment(300) })
        expect(yield* storage()).toBe(withSecond)

        // Sent, the draft stops counting and the email it became counts instead (the raw message).
        const beforeSend = yield* storage()
        yield* drafts.send(owner.userId, box.mailboxId, draft.draft_id)
        const sentSize = Number((yield* sql<{ size: string }>`SELECT size FROM emails WHERE user_id = ${owner.userId} AND direction = 'outbound'`)[0]!.size)
        const draftBytes = Number((yield* sql<{ bytes: string }>`SELECT mailroom_draft_bytes('draft', content) AS bytes FROM drafts WHERE id = ${draft.draft_id}`)[0]!.bytes)
        expect(yield* storage()).toBe(beforeSend - draftBytes + sentSize)

        // A draft that fits can be sent, though until then the account holds it twice over: its bytes pass to its email.
        const nearlyFull = yield* drafts.create(owner.userId, box.mailboxId, { to: ["reader@partner.test"], subject: "Last", text: "The last one.", attachments: attachment(300) })
        const lastBytes = Number((yield* sql<{ bytes: string }>`SELECT mailroom_draft_bytes('draft', content) AS bytes FROM drafts WHERE id = ${nearlyFull.draft_id}`)[0]!.bytes)
        yield* sql`UPDATE storage_usage SET bytes = ${2 ** 30 - lastBytes - 1024} WHERE user_id = ${owner.userId}`
        yield* drafts.send(owner.userId, box.mailboxId, nearlyFull.draft_id)
        yield* drafts.remove(owner.userId, box.mailboxId, nearlyFull.draft_id)

        // Near the plan's 1 GB: a draft that would pass it is refused; editing one down is not.
        const GB = 2 ** 30
        const near = GB - 200 * 1024
        yield* sql`UPDATE storage_usage SET bytes = ${near} WHERE user_id = ${owner.userId}`
        const refused = yield* Effect.flip(drafts.create(owner.userId, box.mailboxId, { subject: "Big", attachments: attachment(300) }))
        expect(refused).toMatchObject({ code: "STORAGE_QUOTA", status: 403, details: { used: near, limit: GB, plan: "free" } })
        expect(yield* Effect.flip(drafts.update(owner.userId, box.mailboxId, second.draft_id, { attachments: attachment(300) })))
          .toMatchObject({ code: "STORAGE_QUOTA" })
        yield* drafts.update(owner.userId, box.mailboxId, second.draft_id, { text: "S." })
        expect(yield* storage()).toBeLessThan(near)

        // The mailbox deleted: its drafts go, and stop counting.
        const mailboxes = yield* Mailboxes
        const before = yield* storage()
        const secondBytes = Number((yield* sql<{ bytes: string }>`SELECT mailroom_draft_bytes(status, content) AS bytes FROM drafts WHERE id = ${second.draft_id}`)[0]!.bytes)
        const emailBytes = Number((yield* sql<{ bytes: string }>`SELECT sum(size) AS bytes FROM emails WHERE mailbox_id = ${box.mailboxId}`)[0]!.bytes)
        yield* mailboxes.remove({ userId: owner.userId, plan: "free" }, box.mailboxId, box.address)
        expect(yield* sql`SELECT 1 FROM drafts WHERE mailbox_id = ${box.mailboxId}`).toEqual([])
        expect(yield* storage()).toBe(before - secondBytes - emailBytes)
      }))

    it.effect("migration 0071 takes what is no address out of unsent drafts' recipients: such a draft made every list of drafts fail", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const drafts = yield* Drafts
        const owner = yield* insertUser("pro")
        const box = yield* insertMailbox(owner)
        const listed = drafts.list(owner.userId, box.mailboxId, { limit: 20, offset: 0 }, { field: "created_at", direction: "asc" }, undefined)
        const kept = yield* drafts.create(owner.userId, box.mailboxId, { to: ["ok@partner.test"], cc: [{ name: "Y", address: "y@partner.test" }], text: "Hi" })
        const sent = yield* drafts.create(owner.userId, box.mailboxId, { to: ["sent@partner.test"], text: "Gone" })
        // As a reply to a From that named no address once stored them (the unsent draft), and as nothing sent ever holds.
        const stored = JSON.stringify({ to: ["not an address", "ok@partner.test"], bcc: ['"a@b"@example.net'] })
        yield* sql`UPDATE drafts SET content = content || ${stored}::jsonb WHERE id = ${kept.draft_id}`
        yield* sql`UPDATE drafts SET status = 'sent', content = content || ${JSON.stringify({ to: ["not an address"] })}::jsonb WHERE id = ${sent.draft_id}`
        expect(Exit.isFailure(yield* Effect.exit(listed))).toBe(true)

        const script = fs.readFileSync(`${migrationsDirectory}/0071_drafts_without_unusable_recipients.sql`, "utf8")
        yield* sql.unsafe(script).raw.pipe(sql.withTransaction)
        const repaired = yield* sql<{ id: string; content: string }>`SELECT id, content::text AS content FROM drafts WHERE mailbox_id = ${box.mailboxId} ORDER BY created_at`
        expect(repaired.map((row) => [row.id, JSON.parse(row.content).to, JSON.parse(row.content).bcc])).toEqual([
          [kept.draft_id, ["ok@partner.test"], []],
          [sent.draft_id, ["not an address"], undefined]
        ])
        expect((yield* drafts.get(owner.userId, box.mailboxId, kept.draft_id)).cc).toEqual([{ name: "Y", address: "y@partner.test" }])
      }))

    it.effect("past the billing period's 100 (free) the next is 403 SEND_QUOTA for the period", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const sending = yield* Outbound
        const free = yield* insertUser("free")
        const box = yield* insertMailbox(free)
        yield* sql`INSERT INTO usage_counters (user_id, period_start, emails_sent)
                   SELECT user_id, current_period_start, 100 FROM subscriptions WHERE user_id = ${free.userId}`
        const refused = yield* Effect.either(sending.submit(free.userId, box.mailboxId, message(1)))
        expect(Either.isLeft(refused) && refused.left).toMatchObject({
          code: "SEND_QUOTA",
          status: 403,
          details: { window: "period", used: 100, limit: 100, plan: "free" }
        })
        expect((yield* counted(free.userId)).emails).toBe(0)
      }))
  })

  // A bus that refuses while `refusing` is set (NATS down at a draft's time), or never answers while
  // `silent` is (a process about to die); the ids of the jobs it took.
  let refusing = false
  let silent = false
  // Events only refused (NATS lost just after a delivery was written).
  let refusingEvents = false
  const taken: Array<string> = []
  /** The subjects of the messages it took (`mail.inbound.<mailbox>`: mail a mailbox here received). */
  const takenSubjects: Array<string> = []
  /** How many messages the mailbox received: accepted here, on their way to its ingest. */
  const receivedBy = (mailboxId: string) =>
    Effect.sync(() => takenSubjects.filter((subject) => subject === subjects.inboundMail(mailboxId)).length)
  /** A wall-clock pause (the suite's TestClock would never end an Effect.sleep). */
  const pause = Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 10)))
  const troubledBus = inProcessOutboundOver((bus) => ({
    ...bus,
    publish: (subject, data, options) =>
      refusing || (refusingEvents && subject.startsWith("events."))
        ? Effect.fail(new BusError({ message: "NATS is down" }))
        : silent
        ? Effect.never
        : Effect.tap(bus.publish(subject, data, options), () =>
          Effect.sync(() => {
            taken.push(options.msgId)
            takenSubjects.push(subject)
          }))
  }))

  it.layer(troubledBus)("sent mail whose job the bus never took", (it) => {
    it.effect("is queued again by the sweep once stranded (the sender died between storing and publishing), once", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const sending = yield* Outbound
        const owner = yield* insertUser("pro")
        const box = yield* insertMailbox(owner)
        silent = true
        const dying = yield* Effect.fork(sending.submit(owner.userId, box.mailboxId, message(1)))
        const stored = () => sql<{ emailId: string; published: boolean }>`
          SELECT d.email_id, d.published FROM outbound_deliveries d JOIN emails e ON e.id = d.email_id WHERE e.user_id = ${owner.userId}`
        while ((yield* stored()).length === 0) yield* pause
        yield* Fiber.interrupt(dying)
        silent = false
        const [left] = yield* stored()
        expect(left).toEqual({ emailId: expect.stringMatching(/^eml_/), published: false })
        // Not while its sender may still be publishing it.
        expect(yield* requeueStranded).toBe(0)
        yield* sql`UPDATE outbound_deliveries SET updated_at = now() - interval '1 minute' WHERE email_id = ${left!.emailId}`
        expect(yield* requeueStranded).toBe(1)
        expect(taken).toContain(`outbound:${left!.emailId}:partner.test`)
        expect(yield* stored()).toEqual([{ emailId: left!.emailId, published: true }])
        yield* sql`UPDATE outbound_deliveries SET updated_at = now() - interval '1 minute' WHERE email_id = ${left!.emailId}`
        expect(yield* requeueStranded).toBe(0)
        // A send that lived is marked published behind its answer: never swept.
        const lived = yield* sending.submit(owner.userId, box.mailboxId, message(2))
        const marked = () => sql<{ published: boolean }>`SELECT published FROM outbound_deliveries WHERE email_id = ${lived.email_id}`
        while (!(yield* marked())[0]!.published) yield* pause
      }))

    it.effect("refused by the bus, is taken back: 503, nothing kept or counted; should the take-back fail too, it is accepted and left for the sweep", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const sending = yield* Outbound
        const owner = yield* insertUser("pro")
        const box = yield* insertMailbox(owner)
        refusing = true
        const refused = yield* Effect.flip(sending.submit(owner.userId, box.mailboxId, message(3)))
        expect(refused).toMatchObject({ _tag: "ServiceUnavailable", message: "The message could not be queued; nothing was sent, retry" })
        expect(yield* counted(owner.userId)).toEqual({ today: 0, period: 0, emails: 0 })
        // The database refuses the take-back (as if it went away that moment): the send stays, queued for the sweep.
        yield* sql`CREATE FUNCTION refuse_take_back() RETURNS trigger LANGUAGE plpgsql AS $$
                   BEGIN RAISE EXCEPTION 'the database went away'; END $$`
        yield* sql`CREATE TRIGGER refuse_take_back BEFORE DELETE ON emails FOR EACH ROW
                   WHEN (OLD.user_id = ${sql.literal(`'${owner.userId}'`)}) EXECUTE FUNCTION refuse_take_back()`
        const kept = yield* sending.submit(owner.userId, box.mailboxId, message(4)).pipe(
          Effect.ensuring(Effect.orDie(Effect.zipRight(sql`DROP TRIGGER refuse_take_back ON emails`, sql`DROP FUNCTION refuse_take_back()`)))
        )
        refusing = false
        expect(kept).toMatchObject({ email_id: expect.stringMatching(/^eml_/), status: "queued" })
        expect(yield* counted(owner.userId)).toEqual({ today: 1, period: 1, emails: 1 })
        yield* sql`UPDATE outbound_deliveries SET updated_at = now() - interval '1 minute' WHERE email_id = ${kept.email_id}`
        expect(yield* requeueStranded).toBe(1)
        expect(taken).toContain(`outbound:${kept.email_id}:partner.test`)
      }))
  })

  // The mta over the same bus, delivering to mailboxes here only (no network: no DNS, no SMTP client).
  const unused = <A>() => ({}) as A
  const withMta = Mta.Default.pipe(
    Layer.provideMerge(Layer.mergeAll(
      Inbound.Default.pipe(Layer.provide(RecipientDirectory.Default)),
      ForwardedCopies.Default.pipe(Layer.provide(Layer.succeed(ArcSeal, unused<ArcSeal["Type"]>()))),
      Layer.succeed(Dns, unused<Dns["Type"]>()),
      Layer.succeed(SmtpTransport, unused<SmtpTransport["Type"]>()),
      Lifecycle.forever
    )),
    Layer.provideMerge(troubledBus)
  )

  it.layer(withMta)("a delivery's events", (it) => {
    it.effect("a delivery written but not told (the bus refused the event) is told when its job comes back, under the same event id, once", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const sending = yield* Outbound
        const mta = yield* Mta
        const owner = yield* insertUser("pro")
        const box = yield* insertMailbox(owner)
        const desk = yield* insertMailbox(owner)
        const sent = yield* sending.submit(owner.userId, box.mailboxId, fromSendInput({ to: [desk.address], subject: "Memo", text: "Read me." }))
        const job = { email_id: sent.email_id, domain: DOMAIN }
        const delivery = () =>
          sql<{ status: string; attempts: number; announced: boolean }>`
            SELECT status, attempts, announced FROM outbound_deliveries WHERE email_id = ${sent.email_id}`
        const told = () => taken.filter((id) => id.startsWith(`email.sent:${sent.email_id}:`))
        refusingEvents = true
        const first = yield* Effect.either(mta.deliver(job))
        refusingEvents = false
        expect(Either.isLeft(first)).toBe(true)
        expect(yield* delivery()).toEqual([{ status: "sent", attempts: 1, announced: false }])
        expect(told()).toEqual([])
        // The job comes back (it was not acknowledged): nothing is sent again, the change is told.
        yield* mta.deliver(job)
        expect(yield* delivery()).toEqual([{ status: "sent", attempts: 1, announced: true }])
        expect(told()).toEqual([`email.sent:${sent.email_id}:${desk.address}:1`])
        yield* mta.deliver(job)
        expect(told()).toHaveLength(1)
        expect((yield* delivery())[0]!.attempts).toBe(1)
      }))
  })

  it.layer(withMta)("a job handed out twice at once", (it) => {
    it.effect("is tried by one copy: recipients another attempt holds are left to it until its claim ends, then tried; a failed attempt lets go of them", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const sending = yield* Outbound
        const mta = yield* Mta
        const owner = yield* insertUser("pro")
        const box = yield* insertMailbox(owner)
        const desk = yield* insertMailbox(owner)
        const sent = yield* sending.submit(owner.userId, box.mailboxId, fromSendInput({ to: [desk.address], subject: "Once", text: "Only once." }))
        const job = { email_id: sent.email_id, domain: DOMAIN }
        const delivery = () =>
          sql<{ status: string; attempts: number; claim: string | null }>`
            SELECT status, attempts, claim FROM outbound_deliveries WHERE email_id = ${sent.email_id}`
        // Another attempt holds the recipient for 20 s more: this copy sends nothing and comes back once that ends.
        yield* sql`UPDATE outbound_deliveries SET claim = 'att_other', claimed_until = now() + interval '20 seconds' WHERE email_id = ${sent.email_id}`
        const held = yield* Effect.flip(mta.deliver(job))
        expect(held._tag).toBe("DeliveryHeld")
        const comeBack = Duration.toMillis((held as unknown as ComeBackAfter)[ComeBackAfterTypeId])
        expect(comeBack).toBeGreaterThan(19_000)
        expect(comeBack).toBeLessThan(22_000)
        expect(yield* delivery()).toEqual([{ status: "queued", attempts: 0, claim: "att_other" }])
        expect(yield* receivedBy(desk.mailboxId)).toBe(0)
        // Its claim ended (its process died and renews it no more): the copy delivers it, and the claim ends with the record.
        yield* sql`UPDATE outbound_deliveries SET claimed_until = now() - interval '1 second' WHERE email_id = ${sent.email_id}`
        yield* mta.deliver(job)
        expect(yield* delivery()).toEqual([{ status: "sent", attempts: 1, claim: null }])
        expect(yield* receivedBy(desk.mailboxId)).toBe(1)
        // Two copies at once: one delivers, the other finds it held or settled; nothing arrives twice.
        const twice = yield* sending.submit(owner.userId, box.mailboxId, fromSendInput({ to: [desk.address], subject: "Twice", text: "Still once." }))
        const copies = yield* Effect.all(
          [0, 1].map(() => Effect.either(mta.deliver({ email_id: twice.email_id, domain: DOMAIN }))),
          { concurrency: "unbounded" }
        )
        for (const copy of copies) if (Either.isLeft(copy)) expect(copy.left._tag).toBe("DeliveryHeld")
        expect(yield* receivedBy(desk.mailboxId)).toBe(2)
        // An attempt that fails before its record (here the resolver is missing: a defect) lets go of its claim at once.
        const away = yield* sending.submit(owner.userId, box.mailboxId, fromSendInput({ to: ["reader@partner.test"], subject: "Out", text: "Far." }))
        expect(Exit.isFailure(yield* Effect.exit(mta.deliver({ email_id: away.email_id, domain: "partner.test" })))).toBe(true)
        expect(yield* sql`SELECT status, attempts, claim, claimed_until FROM outbound_deliveries WHERE email_id = ${away.email_id}`)
          .toEqual([{ status: "queued", attempts: 0, claim: null, claimedUntil: null }])
      }))
  })

  it.layer(withMta)("a forwarded copy's job handed out twice at once", (it) => {
    it.effect("leaves addresses another attempt holds to it until its claim ends, then delivers them, once", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const mta = yield* Mta
        const owner = yield* insertUser("pro")
        const box = yield* insertMailbox(owner)
        const desk = yield* insertMailbox(owner)
        const email = yield* insertEmail(box, { subject: "Pass it on", receivedMinutesAgo: 1, text: "For the desk." })
        yield* sql`INSERT INTO forward_deliveries (email_id, address, domain, claim, claimed_until)
                   VALUES (${email.id}, ${desk.address}, ${DOMAIN}, 'att_other', now() + interval '20 seconds')`
        const job: BusMessage = {
          subject: subjects.forwardedMail(email.id),
          data: encodeJson({ forward_of: email.id, domain: DOMAIN }),
          msgId: `forward:${email.id}:${DOMAIN}`,
          deliveryCount: 2
        }
        const copy = () => sql`SELECT status, attempts, claim FROM forward_deliveries WHERE email_id = ${email.id}`
        expect((yield* Effect.flip(mta.handle(job)))._tag).toBe("DeliveryHeld")
        expect(yield* copy()).toEqual([{ status: "queued", attempts: 0, claim: "att_other" }])
        expect(yield* receivedBy(desk.mailboxId)).toBe(0)
        yield* sql`UPDATE forward_deliveries SET claimed_until = now() - interval '1 second' WHERE email_id = ${email.id}`
        yield* mta.handle(job)
        expect(yield* copy()).toEqual([{ status: "sent", attempts: 1, claim: null }])
        expect(yield* receivedBy(desk.mailboxId)).toBe(1)
        yield* mta.handle(job)
        expect(yield* receivedBy(desk.mailboxId)).toBe(1)
      }))
  })

  it.layer(troubledBus)("the draft scheduler", (it) => {
    /** The draft's state as the API shows it. */
    const stateOf = (draftId: string) =>
      Effect.flatMap(SqlClient.SqlClient, (sql) =>
        sql<{ status: string; sendAt: Date | null; emailId: string | null; lastError: string | null }>`
          SELECT status, send_at, email_id, last_error FROM drafts WHERE id = ${draftId}`).pipe(Effect.map((rows) => rows[0]!))

    it.effect("a scheduled draft that could not be queued (the bus down) stays scheduled, says why, and leaves once it can", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const drafts = yield* Drafts
        const owner = yield* insertUser("pro")
        const box = yield* insertMailbox(owner)
        const draft = yield* drafts.create(owner.userId, box.mailboxId, { to: ["reader@partner.test"], subject: "Due", text: "On time." })
        yield* sql`UPDATE drafts SET send_at = now() - interval '1 second' WHERE id = ${draft.draft_id}`
        refusing = true
        const round = yield* Effect.either(drafts.sendDue)
        refusing = false
        expect(Either.isLeft(round) && round.left._tag).toBe("ServiceUnavailable")
        expect(yield* stateOf(draft.draft_id)).toMatchObject({ status: "draft", sendAt: expect.any(Date), emailId: null, lastError: expect.stringContaining("retry") })
        // Not again at once: after a pause.
        yield* drafts.sendDue
        expect((yield* stateOf(draft.draft_id)).status).toBe("draft")
        yield* sql`UPDATE drafts SET updated_at = now() - interval '1 minute' WHERE id = ${draft.draft_id}`
        yield* drafts.sendDue
        expect(yield* stateOf(draft.draft_id)).toMatchObject({ status: "sent", emailId: expect.stringMatching(/^eml_/), lastError: null })
      }))

    it.effect("a draft a dead sender left sending (by hand, unscheduled) is sent by the scheduler, once", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const drafts = yield* Drafts
        const owner = yield* insertUser("pro")
        const box = yield* insertMailbox(owner)
        const draft = yield* drafts.create(owner.userId, box.mailboxId, { to: ["reader@partner.test"], subject: "Approved", text: "Go." })
        yield* sql`UPDATE drafts SET status = 'sending', updated_at = now() - interval '2 minutes' WHERE id = ${draft.draft_id}`
        yield* drafts.sendDue
        const sent = yield* stateOf(draft.draft_id)
        expect(sent).toMatchObject({ status: "sent", emailId: expect.stringMatching(/^eml_/) })
        expect((yield* counted(owner.userId)).emails).toBe(1)
      }))

    it.effect("tells how long until a round has something to do: a draft's time, an outage's retry, a dead sender's draft", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const drafts = yield* Drafts
        const owner = yield* insertUser("pro")
        const box = yield* insertMailbox(owner)
        const seconds = Effect.map(drafts.untilDue, Option.map((until) => Duration.toSeconds(until)))
        const make = (subject: string, sendAt?: Date) =>
          drafts.create(owner.userId, box.mailboxId, { to: ["reader@partner.test"], subject, text: "x", ...(sendAt ? { send_at: sendAt.toISOString() } : {}) })
        // The drafts before were sent; one without a time waits for nobody.
        yield* make("Unscheduled")
        expect(yield* seconds).toEqual(Option.none())
        yield* make("In an hour", new Date(Date.now() + 3_600_000))
        expect(Option.getOrThrow(yield* seconds)).toBeCloseTo(3_600, -1)
        // Held back by an outage just now: tried again 5 s after.
        const held = yield* make("Held")
        yield* sql`UPDATE drafts SET send_at = now() - interval '1 second', last_error = 'down', updated_at = now() WHERE id = ${held.draft_id}`
        expect(Option.getOrThrow(yield* seconds)).toBeCloseTo(5, 0)
        // Left sending 58 s ago by a sender that may be dead: taken again at a minute.
        const stuck = yield* make("Stuck")
        yield* sql`UPDATE drafts SET status = 'sending', updated_at = now() - interval '58 seconds' WHERE id = ${stuck.draft_id}`
        expect(Option.getOrThrow(yield* seconds)).toBeCloseTo(2, 0)
        // Overdue is now, not a time past.
        yield* sql`UPDATE drafts SET updated_at = now() - interval '2 minutes' WHERE id = ${stuck.draft_id}`
        expect(yield* seconds).toEqual(Option.some(0))
      }))
  })
})
