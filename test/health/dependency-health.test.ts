/**
 * DependencyHealth (services/health/dependency-health.ts): which failures are outages, backpressure
 * or faults, and what an operator reads when a dependency goes away and comes back.
 */
import { describe, expect, it } from "@effect/vitest"
import { SqlError } from "@effect/sql/SqlError"
import { Cause, Clock, Data, Effect, HashMap, Logger, LogLevel, Ref } from "effect"
import { BusError } from "../../services/bus/bus.ts"
import {
  type Backpressure,
  BackpressureTypeId,
  classify,
  DependencyHealth
} from "../../services/health/dependency-health.ts"
import { EmbedderError } from "../../services/search/embedder.ts"
import { VectorIndexError } from "../../services/search/vector-index.ts"

class Busy extends Data.TaggedError("Busy")<{ readonly message: string }> implements Backpressure {
  readonly [BackpressureTypeId] = true as const
}

const refused = Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { code: "ECONNREFUSED" })
const unreachable = new SqlError({ message: "Failed to acquire connection", cause: refused })
const badQuery = new SqlError({ message: "Failed to execute statement", cause: Object.assign(new Error("syntax error"), { code: "42601" }) })

interface Logged {
  readonly level: string
  readonly message: string
  readonly annotations: number
  readonly hasCause: boolean
}

/** Run `body` with a DependencyHealth and a logger that records what it would print. */
const withLog = <A, E>(body: (health: DependencyHealth, logged: () => ReadonlyArray<Logged>) => Effect.Effect<A, E>) =>
  Effect.gen(function*() {
    const logged: Array<Logged> = []
    const logger = Logger.make(({ annotations, cause, logLevel, message }) => {
      logged.push({
        level: logLevel.label,
        message: Array.isArray(message) ? message.map(String).join(" ") : String(message),
        annotations: HashMap.size(annotations),
        hasCause: !Cause.isEmpty(cause)
      })
    })
    const health = yield* DependencyHealth
    return yield* body(health, () => logged).pipe(
      Effect.provide(Logger.replace(Logger.defaultLogger, logger)),
      Logger.withMinimumLogLevel(LogLevel.Debug)
    )
  }).pipe(Effect.provide(DependencyHealth.Default))

/**
 * The live clock, moved forward at will (`forward`), given to the test's fiber with `withClock`. Not
 * the TestClock: in one CI run (workers shared by many suites, `isolate: false`) `TestClock.adjust`
 * there found the live clock ("testClock.adjust is not a function"), which a run of this file alone
 * or beside other TestClock suites did not reproduce; a clock handed over explicitly cannot be missed.
 */
const movableClock = () => {
  const live = Clock.make()
  let offset = 0
  const millis = () => live.unsafeCurrentTimeMillis() + offset
  const clock: Clock.Clock = {
    [Clock.ClockTypeId]: Clock.ClockTypeId,
    unsafeCurrentTimeMillis: millis,
    unsafeCurrentTimeNanos: () => BigInt(millis()) * 1_000_000n,
    currentTimeMillis: Effect.sync(millis),
    currentTimeNanos: Effect.sync(() => BigInt(millis()) * 1_000_000n),
    sleep: (duration) => live.sleep(duration)
  }
  return { clock, forward: (ms: number) => Effect.sync(() => void (offset += ms)) }
}

