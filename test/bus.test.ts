/**
 * The Bus contract (services/bus/bus.ts), run against every adapter this machine can host:
 * - the embedded bus on PGlite (always) and on PostgreSQL (when DATABASE_URL is set);
 * - NATS JetStream (when NATS_URL is set or a nats-server answers on 127.0.0.1:4222).
 * Each test gets its own data directory, database or stream prefix, and removes it afterwards.
 */
import { describe, expect, it } from "@effect/vitest"
import { connect } from "@nats-io/transport-node"
import { jetstreamManager } from "@nats-io/jetstream"
import { Context, Deferred, Duration, Effect, ExecutionStrategy, Exit, Fiber, Layer, Option, Queue, Redacted, Ref, Schedule, Scope } from "effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as MemoryBus from "../layers/memory-bus.ts"
import * as NatsBus from "../layers/nats-bus.ts"
import * as Pglite from "../layers/pglite.ts"
import * as Postgres from "../layers/postgres.ts"
import { DependencyHealth } from "../services/health/dependency-health.ts"
import {
  Bus,
  type BusMessage,
  type BusShape,
  ComeBackAfterTypeId,
  type ConsumerSpec,
  decodeJson,
  encodeJson,
  type StreamName,
  streams
} from "../services/bus/bus.ts"
import type { SqlClient } from "@effect/sql/SqlClient"
import { migrate } from "../src/database.ts"
import { startPrivateNats } from "./support/nats-server.ts"
import { repoRoot } from "./support/server.ts"
import { adminDatabaseUrl, createDatabase, createDataDir, natsPrefix, sharedNatsUrl, uniqueName } from "./support/services.ts"

/**
 * NATS is tested in the PostgreSQL + NATS run only (NATS_URL set): the embedded run would repeat the
 * same tests against the same server. A developer without NATS_URL runs them with NATS_URL set.
 */
const natsUrl = sharedNatsUrl

/**
 * Where an adapter keeps its messages. `storage` outlives any one bus built on it, so that a second
 * bus on the same storage is the same bus restarted.
 */
interface Backend<S> {
  readonly name: string
  readonly storage: Effect.Effect<S, unknown, Scope.Scope>
  readonly bus: (storage: S) => Layer.Layer<Bus, unknown>
}

const memoryBusOver = <E>(sql: Layer.Layer<SqlClient, E>) =>
  MemoryBus.layer.pipe(Layer.provide(Layer.effectDiscard(migrate).pipe(Layer.provideMerge(sql))), Layer.provide(DependencyHealth.Default))

const natsBus = (options: NatsBus.NatsBusOptions) => NatsBus.layer(options).pipe(Layer.provide(DependencyHealth.Default))

const pgliteBackend: Backend<string> = {
  name: "memory bus on PGlite",
  storage: Effect.acquireRelease(Effect.sync(createDataDir), (dir) => Effect.sync(dir.remove)).pipe(Effect.map((dir) => dir.dir)),
  bus: (dataDir) => memoryBusOver(Pglite.layer({ dataDir }))
}

const postgresBackend = (adminUrl: string): Backend<string> => ({
  name: "memory bus on PostgreSQL",
  storage: Effect.acquireRelease(Effect.promise(() => createDatabase(adminUrl)), (db) => Effect.promise(() => db.drop())).pipe(
    Effect.map((db) => db.url)
  ),
  bus: (url) => memoryBusOver(Postgres.layer({ url: Redacted.make(url), maxConnections: 4 }))
})

/** Delete the streams a test made under its prefix. */
const deleteStreams = (url: string, prefix: string) =>
  Effect.promise(async () => {
    const nc = await connect({ servers: url })
    try {
      const jsm = await jetstreamManager(nc)
      for (const stream of Object.keys(streams) as Array<StreamName>) {
        await jsm.streams.delete(NatsBus.streamName(prefix, stream)).catch(() => false)
      }
    } finally {
      await nc.close()
    }
  })

