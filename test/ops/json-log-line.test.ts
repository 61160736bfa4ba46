/**
 * One JSON log line (src/logging.ts): inside a traced span it carries the trace and span ids, with
 * the fiber's annotations and the cause; outside one (or under the disabled tracer the server runs
 * with) it carries none.
 */
import { describe, expect, it } from "@effect/vitest"
import { Cause, Effect, Logger, LogLevel } from "effect"
import { jsonLine, withoutAddresses } from "../../src/logging.ts"

const capture = <A, E>(effect: Effect.Effect<A, E>) =>
  Effect.gen(function*() {
    const lines: Array<Record<string, unknown>> = []
    const logger = Logger.make((options) => {
      lines.push(jsonLine({ role: "worker", node: "host:1" }, options))
    })
    yield* effect.pipe(Effect.provide(Logger.replace(Logger.defaultLogger, withoutAddresses(logger))))
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

  it.effect("at info and above holds no address: its local part is left out of the message, the annotations and the error", () =>
    Effect.gen(function*() {
      const lines = yield* capture(Effect.gen(function*() {
        yield* Effect.logWarning("System mail bounced: 550 5.1.1 <ada.lovelace+x@Example.COM>: no such user", Cause.fail(new Error("RCPT TO:<bob@mail.example.org> refused"))).pipe(
          Effect.annotateLogs({ event_id: "email.sent:eml_1:\"ada l\"@example.com:1", recipients: ["zoë@例え.jp"], domain: "example.com" })
        )
        yield* Effect.logInfo("node@22, effect@3.22.0 and x@localhost are no addresses")
        yield* Effect.logDebug("Delivery attempt's recipients").pipe(
          Effect.annotateLogs({ outcomes: "ada@example.com: sent" }),
          Logger.withMinimumLogLevel(LogLevel.Debug)
        )
      }))
      expect(lines[0]).toMatchObject({
        message: "System mail bounced: 550 5.1.1 <…@Example.COM>: no such user",
        event_id: "email.sent:eml_1:…@example.com:1",
        recipients: ["…@例え.jp"],
        domain: "example.com"
      })
      expect(String(lines[0]!.error)).toMatch(/^Error: RCPT TO:<…@mail\.example\.org> refused\n\s+at /)
      expect(lines[1]!.message).toBe("node@22, effect@3.22.0 and x@localhost are no addresses")
      // debug keeps what it names: the operator who turns it on asked for the addresses.
      expect(lines[2]).toMatchObject({ level: "debug", outcomes: "ada@example.com: sent" })
    }))
})
