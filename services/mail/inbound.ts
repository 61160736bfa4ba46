/**
 * Accepting inbound mail (the SMTP node's rules; DESIGN.md §1, §4 "SMTP refusals").
 *
 * - A recipient is an active mailbox, matched case-insensitively; its owner's plan decides the size
 *   limit and the daily and monthly email limits, which are checked at RCPT. A mailbox on a custom
 *   domain receives while its owner's plan includes custom domains (SPEC rule 6); back on free, its
 *   mail is refused for now (450 4.2.1), never as unknown.
 * - A message is accepted only once its raw bytes are stored (content-addressed, the same bytes once)
 *   and the bus has acknowledged one `mail.inbound.<mailbox_id>` message per recipient. The SMTP node
 *   answers 250 after `accept` succeeds and 451 when it fails, so an accepted message is never lost.
 * - The recipient's allow and block lists (sender-list-rules.ts) judge the envelope sender in the
 *   same statement that finds the mailbox: a refused sender is 550 5.7.1 for that recipient, and
 *   the lists cost RCPT no round trip of their own.
 * - What that statement finds is kept for a moment in the process's recipient directory
 *   (directory.ts), so a busy address costs RCPT no round trip at all; near a limit, and for owners
 *   with lists, RCPT asks the database every time.
 * - A message's recipients count together at RCPT: one that would take its owner past a limit with the
 *   mailboxes of theirs accepted before it in the transaction is refused, as if those were counted.
 * - Emails are counted (per day and per billing period) when accepted, in the statement that stores
 *   the message, which also tells what each message's count came to: one that parallel sessions
 *   pushed past a limit after its RCPT is refused at DATA (when it is past for all its recipients),
 *   so the limits hold however many senders deliver at once. A publish that fails, or an acceptance
 *   interrupted by the SMTP deadline, gives its count back.
 */
import { SqlClient } from "@effect/sql"
import { Cause, Effect, Either, Schema } from "effect"
import { newId, sha256 } from "../accounts/tokens.ts"
import { groupCommit, inLockOrder } from "../batching.ts"
import { Bus, encodeJson, subjects } from "../bus/bus.ts"
import { DependencyHealth } from "../health/dependency-health.ts"
import { limits, Plan } from "../plans/plans.ts"
import { MailboxSettings } from "../mailboxes/mailboxes.ts"
import { normalizeAddress, normalizeDomain, unquotedLocal } from "../mailboxes/rules.ts"
import {
  DailyLimitReached,
  MessageTooBig,
  MonthlyLimitReached,
  PlanExcludesDomain,
  SenderRefused,
  StorageFull,
  TemporaryFailure,
  UnknownRecipient
} from "./refusals.ts"
import { type DirectoryEntry, nearLimit, RecipientDirectory } from "./directory.ts"
import { admitsSender, senderForms } from "./sender-list-rules.ts"
import { bounceAddress, type BounceScope, parseBounceAddress, taggedScope } from "../outbound/bounce-address.ts"
import type { Verdict } from "./authentication.ts"
import type { Spam } from "./spam.ts"
import type { InboundMessage } from "./schemas.ts"

/** What the plan's limits answer a RCPT with (`admit`). */
type Refusal = MessageTooBig | DailyLimitReached | MonthlyLimitReached | StorageFull

/** An accepted RCPT: where the message goes and what its owner's plan allows. */
export interface Recipient {
  /** The address as the sender wrote it. */
  readonly address: string
  readonly mailboxId: string
  readonly userId: string
  readonly plan: Plan
  readonly maxEmailBytes: number
  /** Start of the owner's billing period, whose email count the message joins. */
  readonly periodStart: Date
  /**
   * A bounce address (`bounces+<email_id>-<tag>@<domain>`, the envelope sender of a sent email): the
   * message is a delivery report about that email, not mail for the mailbox, and is not counted.
   */
  readonly bounceOf?: string | undefined
  /** Whom a tagged bounce address was made for: the report may speak only of that recipient, or that domain's. */
  readonly bounceScope?: BounceScope | undefined
}

