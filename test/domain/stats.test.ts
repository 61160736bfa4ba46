/**
 * Mail stats in process, over the suite's migrated database (services/mail/stats.ts): emails received
 * and sent by day, the sent ones' recipients by status, the bounce rate and the spam complaints, of one mailbox or of every
 * active one (of some, for a key limited to them), every day covered listed; mail of a deleted
 * mailbox and mail older than the days asked for left out. The route is test/api/limited-keys.test.ts's.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { Stats } from "../../services/mail/stats.ts"
import { testDatabase } from "../support/database.ts"
import { insertEmail, insertMailbox, type Mailbox } from "../support/seed-mail.ts"
import { insertUser } from "../support/users.ts"

const services = Stats.Default.pipe(Layer.provideMerge(testDatabase))

/** An email of `mailbox`, `minutesAgo`; a sent one with a delivery row per recipient status given. */
const email = (mailbox: Mailbox, minutesAgo: number, recipients?: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const { id } = yield* insertEmail(mailbox, { subject: "Stats", receivedMinutesAgo: minutesAgo })
    if (recipients !== undefined) {
      yield* sql`UPDATE emails SET direction = 'outbound' WHERE id = ${id}`
      for (const [i, status] of recipients.entries()) {
        yield* sql`INSERT INTO outbound_deliveries (email_id, recipient, domain, status) VALUES (${id}, ${`r${i}@example.com`}, 'example.com', ${status})`
      }
    }
    const rows = yield* sql<{ day: string }>`SELECT to_char(received_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day FROM emails WHERE id = ${id}`
    return rows[0]!.day
  })

const DAY = 24 * 60

layer(services, { timeout: "120 seconds" })("Stats", (it) => {
  it.effect("counts received and sent mail by day, the recipients by status and the bounce rate, of one mailbox or every one", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const stats = yield* Stats
      const user = yield* insertUser()
      const inbox = yield* insertMailbox(user)
      const outbox = yield* insertMailbox(user)
      const gone = yield* insertMailbox(user)
      const today = yield* email(inbox, 1)
      yield* email(inbox, 2)
      const earlier = yield* email(inbox, 3 * DAY)
      yield* email(outbox, 5, ["sent", "sent", "bounced"])
      const complainedDay = yield* email(outbox, 3 * DAY, ["failed", "deferred", "queued", "suppressed", "sent"])
      // Its one recipient reached reported it as spam.
      yield* sql`UPDATE outbound_deliveries SET complained_at = now() WHERE status = 'sent' AND email_id IN (
                   SELECT id FROM emails WHERE mailbox_id = ${outbox.mailboxId} AND received_at < now() - interval '2 days')`
      yield* email(inbox, 40 * DAY)
      yield* email(gone, 1, ["bounced"])
      yield* sql`UPDATE mailboxes SET status = 'deleted', deleted_at = now() WHERE id = ${gone.mailboxId}`

      const all = yield* stats.of(user.userId, {})
      expect(all).toMatchObject({
        mailbox_id: null,
        to: today,
        received: 3,
        sent: 2,
        recipients: { sent: 3, bounced: 1, failed: 1, suppressed: 1, deferred: 1, queued: 1 },
        bounce_rate: 1 / 5,
        complaints: 1,
        complaint_rate: 1 / 3
      })
      expect(all.daily).toHaveLength(30)
      expect(all.daily[29]!.date).toBe(today)
      expect(all.from).toBe(all.daily[0]!.date)
      const byDate = Object.fromEntries(all.daily.filter((day) => day.received + day.sent > 0).map((day) => [day.date, day]))
      // An email 1-2 minutes and one 5 minutes old are of today, unless the test runs just after midnight (UTC).
      expect(all.daily.reduce((sum, day) => sum + day.bounced, 0)).toBe(1)
      expect(byDate[earlier]).toMatchObject({ received: 1, sent: 1, bounced: 0, complained: 1 })
      expect(complainedDay).toBe(earlier)
      expect(all.daily.reduce((sum, day) => sum + day.complained, 0)).toBe(1)
      expect(Object.keys(byDate).length).toBeGreaterThanOrEqual(2)

      const one = yield* stats.of(user.userId, { mailboxId: outbox.mailboxId, days: 2 })
      expect(one).toMatchObject({
        mailbox_id: outbox.mailboxId,
        received: 0,
        sent: 1,
        recipients: { sent: 2, bounced: 1, failed: 0 },
        bounce_rate: 1 / 3,
        complaints: 0,
        complaint_rate: 0
      })
      expect(one.daily.map((day) => day.date)).toHaveLength(2)

      const limited = yield* stats.of(user.userId, { only: [inbox.mailboxId], days: 90 })
      expect(limited).toMatchObject({ received: 4, sent: 0, bounce_rate: null, complaints: 0, complaint_rate: null })
      expect(limited.daily).toHaveLength(90)

      for (const refused of [
        stats.of(user.userId, { mailboxId: gone.mailboxId }),
        stats.of(user.userId, { mailboxId: outbox.mailboxId, only: [inbox.mailboxId] }),
        stats.of((yield* insertUser()).userId, { mailboxId: inbox.mailboxId })
      ]) {
        expect(yield* Effect.flip(refused)).toMatchObject({ code: "NOT_FOUND", details: { mailbox_id: expect.any(String) } })
      }
    }))
})