const natsBackend = (url: string): Backend<string> => ({
  name: "NATS JetStream bus",
  storage: Effect.acquireRelease(Effect.sync(natsPrefix), (prefix) => deleteStreams(url, prefix)),
  bus: (prefix) => natsBus({ url, prefix })
})

/**
 * A scope of its own that a test may close early, and that otherwise closes with the test's scope
 * (consumers before their bus, the bus before its storage).
 */
const childScope = Effect.flatMap(Effect.scope, (parent) => Scope.fork(parent, ExecutionStrategy.sequential))

/** A bus that can be closed, and reopened, within a test. */
const openBus = (layer: Layer.Layer<Bus, unknown>) =>
  Effect.gen(function*() {
    const scope = yield* childScope
    const context = yield* Layer.buildWithScope(layer, scope)
    return { bus: Context.get(context, Bus), close: Scope.close(scope, Exit.void) }
  })

/** Run a consumer until the returned effect is run (or the test ends). */
const startConsumer = <E>(bus: BusShape, spec: ConsumerSpec<E>) =>
  Effect.gen(function*() {
    const scope = yield* childScope
    yield* bus.consume(spec).pipe(Scope.extend(scope))
    return Scope.close(scope, Exit.void)
  })

/** A consumer name and a subject of the test's own. */
const fresh = () => {
  const id = uniqueName("t").replace(/[^A-Za-z0-9]/g, "")
  return { name: `c${id}`, subject: `events.test.${id}` }
}

const takeWithin = <A>(queue: Queue.Queue<A>, within: Duration.DurationInput = "15 seconds") =>
  Queue.take(queue).pipe(Effect.timeoutFail({ duration: within, onTimeout: () => new Error("no delivery in time") }))

/** Nothing more arrives within `quiet`. */
const expectQuiet = <A>(queue: Queue.Queue<A>, quiet: Duration.DurationInput) =>
  Effect.gen(function*() {
    yield* Effect.sleep(quiet)
    expect(yield* Queue.takeAll(queue).pipe(Effect.map((items) => Array.from(items)))).toEqual([])
  })

const quick = () => Duration.millis(200)

