/**
 * Paging through a held ranking (services/search/held-rankings.ts), in process over the suite's
 * database: a later page asked with the first page's `meta.ranking` is read from the ranking that
 * page was answered from, so mail indexed between two pages (an embedding backlog's vectors, new
 * mail) neither repeats an email on the next page nor pushes one past it; an email deleted since is
 * left out of its page, the others keeping their places, and labels are read as they are now. Another
 * account's token and an expired one are 400 RANKING_EXPIRED; one of another search 400 VALIDATION_ERROR.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import * as DocumentReader from "../../layers/document-reader.ts"
import * as MemoryBus from "../../layers/memory-bus.ts"
import * as WordNet from "../../layers/wordnet.ts"
import type { Principal } from "../../services/accounts/principal.ts"
import { Principals } from "../../services/accounts/principals.ts"
import { DependencyHealth } from "../../services/health/dependency-health.ts"
import { Deletions } from "../../services/mail/deletion.ts"
import { RecipientDirectory } from "../../services/mail/directory.ts"
import { Indexer } from "../../services/search/indexer.ts"
import type { SearchInput } from "../../services/search/schemas.ts"
import { Search } from "../../services/search/search.ts"
import { Vectors } from "../../services/search/vectors.ts"
import { WebhookSubscriptions } from "../../services/webhooks/subscriptions.ts"
import { testDatabase } from "../support/database.ts"
import { hashedWordsEmbedder, testVectorIndex } from "../support/search-services.ts"
import { uniqueName } from "../support/services.ts"
import { insertUser } from "../support/users.ts"

const principal = (userId: string): Principal => ({
  userId,
  plan: "pro",
  via: "apiKey",
  keyId: Option.none(),
  sessionId: Option.none(),
  mailboxes: Option.none(),
  readOnly: false
})

/** An account with a mailbox holding `mail` (subject, body), each email stored and indexed: its ids in that order. */
const account = (mail: ReadonlyArray<readonly [subject: string, body: string]>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const { userId } = yield* insertUser("pro")
    const mailboxId = uniqueName("mbx")
    yield* sql`INSERT INTO mailboxes (id, user_id, local_part, domain, address_normalized)
               VALUES (${mailboxId}, ${userId}, ${mailboxId}, 'agents.localhost', ${`${mailboxId}@agents.localhost`})`
    const ids = yield* store(userId, mailboxId, mail)
    return { userId, mailboxId, ids }
  })

/** Store `mail` in the mailbox and index it (words and meaning), as the worker does once it arrives. */
const store = (userId: string, mailboxId: string, mail: ReadonlyArray<readonly [subject: string, body: string]>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const indexer = yield* Indexer
    yield* sql`INSERT INTO blobs (sha256, size, content) VALUES (${"0".repeat(64)}, 1, ${new Uint8Array([1])}) ON CONFLICT DO NOTHING`
    const ids: Array<string> = []
    for (const [subject, text] of mail) {
      const id = uniqueName("eml")
      yield* sql`INSERT INTO emails (id, mailbox_id, user_id, message_id, thread_id, subject, from_address, to_addresses, sent_at,
                                     received_at, mail_from, rcpt_to, headers, text_body, has_attachments, raw_sha256, size)
                 VALUES (${id}, ${mailboxId}, ${userId}, ${`<${id}@test>`}, ${id}, ${subject}, 'x@example.com', ${["y@example.com"]}, now(),
                         now(), 'x@example.com', 'y@example.com', '{}', ${text}, false, ${"0".repeat(64)}, 1)`
      yield* indexer.index(id)
      ids.push(id)
    }
    return ids
  })

/** Mail about the harbour's cranes, each matching the query below a little less, and mail about other things. */
const harbour = [
  ["Harbour crane inspection", "The harbour crane inspection is due; the crane inspection report follows."],
  ["Crane inspection at the harbour", "Crane inspection notes from the harbour office."],
  ["Harbour crane", "The harbour crane was repaired yesterday."],
  ["Crane inspection", "An inspection of the old crane."],
  ["Harbour news", "News from the harbour: a new ferry."],
  ["Crane rental", "Renting a crane for the summer."],
  ["Inspection schedule", "The inspection schedule for the quarter."],
  ["Lunch on Friday", "Shall we have lunch together on Friday at noon?"],
  ["Invoice 42", "Please pay invoice 42 by the end of the month."],
  ["Team offsite", "The agenda for the team offsite in October."]
] as const

