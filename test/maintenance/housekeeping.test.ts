/**
 * Housekeeping's sweep against a migrated database of this run's mode (PGlite, or PostgreSQL when
 * DATABASE_URL is set): it removes exactly what can no longer be used and keeps everything else.
 */
import { describe, expect, it } from "@effect/vitest"
import { SqlClient } from "@effect/sql"
import { Effect, Layer } from "effect"
import * as MemoryBus from "../../layers/memory-bus.ts"
import { Principals } from "../../services/accounts/principals.ts"
import { RecipientDirectory } from "../../services/mail/directory.ts"
import { WebhookSubscriptions } from "../../services/webhooks/subscriptions.ts"
import { DependencyHealth } from "../../services/health/dependency-health.ts"
import { sweep } from "../../services/maintenance/housekeeping.ts"
import { testDatabase } from "../support/database.ts"

/** Lapsed plans are told to the principal caches, recipient directories and webhook subscriptions, over the in-process bus. */
const principals = Layer.mergeAll(Principals.Default, RecipientDirectory.Default, WebhookSubscriptions.Default).pipe(
  Layer.provideMerge(MemoryBus.layer),
  Layer.provide(DependencyHealth.Default),
  Layer.provideMerge(testDatabase)
)

const hex = (n: number) => n.toString(16).padStart(64, "0")

