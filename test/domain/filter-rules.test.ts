/**
 * What a filter's conditions match (services/mail/filter-rules.ts), pure: every author of the From,
 * and phrases compared as a person reads them (any normalisation, any case, full case folding).
 * Keeping filters and running them over stored mail are test/domain/filters.test.ts's subject.
 */
import { describe, expect, it } from "vitest"
import { applyFilters, comparable, compileFilter, type FilterConditions, type MailFacts, overlapProblem } from "../../services/mail/filter-rules.ts"
import { fromAuthors } from "../../services/mail/parse.ts"

const facts = (over: Partial<MailFacts> = {}): MailFacts => ({
  from: ["someone@else.test"],
  recipients: ["box@agents.localhost"],
  subject: "Hello",
  body: "Hi there",
  hasAttachments: false,
  ...over
})

/** Whether a filter of `conditions` applies to an email of `over`. */
const holds = (conditions: FilterConditions, over: Partial<MailFacts>) =>
  applyFilters(
    [compileFilter({ id: "flt_1", mailboxId: null, enabled: true, conditions, change: { add: ["x"], remove: [] } })],
    "mbx_a",
    facts(over),
    ["inbound"]
  ).applied.length === 1

describe("a filter's from", () => {
  it("holds when an entry names any author the From names, as the block lists judge them", () => {
    const two = fromAuthors(undefined, "Alice <alice@x.example>, Bob <Bob@Sub.example>")
    expect(two).toEqual(["alice@x.example", "Bob@Sub.example"])
    expect(holds({ from: ["bob@sub.example"] }, { from: two })).toBe(true)
    expect(holds({ from: ["*.example"] }, { from: two })).toBe(true)
    expect(holds({ from: ["sub.example"] }, { from: two })).toBe(true)
    expect(holds({ from: ["carol@sub.example"] }, { from: two })).toBe(false)
    // Two From fields: the one parsing took as the sender, and each address of every field.
    const fields = fromAuthors("first@one.example", ["First <first@one.example>", "Second <second@two.example>"])
    expect(fields).toEqual(["first@one.example", "second@two.example"])
    expect(holds({ from: ["two.example"] }, { from: fields })).toBe(true)
    expect(holds({ from: ["anyone.example"] }, { from: fromAuthors(undefined, null) })).toBe(false)
  })
})

describe("a filter's phrases", () => {
  it("are found however the text is normalised: composed or decomposed accents, compatibility forms", () => {
    // café written with é (U+00E9) and with e and a combining acute (U+0301), either way round.
    expect(holds({ subject_contains: ["café"] }, { subject: "Le cafe\u0301 du coin" })).toBe(true)
    expect(holds({ body_contains: ["cafe\u0301"] }, { body: "Un café, s'il vous plaît" })).toBe(true)
    expect(holds({ subject_contains: ["invoice"] }, { subject: "ＩＮＶＯＩＣＥ 42" })).toBe(true)
    expect(holds({ body_contains: ["office"] }, { body: "The o\ufb03ce is closed" })).toBe(true)
    // Accents are not case: cafe is not café.
    expect(holds({ subject_contains: ["cafe"] }, { subject: "Le café" })).toBe(false)
  })

  it("are found in any case, folded in full: ß is ss, final ς is σ", () => {
    expect(holds({ subject_contains: ["ÜBER straße"] }, { subject: "Alles über STRASSE" })).toBe(true)
    expect(holds({ body_contains: ["STRASSE"] }, { body: "Die STRAẞE ist gesperrt" })).toBe(true)
    expect(holds({ body_contains: ["ΟΔΟΣ"] }, { body: "η οδος είναι" })).toBe(true)
    expect(holds({ subject_contains: ["strasse"] }, { subject: "Hauptstraße 1" })).toBe(true)
    expect(comparable("ÜBER  Straße\r\n")).toBe(comparable("über strasse "))
    // The dotless ı is its own letter: not the i an upper-casing round trip would make it.
    expect(holds({ subject_contains: ["kapi"] }, { subject: "KAPı" })).toBe(false)
  })
})

describe("a filter's actions", () => {
  it("naming a label to add and to remove is refused on the filter's field", () => {
    expect(overlapProblem({ add: ["x", "y"], remove: ["y"] })).toEqual({
      "actions.remove_labels": "y is in actions.add_labels too: a filter adds a label or removes it, not both"
    })
    expect(overlapProblem({ add: ["x"], remove: ["y"] })).toBeUndefined()
  })
})