const contract = <S>(backend: Backend<S>) =>
  describe(backend.name, () => {
    it.scopedLive("delivers a published message with its subject, data and msgId", () =>
      Effect.gen(function*() {
        const storage = yield* backend.storage
        const { bus } = yield* openBus(backend.bus(storage))
        const { name, subject } = fresh()
        yield* bus.ping
        const received = yield* Queue.unbounded<BusMessage>()
        yield* startConsumer(bus, { name, stream: "events", filter: subject, handler: (m) => Queue.offer(received, m) })
        yield* bus.publish(subject, encodeJson({ hello: "world" }), { msgId: "m-1" })
        const message = yield* takeWithin(received)
        expect(message.subject).toBe(subject)
        expect(message.msgId).toBe("m-1")
        expect(message.deliveryCount).toBe(1)
        expect(decodeJson(message.data)).toEqual({ hello: "world" })
        yield* expectQuiet(received, "500 millis")
      }))

    it.scopedLive("broadcasts a signal to every listener and to no consumer, storing nothing", () =>
      Effect.gen(function*() {
        const storage = yield* backend.storage
        const { bus } = yield* openBus(backend.bus(storage))
        const { name } = fresh()
        const signal = `signals.test.${name}`
        const heard = yield* Queue.unbounded<string>()
        const consumed = yield* Queue.unbounded<BusMessage>()
        yield* startConsumer(bus, { name, stream: "events", filter: "events.>", handler: (m) => Queue.offer(consumed, m) })
        yield* bus.listen(signal, (m) => Queue.offer(heard, `a:${m.subject}`))
        yield* bus.listen("signals.test.>", (m) => Queue.offer(heard, `b:${m.subject}`))
        // A core subscription is in place once the server has seen it: NATS answers a flush after it.
        yield* bus.ping
        yield* bus.broadcast(signal, new Uint8Array([1]))
        const got = [yield* takeWithin(heard), yield* takeWithin(heard)].sort()
        expect(got).toEqual([`a:${signal}`, `b:${signal}`])
        yield* expectQuiet(consumed, "500 millis")
      }))

    it.scopedLive("stores one message for a msgId published twice", () =>
      Effect.gen(function*() {
        const storage = yield* backend.storage
        const { bus } = yield* openBus(backend.bus(storage))
        const { name, subject } = fresh()
        yield* bus.publish(subject, encodeJson(1), { msgId: "same" })
        yield* bus.publish(subject, encodeJson(1), { msgId: "same" })
        yield* bus.publish(subject, encodeJson(2), { msgId: "other" })
        const received = yield* Queue.unbounded<BusMessage>()
        yield* startConsumer(bus, { name, stream: "events", filter: subject, handler: (m) => Queue.offer(received, m) })
        const first = yield* takeWithin(received)
        const second = yield* takeWithin(received)
        expect([first.msgId, second.msgId]).toEqual(["same", "other"])
        yield* expectQuiet(received, "1 second")
      }))

    it.scopedLive("redelivers a message whose handler failed, and its effect takes place once", () =>
      Effect.gen(function*() {
        const storage = yield* backend.storage
        const { bus } = yield* openBus(backend.bus(storage))
        const { name, subject } = fresh()
        const applied = new Set<string>()
        const effects = yield* Ref.make(0)
        const deliveries = yield* Queue.unbounded<number>()
        yield* startConsumer(bus, {
          name,
          stream: "events",
          filter: subject,
          retryDelay: quick,
          handler: (m) =>
            Effect.gen(function*() {
              // The idempotent effect first, then a failure on the first delivery, as an actor
              // that crashed halfway would.
              if (!applied.has(m.msgId)) {
                applied.add(m.msgId)
                yield* Ref.update(effects, (n) => n + 1)
              }
              yield* Queue.offer(deliveries, m.deliveryCount)
              if (m.deliveryCount === 1) return yield* Effect.fail("transient failure")
            })
        })
        yield* bus.publish(subject, encodeJson("x"), { msgId: "flaky" })
        expect(yield* takeWithin(deliveries)).toBe(1)
        expect(yield* takeWithin(deliveries)).toBe(2)
        yield* expectQuiet(deliveries, "1 second")
        expect(yield* Ref.get(effects)).toBe(1)
      }))

    it.scopedLive("a failure that says when to come back is offered again then, not on the consumer's schedule", () =>
      Effect.gen(function*() {
        const storage = yield* backend.storage
        const { bus } = yield* openBus(backend.bus(storage))
        const { name, subject } = fresh()
        const deliveries = yield* Queue.unbounded<number>()
        yield* startConsumer(bus, {
          name,
          stream: "events",
          filter: subject,
          // The schedule would bring it back in a minute.
          retryDelay: () => Duration.minutes(1),
          handler: (m) =>
            Queue.offer(deliveries, Date.now()).pipe(
              Effect.zipRight(m.deliveryCount === 1 ? Effect.fail({ [ComeBackAfterTypeId]: Duration.millis(500) }) : Effect.void)
            )
        })
        yield* bus.publish(subject, encodeJson("x"), { msgId: "held" })
        const first = yield* takeWithin(deliveries)
        const second = yield* takeWithin(deliveries, "10 seconds")
        expect(second - first).toBeGreaterThanOrEqual(450)
        yield* expectQuiet(deliveries, "1 second")
      }))

    it.scopedLive("delivers messages published before the consumer started, in order", () =>
      Effect.gen(function*() {
        const storage = yield* backend.storage
        const { bus } = yield* openBus(backend.bus(storage))
        const { name, subject } = fresh()
        for (const n of [1, 2, 3]) yield* bus.publish(`${subject}.${n}`, encodeJson(n), { msgId: `early-${n}` })
        const received = yield* Queue.unbounded<BusMessage>()
        yield* startConsumer(bus, { name, stream: "events", filter: `${subject}.*`, handler: (m) => Queue.offer(received, m) })
        const got = [yield* takeWithin(received), yield* takeWithin(received), yield* takeWithin(received)]
        expect(got.map((m) => m.subject)).toEqual([`${subject}.1`, `${subject}.2`, `${subject}.3`])
        expect(got.map((m) => decodeJson(m.data))).toEqual([1, 2, 3])
      }))

    it.scopedLive("runs at most `concurrency` handlers at once", () =>
      Effect.gen(function*() {
        const storage = yield* backend.storage
        const { bus } = yield* openBus(backend.bus(storage))
        const { name, subject } = fresh()
        const running = yield* Ref.make(0)
        const peak = yield* Ref.make(0)
        const done = yield* Queue.unbounded<string>()
        yield* startConsumer(bus, {
          name,
          stream: "events",
          filter: subject,
          concurrency: 2,
          handler: (m) =>
            Effect.gen(function*() {
              const now = yield* Ref.updateAndGet(running, (n) => n + 1)
              yield* Ref.update(peak, (p) => Math.max(p, now))
              yield* Effect.sleep("300 millis")
              yield* Ref.update(running, (n) => n - 1)
              yield* Queue.offer(done, m.msgId)
            })
        })
        for (const n of [1, 2, 3, 4, 5]) yield* bus.publish(subject, encodeJson(n), { msgId: `c-${n}` })
        const finished = new Set<string>()
        for (let i = 0; i < 5; i++) finished.add(yield* takeWithin(done))
        expect(finished.size).toBe(5)
        expect(yield* Ref.get(peak)).toBe(2)
      }))

    it.scopedLive("tells a consumer's lag: waiting, in flight, and when the oldest unacknowledged was published", () =>
      Effect.gen(function*() {
        const storage = yield* backend.storage
        const { bus } = yield* openBus(backend.bus(storage))
        const { name, subject } = fresh()
        const ref = { name, stream: "events" as const, filter: subject }
        const before = new Date(Date.now() - 1000)
        // Another subject of the same stream, which is not the consumer's.
        yield* bus.publish(subject.replace("events.test.", "events.other."), encodeJson(0), { msgId: "lag-other" })
        for (const n of [1, 2, 3]) yield* bus.publish(subject, encodeJson(n), { msgId: `lag-${n}` })
        // Never started (JetStream knows no such consumer yet): once started it would be given all
        // three, so they wait, the oldest the first one published; a stage no process runs is behind.
        const unstarted = Option.getOrThrow(yield* bus.lag(ref))
        expect(unstarted).toMatchObject({ pending: 3, inFlight: 0 })
        expect(unstarted.oldest).toBeInstanceOf(Date)
        expect(unstarted.oldest!.getTime()).toBeGreaterThanOrEqual(before.getTime())
        expect(unstarted.oldest!.getTime()).toBeLessThanOrEqual(Date.now() + 1000)

        const release = yield* Deferred.make<void>()
        const started = yield* Queue.unbounded<number>()
        const stop = yield* startConsumer(bus, {
          ...ref,
          concurrency: 1,
          handler: (m) => Queue.offer(started, m.deliveryCount).pipe(Effect.zipRight(Deferred.await(release)))
        })
        yield* takeWithin(started)
        // One in its handler, two waiting; the oldest is the first one published.
        const held = yield* bus.lag(ref).pipe(
          Effect.tap(() => Effect.sleep("100 millis")),
          Effect.repeat({ until: (lag) => Option.isSome(lag) && lag.value.inFlight === 1 && lag.value.pending === 2 }),
          Effect.timeout("10 seconds")
        )
        const oldest = Option.getOrThrow(held).oldest
        expect(oldest).toBeInstanceOf(Date)
        expect(oldest!.getTime()).toBeGreaterThanOrEqual(before.getTime())
        expect(oldest!.getTime()).toBeLessThanOrEqual(Date.now() + 1000)

        yield* Deferred.succeed(release, undefined)
        const drained = yield* bus.lag(ref).pipe(
          Effect.tap(() => Effect.sleep("100 millis")),
          Effect.repeat({ until: (lag) => Option.isSome(lag) && lag.value.inFlight === 0 && lag.value.pending === 0 }),
          Effect.timeout("10 seconds")
        )
        expect(Option.getOrThrow(drained).oldest).toBeUndefined()
        yield* stop
      }))

    it.scopedLive("matches subjects by tokens as NATS does: a literal filter takes neither a longer last token nor more tokens", () =>
      Effect.gen(function*() {
        const storage = yield* backend.storage
        const { bus } = yield* openBus(backend.bus(storage))
        const { name, subject } = fresh()
        // `events.email.received` beside `events.email.received_x` and `events.email.received.x`.
        const neighbours = [`${subject}_x`, `${subject}.x`]
        for (const [n, other] of neighbours.entries()) yield* bus.publish(other, encodeJson(n), { msgId: `neighbour-${n}` })
        yield* bus.publish(subject, encodeJson("mine"), { msgId: "mine" })
        const literal = { name, stream: "events" as const, filter: subject }
        const wildcard = { name: `${name}w`, stream: "events" as const, filter: `${subject}.*` }
        // Counted before any consumer of either name runs: from the stored messages themselves.
        expect(Option.getOrThrow(yield* bus.lag(literal))).toMatchObject({ pending: 1, inFlight: 0 })
        expect(Option.getOrThrow(yield* bus.lag(wildcard))).toMatchObject({ pending: 1, inFlight: 0 })

        const heard = yield* Queue.unbounded<string>()
        yield* bus.listen(subject, (m) => Queue.offer(heard, m.subject))
        const got = yield* Queue.unbounded<string>()
        yield* startConsumer(bus, { ...literal, handler: (m) => Queue.offer(got, m.subject) })
        expect(yield* takeWithin(got)).toBe(subject)
        for (const [n, other] of neighbours.entries()) yield* bus.publish(other, encodeJson(n), { msgId: `neighbour-${n}-again` })
        yield* bus.publish(subject, encodeJson("mine again"), { msgId: "mine-again" })
        expect(yield* takeWithin(got)).toBe(subject)
        expect(yield* takeWithin(heard)).toBe(subject)
        yield* expectQuiet(got, "500 millis")
        yield* expectQuiet(heard, "0 millis")
      }))

    it.scopedLive("closing a consumer waits for the handler in flight, which is acknowledged", () =>
      Effect.gen(function*() {
        const storage = yield* backend.storage
        const { bus } = yield* openBus(backend.bus(storage))
        const { name, subject } = fresh()
        const started = yield* Queue.unbounded<number>()
        const finished = yield* Ref.make(false)
        // A short ack_wait, so that an unacknowledged message would come back within the test.
        const spec = { name, stream: "events" as const, filter: subject, ackWait: Duration.seconds(1) }
        const stop = yield* startConsumer(bus, {
          ...spec,
          handler: (m) =>
            Queue.offer(started, m.deliveryCount).pipe(
              Effect.zipRight(Effect.sleep("1 second")),
              Effect.zipRight(Ref.set(finished, true))
            )
        })
        yield* bus.publish(subject, encodeJson("slow"), { msgId: "slow" })
        expect(yield* takeWithin(started)).toBe(1)
        yield* stop
        expect(yield* Ref.get(finished)).toBe(true)

        const again = yield* Queue.unbounded<BusMessage>()
        yield* startConsumer(bus, { ...spec, handler: (m) => Queue.offer(again, m) })
        yield* expectQuiet(again, "2500 millis")
      }))
  })

