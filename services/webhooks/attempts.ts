/**
 * One attempt to deliver a webhook payload, and its entry in the delivery log: what the webhook actor
 * (delivery.ts) repeats with SPEC's retries, and what the API makes once when a person asks (a test
 * event, a delivery sent again: webhooks.ts).
 *
 * An attempt resolves and checks the target afresh (targets.ts: a non-public address is refused, and
 * the connection goes to the address checked), signs the body with the endpoint's current secret, and
 * never fails: its outcome says what the endpoint answered, or why it could not be reached.
 */
import { SqlClient } from "@effect/sql"
import { Context, Data, Duration, Effect } from "effect"
import { attemptsFromZero, recordAttempt } from "./metrics.ts"
import type { DeliveryStatus } from "./schemas.ts"
import { signingHeaders } from "./signatures.ts"
import { type ResolvedTarget, WebhookTargets } from "./targets.ts"

/** DESIGN.md §4: per attempt. */
export const ATTEMPT_TIMEOUT = Duration.seconds(10)

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

/** Where an attempt goes and what signs it: the endpoint as it is now. */
export interface Endpoint {
  readonly url: string
  readonly secret: string
}

/** What one attempt came to: the status answered (null when none was) and what went wrong. */
export interface Outcome {
  readonly statusCode: number | null
  readonly error: string | null
  readonly durationMs: number
}

export const succeeded = (outcome: Outcome) => outcome.statusCode !== null && outcome.statusCode >= 200 && outcome.statusCode < 300

export class WebhookAttempts extends Effect.Service<WebhookAttempts>()("mailroom/WebhookAttempts", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const targets = yield* WebhookTargets
    const transport = yield* WebhookTransport
    yield* attemptsFromZero

    /** One POST of `body` as attempt `number` of event `eventId`: resolve and check the target, sign, send. */
    const post = (endpoint: Endpoint, eventId: string, kind: string, body: string, number: number) =>
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
        // Every POST counts, a delivery's, one sent again by hand or a test event alike.
        if (result._tag === "Left") {
          yield* recordAttempt("network_error", durationMs / 1000)
          return { statusCode: null, error: result.left.message, durationMs } satisfies Outcome
        }
        const status = result.right.status
        const outcome: Outcome = { statusCode: status, error: null, durationMs }
        yield* recordAttempt(succeeded(outcome) ? "success" : "http_error", durationMs / 1000)
        return succeeded(outcome) ? outcome : { ...outcome, error: `HTTP ${status}` }
      })

    /** Log an attempt and move the delivery to `status`, in one statement. */
    const record = (deliveryId: string, number: number, attemptedAt: Date, outcome: Outcome, status: DeliveryStatus) =>
      sql`
        WITH logged AS (
          INSERT INTO webhook_attempts (delivery_id, attempt, status_code, duration_ms, error, attempted_at)
          SELECT id, ${number}, ${outcome.statusCode}, ${outcome.durationMs}, ${outcome.error}, ${attemptedAt}
          FROM webhook_deliveries WHERE id = ${deliveryId}
          ON CONFLICT (delivery_id, attempt) DO NOTHING
        )
        UPDATE webhook_deliveries
        SET attempts = greatest(attempts, ${number}), status = ${status},
            completed_at = CASE WHEN ${status} = 'pending' THEN NULL ELSE now() END
        WHERE id = ${deliveryId}`

    return { post, record } as const
  })
}) {}