describe("housekeeping sweep", () => {
  it.scoped("removes old unreferenced blobs, deleted emails' ids, daily counters, billing event ids, stale search queries, expired held rankings and ended sessions, ends lapsed plans, renews local ones, and touches nothing in use", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`INSERT INTO users (id, email, email_normalized, name, password_hash)
                 VALUES ('usr_1', 'a@example.com', 'a@example.com', 'A', 'x')`
      yield* sql`INSERT INTO mailboxes (id, user_id, local_part, domain, address_normalized)
                 VALUES ('mbx_1', 'usr_1', 'agent', 'example.com', 'agent@example.com')`
      // 1: old, unreferenced (garbage). 2: recent, unreferenced (its message may still be on the bus).
      // 3: old, an email's raw message. 4: old, an attachment's bytes.
      const blob = (n: number, age: string) =>
        sql`INSERT INTO blobs (sha256, size, content, created_at)
            VALUES (${hex(n)}, 1, ${new Uint8Array([n])}, now() - ${age}::interval)`
      yield* blob(1, "9 days")
      yield* blob(2, "1 day")
      yield* blob(3, "30 days")
      yield* blob(4, "30 days")
      yield* sql`INSERT INTO emails (id, mailbox_id, user_id, message_id, thread_id, subject, from_address, to_addresses,
                                     sent_at, received_at, mail_from, rcpt_to, headers, text_body, has_attachments, raw_sha256, size)
                 VALUES ('eml_1', 'mbx_1', 'usr_1', '<m@x>', 'thr_1', 's', 'f@x', ${["agent@example.com"]}, now(), now(),
                         'f@x', 'agent@example.com', '{}', '', true, ${hex(3)}, 1)`
      yield* sql`INSERT INTO attachments (id, email_id, position, content_type, size, checksum)
                 VALUES ('att_1', 'eml_1', 0, 'text/plain', 1, ${hex(4)})`
      yield* sql`INSERT INTO mail_daily_counters (user_id, day, emails)
                 VALUES ('usr_1', (now() - interval '41 days')::date, 5), ('usr_1', now()::date, 3)`
      yield* sql`INSERT INTO sessions (id, user_id, refresh_hash, cookie_hash, refresh_expires_at, revoked_at)
                 VALUES ('ses_old', 'usr_1', 'r1', 'c1', now() + interval '20 days', now() - interval '8 days'),
                        ('ses_live', 'usr_1', 'r2', 'c2', now() + interval '20 days', NULL)`
      // Refresh tokens the live session exchanged: one longer ago than a token lives, one lately.
      yield* sql`INSERT INTO spent_refresh_tokens (token_hash, session_id, spent_at)
                 VALUES ('spent-long-ago', 'ses_live', now() - interval '31 days'), ('spent-lately', 'ses_live', now() - interval '29 days')`

      // Subscriptions: past_due beyond the grace (7 days past its period) and within it; canceled at
      // a period end that has passed, and at one still to come; a local paid plan whose period ended.
      yield* sql`INSERT INTO users (id, email, email_normalized, name, password_hash)
                 VALUES ('usr_2', 'b@example.com', 'b@example.com', 'B', 'x'), ('usr_3', 'c@example.com', 'c@example.com', 'C', 'x'),
                        ('usr_4', 'd@example.com', 'd@example.com', 'D', 'x'), ('usr_5', 'e@example.com', 'e@example.com', 'E', 'x'),
                        ('usr_6', 'f@example.com', 'f@example.com', 'F', 'x')`
      yield* sql`INSERT INTO subscriptions (user_id, plan, status, current_period_start, current_period_end, cancel_at_period_end)
                 VALUES ('usr_2', 'pro', 'past_due', now() - interval '40 days', now() - interval '8 days', false),
                        ('usr_3', 'pro', 'past_due', now() - interval '35 days', now() - interval '5 days', false),
                        ('usr_4', 'enterprise', 'active', now() - interval '31 days', now() - interval '1 minute', true),
                        ('usr_5', 'pro', 'active', now() - interval '20 days', now() + interval '10 days', true),
                        ('usr_6', 'pro', 'active', '2026-01-10T00:00:00Z', '2026-02-10T00:00:00Z', false)`

      yield* sql`INSERT INTO billing_events (id, type, received_at)
                 VALUES ('evt_old', 'invoice.paid', now() - interval '31 days'), ('evt_new', 'invoice.paid', now())`

      yield* sql`INSERT INTO search_queries (user_id, normalized, query, last_used_at)
                 VALUES ('usr_1', 'old query', 'Old query', now() - interval '91 days'), ('usr_1', 'recent', 'Recent', now() - interval '89 days')`
      // A search's held rankings: one expired a moment ago, one still held.
      yield* sql`INSERT INTO search_rankings (id, user_id, search, email_ids, scores, expires_at)
                 VALUES ('rnk_expired', 'usr_1', 'd', ${["eml_1"]}, ${[0.5]}, now() - interval '1 second'),
                        ('rnk_held', 'usr_1', 'd', ${["eml_1"]}, ${[0.5]}, now() + interval '9 minutes')`

      yield* sql`INSERT INTO released_addresses (address_normalized, user_id, released_at)
                 VALUES ('left-long-ago@example.com', 'usr_1', now() - interval '31 days'),
                        ('left-lately@example.com', 'usr_1', now() - interval '29 days')`

      yield* sql`INSERT INTO event_log (event_id, user_id, kind, payload, created_at)
                 VALUES ('email.received:eml_old', 'usr_1', 'email.received', '{}', now() - interval '8 days'),
                        ('email.received:eml_new', 'usr_1', 'email.received', '{}', now() - interval '6 days')`
      yield* sql`INSERT INTO deleted_emails (id, deleted_at)
                 VALUES ('eml_deleted_long_ago', now() - interval '9 days'), ('eml_deleted_lately', now() - interval '1 day')`
      // What deleted mail counted: past the longest stats window (90 days), and within it.
      yield* sql`INSERT INTO deleted_mail_counts (user_id, mailbox_id, day, what, key, n)
                 VALUES ('usr_1', 'mbx_1', (now() AT TIME ZONE 'UTC')::date - 91, 'email', 'inbound', 2),
                        ('usr_1', 'mbx_1', (now() AT TIME ZONE 'UTC')::date - 89, 'email', 'inbound', 1)`
      yield* sql`INSERT INTO event_streams (id, user_id, refreshed_at)
                 VALUES ('es_dead', 'usr_1', now() - interval '2 hours'), ('es_open', 'usr_1', now())`
      yield* sql`INSERT INTO password_resets (token_hash, user_id, expires_at)
                 VALUES ('expired', 'usr_1', now() - interval '1 minute'), ('working', 'usr_1', now() + interval '59 minutes')`
      yield* sql`INSERT INTO email_changes (token_hash, user_id, new_email, expires_at)
                 VALUES ('expired', 'usr_1', 'a@example.org', now() - interval '1 minute'),
                        ('working', 'usr_1', 'b@example.org', now() + interval '23 hours')`
      yield* sql`INSERT INTO account_activity (id, user_id, kind, at)
                 VALUES ('act_old', 'usr_1', 'login', now() - interval '91 days'), ('act_new', 'usr_1', 'login', now() - interval '89 days')`
      yield* sql`INSERT INTO unsubscribe_links (token_sha256, user_id, mailbox_id, email_id, message_id, address, created_at)
                 VALUES ('last-year', 'usr_1', 'mbx_1', 'eml_1', '<eml_1@x>', 'a@example.org', now() - interval '366 days'),
                        ('this-year', 'usr_1', 'mbx_1', 'eml_2', '<eml_2@x>', 'a@example.org', now() - interval '364 days')`

      const removed = yield* sweep
      expect(removed).toEqual({
        sessions: 1,
        spentRefreshTokens: 1,
        counters: 0,
        dailyCounters: 1,
        blobs: 1,
        deletedEmails: 1,
        billingEvents: 1,
        searchQueries: 1,
        searchRankings: 1,
        releasedAddresses: 1,
        deletedMailboxes: 0,
        deletedMailCounts: 1,
        passwordResets: 1,
        emailChanges: 1,
        unsubscribeLinks: 1,
        activity: 1,
        events: 1,
        eventStreams: 1,
        lapsedSubscriptions: 2,
        renewedSubscriptions: 1
      })
      const held = yield* sql<{ addressNormalized: string }>`SELECT address_normalized FROM released_addresses`
      expect(held.map((r) => r.addressNormalized)).toEqual(["left-lately@example.com"])
      const queries = yield* sql<{ query: string }>`SELECT query FROM search_queries`
      expect(queries.map((q) => q.query)).toEqual(["Recent"])
      const rankings = yield* sql<{ id: string }>`SELECT id FROM search_rankings`
      expect(rankings.map((r) => r.id)).toEqual(["rnk_held"])
      const plans = yield* sql<{ userId: string; plan: string; status: string; currentPeriodEnd: Date }>`
        SELECT user_id, plan, status, current_period_end FROM subscriptions ORDER BY user_id`
      expect(plans.map((p) => [p.userId, p.plan, p.status])).toEqual([
        ["usr_2", "free", "canceled"],
        ["usr_3", "pro", "past_due"],
        ["usr_4", "free", "canceled"],
        ["usr_5", "pro", "active"],
        ["usr_6", "pro", "active"]
      ])
      // Renewed to the period that holds now, still on the 10th of the month.
      const renewedPeriod = yield* sql<{ currentPeriodStart: Date; currentPeriodEnd: Date }>`
        SELECT current_period_start, current_period_end FROM subscriptions WHERE user_id = 'usr_6'`
      const { currentPeriodStart, currentPeriodEnd } = renewedPeriod[0]!
      expect(currentPeriodStart.getTime()).toBeLessThanOrEqual(Date.now())
      expect(currentPeriodEnd.getTime()).toBeGreaterThan(Date.now())
      expect([currentPeriodStart.getUTCDate(), currentPeriodEnd.getUTCDate()]).toEqual([10, 10])
      expect(currentPeriodEnd.getUTCMonth() - currentPeriodStart.getUTCMonth()).toBeOneOf([1, -11])
      expect(plans[0]!.currentPeriodEnd.getTime()).toBeGreaterThan(Date.now())

      const blobs = yield* sql<{ sha256: string }>`SELECT sha256 FROM blobs ORDER BY sha256`
      expect(blobs.map((b) => b.sha256)).toEqual([hex(2), hex(3), hex(4)])
      const counters = yield* sql<{ emails: string }>`SELECT emails FROM mail_daily_counters`
      expect(counters.map((c) => Number(c.emails))).toEqual([3])
      const events = yield* sql<{ id: string }>`SELECT id FROM billing_events`
      expect(events.map((e) => e.id)).toEqual(["evt_new"])
      const logged = yield* sql<{ eventId: string }>`SELECT event_id FROM event_log`
      expect(logged.map((e) => e.eventId)).toEqual(["email.received:eml_new"])
      const deleted = yield* sql<{ id: string }>`SELECT id FROM deleted_emails`
      expect(deleted.map((e) => e.id)).toEqual(["eml_deleted_lately"])
      const counted = yield* sql<{ n: string }>`SELECT n FROM deleted_mail_counts`
      expect(counted.map((row) => Number(row.n))).toEqual([1])
      const streams = yield* sql<{ id: string }>`SELECT id FROM event_streams`
      expect(streams.map((e) => e.id)).toEqual(["es_open"])
      const sessions = yield* sql<{ id: string }>`SELECT id FROM sessions`
      expect(sessions.map((s) => s.id)).toEqual(["ses_live"])
      const spent = yield* sql<{ tokenHash: string }>`SELECT token_hash FROM spent_refresh_tokens`
      expect(spent.map((t) => t.tokenHash)).toEqual(["spent-lately"])
      const links = yield* sql<{ tokenHash: string }>`SELECT token_hash FROM password_resets`
      expect(links.map((l) => l.tokenHash)).toEqual(["working"])
      const changes = yield* sql<{ newEmail: string }>`SELECT new_email FROM email_changes`
      expect(changes.map((c) => c.newEmail)).toEqual(["b@example.org"])
      const unsubscribeLinks = yield* sql<{ tokenSha256: string }>`SELECT token_sha256 FROM unsubscribe_links`
      expect(unsubscribeLinks.map((l) => l.tokenSha256)).toEqual(["this-year"])
      const activity = yield* sql<{ id: string }>`SELECT id FROM account_activity`
      expect(activity.map((a) => a.id)).toEqual(["act_new"])

      // A second pass finds nothing more to do.
      expect(yield* sweep).toEqual({
        sessions: 0,
        spentRefreshTokens: 0,
        counters: 0,
        dailyCounters: 0,
        blobs: 0,
        deletedEmails: 0,
        billingEvents: 0,
        searchQueries: 0,
        searchRankings: 0,
        releasedAddresses: 0,
        deletedMailboxes: 0,
        deletedMailCounts: 0,
        passwordResets: 0,
        emailChanges: 0,
        unsubscribeLinks: 0,
        activity: 0,
        events: 0,
        eventStreams: 0,
        lapsedSubscriptions: 0,
        renewedSubscriptions: 0
      })
    }).pipe(Effect.provide(principals)), 60_000)

  it.scoped("removes a mailbox deleted over 30 days ago with all its mail; one deleted lately, and active ones, keep theirs", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`INSERT INTO users (id, email, email_normalized, name, password_hash)
                 VALUES ('usr_p', 'p@example.com', 'p@example.com', 'P', 'x')`
      yield* sql`INSERT INTO mailboxes (id, user_id, local_part, domain, address_normalized, status, deleted_at)
                 VALUES ('mbx_long_ago', 'usr_p', 'old', 'example.com', 'old@example.com', 'deleted', now() - interval '31 days'),
                        ('mbx_lately', 'usr_p', 'late', 'example.com', 'late@example.com', 'deleted', now() - interval '29 days'),
                        ('mbx_active', 'usr_p', 'live', 'example.com', 'live@example.com', 'active', NULL)`
      yield* sql`INSERT INTO blobs (sha256, size, content) VALUES (${hex(9)}, 1, ${new Uint8Array([9])})`
      const email = (id: string, mailboxId: string) =>
        sql`INSERT INTO emails (id, mailbox_id, user_id, message_id, thread_id, subject, from_address, to_addresses,
                                sent_at, received_at, mail_from, rcpt_to, headers, text_body, has_attachments, raw_sha256, size)
            VALUES (${id}, ${mailboxId}, 'usr_p', ${`<${id}@x>`}, ${id}, 's', 'f@x', ${["a@example.com"]}, now(), now(),
                    'f@x', 'a@example.com', '{}', '', true, ${hex(9)}, 1)`
      yield* email("eml_p1", "mbx_long_ago")
      yield* email("eml_p2", "mbx_long_ago")
      yield* email("eml_p3", "mbx_lately")
      yield* email("eml_p4", "mbx_active")
      yield* sql`INSERT INTO attachments (id, email_id, position, content_type, size, checksum)
                 VALUES ('att_p1', 'eml_p1', 0, 'text/plain', 1, ${hex(9)})`

      expect((yield* sweep).deletedMailboxes).toBe(1)
      const mailboxes = yield* sql<{ id: string }>`SELECT id FROM mailboxes WHERE user_id = 'usr_p' ORDER BY id`
      expect(mailboxes.map((m) => m.id)).toEqual(["mbx_active", "mbx_lately"])
      const emails = yield* sql<{ id: string }>`SELECT id FROM emails WHERE user_id = 'usr_p' ORDER BY id`
      expect(emails.map((e) => e.id)).toEqual(["eml_p3", "eml_p4"])
      expect(yield* sql`SELECT 1 FROM attachments WHERE id = 'att_p1'`).toEqual([])
    }).pipe(Effect.provide(principals)), 60_000)
})