// The embedded bus on PGlite in the embedded run only: the PostgreSQL run proves the same adapter on
// PostgreSQL below, and each rule once is enough.
describe.runIf(adminDatabaseUrl === undefined)("on PGlite", () => {
  contract(pgliteBackend)
})

describe.runIf(adminDatabaseUrl !== undefined)("PostgreSQL", () => {
  contract(postgresBackend(adminDatabaseUrl ?? ""))
})

describe.runIf(natsUrl !== undefined)("NATS", () => {
  contract(natsBackend(natsUrl ?? ""))
})

const restartRecovery = <S>(backend: Backend<S>) =>
  it.scopedLive(`${backend.name}: after a restart, delivers what was not acknowledged, and only that`, () =>
    Effect.gen(function*() {
      const storage = yield* backend.storage
      const { name, subject } = fresh()

      const first = yield* openBus(backend.bus(storage))
      const handled = yield* Queue.unbounded<BusMessage>()
      const stop = yield* startConsumer(first.bus, { name, stream: "events", filter: subject, handler: (m) => Queue.offer(handled, m) })
      yield* first.bus.publish(subject, encodeJson("acked"), { msgId: "acked" })
      expect((yield* takeWithin(handled)).msgId).toBe("acked")
      yield* stop
      yield* first.bus.publish(subject, encodeJson("waiting"), { msgId: "waiting" })
      // A handler that keeps failing: the message stays unacknowledged through the shutdown.
      const failing = yield* startConsumer(first.bus, {
        name,
        stream: "events",
        filter: subject,
        retryDelay: () => Duration.seconds(30),
        handler: (m) => Queue.offer(handled, m).pipe(Effect.zipRight(Effect.fail("not now")))
      })
      yield* first.bus.publish(subject, encodeJson("failing"), { msgId: "failing" })
      const seen = [yield* takeWithin(handled), yield* takeWithin(handled)]
      expect(seen.map((m) => m.msgId).sort()).toEqual(["failing", "waiting"])
      yield* failing
      yield* first.close

      const second = yield* openBus(backend.bus(storage))
      const recovered = yield* Queue.unbounded<BusMessage>()
      yield* startConsumer(second.bus, { name, stream: "events", filter: subject, handler: (m) => Queue.offer(recovered, m) })
      const after = [yield* takeWithin(recovered), yield* takeWithin(recovered)]
      expect(after.map((m) => m.msgId)).toEqual(["waiting", "failing"])
      expect(decodeJson(after[0]!.data)).toBe("waiting")
      yield* expectQuiet(recovered, "500 millis")
      yield* second.close
    }))

