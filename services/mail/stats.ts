/**
 * What an account's mail did over recent days (`GET /v1/api/stats`): emails received and sent, and
 * what became of each recipient of the sent ones, the bounce rate that decides whether receivers keep
 * trusting the sender, and the same per day. Counted over the mail of the account's active mailboxes
 * by the day it was received or sent, in UTC: the mail they hold and what mail deleted since counted
 * (deletion.ts keeps it), so that deleting mail does not rewrite the past; a deleted mailbox's mail
 * is not counted.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { mailboxScope } from "../mailboxes/owned.ts"
import type { MailStats } from "./schemas.ts"

const STATUSES = ["sent", "bounced", "failed", "suppressed", "deferred", "queued"] as const

const isoDay = (date: Date) => date.toISOString().slice(0, 10)

export class Stats extends Effect.Service<Stats>()("mailroom/Stats", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    /**
     * The account's stats over `days` days up to today (UTC), of one mailbox (404 for one that is not
     * an active mailbox of the account, or outside `only`) or of every one (of `only`, a key limited to
     * those mailboxes).
     */
    const of = Effect.fn("Stats.of")(function*(
      userId: string,
      options: { readonly mailboxId?: string | undefined; readonly days?: number | undefined; readonly only?: ReadonlyArray<string> | undefined }
    ) {
      const days = options.days ?? 30
      const today = new Date(`${isoDay(new Date())}T00:00:00.000Z`)
      const first = new Date(today.getTime() - (days - 1) * 86_400_000)
      const end = new Date(today.getTime() + 86_400_000)
      const mailboxes = yield* mailboxScope(sql, userId, options)
      // Emails by day and direction, and the sent ones' recipients by day and status, with what
      // deleted mail counted, in one statement.
      const rows = yield* sql<{ day: string; what: "email" | "recipient"; key: string; n: string | number }>`
        WITH counted AS (
          SELECT e.id, e.direction, to_char(e.received_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day
          FROM emails e
          WHERE e.user_id = ${userId} AND e.received_at >= ${first} AND e.received_at < ${end} AND ${mailboxes("e.mailbox_id")}
        )
        SELECT day, 'email' AS what, direction AS key, count(*) AS n FROM counted GROUP BY day, direction
        UNION ALL
        SELECT c.day, 'recipient', d.status, count(*) FROM counted c JOIN outbound_deliveries d ON d.email_id = c.id
        WHERE c.direction = 'outbound' GROUP BY c.day, d.status
        UNION ALL
        SELECT c.day, 'recipient', 'complained', count(*) FROM counted c JOIN outbound_deliveries d ON d.email_id = c.id
        WHERE c.direction = 'outbound' AND d.complained_at IS NOT NULL GROUP BY c.day
        UNION ALL
        SELECT to_char(x.day, 'YYYY-MM-DD'), x.what, x.key, x.n FROM deleted_mail_counts x
        WHERE x.user_id = ${userId} AND x.day >= ${isoDay(first)}::date AND x.day < ${isoDay(end)}::date AND ${mailboxes("x.mailbox_id")}`
      const daily = Array.from({ length: days }, (_, i) => ({ date: isoDay(new Date(first.getTime() + i * 86_400_000)), received: 0, sent: 0, bounced: 0, complained: 0 }))
      const byDate = new Map(daily.map((day) => [day.date, day]))
      const recipients: Record<(typeof STATUSES)[number], number> = { sent: 0, bounced: 0, failed: 0, suppressed: 0, deferred: 0, queued: 0 }
      for (const row of rows) {
        const day = byDate.get(row.day)
        if (day === undefined) continue
        const n = Number(row.n)
        if (row.what === "email") {
          if (row.key === "inbound") day.received += n
          else day.sent += n
        } else if (row.key === "complained") {
          day.complained += n
        } else if (Object.hasOwn(recipients, row.key)) {
          recipients[row.key as keyof typeof recipients] += n
          if (row.key === "bounced") day.bounced += n
        }
      }
      const ended = recipients.sent + recipients.bounced + recipients.failed
      const complaints = daily.reduce((sum, day) => sum + day.complained, 0)
      return {
        mailbox_id: options.mailboxId ?? null,
        from: daily[0]!.date,
        to: daily[daily.length - 1]!.date,
        received: daily.reduce((sum, day) => sum + day.received, 0),
        sent: daily.reduce((sum, day) => sum + day.sent, 0),
        recipients,
        bounce_rate: ended === 0 ? null : recipients.bounced / ended,
        complaints,
        complaint_rate: recipients.sent === 0 ? null : complaints / recipients.sent,
        daily
      } satisfies MailStats
    })

    return { of } as const
  })
}) {}
