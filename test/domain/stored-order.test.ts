/**
 * A list's `after` follows the order mail was stored (migration 0089, store.ts, emails.ts), in process
 * over the suite's migrated database. An agent's loop lists oldest first after the last email it saw;
 * ingest stores mail out of the order SMTP took it (two stores at once, a backlog drained), so a cursor
 * by arrival time skipped an email that arrived earlier and was stored later: it never showed up.
 * Each account numbers what it stores, its row locked until the store commits, so a store that takes
 * later numbers commits later: a list never shows an email before one stored ahead of it.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer } from "effect"
import { Deletions } from "../../services/mail/deletion.ts"
import { Emails } from "../../services/mail/emails.ts"
import { type NewEmail, storeEmails } from "../../services/mail/store.ts"
import * as MemoryBus from "../../layers/memory-bus.ts"
import { DependencyHealth } from "../../services/health/dependency-health.ts"
import { testDatabase } from "../support/database.ts"
import { indexerWith } from "../support/search-services.ts"
import { insertMailbox, type Mailbox, newInbound } from "../support/seed-mail.ts"
import { insertUser } from "../support/users.ts"

const services = Layer.mergeAll(Emails.Default, Deletions.Default).pipe(
  Layer.provideMerge(indexerWith()),
  Layer.provideMerge(MemoryBus.layer),
  Layer.provide(DependencyHealth.Default),
  Layer.provideMerge(testDatabase)
)

const oldestFirst = { field: "received_at", direction: "asc" } as const
const page = { limit: 20, offset: 0 }

/** What ingest would store for a message to `mailbox` that SMTP took `minutesAgo`. */
const arrived = (mailbox: Mailbox, subject: string, minutesAgo: number) =>
  Effect.map(
    newInbound(mailbox, new TextEncoder().encode(`Subject: ${subject}\r\nMessage-ID: <${subject}@test>\r\n\r\nHello.\r\n`), `<${subject}@test>`),
    (email): NewEmail => ({ ...email, receivedAt: new Date(Date.now() - minutesAgo * 60_000) })
  )

const subjectsAfter = (mailbox: Mailbox, after: string) =>
  Effect.flatMap(Emails, (emails) => emails.list(mailbox.owner.userId, mailbox.mailboxId, page, oldestFirst, { after })).pipe(
    Effect.map(({ emails, total }) => [emails.map((email) => email.subject), total] as const)
  )

layer(services, { timeout: "60 seconds" })("stored order", (it) => {
  it.effect("an email that arrived earlier but was stored after the cursor is listed after it, and the cursor may be deleted", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const mailbox = yield* insertMailbox(yield* insertUser())
      const early = yield* arrived(mailbox, "early", 10)
      const late = yield* arrived(mailbox, "late", 5)
      // The later arrival is stored first (another ingest took it); the agent lists and sees it.
      yield* storeEmails(sql, [late])
      const emails = yield* Emails
      const firstPage = (limit: number) =>
        Effect.map(emails.list(mailbox.owner.userId, mailbox.mailboxId, { limit, offset: 0 }, oldestFirst), ({ emails }) => emails.map((email) => email.subject))
      expect(yield* firstPage(20)).toEqual(["late"])
      const [seen] = yield* subjectsAfter(mailbox, early.emailId).pipe(Effect.flip, Effect.as(["refused"]))
      expect(seen).toBe("refused") // not stored yet: no place to carry on from
      yield* storeEmails(sql, [early])
      expect(yield* subjectsAfter(mailbox, late.emailId)).toEqual([["early"], 1])
      // A loop's first page (no cursor yet) is in the same order as the pages after it: what it lists
      // last is where the next carries on, nothing listed again, nothing passed over.
      expect(yield* firstPage(1)).toEqual(["late"])
      expect(yield* firstPage(20)).toEqual(["late", "early"])
      // A batch keeps its order within the account; three later, for a cursor deleted since.
      const batch = [yield* arrived(mailbox, "b1", 30), yield* arrived(mailbox, "b2", 1), yield* arrived(mailbox, "b3", 20)]
      yield* storeEmails(sql, batch)
      expect(yield* subjectsAfter(mailbox, late.emailId)).toEqual([["early", "b1", "b2", "b3"], 4])
      const deletions = yield* Deletions
      yield* deletions.emails(mailbox.owner.userId, [early.emailId])
      expect(yield* subjectsAfter(mailbox, early.emailId)).toEqual([["b1", "b2", "b3"], 3])
      // Newest first after a cursor: the same emails, the last stored first.
      const newest = yield* emails.list(mailbox.owner.userId, mailbox.mailboxId, page, { field: "received_at", direction: "desc" }, { after: late.emailId })
      expect(newest.emails.map((email) => email.subject)).toEqual(["b3", "b2", "b1"])
      // And across the account's mailboxes.
      const all = yield* emails.listAll(mailbox.owner.userId, page, oldestFirst, { after: late.emailId })
      expect(all.emails.map((email) => email.subject)).toEqual(["b1", "b2", "b3"])
    }))

  it.effect("a store that starts while another holds the account's numbers commits after it, with later numbers", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const mailbox = yield* insertMailbox(yield* insertUser())
      const first = yield* arrived(mailbox, "first", 1)
      const second = yield* arrived(mailbox, "second", 2)
      const stored = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      // The first store's transaction stays open, its numbers taken, until released.
      const holding = yield* Effect.fork(sql.withTransaction(Effect.gen(function*() {
        yield* storeEmails(sql, [first])
        yield* Deferred.succeed(stored, undefined)
        yield* Deferred.await(release)
      })))
      yield* Deferred.await(stored)
      const waiting = yield* Effect.fork(storeEmails(sql, [second]))
      // Real time (the test's clock stands still): long enough for the store to reach the database.
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 300)))
      // It waits for the account's row (or, embedded, for the one connection): nothing of it is stored yet.
      expect(yield* Fiber.poll(waiting)).toMatchObject({ _tag: "None" })
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(holding)
      yield* Fiber.join(waiting)
      const numbers = yield* sql<{ subject: string; storedSeq: string }>`
        SELECT subject, stored_seq FROM emails WHERE mailbox_id = ${mailbox.mailboxId} ORDER BY stored_seq`
      expect(numbers.map((row) => row.subject)).toEqual(["first", "second"])
      expect(Number(numbers[1]!.storedSeq)).toBe(Number(numbers[0]!.storedSeq) + 1)
    }))
})