/** New mail about the same, matching it best: indexed between two pages, it ranks first. */
const arriving = [
  ["Harbour crane inspection: harbour crane inspection", "Harbour crane inspection. The harbour crane inspection again."],
  ["Harbour crane inspection today", "Harbour crane inspection today at the harbour, crane by crane."],
  ["Harbour crane inspection results", "The harbour crane inspection results: every crane passed inspection."]
] as const

const QUERY = "harbour crane inspection"

const services = Layer.mergeAll(Search.Default, Indexer.Default, Deletions.Default).pipe(
  Layer.provideMerge(Vectors.Default),
  Layer.provide(Layer.mergeAll(hashedWordsEmbedder("words-v1"), testVectorIndex, WordNet.layer, DocumentReader.layer))
)

const world = Layer.provideMerge(
  services,
  Layer.mergeAll(Principals.Default, RecipientDirectory.Default, WebhookSubscriptions.Default).pipe(
    Layer.provideMerge(MemoryBus.layer),
    Layer.provideMerge(DependencyHealth.Default),
    Layer.provideMerge(testDatabase)
  )
)

const ask = (userId: string, input: SearchInput) => Effect.flatMap(Search, (search) => search.search(principal(userId), input))
const idsOf = (answer: { readonly data: ReadonlyArray<{ readonly email_id: string }> }) => answer.data.map((result) => result.email_id)

