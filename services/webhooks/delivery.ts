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
import { Context, Data, Duration, Effect, Either, Layer, Schema } from "effect"
import { newId } from "../accounts/tokens.ts"
import { Bus, type BusMessage, decodeJson, subjects } from "../bus/bus.ts"
import { measured } from "../bus/metrics.ts"
import { type Backpressure, BackpressureTypeId } from "../health/dependency-health.ts"
import { BusEvent, type DeliveryStatus, isEventKind } from "./schemas.ts"
import { signingHeaders } from "./signatures.ts"
import { WebhookSubscriptions } from "./subscriptions.ts"
import { type ResolvedTarget, WebhookTargets } from "./targets.ts"
import { recordAttempt } from "./metrics.ts"

/** SPEC: the first attempt at once, the second after 500 ms, the third after 1000 ms. */
export const RETRY_DELAYS = [Duration.zero, Duration.millis(500), Duration.millis(1000)] as const
export const MAX_ATTEMPTS = RETRY_DELAYS.length
/** DESIGN.md §4: per attempt. */
export const ATTEMPT_TIMEOUT = Duration.seconds(10)
/** Deliveries to one endpoint at once in one process. */
export const MAX_IN_FLIGHT_PER_ENDPOINT = 16
/** Events handled at once by one process; each mostly waits on the network. */
const CONCURRENCY = 128

export const USER_AGENT = "Mailroom-Webhooks/1.0"

// ---------------------------------------------------------------------------------------------
// The port to the network

export interface PostRequest {
  readonly target: ResolvedTarget
  readonly headers: Readonly<Record<string, string>>
  readonly body: string
  readonly timeout: Duration.Duration
}

export class TransportError extends Data.TaggedError("TransportError")<{ readonly message: string }> {}

/** Sends one HTTP POST to a checked address; any answer is a success here, its status is the caller's business. */
export class WebhookTransport extends Context.Tag("mailroom/WebhookTransport")<WebhookTransport, {
  readonly post: (request: PostRequest) => Effect.Effect<{ readonly status: number }, TransportError>
}>() {}

// ---------------------------------------------------------------------------------------------

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
}

interface Outcome {
  readonly statusCode: number | null
  readonly error: string | null
  readonly durationMs: number
}

const isSuccess = (status: number) => status >= 200 && status < 300

/** The mailbox an event is about (email and delivery events carry `mailbox_id`); undefined for one about none. */
const mailboxOf = (data: unknown): string | undefined => {
  const id = typeof data === "object" && data !== null ? (data as { readonly mailbox_id?: unknown }).mailbox_id : undefined
  return typeof id === "string" ? id : undefined
}