describe("classify", () => {
  it("an unreachable PostgreSQL is a database outage, with a short reason", () => {
    expect(classify(Cause.fail(unreachable))).toEqual({
      _tag: "Outage",
      dependency: "database",
      reason: "Failed to acquire connection: connect ECONNREFUSED 127.0.0.1:5432"
    })
    expect(classify(Cause.fail(new SqlError({ message: "Connection error", cause: Object.assign(new Error("x"), { code: "08006" }) }))))
      .toMatchObject({ _tag: "Outage", dependency: "database" })
  })

  it("a bus error is a bus outage, unless the database under it is what failed", () => {
    expect(classify(Cause.fail(new BusError({ message: "Could not publish to events.x: TIMEOUT" })))).toMatchObject({
      _tag: "Outage",
      dependency: "bus"
    })
    // The bus kept in the database: its outage is the database's; its query bug is a fault.
    expect(classify(Cause.fail(new BusError({ message: "Could not store a bus message", cause: unreachable })))).toMatchObject({
      _tag: "Outage",
      dependency: "database"
    })
    expect(classify(Cause.fail(new BusError({ message: "Could not store a bus message", cause: badQuery })))).toEqual({ _tag: "Fault" })
  })

  it("the vector index's network error is its outage; pgvector's, under a SQL error, the database's; its other errors are faults", () => {
    const qdrantRefused = new VectorIndexError({
      message: "Qdrant: could not upsert points",
      cause: Object.assign(new Error("fetch failed (ECONNREFUSED)"), { cause: Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:6333"), { code: "ECONNREFUSED" }) })
    })
    expect(classify(Cause.fail(qdrantRefused))).toEqual({
      _tag: "Outage",
      dependency: "vectorIndex",
      reason: "Qdrant: could not upsert points: fetch failed (ECONNREFUSED): connect ECONNREFUSED 127.0.0.1:6333"
    })
    expect(classify(Cause.fail(new VectorIndexError({ message: "pgvector: could not search", cause: unreachable })))).toMatchObject({
      _tag: "Outage",
      dependency: "database"
    })
    expect(classify(Cause.fail(new VectorIndexError({ message: "Qdrant: could not search: 400 Bad Request" })))).toEqual({ _tag: "Fault" })
  })

  it("a remote embedder's network error is the embedder's outage; its other errors (a refusal, a wrong answer) are faults", () => {
    // As the OpenAI SDK fails: "Connection error.", over fetch's error, over the socket's.
    const refused = new EmbedderError({
      message: "OpenAI embeddings request failed: Connection error.",
      cause: Object.assign(new Error("Connection error."), {
        cause: Object.assign(new Error("fetch failed"), { cause: Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:443"), { code: "ECONNREFUSED" }) })
      })
    })
    expect(classify(Cause.fail(refused))).toEqual({
      _tag: "Outage",
      dependency: "embedder",
      reason: "OpenAI embeddings request failed: Connection error.: fetch failed: connect ECONNREFUSED 127.0.0.1:443"
    })
    const limited = new EmbedderError({ message: "OpenAI embeddings request failed: 429 Rate limit reached", cause: Object.assign(new Error("429"), { status: 429 }) })
    expect(classify(Cause.fail(limited))).toEqual({ _tag: "Fault" })
  })

  it("backpressure is flow control; another system's network error is that system unreachable; a query bug or a defect is a fault", () => {
    expect(classify(Cause.fail(new Busy({ message: "1 endpoint(s) at their limit" })))).toEqual({
      _tag: "Backpressure",
      reason: "1 endpoint(s) at their limit"
    })
    expect(classify(Cause.fail(badQuery))).toEqual({ _tag: "Fault" })
    expect(classify(Cause.die(new Error("boom")))).toEqual({ _tag: "Fault" })
    const qdrant = new Error("Could not upsert the vectors", { cause: Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:6333"), { code: "ECONNREFUSED" }) })
    expect(classify(Cause.fail(qdrant))).toEqual({
      _tag: "Unreachable",
      reason: "Could not upsert the vectors: connect ECONNREFUSED 127.0.0.1:6333"
    })
    // The same error as a defect is a bug, kept with its stack.
    expect(classify(Cause.die(qdrant))).toEqual({ _tag: "Fault" })
  })
})

describe("DependencyHealth", () => {
  it.live("logs an outage once when it starts and once when its probe answers, with how long and how many failed", () =>
    withLog((health, logged) =>
      Effect.gen(function*() {
        const up = yield* Ref.make(false)
        yield* health.watch("database", {
          name: "PostgreSQL",
          probe: Effect.flatMap(Ref.get(up), (ok) => (ok ? Effect.void : Effect.fail(unreachable)))
        })
        // The first operation to meet the outage carries annotations; the outage's lines must not.
        yield* health.report("Bus handler failed", Cause.fail(unreachable)).pipe(Effect.annotateLogs({ consumer: "ingest" }))
        for (let i = 0; i < 1944; i++) yield* health.report("Housekeeping failed", Cause.fail(unreachable))
        expect(yield* health.isDown("database")).toBe(true)
        yield* Effect.sleep("1500 millis")
        expect(yield* health.isDown("database")).toBe(true)
        yield* Ref.set(up, true)
        yield* Effect.sleep("1500 millis")
        expect(yield* health.isDown("database")).toBe(false)
        // An operation that was waiting when it came back fails just after: not a new outage.
        yield* health.report("Bus handler failed", Cause.fail(unreachable))

        const lines = logged()
        const warnings = lines.filter((line) => line.level === "WARN")
        expect(warnings.map((line) => line.message)).toEqual([
          "PostgreSQL unreachable: Failed to acquire connection: connect ECONNREFUSED 127.0.0.1:5432",
          // At least the 1.5 s it was down; how much more depends on the machine's load (CI once saw 4.2 s).
          expect.stringMatching(/^PostgreSQL reachable again after [1-9]\d*\.\d s \(1,945 operations failed\)$/)
        ])
        expect(warnings.every((line) => !line.hasCause && line.annotations === 0)).toBe(true)
        expect(lines.filter((line) => line.level === "DEBUG")).toHaveLength(1)
      })
    ))

  it.live("says another system that cannot be reached in one line, without a stack; a fault with its cause", () =>
    withLog((health, logged) =>
      Effect.gen(function*() {
        const refused = Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:6333"), { code: "ECONNREFUSED" })
        yield* health.report("Bus handler failed", Cause.fail(new Error("Could not upsert the vectors", { cause: refused })))
        yield* health.report("Bus handler failed", Cause.die(new Error("boom")))
        expect(logged().map((line) => [line.level, line.message, line.hasCause])).toEqual([
          ["WARN", "Bus handler failed: Could not upsert the vectors: connect ECONNREFUSED 127.0.0.1:6333", false],
          ["WARN", "Bus handler failed", true]
        ])
      })
    ))

  it.live("says the same unreachable system again at most once a minute, with how often it was met in between", () =>
    withLog((health, logged) => {
      const { clock, forward } = movableClock()
      return Effect.gen(function*() {
        const refused = Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:8080"), { code: "ECONNREFUSED" })
        const embedder = Cause.fail(new Error("Could not embed", { cause: refused }))
        for (let i = 0; i < 40; i++) yield* health.report("Bus handler failed", embedder)
        // Another line is its own.
        yield* health.report("Reindex failed", embedder)
        yield* forward(59_000)
        yield* health.report("Bus handler failed", embedder)
        yield* forward(2_000)
        yield* health.report("Bus handler failed", embedder)
        yield* health.report("Bus handler failed", embedder)
        const lines = logged()
        expect(lines.filter((line) => line.level === "WARN").map((line) => line.message)).toEqual([
          "Bus handler failed: Could not embed: connect ECONNREFUSED 127.0.0.1:8080",
          "Reindex failed: Could not embed: connect ECONNREFUSED 127.0.0.1:8080",
          expect.stringMatching(/^Bus handler failed: Could not embed: connect ECONNREFUSED 127\.0\.0\.1:8080 \(40 more times in the 61\.\d s before\)$/)
        ])
        expect(lines.filter((line) => line.level === "DEBUG")).toHaveLength(41)
      }).pipe(Effect.withClock(clock))
    }))

  it.live("names the vector index's outage once, without repeating its name, and its end when its ping answers", () =>
    withLog((health, logged) =>
      Effect.gen(function*() {
        const up = yield* Ref.make(false)
        const refused = new VectorIndexError({
          message: "Qdrant: could not upsert points",
          cause: Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:6333"), { code: "ECONNREFUSED" })
        })
        yield* health.watch("vectorIndex", { name: "Qdrant", probe: Effect.flatMap(Ref.get(up), (ok) => (ok ? Effect.void : Effect.fail(refused))) })
        for (let i = 0; i < 25; i++) yield* health.report("Bus handler failed; the message will be delivered again", Cause.fail(refused))
        yield* Ref.set(up, true)
        yield* Effect.sleep("1500 millis")
        expect(yield* health.isDown("vectorIndex")).toBe(false)
        expect(logged().filter((line) => line.level === "WARN").map((line) => line.message)).toEqual([
          "Qdrant unreachable: could not upsert points: connect ECONNREFUSED 127.0.0.1:6333",
          expect.stringMatching(/^Qdrant reachable again after \d+\.\d s \(25 operations failed\)$/)
        ])
      })
    ))

  it.live("ends an outage when told (a reconnection), and a later failure starts a new one", () =>
    withLog((health, logged) =>
      Effect.gen(function*() {
        yield* health.failed("bus", "lost the connection to NATS; reconnecting")
        yield* health.report("NATS pull failed; retrying", Cause.fail(new BusError({ message: "Could not pull" })))
        yield* health.recovered("bus")
        yield* health.recovered("bus")
        yield* Effect.sleep("5100 millis")
        yield* health.failed("bus", "lost the connection to NATS; reconnecting")
        const warnings = logged().filter((line) => line.level === "WARN").map((line) => line.message)
        expect(warnings).toEqual([
          "The bus unreachable: lost the connection to NATS; reconnecting",
          expect.stringMatching(/^The bus reachable again after 0\.\d s \(2 operations failed\)$/),
          "The bus unreachable: lost the connection to NATS; reconnecting"
        ])
      })
    ), 15_000)

  it.live("logs backpressure at debug without its cause, and a fault as a warning with it", () =>
    withLog((health, logged) =>
      Effect.gen(function*() {
        yield* health.report("Bus handler failed", Cause.fail(new Busy({ message: "1 endpoint(s) at their limit" })))
        yield* health.report("Bus handler failed", Cause.fail(badQuery))
        expect(logged()).toEqual([
          { level: "DEBUG", message: "Bus handler failed: 1 endpoint(s) at their limit", annotations: 0, hasCause: false },
          { level: "WARN", message: "Bus handler failed", annotations: 0, hasCause: true }
        ])
      })
    ))
})
