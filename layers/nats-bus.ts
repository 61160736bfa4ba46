/**
 * The Bus over NATS JetStream (`NATS_URL`): the clustered adapter.
 *
 * Every stream of `streams` is a file-backed JetStream stream with limits retention (7 days) and a
 * 2-minute de-duplication window for `Nats-Msg-Id`, kept in `replicas` copies (`NATS_REPLICAS`): with 3
 * on a 3-server cluster, a publish is acknowledged only once two servers hold it, so losing one server
 * loses no accepted message. Consumers are durable pull consumers with
 * explicit acks, so a message whose handler fails, or whose process dies, comes back.
 *
 * Works with nats-server 2.9 and later: no per-message TTL, one filter subject per consumer.
 */
import {
  AckPolicy,
  type Consumer,
  type ConsumerInfo,
  type ConsumerMessages,
  type ConsumerUpdateConfig,
  DeliverPolicy,
  jetstream,
  JetStreamApiError,
  type JetStreamClient,
  type JetStreamManager,
  JetStreamError,
  jetstreamManager,
  type JsMsg,
  PubHeaders,
  RetentionPolicy,
  type SeqMsgRequest,
  StorageType
} from "@nats-io/jetstream"
import { connect, headers as natsHeaders, nanos, type NatsConnection, type Status, type Subscription } from "@nats-io/transport-node"
import { Cause, Clock, Deferred, Duration, Effect, Either, Fiber, FiberSet, Layer, Option, Runtime, type Scope } from "effect"
import * as os from "node:os"
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
  streams
} from "../services/bus/bus.ts"
import { currentTraceparent } from "../services/bus/tracing.ts"
import { DependencyHealth } from "../services/health/dependency-health.ts"

export interface NatsBusOptions {
  /** One server, or several comma-separated (a cluster's seeds: any one reachable at start will do). */
  readonly url: string
  /**
   * Namespace for streams and subjects, so that several deployments (or test suites) can share one
   * NATS server: stream `MAIL` becomes `<prefix>_MAIL`, subject `mail.x` travels as `<prefix>.mail.x`.
   * Empty: no namespace.
   */
  readonly prefix: string
  /**
   * Copies of each stream across the cluster's servers (1 to 5; default 1). Its consumers inherit it.
   * More than 1 needs a NATS cluster with at least that many JetStream servers.
   */
  readonly replicas?: number
}

/** Stream retention: long enough to ride out a worker outage, short enough to bound the disk. */
const MAX_AGE = Duration.days(7)
/** Publishers retrying a lost PubAck do so within seconds; two minutes is JetStream's default. */
const DUPLICATE_WINDOW = Duration.minutes(2)
/** Bound on every request to the server, so a publish during an outage fails instead of hanging. */
const REQUEST_TIMEOUT = Duration.seconds(5)
const PING_TIMEOUT = Duration.seconds(2)
/** A publish gets this long beyond the SDK's request time-out before its caller is told it failed. */
const PUBLISH_GRACE_MS = 1_000
/** The W3C trace context header a message carries when tracing is on (services/bus/tracing.ts). */
const TRACEPARENT_HEADER = "traceparent"
const DEFAULT_ACK_WAIT = Duration.seconds(30)
/** How long one pull request waits on the server for messages before the next is sent. */
const PULL_EXPIRES = Duration.seconds(10)
/** Pause after a failed pull (server gone, consumer deleted) before trying again. */
const PULL_RETRY = Duration.seconds(1)
/**
 * A pull the server stopped answering (two of its idle heartbeats missed) is sent again at once, not
 * reported: the request was lost (a consumer's leader moved, a server too busy to keep it), or this
 * process was too busy to read the answers. The second in a row (20 s of silence) is reported, as is
 * any other failure. A lost connection is reported by the connection's own status
 * (followConnectionStatus).
 */
const UNANSWERED_PULLS = 2