describe("NATS_URL in messages", () => {
  it("leaves out each server's user and password or token", () => {
    expect(NatsBus.withoutCredentials("nats://user:natssecret99@127.0.0.1:4222")).toBe("nats://127.0.0.1:4222")
    expect(NatsBus.withoutCredentials("nats://s3cr3t-token@a.example:4222, tls://b.example:4222")).toBe("nats://a.example:4222,tls://b.example:4222")
    expect(NatsBus.withoutCredentials("127.0.0.1:4222")).toBe("127.0.0.1:4222")
  })
})

describe("embedded bus restart", () => {
  describe.runIf(adminDatabaseUrl === undefined)("on PGlite", () => {
    restartRecovery(pgliteBackend)
  })
  describe.runIf(adminDatabaseUrl !== undefined)("on PostgreSQL", () => {
    restartRecovery(postgresBackend(adminDatabaseUrl ?? ""))
  })
})

interface FixtureRun {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly output: string
}

/** test/fixtures/bus-consumer.ts in its own process, until it exits. */
const runFixture = (env: Record<string, string>) =>
  Effect.async<FixtureRun>((resume) => {
    const child = spawn(process.execPath, ["--import", "tsx", "test/fixtures/bus-consumer.ts"], {
      cwd: repoRoot,
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    child.stdout.on("data", (chunk) => (output += chunk))
    child.stderr.on("data", (chunk) => (output += chunk))
    child.on("exit", (code, signal) => resume(Effect.succeed({ code, signal, output })))
    return Effect.sync(() => child.kill("SIGKILL"))
  }).pipe(Effect.timeoutFail({ duration: "40 seconds", onTimeout: () => new Error("the consumer process did not finish") }))

const readLines = (file: string) => (fs.existsSync(file) ? fs.readFileSync(file, "utf8").trim().split("\n").filter((line) => line !== "") : [])

describe.runIf(natsUrl !== undefined)("NATS consumer processes", () => {
  const backend = natsBackend(natsUrl ?? "")

  it.scopedLive("redelivers to a new process what a killed consumer did not acknowledge; the effect takes place once", () =>
    Effect.gen(function*() {
      const prefix = yield* backend.storage
      const dir = yield* Effect.acquireRelease(
        Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "mailroom-bus-"))),
        (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
      )
      const { bus } = yield* openBus(backend.bus(prefix))
      const { name, subject } = fresh()
      yield* bus.publish(subject, encodeJson("work"), { msgId: "job-1" })

      const env = {
        NATS_URL: natsUrl ?? "",
        BUS_PREFIX: prefix,
        BUS_DIR: dir,
        BUS_CONSUMER: name,
        BUS_FILTER: subject,
        BUS_ACK_WAIT_MS: "2000"
      }
      const crashed = yield* runFixture({ ...env, BUS_MODE: "crash" })
      expect(crashed.signal, crashed.output).toBe("SIGKILL")
      expect(readLines(path.join(dir, "invocations.log"))).toEqual(["job-1 1 crash"])

      const normal = yield* runFixture({ ...env, BUS_MODE: "normal" })
      expect(normal.code, normal.output).toBe(0)
      expect(readLines(path.join(dir, "invocations.log"))).toEqual(["job-1 1 crash", "job-1 2 normal"])
      expect(readLines(path.join(dir, "effects.log"))).toEqual(["job-1"])

      // The second process acknowledged before it exited: nothing is left for anyone.
      const info = yield* Effect.promise(async () => {
        const nc = await connect({ servers: natsUrl ?? "" })
        try {
          const jsm = await jetstreamManager(nc)
          return await jsm.consumers.info(NatsBus.streamName(prefix, "events"), name)
        } finally {
          await nc.close()
        }
      })
      expect(info.num_ack_pending).toBe(0)
      expect(info.num_pending).toBe(0)
    }))

  it.scopedLive("a handler that outlives ack_wait keeps its message (no second delivery)", () =>
    Effect.gen(function*() {
      const prefix = yield* backend.storage
      const { bus } = yield* openBus(backend.bus(prefix))
      const { name, subject } = fresh()
      const deliveries = yield* Queue.unbounded<number>()
      const done = yield* Queue.unbounded<void>()
      yield* startConsumer(bus, {
        name,
        stream: "events",
        filter: subject,
        concurrency: 2,
        ackWait: Duration.seconds(1),
        handler: (m) =>
          Queue.offer(deliveries, m.deliveryCount).pipe(Effect.zipRight(Effect.sleep("3 seconds")), Effect.zipRight(Queue.offer(done, undefined)))
      })
      yield* bus.publish(subject, encodeJson("long"), { msgId: "long" })
      expect(yield* takeWithin(deliveries)).toBe(1)
      yield* takeWithin(done)
      yield* expectQuiet(deliveries, "1500 millis")
    }))

})