export interface IncomingMessage {
  readonly mailFrom: string
  readonly recipients: ReadonlyArray<Recipient>
  readonly raw: Uint8Array
  readonly receivedAt: Date
  /** The SPF, DKIM, DMARC and ARC verdicts (authentication.ts), when checked before the answer. */
  readonly verdict?: Verdict | undefined
  /** When the checks are left to ingest: the connection they need (the client's address, its HELO). */
  readonly connection?: { readonly clientIp: string; readonly helo: string | undefined } | undefined
  /** rspamd's verdict (spam.ts), when RSPAMD_URL is set. */
  readonly spam?: Spam | undefined
}

const RecipientRow = Schema.Struct({
  idx: Schema.NumberFromString,
  mailboxId: Schema.String,
  userId: Schema.String,
  plan: Plan,
  /** A mailbox on a custom domain while its owner is on the free plan: refused for now (PlanExcludesDomain). */
  offPlan: Schema.Boolean,
  periodStart: Schema.DateFromSelf,
  today: Schema.NumberFromString,
  thisPeriod: Schema.NumberFromString,
  storage: Schema.NumberFromString,
  blocked: Schema.Boolean,
  accountAllowList: Schema.Boolean,
  accountAllows: Schema.Boolean,
  mailboxAllowList: Schema.Boolean,
  mailboxAllows: Schema.Boolean,
  /** Whether the owner has any allow or block list entry (their answers depend on the sender). */
  hasLists: Schema.Boolean
})
/** What the lookup found for one RCPT, with the UTC day its `today` counts. */
type RecipientRow = typeof RecipientRow.Type & { readonly day: string }

/** One RCPT's question: the mailbox at `address` (lower-cased), for the sender written as `forms`. */
interface RecipientQuery {
  readonly address: string
  readonly forms: ReadonlyArray<string>
}

/** What storing one message adds to the database: its bytes, and one count per recipient. */
interface Stored {
  readonly sha256: string
  readonly raw: Uint8Array
  readonly day: string
  readonly recipients: ReadonlyArray<Recipient>
}

/** Concurrent sessions' lookups and stores go to the database together (see batching.ts). */
const MAX_BATCH = 64
const PARALLEL_BATCHES = 2

/** The UTC calendar day of `date`, as PostgreSQL's `date` type reads it. */
export const utcDay = (date: Date) => date.toISOString().slice(0, 10)

const temporary = (reason: string) => (cause: unknown) => new TemporaryFailure({ reason, cause })

/** The entry of `map` at `key`, made by `make` when missing. */
const entry = <V>(map: Map<string, V>, key: string, make: () => V): V => {
  const found = map.get(key)
  if (found !== undefined) return found
  const made = make()
  map.set(key, made)
  return made
}

/**
 * The mailbox address mail to `address` is for, as mailboxes are stored and looked up: lower-cased,
 * an internationalized domain in punycode (smtp-server hands RCPT TO over with the domain in
 * Unicode, whichever form the client sent), and a subaddress (RFC 5233: `agent+newsletters@…`) is its
 * mailbox's mail: no mailbox's local part has a `+`. The email keeps the address it was sent to.
 */
export const routingForm = (address: string) => {
  const stored = asStored(address)
  const at = stored.lastIndexOf("@")
  const plus = stored.indexOf("+")
  return plus < 0 || plus > at ? stored : `${stored.slice(0, plus)}${stored.slice(at)}`
}

/** The role addresses every domain's mail server must take (RFC 5321 §4.5.1, RFC 2142 §2). */
const OPERATOR_ROLES = new Set(["postmaster", "abuse"])

/**
 * Where mail to `address` (in routing form) goes: to a shared domain's postmaster@ or abuse@, or to a
 * bare `postmaster` (RFC 5321 takes one without a domain), the operator's `postmasterMailbox` when there
 * is one; any other address, itself. A custom domain's role addresses are its owner's: its catch-all.
 */
export const operatorRoute = (address: string, sharedDomains: ReadonlyArray<string>, postmasterMailbox: string | undefined) => {
  if (postmasterMailbox === undefined) return address
  const at = address.lastIndexOf("@")
  if (at < 0) return address === "postmaster" ? postmasterMailbox : address
  return OPERATOR_ROLES.has(address.slice(0, at)) && sharedDomains.includes(address.slice(at + 1)) ? postmasterMailbox : address
}

