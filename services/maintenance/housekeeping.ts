/**
 * Worker-side housekeeping: drop login sessions that can no longer be used, rate-limit counters
 * whose windows have all passed, per-day email counters of past months, and stored bytes nothing
 * refers to any more (a message refused with 451 after its bytes were written, a deleted email's),
 * the ids of deleted emails once the bus can no longer deliver them again, search queries not
 * run for 90 days, searches' held rankings once expired, events older than the event log keeps, event-stream slots of dead nodes, holds on
 * addresses mailboxes left 30 days ago, mailboxes deleted 30 days ago with their mail, expired mailed
 * links (a new password, a new email), refresh tokens exchanged longer ago than one lives, unsubscribe links of mail sent a year ago, account activity
 * older than 90 days; and
 * move paid subscriptions that have ended (canceled at period end, or past_due beyond the grace) to
 * free. Idempotent, so any number of workers may run it.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Layer, Schedule } from "effect"
import { ACTIVITY_RETENTION_DAYS } from "../accounts/activity.ts"
import { REFRESH_TOKEN_SECONDS } from "../accounts/tokens.ts"
import { MAX_STATS_DAYS } from "../mail/schemas.ts"
import { ADDRESS_HOLD } from "../mailboxes/mailboxes.ts"
import { PAST_DUE_GRACE_DAYS } from "../billing/events.ts"
import { DependencyHealth } from "../health/dependency-health.ts"
import { makePlanChanged } from "../plans/plan-caches.ts"

/** Ended sessions are kept a week (for support questions), then removed. */
const SESSION_RETENTION = "7 days"
/**
 * A blob is stored before its message is on the bus, and ingested as late as the bus keeps messages
 * (7 days); storing the same bytes again refreshes its time. Older unreferenced blobs are garbage.
 */
const ORPHAN_BLOB_AGE = "8 days"
/** Provider event ids, kept to apply each event once. */
const BILLING_EVENT_RETENTION = "30 days"
/** Daily counters only matter today; a month more serves support questions. */
const DAILY_COUNTER_RETENTION = "40 days"
/** Event streams resume from any event of the last week (events/log.ts). */
const EVENT_RETENTION = "7 days"
/** An unsubscribe link of sent mail works this long after its message was sent. */
const UNSUBSCRIBE_LINK_RETENTION = "365 days"
/** Past search queries feed suggestions; one not run for this long is not suggested any more. */
const SEARCH_QUERY_RETENTION = "90 days"

/** The rows a DELETE or UPDATE touched: node-postgres reports them as `rowCount` on the raw result. */
const count = (result: unknown) => (result as { rowCount?: number | null }).rowCount ?? 0

/** Emails of long-deleted mailboxes removed per statement: each a transaction of bounded size. */
const PURGE_BATCH = 1_000

/**
 * A deleted mailbox keeps its row (and so its mail, hidden) while its address is held from others
 * (mailboxes.ts); then both go for good: its emails in batches (their search data went long before,
 * search/indexer.ts `purgeDeleted`; their bytes go with the blobs nothing refers to), then its row.
 * Answers how many mailboxes it removed.
 */
const purgeDeletedMailboxes = (sql: SqlClient.SqlClient) =>
  Effect.gen(function*() {
    const expired = sql`SELECT id FROM mailboxes WHERE status = 'deleted' AND deleted_at < now() - ${ADDRESS_HOLD}::interval`
    for (;;) {
      const batch = yield* sql`
        DELETE FROM emails WHERE id IN (SELECT id FROM emails WHERE mailbox_id IN (${expired}) LIMIT ${PURGE_BATCH})`.raw
      if (count(batch) < PURGE_BATCH) break
    }
    return yield* sql`DELETE FROM mailboxes WHERE id IN (${expired})`.raw
  })