describe.runIf(natsUrl !== undefined)("NATS consumer closing", () => {
  const backend = natsBackend(natsUrl ?? "")

  // What the closing pull brought is handed back at once. One window stays (layers/nats-bus.ts endPull): a
  // message the server sends to the pull after it read the unsubscribe reaches nobody and comes back
  // after ack_wait: later, not lost. Four racing rounds, each closing at once or a moment after the
  // publishes: all of each round's messages taken, and within a second or so in all rounds but one (a
  // loaded CI machine widens the window; once, one message in one round waited out its ack_wait).
  it.scopedLive("hands back at once what its pull brought as it closed: another consumer takes it well within ack_wait", () =>
    Effect.gen(function*() {
      const prefix = yield* backend.storage
      const { bus } = yield* openBus(backend.bus(prefix))
      const ackWait = Duration.seconds(8)
      const late: Array<number> = []
      for (const delay of [0, 0, 1, 2]) {
        const { name, subject } = fresh()
        const handled = yield* Ref.make(new Set<string>())
        const take = (m: BusMessage) => Ref.update(handled, (seen) => new Set([...seen, m.msgId]))
        const spec = { name, stream: "events" as const, filter: subject, concurrency: 8, ackWait }
        const closeFirst = yield* startConsumer(bus, { ...spec, handler: take })
        // Its pull waits on the server for up to 8 messages.
        yield* Effect.sleep("300 millis")
        const msgIds = Array.from({ length: 6 }, (_, i) => `${name}-${i}`)
        const publishing = yield* Effect.fork(
          Effect.forEach(msgIds, (msgId) => bus.publish(subject, encodeJson(msgId), { msgId }), { discard: true, concurrency: "unbounded" })
        )
        yield* Effect.sleep(Duration.millis(delay))
        yield* closeFirst
        yield* Fiber.join(publishing)
        // What the first did not handle is nobody's: the next consumer has it at once, not after ack_wait.
        yield* startConsumer(bus, { ...spec, handler: take })
        const takenWithin = (limit: Duration.DurationInput) =>
          Ref.get(handled).pipe(
            Effect.tap(() => Effect.sleep("100 millis")),
            Effect.repeat({ until: (seen) => seen.size === msgIds.length }),
            Effect.timeout(limit),
            Effect.orElse(() => Ref.get(handled))
          )
        if ((yield* takenWithin("3 seconds")).size < msgIds.length) late.push(delay)
        const all = yield* takenWithin(Duration.sum(ackWait, "5 seconds"))
        expect([...all].sort(), `closed ${delay} ms after publishing`).toEqual([...msgIds].sort())
      }
      expect(late.length, `rounds with a message that waited out its ack_wait (closed that many ms after publishing): ${late}`).toBeLessThanOrEqual(1)
    }), 90_000)
})

