/**
 * Deleting mail in process, over the suite's migrated database (services/mail/deletion.ts): what
 * goes with an email (its row, attachments' records, search documents, postings, lexicon counts,
 * vectors, its bytes from storage), all or none across a batch, a whole thread as it is when asked,
 * what refuses a deletion (deliveries pending, an unsent draft answering it) and the `email.deleted`
 * event. The HTTP routes are test/api/inbox-loop.test.ts's subject.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Duration, Effect, Layer, Queue } from "effect"
import { Bus, decodeJson } from "../../services/bus/bus.ts"
import { sweepOutbox } from "../../services/bus/outbox.ts"
import { DependencyHealth } from "../../services/health/dependency-health.ts"
import { Deletions } from "../../services/mail/deletion.ts"
import { Emails } from "../../services/mail/emails.ts"
import { Stats } from "../../services/mail/stats.ts"
import { storeEmails } from "../../services/mail/store.ts"
import { Indexer } from "../../services/search/indexer.ts"
import { Vectors } from "../../services/search/vectors.ts"
import { testDatabase } from "../support/database.ts"
import { hashedVector, indexerWith } from "../support/search-services.ts"
import { insertEmail, insertMailbox, type Mailbox, newInbound } from "../support/seed-mail.ts"
import { makeRefusingBus } from "../support/refusing-bus.ts"
import { insertUser } from "../support/users.ts"

const refusingBus = makeRefusingBus()
const services = Layer.mergeAll(Deletions.Default, Emails.Default, Stats.Default).pipe(
  Layer.provideMerge(indexerWith()),
  Layer.provideMerge(refusingBus.layer),
  Layer.provide(DependencyHealth.Default),
  Layer.provideMerge(testDatabase)
)

const failure = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.flip(effect) as Effect.Effect<any, A, any>

/** An email of `mailbox`, indexed for search, with the storage it takes counted as ingest counts it. */
const stored = (mailbox: Mailbox, subject: string, options: { readonly threadId?: string; readonly text?: string } = {}) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const email = yield* insertEmail(mailbox, {
      subject,
      text: options.text ?? `About ${subject}`,
      receivedMinutesAgo: 1,
      ...(options.threadId ? { threadId: options.threadId } : {}),
      attachments: [{ filename: "note.txt", contentType: "text/plain", bytes: new TextEncoder().encode(`${subject} notes`) }]
    })
    yield* sql`
      INSERT INTO storage_usage (user_id, bytes) VALUES (${mailbox.owner.userId}, ${email.raw.length})
      ON CONFLICT (user_id) DO UPDATE SET bytes = storage_usage.bytes + EXCLUDED.bytes`
    yield* (yield* Indexer).index(email.id)
    return email
  })

const storage = (userId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ bytes: string }>`SELECT bytes FROM storage_usage WHERE user_id = ${userId}`.pipe(Effect.map((rows) => Number(rows[0]?.bytes ?? 0))))

