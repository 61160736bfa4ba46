/**
 * The error side of SPEC's envelope: `{ success: false, error: { code, message, details? } }`, for
 * every error of services/errors.ts. This is the one place that knows the wire shape.
 *
 * - `envelope(ErrorClass)`: the wire schema of a domain error, with its HTTP status and its `code`
 *   as a literal, for the HttpApi contract (OpenAPI and the typed client). Each feature's api.ts
 *   declares on each endpoint the errors it can answer: `.addError(envelope(MailboxQuotaReached))`.
 * - `toApiError(cause)`: whatever went wrong, as one of our errors: decode failures become 400
 *   VALIDATION_ERROR with `details` per field, an unreachable database or bus 503, anything
 *   unexpected 500 (logged here, never shown).
 * - `errorResponse(error)`: the response, with `Retry-After` where it applies (and a 429's
 *   `X-RateLimit-*`).
 */
import { HttpApiDecodeError } from "@effect/platform/HttpApiError"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Cause, Effect, Schema } from "effect"
import {
  type ApiError,
  BadRequest,
  Details,
  InternalError,
  isApiError,
  NotFound,
  ServiceUnavailable,
  ValidationError,
  wireOf
} from "../../services/errors.ts"
import { causeChain, DependencyHealth, isConnectionFailure, isTransientConflict } from "../../services/health/dependency-health.ts"
import { isBodyTooLarge, MAX_JSON_BYTES, tooLarge } from "./body-limits.ts"
import { fieldDetails, summaryOf } from "./issues.ts"

/** The body of an error answered as `code`, its `details` as its class declares them (the keys it names typed, any other allowed). */
const errorBody = <Code extends string, D, I>(code: Code, details: Schema.Schema<D, I>) =>
  Schema.Struct({
    success: Schema.Literal(false),
    error: Schema.Struct({
      code: Schema.Literal(code),
      message: Schema.String,
      details: Schema.optional(details)
    })
  })

type ErrorClass<E extends ApiError> = Schema.Schema<E, any> & {
  new(props: { message: string; details?: E["details"]; retryAfter: number }): E
  /** The class's own fields (`failure` declares `details` on each): the envelope's details are the class's. */
  readonly fields: { readonly details: { readonly from: Schema.Schema<NonNullable<E["details"]>, any> } }
}

/** `details` is left out when there are none, as SPEC's envelope says. */
const body = <E extends ApiError>(error: E) => ({
  success: false as const,
  error: {
    code: error.code,
    message: error.message,
    ...(error.details !== undefined && Object.keys(error.details).length > 0 ? { details: error.details } : {})
  }
})

const envelopes = new WeakMap<object, Schema.Schema.Any>()

/** The seconds a 429 or 503 asks a client to wait, as its body tells them (0: none said). */
const retryAfterOf = (details: Details | undefined): number => {
  const seconds = details?.retry_after
  return typeof seconds === "number" && Number.isFinite(seconds) && seconds > 0 ? seconds : 0
}

/** What a client decodes from an envelope of `cls`: a refusal's `retryAfter` is its body's `details.retry_after`. */
const errorOf = <E extends ApiError>(cls: ErrorClass<E>) =>
(answer: { readonly error: { readonly message: string; readonly details?: Details | undefined } }): E =>
  new cls({
    message: answer.error.message,
    ...(answer.error.details !== undefined ? { details: answer.error.details } : {}),
    retryAfter: retryAfterOf(answer.error.details)
  })

const makeEnvelope = <E extends ApiError>(cls: ErrorClass<E>) => {
  const wire = wireOf(cls)
  return Schema.transform(errorBody(wire.code, cls.fields.details.from), Schema.typeSchema(cls), {
    strict: true,
    decode: errorOf(cls),
    encode: body
  }).annotations({ ...HttpApiSchema.annotations({ status: wire.status }), description: wire.description })
}

/**
 * The envelope as the wire form of `cls`, with its HTTP status, for the contract. One schema per
 * class, so that an error declared by many endpoints is one component and one union member.
 */
export const envelope = <E extends ApiError>(cls: ErrorClass<E>): ReturnType<typeof makeEnvelope<E>> => {
  const known = envelopes.get(cls)
  // The map holds, for each class, what makeEnvelope made of that very class.
  if (known !== undefined) return known as ReturnType<typeof makeEnvelope<E>>
  const made = makeEnvelope(cls)
  envelopes.set(cls, made)
  return made
}

/** An error's `details` naming `known` (typed) and allowing any other key, as services/errors.ts declares them. */
export const detailsNaming = <Known extends Schema.Struct.Fields>(known: Known) => Schema.Struct(known, Details)