/**
 * `address` lower-cased with its domain as stored (an internationalized one in punycode) and its local
 * part unquoted where the quotes change nothing (`"ada"@x` is `ada@x`).
 */
const asStored = (address: string) => {
  const at = address.lastIndexOf("@")
  return at < 0 ? address.toLowerCase() : normalizeAddress(unquotedLocal(address.slice(0, at)), normalizeDomain(address.slice(at + 1)))
}

/**
 * One recipient per mailbox (the first named): a message to two addresses of one mailbox (subaddresses,
 * `agent+a@` and `agent+b@`) is one email of it, counted once. A bounce stays apart from the mailbox's mail.
 */
const onePerMailbox = (recipients: ReadonlyArray<Recipient>): ReadonlyArray<Recipient> => {
  const seen = new Set<string>()
  return recipients.filter((r) => {
    const key = `${r.mailboxId}\n${r.bounceOf ?? ""}`
    if (seen.has(key)) return false
    seen.add(key)
    return true
  })
}

/** Per account and counter key, the emails `recipients` add: one row per key, as an upsert needs. */
const counterRows = (recipients: ReadonlyArray<{ readonly recipient: Recipient; readonly day: string }>, sign: 1 | -1) => {
  const daily = new Map<string, { userId: string; day: string; emails: number }>()
  const period = new Map<string, { userId: string; periodStart: Date; emails: number }>()
  for (const { day, recipient: r } of recipients) {
    if (r.bounceOf !== undefined) continue
    entry(daily, `${r.userId}/${day}`, () => ({ userId: r.userId, day, emails: 0 })).emails += sign
    entry(period, `${r.userId}/${r.periodStart.getTime()}`, () => ({ userId: r.userId, periodStart: r.periodStart, emails: 0 })).emails += sign
  }
  return { daily: inLockOrder(daily), period: inLockOrder(period) }
}

/** A count as the store's statement leaves it (`counterUpserts`). */
interface CounterRow {
  readonly counter: "day" | "period"
  readonly userId: string
  readonly key: string
  readonly emails: number | string
}

/**
 * For each message of a stored batch, its recipients whose owner's count passed a limit with it: the
 * counts the statement left, less what the messages after it in the batch added, are the counts each
 * message made, so a limit holds exactly however many messages arrived together (or in parallel
 * sessions, whose statements each see the others' counts). The period's limit is told first, as at RCPT.
 */
const overLimit = (batch: ReadonlyArray<Stored>, rows: ReadonlyArray<CounterRow>) => {
  const left = new Map(rows.map((row) => [`${row.counter}/${row.userId}/${row.key}`, Number(row.emails)]))
  const refusals = batch.map(() => [] as Array<DailyLimitReached | MonthlyLimitReached>)
  // Backwards: each count taken off is that of a message after the one being judged.
  for (let i = batch.length - 1; i >= 0; i--) {
    const message = batch[i]!
    for (const r of [...message.recipients].reverse()) {
      if (r.bounceOf !== undefined) continue
      const plan = limits[r.plan]
      const period = `period/${r.userId}/${r.periodStart.getTime()}`
      const day = `day/${r.userId}/${message.day}`
      const inPeriod = left.get(period) ?? 0
      const today = left.get(day) ?? 0
      left.set(period, inPeriod - 1)
      left.set(day, today - 1)
      if (plan.emailsPerMonth !== null && inPeriod > plan.emailsPerMonth) {
        refusals[i]!.push(new MonthlyLimitReached({ address: r.address, limit: plan.emailsPerMonth }))
      } else if (today > plan.emailsPerDay) refusals[i]!.push(new DailyLimitReached({ address: r.address, limit: plan.emailsPerDay }))
    }
  }
  return refusals
}

