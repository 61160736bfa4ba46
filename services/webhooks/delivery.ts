/**
 * The webhook actor (worker role): every event on the bus goes to each active endpoint of its
 * account subscribed to its kind, signed, with SPEC's retries, and every attempt is logged.
 *
 * - Retries (SPEC "Events"): up to 3 attempts, the first at once, the second 500 ms after the first
 *   failed, the third 1000 ms after the second. Any answer outside 2xx, no answer within 10 s, a
 *   refused connection or a target that now resolves to a non-public address is a failure.
 * - The bus message is acknowledged only when every endpoint's delivery has finished (succeeded,
 *   failed for good, or canceled by a deactivation), so a worker that dies part-way leaves the event
 *   on the bus. Progress is kept per endpoint and event (`webhook_deliveries`): a redelivered event
 *   skips the endpoints already done and continues an unfinished one from its next attempt.
 * - Endpoints are independent: each event's deliveries run side by side, and an endpoint that is
 *   slow or down holds at most `MAX_IN_FLIGHT_PER_ENDPOINT` deliveries in this process. Its further
 *   events wait on the bus (the handler asks for the event again later) instead of taking the slots
 *   other endpoints' events need.
 * - Which endpoints an event goes to is kept per account in each process (subscriptions.ts), so an
 *   event of an account without endpoints costs no statement.
 * - Every attempt re-reads the endpoint, so a deactivation, a new URL or a rotated secret applies to
 *   the next attempt, and re-resolves the host (DNS rebinding, see targets.ts).
 */
import { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Data, Duration, Effect, Either, Layer, Schema } from "effect"
import { newId } from "../accounts/tokens.ts"
import { Bus, type BusMessage, decodeJson, subjects } from "../bus/bus.ts"
import { measured } from "../bus/metrics.ts"
import { EventCompletion } from "../events/completion.ts"
import { type Backpressure, BackpressureTypeId } from "../health/dependency-health.ts"
import { type DeliveryStatus, BusEvent, isEventKind } from "./schemas.ts"
import { succeeded, WebhookAttempts } from "./attempts.ts"
import { WebhookSubscriptions } from "./subscriptions.ts"

/** SPEC: the first attempt at once, the second after 500 ms, the third after 1000 ms. */
export const RETRY_DELAYS = [Duration.zero, Duration.millis(500), Duration.millis(1000)] as const
export const MAX_ATTEMPTS = RETRY_DELAYS.length
/** Deliveries to one endpoint at once in one process. */
export const MAX_IN_FLIGHT_PER_ENDPOINT = 16
/** Events handled at once by one process; each mostly waits on the network. */
const CONCURRENCY = 128

/**
 * Some endpoints were at their in-flight limit: the event is asked for again later. Flow control,
 * not a fault: the bus boundary logs it at debug only.
 */
class EndpointsBusy extends Data.TaggedError("EndpointsBusy")<{ readonly message: string }> implements Backpressure {
  readonly [BackpressureTypeId] = true as const
}

interface Endpoint {
  readonly id: string
  readonly url: string
  readonly secret: string
  readonly active: boolean
  readonly mailboxIds: ReadonlyArray<string> | null
}

/** The mailbox an event is about (email and delivery events carry `mailbox_id`); undefined for one about none. */
const mailboxOf = (data: unknown): string | undefined => {
  const id = typeof data === "object" && data !== null ? (data as { readonly mailbox_id?: unknown }).mailbox_id : undefined
  return typeof id === "string" ? id : undefined
}

/** The labels of the email an event is about (email events carry `labels`); undefined for one that carries none. */
const labelsOf = (data: unknown): ReadonlyArray<string> | undefined => {
  const labels = typeof data === "object" && data !== null ? (data as { readonly labels?: unknown }).labels : undefined
  return Array.isArray(labels) && labels.every((label) => typeof label === "string") ? labels : undefined
}

/** Whether the endpoint still listens to the mailbox an event is about (one about no mailbox: to the whole account). */
const listensTo = (endpoint: Endpoint, mailboxId: string | undefined) =>
  endpoint.mailboxIds === null || (mailboxId !== undefined && endpoint.mailboxIds.includes(mailboxId))

