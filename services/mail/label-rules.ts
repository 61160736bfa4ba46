/**
 * Labels and read state (issue 17; DESIGN.md §4b "labels").
 *
 * An email carries system labels that Mailroom sets and the account's own labels:
 * - fact labels say what the email is (`inbound`, and `sent` for outbound mail): set at store time,
 *   never added or removed through the API;
 * - `unread` is set on arrival and is the agent's to clear (reading an email does not clear it);
 * - verdict labels (`spam`, `unauthenticated`, `blocked`) are set by the inbound checks and, like
 *   custom labels, may be added or removed by the account (a person overrules a verdict), except that
 *   `blocked` is only ever removed (labels.ts): blocking is the block lists' (a filter may do neither);
 * - custom labels: 1-64 characters, no control characters, no commas (the list filters take
 *   comma-separated names), no surrounding spaces, not only invisible ones (a zero-width space);
 *   case-sensitive, as the agent wrote them. One added has no empty level between slashes (`a//b`,
 *   `/a`, `a/`): `/` makes levels of folders over IMAP.
 *
 * A change is a set of labels to add and a set to remove; adding and removing the same label in one
 * change is refused, so a change always has one meaning. Every applied change that alters an email's
 * labels is announced as `email.labels_changed`, one event per email and change (labels.ts).
 *
 * Only `effect` here: the HTTP contract (and so the published client) reads these schemas.
 */
import { Effect, Schema } from "effect"
import { FactLabel, ValidationError } from "../errors.ts"
import { rule } from "../schema-rules.ts"

/** Labels that state facts about an email: set by Mailroom when it stores the email, never changed. */
export const factLabels = ["inbound", "sent"] as const
/** Set on every inbound email when it is stored; the agent removes it when the mail is handled. */
export const UNREAD = "unread"
/** What an inbound email is labelled when it is stored. */
export const inboundLabels: ReadonlyArray<string> = ["inbound", UNREAD]

export const MAX_LABEL_LENGTH = 64
/** At most this many labels in one change (add plus remove), and on one email. */
export const MAX_LABELS = 50
/** At most this many emails in one batch update. */
export const MAX_BATCH = 100

const isFact = (label: string) => (factLabels as ReadonlyArray<string>).includes(label)

/** Why `label` is not a label name, or undefined when it is one. */
export const labelProblem = (label: string): string | undefined => {
  if (label.length === 0) return "must not be empty"
  if ([...label].length > MAX_LABEL_LENGTH) return `must be at most ${MAX_LABEL_LENGTH} characters`
  if (label.trim() !== label) return "must not start or end with a space"
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f-\u009f]/.test(label)) return "must not contain control characters"
  // A direction override would show the label (and what follows it) reversed, as a display name refuses.
  if (/[\u2028\u2029\u202a-\u202e\u2066-\u2069]/.test(label)) return "must not contain line or paragraph separators or direction overrides"
  if (label.includes(",")) return "must not contain a comma"
  // Made only of invisible characters (a zero-width space), a label shows as none.
  if (!/[^\p{Cf}\p{Z}\p{M}]/u.test(label)) return "must contain a visible character"
  return undefined
}

/** A label name on the wire, with the rule's message when it is not one. */
export const Label = Schema.String.pipe(rule((label) => labelProblem(label) ?? true))
  .annotations({ description: `1-${MAX_LABEL_LENGTH} characters, no commas or control characters` })

export const LabelList = Schema.Array(Label).pipe(
  Schema.maxItems(MAX_LABELS, { message: () => `must list at most ${MAX_LABELS} labels` })
)

/**
 * Why `label` may not be added to mail, or undefined when it may: a label name (labelProblem) with no
 * empty level. `/` separates a label's levels (a label `a/b` is the folder b inside a over IMAP), and
 * an empty one (`/lead`, `trail/`, `a//b`) would be a folder no mail program can open. Only what is
 * added is held to it: a label stored before may still be removed, listed and filtered on.
 */
export const addedLabelProblem = (label: string): string | undefined =>
  labelProblem(label) ??
    (label.split("/").some((level) => level === "")
      ? "must not start or end with / or hold //: / separates a label's levels (folders over IMAP), and none may be empty"
      : undefined)

/** A label to add, on the wire, with the rule's message when it may not be added. */
export const AddedLabel = Schema.String.pipe(rule((label) => addedLabelProblem(label) ?? true))
  .annotations({ description: `1-${MAX_LABEL_LENGTH} characters, no commas or control characters, no empty level between slashes (a//b)` })

export const AddedLabelList = Schema.Array(AddedLabel).pipe(
  Schema.maxItems(MAX_LABELS, { message: () => `must list at most ${MAX_LABELS} labels` })
)

export interface LabelChange {
  readonly add: ReadonlyArray<string>
  readonly remove: ReadonlyArray<string>
}

/**
 * The change as it may be applied: duplicates dropped; refused when it is empty, adds a label with an
 * empty level (`a//b`), names a label twice (added and removed) or touches a fact label.
 */
export const checkChange = (change: LabelChange): Effect.Effect<LabelChange, ValidationError | FactLabel> => {
  const add = [...new Set(change.add)]
  const remove = [...new Set(change.remove)]
  if (add.length === 0 && remove.length === 0) {
    return Effect.fail(new ValidationError({
      message: "add_labels or remove_labels must name at least one label",
      details: { add_labels: "name at least one label here or in remove_labels" }
    }))
  }
  // A label with an empty level is not added however the change came (the wire's schemas refuse it too, AddedLabel).
  const emptyLevel = add.find((label) => labelProblem(label) === undefined && addedLabelProblem(label) !== undefined)
  if (emptyLevel !== undefined) return Effect.fail(ValidationError.field("add_labels", `${JSON.stringify(emptyLevel)} ${addedLabelProblem(emptyLevel)!}`))
  const both = add.filter((label) => remove.includes(label))
  if (both.length > 0) {
    // Keyed by the request's field, as every VALIDATION_ERROR is (a filter's `actions.remove_labels`).
    return Effect.fail(new ValidationError({
      message: `A label cannot be added and removed at once: ${both.join(", ")}`,
      details: { remove_labels: `${both.join(", ")} ${both.length === 1 ? "is" : "are"} in add_labels too: a label is added or removed, not both` }
    }))
  }
  const facts = [...add, ...remove].filter(isFact)
  if (facts.length > 0) {
    return Effect.fail(new FactLabel({
      message: `${facts.join(", ")} ${facts.length === 1 ? "is a label" : "are labels"} Mailroom sets from facts; it cannot be added or removed`,
      details: { labels: facts }
    }))
  }
  return Effect.succeed({ add, remove })
}

/** The labels after a change, in a stable order: existing ones as they were, new ones after. */
export const applyChange = (labels: ReadonlyArray<string>, change: LabelChange): ReadonlyArray<string> => {
  const kept = labels.filter((label) => !change.remove.includes(label))
  return [...kept, ...change.add.filter((label) => !kept.includes(label))]
}