export class Inbound extends Effect.Service<Inbound>()("mailroom/Inbound", {
  scoped: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const bus = yield* Bus
    const health = yield* DependencyHealth
    const directory = yield* RecipientDirectory
    const { freeMaxCustomDomains = 0, postmasterMailbox, sharedDomains } = yield* MailboxSettings
    /** The address whose mailbox takes mail to `address`: its routing form, or the operator's mailbox. */
    const routed = (address: string) => operatorRoute(routingForm(address), sharedDomains, postmasterMailbox)

    /**
     * The counter upserts adding (or, with a negative sign, giving back) counts, each answering the
     * counts it leaves: `daily` (user_id, key: the day) and `period` (user_id, key: the period's start
     * in epoch milliseconds). A statement runs them by reading `counted`, which locks their rows in one
     * order, the day's then the period's (each in key order): PostgreSQL runs WITH parts that no query
     * reads last-first, so a statement reading neither took the period's row first and deadlocked with
     * a message of the same account that held the day's row and waited for the period's.
     */
    const counterUpserts = (rows: ReturnType<typeof counterRows>) =>
      // Nothing to count (bounce reports only): the same two names, answering nothing.
      rows.daily.length === 0
        ? sql`daily AS (SELECT ''::text AS user_id, ''::text AS key, 0::bigint AS emails WHERE false),
              period AS (SELECT ''::text AS user_id, ''::text AS key, 0::bigint AS emails WHERE false)`
        : sql`
        daily AS (
          INSERT INTO mail_daily_counters ${sql.insert(rows.daily)}
          ON CONFLICT (user_id, day) DO UPDATE SET emails = mail_daily_counters.emails + EXCLUDED.emails
          RETURNING user_id, day::text AS key, emails
        ),
        period AS (
          INSERT INTO usage_counters ${sql.insert(rows.period)}
          ON CONFLICT (user_id, period_start) DO UPDATE SET emails = usage_counters.emails + EXCLUDED.emails
          RETURNING user_id, (extract(epoch FROM period_start) * 1000)::bigint::text AS key, emails
        )`

    /** The counts `counterUpserts` left, day's first: reading them in this order is what orders their locks. */
    const counted = sql`
      SELECT 'day' AS counter, user_id, key, emails FROM daily
      UNION ALL SELECT 'period', user_id, key, emails FROM period`

    /**
     * Active mailboxes at the queries' addresses, with their owners' plans and counts and what their
     * allow and block lists say of each query's sender, by position. The lists are read by index
     * probes on (user_id, entry), one per form of the sender, and two for "has an allow list".
     */
    const lookupRecipients = yield* groupCommit({
      maxBatch: MAX_BATCH,
      parallel: PARALLEL_BATCHES,
      run: (queries: ReadonlyArray<RecipientQuery>) => {
        const now = new Date()
        // Each query's forms travel as one text, a line each: no form holds a line break (senderForms).
        const forms = queries.map((q) => q.forms.join("\n"))
        // A free plan's period is the calendar month, rolled over on read (as Billing does).
        return sql`
          SELECT r.idx, m.id AS mailbox_id, m.user_id, s.plan, c.custom AND s.plan = 'free' AND ${freeMaxCustomDomains === 0}::boolean AS off_plan, p.period_start,
                 coalesce(d.emails, 0) AS today, coalesce(u.emails, 0) AS this_period, coalesce(su.bytes, 0) AS storage,
                 coalesce(l.blocked, false) AS blocked,
                 coalesce(l.account_allows, false) AS account_allows,
                 coalesce(l.mailbox_allows, false) AS mailbox_allows,
                 EXISTS (SELECT 1 FROM sender_list_entries a
                         WHERE a.user_id = m.user_id AND a.list = 'allow' AND a.mailbox_id IS NULL) AS account_allow_list,
                 EXISTS (SELECT 1 FROM sender_list_entries a
                         WHERE a.user_id = m.user_id AND a.list = 'allow' AND a.mailbox_id = m.id) AS mailbox_allow_list,
                 EXISTS (SELECT 1 FROM sender_list_entries a WHERE a.user_id = m.user_id) AS has_lists
          FROM unnest(${queries.map((q) => q.address)}::text[], ${forms}::text[]) WITH ORDINALITY AS r(address, forms, idx)
          -- The mailbox at the address; else its verified custom domain's catch-all mailbox, judged as
          -- mail to that domain (its plan rule below).
          CROSS JOIN LATERAL (
            SELECT x.id, x.user_id, x.domain FROM (
              SELECT a.id, a.user_id, a.domain, 0 AS rank FROM mailboxes a WHERE a.address_normalized = r.address AND a.status = 'active'
              UNION ALL
              SELECT c.id, c.user_id, dm.name, 1 FROM domains dm
              JOIN mailboxes c ON c.id = dm.catch_all_mailbox_id AND c.user_id = dm.user_id AND c.status = 'active'
              WHERE dm.name = split_part(r.address, '@', 2) AND dm.verified
            ) x ORDER BY x.rank LIMIT 1
          ) m
          JOIN subscriptions s ON s.user_id = m.user_id
          -- A mailbox on the shared pool, or on a verified domain of its owner; on a custom domain
          -- (SPEC rule 6) it receives on a paid plan only: on free, the row says so (off_plan).
          CROSS JOIN LATERAL (SELECT m.domain <> ALL(${sharedDomains}::text[]) AS custom) c
          CROSS JOIN LATERAL (
            SELECT CASE WHEN s.plan = 'free' AND s.current_period_end <= ${now}
                        THEN date_trunc('month', ${now}::timestamptz AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
                        ELSE s.current_period_start END AS period_start
          ) p
          CROSS JOIN LATERAL (
            SELECT bool_or(e.list = 'block') AS blocked,
                   bool_or(e.list = 'allow' AND e.mailbox_id IS NULL) AS account_allows,
                   bool_or(e.list = 'allow' AND e.mailbox_id IS NOT NULL) AS mailbox_allows
            FROM sender_list_entries e
            WHERE e.user_id = m.user_id AND e.entry = ANY(string_to_array(r.forms, chr(10)))
              AND (e.mailbox_id IS NULL OR e.mailbox_id = m.id)
          ) l
          LEFT JOIN mail_daily_counters d ON d.user_id = m.user_id AND d.day = ${utcDay(now)}::date
          LEFT JOIN usage_counters u ON u.user_id = m.user_id AND u.period_start = p.period_start
          LEFT JOIN storage_usage su ON su.user_id = m.user_id
          WHERE NOT c.custom OR EXISTS (
            SELECT 1 FROM domains dm WHERE dm.name = m.domain AND dm.user_id = m.user_id AND dm.verified)`.pipe(
          Effect.flatMap(Schema.decodeUnknown(Schema.Array(RecipientRow))),
          Effect.map((rows) => {
            const day = utcDay(now)
            const byIndex = new Map(rows.map((row) => [row.idx, row]))
            return queries.map((_, i): RecipientRow | undefined => {
              const row = byIndex.get(i + 1)
              return row === undefined ? undefined : { ...row, day }
            })
          })
        )
      }
    })

    /**
     * Store messages' bytes (each distinct content once) and count them, in one statement: one
     * round trip, atomic. A blob that exists already has its time refreshed, which keeps it from the
     * sweep of unreferenced blobs. Answers, for each message, its recipients' refusals where the
     * count it made passes the owner's limit (`overLimit`).
     */
    const store = yield* groupCommit({
      maxBatch: MAX_BATCH,
      parallel: PARALLEL_BATCHES,
      run: (batch: ReadonlyArray<Stored>) => {
        const blobs = new Map(batch.map((m) => [m.sha256, { sha256: m.sha256, size: m.raw.byteLength, content: m.raw }]))
        const counts = counterRows(batch.flatMap((m) => m.recipients.map((recipient) => ({ recipient, day: m.day }))), 1)
        return sql<CounterRow>`
          WITH ${counterUpserts(counts)},
          stored AS (
            INSERT INTO blobs ${sql.insert(inLockOrder(blobs))}
            ON CONFLICT (sha256) DO UPDATE SET created_at = now()
          )
          ${counted}`.pipe(
          Effect.map((rows) => overLimit(batch, rows))
        )
      }
    })

    /**
     * The email a bounce address stands for (outbound/bounce-address.ts): a sent email whose envelope
     * sender it is, or a received one whose forwarded copies went with it. Its tag must be the one made
     * for one of the email's recipients (or recipient domains: forwarded copies, and mail sent before
     * per-recipient tags), who alone a report to it may then speak of; an email stored before keys takes
     * its bare address, about any recipient. So nobody can invent one, and a recipient cannot report on
     * another.
     */
    const bounceRecipient = Effect.fnUntraced(function*(address: string, named: NonNullable<ReturnType<typeof parseBounceAddress>>) {
      const bare = asStored(bounceAddress(named.emailId, address.slice(address.lastIndexOf("@") + 1)))
      const rows = yield* sql<{
        id: string
        mailboxId: string
        userId: string
        bounceKey: string | null
        recipients: ReadonlyArray<string>
        domains: ReadonlyArray<string>
      }>`
        SELECT e.id, e.mailbox_id, e.user_id, e.bounce_key::text AS bounce_key,
               CASE WHEN e.direction = 'outbound'
                    THEN ARRAY(SELECT lower(d.recipient) FROM outbound_deliveries d WHERE d.email_id = e.id)
                    ELSE ARRAY[]::text[] END AS recipients,
               CASE WHEN e.direction = 'outbound'
                    THEN ARRAY(SELECT DISTINCT d.domain FROM outbound_deliveries d WHERE d.email_id = e.id)
                    ELSE ARRAY(SELECT DISTINCT f.domain FROM forward_deliveries f WHERE f.email_id = e.id) END AS domains
        FROM emails e
        WHERE e.id = ${named.emailId}
          AND ((e.direction = 'outbound' AND lower(e.mail_from) = ${bare})
               -- A received email's forwarded copies went with its bounce address (outbound/forwards.ts).
               OR (e.direction = 'inbound' AND EXISTS (SELECT 1 FROM forward_deliveries f WHERE f.email_id = e.id)
                   AND EXISTS (SELECT 1 FROM mailboxes m WHERE m.id = e.mailbox_id
                               AND 'bounces+' || e.id || '@' || lower(m.domain) = ${bare})))`.pipe(
        Effect.mapError(temporary("bounce lookup failed"))
      )
      const email = rows[0]
      if (email === undefined) return yield* new UnknownRecipient({ address })
      const scope = email.bounceKey === null || named.tag === undefined
        ? undefined
        : taggedScope(email.bounceKey, named.tag, email.recipients, email.domains)
      if (email.bounceKey === null ? named.tag !== undefined : scope === undefined) return yield* new UnknownRecipient({ address })
      return {
        address,
        mailboxId: email.mailboxId,
        userId: email.userId,
        plan: "free",
        // A delivery report quotes at most the message it reports on.
        maxEmailBytes: limits.enterprise.maxEmailBytes,
        periodStart: new Date(0),
        bounceOf: email.id,
        bounceScope: scope
      } satisfies Recipient
    })

    /**
     * Whether a kept entry's counts, with the `alongside` emails this message makes for its owner already,
     * are too close to a limit for anything but the database to judge.
     */
    const nearLimits = (entry: DirectoryEntry, alongside: number) =>
      nearLimit(entry.today + alongside, limits[entry.plan].emailsPerDay) ||
      nearLimit(entry.thisPeriod + alongside, limits[entry.plan].emailsPerMonth) ||
      nearLimit(entry.storage, limits[entry.plan].storageBytes)

    /**
     * The emails a message makes for the owner of `mailboxId` through the recipients accepted before
     * this one in its transaction: one per other mailbox of theirs (a mailbox is counted once, however
     * many of its addresses are named; a delivery report is not counted).
     */
    const alongsideOf = (userId: string, mailboxId: string, accepted: ReadonlyArray<Recipient>) =>
      new Set(accepted.filter((r) => r.userId === userId && r.mailboxId !== mailboxId && r.bounceOf === undefined).map((r) => r.mailboxId)).size

    /**
     * The mailbox at `address` (any case) whose lists admit `mailFrom`, from the directory when it
     * may answer, else from the database (and then kept, for owners without lists).
     */
    const findRecipient = Effect.fnUntraced(function*(address: string, mailFrom: string, accepted: ReadonlyArray<Recipient>) {
      const normalized = routed(address)
      const kept = directory.get(normalized, utcDay(new Date()))
      if (kept !== undefined && !nearLimits(kept, alongsideOf(kept.userId, kept.mailboxId, accepted))) return kept
      const since = directory.mark()
      const row = yield* lookupRecipients({ address: normalized, forms: senderForms(mailFrom) }).pipe(
        Effect.mapError(temporary("recipient lookup failed"))
      )
      if (row === undefined) return yield* new UnknownRecipient({ address })
      if (row.offPlan) return yield* new PlanExcludesDomain({ address })
      if (!admitsSender(row)) return yield* new SenderRefused({ address })
      const found: DirectoryEntry = {
        mailboxId: row.mailboxId,
        userId: row.userId,
        plan: row.plan,
        periodStart: row.periodStart,
        day: row.day,
        today: row.today,
        thisPeriod: row.thisPeriod,
        storage: row.storage
      }
      if (!row.hasLists) directory.keep(normalized, found, since)
      return found
    })

    /**
     * What the owner's plan says of one more email for the mailbox `found` at `address`, of
     * `declaredSize` bytes (the MAIL FROM SIZE parameter): its size, daily, monthly and storage limits.
     * The recipients `accepted` before it in the transaction count too: the message makes an email for
     * each of their mailboxes, so the one that would take the owner past a limit is refused at its RCPT.
     */
    const admit = (
      found: DirectoryEntry,
      address: string,
      declaredSize: number | undefined,
      accepted: ReadonlyArray<Recipient>
    ): Either.Either<Recipient, Refusal> => {
      const plan = limits[found.plan]
      if (declaredSize !== undefined && declaredSize > plan.maxEmailBytes) return Either.left(new MessageTooBig({ limit: plan.maxEmailBytes }))
      const alongside = alongsideOf(found.userId, found.mailboxId, accepted)
      // The period first: when both are used up, tomorrow would be refused too (552, not "try again tomorrow").
      if (plan.emailsPerMonth !== null && found.thisPeriod + alongside >= plan.emailsPerMonth) {
        return Either.left(new MonthlyLimitReached({ address, limit: plan.emailsPerMonth }))
      }
      if (found.today + alongside >= plan.emailsPerDay) return Either.left(new DailyLimitReached({ address, limit: plan.emailsPerDay }))
      // The account's stored mail fills its plan's storage: refused until mail is gone or the plan grows.
      if (plan.storageBytes !== null && (found.storage >= plan.storageBytes || found.storage + (declaredSize ?? 0) > plan.storageBytes)) {
        return Either.left(new StorageFull({ address, limit: plan.storageBytes }))
      }
      return Either.right({
        address,
        mailboxId: found.mailboxId,
        userId: found.userId,
        plan: found.plan,
        maxEmailBytes: plan.maxEmailBytes,
        periodStart: found.periodStart
      })
    }

    /**
     * RCPT TO: the active mailbox at `address` (any case), if its lists admit `mailFrom` (empty for
     * the null sender) and its owner may receive one more email of `declaredSize` bytes (the MAIL
     * FROM SIZE parameter) now, besides the emails the recipients `accepted` before it in the
     * transaction make for them (`admit`). A bounce address is not subject to lists.
     * Untraced: it runs for every message, and a traced Effect.fn captures a stack trace per call.
     */
    const recipient = Effect.fnUntraced(function*(
      address: string,
      declaredSize: number | undefined,
      mailFrom: string,
      accepted: ReadonlyArray<Recipient> = []
    ) {
      const named = parseBounceAddress(address)
      if (named !== undefined) return yield* bounceRecipient(address, named)
      return yield* admit(yield* findRecipient(address, mailFrom, accepted), address, declaredSize, accepted)
    })

    /**
     * `recipient`'s answer when the directory alone can give it (a kept mailbox, not near a limit: the
     * usual case under load), with no effect to run; undefined when the database must be asked. A kept
     * mailbox's owner has no lists, so the sender does not matter.
     */
    const keptRecipient = (
      address: string,
      declaredSize: number | undefined,
      accepted: ReadonlyArray<Recipient> = []
    ): Either.Either<Recipient, Refusal> | undefined => {
      if (parseBounceAddress(address) !== undefined) return undefined
      const kept = directory.get(routed(address), utcDay(new Date()))
      return kept === undefined || nearLimits(kept, alongsideOf(kept.userId, kept.mailboxId, accepted))
        ? undefined
        : admit(kept, address, declaredSize, accepted)
    }

    /** What this process has counted (or given back) joins the directory's kept counts. */
    const countedHere = (recipients: ReadonlyArray<Recipient>, day: string, sign: 1 | -1) => {
      for (const r of recipients) if (r.bounceOf === undefined) directory.counted(r.userId, day, sign)
    }

    /** One `mail.inbound` message per recipient, each published or not (`Either`). */
    const publish = (message: IncomingMessage, recipients: ReadonlyArray<Recipient>, digest: string) =>
      Effect.forEach(
        recipients,
        (r) => {
          const inbound: InboundMessage = {
            email_id: newId("eml"),
            mailbox_id: r.mailboxId,
            user_id: r.userId,
            raw_sha256: digest,
            size: message.raw.byteLength,
            mail_from: message.mailFrom,
            rcpt_to: r.address,
            received_at: message.receivedAt.toISOString(),
            ...(message.verdict === undefined
              ? {}
              : { authentication: message.verdict.authentication, authentication_results: message.verdict.results }),
            ...(message.connection === undefined
              ? {}
              : {
                connection: {
                  client_ip: message.connection.clientIp,
                  ...(message.connection.helo === undefined ? {} : { helo: message.connection.helo })
                }
              }),
            ...(message.spam === undefined ? {} : { spam: message.spam }),
            ...(r.bounceOf === undefined ? {} : { bounce_of: r.bounceOf }),
            ...(r.bounceScope?.domain === undefined ? {} : { bounce_domain: r.bounceScope.domain }),
            ...(r.bounceScope?.recipient === undefined ? {} : { bounce_recipient: r.bounceScope.recipient })
          }
          return bus.publish(subjects.inboundMail(r.mailboxId), encodeJson(inbound), { msgId: inbound.email_id }).pipe(
            Effect.as(inbound.email_id),
            Effect.either
          )
        },
        // One recipient (the usual case) needs no forked fiber.
        { concurrency: recipients.length > 1 ? "unbounded" : undefined }
      )

    /** Give back the counts of `recipients`' copies of a message that will not be delivered (the sender will retry). */
    const giveBack = (recipients: ReadonlyArray<Recipient>, day: string) => {
      countedHere(recipients, day, -1)
      return sql`WITH ${counterUpserts(counterRows(recipients.map((recipient) => ({ recipient, day })), -1))} ${counted}`.pipe(
        Effect.catchAll((error) => health.report("Could not give back the count of a refused message", Cause.fail(error)))
      )
    }

    /**
     * Make the message durable and hand it to the workers; succeeds only when both are done.
     * Returns the ids of the emails it will become, one per mailbox among its recipients (none for a
     * delivery report to a bounce address).
     * Interrupted (the SMTP deadline answered 451), it still waits for its bytes' statement to end,
     * which commits whatever becomes of the caller, and gives back the counts that statement took.
     * Untraced: it runs for every message, and a traced Effect.fn captures a stack trace per call.
     */
    const accept = (message: IncomingMessage) =>
      Effect.uninterruptibleMask((restore) =>
        Effect.gen(function*() {
          const recipients = onePerMailbox(message.recipients)
          const smallest = Math.min(...recipients.map((r) => r.maxEmailBytes))
          if (message.raw.byteLength > smallest) return yield* new MessageTooBig({ limit: smallest })
          const digest = sha256(message.raw)
          const day = utcDay(message.receivedAt)
          const refused = yield* store({ sha256: digest, raw: message.raw, day, recipients }).pipe(
            Effect.mapError(temporary("storing the message failed"))
          )
          countedHere(recipients, day, 1)
          // RCPT judged counts that parallel sessions have since added to. Past a limit for every
          // recipient, the message is refused as RCPT would now refuse it; for some of them only, it
          // goes to all (a refusal at DATA is every recipient's, and the others are within theirs).
          if (refused.length === recipients.length && refused.length > 0) {
            yield* giveBack(recipients, day)
            return yield* Effect.fail(refused[0]!)
          }
          const published = yield* restore(publish(message, recipients, digest)).pipe(
            Effect.onInterrupt(() => giveBack(recipients, day))
          )
          const failed = recipients.filter((_, i) => Either.isLeft(published[i]!))
          if (failed.length > 0) {
            // Those copies will not be delivered: give their counts back.
            yield* giveBack(failed, day)
            const cause = published.find(Either.isLeft)?.left
            return yield* new TemporaryFailure({ reason: "the bus did not take the message", cause })
          }
          // A delivery report becomes no email of its own (it is recorded on the email it reports on).
          return published.flatMap((p, i) => (Either.isRight(p) && recipients[i]!.bounceOf === undefined ? [p.right] : []))
        })
      )

    return { recipient, keptRecipient, accept } as const
  })
}) {}