// JetStream API error codes (nats-server's errors.json) we react to.
const STREAM_NAME_IN_USE = 10058
const CONSUMER_NAME_IN_USE = 10013
const CONSUMER_ALREADY_EXISTS = 10148
const CONSUMER_NOT_FOUND = 10014
/** A cluster's servers still choosing the JetStream meta leader (at start, or after one left). */
const JETSTREAM_UNAVAILABLE = 10008

/** Stream and durable names may not hold `.`, `*`, `>`, whitespace or path separators. */
const natsName = (name: string) => name.replace(/[^A-Za-z0-9_-]/g, "_")

/** The JetStream stream that holds `stream` under `prefix` (also used by tests to clean up). */
export const streamName = (prefix: string, stream: StreamName): string =>
  prefix === "" ? streams[stream].name : natsName(`${prefix}_${streams[stream].name}`)

const apiCode = (error: unknown) => (error instanceof JetStreamApiError ? error.code : undefined)

const messageOf = (cause: unknown) => (cause instanceof Error ? cause.message : String(cause))

/** The SDK's end of a pull whose idle heartbeats stopped coming (see UNANSWERED_PULLS). */
const heartbeatsMissed = (error: BusError) => error.cause instanceof JetStreamError && error.cause.message === "heartbeats missed"

const busError = (message: string) => (cause: unknown) => new BusError({ message: `${message}: ${messageOf(cause)}`, cause })

