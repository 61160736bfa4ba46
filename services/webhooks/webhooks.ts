/**
 * Webhook endpoints (SPEC "Webhooks"; DESIGN.md §4): create, list, read, update, delete, the log
 * of deliveries made to each, and what a person asks of an endpoint by hand: a test event sent to it,
 * a finished delivery sent again.
 *
 * - The full secret is answered only by create and by an update that changed it; everything else
 *   carries `secret_masked`.
 * - A URL must be https and point at a public address (targets.ts), checked when it is saved.
 * - The plan caps the number of endpoints (free 1, pro 25, enterprise unlimited); creates of one
 *   user are serialised on the user's row, so two at once cannot both take the last slot. An account
 *   over it (back on free after a paid plan) keeps its endpoints, but only its oldest active ones,
 *   as many as the plan allows, are delivered to (subscriptions.ts `withinPlan`): every answer tells
 *   which are held back (`held_by_plan`). One may still be enabled; it is held back as the others.
 * - Someone else's webhook is answered as not found.
 * - `mailbox_ids` narrows a webhook to events about those mailboxes, which must be the account's
 *   active ones when saved (one deleted later simply sends nothing more); `labels` to events about an
 *   email carrying one of those labels (subscriptions.ts).
 * - A change is told to every process's WebhookSubscriptions before it is answered.
 * - A test event (samples.ts) and a delivery sent again are one attempt each, made while the request
 *   waits (at most ATTEMPT_TIMEOUT), with the endpoint's current URL and secret; an inactive endpoint
 *   can be tested (before it is enabled) but its deliveries are not sent again.
 */
import { SqlClient, type Statement } from "@effect/sql"
import { Effect, Either, Option } from "effect"
import { newId } from "../accounts/tokens.ts"
import { Conflict, NotFound, ServiceUnavailable, ValidationError, WebhookQuotaReached } from "../errors.ts"
import { EventLog } from "../events/log.ts"
import { neverSent } from "../events/never-sent.ts"
import { type ListMeta, listMeta, type Page, type Sort } from "../listing.ts"
import { ownedMailboxes } from "../mailboxes/owned.ts"
import { limits, type Plan } from "../plans/plans.ts"
import { succeeded, WebhookAttempts } from "./attempts.ts"
import { sampleEvent } from "./samples.ts"
import type {
  CreatedWebhook,
  CreateWebhookInput,
  Delivery,
  DeliveryStatus,
  EventKind,
  TestDelivery,
  UpdatedWebhook,
  UpdateWebhookInput,
  Webhook,
  WebhookListItem,
  WebhookSortField
} from "./schemas.ts"
import { generateSecret, maskSecret } from "./signatures.ts"
import { activeWithinPlan, WebhookSubscriptions } from "./subscriptions.ts"
import { type TargetRefused, WebhookTargets } from "./targets.ts"


const sortColumns: Record<WebhookSortField, string> = { created_at: "created_at", url: "url" }

interface WebhookRow {
  readonly id: string
  readonly url: string
  readonly events: ReadonlyArray<string>
  readonly secret: string
  readonly active: boolean
  readonly createdAt: Date
  readonly mailboxIds: ReadonlyArray<string> | null
  readonly labels: ReadonlyArray<string> | null
}

interface DeliveryRow {
  readonly id: string
  readonly webhookId: string
  readonly eventId: string
  readonly event: string
  readonly status: DeliveryStatus
  /** camelCase keys: the client's name transform would rewrite snake_case ones inside JSON too. */
  readonly attempts: ReadonlyArray<AttemptJson> | string
  readonly createdAt: Date
  readonly completedAt: Date | null
  readonly total: string
}

interface AttemptJson {
  readonly attempt: number
  readonly statusCode: number | null
  readonly durationMs: number
  readonly error: string | null
  readonly attemptedAt: string
}

const columns = "id, url, events, secret, active, created_at, mailbox_ids, labels"

/**
 * The URL as answers show it: a password in it (`https://user:pass@host/…`, basic auth some receivers
 * ask for) is the endpoint's credential, shown as `********` as the secret is masked. Answered back
 * unchanged in an update, the masked URL leaves the stored one as it is.
 */
