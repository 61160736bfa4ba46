/**
 * SPEC's success envelope, `{ success: true, data }` (and `meta` where a route has one), as the
 * contract's schemas; the error envelope is in errors.ts.
 */
import { Schema } from "effect"

/** `{ success: true, data }`. */
export const Ok = <D extends Schema.Schema.Any>(data: D, identifier?: string) =>
  Schema.Struct({ success: Schema.Literal(true), data }).annotations(identifier ? { identifier } : {})

/** `{ success: true, data, meta }`. */
export const OkWithMeta = <D extends Schema.Schema.Any, M extends Schema.Schema.Any>(data: D, meta: M, identifier?: string) =>
  Schema.Struct({ success: Schema.Literal(true), data, meta }).annotations(identifier ? { identifier } : {})

/** `{ message }`: what an answer with nothing else to say carries. */
export const Message = Schema.Struct({ message: Schema.String })
