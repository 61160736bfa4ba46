/**
 * Filters: the account's standing orders for received mail ("mail from billing@… gets the label
 * `billing`", "newsletters are marked read"), applied as each email is stored. What a filter is, and
 * what it does to an email:
 *
 * - A filter applies to the mail of every mailbox of the account, or of one mailbox (`mailbox_id`).
 * - Its conditions all hold, each by one of its terms:
 *   - `from`: an author the header From names (any address of any From field, as the block lists judge
 *     it) is named by an entry: an address, a domain (exactly) or `*.domain` (any subdomain of it), as on
 *     allow and block lists (sender-list-rules.ts);
 *   - `to`: an address the email was sent to (the mailbox address it was delivered to, its To and
 *     its Cc) is named by an entry, in the same forms: what sorts a catch-all's mail;
 *   - `subject_contains` / `body_contains`: the subject / the text body contains the phrase, however
 *     either is normalised and in any case (`comparable`), white space (a line break, several spaces)
 *     matching white space;
 *   - `has_attachments`: the email has (true) or has no (false) attachments.
 *   A filter names at least one condition, and a list condition at least one term.
 * - Its actions add and remove labels, as a label change by the API does (label-rules.ts), never the
 *   same label both ways (refused on `actions.remove_labels`, the filter's field): fact labels
 *   (`inbound`, `sent`) cannot be named; `unread` and the verdicts (`spam`, `unauthenticated`) can, so a
 *   filter can mark mail read, or spam, or trusted. `blocked` cannot: it is the block lists' verdict.
 * - Filters apply in the order they were created, each to the labels the ones before it left; a
 *   disabled filter is skipped. Labels an email could not carry (past MAX_LABELS) are not added.
 * - Received mail only: what the account sends is not filtered.
 *
 * Only `effect` and what sender-list-rules.ts imports here: the HTTP contract reads these schemas.
 */
import { Schema } from "effect"
import { AddedLabel, applyChange, type LabelChange, Label, MAX_LABELS } from "./label-rules.ts"
import { BLOCKED, ENTRY_FORMS, parseEntry, senderForms } from "./sender-list-rules.ts"
import { rule } from "../schema-rules.ts"
import { once } from "../once.ts"

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
  from: Schema.optional(terms(Entry)).annotations({ description: "An author the header From names (any address of any From field) is one of these senders" }),
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

const labels = (what: string, label: typeof Label = Label) =>
  Schema.Array(label).pipe(Schema.maxItems(MAX_LABELS, { message: () => `must list at most ${MAX_LABELS} labels` })).annotations({
    description: what
  })