/** One pass; answers how many rows of each kind it removed. */
export const sweep = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const planChanged = yield* makePlanChanged
  const sessions = yield* sql`
    DELETE FROM sessions
    WHERE coalesce(revoked_at, refresh_expires_at) < now() - ${SESSION_RETENTION}::interval`.raw
  const counters = yield* sql`
    DELETE FROM rate_limit_counters
    WHERE (SELECT max(s) FROM unnest(window_starts) s) < floor(extract(epoch FROM now()))::bigint - 86400`.raw
  const dailyCounters = yield* sql`
    DELETE FROM mail_daily_counters WHERE day < (now() - ${DAILY_COUNTER_RETENTION}::interval)::date`.raw
  const blobs = yield* sql`
    DELETE FROM blobs b
    WHERE b.created_at < now() - ${ORPHAN_BLOB_AGE}::interval
      AND NOT EXISTS (SELECT 1 FROM emails e WHERE e.raw_sha256 = b.sha256)
      AND NOT EXISTS (SELECT 1 FROM attachments a WHERE a.checksum = b.sha256)`.raw
  // A deleted email's id outlives its message on the bus (7 days), then is forgotten (mail/deletion.ts).
  const deletedEmails = yield* sql`DELETE FROM deleted_emails WHERE deleted_at < now() - ${ORPHAN_BLOB_AGE}::interval`.raw
  const searchQueries = yield* sql`
    DELETE FROM search_queries WHERE last_used_at < now() - ${SEARCH_QUERY_RETENTION}::interval`.raw
  // A search's held ranking (search/held-rankings.ts) is refused once it has expired.
  const searchRankings = yield* sql`DELETE FROM search_rankings WHERE expires_at < now()`.raw
  // Stripe redelivers an event for 3 days at most: a month of ids is plenty to apply each once.
  const billingEvents = yield* sql`
    DELETE FROM billing_events WHERE received_at < now() - ${BILLING_EVENT_RETENTION}::interval`.raw
  // A paid plan ends: canceled at its period's end once that has passed, or a renewal that stays
  // unpaid once the grace period past the period's end has. The account is then on free (its period
  // the calendar month, as every free period). With Stripe, its own events normally say so first.
  const lapsed = yield* sql<{ userId: string }>`
    UPDATE subscriptions SET plan = 'free', status = 'canceled', cancel_at_period_end = false, updated_at = now(),
      current_period_start = date_trunc('month', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC',
      current_period_end = (date_trunc('month', now() AT TIME ZONE 'UTC') + interval '1 month') AT TIME ZONE 'UTC'
    WHERE plan <> 'free' AND (
      (cancel_at_period_end AND current_period_end <= now())
      OR (status = 'past_due' AND current_period_end < now() - ${`${PAST_DUE_GRACE_DAYS} days`}::interval))
    RETURNING user_id`
  // Their keys and sessions now act on the free plan, their mail is taken as free mail, and their
  // webhooks are delivered to as free allows, on every node (plans/plan-caches.ts).
  yield* Effect.forEach(lapsed, (row) => planChanged(row.userId), { discard: true })
  // What deleted mail counted is asked for over at most MAX_STATS_DAYS (mail/stats.ts).
  const deletedMailCounts = yield* sql`
    DELETE FROM deleted_mail_counts WHERE day < (now() AT TIME ZONE 'UTC')::date - ${MAX_STATS_DAYS}::int`.raw
  // Addresses mailboxes left are held from other accounts for 30 days (mailboxes.ts `taken`); then free.
  const releasedAddresses = yield* sql`DELETE FROM released_addresses WHERE released_at < now() - ${ADDRESS_HOLD}::interval`.raw
  const deletedMailboxes = yield* purgeDeletedMailboxes(sql)
  // Mailed links (a new password: accounts/password-reset.ts; a new email: email-change.ts) go unused once expired.
  const passwordResets = yield* sql`DELETE FROM password_resets WHERE expires_at < now()`.raw
  const emailChanges = yield* sql`DELETE FROM email_changes WHERE expires_at < now()`.raw
  // A refresh token exchanged longer ago than a token lives (accounts.ts) would be refused as expired
  // anyway: its reuse need not be recognized.
  const spentRefreshTokens = yield* sql`
    DELETE FROM spent_refresh_tokens WHERE spent_at < now() - ${`${REFRESH_TOKEN_SECONDS} seconds`}::interval`.raw
  // The unsubscribe links of sent mail (outbound/unsubscribes.ts) work for a year.
  const unsubscribeLinks = yield* sql`
    DELETE FROM unsubscribe_links WHERE created_at < now() - ${UNSUBSCRIBE_LINK_RETENTION}::interval`.raw
  const activity = yield* sql`
    DELETE FROM account_activity WHERE at < now() - ${`${ACTIVITY_RETENTION_DAYS} days`}::interval`.raw
  const events = yield* sql`DELETE FROM event_log WHERE created_at < now() - ${EVENT_RETENTION}::interval`.raw
  // A stream's slot is refreshed every few seconds while it is open: an hour-old one is a dead node's.
  const eventStreams = yield* sql`DELETE FROM event_streams WHERE refreshed_at < now() - interval '1 hour'`.raw
  // Local billing takes no payment, so its paid plans renew by themselves: a period that has ended
  // (not canceled) gives way to the one that holds now, whole months on, and usage counts afresh.
  // Stripe's renewals come as its events.
  const renewed = yield* sql`
    UPDATE subscriptions s SET current_period_start = s.current_period_end + (m.n - 1) * interval '1 month',
      current_period_end = s.current_period_end + m.n * interval '1 month', updated_at = now()
    FROM (SELECT user_id, extract(year FROM age(now(), current_period_end)) * 12
                          + extract(month FROM age(now(), current_period_end)) + 1 AS n
          FROM subscriptions) m
    WHERE m.user_id = s.user_id AND s.plan <> 'free' AND s.status = 'active' AND NOT s.cancel_at_period_end
      AND s.stripe_subscription_id IS NULL AND s.current_period_end <= now()`.raw
  const removed = {
    sessions: count(sessions),
    spentRefreshTokens: count(spentRefreshTokens),
    counters: count(counters),
    dailyCounters: count(dailyCounters),
    blobs: count(blobs),
    deletedEmails: count(deletedEmails),
    billingEvents: count(billingEvents),
    searchQueries: count(searchQueries),
    searchRankings: count(searchRankings),
    releasedAddresses: count(releasedAddresses),
    deletedMailboxes: count(deletedMailboxes),
    deletedMailCounts: count(deletedMailCounts),
    passwordResets: count(passwordResets),
    emailChanges: count(emailChanges),
    unsubscribeLinks: count(unsubscribeLinks),
    activity: count(activity),
    events: count(events),
    eventStreams: count(eventStreams),
    lapsedSubscriptions: lapsed.length,
    renewedSubscriptions: count(renewed)
  }
  // One line, as the others are: what it removed (or renewed) and how many, e.g. "Housekeeping: sessions 3, blobs 1".
  const done = Object.entries(removed).filter(([, n]) => n > 0).map(([what, n]) => `${what} ${n}`)
  if (done.length > 0) yield* Effect.logInfo(`Housekeeping: ${done.join(", ")}`)
  return removed
}).pipe(Effect.withSpan("Housekeeping.sweep"))

export const HousekeepingLive = Layer.scopedDiscard(
  Effect.gen(function*() {
    const health = yield* DependencyHealth
    yield* sweep.pipe(
      Effect.catchAllCause((cause) => health.report("Housekeeping failed; will retry", cause)),
      Effect.repeat(Schedule.spaced("15 minutes")),
      Effect.forkScoped
    )
  })
)
