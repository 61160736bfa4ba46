/**
 * The schemas' checks are `rule`s (services/schema-rules.ts), not bare `Schema.filter`s: Effect's JSON
 * Schema generator drops a filter that says nothing about JSON Schema, and the description of the field
 * it checks with it, from the OpenAPI document and from MCP's tool schemas (find_free_time's weekdays
 * was a bare string to a model).
 */
import { JSONSchema, Schema } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { rule } from "../../services/schema-rules.ts"
import { repoRoot } from "../support/process.ts"

const sources = (dir: string): Array<string> =>
  fs.readdirSync(path.join(repoRoot, dir), { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith(".ts"))
    .map((entry) => path.relative(repoRoot, path.join(entry.parentPath, entry.name)))

describe("schema rules", () => {
  it("keep a checked field's description in JSON Schema, where a bare filter lost it", () => {
    const described = (check: Schema.Schema<string>) =>
      (JSONSchema.make(Schema.Struct({ days: check.annotations({ description: "Days, such as \"1,2\"" }) })) as { properties: Record<string, unknown> }).properties["days"]
    expect(described(Schema.String.pipe(rule((value) => /^\d(,\d)*$/.test(value))))).toEqual({ type: "string", description: "Days, such as \"1,2\"" })
    expect(described(Schema.String.pipe(Schema.filter((value) => /^\d(,\d)*$/.test(value))))).toEqual({ type: "string" })
  })

  it("are what every schema of the product checks with", () => {
    const bare = [...sources("services"), ...sources("src")]
      .filter((file) => file !== path.join("services", "schema-rules.ts") && fs.readFileSync(path.join(repoRoot, file), "utf8").includes("Schema.filter("))
    expect(bare).toEqual([])
  })
})