export const FilterActions = Schema.Struct({
  add_labels: Schema.optional(labels("Labels the email gets: the account's own, or spam / unauthenticated", AddedLabel)),
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

/** What the filter list sorts by: created_at:asc (the order filters apply in) when left out. */
export const filterSortFields = ["created_at", "name", "matched_count", "last_matched_at"] as const
export type FilterSortField = (typeof filterSortFields)[number]

/**
 * Why `actions` name a label both to add and to remove, keyed by the filter's field: checked before
 * label-rules.ts `checkChange`, which refuses the same under `remove_labels`, the emails' field.
 */
export const overlapProblem = (actions: LabelChange): Record<string, string> | undefined => {
  const both = [...new Set(actions.add.filter((label) => actions.remove.includes(label)))]
  return both.length === 0 ? undefined : {
    "actions.remove_labels": `${both.join(", ")} ${both.length === 1 ? "is" : "are"} in actions.add_labels too: a filter adds a label or removes it, not both`
  }
}

/** Why `actions` cannot make a filter, past what label-rules.ts `checkChange` refuses. */
export const actionsProblem = (actions: LabelChange): Record<string, string> | undefined =>
  actions.add.includes(BLOCKED) || actions.remove.includes(BLOCKED)
    ? {
      [actions.add.includes(BLOCKED) ? "actions.add_labels" : "actions.remove_labels"]:
        "blocked is the block lists' verdict: add the sender to a block list, or remove it from one"
    }
    : undefined

/** What a filter reads of a received email. */
export interface MailFacts {
  /**
   * Every author the header From names, in every From field (parse.ts `fromAuthors`): as the block
   * lists judge it, a filter's `from` holds when an entry names any of them.
   */
  readonly from: ReadonlyArray<string>
  /** The mailbox address it was delivered to, its To and its Cc. */
  readonly recipients: ReadonlyArray<string>
  readonly subject: string
  readonly body: string
  readonly hasAttachments: boolean
}

/** A stored filter, ready to match: its entries as sets, its phrases as `comparable` makes them. */
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
 * The lower-cased characters whose case folding is not their lower case (Unicode's CaseFolding.txt,
 * status F and the simple foldings toLowerCase leaves): ß (and ẞ, lowered to it) is ss, final ς is σ,
 * ǰ, the Greek letters with ypogegrammeni (ᾳ is αι) and a few more expand. For each, upper case then
 * lower case is its folding. The dotless ı is left out on purpose: that round trip makes it i, which
 * folding does not. Compatibility forms that fold (ﬀ, ŉ, µ, ſ) are NFKC's already.
 */
const FULL_FOLDING = /[ßǰͅΐΰςᲀ-ᲈẖ-ẙὐὒὔὖᾀ-ᾇᾐ-ᾗᾠ-ᾧᾲ-ᾴᾶᾷῂ-ῄῆῇῒΐῖῗῢ-ῤῦῧῲ-ῴῶῷᾳῃῳ]/g
// eslint-disable-next-line no-control-regex
const ASCII = /^[\u0000-\u007f]*$/

/**
 * Text as a contains condition compares it, so that what a person reads as the same words matches:
 * NFKC-normalised (an é composed or as e and a combining accent, full-width ＩＮＶＯＩＣＥ, the ﬁ
 * ligature), case-folded in full (STRASSE finds straße), each run of white space one space (a phrase
 * is found across the line break of a hard-wrapped body or a folded subject). Linear in the text:
 * it runs over every received email's body that a body condition reads, and ASCII text (most mail)
 * skips all but the lower-casing.
 */
export const comparable = (text: string): string =>
  (ASCII.test(text)
    ? text.toLowerCase()
    : text.normalize("NFKC").toLowerCase().replace(FULL_FOLDING, (c) => c.toUpperCase().toLowerCase()))
    .replace(/\s+/g, " ")

/** An email's facts as the conditions compare them, each worked out once however many filters read it. */
interface Compared {
  readonly facts: MailFacts
  readonly fromForms: () => ReadonlyArray<string>
  readonly subject: () => string
  readonly body: () => string
}

const compared = (facts: MailFacts): Compared => ({
  facts,
  fromForms: once(() => [...new Set(facts.from.flatMap(senderForms))]),
  subject: once(() => comparable(facts.subject)),
  body: once(() => comparable(facts.body))
})

/**
 * Whether every condition of `filter` holds for the email (the mailbox and `enabled` aside). A filter
 * without conditions (none is stored) holds for nothing.
 */
const conditionsHold = (filter: CompiledFilter, email: Compared): boolean =>
  hasConditions(filter) &&
  (filter.hasAttachments === undefined || filter.hasAttachments === email.facts.hasAttachments) &&
  (filter.from === undefined || email.fromForms().some((form) => filter.from!.has(form))) &&
  (filter.to === undefined || email.facts.recipients.some((recipient) => named(filter.to!, recipient))) &&
  (filter.subject === undefined || filter.subject.some((phrase) => email.subject().includes(phrase))) &&
  (filter.body === undefined || filter.body.some((phrase) => email.body().includes(phrase)))

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
  const email = compared(facts)
  for (const filter of filters) {
    if (!filter.enabled || (filter.mailboxId !== null && filter.mailboxId !== mailboxId)) continue
    if (!conditionsHold(filter, email)) continue
    applied.push(filter.id)
    const next = applyChange(current, filter.change)
    current = next.length <= MAX_LABELS ? next : next.slice(0, Math.max(MAX_LABELS, current.length))
  }
  return { labels: current, applied }
}