export const make = (options: NatsBusOptions): Effect.Effect<BusShape, BusError, Scope.Scope | DependencyHealth> =>
  Effect.gen(function*() {
    const health = yield* DependencyHealth
    const prefix = options.prefix
    const toWire = (subject: string) => (prefix === "" ? subject : `${prefix}.${subject}`)
    const fromWire = (subject: string) =>
      prefix !== "" && subject.startsWith(`${prefix}.`) ? subject.slice(prefix.length + 1) : subject
    const requestTimeout = Duration.toMillis(REQUEST_TIMEOUT)

    const nc = yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: () =>
          connect({
            servers: options.url.split(",").map((server) => server.trim()).filter((server) => server !== ""),
            name: `mailroom ${os.hostname()} pid ${process.pid}`,
            // A bus outage is waited out, never fatal: publishes fail (bounded by their timeout)
            // until the connection is back, and consumers resume by themselves.
            maxReconnectAttempts: -1,
            timeout: requestTimeout,
            // The SDK would capture a stack trace for every request (each publish): ~4% of an SMTP
            // node's CPU under load. Our errors name the subject and operation instead.
            noAsyncTraces: true
          }),
        catch: busError(`Could not connect to NATS at ${withoutCredentials(options.url)}`)
      }),
      (nc) =>
        // drain() lets pending acks and publishes reach the server; during an outage it would wait
        // for the reconnection, so it gets a bound and the connection is then closed outright.
        Effect.tryPromise(() => nc.drain()).pipe(
          Effect.timeout(REQUEST_TIMEOUT),
          Effect.catchAll(() => Effect.promise(() => nc.close()))
        )
    )

    yield* followConnectionStatus(nc, withoutCredentials(options.url), health)

    const js: JetStreamClient = jetstream(nc, { timeout: requestTimeout })
    const jsm: JetStreamManager = yield* Effect.tryPromise({
      try: () => jetstreamManager(nc, { timeout: requestTimeout }),
      catch: busError(`JetStream is not available on ${withoutCredentials(options.url)} (start nats-server with -js)`)
    })

    yield* Effect.forEach(Object.keys(streams) as Array<StreamName>, (stream) => ensureStream(jsm, stream, prefix, toWire, options.replicas ?? 1), {
      discard: true
    })

    /**
     * A duplicate PubAck (same msgId within the window) is success: the message is stored once.
     * The SDK's own timer covers the request; the deadline here also covers a send stuck behind a
     * reconnection, so that the caller always hears back. It is a plain timer, not Effect.timeout:
     * this runs for every message, and a raced fiber would cost about as much as the publish itself.
     */
    const publish = (subject: string, data: Uint8Array, publishOptions: { readonly msgId: string }) =>
      Effect.flatMap(currentTraceparent, (traceparent) => publishTraced(subject, data, publishOptions.msgId, traceparent))

    const publishTraced = (subject: string, data: Uint8Array, msgId: string, traceparent: string | undefined) =>
      Effect.async<void, BusError>((resume) => {
        let settled = false
        const settle = (result: Effect.Effect<void, BusError>) => {
          if (settled) return
          settled = true
          clearTimeout(deadline)
          resume(result)
        }
        const deadline = setTimeout(
          () => settle(Effect.fail(new BusError({ message: `Publishing to ${subject} timed out` }))),
          requestTimeout + PUBLISH_GRACE_MS
        )
        const traced = traceparent === undefined ? undefined : natsHeaders()
        traced?.set(TRACEPARENT_HEADER, traceparent!)
        js.publish(toWire(subject), data, { msgID: msgId, timeout: requestTimeout, ...(traced ? { headers: traced } : {}) }).then(
          () => settle(Effect.void),
          (error: unknown) => settle(Effect.fail(busError(`Could not publish to ${subject}`)(error)))
        )
        return Effect.sync(() => {
          settled = true
          clearTimeout(deadline)
        })
      })

    const ping = Effect.tryPromise({
      try: () => jsm.getAccountInfo(),
      catch: busError("NATS JetStream is unreachable")
    }).pipe(
      Effect.timeoutFail({ duration: PING_TIMEOUT, onTimeout: () => new BusError({ message: "NATS JetStream did not answer in time" }) }),
      Effect.asVoid,
      Effect.withSpan("NatsBus.ping")
    )

    const consume = <E>(spec: ConsumerSpec<E>): Effect.Effect<void, BusError, Scope.Scope> =>
      runConsumer(spec, { jsm, js, prefix, toWire, fromWire, health }).pipe(
        Effect.withSpan("NatsBus.consume", { attributes: { consumer: spec.name, stream: spec.stream } })
      )

    // A core subscription: JetStream's publishes reach plain subscribers of their subject too.
    const listen = (filter: string, onMessage: (message: BusMessage) => Effect.Effect<void>) =>
      Effect.gen(function*() {
        const run = Runtime.runFork(yield* Effect.runtime<never>())
        yield* Effect.acquireRelease(
          Effect.sync(() =>
            nc.subscribe(toWire(filter), {
              callback: (error, message) => {
                if (error !== null) return
                run(onMessage({
                  subject: fromWire(message.subject),
                  data: message.data,
                  msgId: message.headers?.get("Nats-Msg-Id") ?? "",
                  deliveryCount: 1
                }))
              }
            })
          ),
          (subscription) => Effect.sync(() => subscription.unsubscribe())
        )
      })

    // A core publish: best effort by definition (no stream holds `signals.*`). A closed or draining
    // connection throws; the signal is then lost, which listeners are built to survive.
    const broadcast = (subject: string, data: Uint8Array) =>
      Effect.sync(() => {
        try {
          nc.publish(toWire(subject), data)
        } catch {
          // see above
        }
      })

    /** The time of the first message on `filter` from stream sequence `seq` on. */
    const firstOnFilter = async (stream: string, seq: number, filter: string) => {
      // `next_by_subj` needs nats-server 2.9; the SDK's type only lists `seq`.
      const request: SeqMsgRequest = Object.assign({ seq }, { next_by_subj: toWire(filter) })
      return (await jsm.streams.getMessage(stream, request))?.time
    }

    /**
     * From the consumer's info: what waits (num_pending) and what is delivered but not acknowledged
     * (num_ack_pending: in a handler, or failed and waiting out its retry delay). The oldest unacknowledged message is the first one on the
     * filter after the ack floor (every message before the floor is acknowledged); its time is the
     * stream's.
     *
     * A consumer no process has started yet (workers that crash at start, a NATS_PREFIX that differs)
     * would be given every message on its filter the stream holds (DeliverPolicy.All): they all wait,
     * counted from the stream's own state for that filter (the stream holds other subjects too), the
     * oldest its first. So a stage nobody runs shows its backlog growing, as the embedded bus's does.
     */
    const lag = (consumer: ConsumerRef): Effect.Effect<Option.Option<ConsumerLag>, BusError> => {
      const stream = streamName(prefix, consumer.stream)
      return Effect.tryPromise({
        try: async (): Promise<Option.Option<ConsumerLag>> => {
          let info: ConsumerInfo
          try {
            info = await jsm.consumers.info(stream, natsName(consumer.name))
          } catch (error) {
            if (apiCode(error) === CONSUMER_NOT_FOUND) return Option.some(await unconsumedLag(stream, consumer.filter))
            throw error
          }
          const pending = info.num_pending
          const inFlight = info.num_ack_pending
          if (pending + inFlight === 0) return Option.some({ pending: 0, inFlight: 0, oldest: undefined })
          return Option.some({ pending, inFlight, oldest: await firstOnFilter(stream, info.ack_floor.stream_seq + 1, consumer.filter) })
        },
        catch: busError(`Could not read the lag of ${stream}/${consumer.name}`)
      })
    }

    /** Every message of `stream` on `filter`, as waiting for a consumer that does not exist yet. */
    const unconsumedLag = async (stream: string, filter: string): Promise<ConsumerLag> => {
      const info = await jsm.streams.info(stream, { subjects_filter: toWire(filter) })
      const pending = Object.values(info.state.subjects ?? {}).reduce((total, count) => total + count, 0)
      if (pending === 0) return { pending: 0, inFlight: 0, oldest: undefined }
      return { pending, inFlight: 0, oldest: await firstOnFilter(stream, info.state.first_seq, filter) }
    }

    return { publish, consume, listen, broadcast, lag, ping } satisfies BusShape
  })

