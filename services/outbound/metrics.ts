/** Outbound deliveries by the status an attempt left each recipient in (sent, deferred, bounced, failed, suppressed). */
import { Effect, Metric } from "effect"

const deliveries = Metric.counter("mailroom_outbound_deliveries_total", {
  description:
    "Delivery attempts per recipient by outcome: sent, deferred (tried again later), bounced, failed (given up), suppressed (bounced meanwhile, not tried)",
  incremental: true
})

const byStatus = {
  sent: Metric.tagged(deliveries, "status", "sent"),
  deferred: Metric.tagged(deliveries, "status", "deferred"),
  bounced: Metric.tagged(deliveries, "status", "bounced"),
  failed: Metric.tagged(deliveries, "status", "failed"),
  suppressed: Metric.tagged(deliveries, "status", "suppressed")
} as const

export const recordDelivery = (status: keyof typeof byStatus) => Metric.increment(byStatus[status])

export const recordDeliveries = (statuses: ReadonlyArray<keyof typeof byStatus>) =>
  Effect.forEach(statuses, recordDelivery, { discard: true })
