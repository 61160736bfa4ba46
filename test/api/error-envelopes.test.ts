/**
 * The error envelope as a client decodes it (the contract's schemas, which the Effect client uses): a
 * refusal that asks the client to wait says how long in its body, and the decoded error carries it.
 */
import { Effect, Either, Schema } from "effect"
import { describe, expect, it } from "vitest"
import {
  type ApiError,
  BadRequest,
  DisallowedLocal,
  DomainMismatch,
  EmailTaken,
  InvalidLocal,
  LocalTooShort,
  MailboxQuotaReached,
  MissingFields,
  NotFound,
  PayloadTooLarge,
  RateLimited,
  ServiceUnavailable,
  StorageQuotaReached,
  ValidationError
} from "../../services/errors.ts"
import { type AddressRequest, parseAddress, type RuleFailure } from "../../services/mailboxes/rules.ts"
import { storageQuotaReached } from "../../services/outbound/send.ts"
import { MAX_JSON_BYTES, tooLarge } from "../../src/http/body-limits.ts"
import { conflictedRetry, envelope, errorResponse } from "../../src/http/errors.ts"
import { decodeBody } from "../../src/http/surface.ts"

/** What the server writes for `error`, as JSON. */
const wireOf = async (error: RateLimited | ServiceUnavailable | NotFound) => {
  const response = errorResponse(error)
  return { status: response.status, headers: response.headers, body: JSON.parse(new TextDecoder().decode((response.body as { body: Uint8Array }).body)) }
}

describe("error envelopes decoded", () => {
  it("a 429's retryAfter is the body's details.retry_after, as its Retry-After header says", async () => {
    const answer = await wireOf(RateLimited.of({ limit: 20, window: "minute", retryAfter: 14 }))
    expect(answer.status).toBe(429)
    expect(answer.headers["retry-after"]).toBe("14")
    const decoded = Schema.decodeUnknownSync(envelope(RateLimited))(answer.body)
    expect(decoded).toBeInstanceOf(RateLimited)
    expect(decoded.retryAfter).toBe(14)
    expect(decoded.details).toEqual({ limit: 20, window: "minute", retry_after: 14 })
  })

  it("a 503 says in its body how long to wait too (details.retry_after), and decodes with it", async () => {
    const answer = await wireOf(ServiceUnavailable.of("The bus is not reachable", 5))
    expect(answer.status).toBe(503)
    expect(answer.headers["retry-after"]).toBe("5")
    expect(answer.body).toEqual({
      success: false,
      error: { code: "SERVICE_UNAVAILABLE", message: "The bus is not reachable", details: { retry_after: 5 } }
    })
    expect(Schema.decodeUnknownSync(envelope(ServiceUnavailable))(answer.body).retryAfter).toBe(5)
  })

  it("a body that names no wait (or a nonsense one) decodes as 0, and one without details keeps none", () => {
    const body = (details?: unknown) => ({
      success: false,
      error: { code: "RATE_LIMIT_EXCEEDED", message: "slow down", ...(details === undefined ? {} : { details }) }
    })
    expect(Schema.decodeUnknownSync(envelope(RateLimited))(body()).retryAfter).toBe(0)
    expect(Schema.decodeUnknownSync(envelope(RateLimited))(body({ limit: 20, window: "minute", retry_after: -3 })).retryAfter).toBe(0)
    // The contract types a 429's details: a wait that is not a number is no answer of ours.
    expect(() => Schema.decodeUnknownSync(envelope(RateLimited))(body({ limit: 20, window: "minute", retry_after: "soon" }))).toThrow(/retry_after/)
    const missing = Schema.decodeUnknownSync(envelope(NotFound))({ success: false, error: { code: "NOT_FOUND", message: "No such email" } })
    expect(missing.details).toBeUndefined()
  })
})

/**
 * Each error's details as its real constructions put them: the envelope (whose schema types the
 * keys each error names) must encode them, or the answer would be a 500, and a client must decode
 * them back whole, keys the class does not name included.
 */