export const layer = (options: NatsBusOptions): Layer.Layer<Bus, BusError, DependencyHealth> => Layer.scoped(Bus, make(options))

/**
 * Connection state changes are worth an operator's attention; the rest is noise. A lost connection
 * is the start of a bus outage and a reconnection its end (DependencyHealth logs each once, with the
 * operations that failed in between).
 *
 * Read by hand rather than through Stream.fromAsyncIterable: that one's finalizer awaits the
 * iterator's return(), which queues behind the pending next() until the next status event (the
 * 2-minute ping), holding up the layer's release. The feed ends by itself with the connection.
 */
/** NATS_URL as logs may show it: each server's user and password (or token) left out. */
export const withoutCredentials = (urls: string) =>
  urls.split(",").map((server) => server.trim().replace(/^([a-z]+:\/\/)[^@/]*@/i, "$1")).join(",")

const followConnectionStatus = (nc: NatsConnection, url: string, health: DependencyHealth) => {
  const statuses = nc.status()[Symbol.asyncIterator]()
  const follow = (status: Status) => {
    switch (status.type) {
      case "disconnect":
        return health.failed("bus", `lost the connection to NATS at ${url}; reconnecting`)
      case "reconnect":
        return health.recovered("bus")
      case "error":
        return Effect.logWarning(`NATS reported an error: ${messageOf(status.error)}`)
      default:
        return Effect.void
    }
  }
  return Effect.gen(function*() {
    while (true) {
      const next = yield* Effect.tryPromise(() => statuses.next())
      if (next.done === true) return
      yield* follow(next.value)
    }
  }).pipe(
    Effect.catchAllCause((cause) => Effect.logDebug("NATS status feed ended", cause)),
    Effect.forkScoped
  )
}

/**
 * How long a request at start (creating a stream or a consumer) is made again while JetStream does not
 * answer in time, and the longest pause between tries (1 s, doubled each time, up to this).
 */
const START_PATIENCE = Duration.minutes(3)
const START_RETRY_MAX = Duration.seconds(15)

/**
 * `request` (creating or updating a stream or consumer to given settings: the same however often it
 * is done), made again while JetStream does not answer it within REQUEST_TIMEOUT (a loaded machine,
 * or a cluster's servers still starting or placing replicas: seen twice in a row on a machine at load
 * 12-16, ending the process after it had started listening) or answers that it is temporarily
 * unavailable (a cluster without a meta leader yet), saying so, for up to `patience`. An
 * answer refusing it (a bad setting, a stream that is not there) fails at once. `doing` says what is
 * retried in the log; `failure` starts the error's message.
 */
