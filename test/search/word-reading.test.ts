/**
 * The word ranking's ways of reading the postings (services/search/ranker.ts `reading`) over a real
 * database (the suite's migrated PostgreSQL database, below): on a generated
 * collection of mail of very different lengths, indexed by the index actor's own code, the ranking
 * from postings held in memory is the ranking the database computes reading every posting
 * (`every`), email for email and score for score, for every query, at the product's depth and a
 * small one, with other BM25 constants, with feedback and fused with meaning (and a mailbox scope,
 * which reads the database either way); and it stays so after more (and much longer) mail has
 * changed the average length BM25 normalises by (the memory brought up to date by searches side by
 * side), after emails are forgotten and after they are indexed again.
 *
 * PostgreSQL + NATS run only: there, indexing side by side can commit documents out of their numbers'
 * order, which the memory must notice; PGlite's one connection commits them in order. The SQL of
 * reading every posting is the same on either database, and runs on both in the search suite (a
 * search within a domain reads that way).
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { Indexer } from "../../services/search/indexer.ts"
import { BASELINE_RANKING, CANDIDATES, Ranker, type RankingOptions } from "../../services/search/ranker.ts"
import type { Ranked } from "../../services/search/ranking.ts"
import type { SearchMode } from "../../services/search/schemas.ts"
import { testDatabase } from "../support/database.ts"
import { mode } from "../support/services.ts"
import { rankerAndIndexer } from "../support/search-services.ts"


const random = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), seed | 1)
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

/**
 * Made-up words (no stemming or stop word touches them), drawn by a Zipf law: a few in most mail,
 * many in a little, as real words are.
 */
const VOCABULARY = Array.from({ length: 400 }, (_, i) => `w${i.toString(36)}q${"bcdfghjklmnp"[i % 12]}x`)
const zipf = (rng: () => number) => {
  const total = VOCABULARY.reduce((sum, _, rank) => sum + 1 / (rank + 1), 0)
  let x = rng() * total
  for (let rank = 0; rank < VOCABULARY.length; rank++) if ((x -= 1 / (rank + 1)) <= 0) return VOCABULARY[rank]!
  return VOCABULARY[VOCABULARY.length - 1]!
}
const text = (rng: () => number, min: number, max: number) =>
  Array.from({ length: min + Math.floor(rng() * (max - min + 1)) }, () => zipf(rng)).join(" ")

interface Generated {
  readonly id: string
  readonly mailbox: string
  readonly subject: string
  readonly body: string
}

/** Emails `from`..`to`-1, bodies of `min`..`max` words; every seventh in the second mailbox. */
const generate = (from: number, to: number, min: number, max: number): Array<Generated> =>
  Array.from({ length: to - from }, (_, k) => {
    const i = from + k
    const rng = random(i * 7919 + 17)
    return { id: `eml_${String(i).padStart(5, "0")}`, mailbox: i % 7 === 0 ? "mbx_2" : "mbx_1", subject: text(rng, 1, 6), body: text(rng, min, max) }
  })

/** The emails stored in one statement, then indexed by the index actor's code, side by side (its batches). */
const store = (emails: ReadonlyArray<Generated>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const indexer = yield* Indexer
    yield* sql`INSERT INTO emails (id, mailbox_id, user_id, message_id, thread_id, subject, from_address, to_addresses, sent_at,
                                   received_at, mail_from, rcpt_to, headers, text_body, has_attachments, raw_sha256, size)
               SELECT e.id, e.mailbox, 'usr_1', '<' || e.id || '@test>', e.id, e.subject, 'x@example.com', ARRAY['y@example.com'], now(),
                      now(), 'x@example.com', 'y@example.com', '{}', e.body, false, ${"0".repeat(64)}, 1
               FROM unnest(${emails.map((e) => e.id)}::text[], ${emails.map((e) => e.mailbox)}::text[],
                           ${emails.map((e) => e.subject)}::text[], ${emails.map((e) => e.body)}::text[]) AS e (id, mailbox, subject, body)`
    yield* Effect.forEach(emails, (email) => indexer.index(email.id), { concurrency: 16, discard: true })
  })

const account = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`INSERT INTO users (id, email, email_normalized, name, password_hash) VALUES ('usr_1', 'a@example.com', 'a@example.com', 'A', 'x')`
  for (const [id, local] of [["mbx_1", "ops"], ["mbx_2", "billing"]]) {
    yield* sql`INSERT INTO mailboxes (id, user_id, local_part, domain, address_normalized)
               VALUES (${id}, 'usr_1', ${local}, 'agents.localhost', ${`${local}@agents.localhost`})`
  }
  yield* sql`INSERT INTO blobs (sha256, size, content) VALUES (${"0".repeat(64)}, 1, ${new Uint8Array([1])})`
})

/** Queries of two to four words, most of them common enough that their postings outnumber the top. */
const queries = (() => {
  const rng = random(4242)
  return Array.from({ length: 12 }, (_, i) => {
    const words = Array.from({ length: 2 + (i % 3) }, () => VOCABULARY[3 + Math.floor(rng() * rng() * 120)]!)
    return words.join(" ")
  })
})()

const exhaustive: RankingOptions = { ...BASELINE_RANKING, reading: "every" }
const memory: RankingOptions = { ...BASELINE_RANKING, reading: "memory" }

/**
 * Two rankings of one query are the same: position for position the same score, and the same emails
 * at each score. Emails of equal score keep their ids' order only up to float rounding (summed in
 * another order, two equal BM25s can differ in the last bit, even between two runs of the
 * exhaustive query), so a run of equal scores is compared as a set; the run the top's cut falls in
 * may hold different emails of that score, as many on each side.
 */
