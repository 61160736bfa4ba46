/**
 * A request body every field of which is optional may be left out, as an empty object may: a route
 * whose body only tunes what it does (`POST /filters/{id}/apply`, `dry_run`) is called without one.
 *
 * The platform reads an absent or empty JSON body as `null`; `OptionalBody` decodes that as `empty`
 * (an explicit `null` too, which surface.ts `decodeBody` also counts as absent), and any other body as
 * `fields` does, each problem at its field, so a body of the wrong shape is refused as before. The
 * OpenAPI document shows `fields`, the body marked not required (openapi.ts), so the typed client
 * leaves it out too.
 */
import { Option, ParseResult, Schema, SchemaAST } from "effect"

/** Marks a payload schema made by `OptionalBody` (read by openapi.ts). */
export const OptionalBodyId: unique symbol = Symbol.for("mailroom/http/OptionalBody")

export const OptionalBody = <A, I>(fields: Schema.Schema<A, I>, empty: NoInfer<A>) =>
  Schema.transformOrFail(Schema.Unknown, Schema.typeSchema(fields), {
    strict: true,
    decode: (body, options) => (body === null ? ParseResult.succeed(empty) : ParseResult.decodeUnknown(fields)(body, options)),
    encode: (value, options) => ParseResult.encode(fields)(value, options)
  }).annotations({
    // Documented as the fields are, under their own identifier.
    [SchemaAST.SurrogateAnnotationId]: fields.ast,
    // Their parse options (a field they do not have refused) are what the payload declares.
    ...Option.match(SchemaAST.getParseOptionsAnnotation(fields.ast), { onNone: () => ({}), onSome: (parseOptions) => ({ parseOptions }) }),
    [OptionalBodyId]: true
  })

/** Whether the payload schema `ast` is an `OptionalBody`. */
export const isOptionalBody = (ast: SchemaAST.AST): boolean => ast.annotations[OptionalBodyId] === true