const whileUnanswered = <A>(doing: string, failure: string, request: Effect.Effect<A, unknown>, patience: Duration.Duration) =>
  Effect.gen(function*() {
    const started = yield* Clock.currentTimeMillis
    const failed = busError(failure)
    let pause = Duration.seconds(1)
    while (true) {
      const made = yield* Effect.either(request)
      if (Either.isRight(made)) return made.right
      const error = made.left
      const waited = Duration.millis((yield* Clock.currentTimeMillis) - started)
      const passing = isTimeout(error) ? "did not answer in time" : apiCode(error) === JETSTREAM_UNAVAILABLE ? "was unavailable" : undefined
      if (passing === undefined) return yield* Effect.fail(failed(error))
      if (Duration.greaterThan(Duration.sum(waited, pause), patience)) {
        return yield* Effect.fail(failed(new Error(`${messageOf(error)} (JetStream ${passing} for ${Duration.format(patience)} of tries)`, { cause: error })))
      }
      yield* Effect.logWarning(
        `NATS JetStream ${passing} ${doing}: trying again in ${Duration.format(pause)} (for up to ${Duration.format(patience)})`
      )
      yield* Effect.sleep(pause)
      pause = Duration.min(Duration.times(pause, 2), START_RETRY_MAX)
    }
  })

/** Create the stream, or bring an existing one to this configuration (its replica count included). */
export const ensureStream = (
  jsm: Pick<JetStreamManager, "streams">,
  stream: StreamName,
  prefix: string,
  toWire: (subject: string) => string,
  replicas: number,
  patience: Duration.Duration = START_PATIENCE
) => {
  const name = streamName(prefix, stream)
  const needsCluster = replicas > 1
    ? ` with ${replicas} replicas (NATS_REPLICAS: needs a NATS cluster of at least ${replicas} JetStream servers)`
    : ""
  const settings = {
    subjects: streams[stream].subjects.map(toWire),
    max_age: nanos(Duration.toMillis(MAX_AGE)),
    duplicate_window: nanos(Duration.toMillis(DUPLICATE_WINDOW)),
    num_replicas: replicas
  }
  return whileUnanswered(
    `creating the stream ${name}`,
    `Could not create or update the NATS stream ${name}${needsCluster}`,
    Effect.tryPromise({
      try: async () => {
        try {
          await jsm.streams.add({ name, ...settings, storage: StorageType.File, retention: RetentionPolicy.Limits })
        } catch (error) {
          // Same name, another configuration (say an older max_age, or fewer replicas): update what may change.
          if (apiCode(error) !== STREAM_NAME_IN_USE) throw error
          await jsm.streams.update(name, settings)
        }
      },
      catch: (error) => error
    }),
    patience
  )
}

/** Whether a JetStream request failed for want of an answer in time (nats.js's TimeoutError). */
const isTimeout = (error: unknown) => error instanceof Error && error.name === "TimeoutError"

interface ConsumerContext {
  readonly jsm: JetStreamManager
  readonly js: JetStreamClient
  readonly prefix: string
  readonly toWire: (subject: string) => string
  readonly fromWire: (subject: string) => string
  readonly health: DependencyHealth
}

/** Create the durable consumer, or update it when it exists with other settings (`whileUnanswered`). */
export const ensureConsumer = (
  jsm: Pick<JetStreamManager, "consumers">,
  stream: string,
  durable: string,
  settings: Pick<ConsumerUpdateConfig, "filter_subject" | "ack_wait" | "max_ack_pending">,
  patience: Duration.Duration = START_PATIENCE
) =>
  whileUnanswered(
    `creating the consumer ${durable} on ${stream}`,
    `Could not create the NATS consumer ${durable} on ${stream}`,
    createOrUpdateConsumer(jsm, stream, durable, settings),
    patience
  )

