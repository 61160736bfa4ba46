/**
 * Search (SPEC "Search"): the caller's mail ranked by words and by meaning together, and
 * suggestions that complete a partial query.
 *
 * A search is counted (`searchesUsed`) and limited twice: per minute (the plan's search rate, apart
 * from the request rate) and per billing period (403 SEARCH_QUOTA). It sees only the caller's
 * namespace and never mail of a deleted mailbox.
 *
 * Each query looks at the best `CANDIDATES` emails by words (BM25) and by meaning (the vector
 * index), fuses them (ranking.ts) and pages through that one ranking, so pages never overlap or
 * skip while the mail stays the same.
 */
import { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"
import type { Principal } from "../accounts/principal.ts"
import { Billing } from "../billing/billing.ts"
import { Forbidden, type NotFound, RateLimited, ServiceUnavailable, ValidationError } from "../errors.ts"
import { normalizeDomain } from "../mailboxes/rules.ts"
import { limits } from "../plans/plans.ts"
import { RateLimiter } from "../ratelimit/rate-limiter.ts"
import { capInput } from "./embedder.ts"
import { calibrationFor, fuse, type MeaningHit, type TextHit } from "./ranking.ts"
import { MAX_OFFSET, type SearchInput, type SearchMeta, type SearchResult } from "./schemas.ts"
import { Vectors } from "./vectors.ts"

/** Emails taken from each ranking before fusion: deep enough for every page SPEC allows. */
export const CANDIDATES = MAX_OFFSET + 100
/** BM25's usual constants: term-frequency saturation and length normalisation. */
const K1 = 1.2
const B = 0.75
/** A subject word counts this many times a body word. */
const SUBJECT_BOOST = 2
const SUGGESTIONS = 10
/** Query vectors kept, so a repeated query (paging, retries, a popular search) is not embedded again. */
const QUERY_CACHE_SIZE = 1_000

const normalizeQuery = (query: string) => query.trim().replace(/\s+/g, " ")
const likePrefix = (prefix: string) => `${prefix.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`

interface ResultRow {
  readonly id: string
  readonly subject: string
  readonly fromAddress: string
  readonly sentAt: Date
  readonly snippet: string
}

export class Search extends Effect.Service<Search>()("mailroom/Search", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const billing = yield* Billing
    const limiter = yield* RateLimiter
    const vectors = yield* Vectors
    const { embedder } = vectors
    const calibration = calibrationFor(embedder.model)
    const queryVectors = new Map<string, Float32Array>()

    const embedQuery = (query: string) =>
      Effect.suspend(() => {
        const cached = queryVectors.get(query)
        if (cached) {
          // Most recently used last: Map keeps insertion order, so the first key is the one to evict.
          queryVectors.delete(query)
          queryVectors.set(query, cached)
          return Effect.succeed(cached)
        }
        return embedder.embed([capInput(query, embedder.maxInputChars)]).pipe(
          Effect.map((vectors) => vectors[0]!),
          Effect.tap((vector) =>
            Effect.sync(() => {
              queryVectors.set(query, vector)
              if (queryVectors.size > QUERY_CACHE_SIZE) queryVectors.delete(queryVectors.keys().next().value!)
            })
          )
        )
      })

    /** Active mailboxes of the caller on `domain`, or every mailbox when no domain is asked for. */
    const mailboxScope = (userId: string, domain: string | undefined) =>
      domain === undefined ? Effect.succeed(undefined) : sql<{ id: string }>`
        SELECT id FROM mailboxes WHERE user_id = ${userId} AND domain = ${domain} AND status = 'active'`.pipe(
        Effect.map((rows) => rows.map((row) => row.id))
      )

    const inScope = (mailboxIds: ReadonlyArray<string> | undefined) =>
      mailboxIds === undefined ? sql`` : sql`AND m.id = ANY(${[...mailboxIds]}::text[])`

    /**
     * BM25 over the English lexemes of the caller's indexed mail: document frequencies and average
     * length from the caller's own mail, subject words counted double. Also answers the BM25 of a
     * typical document holding each query term once (`ideal`), which scores are measured against.
     */
    const byWords = (userId: string, query: string, mailboxIds: ReadonlyArray<string> | undefined) =>
      sql<{ emailId: string; bm25: number; ideal: number }>`
        WITH terms AS (
          SELECT DISTINCT t.lexeme FROM unnest(tsvector_to_array(to_tsvector('english', ${query}))) AS t (lexeme)
        ),
        stats AS (
          SELECT count(*)::float8 AS docs, coalesce(avg(d.length), 1)::float8 AS avg_length
          FROM search_documents d JOIN mailboxes m ON m.id = d.mailbox_id
          WHERE d.user_id = ${userId} AND m.status = 'active' ${inScope(mailboxIds)}
        ),
        weighted AS (
          SELECT t.lexeme, ln(1 + (s.docs - f.docs + 0.5) / (f.docs + 0.5)) AS idf
          FROM terms t CROSS JOIN stats s
          CROSS JOIN LATERAL (
            SELECT count(*)::float8 AS docs FROM search_documents d
            WHERE d.user_id = ${userId} AND d.document @@ to_tsquery('simple', quote_literal(t.lexeme))
          ) f
          WHERE f.docs > 0
        ),
        matches AS (
          SELECT d.email_id, d.document, d.length FROM search_documents d JOIN mailboxes m ON m.id = d.mailbox_id
          WHERE d.user_id = ${userId} AND m.status = 'active' ${inScope(mailboxIds)}
            AND d.document @@ to_tsquery('simple', (SELECT string_agg(quote_literal(lexeme), ' | ') FROM weighted))
        ),
        scored AS (
          SELECT m.email_id,
                 sum(w.idf * tf.n * ${sql.literal(String(K1 + 1))} /
                     (tf.n + ${sql.literal(String(K1))} * (1 - ${sql.literal(String(B))} + ${sql.literal(String(B))} * m.length / s.avg_length))) AS bm25
          FROM matches m CROSS JOIN stats s
          CROSS JOIN LATERAL unnest(m.document) AS u (lexeme, positions, weights)
          JOIN weighted w ON w.lexeme = u.lexeme
          CROSS JOIN LATERAL (
            SELECT (count(*) + ${sql.literal(String(SUBJECT_BOOST - 1))} * count(*) FILTER (WHERE x = 'A'))::float8 AS n FROM unnest(u.weights) AS x
          ) tf
          GROUP BY m.email_id
        )
        SELECT email_id, bm25, (SELECT sum(idf) FROM weighted) AS ideal
        FROM scored ORDER BY bm25 DESC, email_id LIMIT ${CANDIDATES}`

    const byMeaning = (userId: string, query: string, mailboxIds: ReadonlyArray<string> | undefined) =>
      Effect.gen(function*() {
        const vector = yield* embedQuery(query)
        const collection = yield* vectors.collection
        return yield* collection.search(vector, { namespace: userId, mailboxIds }, CANDIDATES)
      })

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

    const rememberQuery = (userId: string, query: string) =>
      sql`
        INSERT INTO search_queries AS q (user_id, normalized, query) VALUES (${userId}, ${query.toLowerCase()}, ${query})
        ON CONFLICT (user_id, normalized) DO UPDATE SET query = EXCLUDED.query, uses = q.uses + 1, last_used_at = now()`

    /** The per-minute search rate and the period's quota; counts the search when both allow it. */
    const admit = (principal: Principal) =>
      Effect.gen(function*() {
        const subscription = yield* billing.subscription(principal.userId)
        const plan = limits[subscription.plan]
        const rate = yield* limiter.take(`search:${principal.userId}`, [{ seconds: 60, limit: plan.searchesPerMinute }])
        if (!rate.allowed) {
          return yield* RateLimited.of({
            limit: rate.limit,
            window: rate.window,
            retryAfter: rate.retryAfter,
            message: `Search rate limit of ${rate.limit} searches per minute exceeded`
          })
        }
        const periodStart = new Date(subscription.currentPeriodStart)
        if (!(yield* countSearch(principal.userId, periodStart, plan.searchesPerMonth))) {
          return yield* Forbidden.of({
            code: "SEARCH_QUOTA",
            message: `The ${subscription.plan} plan allows ${plan.searchesPerMonth} searches per billing period; the period ends ${subscription.currentPeriodEnd}`,
            details: { used: plan.searchesPerMonth, limit: plan.searchesPerMonth, plan: subscription.plan, period_end: subscription.currentPeriodEnd }
          })
        }
        return periodStart
      })

    const run = (userId: string, input: SearchInput, query: string) =>
      Effect.gen(function*() {
        const limit = input.limit ?? 20
        const offset = input.offset ?? 0
        const mode = input.mode ?? "hybrid"
        const domain = input.domain === undefined ? undefined : normalizeDomain(input.domain)
        const mailboxIds = yield* mailboxScope(userId, domain)
        const [text, meaning] = yield* Effect.all([
          mode === "vector" ? Effect.succeed<ReadonlyArray<{ emailId: string; bm25: number; ideal: number }>>([]) : byWords(userId, query, mailboxIds),
          mode === "text" ? Effect.succeed<ReadonlyArray<MeaningHit>>([]) : byMeaning(userId, query, mailboxIds)
        ], { concurrency: 2 })
        const ranked = fuse({
          mode,
          text: text.map((hit): TextHit => ({ emailId: hit.emailId, bm25: Number(hit.bm25) })),
          meaning,
          ideal: Number(text[0]?.ideal ?? 0),
          calibration
        })
        // The vector index may still hold mail of a mailbox deleted since: keep what is readable.
        const rows = ranked.length === 0 ? [] : yield* sql<ResultRow>`
          SELECT e.id, e.subject, e.from_address, e.sent_at, left(e.text_body, 200) AS snippet
          FROM emails e JOIN mailboxes m ON m.id = e.mailbox_id
          WHERE e.id = ANY(${ranked.map((r) => r.emailId)}::text[]) AND e.user_id = ${userId} AND m.status = 'active'
            ${inScope(mailboxIds)}`
        const byId = new Map(rows.map((row) => [row.id, row]))
        const visible = ranked.filter((r) => byId.has(r.emailId))
        const data = visible.slice(offset, offset + limit).map((r): SearchResult => {
          const row = byId.get(r.emailId)!
          return {
            email_id: row.id,
            subject: row.subject,
            from: row.fromAddress,
            date: row.sentAt.toISOString(),
            snippet: row.snippet,
            score: Math.round(r.score * 10_000) / 10_000
          }
        })
        const meta: SearchMeta = {
          page: Math.floor(offset / limit) + 1,
          limit,
          total: visible.length,
          hasMore: offset + data.length < visible.length
        }
        return { data, meta }
      })

    const search = Effect.fn("Search.search")(function*(principal: Principal, input: SearchInput) {
      const query = normalizeQuery(input.query)
      if (input.domain !== undefined && !/^[a-z0-9.-]+$/i.test(normalizeDomain(input.domain))) {
        return yield* ValidationError.field("domain", "must be a domain name")
      }
      const periodStart = yield* admit(principal)
      const result = yield* run(principal.userId, input, query).pipe(
        Effect.catchTags({
          EmbedderError: (error) =>
            Effect.zipRight(Effect.logWarning(`Search by meaning unavailable: ${error.message}`), Effect.fail(ServiceUnavailable.of())),
          VectorIndexError: (error) =>
            Effect.zipRight(Effect.logWarning(`Vector index unavailable: ${error.message}`), Effect.fail(ServiceUnavailable.of()))
        }),
        // A search that could not run is not charged.
        Effect.tapError(() => refundSearch(principal.userId, periodStart).pipe(Effect.ignore))
      )
      yield* rememberQuery(principal.userId, query)
      return result
    })

    /** Completions of `q`: the caller's past queries, then subjects, then senders; ten at most. */
    const suggestions = Effect.fn("Search.suggestions")(function*(userId: string, q: string) {
      const pattern = likePrefix(normalizeQuery(q))
      const rows = yield* sql<{ text: string }>`
        (SELECT query AS text, 1 AS source, uses AS weight FROM search_queries
         WHERE user_id = ${userId} AND normalized LIKE ${pattern} ESCAPE '\\'
         ORDER BY uses DESC, last_used_at DESC LIMIT ${SUGGESTIONS})
        UNION ALL
        (SELECT e.subject, 2, count(*) FROM emails e JOIN mailboxes m ON m.id = e.mailbox_id
         WHERE e.user_id = ${userId} AND lower(e.subject) LIKE ${pattern} ESCAPE '\\' AND m.status = 'active'
         GROUP BY e.subject ORDER BY count(*) DESC, e.subject LIMIT ${SUGGESTIONS})
        UNION ALL
        (SELECT e.from_address, 3, count(*) FROM emails e JOIN mailboxes m ON m.id = e.mailbox_id
         WHERE e.user_id = ${userId} AND lower(e.from_address) LIKE ${pattern} ESCAPE '\\' AND m.status = 'active'
         GROUP BY e.from_address ORDER BY count(*) DESC, e.from_address LIMIT ${SUGGESTIONS})
        ORDER BY source, weight DESC, text`
      const seen = new Set<string>()
      const data: Array<string> = []
      for (const { text } of rows) {
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

export type SearchError = SqlError | NotFound | ValidationError