layer(world, { timeout: "120 seconds" })("Paging through a held ranking", (it) => {
  it.effect("pages asked with the first page's ranking neither repeat nor skip while new matching mail is indexed between them", () =>
    Effect.gen(function*() {
      const { mailboxId, userId } = yield* account(harbour)
      // The whole ranking, as it is before anything arrives: one page, so nothing held.
      const whole = yield* ask(userId, { query: QUERY, limit: 100 })
      expect(whole.meta.hasMore).toBe(false)
      expect(whole.meta.ranking).toBeUndefined()
      const ranking = idsOf(whole)
      expect(ranking.length).toBeGreaterThan(6)

      const first = yield* ask(userId, { query: QUERY, limit: 3 })
      expect(idsOf(first)).toEqual(ranking.slice(0, 3))
      const token = first.meta.ranking
      expect(token).toMatch(/^rnk_[0-9a-f]{24}$/)
      expect(first.meta).toMatchObject({ page: 1, limit: 3, total: ranking.length, hasMore: true })

      // Mail matching the query better than any arrives and is indexed before page 2 is asked for.
      const arrived = yield* store(userId, mailboxId, arriving)

      // Ranked again, page 2 shows page 1's emails again (the new mail pushed them down): the failure.
      const again = yield* ask(userId, { query: QUERY, limit: 3, offset: 3 })
      expect(idsOf(again).some((id) => idsOf(first).includes(id))).toBe(true)

      // From the held ranking, every page follows the last, to its end, each email once.
      const pages = [first]
      for (let offset = 3; pages.at(-1)!.meta.hasMore; offset += 3) {
        const page = yield* ask(userId, { query: QUERY, limit: 3, offset, ...(token === undefined ? {} : { ranking: token }) })
        expect(page.meta).toMatchObject({ page: offset / 3 + 1, limit: 3, total: ranking.length, ranking: token })
        pages.push(page)
      }
      expect(pages.flatMap(idsOf)).toEqual(ranking)
      expect(pages.flatMap(idsOf).filter((id) => arrived.includes(id))).toEqual([])
      // The scores are the ranking's, as page 1 showed them.
      expect(pages.flatMap((page) => page.data.map((r) => r.score))).toEqual(whole.data.map((r) => r.score))
      // A new search (no token) ranks the new mail too.
      const fresh = yield* ask(userId, { query: QUERY, limit: 3 })
      expect(idsOf(fresh).some((id) => arrived.includes(id))).toBe(true)
      expect(fresh.meta.ranking).not.toBe(token)
    }))

  it.effect("an email deleted since is left out of its page, the others keep their places; labels are as they are now", () =>
    Effect.gen(function*() {
      const { userId } = yield* account(harbour)
      const ranking = idsOf(yield* ask(userId, { query: QUERY, limit: 100 }))
      const first = yield* ask(userId, { query: QUERY, limit: 3 })
      const token = first.meta.ranking!
      const deleted = ranking[4]!
      yield* Effect.flatMap(Deletions, (deletions) => deletions.emails(userId, [deleted]))
      const sql = yield* SqlClient.SqlClient
      yield* sql`UPDATE emails SET labels = array_append(labels, 'urgent') WHERE id = ${ranking[3]!}`

      const second = yield* ask(userId, { query: QUERY, limit: 3, offset: 3, ranking: token })
      expect(idsOf(second)).toEqual([ranking[3], ranking[5]])
      expect(second.data[0]!.labels).toContain("urgent")
      // The total is the ranking's as held; the next page starts where it did.
      expect(second.meta).toMatchObject({ page: 2, total: ranking.length, hasMore: true })
      const third = yield* ask(userId, { query: QUERY, limit: 3, offset: 6, ranking: token })
      expect(idsOf(third)).toEqual(ranking.slice(6, 9))
    }))

  it.effect("another account's token, an expired one and one of another search are refused", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const { userId } = yield* account(harbour)
      const other = yield* account(harbour)
      const token = (yield* ask(userId, { query: QUERY, limit: 3 })).meta.ranking!

      const theirs = yield* Effect.flip(ask(other.userId, { query: QUERY, limit: 3, offset: 3, ranking: token }))
      expect(theirs).toMatchObject({
        _tag: "RankingExpired",
        status: 400,
        code: "RANKING_EXPIRED",
        details: { ranking: expect.stringMatching(/^expired or unknown/), held_for_seconds: 600 }
      })

      const another = yield* Effect.flip(ask(userId, { query: "harbour ferry", limit: 3, offset: 3, ranking: token }))
      expect(another).toMatchObject({ _tag: "ValidationError", code: "VALIDATION_ERROR", details: { ranking: expect.stringMatching(/^was made for another search/) } })
      const filtered = yield* Effect.flip(ask(userId, { query: QUERY, limit: 3, offset: 3, ranking: token, mode: "text" }))
      expect(filtered).toMatchObject({ _tag: "ValidationError", details: { ranking: expect.any(String) } })
      // The page size may change from page to page.
      expect(idsOf(yield* ask(userId, { query: QUERY, limit: 2, offset: 3, ranking: token }))).toHaveLength(2)

      // Each use holds it 10 minutes more; once that has passed it is refused.
      const [held] = yield* sql<{ seconds: number }>`
        SELECT extract(epoch FROM expires_at - now())::int AS seconds FROM search_rankings WHERE id = ${token}`
      expect(Number(held!.seconds)).toBeGreaterThan(590)
      yield* sql`UPDATE search_rankings SET expires_at = now() - interval '1 second' WHERE id = ${token}`
      const expired = yield* Effect.flip(ask(userId, { query: QUERY, limit: 3, offset: 3, ranking: token }))
      expect(expired).toMatchObject({ code: "RANKING_EXPIRED", details: { held_for_seconds: 600 } })
      const unknown = yield* Effect.flip(ask(userId, { query: QUERY, limit: 3, offset: 3, ranking: "rnk_000000000000000000000000" }))
      expect(unknown).toMatchObject({ code: "RANKING_EXPIRED" })
      // A refused page is not counted: only the first page and the page of two were.
      const [used] = yield* sql<{ n: number }>`SELECT coalesce(sum(searches), 0)::int AS n FROM usage_counters WHERE user_id = ${userId}`
      expect(Number(used!.n)).toBe(2)
    }))
})