describe("error details as the contract types them", () => {
  const roundTrip = <E extends ApiError>(cls: Parameters<typeof envelope<E>>[0], error: E) => {
    const wire = Schema.encodeSync(envelope(cls))(error)
    expect(wire).toEqual(JSON.parse(JSON.stringify(wire)))
    const back = Schema.decodeUnknownSync(envelope(cls))(wire)
    expect(back.details).toEqual(error.details)
    return wire
  }
  /** The refusal `parseAddress` answers `request` with, which must be a `cls`. */
  const refusal = <E extends RuleFailure>(cls: abstract new(...args: never) => E, request: AddressRequest): E => {
    const failure = Either.match(parseAddress(request, ["admin"]), { onLeft: (failure) => failure, onRight: () => undefined })
    if (!(failure instanceof cls)) throw new Error(`${JSON.stringify(request)}: ${failure?._tag ?? "allowed"}, not ${cls.name}`)
    return failure
  }

  it("rate limits and outages", () => {
    roundTrip(RateLimited, RateLimited.of({ limit: 20, window: "minute", retryAfter: 14, resetAt: 1_700_000_000 }))
    roundTrip(ServiceUnavailable, ServiceUnavailable.of())
    roundTrip(ServiceUnavailable, conflictedRetry())
  })

  it("the mailbox address rules", () => {
    roundTrip(MissingFields, refusal(MissingFields, { local_part: "someone" }))
    const short = roundTrip(LocalTooShort, refusal(LocalTooShort, { local_part: "ab", domain: "example.com" }))
    expect(short.error.details).toEqual({ min_length: 5, actual_length: 2 })
    roundTrip(InvalidLocal, refusal(InvalidLocal, { local_part: "bad..name", domain: "example.com" }))
    roundTrip(DisallowedLocal, refusal(DisallowedLocal, { local_part: "admin", domain: "example.com" }))
    roundTrip(DomainMismatch, refusal(DomainMismatch, { email_address: "someone@other.example", domain: "example.com" }))
  })

  it("bodies too large, and a send past the plan's storage", () => {
    const large = roundTrip(PayloadTooLarge, tooLarge(MAX_JSON_BYTES))
    expect(large.error.details).toEqual({ max_bytes: MAX_JSON_BYTES })
    const full = roundTrip(StorageQuotaReached, storageQuotaReached("free", 1_000, 2_000, "draft"))
    expect(full.error.details).toMatchObject({ used: 1_000, size: 2_000, plan: "free" })
  })

  it("a declared key of another type than a construction puts is refused when the error is made, not when it is answered", () => {
    // What typing details guards against: a 403 that would become a 500. The type checker refuses
    // such a construction; one that gets past it (a cast) fails where it is made.
    const wrong: { count: number; limit: number; plan: string } = JSON.parse(`{"count":1,"limit":"1","plan":"free"}`)
    expect(() => new MailboxQuotaReached({ message: "full", details: wrong })).toThrow(/limit/)
  })

  it("field-level refusals: VALIDATION_ERROR's and BAD_REQUEST's details are each field's message, a string, or that map under field_errors", () => {
    const Body = Schema.Struct({ name: Schema.String, labels: Schema.Array(Schema.String) }).annotations({ parseOptions: { errors: "all" } })
    const refused = (surface: "api" | "dashboard", malformed?: "bad-request") =>
      Effect.runSync(Effect.flip(decodeBody(Body, surface, malformed ? { malformed } : {})({ name: 5, labels: "inbound" })))
    const api = roundTrip(ValidationError, refused("api") as ValidationError)
    expect(api.error.details).toEqual({ name: "must be a string", labels: "must be a list" })
    const dashboard = roundTrip(ValidationError, refused("dashboard") as ValidationError)
    expect(dashboard.error.details).toEqual({ field_errors: { name: "must be a string", labels: "must be a list" } })
    const malformed = roundTrip(BadRequest, refused("api", "bad-request") as BadRequest)
    expect(malformed.error.details).toEqual({ field_errors: { name: "must be a string", labels: "must be a list" } })
    roundTrip(ValidationError, ValidationError.field("messages.0.to", "is required"))
    const noLocal = roundTrip(BadRequest, refusal(BadRequest, { email_address: "@example.com", domain: "example.com" }))
    expect(noLocal.error.details).toEqual({ email_address: "@example.com" })
    // A number or a list is no message: refused where it is made, as a typed key of another type is.
    const numeric: Record<string, string> = JSON.parse(`{"limit":5}`)
    expect(() => new ValidationError({ message: "no", details: numeric })).toThrow(/limit/)
    const listed: Record<string, string> = JSON.parse(`{"labels":["inbound"]}`)
    expect(() => new BadRequest({ message: "no", details: listed })).toThrow(/labels/)
    // A map of messages goes under field_errors only (TypeScript cannot say so: the check does).
    expect(() => new ValidationError({ message: "no", details: { to: { name: "is required" } } })).toThrow(/field_errors/)
  })

  it("keys a class does not name ride along, and no details stay absent", () => {
    const taken = roundTrip(EmailTaken, new EmailTaken({ message: "taken", details: { email_address: "a@b.example", note: { any: ["thing"] } } }))
    expect(taken.error.details).toEqual({ email_address: "a@b.example", note: { any: ["thing"] } })
    const bare = roundTrip(EmailTaken, new EmailTaken({ message: "A target address was taken during the migration" }))
    expect("details" in bare.error).toBe(false)
  })
})