/**
 * The envelope of `cls` as some operations answer it, the `details` keys they put typed (`detailsNaming`
 * them: any other still allowed): for a general code whose details depend on the operation (a draft's
 * CONFLICT names the draft, its status and updated_at). Those operations declare it in place of
 * `envelope(cls)`, under a component of its own (`identifier`); every other keeps the class's. The body
 * is `body(error)` either way, so the keys' types must be what every construction on those operations
 * puts (the server, encoding with every declared envelope, would otherwise answer through the class's).
 * Made once per identifier (at module level), as one component is one schema.
 */
export const envelopeFor = <E extends ApiError, D extends Details, I>(
  cls: ErrorClass<E>,
  variant: { readonly identifier: string; readonly description: string; readonly details: Schema.Schema<D, I> }
) => {
  const wire = wireOf(cls)
  const answer = errorBody(wire.code, variant.details)
  return Schema.transform(answer, Schema.typeSchema(cls), {
    strict: true,
    decode: errorOf(cls),
    // The class types its details loosely; the keys named are checked as the body is encoded.
    encode: (error) => body(error) as typeof answer.Type
  }).annotations({
    ...HttpApiSchema.annotations({ status: wire.status }),
    identifier: variant.identifier,
    description: `${wire.code}: ${variant.description}`
  })
}

/**
 * A failure that means "unreachable right now", as opposed to a bug: a bus error, or a connection
 * failure anywhere under it (the database's, or another system's network error), so a 503.
 */
export const isUnavailable = (error: unknown): boolean =>
  causeChain(error).some((e) => (e as { _tag?: unknown })._tag === "BusError" || isConnectionFailure(e))

/** The 503 a transient conflict answers: retry at once. */
export const conflictedRetry = () => ServiceUnavailable.of("The request collided with concurrent ones and was not carried out; retry", 1)

/** HttpApi's decode failure as SPEC's VALIDATION_ERROR with `details` per field. */
const fromDecodeError = (error: HttpApiDecodeError): ApiError => {
  // The whole body: an absent body reads as null, and either way what is wanted is an object.
  const fields = fieldDetails(error.issues, { root: "body", rootMessage: "must be a JSON object" })
  return new ValidationError({ message: `Invalid request: ${summaryOf(fields)}`, details: fields.details })
}

/** A body that could not be read: too large, or not JSON. */
const fromRequestError = (error: { readonly reason: string; readonly cause?: unknown }): ApiError | undefined => {
  if (error.reason !== "Decode") return undefined
  // The middleware answers a body past its route's limit with that limit; past it, the JSON one.
  if (isBodyTooLarge(error)) return tooLarge(MAX_JSON_BYTES)
  return new BadRequest({ message: "The request body is not valid JSON" })
}

/** Any failure or defect as an API error, logging what the client must not see. */
export const toApiError = (cause: Cause.Cause<unknown>): Effect.Effect<ApiError, never, DependencyHealth> => {
  const failure = Cause.squash(cause)
  if (isApiError(failure)) return Effect.succeed(failure)
  if (failure instanceof HttpApiDecodeError) return Effect.succeed(fromDecodeError(failure))
  const tag = (failure as { _tag?: string } | null)?._tag
  if (tag === "RouteNotFound") {
    return Effect.succeed(new NotFound({ message: "No such route" }))
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
  if (isTransientConflict(failure)) return Effect.as(Effect.logWarning("A request lost a deadlock; answered 503", cause), conflictedRetry())
  return Effect.as(Effect.logError("Unexpected failure", cause), InternalError.of())
}

export const errorResponse = (error: ApiError) => {
  const headers: Record<string, string> = {}
  if ("retryAfter" in error && error.retryAfter > 0) {
    headers["retry-after"] = String(Math.ceil(error.retryAfter))
  }
  if (error._tag === "RateLimited" && typeof error.details?.limit === "number") {
    // A 429's X-RateLimit-* describe the limit that refused it (a search limit, the failed-login
    // limit), not the request limit the request also counted against (middleware.ts leaves them).
    headers["x-ratelimit-limit"] = String(error.details.limit)
    headers["x-ratelimit-remaining"] = "0"
    // The window's own end, as the same window's earlier answers said it; else from Retry-After.
    headers["x-ratelimit-reset"] = String(error.resetAt ?? Math.ceil(Date.now() / 1000 + error.retryAfter))
  }
  return HttpServerResponse.unsafeJson(body(error), { status: error.status, headers })
}
