/**
 * Filters: the account's standing orders for received mail ("mail from billing@… gets the label
 * `billing`", "newsletters are marked read"), applied as each email is stored. What a filter is, and
 * what it does to an email:
 *
 * - A filter applies to the mail of every mailbox of the account, or of one mailbox (`mailbox_id`).
 * - Its conditions all hold, each by one of its terms:
 *   - `from`: the header From is named by an entry: an address, a domain (exactly) or `*.domain` (any
 *     subdomain of it), as on allow and block lists (sender-list-rules.ts);
 *   - `to`: an address the email was sent to (the mailbox address it was delivered to, its To and
 *     its Cc) is named by an entry, in the same forms: what sorts a catch-all's mail;
 *   - `subject_contains` / `body_contains`: the subject / the text body contains the phrase, in any
 *     case, white space (a line break, several spaces) matching white space;
 *   - `has_attachments`: the email has (true) or has no (false) attachments.
 *   A filter names at least one condition, and a list condition at least one term.
 * - Its actions add and remove labels, as a label change by the API does (label-rules.ts): fact labels
 *   (`inbound`, `sent`) cannot be named; `unread` and the verdicts (`spam`, `unauthenticated`) can, so a
 *   filter can mark mail read, or spam, or trusted. `blocked` cannot: it is the block lists' verdict.
 * - Filters apply in the order they were created, each to the labels the ones before it left; a
 *   disabled filter is skipped. Labels an email could not carry (past MAX_LABELS) are not added.
 * - Received mail only: what the account sends is not filtered.
 *
 * Only `effect` and what sender-list-rules.ts imports here: the HTTP contract reads these schemas.
 */
import { Schema } from "effect"
import { applyChange, type LabelChange, Label, MAX_LABELS } from "./label-rules.ts"
import { BLOCKED, ENTRY_FORMS, parseEntry, senderForms } from "./sender-list-rules.ts"
import { rule } from "../schema-rules.ts"

/** Filters one account keeps at most. */
export const MAX_FILTERS = 100
/** Terms one condition lists at most. */
export const MAX_TERMS = 50
/** The longest phrase a contains condition looks for. */
export const MAX_PHRASE_LENGTH = 200
export const MAX_NAME_LENGTH = 100
/** Received emails a run over mail already received looks at, newest first. */
export const APPLY_LIMIT = 10_000

const terms = (item: Schema.Schema<string>) =>
  Schema.Array(item).pipe(
    Schema.minItems(1, { message: () => "must list at least one term; leave the condition out to not use it" }),
    Schema.maxItems(MAX_TERMS, { message: () => `must list at most ${MAX_TERMS} terms` })
  )

const Phrase = Schema.String.pipe(
  rule((phrase) => {
    if (phrase.trim().length === 0) return "must not be empty"
    if ([...phrase].length > MAX_PHRASE_LENGTH) return `must be at most ${MAX_PHRASE_LENGTH} characters`
    // eslint-disable-next-line no-control-regex
    if (/[\u0000-\u001f\u007f]/.test(phrase)) return "must not contain control characters"
    return true
  })
).annotations({ description: `A phrase of 1-${MAX_PHRASE_LENGTH} characters, found in any case` })

const Entry = Schema.String.pipe(rule((raw) => {
  const parsed = parseEntry(raw)
  return typeof parsed === "string" ? parsed : true
})).annotations({ description: `${ENTRY_FORMS}; case-insensitive` })

export const FilterConditions = Schema.Struct({
  from: Schema.optional(terms(Entry)).annotations({ description: "The header From is one of these senders" }),
  to: Schema.optional(terms(Entry)).annotations({
    description: "The email was sent to one of these: the mailbox address it was delivered to, its To or its Cc"
  }),
  subject_contains: Schema.optional(terms(Phrase)).annotations({ description: "The subject contains one of these phrases" }),
  body_contains: Schema.optional(terms(Phrase)).annotations({ description: "The text body contains one of these phrases" }),
  has_attachments: Schema.optional(Schema.Boolean).annotations({ description: "true: has attachments; false: has none" })
}).annotations({
  identifier: "FilterConditions",
  description: "Every condition given must hold (each by any one of its terms); at least one is given",
  // A misspelt condition left out would make the filter take more mail than asked: refused instead.
  parseOptions: { onExcessProperty: "error" }
})
export type FilterConditions = typeof FilterConditions.Type

const labels = (what: string) =>
  Schema.Array(Label).pipe(Schema.maxItems(MAX_LABELS, { message: () => `must list at most ${MAX_LABELS} labels` })).annotations({
    description: what
  })

