/**
 * Accepting a message (services/mail/inbound.ts `accept`) where RCPT's judgement no longer holds:
 *
 * - the SMTP node stops waiting for it (its deadline answers 451 and interrupts the acceptance), so
 *   the sender will send the message again: whatever the interruption finds done must be undone, or
 *   the retry is counted twice against the owner's limits;
 * - parallel sessions each passed RCPT below a limit: together they may not pass it;
 * - statements counting the same account's mail wait for each other and never deadlock.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer } from "effect"
import * as MemoryBus from "../../layers/memory-bus.ts"
import { Principals } from "../../services/accounts/principals.ts"
import { Bus } from "../../services/bus/bus.ts"
import { DependencyHealth } from "../../services/health/dependency-health.ts"
import { RecipientDirectory } from "../../services/mail/directory.ts"
import { Inbound } from "../../services/mail/inbound.ts"
import { MailboxSettings } from "../../services/mailboxes/mailboxes.ts"
import { limits } from "../../services/plans/plans.ts"
import { testDatabase } from "../support/database.ts"
import { DOMAIN, insertMailbox } from "../support/seed-mail.ts"
import { mode } from "../support/services.ts"
import { insertUser } from "../support/users.ts"

/** A bus that never acknowledges a publish: the acceptance waits there until interrupted. */
const silentBus = Layer.effect(Bus, Effect.map(Bus, (bus) => ({ ...bus, publish: () => Effect.never }))).pipe(
  Layer.provide(MemoryBus.layer)
)

const servicesOver = (bus: Layer.Layer<Bus, never, SqlClient.SqlClient | DependencyHealth>) =>
  Inbound.Default.pipe(
    Layer.provideMerge(Layer.merge(RecipientDirectory.Default, Principals.Default)),
    Layer.provide(Layer.succeed(MailboxSettings, { sharedDomains: [DOMAIN], disallowedNames: [] })),
    Layer.provideMerge(bus),
    Layer.provideMerge(DependencyHealth.Default),
    Layer.provideMerge(testDatabase)
  )

const SENDER = "ada@example.com"

/** The owner's emails counted today and this period. */
const counted = (userId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ today: number; period: number }>`
      SELECT (SELECT coalesce(sum(emails), 0)::int FROM mail_daily_counters WHERE user_id = ${userId}) AS today,
             (SELECT coalesce(sum(emails), 0)::int FROM usage_counters WHERE user_id = ${userId}) AS period`)

// Wall-clock time: the store batches its statements behind a timer.
layer(servicesOver(silentBus), { timeout: "60 seconds", excludeTestServices: true })("Accepting a message, interrupted", (it) => {
  it.effect("interrupted once its bytes are stored (the SMTP deadline's 451), it gives back what it counted", () =>
    Effect.gen(function*() {
      const inbound = yield* Inbound
      const mailbox = yield* insertMailbox(yield* insertUser())
      const recipient = yield* inbound.recipient(mailbox.address, undefined, SENDER)
      const raw = new TextEncoder().encode(`From: ${SENDER}\r\nSubject: Slow\r\n\r\nhello\r\n`)
      const accepting = yield* Effect.fork(inbound.accept({ mailFrom: SENDER, recipients: [recipient], raw, receivedAt: new Date() }))
      // Stored and counted, then held at the bus.
      while ((yield* counted(mailbox.owner.userId))[0]!.today === 0) yield* Effect.sleep("10 millis")
      expect(yield* counted(mailbox.owner.userId)).toEqual([{ today: 1, period: 1 }])
      yield* Fiber.interrupt(accepting)
      expect(yield* counted(mailbox.owner.userId)).toEqual([{ today: 0, period: 0 }])
    }))

  // The counters are locked in one order by every statement that writes them, the day's row then the
  // period's: giving back took the period's first (PostgreSQL runs data-modifying WITH parts no query
  // reads last-first), and with a message of the same account in between each held the row the other
  // waited for (451 at DATA, or a count never given back). PostgreSQL only: the embedded database has one connection.
  it.effect.skipIf(mode !== "postgres")(
    "a count given back while another statement holds the day's row and then takes the period's: it waits, no deadlock",
    () =>
      Effect.gen(function*() {
        const inbound = yield* Inbound
        const sql = yield* SqlClient.SqlClient
        const mailbox = yield* insertMailbox(yield* insertUser())
        const userId = mailbox.owner.userId
        const recipient = yield* inbound.recipient(mailbox.address, undefined, SENDER)
        const raw = new TextEncoder().encode(`From: ${SENDER}\r\nSubject: Held\r\n\r\nhello\r\n`)
        const accepting = yield* Effect.fork(inbound.accept({ mailFrom: SENDER, recipients: [recipient], raw, receivedAt: new Date() }))
        while ((yield* counted(userId))[0]!.today === 0) yield* Effect.sleep("10 millis")

        // Another message of the account, as its statement locks the rows: the day's, then the period's.
        const holdsDay = yield* Deferred.make<void>()
        const go = yield* Deferred.make<void>()
        const other = yield* Effect.fork(
          Effect.gen(function*() {
            yield* sql`UPDATE mail_daily_counters SET emails = emails WHERE user_id = ${userId}`
            yield* Deferred.succeed(holdsDay, undefined)
            yield* Deferred.await(go)
            yield* sql`UPDATE usage_counters SET emails = emails WHERE user_id = ${userId}`
          }).pipe(sql.withTransaction, Effect.either)
        )
        yield* Deferred.await(holdsDay)
        // The held message is given up (the SMTP deadline): its counts are given back, which waits on a lock.
        const interrupting = yield* Effect.fork(Fiber.interrupt(accepting))
        const waiting = sql<{ n: number }>`
          SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`
        while ((yield* waiting)[0]!.n === 0) yield* Effect.sleep("10 millis")
        yield* Deferred.succeed(go, undefined)

        expect((yield* Fiber.join(other))._tag).toBe("Right")
        yield* Fiber.join(interrupting)
        expect(yield* counted(userId)).toEqual([{ today: 0, period: 0 }])
      })
  )
})

