/**
 * Per consumer (ingest, index, webhooks, …): messages handled, failed (to come back) and
 * redelivered (a second or later delivery: a failure or a crashed node before it). Labelled by the
 * consumer's durable name only.
 */
import { Effect, Metric, MetricLabel, Option } from "effect"
import type { ConsumerSpec } from "./bus.ts"
import { parentSpan } from "./tracing.ts"

const processed = Metric.counter("mailroom_consumer_processed_total", {
  description: "Bus messages a consumer handled and acknowledged",
  incremental: true
})
const failed = Metric.counter("mailroom_consumer_failed_total", {
  description: "Bus messages whose handler failed, returned to the bus for another delivery",
  incremental: true
})
const redelivered = Metric.counter("mailroom_consumer_redelivered_total", {
  description: "Bus messages delivered more than once (a retry after a failure or a crashed node)",
  incremental: true
})

/**
 * The same consumer, its handler counted. One label array for the consumer, made once: Effect finds
 * a series by the identity of the array (a new one per message would cost a registry look-up).
 */
export const measured = <E>(spec: ConsumerSpec<E>): ConsumerSpec<E> => {
  const labels = [MetricLabel.make("consumer", spec.name)]
  // Exported from 0 as the consumer starts, not from its first message: a rate or an alert on the
  // first failure needs the series before it (Prometheus sees no increase in a series just born at 1).
  for (const metric of [processed, failed, redelivered]) metric.unsafeUpdate(0, labels)
  const count = (metric: typeof processed) => Effect.sync(() => metric.unsafeUpdate(1, labels))
  const spanName = `consume ${spec.name}`
  return {
    ...spec,
    handler: (message) => {
      const parent = parentSpan(message.traceparent)
      return (message.deliveryCount > 1 ? Effect.zipRight(count(redelivered), spec.handler(message)) : spec.handler(message)).pipe(
        Effect.tapBoth({ onFailure: () => count(failed), onSuccess: () => count(processed) }),
        // A child of the span that published the message: one trace across the nodes.
        Effect.withSpan(spanName, {
          kind: "consumer",
          captureStackTrace: false,
          attributes: { "messaging.destination.name": message.subject, "messaging.message.id": message.msgId, "mailroom.delivery_count": message.deliveryCount },
          ...(Option.isSome(parent) ? { parent: parent.value } : {})
        })
      )
    }
  }
}
