/**
 * What a decode failure tells the client, field by field: the `details` of 400 VALIDATION_ERROR, the
 * same on every surface that decodes input (the API's routes, the dashboard's, MCP's tool arguments,
 * the event socket's messages), so that a person or a model can read it and correct the request.
 *
 * - One message per field, from its first issue that explains it. A value that fails a union fails
 *   each of its members: an optional field's "Expected undefined" (leave it out) explains nothing when
 *   the value's own problem is also there, and a member of the wrong type ("Expected string" for an
 *   address given as `{name, address}`) nothing when a member that fits found a problem inside it
 *   (`to.0.name`).
 * - Effect's own type messages are put in words and never repeat the value sent: "Expected
 *   ReadonlyArray<AddressInput>, actual …" is "must be a list", and a 200 KB header value is not
 *   echoed back twice. A literal that fits none of its choices names them all.
 * - A message is at most MAX_MESSAGE characters, and `details` names at most MAX_FIELDS fields (the
 *   first ones): a body of 20,000 unknown fields is told about the first 20 and how many more, not
 *   answered with megabytes.
 */
import type { ParseResult } from "effect"

type Issue = ParseResult.ArrayFormatterIssue

const MAX_MESSAGE = 300
const MAX_FIELDS = 20
const MAX_NAME = 100
const OPTIONAL_ABSENT = /^Expected undefined, actual /
const TYPE_MISMATCH = /^Expected (.+?), actual /s
const LITERAL = /^"([^"]*)"$/

/** What Effect's own message ("Expected …, actual …": a type, or a refinement without words of ours) expected. */
const expectedOf = (issue: Issue) => TYPE_MISMATCH.exec(issue.message)?.[1]

/** "Expected X, actual Y" as what the field must be, without Y. */
const inWords = (expected: string): string => {
  if (expected === "string") return "must be a string"
  if (expected === "number") return "must be a number"
  if (expected === "boolean") return "must be true or false"
  if (/^(ReadonlyArray|Array)<|^readonly \[|^\[/.test(expected)) return "must be a list"
  if (expected.startsWith("{")) return "must be an object"
  // Effect's phrases for its refinements ("a string at least 1 character(s) long", "an integer").
  if (/^an? [a-z]/.test(expected)) return `must be ${expected}`
  // A choice of words (`"subscribe" | "ping"`): name them.
  if (/^"[^"]*"(?: \| "[^"]*")+$/.test(expected)) return `must be one of ${expected.split(" | ").map((word) => word.slice(1, -1)).join(", ")}`
  return "has the wrong type"
}

/** A field's name as a message quotes it (`details` keeps it whole): a 100 KB name is not said twice. */
const clippedName = (field: string) => (field.length > MAX_NAME ? `${field.slice(0, MAX_NAME - 1)}…` : field)

const clipped = (message: string) => (message.length > MAX_MESSAGE ? `${message.slice(0, MAX_MESSAGE - 1)}…` : message)

/** What one field's issues (in order) say. */
const messageOf = (issues: ReadonlyArray<Issue>, describe: (issue: Issue) => string | undefined): string => {
  if (issues.some((issue) => issue._tag === "Missing")) return "is required"
  const literals = issues.map((issue) => LITERAL.exec(expectedOf(issue) ?? "")?.[1])
  if (literals.length > 1 && literals.every((literal) => literal !== undefined)) return `must be one of ${literals.join(", ")}`
  const first = issues[0]!
  // A field the object does not have (where a misspelling would change what is asked, it is refused).
  if (first._tag === "Unexpected") {
    const known = /expected: (.*)$/s.exec(first.message)?.[1]?.match(/"[^"]*"/g)?.map((name) => name.slice(1, -1))
    return clipped(known === undefined ? "is not a field here" : `is not a field here; the fields are ${known.join(", ")}`)
  }
  const described = describe(first)
  if (described !== undefined) return described
  const expected = expectedOf(first)
  return expected === undefined ? clipped(first.message) : inWords(expected)
}

export interface DetailsOptions {
  /** The name the whole input goes by (`body`, `arguments`, `message`), and what it must be. */
  readonly root: string
  readonly rootMessage: string
  /** A surface's own words for an issue (the mailbox routes: "must be a string"); undefined: ours. */
  readonly describe?: ((issue: Issue) => string | undefined) | undefined
}

/**
 * `details` for a decode failure's issues: each field (its path, dotted) to one message, the first
 * MAX_FIELDS fields; `more` counts the fields left out.
 */
export const fieldDetails = (issues: ReadonlyArray<Issue>, options: DetailsOptions): { readonly details: Record<string, string>; readonly more: number } => {
  const byField = new Map<string, Array<Issue>>()
  // The fields with a field inside them that has issues too (`to` when `to.0` has): linear, where
  // comparing every field with every other took seconds of CPU for a body of 20,000 fields.
  const enclosing = new Set<string>()
  for (const issue of issues) {
    const field = issue.path.length === 0 ? options.root : issue.path.map(String).join(".")
    for (let end = 1; end < issue.path.length; end++) enclosing.add(issue.path.slice(0, end).map(String).join("."))
    const list = byField.get(field) ?? []
    list.push(issue)
    byField.set(field, list)
  }
  // Built from entries, so that a field named `__proto__` (JSON may name one) is a field like any other,
  // not the object's prototype: assigned, it vanished and the answer said "Invalid request: " of nothing.
  const entries: Array<[string, string]> = []
  let more = 0
  for (const [field, fieldIssues] of byField) {
    if (entries.length === MAX_FIELDS) {
      more++
      continue
    }
    if (field === options.root && fieldIssues[0]!.path.length === 0) {
      entries.push([field, options.rootMessage])
      continue
    }
    const deeper = enclosing.has(field)
    const explained = fieldIssues.filter((issue) => !OPTIONAL_ABSENT.test(issue.message) && !(deeper && issue._tag === "Type"))
    if (explained.length === 0) {
      // The value's own problem is deeper (`to.0`), or this is a field that must be absent.
      if (!deeper) entries.push([field, "must be left out"])
      continue
    }
    entries.push([field, messageOf(explained, options.describe ?? (() => undefined))])
  }
  return { details: Object.fromEntries(entries), more }
}

/** Each field with its message, for an error's message; the fields left out counted. */
export const summaryOf = ({ details, more }: ReturnType<typeof fieldDetails>): string =>
  `${Object.entries(details).map(([field, message]) => `${clippedName(field)} ${message}`).join("; ")}${more > 0 ? `; and ${more} more ${more === 1 ? "field" : "fields"}` : ""}`
