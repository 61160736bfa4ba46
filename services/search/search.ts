/**
 * Search (SPEC "Search"): the caller's mail ranked by words and by meaning together, and
 * suggestions that complete a partial query.
 *
 * A search is counted (`searchesUsed`) and limited twice: per minute (the plan's search rate, apart
 * from the request rate) and per billing period (403 SEARCH_QUOTA). It sees only the caller's
 * namespace and never mail of a deleted mailbox.
 *
 * Each query is ranked by words and by meaning together (ranker.ts), and pages through that one
 * ranking, so pages never overlap or skip while the mail stays the same. While it changes (mail
 * indexed between two pages), a later page asked with the first's `meta.ranking` is read from the
 * ranking that page held (held-rankings.ts), not from a new one.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Exit, Option } from "effect"
import type { Principal } from "../accounts/principal.ts"
import { Billing } from "../billing/billing.ts"
import { SearchCounts } from "../billing/search-counts.ts"
import { RateLimited, SearchQuotaReached, ServiceUnavailable, ValidationError } from "../errors.ts"
import { normalizeDomain } from "../mailboxes/rules.ts"
import { narrowedIfAny } from "../mail/narrowing.ts"
import { checkRange } from "../mail/received-range.ts"
import { ccColumns, ccOf, fromNameColumns, fromNameOf, type HeaderValue, snippetColumn } from "../mail/records.ts"
import { DEFAULT_PAGE_LIMIT } from "../listing.ts"
import type { Direction } from "../mail/schemas.ts"
import { BLOCKED } from "../mail/sender-list-rules.ts"
import { reachesMailbox } from "../accounts/reach.ts"
import { limits } from "../plans/plans.ts"
import { RateLeases } from "../ratelimit/leases.ts"
import { escapeLike } from "../like.ts"
import { amongMailboxes, ownMailbox } from "../mailboxes/owned.ts"
import { searchWindows } from "../ratelimit/rate-limiter.ts"
import { newId } from "../accounts/tokens.ts"
import { searchableText } from "./documents.ts"
import { type HeldRanking, heldFor, searchDigest, takeHeld } from "./held-rankings.ts"
import { DEFAULT_RANKING, Ranker } from "./ranker.ts"
import { timeSearch } from "./metrics.ts"
import { QueryLog } from "./query-log.ts"
import { type SearchInput, type SearchMeta, type SearchResult } from "./schemas.ts"

const SUGGESTIONS = 10

const normalizeQuery = (query: string) => searchableText(query.trim().replace(/\s+/g, " "))
const likePrefix = (prefix: string) => `${escapeLike(prefix.toLowerCase())}%`

/** A page's email, beside the number of candidates still readable (`null` fields: none on this page). */
type PageRow = {
  readonly total: number | string
} & ({
  readonly id: string
  readonly subject: string
  readonly fromAddress: string
  readonly fromName: string | null
  readonly fromHeader: HeaderValue | null
  readonly toAddresses: ReadonlyArray<string>
  readonly ccAddresses: ReadonlyArray<string> | null
  readonly ccHeader: HeaderValue | null
  readonly sentAt: Date
  readonly snippet: string
  readonly labels: ReadonlyArray<string>
  readonly mailboxId: string
  readonly threadId: string
  readonly direction: Direction
} | { readonly id: null })