layer(services, { timeout: "120 seconds" })("Deletions", (it) => {
  it.scoped("an email goes with its attachments, search data and vectors; its bytes leave storage; the thread keeps the rest; it is announced", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const deletions = yield* Deletions
      const emails = yield* Emails
      const bus = yield* Bus
      const announced = yield* Queue.unbounded<any>()
      yield* bus.consume({
        name: "deletion-test",
        stream: "events",
        filter: "events.email.deleted",
        handler: (message) => Queue.offer(announced, decodeJson(message.data))
      }).pipe(Effect.forkScoped)
      const mailbox = yield* insertMailbox(yield* insertUser())
      const userId = mailbox.owner.userId
      const doomed = yield* stored(mailbox, "Quarterly zanzibar report", { threadId: "thr_deletion_1" })
      const kept = yield* stored(mailbox, "Re: Quarterly zanzibar report", { threadId: "thr_deletion_1" })
      const before = yield* storage(userId)
      const lexicon = () =>
        sql<{ documents: number }>`SELECT documents FROM search_lexicon WHERE user_id = ${userId} AND lexeme = 'zanzibar'`.pipe(
          Effect.map((rows) => rows[0]?.documents ?? 0)
        )
      expect(yield* lexicon()).toBe(2)

      const answer = yield* deletions.emails(userId, [doomed.id, doomed.id])
      expect(answer).toEqual({ deleted: 1, email_ids: [doomed.id] })
      expect(yield* failure(emails.get(userId, doomed.id))).toMatchObject({ code: "NOT_FOUND" })
      expect((yield* emails.thread(userId, "thr_deletion_1")).emails.map((e) => e.email_id)).toEqual([kept.id])
      expect(yield* storage(userId)).toBe(before - doomed.raw.length)
      expect(yield* lexicon()).toBe(1)
      const leftovers = yield* sql<{ n: string }>`
        SELECT (SELECT count(*) FROM attachments WHERE email_id = ${doomed.id})
             + (SELECT count(*) FROM search_documents WHERE email_id = ${doomed.id})
             + (SELECT count(*) FROM search_terms WHERE email_id = ${doomed.id}) AS n`
      expect(Number(leftovers[0]!.n)).toBe(0)
      const collection = yield* (yield* Vectors).collection
      const nearest = yield* collection.search(hashedVector("Quarterly zanzibar report"), { namespace: userId }, 10)
      expect(nearest.map((hit) => hit.emailId)).toEqual([kept.id])

      const event = yield* Queue.take(announced).pipe(Effect.timeout(Duration.seconds(10)))
      expect(event).toMatchObject({
        event: "email.deleted",
        namespace: userId,
        data: { email_id: doomed.id, mailbox_id: mailbox.mailboxId, thread_id: "thr_deletion_1", subject: "Quarterly zanzibar report" }
      })
      // Deleted is gone: asked again, it is not found.
      expect(yield* failure(deletions.emails(userId, [doomed.id]))).toMatchObject({ code: "NOT_FOUND", details: { email_id: doomed.id } })

      // Deleted while the bus is down: deleted all the same, and announced once the bus is back (the outbox's sweep).
      expect(yield* refusingBus.whileRefusing(deletions.emails(userId, [kept.id]))).toEqual({ deleted: 1, email_ids: [kept.id] })
      expect(yield* Queue.poll(announced)).toMatchObject({ _tag: "None" })
      yield* sql`UPDATE outbox SET attempted_at = now() - interval '1 minute' WHERE msg_id = ${`email.deleted:${kept.id}`}`
      expect(yield* sweepOutbox).toBe(1)
      expect(yield* Queue.take(announced).pipe(Effect.timeout(Duration.seconds(10)))).toMatchObject({
        event: "email.deleted",
        data: { email_id: kept.id, thread_id: "thr_deletion_1" }
      })
    }))

  it.effect("a deleted email's message delivered again by the bus is not stored again", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const deletions = yield* Deletions
      const emails = yield* Emails
      const mailbox = yield* insertMailbox(yield* insertUser())
      const raw = new TextEncoder().encode("From: ada@example.test\r\nSubject: Again\r\nMessage-ID: <again@example.test>\r\n\r\nHello.\r\n")
      const message = yield* newInbound(mailbox, raw, "<again@example.test>")
      expect((yield* storeEmails(sql, [message]))[0]?.id).toBe(message.emailId)
      yield* deletions.emails(mailbox.owner.userId, [message.emailId])
      expect(yield* storeEmails(sql, [message])).toEqual([undefined])
      expect(yield* failure(emails.get(mailbox.owner.userId, message.emailId))).toMatchObject({ code: "NOT_FOUND" })
    }))

  it.effect("vectors an indexer stored for an email deleted meanwhile go when it is asked to index it again and finds it gone", () =>
    Effect.gen(function*() {
      const collection = yield* (yield* Vectors).collection
      const namespace = (yield* insertUser()).userId
      yield* collection.upsert([{
        emailId: "eml_deleted_while_indexed",
        chunk: 0,
        namespace,
        mailboxId: "mbx_gone",
        domain: "agents.localhost",
        date: new Date(),
        vector: hashedVector("a message deleted while it was being indexed")
      }])
      expect(yield* collection.count(namespace)).toBe(1)
      expect(yield* (yield* Indexer).index("eml_deleted_while_indexed")).toEqual({ outcome: "gone" })
      expect(yield* collection.count(namespace)).toBe(0)
    }))

  it.effect("a batch is all or none: one email not the caller's (or unknown) deletes nothing and names it", () =>
    Effect.gen(function*() {
      const deletions = yield* Deletions
      const emails = yield* Emails
      const mailbox = yield* insertMailbox(yield* insertUser())
      const stranger = yield* insertMailbox(yield* insertUser())
      const mine = yield* stored(mailbox, "Mine")
      const theirs = yield* stored(stranger, "Theirs")
      const refused = yield* failure(deletions.emails(mailbox.owner.userId, [mine.id, theirs.id, "eml_unknown"]))
      expect(refused).toMatchObject({ code: "NOT_FOUND", status: 404, details: { email_ids: [theirs.id, "eml_unknown"] } })
      expect((yield* emails.get(mailbox.owner.userId, mine.id)).email_id).toBe(mine.id)
      expect((yield* emails.get(stranger.owner.userId, theirs.id)).email_id).toBe(theirs.id)
    }))

  it.effect("a thread goes whole, and no other; another account's thread, or an unknown one, is 404", () =>
    Effect.gen(function*() {
      const deletions = yield* Deletions
      const emails = yield* Emails
      const mailbox = yield* insertMailbox(yield* insertUser())
      const userId = mailbox.owner.userId
      const a = yield* stored(mailbox, "Offsite", { threadId: "thr_deletion_2" })
      const b = yield* stored(mailbox, "Re: Offsite", { threadId: "thr_deletion_2" })
      const other = yield* stored(mailbox, "Lunch", { threadId: "thr_deletion_3" })
      expect(yield* failure(deletions.thread((yield* insertUser()).userId, "thr_deletion_2"))).toMatchObject({
        code: "NOT_FOUND",
        details: { thread_id: "thr_deletion_2" }
      })
      expect(yield* deletions.thread(userId, "thr_deletion_2")).toEqual({ deleted: 2, email_ids: [a.id, b.id].sort() })
      expect(yield* failure(emails.thread(userId, "thr_deletion_2"))).toMatchObject({ code: "NOT_FOUND" })
      expect((yield* emails.get(userId, other.id)).email_id).toBe(other.id)
      expect(yield* failure(deletions.thread(userId, "thr_deletion_2"))).toMatchObject({ code: "NOT_FOUND" })
    }))

  it.effect("a batch of threads goes whole, all or none: one thread not the caller's (or unknown) deletes nothing and names it", () =>
    Effect.gen(function*() {
      const deletions = yield* Deletions
      const emails = yield* Emails
      const mailbox = yield* insertMailbox(yield* insertUser())
      const userId = mailbox.owner.userId
      const thread = (n: number) => `thr_batch_${mailbox.mailboxId}_${n}`
      const a = yield* stored(mailbox, "Budget", { threadId: thread(1) })
      const b = yield* stored(mailbox, "Re: Budget", { threadId: thread(1) })
      const c = yield* stored(mailbox, "Party", { threadId: thread(2) })
      const kept = yield* stored(mailbox, "Keep", { threadId: thread(3) })
      const elsewhere = yield* insertMailbox(yield* insertUser())
      const theirs = yield* stored(elsewhere, "Theirs", { threadId: thread(4) })

      expect(yield* failure(deletions.threads(userId, [thread(1), thread(4)]))).toMatchObject({
        status: 404,
        code: "NOT_FOUND",
        message: "Thread not found",
        details: { thread_id: thread(4) }
      })
      expect(yield* failure(deletions.threads(userId, [thread(1), "thr_unknown", thread(4)]))).toMatchObject({
        status: 404,
        message: "Threads not found",
        details: { thread_ids: ["thr_unknown", thread(4)] }
      })
      expect((yield* emails.thread(userId, thread(1))).emails).toHaveLength(2)

      // Named twice, a thread counts once.
      expect(yield* deletions.threads(userId, [thread(2), thread(1), thread(2)])).toEqual({ deleted: 3, email_ids: [a.id, b.id, c.id].sort() })
      expect(yield* failure(emails.thread(userId, thread(1)))).toMatchObject({ code: "NOT_FOUND" })
      expect(yield* failure(emails.thread(userId, thread(2)))).toMatchObject({ code: "NOT_FOUND" })
      expect((yield* emails.get(userId, kept.id)).email_id).toBe(kept.id)
      expect((yield* emails.get(elsewhere.owner.userId, theirs.id)).email_id).toBe(theirs.id)
    }))

  it.effect("deleted mail still counts in the stats: received and sent, its recipients by outcome and complaint, on the day it came", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const deletions = yield* Deletions
      const stats = yield* Stats
      const mailbox = yield* insertMailbox(yield* insertUser())
      const userId = mailbox.owner.userId
      const received = yield* stored(mailbox, "Hello")
      const bounced = yield* stored(mailbox, "Offer")
      const kept = yield* stored(mailbox, "Newsletter")
      yield* sql`UPDATE emails SET direction = 'outbound', received_at = now() - interval '3 days' WHERE id IN (${bounced.id}, ${kept.id})`
      for (const [i, status] of ["bounced", "sent"].entries()) {
        yield* sql`INSERT INTO outbound_deliveries (email_id, recipient, domain, status)
                   VALUES (${bounced.id}, ${`r${i}@example.com`}, 'example.com', ${status}), (${kept.id}, ${`k${i}@example.com`}, 'example.com', ${status})`
      }
      yield* sql`UPDATE outbound_deliveries SET complained_at = now() WHERE email_id = ${bounced.id} AND status = 'sent'`
      const before = yield* stats.of(userId, { days: 7 })
      expect(before).toMatchObject({ received: 1, sent: 2, recipients: { sent: 2, bounced: 2 }, bounce_rate: 0.5, complaints: 1, complaint_rate: 0.5 })

      yield* deletions.emails(userId, [received.id, bounced.id])
      expect(yield* stats.of(userId, { days: 7 })).toEqual(before)
      expect(yield* stats.of(userId, { mailboxId: mailbox.mailboxId, days: 7 })).toEqual({ ...before, mailbox_id: mailbox.mailboxId })
      // Deleting the rest of the same day adds to what was kept.
      yield* deletions.emails(userId, [kept.id])
      expect(yield* stats.of(userId, { days: 7 })).toEqual(before)
      // Another mailbox's stats, and a limited key's of another mailbox, do not hold them.
      const other = yield* insertMailbox(mailbox.owner)
      expect(yield* stats.of(userId, { mailboxId: other.mailboxId, days: 7 })).toMatchObject({ received: 0, sent: 0, bounce_rate: null })
      expect(yield* stats.of(userId, { only: [other.mailboxId], days: 7 })).toMatchObject({ received: 0, sent: 0 })
    }))

  it.effect("sent mail with deliveries queued or deferred, and mail an unsent draft answers, are 409 CONFLICT until that is settled", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const deletions = yield* Deletions
      const mailbox = yield* insertMailbox(yield* insertUser())
      const userId = mailbox.owner.userId
      const sent = yield* stored(mailbox, "Shipping update")
      yield* sql`INSERT INTO outbound_deliveries (email_id, recipient, domain, status)
                 VALUES (${sent.id}, 'ada@partner.test', 'partner.test', 'queued'), (${sent.id}, 'bob@partner.test', 'partner.test', 'deferred'),
                        (${sent.id}, 'eve@partner.test', 'partner.test', 'sent')`
      const pending = yield* failure(deletions.emails(userId, [sent.id]))
      expect(pending).toMatchObject({ code: "CONFLICT", status: 409, details: { email_ids: [sent.id], pending_deliveries: 2 } })
      yield* sql`UPDATE outbound_deliveries SET status = 'bounced' WHERE email_id = ${sent.id} AND status <> 'sent'`

      const answered = yield* stored(mailbox, "Question")
      yield* sql`INSERT INTO drafts (id, user_id, mailbox_id, content, in_reply_to)
                 VALUES ('drf_deletion_1', ${userId}, ${mailbox.mailboxId}, '{}', ${answered.id})`
      const drafted = yield* failure(deletions.emails(userId, [sent.id, answered.id]))
      expect(drafted).toMatchObject({ code: "CONFLICT", details: { draft_ids: ["drf_deletion_1"] } })
      // Nothing went: the refusal is for the whole batch.
      expect(yield* deletions.emails(userId, [sent.id])).toEqual({ deleted: 1, email_ids: [sent.id] })
      yield* sql`DELETE FROM drafts WHERE id = 'drf_deletion_1'`
      expect(yield* deletions.emails(userId, [answered.id])).toEqual({ deleted: 1, email_ids: [answered.id] })
    }))
})
