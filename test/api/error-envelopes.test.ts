/**
 * The error envelope as a client decodes it (the contract's schemas, which the Effect client uses): a
 * refusal that asks the client to wait says how long in its body, and the decoded error carries it.
 */
import { Schema } from "effect"
import { describe, expect, it } from "vitest"
import { NotFound, RateLimited, ServiceUnavailable } from "../../services/errors.ts"
import { envelope, errorResponse } from "../../src/http/errors.ts"

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
    expect(Schema.decodeUnknownSync(envelope(RateLimited))(body({ retry_after: "soon" })).retryAfter).toBe(0)
    expect(Schema.decodeUnknownSync(envelope(RateLimited))(body({ retry_after: -3 })).retryAfter).toBe(0)
    const missing = Schema.decodeUnknownSync(envelope(NotFound))({ success: false, error: { code: "NOT_FOUND", message: "No such email" } })
    expect(missing.details).toBeUndefined()
  })
})
