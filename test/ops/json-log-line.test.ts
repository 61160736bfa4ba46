/**
 * One JSON log line (src/logging.ts): inside a traced span it carries the trace and span ids, with
 * the fiber's annotations and the cause; outside one (or under the disabled tracer the server runs
 * with) it carries none.
 */
import { describe, expect, it } from "@effect/vitest"
import { Cause, Effect, Logger } from "effect"
import { jsonLine } from "../../src/logging.ts"

const capture = <A, E>(effect: Effect.Effect<A, E>) =>
  Effect.gen(function*() {
    const lines: Array<Record<string, unknown>> = []
    const logger = Logger.make((options) => {
      lines.push(jsonLine({ role: "worker", node: "host:1" }, options))
    })
    yield* effect.pipe(Effect.provide(Logger.replace(Logger.defaultLogger, logger)))
    return lines
  })

describe("a JSON log line", () => {
  it.effect("inside a span: trace_id and span_id of that span, annotations, and the error", () =>
    Effect.gen(function*() {
      let ids = { traceId: "", spanId: "" }
      const lines = yield* capture(
        Effect.gen(function*() {
          const span = yield* Effect.currentSpan
          ids = { traceId: span.traceId, spanId: span.spanId }
          yield* Effect.logWarning("Webhook attempt failed", Cause.fail("boom")).pipe(Effect.annotateLogs({ attempt: 2 }))
        }).pipe(Effect.withSpan("Webhooks.deliver"))
      )
      expect(lines).toHaveLength(1)
      expect(lines[0]).toMatchObject({
        level: "warn",
        message: "Webhook attempt failed",
        role: "worker",
        node: "host:1",
        attempt: 2,
        trace_id: ids.traceId,
        span_id: ids.spanId
      })
      expect(ids.traceId).toMatch(/^[0-9a-f]{32}$/)
      expect(String(lines[0]!.error)).toContain("boom")
      expect(String(lines[0]!.time)).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)
    }))

  it.effect("with the tracer disabled (as the server runs): no trace ids", () =>
    Effect.gen(function*() {
      const lines = yield* capture(
        Effect.logInfo("SMTP transaction answered 250").pipe(Effect.withSpan("x"), Effect.withTracerEnabled(false))
      )
      expect(lines[0]).not.toHaveProperty("trace_id")
      expect(lines[0]).not.toHaveProperty("span_id")
      expect(lines[0]).not.toHaveProperty("error")
    }))
})