export const FilterActions = Schema.Struct({
  add_labels: Schema.optional(labels("Labels the email gets: the account's own, or spam / unauthenticated")),
  remove_labels: Schema.optional(labels("Labels the email loses: unread marks it read, spam overrules the spam check"))
}).annotations({
  identifier: "FilterActions",
  description: "At least one label to add or remove",
  parseOptions: { onExcessProperty: "error" }
})
export type FilterActions = typeof FilterActions.Type

const Name = Schema.String.pipe(
  rule((name) => name.trim().length > 0 || "must not be empty"),
  Schema.maxLength(MAX_NAME_LENGTH, { message: () => `must be at most ${MAX_NAME_LENGTH} characters` })
)

export const FilterInput = Schema.Struct({
  name: Schema.optional(Schema.NullOr(Name)).annotations({ description: "What the filter is for, as a person reads it" }),
  mailbox_id: Schema.optional(Schema.NullOr(Schema.String)).annotations({
    description: "The mailbox whose mail it filters; null or absent: every mailbox of the account"
  }),
  enabled: Schema.optional(Schema.Boolean).annotations({ description: "Default true; a disabled filter is kept and skipped" }),
  conditions: FilterConditions.annotations({ description: "What an email must meet, every condition given (at least one)" }),
  actions: FilterActions.annotations({ description: "What is done to an email that meets them" })
}).annotations({ identifier: "FilterInput", parseOptions: { errors: "all", onExcessProperty: "error" } })
export type FilterInput = typeof FilterInput.Type

export const FilterUpdate = Schema.Struct({
  name: Schema.optional(Schema.NullOr(Name)),
  mailbox_id: Schema.optional(Schema.NullOr(Schema.String)),
  enabled: Schema.optional(Schema.Boolean),
  conditions: Schema.optional(FilterConditions).annotations({ description: "Replaces the conditions whole" }),
  actions: Schema.optional(FilterActions).annotations({ description: "Replaces the actions whole" })
}).annotations({ identifier: "FilterUpdate", parseOptions: { errors: "all", onExcessProperty: "error" } })
export type FilterUpdate = typeof FilterUpdate.Type

export const Filter = Schema.Struct({
  filter_id: Schema.String,
  name: Schema.NullOr(Schema.String),
  mailbox_id: Schema.NullOr(Schema.String).annotations({ description: "null: every mailbox of the account" }),
  enabled: Schema.Boolean,
  conditions: FilterConditions.annotations({ description: "As given, entries normalised (lower case, ASCII domains)" }),
  actions: Schema.Struct({ add_labels: Schema.Array(Schema.String), remove_labels: Schema.Array(Schema.String) }),
  matched_count: Schema.Number.annotations({ description: "Received emails it has applied to since it was created" }),
  last_matched_at: Schema.NullOr(Schema.String),
  created_at: Schema.String,
  updated_at: Schema.String
}).annotations({ identifier: "Filter" })
export type Filter = typeof Filter.Type

/** A filter's conditions as stored: normalised entries, only the conditions given. */
export const normaliseConditions = (conditions: FilterConditions): FilterConditions => {
  const entries = (raw: ReadonlyArray<string>) =>
    [...new Set(raw.map((entry) => {
      const parsed = parseEntry(entry)
      return typeof parsed === "string" ? entry : parsed.entry
    }))]
  const phrases = (raw: ReadonlyArray<string>) => [...new Set(raw.map((phrase) => phrase.trim()))]
  return {
    ...(conditions.from !== undefined ? { from: entries(conditions.from) } : {}),
    ...(conditions.to !== undefined ? { to: entries(conditions.to) } : {}),
    ...(conditions.subject_contains !== undefined ? { subject_contains: phrases(conditions.subject_contains) } : {}),
    ...(conditions.body_contains !== undefined ? { body_contains: phrases(conditions.body_contains) } : {}),
    ...(conditions.has_attachments !== undefined ? { has_attachments: conditions.has_attachments } : {})
  }
}

/** Why `conditions` cannot make a filter (field → message), or undefined when they can. */
export const conditionsProblem = (conditions: FilterConditions): Record<string, string> | undefined =>
  Object.values(conditions).every((value) => value === undefined)
    ? { conditions: "must give at least one of from, to, subject_contains, body_contains, has_attachments" }
    : undefined

/** Why `actions` cannot make a filter, past what label-rules.ts `checkChange` refuses. */
/** What the filter list sorts by: created_at:asc (the order filters apply in) when left out. */
export const filterSortFields = ["created_at", "name", "matched_count", "last_matched_at"] as const
export type FilterSortField = (typeof filterSortFields)[number]

