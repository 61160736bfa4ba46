/**
 * A send counts against the plan's counters in the order every statement counting mail locks them
 * (services/outbound/send.ts, mail/inbound.ts): the day's row, then the period's. PostgreSQL runs WITH
 * parts that no query reads last-first, so a send's statement took the period's row first: with
 * inbound mail of the same account holding the day's row and then asking for the period's, each held
 * what the other waited for and PostgreSQL failed one (a send answered with an error, or a 451).
 * PostgreSQL only: the embedded database has one connection.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer } from "effect"
import { fromSendInput, Outbound } from "../../services/outbound/send.ts"
import { testDatabase } from "../support/database.ts"
import { inProcessOutbound } from "../support/outbound-services.ts"
import { insertMailbox } from "../support/seed-mail.ts"
import { mode } from "../support/services.ts"
import { insertUser } from "../support/users.ts"

const message = (subject: string) => fromSendInput({ to: ["someone@partner.test"], subject, text: "Hello." })

layer(Layer.provideMerge(inProcessOutbound, testDatabase), { timeout: "60 seconds", excludeTestServices: true })("Send counters' lock order", (it) => {
  it.effect.skipIf(mode !== "postgres")("a send waiting for the day's row holds no lock on the period's", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const sending = yield* Outbound
      const owner = yield* insertUser("pro")
      const box = yield* insertMailbox(owner)
      // The account's rows exist: the first send made them.
      yield* sending.submit(owner.userId, box.mailboxId, message("first"))

      // Inbound mail of the account, as its statement locks the rows: the day's first.
      const holdsDay = yield* Deferred.make<void>()
      const go = yield* Deferred.make<void>()
      const inbound = yield* Effect.fork(
        Effect.gen(function*() {
          yield* sql`SELECT 1 FROM mail_daily_counters WHERE user_id = ${owner.userId} FOR UPDATE`
          yield* Deferred.succeed(holdsDay, undefined)
          yield* Deferred.await(go)
        }).pipe(sql.withTransaction)
      )
      yield* Deferred.await(holdsDay)
      const send = yield* Effect.fork(sending.submit(owner.userId, box.mailboxId, message("second")))
      const waiting = sql<{ n: number }>`
        SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`
      while ((yield* waiting)[0]!.n === 0) yield* Effect.sleep("10 millis")

      // The send waits for the day's row; the period's is free (it was the send's, and inbound's next step would deadlock).
      const period = yield* Effect.either(
        sql`SELECT 1 FROM usage_counters WHERE user_id = ${owner.userId} FOR UPDATE NOWAIT`.pipe(sql.withTransaction)
      )
      expect(period._tag).toBe("Right")
      yield* Deferred.succeed(go, undefined)
      yield* Fiber.join(inbound)
      yield* Fiber.join(send)
      const counts = yield* sql<{ today: number; period: number }>`
        SELECT (SELECT sent FROM mail_daily_counters WHERE user_id = ${owner.userId})::int AS today,
               (SELECT emails_sent FROM usage_counters WHERE user_id = ${owner.userId})::int AS period`
      expect(counts).toEqual([{ today: 2, period: 2 }])
    }))
})