export class Search extends Effect.Service<Search>()("mailroom/Search", {
  dependencies: [Billing.Default, SearchCounts.Default, RateLeases.Default, QueryLog.Default, Ranker.Default],
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const billing = yield* Billing
    const leases = yield* RateLeases
    const queryLog = yield* QueryLog
    const searchCounts = yield* SearchCounts
    const ranker = yield* Ranker

    /**
     * Active mailboxes of the caller on `domain`, or every mailbox when no domain is asked for; of
     * the mailboxes a limited key reaches only (`only`).
     */
    const mailboxScope = (userId: string, domain: string | undefined, only: ReadonlyArray<string> | undefined) =>
      domain === undefined ? Effect.succeed(only) : sql<{ id: string }>`
        SELECT id FROM mailboxes WHERE user_id = ${userId} AND domain = ${domain} AND status = 'active'
          ${amongMailboxes(sql, "id", only)}`.pipe(
        Effect.map((rows) => rows.map((row) => row.id))
      )

    /** Count one search against the period's quota, atomically; false when the quota is used up. */
    const countSearch = (userId: string, periodStart: Date, limit: number | null) =>
      sql<{ searches: string }>`
        INSERT INTO usage_counters AS u (user_id, period_start, searches) VALUES (${userId}, ${periodStart}, 1)
        ON CONFLICT (user_id, period_start) DO UPDATE SET searches = u.searches + 1
        ${limit === null ? sql`` : sql`WHERE u.searches < ${limit}`}
        RETURNING searches`.pipe(Effect.map((rows) => rows.length > 0))

    const refundSearch = (userId: string, periodStart: Date) =>
      sql`UPDATE usage_counters SET searches = searches - 1
          WHERE user_id = ${userId} AND period_start = ${periodStart} AND searches > 0`

    /**
     * Count one search in the caller's current period in one statement, when the period is still
     * running and the quota allows it: the period start it was counted in, else none (then `admit`
     * takes the long way, which rolls a free period over and explains a refusal).
     */
    const countInCurrentPeriod = (userId: string, limit: number | null) =>
      sql<{ periodStart: Date }>`
        INSERT INTO usage_counters AS u (user_id, period_start, searches)
        SELECT user_id, current_period_start, 1 FROM subscriptions WHERE user_id = ${userId} AND current_period_end > now()
        ON CONFLICT (user_id, period_start) DO UPDATE SET searches = u.searches + 1
        ${limit === null ? sql`` : sql`WHERE u.searches < ${limit}`}
        RETURNING period_start`.pipe(Effect.map((rows) => rows[0]?.periodStart))

    /**
     * The per-minute search rate (leased, ratelimit/leases.ts) and the period's quota; counts the
     * search when both allow it. In the common case that is one round trip. Answers the rate's
     * decision (the API says it in the answer's headers) and where the search was counted.
     */
    const admit = (principal: Principal) =>
      Effect.gen(function*() {
        const rate = yield* leases.take(`search:${principal.userId}`, searchWindows(principal.plan))
        if (!rate.allowed) {
          return yield* RateLimited.of({
            limit: rate.limit,
            window: rate.window,
            retryAfter: rate.retryAfter,
            resetAt: rate.resetAt,
            message: `Search rate limit of ${rate.limit} searches per minute exceeded`
          })
        }
        const quota = limits[principal.plan].searchesPerMonth
        // Without a quota nothing depends on the count: it is written behind the answer, once the
        // search has run (`search`).
        if (quota === null) return { rate, periodStart: "counted-after" as const }
        const counted = yield* countInCurrentPeriod(principal.userId, quota)
        if (counted !== undefined) return { rate, periodStart: counted }
        const subscription = yield* billing.subscription(principal.userId)
        const plan = limits[subscription.plan]
        const periodStart = new Date(subscription.currentPeriodStart)
        if (!(yield* countSearch(principal.userId, periodStart, plan.searchesPerMonth))) {
          return yield* new SearchQuotaReached({
            message: `The ${subscription.plan} plan allows ${plan.searchesPerMonth} searches per billing period; the period ends ${subscription.currentPeriodEnd}`,
            details: { used: plan.searchesPerMonth, limit: plan.searchesPerMonth, plan: subscription.plan, period_end: subscription.currentPeriodEnd }
          })
        }
        return { rate, periodStart }
      })

    /** A score as results show it: four decimals. */
    const shownScore = (score: number) => Math.round(score * 10_000) / 10_000

    /**
     * A page of `input`'s results: ranked now, or read from the ranking a previous page held (`held`).
     * Ranked now, the ranking is held when the answer has more pages (`meta.ranking`: held-rankings.ts).
     */
    const run = (
      userId: string,
      only: ReadonlyArray<string> | undefined,
      input: SearchInput,
      query: string,
      digest: string,
      held: HeldRanking | undefined
    ) =>
      Effect.gen(function*() {
        const limit = input.limit ?? DEFAULT_PAGE_LIMIT
        const offset = input.offset ?? 0
        const mode = input.mode ?? "hybrid"
        const domain = input.domain === undefined ? undefined : normalizeDomain(input.domain)
        const mailboxIds = yield* mailboxScope(userId, domain, input.mailbox_id === undefined ? only : [input.mailbox_id])
        const minScore = input.min_score ?? 0
        // What narrows by the email's own fields (labels, sender, arrival): the ranking within it
        // (ranker.ts; the nearest by meaning not by labels), and the candidates kept.
        const narrowing = { labels: input.labels, from: input.from, received: { after: input.received_after, before: input.received_before } }
        const narrowed = narrowedIfAny(sql, narrowing)
        // As shown (four decimals), so that a result shown at the asked score is kept.
        const ranked = held !== undefined
          ? held.emailIds.map((emailId, i) => ({ emailId, score: held.scores[i]! }))
          : (yield* ranker.rank(userId, query, mode, mailboxIds, DEFAULT_RANKING, narrowing)).filter((r) => shownScore(r.score) >= minScore)
        // A ranking made now is held when there is more than this page of it to read.
        const token = held === undefined ? newId("rnk") : held.token
        // One statement keeps, in ranked order, the candidates still readable (the vector index may
        // hold mail of a mailbox deleted since, the words a deleted mailbox's), counts them, and
        // reads the requested page of them, bodies for that page only. Which candidates are readable
        // is read from the search documents' narrow index (an indexed email's account and mailbox),
        // not from the emails with their bodies: hundreds of candidates a search, each a page of the
        // emails table that is seldom in the buffers of a large account's database (~8 ms a search
        // at 100,000 emails on the embedded PGlite). Labels are the emails' own, as they are now.
        // Read from a held ranking, an email keeps its place in it (`n`): one deleted since, or no
        // longer meeting the filters, leaves a gap instead of moving the later ones up a place.
        const rows = ranked.length === 0 ? [] : yield* sql<PageRow & { readonly ranking: string | null }>`
          WITH ranked AS (
            SELECT id, score, position
            FROM unnest(${ranked.map((r) => r.emailId)}::text[], ${ranked.map((r) => r.score)}::float8[]) WITH ORDINALITY AS r (id, score, position)
          ),
          visible AS (
            SELECT r.id, r.score, ${held === undefined ? sql`row_number() OVER (ORDER BY r.position)` : sql`r.position`} AS n
            FROM ranked r JOIN search_documents d ON d.email_id = r.id JOIN mailboxes m ON m.id = d.mailbox_id
            ${narrowed === undefined ? sql`` : sql`JOIN emails e ON e.id = r.id ${narrowed}`}
            WHERE d.user_id = ${userId} AND m.status = 'active'
              ${amongMailboxes(sql, "m.id", mailboxIds)}
          ),
          held AS (
            ${held === undefined ? sql`
            INSERT INTO search_rankings (id, user_id, search, email_ids, scores, expires_at)
            SELECT ${token}, ${userId}, ${digest}, array_agg(id ORDER BY n), array_agg(score ORDER BY n), now() + ${heldFor}::interval
            FROM visible HAVING count(*) > ${offset + limit}
            RETURNING id` : sql`SELECT ${token}::text AS id`}
          )
          SELECT (SELECT count(*) FROM visible) AS total, (SELECT id FROM held) AS ranking, p.id, p.subject, p.from_address, p.from_name, p.from_header,
                 p.to_addresses, p.cc_addresses, p.cc_header, p.sent_at, p.snippet, p.labels, p.mailbox_id, p.thread_id, p.direction
          FROM (SELECT 1) AS one LEFT JOIN LATERAL (
            SELECT e.id, e.subject, e.from_address, ${sql.literal(fromNameColumns)}, e.to_addresses, ${sql.literal(ccColumns)}, e.sent_at, ${sql.literal(snippetColumn)}, e.labels,
                   e.mailbox_id, e.thread_id, e.direction, v.n
            FROM visible v JOIN emails e ON e.id = v.id
            WHERE v.n > ${offset} AND v.n <= ${offset + limit}
          ) AS p ON true
          ORDER BY p.n`
        // A held ranking's count is what it held: its pages keep their places (an email deleted since
        // is left out of its page, not counted out of the ranking).
        const total = held === undefined ? Number(rows[0]?.total ?? 0) : held.emailIds.length
        const scores = new Map(ranked.map((r) => [r.emailId, r.score]))
        const data = rows.flatMap((row): Array<SearchResult> =>
          row.id === null ? [] : [{
            email_id: row.id,
            subject: row.subject,
            from: row.fromAddress,
            from_name: fromNameOf(row),
            to: [...row.toAddresses],
            cc: ccOf(row),
            date: row.sentAt.toISOString(),
            snippet: row.snippet,
            labels: [...row.labels],
            mailbox_id: row.mailboxId,
            thread_id: row.threadId,
            direction: row.direction,
            score: shownScore(scores.get(row.id)!)
          }]
        )
        const ranking = held?.token ?? rows[0]?.ranking ?? undefined
        // (Read from a held ranking, the page says its token again: it holds the later pages too.)
        const meta: SearchMeta = {
          page: Math.floor(offset / limit) + 1,
          limit,
          total,
          hasMore: held === undefined ? offset + data.length < total : offset + limit < total,
          ...(ranking === undefined ? {} : { ranking })
        }
        return { data, meta }
      })

    /** A search, with the per-minute search rate's decision that admitted it (`rate`). */
    const search = Effect.fn("Search.search")(function*(principal: Principal, input: SearchInput) {
      const query = normalizeQuery(input.query)
      if (input.domain !== undefined && !/^[a-z0-9.-]+$/i.test(normalizeDomain(input.domain))) {
        return yield* ValidationError.field("domain", "must be a domain name")
      }
      yield* checkRange({ after: input.received_after, before: input.received_before })
      if (input.mailbox_id !== undefined) {
        yield* reachesMailbox(principal, input.mailbox_id)
        yield* ownMailbox(sql, principal.userId, input.mailbox_id)
      }
      const only = Option.getOrUndefined(principal.mailboxes)
      const digest = searchDigest(query, input, input.domain === undefined ? undefined : normalizeDomain(input.domain), only)
      // A page of a held ranking (held-rankings.ts): known before the search is counted, so that an
      // expired one costs nothing.
      const held = input.ranking === undefined ? undefined : yield* takeHeld(principal.userId, input.ranking, digest)
      const { periodStart, rate } = yield* admit(principal)
      const result = yield* run(principal.userId, only, input, query, digest, held).pipe(
        timeSearch(input.mode ?? "hybrid"),
        Effect.catchTags({
          EmbedderError: (error) =>
            Effect.zipRight(Effect.logWarning(`Search by meaning unavailable: ${error.message}`), Effect.fail(ServiceUnavailable.of())),
          VectorIndexError: (error) =>
            Effect.zipRight(Effect.logWarning(`Vector index unavailable: ${error.message}`), Effect.fail(ServiceUnavailable.of()))
        }),
        // A search that did not run to its answer is not charged: failed, died, or given up by its
        // caller (interrupted). Should the refund fail too, one search stays over-counted: the search's
        // own error is what the caller needs to hear.
        Effect.onExit((exit) =>
          Exit.isSuccess(exit) || periodStart === "counted-after" ? Effect.void : refundSearch(principal.userId, periodStart).pipe(Effect.ignore)
        )
      )
      if (periodStart === "counted-after") searchCounts.count(principal.userId)
      // Behind the answer: the suggestions' record of past queries is written in batches. A read-only
      // key's search changes nothing, the account's suggestions included.
      if (!principal.readOnly) yield* queryLog.remember(principal.userId, query)
      return { ...result, rate }
    })

    /**
     * Completions of `q`: the caller's past queries, then subjects, then senders; ten at most. Mail a
     * block list stopped is not searchable, and suggests nothing either. A key limited to some
     * mailboxes (`only`) is suggested their subjects and senders only: the account's past queries are
     * its other agents' too.
     */
    const suggestions = Effect.fn("Search.suggestions")(function*(userId: string, q: string, only?: ReadonlyArray<string>) {
      const pattern = likePrefix(normalizeQuery(q))
      // Queries of this process not written yet count as if they were (other processes see them
      // after the query log's next write, within a second). Taken before the database is read: a
      // query missing here was written before, and the read finds it.
      const unwritten = only === undefined ? queryLog.pending(userId, normalizeQuery(q).toLowerCase()) : []
      const within = amongMailboxes(sql, "m.id", only)
      const rows = yield* sql<{ text: string; source: number | string; weight: number | string }>`
        (SELECT query AS text, 1 AS source, uses AS weight FROM search_queries
         WHERE user_id = ${userId} AND normalized LIKE ${pattern} ESCAPE '\\' ${only === undefined ? sql`` : sql`AND false`}
         ORDER BY uses DESC, last_used_at DESC LIMIT ${SUGGESTIONS})
        UNION ALL
        (SELECT e.subject, 2, count(*) FROM emails e JOIN mailboxes m ON m.id = e.mailbox_id
         WHERE e.user_id = ${userId} AND lower(e.subject) LIKE ${pattern} ESCAPE '\\' AND m.status = 'active' ${within}
           AND NOT ${BLOCKED} = ANY(e.labels)
         GROUP BY e.subject ORDER BY count(*) DESC, e.subject LIMIT ${SUGGESTIONS})
        UNION ALL
        (SELECT e.from_address, 3, count(*) FROM emails e JOIN mailboxes m ON m.id = e.mailbox_id
         WHERE e.user_id = ${userId} AND lower(e.from_address) LIKE ${pattern} ESCAPE '\\' AND m.status = 'active' ${within}
           AND NOT ${BLOCKED} = ANY(e.labels)
         GROUP BY e.from_address ORDER BY count(*) DESC, e.from_address LIMIT ${SUGGESTIONS})
        ORDER BY source, weight DESC, text`
      const stored = rows.filter((row) => Number(row.source) === 1)
      const others = rows.filter((row) => Number(row.source) !== 1)
      const queries = new Map(stored.map((row) => [row.text.toLowerCase(), { text: row.text, weight: Number(row.weight) }]))
      for (const noted of unwritten) {
        const known = queries.get(noted.normalized)
        queries.set(noted.normalized, { text: noted.query, weight: (known?.weight ?? 0) + noted.uses })
      }
      const ranked = [...queries.values()].sort((x, y) => y.weight - x.weight).slice(0, SUGGESTIONS)
      const seen = new Set<string>()
      const data: Array<string> = []
      for (const { text } of [...ranked, ...others]) {
        const key = text.toLowerCase()
        if (seen.has(key) || data.length >= SUGGESTIONS) continue
        seen.add(key)
        data.push(text)
      }
      return data
    })

    return { search, suggestions } as const
  })
}) {}
