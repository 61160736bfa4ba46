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

/** Every outcome's series exported from 0 as the mta starts: an alert on the first bounce needs the series before it. */
export const deliveriesFromZero = Effect.forEach(Object.values(byStatus), (series) => Metric.incrementBy(series, 0), { discard: true })

export const recordDeliveries = (statuses: ReadonlyArray<keyof typeof byStatus>) =>
  Effect.forEach(statuses, recordDelivery, { discard: true })
