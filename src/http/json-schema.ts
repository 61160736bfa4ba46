/**
 * JSON Schema as readers see it. Effect's generator titles a refinement with its constructor's
 * call (`"title": "maxLength(998)"`, `"between(1, 100)"`, `"int"`) and an unknown value `"unknown"`:
 * documentation tools and MCP clients show a title as the value's name, so those are left out; the
 * constraint itself (`maxLength`, `minimum`, …) and any description stay.
 */
const GENERATED_TITLE = /^(?:[a-z][A-Za-z]*\([^()]*\)|int|nonNegative|nonPositive|positive|negative|finite|unknown)$/

/** `value` (a JSON Schema, or a document holding some) without the generator's titles. */
export const withoutGeneratedTitles = <A>(value: A): A => {
  if (Array.isArray(value)) return value.map(withoutGeneratedTitles) as A
  if (typeof value !== "object" || value === null) return value
  return Object.fromEntries(
    Object.entries(value)
      .filter(([key, field]) => !(key === "title" && typeof field === "string" && GENERATED_TITLE.test(field)))
      .map(([key, field]) => [key, withoutGeneratedTitles(field)])
  ) as A
}
