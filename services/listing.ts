/**
 * SPEC's common list parameters: `limit` 1-100 (default 20), `offset` >= 0, `sort=<field>:<asc|desc>`,
 * and the `meta { total, limit, offset, hasMore }` of a page.
 */
import { Schema } from "effect"
import { rule } from "./schema-rules.ts"

export type Direction = "asc" | "desc"

export interface Page {
  readonly limit: number
  readonly offset: number
}

export interface Sort<F extends string> {
  readonly field: F
  readonly direction: Direction
}

/** A JSON number that is an integer from `min` to `max`, with one message whatever is wrong. */
export const IntBetween = (min: number, max: number) => {
  const message = () => `must be an integer from ${min} to ${max}`
  return Schema.Number.pipe(Schema.int({ message }), Schema.between(min, max, { message })).annotations({ message })
}

/**
 * The same for a query parameter: decimal digits only, so that `0x10`, `1e1` or ` 5` are refused
 * rather than read as some other number, and every fault says the one thing that is wanted. The
 * OpenAPI document calls it an integer, as a query string writes one, so that a typed client takes
 * `limit: 5` (a string there would be its type, not the API's).
 */
export const IntegerParam = (min: number, max: number) => {
  const message = () => `must be an integer from ${min} to ${max}`
  const description = `An integer from ${min} to ${max}, in decimal digits`
  const digits = Schema.String.pipe(Schema.pattern(/^\d{1,16}$/, { message })).annotations({ description })
  return Schema.transform(digits, IntBetween(min, max), { strict: true, decode: Number, encode: String }).annotations({
    message,
    jsonSchema: { type: "integer", minimum: min, maximum: max, description }
  })
}

export const Limit = IntegerParam(1, 100).annotations({ title: "limit" })
export const Offset = IntegerParam(0, Number.MAX_SAFE_INTEGER).annotations({ title: "offset" })

/**
 * `sort` for a list whose sortable fields are `fields`, named as its resource names them
 * (`created_at` for a webhook, `createdAt` for an API key). `aliases` are other spellings taken for
 * one of them (the camelCase these lists were first sorted by), decoded to the field's own name.
 */
export const SortParam = <const F extends string>(fields: ReadonlyArray<F>, aliases: Readonly<Record<string, F>> = {}) => {
  const message = `must be <field>:<asc|desc> with field one of ${fields.join(", ")}`
  const fieldOf = (name: string): F | undefined => fields.includes(name as F) ? name as F : Object.hasOwn(aliases, name) ? aliases[name] : undefined
  const checked = Schema.String.pipe(
    rule((value) => {
      const [field, direction, ...rest] = value.split(":")
      return rest.length === 0 && fieldOf(field!) !== undefined && (direction === undefined || direction === "asc" || direction === "desc")
        ? undefined
        : message
    })
  )
  return Schema.transform(checked, Schema.String, {
    strict: true,
    decode: (value) => {
      const [field, ...direction] = value.split(":")
      return [fieldOf(field!), ...direction].join(":")
    },
    encode: (value) => value
  }).annotations({ description: `One of ${fields.map((f) => `${f}:asc, ${f}:desc`).join(", ")}` })
}

/** A list route's query: `limit`, `offset` and `sort` over `fields`, every field's error reported at once. */
export const ListParams = <F extends string>(fields: ReadonlyArray<F>, aliases: Readonly<Record<string, F>> = {}) =>
  Schema.Struct({
    limit: Schema.optional(Limit),
    offset: Schema.optional(Offset),
    sort: Schema.optional(SortParam(fields, aliases))
  }).annotations({ parseOptions: { errors: "all" } })

export const parseSort = <F extends string>(value: string | undefined, fallback: Sort<F>): Sort<F> => {
  if (value === undefined) return fallback
  const [field, direction] = value.split(":")
  return { field: field as F, direction: direction === "asc" ? "asc" : "desc" }
}

/** A page's length when a list is asked for without `limit`: every list's, search's and the MCP tools'. */
export const DEFAULT_PAGE_LIMIT = 20

export const page = (params: { readonly limit?: number | undefined; readonly offset?: number | undefined }): Page => ({
  limit: params.limit ?? DEFAULT_PAGE_LIMIT,
  offset: params.offset ?? 0
})

export const ListMeta = Schema.Struct({
  total: Schema.Number,
  limit: Schema.Number,
  offset: Schema.Number,
  hasMore: Schema.Boolean
}).annotations({ identifier: "ListMeta" })
export type ListMeta = typeof ListMeta.Type

export const listMeta = (total: number, p: Page): ListMeta => ({
  total,
  limit: p.limit,
  offset: p.offset,
  hasMore: p.offset + p.limit < total
})
