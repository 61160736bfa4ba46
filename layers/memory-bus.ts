/**
 * The embedded Bus (no `NATS_URL`): in-process queues, recovered from the SQL database on start.
 * Single node only: consumers in another process would never hear of a publish.
 *
 * Every publish is a row in `bus_messages` (unique per stream and msgId, which is the de-duplication)
 * before it is handed to the local consumers; every successful handler leaves a row in `bus_acks`.
 * A consumer starting up first takes the rows it has not acknowledged, so nothing published is lost
 * to a crash or a restart. Delivery counts live in memory: after a restart they start again at 1.
 *
 * Publish outside a caller's SQL transaction: consumers are woken as soon as the INSERT returns.
 */
import { SqlClient, SqlSchema } from "@effect/sql"
import { Cause, Deferred, Duration, Effect, Exit, Fiber, Layer, Option, PubSub, Queue, Schedule, Schema, Scope } from "effect"
import {
  Bus,
  BusError,
  type BusMessage,
  type BusShape,
  type ConsumerLag,
  type ConsumerRef,
  type ConsumerSpec,
  defaultRetryDelay,
  redeliveryDelay,
  type StreamName,
  streams,
  subjectMatches
} from "../services/bus/bus.ts"
import { groupCommit } from "../services/batching.ts"
import { currentTraceparent } from "../services/bus/tracing.ts"
import { DependencyHealth } from "../services/health/dependency-health.ts"

/** As long as the NATS streams keep messages; acknowledgements go with their message. */
const RETENTION = "7 days"
const PING_TIMEOUT = Duration.seconds(2)
/** Publishes stored by one INSERT at most (5 parameters each). */
const PUBLISH_BATCH = 500
/** Acknowledgements stored by one INSERT at most. */
const ACK_BATCH = 1_000

const StoredMessage = Schema.Struct({
  seq: Schema.NumberFromString,
  stream: Schema.String,
  subject: Schema.String,
  msgId: Schema.String,
  data: Schema.Uint8ArrayFromSelf,
  traceparent: Schema.NullOr(Schema.String),
  publishedAt: Schema.DateFromSelf
})
type StoredMessage = typeof StoredMessage.Type

interface Delivery {
  readonly message: StoredMessage
  readonly deliveryCount: number
}

/**
 * The consumers of one durable name in this process: they take turns on one queue, so that each
 * message goes to one of them (the first one's filter applies to all).
 */
interface Group {
  readonly queue: Queue.Queue<Delivery>
  /** Lives while the group has members: the live feed and pending redeliveries. */
  readonly scope: Scope.CloseableScope
  members: number
  /**
   * The messages offered to the group and not yet acknowledged, by seq, with when each was
   * published: in the order they were offered, so the first is the oldest. Its size less
   * `inFlight` is what waits (a redelivery waiting out its delay included).
   */
  readonly unacked: Map<number, number>
  inFlight: number
}

const toBusError = (message: string) => (cause: unknown) => new BusError({ message, cause })

/** The stream whose subjects take `subject`, as NATS would pick it. */
const streamFor = (subject: string): StreamName | undefined =>
  (Object.keys(streams) as Array<StreamName>).find((stream) =>
    streams[stream].subjects.some((filter) => subjectMatches(filter, subject))
  )

/** The literal tokens of a filter before its first wildcard, for narrowing the SQL scan (a prefix, not a match). */
const literalPrefix = (filter: string) => {
  const tokens = filter.split(".")
  const wildcard = tokens.findIndex((token) => token === "*" || token === ">")
  return wildcard === -1 ? filter : tokens.slice(0, wildcard).map((token) => `${token}.`).join("")
}

/**
 * A filter as a POSIX regular expression for SQL's `~`, matching what `subjectMatches` (and NATS)
 * match: by whole tokens, `*` one, `>` one or more. The literal prefix alone would also take
 * `events.email.received_x` and `events.email.received.x` for `events.email.received`.
 */
const subjectPattern = (filter: string) =>
  `^${
    filter.split(".").map((token) => (token === "*" ? "[^.]+" : token === ">" ? ".+" : token.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"))).join("\\.")
  }$`