const maskUrlPassword = (url: string) =>
  url.replace(USERINFO, (whole, scheme: string, user: string, password: string) => password === "" ? whole : `${scheme}${user}:${MASKED}@`)

/** A URL's scheme, then the user and password before its host. */
const USERINFO = /^([a-z][a-z0-9+.-]*:\/\/)([^/?#@:]*):([^/?#]*)@/i
const MASKED = "********"

/** The endpoint a URL names, credential aside: its scheme, user, host and port. */
const endpointOf = (url: string): string | undefined => {
  try {
    const parsed = new URL(url)
    return `${parsed.protocol}//${parsed.username}@${parsed.host}`
  } catch {
    return undefined
  }
}

/**
 * An updated URL that still holds the mask where its password was (a client that read the webhook
 * and changed its path, say) keeps the stored password: for the same endpoint only (scheme, user,
 * host and port), since the credential is that endpoint's and is not carried to another. Else the
 * mask would be stored as the password, and deliveries fail at the receiver's 401 with no word why.
 * The URL to store, or why not.
 */
const withStoredPassword = (url: string, stored: string): Either.Either<string, string> => {
  const sent = USERINFO.exec(url)
  if (sent === null || sent[3] !== MASKED) return Either.right(url)
  const kept = USERINFO.exec(stored)
  if (kept === null || kept[3] === "" || kept[3] === MASKED) {
    return Either.left(`holds ${MASKED}, how answers mask a password, and the webhook has none to keep: write the endpoint's password`)
  }
  if (endpointOf(url) === undefined || endpointOf(url) !== endpointOf(stored)) {
    return Either.left(`holds ${MASKED}, how answers mask a password: the stored one is kept for the same scheme, user, host and port only; for another endpoint, write its password`)
  }
  return Either.right(`${sent[1]}${sent[2]}:${kept[3]}@${url.slice(sent[0].length)}`)
}

const toWebhook = (row: WebhookRow, held: ReadonlySet<string>): Webhook => ({
  webhook_id: row.id,
  url: maskUrlPassword(row.url),
  events: [...row.events],
  secret_masked: maskSecret(row.secret),
  active: row.active,
  created_at: row.createdAt.toISOString(),
  mailbox_ids: row.mailboxIds === null ? null : [...row.mailboxIds],
  labels: row.labels === null ? null : [...row.labels],
  held_by_plan: held.has(row.id)
})

const notFound = (webhookId: string) => new NotFound({ message: "Webhook not found", details: { webhook_id: webhookId } })
/** How long a resend holds its delivery: its one attempt is cut at 10 s. */
const RESEND_LEASE = "30 seconds"

const deliveryNotFound = (deliveryId: string) =>
  new NotFound({ message: "Delivery not found", details: { delivery_id: deliveryId } })

const toDelivery = (row: Omit<DeliveryRow, "total">): Delivery => ({
  delivery_id: row.id,
  webhook_id: row.webhookId,
  event_id: row.eventId,
  event: row.event,
  status: row.status,
  // A json column comes back parsed from PostgreSQL and as text from some drivers.
  attempts: (typeof row.attempts === "string" ? JSON.parse(row.attempts) as ReadonlyArray<AttemptJson> : row.attempts).map((a) => ({
    attempt: a.attempt,
    status_code: a.statusCode,
    duration_ms: a.durationMs,
    error: a.error,
    attempted_at: a.attemptedAt
  })),
  created_at: row.createdAt.toISOString(),
  completed_at: row.completedAt?.toISOString() ?? null
})

/** A refused URL as the client sees it: the field's problem, or a DNS outage worth retrying. */
const urlProblem = (refused: TargetRefused) =>
  refused.reason === "unavailable"
    ? ServiceUnavailable.of(`Could not check the webhook URL: ${refused.message}; retry shortly`)
    : ValidationError.field("url", refused.message)

/** Each kind once, in the order given. */
const distinct = (events: ReadonlyArray<string>) => Array.from(new Set(events))

/** Refused: a webhook that would never be sent any event it asks for, as its narrowing stands (events/never-sent.ts). */
const unheard = (events: ReadonlyArray<string>, mailboxIds: ReadonlyArray<string> | null, labels: ReadonlyArray<string> | null) =>
  neverSent({
    listener: "webhook",
    kindsField: "events",
    kinds: events,
    mailboxes: mailboxIds === null ? undefined : "mailbox_ids (as a key limited to mailboxes narrows it)",
    labels: labels !== null
  })

/** The labels a webhook listens to, as kept: each once; null for every event. */
const keptLabels = (labels: ReadonlyArray<string> | null | undefined) => (labels == null ? null : distinct(labels))

export class Webhooks extends Effect.Service<Webhooks>()("mailroom/Webhooks", {
  dependencies: [WebhookAttempts.Default, EventLog.Default],
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const targets = yield* WebhookTargets
    const subscriptions = yield* WebhookSubscriptions
    const attempts = yield* WebhookAttempts
    const log = yield* EventLog

    const checkUrl = (url: string) => Effect.mapError(targets.validate(url.trim()), urlProblem)

    /** The mailboxes asked for, each once, if every one is an active mailbox of the account. */
    const checkMailboxes = (userId: string, mailboxIds: ReadonlyArray<string> | null | undefined) =>
      mailboxIds === null || mailboxIds === undefined
        ? Effect.succeed(mailboxIds)
        : ownedMailboxes(sql, userId, mailboxIds, "mailbox_ids")

    /** The account's active webhooks its plan holds back from deliveries now, read as the webhook actor reads them (`activeWithinPlan`). */
    const heldByPlan = (userId: string) =>
      Effect.map(activeWithinPlan(sql, [userId]), (accounts) => new Set(accounts.flatMap(({ held }) => held.map(({ id }) => id))))

    const find = (userId: string, webhookId: string) =>
      sql<WebhookRow>`SELECT ${sql.literal(columns)} FROM webhooks WHERE id = ${webhookId} AND user_id = ${userId}`.pipe(
        Effect.flatMap((rows) => (rows[0] ? Effect.succeed(rows[0]) : Effect.fail(notFound(webhookId))))
      )

    const insert = (
      owner: { readonly userId: string; readonly plan: Plan },
      input: CreateWebhookInput,
      secret: string,
      mailboxIds: ReadonlyArray<string> | null
    ) =>
      Effect.gen(function*() {
        // Serialise this user's creates: the count below then holds until the insert commits.
        yield* sql`SELECT id FROM users WHERE id = ${owner.userId} FOR NO KEY UPDATE`
        const limit = limits[owner.plan].webhooks
        if (limit !== null) {
          const counted = yield* sql<{ n: string }>`SELECT count(*) AS n FROM webhooks WHERE user_id = ${owner.userId}`
          const count = Number(counted[0]?.n ?? 0)
          if (count >= limit) {
            return yield* new WebhookQuotaReached({
              message: `The ${owner.plan} plan allows ${limit} webhook${limit === 1 ? "" : "s"}`,
              details: { count, limit, plan: owner.plan }
            })
          }
        }
        const rows = yield* sql<WebhookRow>`
          INSERT INTO webhooks ${
          sql.insert({
            id: newId("whk"),
            userId: owner.userId,
            url: input.url.trim(),
            events: distinct(input.events),
            secret,
            mailboxIds,
            labels: keptLabels(input.labels)
          })
        }
          RETURNING ${sql.literal(columns)}`
        return rows[0]!
      }).pipe(sql.withTransaction)

    const create = Effect.fn("Webhooks.create")(function*(owner: { readonly userId: string; readonly plan: Plan }, input: CreateWebhookInput) {
      yield* checkUrl(input.url)
      const mailboxIds = yield* checkMailboxes(owner.userId, input.mailbox_ids)
      yield* unheard(input.events, mailboxIds ?? null, keptLabels(input.labels))
      const row = yield* insert(owner, input, input.secret ?? generateSecret(), mailboxIds ?? null)
      yield* subscriptions.changed(owner.userId)
      return { ...toWebhook(row, yield* heldByPlan(owner.userId)), secret: row.secret } satisfies CreatedWebhook
    })

    /**
     * The account's webhooks; with `only` (a key limited to those mailboxes), the ones that listen to
     * some of those mailboxes and no other.
     */
    const list = Effect.fn("Webhooks.list")(function*(userId: string, page: Page, sort: Sort<WebhookSortField>, only?: ReadonlyArray<string>) {
      const direction = sql.literal(sort.direction === "asc" ? "ASC" : "DESC")
      const within = only === undefined ? sql`` : sql`AND mailbox_ids IS NOT NULL AND mailbox_ids <@ ${[...only]}::text[]`
      // The page and the count in one statement (as the email list does): a single row of nulls
      // carries the count when the page is empty.
      const rows = yield* sql<(WebhookRow & { readonly total: string }) | { readonly id: null; readonly total: string }>`
        SELECT page.*, counted.total
        FROM (SELECT count(*) AS total FROM webhooks WHERE user_id = ${userId} ${within}) counted
        LEFT JOIN LATERAL (
          SELECT ${sql.literal(columns)}, row_number() OVER () AS position
          FROM (
            SELECT * FROM webhooks WHERE user_id = ${userId} ${within}
            ORDER BY ${sql.literal(sortColumns[sort.field])} ${direction}, id
            LIMIT ${page.limit} OFFSET ${page.offset}
          ) w
        ) page ON true
        ORDER BY page.position`
      const total = Number(rows[0]?.total ?? 0)
      const held = yield* heldByPlan(userId)
      const webhooks: Array<WebhookListItem> = rows.flatMap((row) => {
        if (row.id === null) return []
        const { created_at, ...rest } = toWebhook(row, held)
        return [{ ...rest, createdAt: created_at }]
      })
      return { webhooks, meta: listMeta(total, page) satisfies ListMeta }
    })

    const get = Effect.fn("Webhooks.get")(function*(userId: string, webhookId: string) {
      const row = yield* find(userId, webhookId)
      return toWebhook(row, yield* heldByPlan(userId))
    })

    const update = Effect.fn("Webhooks.update")(function*(userId: string, webhookId: string, input: UpdateWebhookInput) {
      // Not found before a URL problem: someone else's webhook is nothing to validate against.
      const stored = yield* find(userId, webhookId)
      // The URL as it was answered (its password masked) is no change.
      if (input.url !== undefined && input.url.trim() === maskUrlPassword(stored.url)) input = { ...input, url: undefined }
      if (input.url !== undefined) {
        const url = withStoredPassword(input.url.trim(), stored.url)
        if (Either.isLeft(url)) return yield* ValidationError.field("url", url.left)
        input = { ...input, url: url.right }
        yield* checkUrl(url.right)
      }
      const mailboxIds = yield* checkMailboxes(userId, input.mailbox_ids)
      yield* unheard(
        input.events ?? stored.events,
        mailboxIds === undefined ? stored.mailboxIds : mailboxIds,
        input.labels === undefined ? stored.labels : keptLabels(input.labels)
      )
      const rows = yield* sql<WebhookRow>`
        UPDATE webhooks SET
          url = coalesce(${input.url?.trim() ?? null}, url),
          events = coalesce(${input.events === undefined ? null : distinct(input.events)}::text[], events),
          active = coalesce(${input.active ?? null}::boolean, active),
          secret = coalesce(${input.secret ?? null}, secret),
          mailbox_ids = CASE WHEN ${mailboxIds === undefined} THEN mailbox_ids ELSE ${mailboxIds ?? null}::text[] END,
          labels = CASE WHEN ${input.labels === undefined} THEN labels ELSE ${keptLabels(input.labels)}::text[] END,
          updated_at = now()
        WHERE id = ${webhookId} AND user_id = ${userId}
        RETURNING ${sql.literal(columns)}`
      const row = rows[0]
      if (!row) return yield* notFound(webhookId)
      yield* subscriptions.changed(userId)
      const shown = toWebhook(row, yield* heldByPlan(userId))
      return (input.secret !== undefined ? { ...shown, secret: row.secret } : shown) satisfies UpdatedWebhook
    })

    const remove = Effect.fn("Webhooks.remove")(function*(userId: string, webhookId: string) {
      const rows = yield* sql<{ id: string }>`DELETE FROM webhooks WHERE id = ${webhookId} AND user_id = ${userId} RETURNING id`
      if (rows.length === 0) return yield* notFound(webhookId)
      yield* subscriptions.changed(userId)
      return { message: `Webhook ${webhookId} deleted` }
    })

    /** The deliveries `scope` picks (`d` is webhook_deliveries), newest first (or oldest), each with its attempts, and how many it picks. */
    const deliveriesWhere = (scope: Statement.Fragment, page: Page, direction: "asc" | "desc" = "desc") =>
      Effect.gen(function*() {
        const order = sql.literal(direction === "asc" ? "created_at ASC, id ASC" : "created_at DESC, id DESC")
        const rows = yield* sql<DeliveryRow | { readonly id: null; readonly total: string }>`
          SELECT page.*, counted.total
          FROM (SELECT count(*) AS total FROM webhook_deliveries d WHERE ${scope}) counted
          LEFT JOIN LATERAL (
            SELECT d.id, d.webhook_id, d.event_id, d.event, d.status, d.created_at, d.completed_at,
                   coalesce((
                     SELECT json_agg(json_build_object(
                              'attempt', a.attempt,
                              'statusCode', a.status_code,
                              'durationMs', a.duration_ms,
                              'error', a.error,
                              'attemptedAt', to_char(a.attempted_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
                            ) ORDER BY a.attempt)
                     FROM webhook_attempts a WHERE a.delivery_id = d.id
                   ), '[]'::json) AS attempts,
                   row_number() OVER () AS position
            FROM (
              SELECT * FROM webhook_deliveries d WHERE ${scope}
              ORDER BY ${order}
              LIMIT ${page.limit} OFFSET ${page.offset}
            ) d
          ) page ON true
          ORDER BY page.position`
        const total = Number(rows[0]?.total ?? 0)
        return { deliveries: rows.flatMap((row) => (row.id === null ? [] : [toDelivery(row)])), total }
      })

    /**
     * The deliveries of a webhook `only` (a key limited to those mailboxes) may see: those about its
     * mailboxes. A webhook it manages listens to its mailboxes alone now, but may have listened to
     * the whole account before a full key narrowed it; events about no mailbox are the account's.
     */
    const visible = (only: ReadonlyArray<string> | undefined) =>
      only === undefined ? sql`true` : sql`d.mailbox_id = ANY(${[...only]}::text[])`

    /** The delivery log of one webhook, newest first, each delivery with its attempts. */
    const deliveries = Effect.fn("Webhooks.deliveries")(function*(
      userId: string,
      webhookId: string,
      page: Page,
      options: { readonly only?: ReadonlyArray<string> | undefined; readonly direction?: "asc" | "desc" } = {}
    ) {
      yield* find(userId, webhookId)
      const { deliveries: data, total } = yield* deliveriesWhere(sql`d.webhook_id = ${webhookId} AND ${visible(options.only)}`, page, options.direction)
      return { deliveries: data, meta: listMeta(total, page) }
    })

    /**
     * Send the endpoint an example event of `kind` (by default the first kind it subscribes to), signed
     * as every delivery is, once, and answer what it answered. Nothing is logged as a delivery: no
     * event happened. The example is about one of the webhook's mailboxes when it names some.
     */
    const test = Effect.fn("Webhooks.test")(function*(userId: string, webhookId: string, kind: EventKind | undefined) {
      const row = yield* find(userId, webhookId)
      const event = kind ?? (row.events[0] as EventKind)
      const payload = sampleEvent(event, new Date(), row.mailboxIds?.[0], row.labels?.[0])
      const eventId = newId("test")
      const outcome = yield* attempts.post(row, eventId, event, JSON.stringify(payload), 1)
      yield* Effect.logInfo(succeeded(outcome) ? "Webhook test delivered" : "Webhook test failed").pipe(
        Effect.annotateLogs({ webhook_id: webhookId, event, status_code: outcome.statusCode, duration_ms: outcome.durationMs })
      )
      return {
        event,
        event_id: eventId,
        succeeded: succeeded(outcome),
        status_code: outcome.statusCode,
        duration_ms: outcome.durationMs,
        error: outcome.error,
        payload
      } satisfies TestDelivery
    })

    /**
     * Send a finished delivery again (failed, canceled, or succeeded and wanted once more): one more
     * attempt of the same event (its body from the event log, kept 7 days; the same `webhook-id`, so a
     * receiver that keeps ids sees a duplicate), numbered after the last, and the delivery's status
     * becomes that attempt's. A delivery still under way is the actor's: 409. One `only` may not see
     * (see `visible`) is unknown to it.
     */
    const resend = Effect.fn("Webhooks.resend")(function*(userId: string, webhookId: string, deliveryId: string, only?: ReadonlyArray<string>) {
      const row = yield* find(userId, webhookId)
      const found = yield* sql<{ eventId: string; event: string; status: DeliveryStatus }>`
        SELECT event_id, event, status FROM webhook_deliveries d
        WHERE id = ${deliveryId} AND webhook_id = ${webhookId} AND ${visible(only)}`
      const delivery = found[0]
      if (delivery === undefined) return yield* deliveryNotFound(deliveryId)
      if (delivery.status === "pending") {
        return yield* new Conflict({
          message: "The delivery is still under way: wait until it has succeeded or failed",
          details: { delivery_id: deliveryId, status: delivery.status }
        })
      }
      if (!row.active) {
        return yield* new Conflict({ message: "The webhook is disabled: enable it first", details: { webhook_id: webhookId, active: false } })
      }
      const body = yield* log.payloadOf(userId, delivery.eventId)
      if (Option.isNone(body)) {
        return yield* new Conflict({
          message: "The event is no longer kept (events are kept 7 days): it cannot be sent again",
          details: { delivery_id: deliveryId, event_id: delivery.eventId }
        })
      }
      // The attempt's number is taken with a lease on the delivery (RESEND_LEASE, longer than an
      // attempt can take): a second request meanwhile is refused rather than sending it twice.
      const claimed = yield* sql<{ attempts: number }>`
        UPDATE webhook_deliveries SET attempts = attempts + 1, resending_until = now() + ${RESEND_LEASE}::interval
        WHERE id = ${deliveryId} AND status <> 'pending' AND (resending_until IS NULL OR resending_until < now())
        RETURNING attempts`
      if (claimed[0] === undefined) {
        return yield* new Conflict({
          message: "The delivery is being sent again already: wait for that attempt's outcome",
          details: { delivery_id: deliveryId, status: delivery.status }
        })
      }
      const number = claimed[0].attempts
      const attemptedAt = new Date()
      const outcome = yield* Effect.gen(function*() {
        const outcome = yield* attempts.post(row, delivery.eventId, delivery.event, body.value, number)
        yield* attempts.record(deliveryId, number, attemptedAt, outcome, succeeded(outcome) ? "succeeded" : "failed")
        return outcome
      }).pipe(Effect.ensuring(Effect.ignore(sql`UPDATE webhook_deliveries SET resending_until = NULL WHERE id = ${deliveryId}`)))
      yield* Effect.logInfo(succeeded(outcome) ? "Webhook delivery sent again: delivered" : "Webhook delivery sent again: failed").pipe(
        Effect.annotateLogs({ webhook_id: webhookId, delivery_id: deliveryId, attempt: number, status_code: outcome.statusCode })
      )
      const { deliveries: [resent] } = yield* deliveriesWhere(sql`d.id = ${deliveryId}`, { limit: 1, offset: 0 })
      return resent ?? (yield* deliveryNotFound(deliveryId))
    })

    return { create, list, get, update, remove, deliveries, test, resend } as const
  })
}) {}
