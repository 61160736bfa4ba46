/**
 * `rule`: `Schema.filter` whose annotations reach JSON Schema. Effect's generator leaves a filter out
 * of JSON Schema unless the filter says what it adds there, and its annotations with it: a field's
 * description set on (or after) a filter was missing from the OpenAPI document and from the input
 * schemas MCP clients read (`weekdays` was a bare string). A rule adds nothing by default; one that
 * adds a keyword (`maxLength`, …) says so in its own `jsonSchema`.
 */
import { Schema } from "effect"

export const rule: typeof Schema.filter = ((predicate: Parameters<typeof Schema.filter>[0], annotations?: Schema.Annotations.Filter<unknown>) =>
  Schema.filter(predicate, { jsonSchema: {}, ...annotations })) as typeof Schema.filter
