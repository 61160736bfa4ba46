/**
 * Lengths as SPEC states them ("1-100 characters", "at least 8 characters") and as people count them:
 * in characters (Unicode code points), as PostgreSQL's `char_length` counts the text we store. A
 * JavaScript string's `length` counts UTF-16 units instead, so `Schema.minLength` / `maxLength` would
 * take "😀😀😀😀" (4 characters) as a password of 8 and refuse a key name of 51 emoji as over 100.
 * JSON Schema counts a string's length in code points too, so the OpenAPI document keeps its bounds.
 */
import { Schema } from "effect"
import { rule } from "./schema-rules.ts"

/** Characters in `text`: its code points. */
export const characterCount = (text: string): number => {
  let count = 0
  for (const _ of text) count++
  return count
}

/** At least `min` characters, else `message`. */
export const minCharacters = (min: number, message: string) => <A extends string, I, R>(self: Schema.Schema<A, I, R>) =>
  self.pipe(rule((text) => characterCount(text) >= min || message, { jsonSchema: { minLength: min } }))

/** At most `max` characters, else `message`. */
export const maxCharacters = (max: number, message: string) => <A extends string, I, R>(self: Schema.Schema<A, I, R>) =>
  self.pipe(rule((text) => characterCount(text) <= max || message, { jsonSchema: { maxLength: max } }))

/** One line of text: no line breaks or other control characters (C0, DEL, C1, the Unicode line and paragraph separators). */
export const oneLine = <A extends string, I, R>(self: Schema.Schema<A, I, R>) =>
  self.pipe(rule((text) => !/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/.test(text), {
    message: () => "must be one line, without control characters"
  }))

/**
 * Text with the white space around it trimmed, whose JSON Schema says what may be sent (`sent`: at most
 * so many characters, at least one that is no space, …). `Schema.Trim`'s own said "a string that will be
 * trimmed" and nothing of the rules piped after it, since the generator reads a transformation's input
 * side alone: the OpenAPI document let a client send a key name of "" or 500 characters. A description is
 * given here too: one annotated on the rules after it does not reach JSON Schema either.
 */
export const trimmed = (sent: { readonly minLength?: number; readonly maxLength?: number; readonly description?: string }) =>
  Schema.String.annotations({
    jsonSchema: {
      ...(sent.minLength !== undefined ? { minLength: sent.minLength, pattern: "\\S" } : {}),
      ...(sent.maxLength !== undefined ? { maxLength: sent.maxLength } : {}),
      ...(sent.description !== undefined ? { description: sent.description } : {})
    }
  }).pipe(Schema.compose(Schema.Trim))
