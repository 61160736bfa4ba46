/**
 * The failures a user can meet. Each carries what the SPEC error envelope needs: the HTTP status,
 * a stable `code`, a human `message` and optional `details`. Domain services fail with these;
 * the HTTP edge turns them into `{ success: false, error: { code, message, details } }`.
 */
import { Schema } from "effect"

export const Details = Schema.Record({ key: Schema.String, value: Schema.Unknown })
export type Details = typeof Details.Type

const fields = {
  code: Schema.String,
  message: Schema.String,
  details: Schema.optional(Details)
}

type Init = { readonly message: string; readonly details?: Details | undefined; readonly code?: string }

const init = (defaultCode: string, input: Init) => ({
  code: input.code ?? defaultCode,
  message: input.message,
  ...(input.details !== undefined && Object.keys(input.details).length > 0 ? { details: input.details } : {})
})

/** 400: malformed input (invalid JSON, missing body, bad shape). */
export class BadRequest extends Schema.TaggedError<BadRequest>()("BadRequest", fields) {
  readonly status = 400
  static of(input: Init) {
    return new BadRequest(init("BAD_REQUEST", input))
  }
}

/** 400: parameters failed validation; `details` maps a field name to a message. */
export class ValidationError extends Schema.TaggedError<ValidationError>()("ValidationError", fields) {
  readonly status = 400
  static of(input: Init) {
    return new ValidationError(init("VALIDATION_ERROR", input))
  }
  static field(field: string, message: string) {
    return ValidationError.of({ message: `${field}: ${message}`, details: { [field]: message } })
  }
}

/** 401: missing or invalid credential, bad login, bad refresh token. */
export class Unauthorized extends Schema.TaggedError<Unauthorized>()("Unauthorized", fields) {
  readonly status = 401
  static of(message: string) {
    return new Unauthorized(init("UNAUTHORIZED", { message }))
  }
}

/** 403: no permission, or a plan quota reached. */
export class Forbidden extends Schema.TaggedError<Forbidden>()("Forbidden", fields) {
  readonly status = 403
  static of(input: Init) {
    return new Forbidden(init("FORBIDDEN", input))
  }
}

/** 404: missing, or owned by someone else (the two are never told apart). */
export class NotFound extends Schema.TaggedError<NotFound>()("NotFound", fields) {
  readonly status = 404
  static of(input: Init) {
    return new NotFound(init("NOT_FOUND", input))
  }
}

/** 409: already exists, or a state conflict. */
export class Conflict extends Schema.TaggedError<Conflict>()("Conflict", fields) {
  readonly status = 409
  static of(input: Init) {
    return new Conflict(init("CONFLICT", input))
  }
}

/** 413: the request body is larger than we accept. */
export class PayloadTooLarge extends Schema.TaggedError<PayloadTooLarge>()("PayloadTooLarge", fields) {
  readonly status = 413
  static of(input: Init) {
    return new PayloadTooLarge(init("PAYLOAD_TOO_LARGE", input))
  }
}

/** 415: a request body in a media type the route does not read (every API body is JSON). */
export class UnsupportedMediaType extends Schema.TaggedError<UnsupportedMediaType>()("UnsupportedMediaType", fields) {
  readonly status = 415
  static of(input: Init) {
    return new UnsupportedMediaType(init("UNSUPPORTED_MEDIA_TYPE", input))
  }
}

/** 422: well-formed but semantically invalid. */
export class Unprocessable extends Schema.TaggedError<Unprocessable>()("Unprocessable", fields) {
  readonly status = 422
  static of(input: Init & { readonly code: string }) {
    return new Unprocessable(init(input.code, input))
  }
}

/** 429: a rate limit was hit; `retryAfter` seconds go into the `Retry-After` header. */
export class RateLimited extends Schema.TaggedError<RateLimited>()("RateLimited", {
  ...fields,
  retryAfter: Schema.Number
}) {
  readonly status = 429
  static of(input: { readonly limit: number; readonly window: string; readonly retryAfter: number; readonly message?: string }) {
    return new RateLimited({
      ...init("RATE_LIMIT_EXCEEDED", {
        message: input.message ?? `Rate limit of ${input.limit} requests per ${input.window} exceeded`,
        details: { limit: input.limit, window: input.window, retry_after: input.retryAfter }
      }),
      retryAfter: input.retryAfter
    })
  }
}

/** 500: something we did not expect. Never carries internals. */
export class InternalError extends Schema.TaggedError<InternalError>()("InternalError", fields) {
  readonly status = 500
  static of(message = "An unexpected error occurred") {
    return new InternalError(init("INTERNAL_ERROR", { message }))
  }
}

/** 503: a dependency (database, bus) is unreachable; clients retry after `retryAfter` seconds. */
export class ServiceUnavailable extends Schema.TaggedError<ServiceUnavailable>()("ServiceUnavailable", {
  ...fields,
  retryAfter: Schema.Number
}) {
  readonly status = 503
  static of(message = "The service is temporarily unavailable, retry shortly", retryAfter = 5) {
    return new ServiceUnavailable({ ...init("SERVICE_UNAVAILABLE", { message }), retryAfter })
  }
}

export type ApiError =
  | BadRequest
  | ValidationError
  | Unauthorized
  | Forbidden
  | NotFound
  | Conflict
  | PayloadTooLarge
  | UnsupportedMediaType
  | Unprocessable
  | RateLimited
  | InternalError
  | ServiceUnavailable

const apiErrorTags = new Set([
  "BadRequest",
  "ValidationError",
  "Unauthorized",
  "Forbidden",
  "NotFound",
  "Conflict",
  "PayloadTooLarge",
  "UnsupportedMediaType",
  "Unprocessable",
  "RateLimited",
  "InternalError",
  "ServiceUnavailable"
])

export const isApiError = (u: unknown): u is ApiError =>
  typeof u === "object" && u !== null && "_tag" in u && apiErrorTags.has((u as { _tag: string })._tag) &&
  "status" in u && "code" in u