describe.runIf(natsUrl !== undefined && fs.existsSync("/usr/sbin/nats-server"))("NATS outage (private nats-server)", () => {
  it.scopedLive("publish and ping fail with BusError in bounded time while NATS is down, and work again once it is back", () =>
    Effect.gen(function*() {
      const nats = yield* Effect.acquireRelease(Effect.promise(startPrivateNats), (nats) => Effect.promise(nats.dispose))
      const { bus } = yield* openBus(natsBus({ url: nats.url, prefix: "" }))
      const { subject } = fresh()
      yield* bus.publish(subject, encodeJson(1), { msgId: "before" })

      yield* Effect.promise(nats.stop)
      const started = Date.now()
      const failed = yield* bus.publish(subject, encodeJson(2), { msgId: "during" }).pipe(Effect.flip)
      expect(failed._tag).toBe("BusError")
      expect(Date.now() - started).toBeLessThan(8000)
      expect((yield* Effect.flip(bus.ping))._tag).toBe("BusError")

      yield* Effect.promise(nats.start)
      yield* bus.publish(subject, encodeJson(2), { msgId: "during" }).pipe(
        Effect.retry(Schedule.spaced("500 millis").pipe(Schedule.upTo("20 seconds")))
      )
      yield* bus.ping
    }))

  it.live("building the layer fails with BusError when NATS cannot be reached", () =>
    Effect.gen(function*() {
      const error = yield* Layer.build(natsBus({ url: "nats://127.0.0.1:1", prefix: "x" })).pipe(Effect.scoped, Effect.flip)
      expect(error._tag).toBe("BusError")
    }))
})
