/**
 * Creating NATS consumers and streams at start (layers/nats-bus.ts `ensureConsumer`, `ensureStream`):
 * a JetStream request that is not answered in time (a loaded machine: seen twice in a row at load 12-16, ending the process
 * after it had started listening) is made again, with a pause that doubles from 1 s up to 15 s, each
 * retry logged with what it waits for, for up to 3 minutes; past that, and at once for an answer that
 * refuses (a bad setting), it fails naming the consumer and the stream.
 *
 * Against a stand-in for JetStream's consumer and stream API, which times out or refuses as told: the
 * pauses are the TestClock's. (That streams and consumers are made on a real server is
 * test/bus.test.ts; that a single server refuses three replicas at once, test/cluster/nats-cluster.)
 */
import { describe, expect, it } from "@effect/vitest"
import { type ConsumerInfo, JetStreamApiError, type JetStreamManager } from "@nats-io/jetstream"
import { TimeoutError } from "@nats-io/transport-node"
import { type Duration, Effect, Either, Fiber, Logger, LogLevel, TestClock } from "effect"
import * as NatsBus from "../layers/nats-bus.ts"

const settings = { filter_subject: "t.mail.sent", ack_wait: 30_000_000_000, max_ack_pending: 1000 }

/** JetStream's consumer API, failing the first `failures` requests to add with what `failure` makes. */
const standIn = (failures: number, failure: () => Error) => {
  const asked: Array<string> = []
  const jsm = {
    consumers: {
      add: (stream: string, config: { durable_name?: string }) => {
        asked.push(`${stream}/${config.durable_name}`)
        return asked.length <= failures ? Promise.reject(failure()) : Promise.resolve({ name: config.durable_name } as ConsumerInfo)
      }
    }
  } as unknown as Pick<JetStreamManager, "consumers">
  return { jsm, asked }
}

/** `ensure` in a fiber of its own, its log lines (level and message) in `lines`. */
const inFiber = <A, E>(ensure: Effect.Effect<A, E>, lines: Array<string>) =>
  Effect.fork(
    ensure.pipe(
      Effect.either,
      Effect.provide(Logger.replace(Logger.defaultLogger, Logger.make(({ logLevel, message }) => lines.push(`${logLevel.label} ${String(message)}`)))),
      Logger.withMinimumLogLevel(LogLevel.Debug)
    )
  )

const ensuring = (jsm: Pick<JetStreamManager, "consumers">, lines: Array<string>) =>
  inFiber(NatsBus.ensureConsumer(jsm, "t_MAIL", "index-sent", settings), lines)

/** Move the TestClock by `by`, then let the woken fibers run (a wall-clock moment). */
const wait = (by: Duration.DurationInput) => TestClock.adjust(by).pipe(Effect.zipRight(Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 20)))))

const retrying = (seconds: number) =>
  `WARN NATS JetStream did not answer in time creating the consumer index-sent on t_MAIL: trying again in ${seconds}s (for up to 3m)`

describe("creating a NATS consumer at start", () => {
  it.effect("tries again while JetStream does not answer in time, saying so, and then has the consumer", () =>
    Effect.gen(function*() {
      const { asked, jsm } = standIn(3, () => new TimeoutError())
      const lines: Array<string> = []
      const fiber = yield* ensuring(jsm, lines)
      yield* wait("0 millis")
      expect(asked).toHaveLength(1)
      yield* wait("1 second")
      yield* wait("2 seconds")
      expect(fiber.unsafePoll()).toBeNull()
      yield* wait("4 seconds")
      const made = yield* Fiber.join(fiber)
      expect(made).toEqual(Either.right({ name: "index-sent" }))
      expect(asked).toEqual(Array(4).fill("t_MAIL/index-sent"))
      expect(lines).toEqual([retrying(1), retrying(2), retrying(4)])
    }))

  it.effect("gives up after 3 minutes of timeouts, naming the consumer and the stream", () =>
    Effect.gen(function*() {
      const { asked, jsm } = standIn(Infinity, () => new TimeoutError())
      const lines: Array<string> = []
      const fiber = yield* ensuring(jsm, lines)
      for (let i = 0; i < 20 && fiber.unsafePoll() === null; i++) yield* wait("15 seconds")
      const made = yield* Fiber.join(fiber)
      expect(Either.isLeft(made) && made.left.message).toBe(
        "Could not create the NATS consumer index-sent on t_MAIL: timeout (JetStream did not answer in time for 3m of tries)"
      )
      // Pauses of 1, 2, 4 and 8 s, then of 15 s: 180 s in all, where the next would pass 3 minutes.
      expect(lines).toEqual([1, 2, 4, 8, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15].map(retrying))
      expect(asked).toHaveLength(16)
    }))

  it.effect("tries again while a NATS cluster's JetStream is temporarily unavailable (no meta leader yet)", () =>
    Effect.gen(function*() {
      const unavailable = () => new JetStreamApiError({ code: 503, err_code: 10008, description: "JetStream system temporarily unavailable" })
      const { asked, jsm } = standIn(1, unavailable)
      const lines: Array<string> = []
      const fiber = yield* ensuring(jsm, lines)
      yield* wait("0 millis")
      yield* wait("1 second")
      expect(yield* Fiber.join(fiber)).toEqual(Either.right({ name: "index-sent" }))
      expect(asked).toHaveLength(2)
      expect(lines).toEqual(["WARN NATS JetStream was unavailable creating the consumer index-sent on t_MAIL: trying again in 1s (for up to 3m)"])
    }))

  it.effect("fails at once on an answer that refuses it", () =>
    Effect.gen(function*() {
      const refusal = () =>
        new JetStreamApiError({ code: 400, err_code: 10052, description: "consumer config invalid: filter subject is not a valid subset" })
      const { asked, jsm } = standIn(Infinity, refusal)
      const lines: Array<string> = []
      const made = yield* Fiber.join(yield* ensuring(jsm, lines))
      expect(Either.isLeft(made) && made.left.message).toBe(
        "Could not create the NATS consumer index-sent on t_MAIL: consumer config invalid: filter subject is not a valid subset"
      )
      expect(asked).toHaveLength(1)
      expect(lines).toEqual([])
    }))
})

describe("creating a NATS stream at start", () => {
  it.effect("tries again while JetStream does not answer in time, past three tries, saying so, and then has the stream", () =>
    Effect.gen(function*() {
      const asked: Array<string> = []
      const jsm = {
        streams: {
          add: (config: { name: string; num_replicas: number }) => {
            asked.push(`${config.name} x${config.num_replicas}`)
            return asked.length <= 5 ? Promise.reject(new TimeoutError()) : Promise.resolve({ config })
          }
        }
      } as unknown as Pick<JetStreamManager, "streams">
      const lines: Array<string> = []
      const fiber = yield* inFiber(NatsBus.ensureStream(jsm, "events", "t", (subject) => `t.${subject}`, 1), lines)
      yield* wait("0 millis")
      for (const seconds of [1, 2, 4, 8]) {
        expect(fiber.unsafePoll()).toBeNull()
        yield* wait(`${seconds} seconds`)
      }
      expect(fiber.unsafePoll()).toBeNull()
      yield* wait("15 seconds")
      expect(Either.isRight(yield* Fiber.join(fiber))).toBe(true)
      expect(asked).toEqual(Array(6).fill("t_EVENTS x1"))
      expect(lines).toEqual([1, 2, 4, 8, 15].map((seconds) =>
        `WARN NATS JetStream did not answer in time creating the stream t_EVENTS: trying again in ${seconds}s (for up to 3m)`
      ))
    }))
})