layer(servicesOver(MemoryBus.layer), { timeout: "60 seconds", excludeTestServices: true })("Accepting messages in parallel", (it) => {
  it.effect("sessions that each passed RCPT two emails under the daily limit: two are accepted, the others refused as RCPT now would", () =>
    Effect.gen(function*() {
      const inbound = yield* Inbound
      const sql = yield* SqlClient.SqlClient
      const mailbox = yield* insertMailbox(yield* insertUser())
      const limit = limits.free.emailsPerDay
      yield* sql`INSERT INTO mail_daily_counters (user_id, day, emails) VALUES (${mailbox.owner.userId}, (now() AT TIME ZONE 'UTC')::date, ${limit - 2})`
      // Five sessions past RCPT before any of them reaches DATA.
      const recipients = yield* Effect.forEach([1, 2, 3, 4, 5], () => inbound.recipient(mailbox.address, undefined, SENDER))
      const outcomes = yield* Effect.forEach(
        recipients,
        (recipient, i) =>
          inbound.accept({
            mailFrom: SENDER,
            recipients: [recipient],
            raw: new TextEncoder().encode(`From: ${SENDER}\r\nSubject: Parallel ${i}\r\n\r\nhello\r\n`),
            receivedAt: new Date()
          }).pipe(Effect.match({ onSuccess: () => "accepted", onFailure: (refusal) => refusal.reply.text })),
        { concurrency: "unbounded" }
      )
      expect(outcomes.filter((outcome) => outcome === "accepted")).toHaveLength(2)
      expect(outcomes.filter((outcome) => outcome !== "accepted")).toEqual(
        Array(3).fill(`4.2.2 <${mailbox.address}>: daily limit of ${limit} emails reached, try again tomorrow`)
      )
      expect((yield* counted(mailbox.owner.userId))[0]!.today).toBe(limit)
    }))
})

layer(servicesOver(MemoryBus.layer), { timeout: "60 seconds", excludeTestServices: true })("RCPT within one transaction", (it) => {
  it.effect("one email short of the period's limit, a message to three mailboxes of the account: the second is refused 552 5.2.2, as counted with the first", () =>
    Effect.gen(function*() {
      const inbound = yield* Inbound
      const sql = yield* SqlClient.SqlClient
      const owner = yield* insertUser()
      const [first, second, third] = yield* Effect.forEach([1, 2, 3], () => insertMailbox(owner))
      const limit = limits.free.emailsPerMonth!
      yield* sql`INSERT INTO usage_counters (user_id, period_start, emails)
                 SELECT user_id, current_period_start, ${limit - 1} FROM subscriptions WHERE user_id = ${owner.userId}`
      const accepted = [yield* inbound.recipient(first!.address, undefined, SENDER, [])]
      for (const mailbox of [second!, third!]) {
        const refused = yield* Effect.flip(inbound.recipient(mailbox.address, undefined, SENDER, accepted))
        expect(refused.reply).toEqual({ code: 552, text: `5.2.2 <${mailbox.address}>: monthly limit of ${limit} emails reached` })
      }
      // Another address of the mailbox accepted already adds no email to it; another account's is its own.
      const [local, domain] = first!.address.split("@")
      expect((yield* inbound.recipient(`${local}+again@${domain}`, undefined, SENDER, accepted)).mailboxId).toBe(first!.mailboxId)
      const stranger = yield* insertMailbox(yield* insertUser())
      expect((yield* inbound.recipient(stranger.address, undefined, SENDER, accepted)).mailboxId).toBe(stranger.mailboxId)
    }))

  it.effect("one email short of the day's limit: the second recipient of the account is refused 452 4.2.2", () =>
    Effect.gen(function*() {
      const inbound = yield* Inbound
      const sql = yield* SqlClient.SqlClient
      const owner = yield* insertUser("pro")
      const [first, second] = yield* Effect.forEach([1, 2], () => insertMailbox(owner))
      const limit = limits.pro.emailsPerDay
      yield* sql`INSERT INTO mail_daily_counters (user_id, day, emails) VALUES (${owner.userId}, (now() AT TIME ZONE 'UTC')::date, ${limit - 1})`
      const accepted = [yield* inbound.recipient(first!.address, undefined, SENDER, [])]
      const refused = yield* Effect.flip(inbound.recipient(second!.address, undefined, SENDER, accepted))
      expect(refused.reply.code).toBe(452)
    }))
})
