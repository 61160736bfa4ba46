/**
 * Trace context across the bus (issue 22): a message carries the span that published it as a W3C
 * `traceparent`, and the consumer's handler runs in a span whose parent it is, so one inbound
 * message is one trace from the SMTP accept through ingest, indexing and each webhook delivery
 * (and an API send through the mta's delivery). With tracing off (no OTLP endpoint) spans carry no
 * real ids and nothing is sent along.
 */
import { Option, Tracer } from "effect"
import * as Effect from "effect/Effect"

const TRACE_ID = /^[0-9a-f]{32}$/
const SPAN_ID = /^[0-9a-f]{16}$/
const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/

/** The current span as a `traceparent`, when there is a real one (tracing on). */
export const currentTraceparent: Effect.Effect<string | undefined> = Effect.map(Effect.option(Effect.currentSpan), (span) => {
  if (Option.isNone(span) || !TRACE_ID.test(span.value.traceId) || !SPAN_ID.test(span.value.spanId)) return undefined
  return `00-${span.value.traceId}-${span.value.spanId}-${span.value.sampled ? "01" : "00"}`
})

/** The span a `traceparent` names, to be a consumer's parent; none for anything malformed. */
export const parentSpan = (traceparent: string | undefined): Option.Option<Tracer.ExternalSpan> => {
  const match = traceparent === undefined ? null : TRACEPARENT.exec(traceparent)
  if (match === null || /^0+$/.test(match[1]!) || /^0+$/.test(match[2]!)) return Option.none()
  return Option.some(Tracer.externalSpan({ traceId: match[1]!, spanId: match[2]!, sampled: (parseInt(match[3]!, 16) & 1) === 1 }))
}