const createOrUpdateConsumer = (
  jsm: Pick<JetStreamManager, "consumers">,
  stream: string,
  durable: string,
  settings: Pick<ConsumerUpdateConfig, "filter_subject" | "ack_wait" | "max_ack_pending">
) =>
  Effect.tryPromise({
    try: async (): Promise<ConsumerInfo> => {
      try {
        return await jsm.consumers.add(stream, {
          ...settings,
          durable_name: durable,
          ack_policy: AckPolicy.Explicit,
          deliver_policy: DeliverPolicy.All
        })
      } catch (error) {
        // Servers from 2.10 refuse to create over an existing durable with other settings.
        const code = apiCode(error)
        if (code !== CONSUMER_ALREADY_EXISTS && code !== CONSUMER_NAME_IN_USE) throw error
        return await jsm.consumers.update(stream, durable, settings)
      }
    },
    catch: (error) => error
  })

/**
 * Pull, handle and acknowledge until the scope closes.
 *
 * Messages are fetched in batches no larger than the free handler slots, rather than with the SDK's
 * `consume()`: that one keeps pulling as messages arrive, whether or not they are handled, and a
 * message waiting in a client-side buffer still runs down its ack_wait and gets redelivered.
 */
const runConsumer = <E>(spec: ConsumerSpec<E>, ctx: ConsumerContext) =>
  Effect.gen(function*() {
    const concurrency = Math.max(1, Math.floor(spec.concurrency ?? 1))
    const ackWait = Duration.decode(spec.ackWait ?? DEFAULT_ACK_WAIT)
    const retryDelay = spec.retryDelay ?? defaultRetryDelay
    const stream = streamName(ctx.prefix, spec.stream)
    const durable = natsName(spec.name)

    const info = yield* ensureConsumer(ctx.jsm, stream, durable, {
      filter_subject: ctx.toWire(spec.filter),
      ack_wait: nanos(Duration.toMillis(ackWait)),
      // Server-side cap on unacknowledged messages across every process sharing the durable.
      max_ack_pending: Math.max(1000, concurrency * 4)
    })
    const consumer: Consumer = ctx.js.consumers.getConsumerFromInfo(info)

    const permits = yield* Effect.makeSemaphore(concurrency)
    const handlers = yield* FiberSet.make<void, never>()
    const stopping = yield* Deferred.make<void>()
    const stopped = Deferred.await(stopping)

    const handle = (msg: JsMsg) => {
      const message: BusMessage = {
        subject: ctx.fromWire(msg.subject),
        data: msg.data,
        msgId: msg.headers?.get(PubHeaders.MsgIdHdr) ?? "",
        deliveryCount: msg.info.deliveryCount,
        traceparent: msg.headers?.get(TRACEPARENT_HEADER) || undefined
      }
      return spec.handler(message).pipe(
        keepInProgress(msg, ackWait),
        Effect.matchCauseEffect({
          onSuccess: () => acknowledge(msg, spec.name, message, ctx.health),
          onFailure: (cause) => {
            const delay = redeliveryDelay(cause, message.deliveryCount, retryDelay)
            return ctx.health.report("Bus handler failed; the message will be delivered again", cause).pipe(
              Effect.annotateLogs({
                consumer: spec.name,
                subject: message.subject,
                deliveryCount: message.deliveryCount,
                retryInMs: Duration.toMillis(delay)
              }),
              Effect.zipRight(negativeAcknowledge(msg, delay))
            )
          }
        }),
        Effect.withSpan("NatsBus.handle", { attributes: { consumer: spec.name, subject: message.subject } })
      )
    }

    // Take a slot in this fiber, so the next batch is sized by what is really free, and give it back
    // when the handler (and its ack) is done. The mask keeps a slot from leaking on interruption.
    const dispatch = (msg: JsMsg) =>
      Effect.uninterruptibleMask((restore) =>
        restore(permits.take(1)).pipe(
          Effect.zipRight(FiberSet.run(handlers, restore(handle(msg)).pipe(Effect.ensuring(permits.release(1)))))
        )
      )

    /** Wait for at least one free slot; the number free, or none once the consumer is closing. */
    const freeSlots = Effect.raceFirst(
      Effect.uninterruptibleMask((restore) =>
        restore(permits.take(1)).pipe(Effect.zipRight(permits.release(1)), Effect.map(Option.some))
      ),
      Effect.as(stopped, Option.none<number>())
    )

    // One pull request. When the consumer closes, the request is ended (endPull) and every message
    // it brings from then on, or brought and this loop had not read yet, is handed back (a nak)
    // rather than started, so that another process takes it now instead of after its ack_wait. Handed
    // back once the pull has ended: while the server still delivers to it, a nak'd message would be
    // sent straight back to it, to be lost as it closes.
    const pullBatch = (size: number) =>
      Effect.acquireUseRelease(
        Effect.tryPromise({
          try: () => consumer.fetch({ max_messages: size, expires: Duration.toMillis(PULL_EXPIRES) }),
          catch: busError(`Could not pull from ${stream}/${durable}`)
        }),
        (batch) => {
          const unstarted: Array<JsMsg> = []
          return Effect.gen(function*() {
            yield* Effect.forkScoped(Effect.zipRight(stopped, endPull(batch)))
            const iterator = batch[Symbol.asyncIterator]()
            while (true) {
              const next = yield* Effect.tryPromise({
                try: () => iterator.next(),
                catch: busError(`Pulling from ${stream}/${durable} failed`)
              })
              if (next.done === true) return
              if (yield* Deferred.isDone(stopping)) unstarted.push(next.value)
              else yield* dispatch(next.value)
            }
          }).pipe(
            Effect.scoped,
            Effect.ensuring(Effect.suspend(() => (unstarted.length === 0 ? Effect.void : handBack(unstarted))))
          )
        },
        // Not close(): it waits for the iterator to be read to its end, which an interrupted reader
        // never does. stop() unsubscribes at once; what an interrupted reader left unread comes back
        // after ack_wait.
        (batch) => Effect.sync(() => batch.stop())
      )

    /**
     * Nak what a closing pull brought. The server keeps the ended pull among the consumer's waiting
     * requests until it next looks at them, and would take the first message nak'd for it and drop it
     * there (seen on nats-server 2.9.10: that one stayed in flight until ack_wait). Asking for the
     * consumer's info has the server clear out requests nobody listens to any more.
     */
    const handBack = (messages: ReadonlyArray<JsMsg>) =>
      Effect.tryPromise(() => ctx.jsm.consumers.info(stream, durable)).pipe(
        // Without it a message may wait out its ack_wait: later, not lost.
        Effect.catchAll((error) => Effect.logDebug("Could not read a consumer's info before handing messages back", error)),
        Effect.zipRight(Effect.forEach(messages, (msg) => negativeAcknowledge(msg, Duration.zero), { discard: true }))
      )

    const pullLoop = Effect.gen(function*() {
      let unanswered = 0
      // Checked first: once closing, a free slot would otherwise win the race every time.
      while (!(yield* Deferred.isDone(stopping))) {
        const free = yield* freeSlots
        if (Option.isNone(free)) return
        yield* pullBatch(free.value).pipe(
          Effect.zipRight(Effect.sync(() => (unanswered = 0))),
          Effect.catchAll((error) => {
            if (heartbeatsMissed(error) && ++unanswered < UNANSWERED_PULLS) {
              return Effect.logDebug(`A pull from ${stream}/${durable} went unanswered (heartbeats missed); pulling again`)
            }
            return ctx.health.report("NATS pull failed; retrying", Cause.fail(error)).pipe(
              Effect.annotateLogs({ consumer: spec.name }),
              Effect.zipRight(Effect.raceFirst(Effect.sleep(PULL_RETRY), stopped))
            )
          })
        )
      }
    })

    const puller = yield* Effect.forkScoped(pullLoop)
    // Registered last, so it runs first on close: stop pulling, let the puller hand over what it
    // already received, then wait for every handler to finish and acknowledge.
    yield* Effect.addFinalizer(() =>
      Deferred.succeed(stopping, undefined).pipe(
        Effect.zipRight(Fiber.await(puller)),
        Effect.zipRight(FiberSet.awaitEmpty(handlers))
      )
    )
  })

