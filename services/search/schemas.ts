/** SPEC "Search": the request, a result, the page meta; and the suggestions query. */
import { Label, MAX_LABELS } from "../mail/label-rules.ts"
import { RECEIVED_AFTER, RECEIVED_BEFORE, ReceivedBound } from "../mail/received-range.ts"
import { SenderPattern } from "../mail/sender-list-rules.ts"
import { Direction } from "../mail/schemas.ts"
import { Schema } from "effect"
import { maxCharacters } from "../characters.ts"
import { IntBetween } from "../listing.ts"
import { rule } from "../schema-rules.ts"

/** How deep pages reach: past this offset (and a page), a search has no more results to give. */
export const MAX_OFFSET = 300
export const MAX_QUERY_CHARS = 1_000
/** How long a held ranking (`meta.ranking`) lasts after its last use, in seconds. */
export const RANKING_HELD_SECONDS = 600
/** A ranking token as made (held-rankings.ts): "rnk_" and 24 characters; anything longer is no token. */
const MAX_RANKING_CHARS = 64

export const SearchMode = Schema.Literal("hybrid", "text", "vector")
export type SearchMode = typeof SearchMode.Type

export const SearchInput = Schema.Struct({
  query: Schema.String.annotations({ message: () => "must be a non-empty string" }).pipe(
    rule((value) => value.trim().length > 0 || "must not be empty"),
    maxCharacters(MAX_QUERY_CHARS, `must be at most ${MAX_QUERY_CHARS} characters`)
  ).annotations({ description: "Natural-language query" }),
  domain: Schema.optional(
    Schema.String.pipe(rule((value) => value.trim().length > 0 || "must not be empty"))
      .annotations({ description: "Only mail received at addresses on this domain", message: () => "must be a domain name" })
  ),
  limit: Schema.optional(IntBetween(1, 100)).annotations({ description: "1-100, default 20" }),
  offset: Schema.optional(IntBetween(0, Number.MAX_SAFE_INTEGER).annotations({ message: () => "must be a non-negative integer" }))
    .annotations({ description: `Results to skip; results reach ${MAX_OFFSET} + limit deep` }),
  mailbox_id: Schema.optional(Schema.String).annotations({ description: "Mailroom extension: only this mailbox's emails (404 NOT_FOUND for one not the caller's)" }),
  labels: Schema.optional(Schema.Array(Label).pipe(Schema.maxItems(MAX_LABELS, { message: () => `must list at most ${MAX_LABELS} labels` })))
    .annotations({ description: "Mailroom extension: only emails carrying every one of these labels" }),
  from: Schema.optional(SenderPattern).annotations({
    description: "Mailroom extension: only mail from this sender: an address (ada@example.com, and her subaddresses such as " +
      "ada+news@example.com), a domain (example.com) or its subdomains (*.example.com); case-insensitive"
  }),
  received_after: Schema.optional(ReceivedBound).annotations({ description: `Mailroom extension: only ${RECEIVED_AFTER}` }),
  received_before: Schema.optional(ReceivedBound).annotations({ description: `Mailroom extension: only ${RECEIVED_BEFORE}` }),
  mode: Schema.optional(SearchMode).annotations({
    description: "Mailroom extension: hybrid (default) fuses full-text and vector ranking; text or vector uses one alone"
  }),
  ranking: Schema.optional(
    Schema.String.annotations({ message: () => "must be a string: a previous answer's meta.ranking" }).pipe(
      rule((value) => value.length > 0 || "must not be empty"),
      maxCharacters(MAX_RANKING_CHARS, "is not a ranking token: pass back a previous answer's meta.ranking")
    )
  ).annotations({
    description: "Mailroom extension: a previous page's `meta.ranking`, with the same query and filters: this page is read from " +
      `that answer's ranking, held ${RANKING_HELD_SECONDS / 60} minutes after its last use, instead of ranking again, so that ` +
      "pages neither repeat nor skip an email while mail is indexed meanwhile (emails deleted since are left out). " +
      "400 RANKING_EXPIRED once it is gone"
  }),
  min_score: Schema.optional(
    Schema.Number.pipe(Schema.between(0, 1, { message: () => "must be a number from 0 to 1" }))
      .annotations({ message: () => "must be a number from 0 to 1" })
  ).annotations({
    description: "Mailroom extension: only results scoring at least this (the score bands: 0.30 somewhat relevant, 0.50 " +
      "moderately, 0.70 very, 0.90 highly); `total` and `hasMore` then count those only. Default 0: every match, weak ones too"
  })
}).annotations({ identifier: "SearchInput", parseOptions: { errors: "all", onExcessProperty: "error" } })
export type SearchInput = typeof SearchInput.Type

export const SearchResult = Schema.Struct({
  email_id: Schema.String,
  subject: Schema.String,
  from: Schema.String,
  from_name: Schema.NullOr(Schema.String).annotations({
    description: "The From's display name (\"Ann Smith\" of Ann Smith <ann@example.com>); null when it has none (Mailroom extension)"
  }),
  to: Schema.Array(Schema.String).annotations({
    description: "The To addresses, as the email's own `to` (Mailroom extension): for sent mail, whom it went to"
  }),
  cc: Schema.Array(Schema.String).annotations({ description: "The Cc addresses, as the email's own `cc` (Mailroom extension)" }),
  date: Schema.String,
  snippet: Schema.String.annotations({ description: "The first 200 characters of the body" }),
  labels: Schema.Array(Schema.String),
  mailbox_id: Schema.String.annotations({ description: "The mailbox that holds it (Mailroom extension)" }),
  thread_id: Schema.String.annotations({ description: "Its conversation (Mailroom extension)" }),
  direction: Direction.annotations({ description: "Received or sent (Mailroom extension)" }),
  score: Schema.Number.annotations({
    description: "0-1, higher is better: 0.90+ highly relevant, 0.70+ very, 0.50+ moderately, 0.30+ somewhat, below weak"
  })
}).annotations({ identifier: "SearchResult" })
export type SearchResult = typeof SearchResult.Type

export const SearchMeta = Schema.Struct({
  page: Schema.Number,
  limit: Schema.Number,
  total: Schema.Number,
  hasMore: Schema.Boolean,
  ranking: Schema.optional(Schema.String).annotations({
    description: "Mailroom extension: when there are more pages (or one was asked for with it), the token of this answer's " +
      "ranking: pass it back as `ranking`, with the same query and filters, to read the next pages from the same ranking"
  })
}).annotations({ identifier: "SearchMeta" })
export type SearchMeta = typeof SearchMeta.Type

export const SuggestionsParams = Schema.Struct({
  q: Schema.String.annotations({ message: () => "is required" }).pipe(
    rule((value) => value.trim().length > 0 || "must not be empty"),
    maxCharacters(200, "must be at most 200 characters")
  ).annotations({ description: "A partial query" })
}).annotations({ parseOptions: { errors: "all" } })
