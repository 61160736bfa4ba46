/**
 * Held rankings (a Mailroom extension to SPEC "Search"): a search whose answer has more pages keeps
 * the ranking it paged through, in the database (so that any API node serves the next page), for
 * `RANKING_HELD_SECONDS` after its last use. A later page that passes its token back (`ranking`) is
 * read from that ranking instead of ranking again: the index may have changed meanwhile (during an
 * embedding backlog vectors arrive between two pages and move emails up or down), and offset pages
 * over a new ranking would show an email twice or never.
 *
 * A ranking holds every result the search's answer counted (`total`), in order, with its score: the
 * ranker's fused candidates (ranker.ts: at most the best 400 by words and 64 by meaning, 400 by meaning
 * alone), those readable when it was made. It belongs to its account: another account's token is as
 * unknown as an expired one. Housekeeping (maintenance/housekeeping.ts) removes expired ones.
 *
 * The search's own statement stores it (search.ts: one round trip for the page and the ranking); this
 * module takes one back and says which search a ranking answers (`searchDigest`).
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { sha256 } from "../accounts/tokens.ts"
import { RankingExpired, ValidationError } from "../errors.ts"
import { RANKING_HELD_SECONDS, type SearchInput } from "./schemas.ts"

/** A held ranking: the results in order (`emailIds`), each one's score (`scores`, unrounded). */
export interface HeldRanking {
  readonly token: string
  readonly emailIds: ReadonlyArray<string>
  readonly scores: ReadonlyArray<number>
}

/** The interval a ranking is held for after its last use, as SQL takes it. */
export const heldFor = `${RANKING_HELD_SECONDS} seconds`

/**
 * Which search a ranking answers: its normalized query and every filter (not the page: `limit` and
 * `offset` may change from page to page), and the mailboxes a limited key reaches (`only`).
 */
export const searchDigest = (query: string, input: SearchInput, domain: string | undefined, only: ReadonlyArray<string> | undefined) =>
  sha256(JSON.stringify([
    query,
    input.mode ?? "hybrid",
    domain ?? null,
    input.mailbox_id ?? null,
    input.labels === undefined ? null : [...input.labels].sort(),
    input.from ?? null,
    input.received_after?.toISOString() ?? null,
    input.received_before?.toISOString() ?? null,
    input.min_score ?? 0,
    only === undefined ? null : [...only].sort()
  ]))

const expired = () =>
  new RankingExpired({
    message: `ranking: expired or unknown (a ranking is held ${RANKING_HELD_SECONDS / 60} minutes after its last use): ` +
      "search again without it, from the first page",
    details: {
      ranking: "expired or unknown: search again without it, from the first page, for a new ranking",
      held_for_seconds: RANKING_HELD_SECONDS
    }
  })

/**
 * The account's ranking `token` for the search `digest`, its time held renewed: 400 RANKING_EXPIRED
 * when it has none by that token that still holds (expired, never made, another account's), 400
 * VALIDATION_ERROR when it answers another search.
 */
export const takeHeld = Effect.fn("Search.takeHeld")(function*(userId: string, token: string, digest: string) {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<{ search: string; emailIds: ReadonlyArray<string>; scores: ReadonlyArray<number | string> }>`
    UPDATE search_rankings SET expires_at = now() + ${heldFor}::interval
    WHERE id = ${token} AND user_id = ${userId} AND expires_at > now()
    RETURNING search, email_ids, scores`
  const row = rows[0]
  if (row === undefined) return yield* expired()
  if (row.search !== digest) {
    return yield* ValidationError.field(
      "ranking",
      "was made for another search: ask with the query and filters of the answer that gave it, or leave it out to rank again"
    )
  }
  return { token, emailIds: row.emailIds, scores: row.scores.map(Number) } satisfies HeldRanking
})