const expectSameRanking = (candidate: ReadonlyArray<Ranked>, reference: ReadonlyArray<Ranked>, depth: number, label: string) => {
  expect(candidate.length, label).toBe(reference.length)
  candidate.forEach((r, i) => expect(r.score, label).toBeCloseTo(reference[i]!.score, 12))
  for (let start = 0; start < reference.length;) {
    let end = start + 1
    while (end < reference.length && Math.abs(reference[end]!.score - reference[start]!.score) < 1e-12) end++
    const cut = end === reference.length && reference.length >= depth
    if (!cut) {
      const ids = (list: ReadonlyArray<Ranked>) => list.slice(start, end).map((r) => r.emailId).sort()
      expect(ids(candidate), `${label}, positions ${start}..${end - 1}`).toEqual(ids(reference))
    }
    start = end
  }
}

type Case = { readonly mode: SearchMode; readonly scope?: ReadonlyArray<string>; readonly options?: Partial<RankingOptions> }

/**
 * Every query ranked by reading every posting and by each of `readings`, in each mode and scope: the
 * same ranking. A reading's rankings run `concurrency` at a time (side by side, searches bring the
 * postings held in memory up to date together). Answers how many results were compared.
 */
const rankedAlike = (readings: ReadonlyArray<{ readonly reading: RankingOptions; readonly concurrency?: number }>, cases: ReadonlyArray<Case>) =>
  Effect.gen(function*() {
    const ranker = yield* Ranker
    const pairs = queries.flatMap((query) => cases.map((c) => ({ query, ...c })))
    const references = yield* Effect.forEach(pairs, ({ mode, options, query, scope }) =>
      ranker.rank("usr_1", query, mode, scope, { ...exhaustive, ...options }))
    for (const { concurrency, reading } of readings) {
      const candidates = yield* Effect.forEach(pairs, ({ mode, options, query, scope }) =>
        ranker.rank("usr_1", query, mode, scope, { ...reading, ...options }), { concurrency: concurrency ?? 1 })
      pairs.forEach(({ mode, options, query, scope }, i) =>
        expectSameRanking(
          candidates[i]!,
          references[i]!,
          options?.depth ?? CANDIDATES,
          `${reading.reading} ${mode} "${query}" ${scope ?? ""} ${JSON.stringify(options ?? {})}`
        )
      )
    }
    return references.reduce((sum, reference) => sum + reference.length, 0)
  })

/** A depth well inside the collection, so that the top's cut falls among the postings. */
const SHALLOW = 25

const cases: ReadonlyArray<Case> = [
  { mode: "text" as const },
  { mode: "text" as const, options: { depth: SHALLOW } },
  { mode: "text" as const, scope: ["mbx_1"], options: { depth: SHALLOW } },
  { mode: "text" as const, options: { depth: SHALLOW, k1: 2, b: 0.3 } },
  { mode: "text" as const, options: { depth: SHALLOW, k1: 0.9, b: 0 } },
  { mode: "text" as const, scope: ["mbx_1"] },
  { mode: "text" as const, options: { feedback: { documents: 5, terms: 5, weight: 0.5 } } },
  { mode: "hybrid" as const },
  { mode: "text" as const, options: { k1: 2, b: 0.3 } }
]

const averageLength = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql<{ avg: number }>`SELECT avg(length)::float8 AS avg FROM search_documents WHERE user_id = 'usr_1'`.pipe(Effect.map((rows) => Number(rows[0]!.avg))))

describe.skipIf(mode === "embedded")("on PostgreSQL", () => layer(testDatabase, { timeout: "600 seconds" })("Word ranking read from memory", (it) => {
  it.effect("ranks as reading every posting does, before and after more and longer mail changes the average length", () =>
    Effect.gen(function*() {
      yield* account
      // Under 1,000 emails, so the ranker reads the namespace's statistics afresh (no cache) after more mail.
      yield* store(generate(0, 900, 3, 60))
      const before = yield* averageLength
      expect(yield* rankedAlike([{ reading: memory }], cases)).toBeGreaterThan(queries.length * cases.length * SHALLOW)

      yield* store(generate(900, 1_400, 120, 400))
      const after = yield* averageLength
      expect(after).toBeGreaterThan(before * 2)
      // The postings held since the first comparison are brought up to date, by searches side by side.
      expect(yield* rankedAlike([{ reading: memory, concurrency: 8 }], cases)).toBeGreaterThan(queries.length * cases.length * SHALLOW)

      // Emails forgotten (their postings gone, the lexicon's counts down), then indexed again: what
      // memory holds of them is read again. (The suite's clock stands still, so the statistics of
      // the 1,400 emails the ranker read above stay as read, for the references and the candidates
      // alike: a namespace of 1,000 emails or more has them read at most every 30 seconds.) Scoped
      // searches read the database, whatever the reading.
      const unscoped = cases.filter((c) => c.scope === undefined)
      const indexer = yield* Indexer
      const some = generate(0, 1_400, 0, 0).filter((_, i) => i % 9 === 0).map((email) => email.id)
      yield* indexer.forget(some)
      expect(yield* rankedAlike([{ reading: memory }], unscoped)).toBeGreaterThan(queries.length * unscoped.length * SHALLOW)
      yield* Effect.forEach(some, (id) => indexer.index(id), { concurrency: 16, discard: true })
      expect(yield* rankedAlike([{ reading: memory }], unscoped)).toBeGreaterThan(queries.length * unscoped.length * SHALLOW)
    }).pipe(Effect.provide(rankerAndIndexer)), 600_000)
}))
