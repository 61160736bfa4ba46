/**
 * Per consumer (ingest, index, webhooks, …): messages handled, failed (to come back) and
 * redelivered (a second or later delivery: a failure or a crashed node before it). Labelled by the
 * consumer's durable name only.
 */
import { Effect, Metric } from "effect"
import type { ConsumerSpec } from "./bus.ts"

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

/** The same consumer, its handler counted. */
export const measured = <E>(spec: ConsumerSpec<E>): ConsumerSpec<E> => {
  const tag = (metric: typeof processed) => Metric.tagged(metric, "consumer", spec.name)
  const [ok, ko, again] = [tag(processed), tag(failed), tag(redelivered)]
  return {
    ...spec,
    handler: (message) =>
      (message.deliveryCount > 1 ? Effect.zipRight(Metric.increment(again), spec.handler(message)) : spec.handler(message)).pipe(
        Effect.tapBoth({ onFailure: () => Metric.increment(ko), onSuccess: () => Metric.increment(ok) })
      )
  }
}