/**
 * End a pull before it expires, losing nothing it brought. The server goes on delivering to a pull
 * until it has read our unsubscribe, and a message already on its way when the client unsubscribed
 * (stop()) would be dropped on arrival while the server counts it delivered: it waited out its
 * ack_wait (seen: every message published as a worker stopped). A drain unsubscribes and reads on
 * until the server answers a ping sent after it, so whatever was sent before is read and handed back;
 * the SDK then ends the pull's iterator. A connection too slow to answer gets stop() after
 * REQUEST_TIMEOUT. (With the consumer's leader on another NATS server, a message that was crossing to
 * ours as it read the unsubscribe is still lost to ack_wait: that window is the route's latency.)
 */
const endPull = (batch: ConsumerMessages) =>
  Effect.suspend(() => {
    const subscription = pullSubscription(batch)
    const stop = Effect.sync(() => batch.stop())
    if (subscription === undefined || subscription.isClosed()) return stop
    return Effect.tryPromise(() => subscription.drain()).pipe(
      Effect.timeout(REQUEST_TIMEOUT),
      // A drain that failed (the connection closed) or took too long: nothing more can be read anyway.
      Effect.catchAll(() => stop)
    )
  })

/**
 * The core subscription a pull's messages arrive on: the SDK's pull (PullConsumerMessagesImpl) keeps
 * it as `sub`, outside the type fetch() returns. Undefined if a later SDK moves it (endPull then stops).
 */
