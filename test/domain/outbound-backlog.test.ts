/**
 * What sent mail waits to go (services/outbound/backlog.ts), over the suite's migrated database:
 * deliveries queued and deferred are counted, settled ones are not, the oldest queued one's wait is
 * told, and the figures follow the table at each sample, as /readyz and the metrics read them.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Duration, Effect, Layer, Metric, TestServices } from "effect"
import { oldestGauge, OutboundBacklog, OutboundBacklogInterval, waitingGauge } from "../../services/outbound/backlog.ts"
import { testDatabase } from "../support/database.ts"
import { insertEmail, insertMailbox } from "../support/seed-mail.ts"
import { insertUser } from "../support/users.ts"

/** Sampled every 20 ms. */
const sampling = OutboundBacklog.Default.pipe(Layer.provide(Layer.succeed(OutboundBacklogInterval, Duration.millis(20))))

layer(testDatabase, { timeout: "60 seconds" })("OutboundBacklog", (it) => {
  it.effect("counts the deliveries waiting (queued, deferred) and how long the oldest queued one has waited", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const backlog = yield* OutboundBacklog
      const mailbox = yield* insertMailbox(yield* insertUser())
      const { id } = yield* insertEmail(mailbox, { subject: "Waiting", receivedMinutesAgo: 1 })
      const deliveries = [["a", "queued", 600], ["b", "queued", 5], ["c", "deferred", 900], ["d", "sent", 3600], ["e", "bounced", 3600]] as const
      // In one transaction, so that no sample sees some of them (a sample between two inserts once
      // counted both queued ones and no deferred one yet).
      yield* Effect.forEach(deliveries, ([name, status, secondsAgo]) =>
        sql`INSERT INTO outbound_deliveries (email_id, recipient, domain, status, updated_at)
            VALUES (${id}, ${`${name}@example.com`}, 'example.com', ${status}, now() - make_interval(secs => ${secondsAgo}))`, { discard: true }).pipe(sql.withTransaction)
      /** `read` again (each sample lands every 20 ms) until `done` holds, for up to 5 s. */
      const wait = <A>(read: Effect.Effect<A>, done: (a: A) => boolean) =>
        Effect.gen(function*() {
          for (let i = 0; i < 250; i++) {
            const value = yield* read
            if (done(value)) return value
            yield* Effect.sleep("20 millis")
          }
          return yield* read
        })
      const first = yield* wait(backlog.latest, (latest) => latest.queued === 2 && latest.deferred === 1)
      expect(first).toMatchObject({ queued: 2, deferred: 1 })
      expect(first.oldestQueuedSeconds).toBeGreaterThanOrEqual(600)
      expect(first.oldestQueuedSeconds).toBeLessThan(660)
      expect((yield* Metric.value(Metric.tagged(waitingGauge, "status", "queued"))).value).toBe(2)
      expect((yield* Metric.value(Metric.tagged(waitingGauge, "status", "deferred"))).value).toBe(1)

      // Sent at last: nothing waits, and the oldest wait is none.
      yield* sql`UPDATE outbound_deliveries SET status = 'sent', updated_at = now() WHERE email_id = ${id} AND status IN ('queued', 'deferred')`
      const after = yield* wait(backlog.latest, (latest) => latest.queued === 0)
      expect(after).toEqual({ queued: 0, deferred: 0, oldestQueuedSeconds: 0 })
      expect((yield* Metric.value(oldestGauge)).value).toBe(0)
    }).pipe(Effect.provide(sampling), TestServices.provideLive))
})
