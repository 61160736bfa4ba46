/** Webhook attempts by outcome (`success`, `http_error`, `network_error`) and how long each took. */
import { Effect, Metric, MetricBoundaries } from "effect"

const attempts = Metric.counter("mailroom_webhook_attempts_total", {
  description: "Webhook POSTs by outcome: success (2xx), http_error (any other status), network_error (no answer)",
  incremental: true
})
const duration = Metric.histogram(
  "mailroom_webhook_attempt_duration_seconds",
  MetricBoundaries.fromIterable([0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]),
  "How long one webhook POST took, whatever its outcome"
)

export type AttemptOutcome = "success" | "http_error" | "network_error"

const byOutcome = {
  success: Metric.tagged(attempts, "outcome", "success"),
  http_error: Metric.tagged(attempts, "outcome", "http_error"),
  network_error: Metric.tagged(attempts, "outcome", "network_error")
} as const

/** Every outcome's series exported from 0 as the webhook sender starts, not from its first attempt of each. */
export const attemptsFromZero = Effect.forEach(Object.values(byOutcome), (series) => Metric.incrementBy(series, 0), { discard: true })

export const recordAttempt = (outcome: AttemptOutcome, seconds: number) =>
  Effect.zipRight(Metric.increment(byOutcome[outcome]), Metric.update(duration, seconds))
