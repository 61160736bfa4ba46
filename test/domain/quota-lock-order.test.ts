/**
 * The counters inbound mail counts against the plan (services/mail/inbound.ts) are locked in one order
 * by every statement that writes them: the day's row, then the period's. A message's statement took
 * them so, but the one giving a refused message's counts back took the period's first (PostgreSQL
 * runs data-modifying WITH parts no query reads last-first): with a message of the same account in
 * between, each held the row the other waited for, and PostgreSQL broke the deadlock by failing one
 * (451 at DATA, or a count never given back). PostgreSQL only: the embedded database has one connection.
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
import { testDatabase } from "../support/database.ts"
import { DOMAIN, insertMailbox } from "../support/seed-mail.ts"
import { mode } from "../support/services.ts"
import { insertUser } from "../support/users.ts"

/** A bus that never acknowledges a publish: the acceptance waits there until interrupted, then gives its counts back. */
const silentBus = Layer.effect(Bus, Effect.map(Bus, (bus) => ({ ...bus, publish: () => Effect.never }))).pipe(
  Layer.provide(MemoryBus.layer)
)

const services = Inbound.Default.pipe(
  Layer.provideMerge(Layer.merge(RecipientDirectory.Default, Principals.Default)),
  Layer.provide(Layer.succeed(MailboxSettings, { sharedDomains: [DOMAIN], disallowedNames: [] })),
  Layer.provideMerge(silentBus),
  Layer.provideMerge(DependencyHealth.Default),
  Layer.provideMerge(testDatabase)
)

const SENDER = "ada@example.com"

const counted = (userId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ today: number; period: number }>`
      SELECT (SELECT coalesce(sum(emails), 0)::int FROM mail_daily_counters WHERE user_id = ${userId}) AS today,
             (SELECT coalesce(sum(emails), 0)::int FROM usage_counters WHERE user_id = ${userId}) AS period`)

layer(services, { timeout: "60 seconds", excludeTestServices: true })("Inbound counters' lock order", (it) => {
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