const pullSubscription = (batch: ConsumerMessages): Subscription | undefined => {
  const sub: unknown = "sub" in batch ? batch.sub : undefined
  return isSubscription(sub) ? sub : undefined
}

const isSubscription = (value: unknown): value is Subscription =>
  typeof value === "object" && value !== null && "drain" in value && typeof value.drain === "function" &&
  "isClosed" in value && typeof value.isClosed === "function"

/**
 * While a handler runs past half its ack_wait, tell the server it is still at work, so that a long
 * but healthy handler is not mistaken for a dead process and its message handed to another.
 */
const keepInProgress = (msg: JsMsg, ackWait: Duration.Duration) => <A, E, R>(self: Effect.Effect<A, E, R>) => {
  const every = Duration.millis(Math.max(100, Duration.toMillis(ackWait) / 2))
  const signal = () => {
    try {
      msg.working()
    } catch {
      // A lost progress signal at worst lets the message be delivered twice, which handlers tolerate.
    }
  }
  // A plain interval rather than a raced fiber: this wraps every message handled.
  return Effect.acquireUseRelease(
    Effect.sync(() => setInterval(signal, Duration.toMillis(every))),
    () => self,
    (timer) => Effect.sync(() => clearInterval(timer))
  )
}

/** Acknowledge and wait for the server to confirm it, so that a clean close leaves nothing to redeliver. */
const acknowledge = (msg: JsMsg, consumer: string, message: BusMessage, health: DependencyHealth) =>
  Effect.tryPromise({
    try: () => msg.ackAck({ timeout: Duration.toMillis(REQUEST_TIMEOUT) }),
    catch: busError("Acknowledgement not confirmed")
  }).pipe(
    Effect.catchAll((error) =>
      health.report("Bus acknowledgement not confirmed; the message may be delivered again", Cause.fail(error)).pipe(
        Effect.annotateLogs({ consumer, subject: message.subject, deliveryCount: message.deliveryCount })
      )
    ),
    Effect.asVoid
  )

const negativeAcknowledge = (msg: JsMsg, delay: Duration.Duration) =>
  Effect.try(() => msg.nak(Duration.toMillis(delay))).pipe(
    // Without the nak (connection gone) the server redelivers after ack_wait instead: later, not lost.
    Effect.catchAll((error) => Effect.logDebug("Could not nak a bus message", error.cause))
  )