export const make: Effect.Effect<BusShape, never, SqlClient.SqlClient | DependencyHealth | Scope.Scope> = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const health = yield* DependencyHealth
  const published = yield* Effect.acquireRelease(PubSub.unbounded<StoredMessage>(), PubSub.shutdown)
  const groups = new Map<string, Group>()
  // Joining and leaving a group are short, but must not interleave.
  const membership = yield* Effect.makeSemaphore(1)

  type NewMessage = {
    readonly stream: string
    readonly subject: string
    readonly msgId: string
    readonly data: Uint8Array
    readonly traceparent: string | null
  }
  const decodeInserted = Schema.decodeUnknown(
    Schema.Array(Schema.Struct({ seq: Schema.NumberFromString, publishedAt: Schema.DateFromSelf, stream: Schema.String, msgId: Schema.String }))
  )
  /**
   * Publishes that come together (an outbox's window, a burst of SMTP deliveries) stored by one
   * INSERT: one statement instead of one each on a database that runs one at a time. Answers each its
   * stored row, or none when its msgId was published before (a repeat within the batch too).
   */
  const insertMessages = yield* groupCommit({
    maxBatch: PUBLISH_BATCH,
    parallel: 1,
    run: (messages: ReadonlyArray<NewMessage>) =>
      sql`INSERT INTO bus_messages ${sql.insert(messages.map((m) => ({ ...m, data: Buffer.from(m.data.buffer, m.data.byteOffset, m.data.byteLength) })))}
          ON CONFLICT (stream, msg_id) DO NOTHING RETURNING seq, published_at, stream, msg_id`.pipe(
        Effect.flatMap(decodeInserted),
        Effect.map((rows) => {
          const byKey = new Map(rows.map((row) => [`${row.stream}\u0000${row.msgId}`, row]))
          return messages.map((m) => {
            const key = `${m.stream}\u0000${m.msgId}`
            const row = byKey.get(key)
            byKey.delete(key)
            return row
          })
        })
      )
  })

  const unacknowledged = SqlSchema.findAll({
    Request: Schema.Struct({ consumer: Schema.String, stream: Schema.String, subjectPrefix: Schema.String }),
    Result: StoredMessage,
    execute: ({ consumer, stream, subjectPrefix }) =>
      sql`SELECT m.seq, m.stream, m.subject, m.msg_id, m.data, m.traceparent, m.published_at
          FROM bus_messages m
          WHERE m.stream = ${stream} AND starts_with(m.subject, ${subjectPrefix})
            AND NOT EXISTS (SELECT 1 FROM bus_acks a WHERE a.consumer = ${consumer} AND a.seq = m.seq)
          ORDER BY m.seq`
  })

  // Through a SELECT, so that a message swept away meanwhile is simply not acknowledged (instead of
  // failing on the foreign key and being retried forever).
  // Those of every consumer that come together go in one INSERT (a burst of events is acknowledged by
  // each of its consumers: one statement each was most of what the embedded database did for it).
  const acknowledge = yield* groupCommit({
    maxBatch: ACK_BATCH,
    parallel: 1,
    run: (acks: ReadonlyArray<{ readonly consumer: string; readonly seq: number }>) =>
      sql`INSERT INTO bus_acks (consumer, seq)
          SELECT a.consumer, m.seq
          FROM unnest(${acks.map((ack) => ack.consumer)}::text[], ${acks.map((ack) => ack.seq)}::bigint[]) AS a(consumer, seq)
          JOIN bus_messages m ON m.seq = a.seq
          ON CONFLICT DO NOTHING`.pipe(Effect.as(acks.map(() => undefined)))
  })

  yield* sql`DELETE FROM bus_messages WHERE published_at < now() - ${RETENTION}::interval`.pipe(
    Effect.catchAllCause((cause) => health.report("Could not sweep old bus messages; will retry", cause)),
    Effect.repeat(Schedule.spaced("1 hour")),
    Effect.forkScoped
  )

  // Untraced: this runs for every message, and a traced Effect.fn captures a stack trace per call.
  const publish = Effect.fnUntraced(function*(subject: string, data: Uint8Array, options: { readonly msgId: string }) {
    const stream = streamFor(subject)
    if (stream === undefined) {
      return yield* new BusError({ message: `No bus stream takes the subject ${subject}` })
    }
    const traceparent = (yield* currentTraceparent) ?? null
    const message = { stream: streams[stream].name, subject, msgId: options.msgId, data, traceparent }
    const row = yield* insertMessages(message).pipe(Effect.mapError(toBusError(`Could not store a bus message on ${subject}`)))
    // No row: the msgId was published before, and that message is already stored and delivered.
    if (row !== undefined) yield* PubSub.publish(published, { ...message, seq: row.seq, publishedAt: row.publishedAt })
  })

  const ping = sql`SELECT 1`.pipe(
    Effect.mapError(toBusError("The bus database is unreachable")),
    Effect.timeoutFail({ duration: PING_TIMEOUT, onTimeout: () => new BusError({ message: "The bus database did not answer in time" }) }),
    Effect.asVoid,
    Effect.withSpan("MemoryBus.ping")
  )

  /** Subscribe to new messages first, then read the backlog, so that none falls between the two. */
  const openGroup = (spec: ConsumerSpec<unknown>, scope: Scope.CloseableScope) =>
    Effect.gen(function*() {
      const stream = streams[spec.stream].name
      const matches = (message: StoredMessage) => message.stream === stream && subjectMatches(spec.filter, message.subject)
      const queue = yield* Queue.unbounded<Delivery>()
      yield* Scope.addFinalizer(scope, Queue.shutdown(queue))
      const live = yield* PubSub.subscribe(published).pipe(Scope.extend(scope))
      const backlog = yield* unacknowledged({ consumer: spec.name, stream, subjectPrefix: literalPrefix(spec.filter) }).pipe(
        Effect.mapError(toBusError(`Could not load the unacknowledged messages of ${spec.name}`))
      )
      const pending = backlog.filter(matches)
      const inBacklog = new Set(pending.map((message) => message.seq))
      const unacked = new Map(pending.map((message) => [message.seq, message.publishedAt.getTime()]))
      yield* Queue.offerAll(queue, pending.map((message) => ({ message, deliveryCount: 1 })))
      yield* Queue.take(live).pipe(
        Effect.flatMap((message) => {
          if (!matches(message) || inBacklog.has(message.seq)) return Effect.void
          unacked.set(message.seq, message.publishedAt.getTime())
          return Queue.offer(queue, { message, deliveryCount: 1 })
        }),
        Effect.forever,
        // Joining runs as the uninterruptible acquire of the membership; the feed must still stop
        // when the group's scope closes.
        Effect.interruptible,
        Effect.forkIn(scope)
      )
      return { queue, scope, members: 1, unacked, inFlight: 0 } satisfies Group
    })

  const join = (key: string, spec: ConsumerSpec<unknown>) =>
    membership.withPermits(1)(
      Effect.gen(function*() {
        const existing = groups.get(key)
        if (existing !== undefined) {
          existing.members++
          return existing
        }
        const scope = yield* Scope.make()
        const group = yield* openGroup(spec, scope).pipe(Effect.onExit((exit) => (Exit.isFailure(exit) ? Scope.close(scope, exit) : Effect.void)))
        groups.set(key, group)
        return group
      })
    )

  const leave = (key: string) =>
    membership.withPermits(1)(
      Effect.suspend(() => {
        const group = groups.get(key)
        if (group === undefined || --group.members > 0) return Effect.void
        groups.delete(key)
        // Pending redeliveries die with the group; their messages are still unacknowledged in the
        // database, so the next consumer of this name starts with them.
        return Scope.close(group.scope, Exit.void)
      })
    )

  const consume = <E>(spec: ConsumerSpec<E>): Effect.Effect<void, BusError, Scope.Scope> =>
    Effect.gen(function*() {
      const key = `${spec.stream}/${spec.name}`
      const group = yield* Effect.acquireRelease(join(key, spec), () => leave(key))
      const retryDelay = spec.retryDelay ?? defaultRetryDelay

      const redeliver = (delivery: Delivery, delay: Duration.Duration) =>
        Effect.sleep(delay).pipe(
          Effect.zipRight(Queue.offer(group.queue, { message: delivery.message, deliveryCount: delivery.deliveryCount + 1 })),
          Effect.interruptible,
          Effect.forkIn(group.scope),
          Effect.asVoid
        )

      const handle = (delivery: Delivery) => {
        const message: BusMessage = {
          subject: delivery.message.subject,
          data: delivery.message.data,
          msgId: delivery.message.msgId,
          deliveryCount: delivery.deliveryCount,
          traceparent: delivery.message.traceparent ?? undefined
        }
        const annotations = { consumer: spec.name, subject: message.subject, deliveryCount: message.deliveryCount }
        return spec.handler(message).pipe(
          Effect.matchCauseEffect({
            onSuccess: () =>
              acknowledge({ consumer: spec.name, seq: delivery.message.seq }).pipe(
                Effect.tap(() => group.unacked.delete(delivery.message.seq)),
                Effect.catchAll((error) =>
                  health.report("Could not record a bus acknowledgement; the message will be delivered again", Cause.fail(error)).pipe(
                    Effect.annotateLogs(annotations),
                    Effect.zipRight(redeliver(delivery, retryDelay(delivery.deliveryCount)))
                  )
                )
              ),
            onFailure: (cause) => {
              const delay = redeliveryDelay(cause, message.deliveryCount, retryDelay)
              return health.report("Bus handler failed; the message will be delivered again", cause).pipe(
                Effect.annotateLogs({ ...annotations, retryInMs: Duration.toMillis(delay) }),
                Effect.zipRight(redeliver(delivery, delay))
              )
            }
          }),
          Effect.withSpan("MemoryBus.handle", { attributes: { consumer: spec.name, subject: message.subject } }),
          // In flight from the handler's start until it is acknowledged or set to come back.
          (handled) =>
            Effect.acquireUseRelease(Effect.sync(() => group.inFlight++), () => handled, () => Effect.sync(() => group.inFlight--))
        )
      }

      // Each worker waits for a message or for the close; a handler that has started always finishes.
      const stopping = yield* Deferred.make<void>()
      const nextDelivery = Effect.raceFirst(
        Effect.map(Queue.take(group.queue), Option.some),
        Effect.as(Deferred.await(stopping), Option.none<Delivery>())
      )
      const worker = Effect.gen(function*() {
        // Checked first: once closing, a waiting message would otherwise win the race every time.
        while (!(yield* Deferred.isDone(stopping))) {
          const delivery = yield* nextDelivery
          if (Option.isNone(delivery)) return
          yield* handle(delivery.value)
        }
      })
      const concurrency = Math.max(1, Math.floor(spec.concurrency ?? 1))
      const workers = yield* Effect.forkScoped(
        Effect.all(Array.from({ length: concurrency }, () => worker), { concurrency: "unbounded", discard: true })
      )
      // Registered after the workers, so it runs before their interruption: finish, then leave.
      yield* Effect.addFinalizer(() => Deferred.succeed(stopping, undefined).pipe(Effect.zipRight(Fiber.await(workers))))
    }).pipe(Effect.withSpan("MemoryBus.consume", { attributes: { consumer: spec.name, stream: spec.stream } }))

  const listen = (filter: string, onMessage: (message: BusMessage) => Effect.Effect<void>) =>
    Effect.gen(function*() {
      const live = yield* PubSub.subscribe(published)
      yield* Queue.take(live).pipe(
        Effect.flatMap((message) =>
          subjectMatches(filter, message.subject)
            ? onMessage({ subject: message.subject, data: message.data, msgId: message.msgId, deliveryCount: 1 })
            : Effect.void
        ),
        Effect.forever,
        Effect.forkScoped
      )
    })

  // Through the live feed, under a stream name no consumer has, so only listeners hear it.
  const broadcast = (subject: string, data: Uint8Array) =>
    PubSub.publish(published, { seq: -1, stream: "signals", subject, msgId: "", data, traceparent: null, publishedAt: new Date() })
      .pipe(Effect.asVoid)

  /**
   * A consumer open in this process is read from memory (its group knows what it holds); one that
   * is not (yet) from the tables: every message on its subjects it has not acknowledged waits.
   */
  const unacknowledgedSummary = SqlSchema.single({
    Request: Schema.Struct({ consumer: Schema.String, stream: Schema.String, filter: Schema.String }),
    Result: Schema.Struct({ pending: Schema.NumberFromString, oldest: Schema.NullOr(Schema.DateFromSelf) }),
    execute: ({ consumer, filter, stream }) =>
      sql`SELECT count(*) AS pending, min(m.published_at) AS oldest
          FROM bus_messages m
          WHERE m.stream = ${stream} AND starts_with(m.subject, ${literalPrefix(filter)}) AND m.subject ~ ${subjectPattern(filter)}
            AND NOT EXISTS (SELECT 1 FROM bus_acks a WHERE a.consumer = ${consumer} AND a.seq = m.seq)`
  })

  const lag = (consumer: ConsumerRef): Effect.Effect<Option.Option<ConsumerLag>, BusError> =>
    Effect.suspend(() => lagNow(consumer))

  const lagNow = (consumer: ConsumerRef): Effect.Effect<Option.Option<ConsumerLag>, BusError> => {
    const group = groups.get(`${consumer.stream}/${consumer.name}`)
    if (group !== undefined) {
      const oldest = group.unacked.values().next()
      return Effect.succeed(Option.some({
        pending: Math.max(0, group.unacked.size - group.inFlight),
        inFlight: group.inFlight,
        oldest: oldest.done === true ? undefined : new Date(oldest.value)
      }))
    }
    return unacknowledgedSummary({ consumer: consumer.name, stream: streams[consumer.stream].name, filter: consumer.filter }).pipe(
      Effect.map(({ oldest, pending }) => Option.some({ pending, inFlight: 0, oldest: oldest ?? undefined })),
      Effect.mapError(toBusError(`Could not count the unacknowledged messages of ${consumer.name}`))
    )
  }

  return { publish, consume, listen, broadcast, lag, ping } satisfies BusShape
})

export const layer: Layer.Layer<Bus, never, SqlClient.SqlClient | DependencyHealth> = Layer.scoped(Bus, make)