export class WebhookDelivery extends Effect.Service<WebhookDelivery>()("mailroom/WebhookDelivery", {
  scoped: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const targets = yield* WebhookTargets
    const transport = yield* WebhookTransport
    const subscriptions = yield* WebhookSubscriptions
    const inFlight = new Map<string, number>()

    const current = (webhookId: string) =>
      sql<Endpoint>`SELECT id, url, secret, active FROM webhooks WHERE id = ${webhookId}`.pipe(Effect.map((rows) => rows[0]))

    /** This endpoint's progress on this event, created on first sight (none: the webhook was deleted). */
    const begin = (webhookId: string, eventId: string, kind: string) =>
      sql<{ id: string; status: DeliveryStatus; attempts: number }>`
        INSERT INTO webhook_deliveries (id, webhook_id, event_id, event)
        SELECT ${newId("dlv")}, id, ${eventId}, ${kind} FROM webhooks WHERE id = ${webhookId}
        ON CONFLICT (webhook_id, event_id) DO UPDATE SET event = EXCLUDED.event
        RETURNING id, status, attempts`.pipe(Effect.map((rows) => rows[0]))

    /** Log an attempt and move the delivery on, in one statement. */
    const record = (deliveryId: string, attempt: number, attemptedAt: Date, outcome: Outcome, status: DeliveryStatus) =>
      sql`
        WITH logged AS (
          INSERT INTO webhook_attempts (delivery_id, attempt, status_code, duration_ms, error, attempted_at)
          SELECT id, ${attempt}, ${outcome.statusCode}, ${outcome.durationMs}, ${outcome.error}, ${attemptedAt}
          FROM webhook_deliveries WHERE id = ${deliveryId}
          ON CONFLICT (delivery_id, attempt) DO NOTHING
        )
        UPDATE webhook_deliveries
        SET attempts = greatest(attempts, ${attempt}), status = ${status},
            completed_at = CASE WHEN ${status} = 'pending' THEN NULL ELSE now() END
        WHERE id = ${deliveryId}`

    const cancel = (deliveryId: string) =>
      sql`UPDATE webhook_deliveries SET status = 'canceled', completed_at = now() WHERE id = ${deliveryId} AND status = 'pending'`

    /** One POST: resolve and check the target, sign, send. Never fails: the outcome says what happened. */
    const attempt = (endpoint: Endpoint, eventId: string, kind: string, body: string, number: number) =>
      Effect.gen(function*() {
        const started = Date.now()
        const result = yield* targets.resolve(endpoint.url).pipe(
          Effect.flatMap((target) =>
            transport.post({
              target,
              headers: {
                "content-type": "application/json",
                "user-agent": USER_AGENT,
                "x-mailroom-event": kind,
                "x-mailroom-attempt": String(number),
                ...signingHeaders({ secret: endpoint.secret, id: eventId, timestamp: Math.floor(Date.now() / 1000), body })
              },
              body,
              timeout: ATTEMPT_TIMEOUT
            })
          ),
          Effect.either
        )
        const durationMs = Date.now() - started
        if (result._tag === "Left") return { statusCode: null, error: result.left.message, durationMs } satisfies Outcome
        const status = result.right.status
        return { statusCode: status, error: isSuccess(status) ? null : `HTTP ${status}`, durationMs } satisfies Outcome
      })

    /** Deliver one event to one endpoint, from wherever an earlier delivery of the event left off. */
    const deliver = (webhookId: string, eventId: string, kind: string, body: string) =>
      Effect.gen(function*() {
        const progress = yield* begin(webhookId, eventId, kind)
        if (progress === undefined || progress.status !== "pending") return
        for (let number = progress.attempts + 1; number <= MAX_ATTEMPTS; number++) {
          yield* Effect.sleep(RETRY_DELAYS[number - 1]!)
          const endpoint = yield* current(webhookId)
          if (endpoint === undefined) return // deleted: its log went with it
          if (!endpoint.active) return yield* cancel(progress.id)
          const attemptedAt = new Date()
          const outcome = yield* attempt(endpoint, eventId, kind, body, number)
          const ok = outcome.statusCode !== null && isSuccess(outcome.statusCode)
          const status = ok ? "succeeded" : number === MAX_ATTEMPTS ? "failed" : "pending"
          yield* record(progress.id, number, attemptedAt, outcome, status)
          yield* recordAttempt(ok ? "success" : outcome.statusCode === null ? "network_error" : "http_error", outcome.durationMs / 1000)
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
    const dispatch = (event: BusEvent, eventId: string): Effect.Effect<void, SqlError | EndpointsBusy> =>
      Effect.gen(function*() {
        const endpoints = yield* subscriptions.endpoints(event.namespace, event.event, mailboxOf(event.data))
        if (endpoints.length === 0) return
        // Exactly SPEC's payload: the event, its time and its data (not whose it is: the receiver knows).
        const body = JSON.stringify({ event: event.event, timestamp: event.timestamp, data: event.data })
        const results = yield* Effect.forEach(
          endpoints,
          (endpoint) => Effect.either(withSlot(endpoint.id, deliver(endpoint.id, eventId, event.event, body))),
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
          onFailure: (error) => Effect.logError("Dropping a malformed event", { subject: message.subject, error }),
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
