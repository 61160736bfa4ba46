/**
 * The two surfaces, the API under /v1/api (API keys) and the dashboard under /api (sessions), share
 * handlers, and tell a field-level problem alike (`details` maps each field to its message) except in
 * the bodies SPEC gives the dashboard a JSON schema for, mailboxes' and domains' (SPEC "Errors"):
 *
 * - /v1/api: `details` maps each field to its message (or, for mailbox bodies of the wrong shape,
 *   400 BAD_REQUEST, SPEC's "malformed input");
 * - /api:    400 VALIDATION_ERROR with `details.field_errors`.
 *
 * Those endpoints accept any JSON and decode it here, because the global decode-error mapping
 * (errors.ts) has one shape for every route.
 */
import { Effect, ParseResult, Schema } from "effect"
import { BadRequest, type FieldDetails, type FieldMessages, ValidationError } from "../../services/errors.ts"
import { fieldDetails, summaryOf } from "./issues.ts"

export type Surface = "api" | "dashboard"

/** What is wrong with each field (issues.ts); `describe` words a field of the wrong type. */
export const fieldErrors = (
  error: ParseResult.ParseError,
  describe?: (issue: ParseResult.ArrayFormatterIssue) => string
) => fieldDetails(ParseResult.ArrayFormatter.formatErrorSync(error), { root: "body", rootMessage: "must be a JSON object", describe })

/** Details already told the dashboard's way: the field messages under `field_errors` (not a field named so). */
const told = (details: FieldDetails | undefined): details is { readonly field_errors: typeof FieldMessages.Type } =>
  typeof details?.["field_errors"] === "object"

/** A field-level VALIDATION_ERROR as `surface` tells it (one already told with `field_errors` as it is). */
export const forSurface = (surface: Surface, error: ValidationError): ValidationError =>
  surface === "api" || told(error.details)
    ? error
    // Not told yet: every value is a field's message (FieldDetails refuses a map under any other key).
    : new ValidationError({ message: error.message, details: { field_errors: (error.details ?? {}) as typeof FieldMessages.Type } })

/**
 * Decode a body. An absent body is BAD_REQUEST on both surfaces (the platform reads an empty body as
 * JSON `null`, so a literal `null` counts as absent too). A wrong shape is VALIDATION_ERROR as the
 * surface tells it, or, with `malformed: "bad-request"`, BAD_REQUEST on /v1/api.
 */
export const decodeBody = <A, I>(
  schema: Schema.Schema<A, I>,
  surface: Surface,
  options: {
    readonly malformed?: "bad-request" | "validation"
    readonly describe?: (issue: ParseResult.ArrayFormatterIssue) => string
  } = {}
) =>
(body: unknown): Effect.Effect<A, BadRequest | ValidationError> => {
  if (body === undefined || body === null) return Effect.fail(new BadRequest({ message: "A JSON body is required" }))
  return Effect.mapError(Schema.decodeUnknown(schema)(body), (error): BadRequest | ValidationError => {
    const fields = fieldErrors(error, options.describe)
    if (surface === "api" && options.malformed === "bad-request") {
      return new BadRequest({ message: `Malformed request body: ${summaryOf(fields)}`, details: { field_errors: fields.details } })
    }
    return forSurface(surface, new ValidationError({ message: `Invalid request body: ${summaryOf(fields)}`, details: fields.details }))
  })
}