export const actionsProblem = (actions: LabelChange): Record<string, string> | undefined =>
  actions.add.includes(BLOCKED) || actions.remove.includes(BLOCKED)
    ? {
      [actions.add.includes(BLOCKED) ? "actions.add_labels" : "actions.remove_labels"]:
        "blocked is the block lists' verdict: add the sender to a block list, or remove it from one"
    }
    : undefined

/** What a filter reads of a received email. */
export interface MailFacts {
  /** The header From's address, if it has one. */
  readonly from: string | undefined
  /** The mailbox address it was delivered to, its To and its Cc. */
  readonly recipients: ReadonlyArray<string>
  readonly subject: string
  readonly body: string
  readonly hasAttachments: boolean
}

/** A stored filter, ready to match: its entries as sets, its phrases lower-cased. */
export interface CompiledFilter {
  readonly id: string
  readonly mailboxId: string | null
  readonly enabled: boolean
  readonly from: ReadonlySet<string> | undefined
  readonly to: ReadonlySet<string> | undefined
  readonly subject: ReadonlyArray<string> | undefined
  readonly body: ReadonlyArray<string> | undefined
  readonly hasAttachments: boolean | undefined
  readonly change: LabelChange
}

export const compileFilter = (stored: {
  readonly id: string
  readonly mailboxId: string | null
  readonly enabled: boolean
  readonly conditions: FilterConditions
  readonly change: LabelChange
}): CompiledFilter => ({
  id: stored.id,
  mailboxId: stored.mailboxId,
  enabled: stored.enabled,
  from: stored.conditions.from && new Set(stored.conditions.from),
  to: stored.conditions.to && new Set(stored.conditions.to),
  subject: stored.conditions.subject_contains?.map(comparable),
  body: stored.conditions.body_contains?.map(comparable),
  hasAttachments: stored.conditions.has_attachments,
  change: stored.change
})

const named = (entries: ReadonlySet<string>, address: string) => senderForms(address).some((form) => entries.has(form))

const hasConditions = (filter: CompiledFilter) =>
  filter.from !== undefined || filter.to !== undefined || filter.subject !== undefined || filter.body !== undefined ||
  filter.hasAttachments !== undefined

/**
 * Text as a contains condition compares it: lower case, each run of white space one space, so that a
 * phrase is found across the line break of a hard-wrapped body or a folded subject.
 */
const comparable = (text: string) => text.toLowerCase().replace(/\s+/g, " ")

/**
 * Whether every condition of `filter` holds for the email (the mailbox and `enabled` aside). A filter
 * without conditions (none is stored) holds for nothing.
 */
export const conditionsHold = (filter: CompiledFilter, facts: MailFacts, lowerBody: () => string): boolean =>
  hasConditions(filter) &&
  (filter.hasAttachments === undefined || filter.hasAttachments === facts.hasAttachments) &&
  (filter.from === undefined || (facts.from !== undefined && named(filter.from, facts.from))) &&
  (filter.to === undefined || facts.recipients.some((recipient) => named(filter.to!, recipient))) &&
  (filter.subject === undefined || filter.subject.some((phrase) => comparable(facts.subject).includes(phrase))) &&
  (filter.body === undefined || filter.body.some((phrase) => lowerBody().includes(phrase)))

/** What the filters make of an email's labels, and which of them applied. */
export interface Filtered {
  readonly labels: ReadonlyArray<string>
  readonly applied: ReadonlyArray<string>
}

/**
 * Apply `filters` (in their order) to a received email of `mailboxId` whose labels are `labels`:
 * each enabled filter of the account or that mailbox whose conditions hold changes the labels as it
 * says; labels past MAX_LABELS are not added.
 */
export const applyFilters = (
  filters: ReadonlyArray<CompiledFilter>,
  mailboxId: string,
  facts: MailFacts,
  labels: ReadonlyArray<string>
): Filtered => {
  let current = labels
  const applied: Array<string> = []
  let lowered: string | undefined
  const lowerBody = () => (lowered ??= comparable(facts.body))
  for (const filter of filters) {
    if (!filter.enabled || (filter.mailboxId !== null && filter.mailboxId !== mailboxId)) continue
    if (!conditionsHold(filter, facts, lowerBody)) continue
    applied.push(filter.id)
    const next = applyChange(current, filter.change)
    current = next.length <= MAX_LABELS ? next : next.slice(0, Math.max(MAX_LABELS, current.length))
  }
  return { labels: current, applied }
}
