/**
 * The error side of SPEC's envelope: `{ success: false, error: { code, message, details? } }`.
 *
 * - `envelope(ErrorClass, status)`: the wire schema of a domain error, for the HttpApi contract
 *   (OpenAPI and the typed client).
 * - `toApiError(cause)`: whatever went wrong, as one of our errors: decode failures become 400
 *   VALIDATION_ERROR with `details` per field, an unreachable database or bus 503, anything
 *   unexpected 500 (logged here, never shown).
 * - `errorResponse(error)`: the response, with `Retry-After` where it applies.
 */
import { HttpApiDecodeError } from "@effect/platform/HttpApiError"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Cause, Effect, Schema } from "effect"
import { DependencyHealth } from "../../services/health/dependency-health.ts"
import {
  type ApiError,
  BadRequest,
  Conflict,
  Details,
  Forbidden,
  InternalError,
  isApiError,
  NotFound,
  PayloadTooLarge,
  RateLimited,
  ServiceUnavailable,
  Unauthorized,
  Unprocessable,
  UnsupportedMediaType,
  ValidationError
} from "../../services/errors.ts"

const ErrorBody = Schema.Struct({
  success: Schema.Literal(false),
  error: Schema.Struct({
    code: Schema.String,
    message: Schema.String,
    details: Schema.optional(Details)
  })
})

type ErrorClass<E extends ApiError> = Schema.Schema<E, any> & {
  new(props: { code: string; message: string; details?: Details; retryAfter: number }): E
}

const body = (error: ApiError): typeof ErrorBody.Type => ({
  success: false,
  error: {
    code: error.code,
    message: error.message,
    ...(error.details !== undefined ? { details: error.details } : {})
  }
})

/** The envelope as the wire form of `cls`, with its HTTP status, for the contract. */
export const envelope = <E extends ApiError>(cls: ErrorClass<E>, status: number, description: string) =>
  Schema.transform(ErrorBody, Schema.typeSchema(cls), {
    strict: true,
    decode: (wire) =>
      new cls({
        code: wire.error.code,
        message: wire.error.message,
        ...(wire.error.details !== undefined ? { details: wire.error.details } : {}),
        retryAfter: 0
      }),
    encode: body
  }).annotations({ ...HttpApiSchema.annotations({ status }), description })

export const BadRequestError = envelope(BadRequest, 400, "Malformed request (BAD_REQUEST)")
export const ValidationFailed = envelope(ValidationError, 400, "Invalid parameters (VALIDATION_ERROR); details maps field to message")
export const UnauthorizedError = envelope(Unauthorized, 401, "Missing or invalid credential (UNAUTHORIZED)")
export const ForbiddenError = envelope(Forbidden, 403, "No permission or plan quota reached")
export const NotFoundError = envelope(NotFound, 404, "Resource missing (NOT_FOUND)")
export const ConflictError = envelope(Conflict, 409, "Already exists or state conflict (CONFLICT)")
export const PayloadTooLargeError = envelope(PayloadTooLarge, 413, "JSON body over 1 MiB (PAYLOAD_TOO_LARGE)")
export const UnsupportedMediaTypeError = envelope(
  UnsupportedMediaType,
  415,
  "A request body that is not JSON (UNSUPPORTED_MEDIA_TYPE); details.accepted names the media type to send"
)
export const UnprocessableError = envelope(Unprocessable, 422, "Semantic validation failed")
export const RateLimitedError = envelope(RateLimited, 429, "Rate limit exceeded (RATE_LIMIT_EXCEEDED); see Retry-After")
export const InternalErrorError = envelope(InternalError, 500, "Unexpected failure (INTERNAL_ERROR)")
export const UnavailableError = envelope(ServiceUnavailable, 503, "Temporarily unavailable (SERVICE_UNAVAILABLE); see Retry-After")

