/**
 * The event log (services/events/log.ts) read in pages, as a resumed event stream reads it: every event
 * once, in the order it was logged, whatever the digits of its position (a text order would put seq
 * 1000 before 999 and a page's cursor past events not yet read). Embedded run only (vitest.config.ts): the
 * statement is the same on PostgreSQL, where other suites' transactions on the shared server would hold
 * the horizon below these events.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { EventLog, type Position } from "../../services/events/log.ts"
import { testDatabase } from "../support/database.ts"
import { insertUser } from "../support/users.ts"

layer(EventLog.Default.pipe(Layer.provideMerge(testDatabase)), { timeout: "60 seconds" })("the event log", (it) => {
  it.effect("reads every event once, in the order logged, page after page, across positions of more digits", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const log = yield* EventLog
      const { userId } = yield* insertUser()
      const count = 1_100
      // One transaction: one txid, and seq numbers that cross from three digits to four at least once.
      yield* sql`
        INSERT INTO event_log (event_id, user_id, kind, mailbox_id, payload)
        SELECT ${userId} || '-' || lpad(g::text, 5, '0'), ${userId}, 'email.received', NULL, '{}'
        FROM generate_series(1, ${count}) AS g`
      const read: Array<string> = []
      let after: Position = { txid: "0", seq: "0" }
      // As a stream reads: a page below the limit is everything committed below the horizon; while a
      // transaction running elsewhere on the server (another suite's database: txids are the server's)
      // holds the horizon below these events (`held`), look again shortly.
      for (let look = 0; look < 600 && read.length < count; look++) {
        const { events, held, next } = yield* log.read(userId, after, {}, 200)
        read.push(...events.map((event) => event.eventId))
        after = next
        if (events.length < 200 && held) yield* Effect.sleep("50 millis")
      }
      expect(read).toEqual(Array.from({ length: count }, (_, i) => `${userId}-${String(i + 1).padStart(5, "0")}`))
    }))
})