export class WebhookDelivery extends Effect.Service<WebhookDelivery>()("mailroom/WebhookDelivery", {
  dependencies: [WebhookAttempts.Default, EventCompletion.Default],
  scoped: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const attempts = yield* WebhookAttempts
    const completion = yield* EventCompletion
    const subscriptions = yield* WebhookSubscriptions
    const inFlight = new Map<string, number>()

    const current = (webhookId: string) =>
      sql<Endpoint>`SELECT id, url, secret, active, mailbox_ids FROM webhooks WHERE id = ${webhookId}`.pipe(Effect.map((rows) => rows[0]))

    /**
     * This endpoint's progress on this event, created on first sight (none: the webhook was deleted),
     * with the mailbox the event is about (a key limited to mailboxes sees only deliveries about its own).
     */
    const begin = (webhookId: string, eventId: string, kind: string, mailboxId: string | undefined) =>
      sql<{ id: string; status: DeliveryStatus; attempts: number }>`
        INSERT INTO webhook_deliveries (id, webhook_id, event_id, event, mailbox_id)
        SELECT ${newId("dlv")}, id, ${eventId}, ${kind}, ${mailboxId ?? null} FROM webhooks WHERE id = ${webhookId}
        ON CONFLICT (webhook_id, event_id) DO UPDATE SET event = EXCLUDED.event
        RETURNING id, status, attempts`.pipe(Effect.map((rows) => rows[0]))

    const cancel = (deliveryId: string) =>
      sql`UPDATE webhook_deliveries SET status = 'canceled', completed_at = now() WHERE id = ${deliveryId} AND status = 'pending'`

    /**
     * Deliver one event to one endpoint, from wherever an earlier delivery of the event left off. A
     * webhook disabled, or narrowed to other mailboxes, since the event came gets no more attempts:
     * its delivery is canceled (a key limited to the mailboxes left could otherwise point it elsewhere
     * and receive the rest of another mailbox's mail).
     */
    const deliver = (webhookId: string, eventId: string, kind: string, body: string, mailboxId: string | undefined) =>
      Effect.gen(function*() {
        const progress = yield* begin(webhookId, eventId, kind, mailboxId)
        if (progress === undefined || progress.status !== "pending") return
        for (let number = progress.attempts + 1; number <= MAX_ATTEMPTS; number++) {
          yield* Effect.sleep(RETRY_DELAYS[number - 1]!)
          const endpoint = yield* current(webhookId)
          if (endpoint === undefined) return // deleted: its log went with it
          if (!endpoint.active || !listensTo(endpoint, mailboxId)) return yield* cancel(progress.id)
          const attemptedAt = new Date()
          const outcome = yield* attempts.post(endpoint, eventId, kind, body, number)
          const ok = succeeded(outcome)
          const status: DeliveryStatus = ok ? "succeeded" : number === MAX_ATTEMPTS ? "failed" : "pending"
          yield* attempts.record(progress.id, number, attemptedAt, outcome, status)
          // One line per attempt; the target's URL is left out (it may carry a token in its query).
          yield* (ok ? Effect.logInfo("Webhook attempt delivered") : Effect.logInfo("Webhook attempt failed")).pipe(
            Effect.annotateLogs({
              webhook_id: webhookId,
              event_id: eventId,
              event: kind,
              attempt: number,
              status_code: outcome.statusCode,
              duration_ms: outcome.durationMs,
              delivery: status,
              ...(ok ? {} : { error: outcome.error })
            })
          )
          if (ok) return
        }
      })

    /** Hold one of the endpoint's in-flight slots while `effect` runs, or run nothing when none is free. */
    const withSlot = <A, E>(webhookId: string, effect: Effect.Effect<A, E>): Effect.Effect<boolean, E> =>
      Effect.acquireUseRelease(
        Effect.sync(() => {
          const taken = inFlight.get(webhookId) ?? 0
          if (taken >= MAX_IN_FLIGHT_PER_ENDPOINT) return false
          inFlight.set(webhookId, taken + 1)
          return true
        }),
        (acquired) => (acquired ? Effect.as(effect, true) : Effect.succeed(false)),
        (acquired) =>
          Effect.sync(() => {
            if (!acquired) return
            const left = (inFlight.get(webhookId) ?? 1) - 1
            if (left === 0) inFlight.delete(webhookId)
            else inFlight.set(webhookId, left)
          })
      )

    /** One event: every subscribed endpoint, side by side. Fails (and the bus retries) if any could not finish. */
    const dispatch = (told: BusEvent, eventId: string): Effect.Effect<void, SqlError | EndpointsBusy> =>
      Effect.gen(function*() {
        const endpoints = yield* subscriptions.endpoints(told.namespace, told.event, mailboxOf(told.data), labelsOf(told.data))
        if (endpoints.length === 0) return
        // An event an earlier version wrote lacks the fields added since: they are filled in (events/completion.ts).
        const event = yield* completion.complete(told)
        // Exactly SPEC's payload: the event, its time and its data (not whose it is: the receiver knows).
        const body = JSON.stringify({ event: event.event, timestamp: event.timestamp, data: event.data })
        const results = yield* Effect.forEach(
          endpoints,
          (endpoint) => Effect.either(withSlot(endpoint.id, deliver(endpoint.id, eventId, event.event, body, mailboxOf(event.data)))),
          { concurrency: "unbounded" }
        )
        const failure = results.find(Either.isLeft)
        if (failure !== undefined) return yield* failure.left
        const busy = results.filter((result) => Either.isRight(result) && !result.right).length
        if (busy > 0) {
          return yield* new EndpointsBusy({ message: `${busy} endpoint(s) at their limit of deliveries in flight` })
        }
      })

    /** The bus handler. An event nobody can deliver (malformed, unknown kind) is logged and dropped. */
    const handle = (message: BusMessage) =>
      Effect.try(() => decodeJson(message.data)).pipe(
        Effect.flatMap(Schema.decodeUnknown(BusEvent)),
        Effect.matchEffect({
          onFailure: (error) => Effect.logError("Dropping a malformed event: no webhook is sent for it", { subject: message.subject, error }),
          onSuccess: (event) =>
            isEventKind(event.event) ? dispatch(event, message.msgId || `${event.event}:${message.subject}`) : Effect.void
        })
      )

    return { handle, deliver } as const
  })
}) {}

/** The webhook actor: consumes every event while the worker runs. */
export const WebhooksLive = Layer.scopedDiscard(
  Effect.gen(function*() {
    const bus = yield* Bus
    const { handle } = yield* WebhookDelivery
    yield* bus.consume(measured({
      name: "webhooks",
      stream: "events",
      filter: subjects.allEvents,
      concurrency: CONCURRENCY,
      // A dead worker's events come back after this. Three attempts can take ~32 s: a live worker
      // keeps its events with progress signals.
      ackWait: Duration.seconds(20),
      handler: handle
    }))
  })
).pipe(Layer.provide(WebhookDelivery.Default))