/** A database or bus failure that means "unreachable right now", as opposed to a bug. */
export const isUnavailable = (error: unknown): boolean => {
  const seen = new Set<unknown>()
  let current: unknown = error
  while (typeof current === "object" && current !== null && !seen.has(current)) {
    seen.add(current)
    const { _tag, code, message } = current as { _tag?: string; code?: unknown; message?: unknown }
    if (_tag === "BusError") return true
    if (typeof code === "string" && (/^(08|57P0[123]|53300)/.test(code) || /^E(CONNREFUSED|CONNRESET|TIMEDOUT|PIPE|NOTFOUND|HOSTUNREACH|AI_AGAIN)$/.test(code))) {
      return true
    }
    if (typeof message === "string" && /Connection terminated|timeout exceeded when trying to connect|Failed to connect|connection error|Failed to acquire/i.test(message)) {
      return true
    }
    current = (current as { cause?: unknown }).cause
  }
  return false
}

const fieldName = (path: ReadonlyArray<PropertyKey>) => (path.length === 0 ? "body" : path.map(String).join("."))

/** HttpApi's decode failure as SPEC's VALIDATION_ERROR with `details` per field. */
const fromDecodeError = (error: HttpApiDecodeError): ApiError => {
  const details: Record<string, string> = {}
  for (const issue of error.issues) {
    const field = fieldName(issue.path)
    if (details[field] !== undefined) continue
    details[field] = issue._tag === "Missing"
      ? "is required"
      // The whole body: an absent body reads as null, and either way what is wanted is an object.
      : issue.path.length === 0 ? "must be a JSON object" : issue.message
  }
  const summary = Object.entries(details).map(([field, message]) => `${field} ${message}`).join("; ")
  return ValidationError.of({ message: `Invalid request: ${summary}`, details })
}

/** A body that could not be read: too large, or not JSON. */
const fromRequestError = (error: { readonly reason: string; readonly cause?: unknown }): ApiError | undefined => {
  if (error.reason !== "Decode") return undefined
  const cause = error.cause as { message?: string } | undefined
  if (cause?.message === "maxBytes exceeded") {
    return PayloadTooLarge.of({ message: "The request body is larger than 1 MiB", details: { max_bytes: 1024 * 1024 } })
  }
  return BadRequest.of({ message: "The request body is not valid JSON" })
}

/** Any failure or defect as an API error, logging what the client must not see. */
export const toApiError = (cause: Cause.Cause<unknown>): Effect.Effect<ApiError, never, DependencyHealth> => {
  const failure = Cause.squash(cause)
  if (isApiError(failure)) return Effect.succeed(failure)
  if (failure instanceof HttpApiDecodeError) return Effect.succeed(fromDecodeError(failure))
  const tag = (failure as { _tag?: string } | null)?._tag
  if (tag === "RouteNotFound") {
    return Effect.succeed(NotFound.of({ message: "No such route" }))
  }
  if (tag === "RequestError") {
    const mapped = fromRequestError(failure as { reason: string; cause?: unknown })
    if (mapped) return Effect.succeed(mapped)
  }
  if (Cause.isInterruptedOnly(cause)) {
    return Effect.succeed(ServiceUnavailable.of("The server is shutting down, retry shortly", 1))
  }
  if (isUnavailable(failure)) {
    // Counted towards the outage, which is logged once when it starts and once when it ends.
    return Effect.as(Effect.flatMap(DependencyHealth, (health) => health.report("Dependency unavailable", cause)), ServiceUnavailable.of())
  }
  return Effect.as(Effect.logError("Unexpected failure", cause), InternalError.of())
}

export const errorResponse = (error: ApiError) => {
  const headers: Record<string, string> = {}
  if ((error._tag === "RateLimited" || error._tag === "ServiceUnavailable") && error.retryAfter > 0) {
    headers["retry-after"] = String(Math.ceil(error.retryAfter))
  }
  return HttpServerResponse.unsafeJson(body(error), { status: error.status, headers })
}
