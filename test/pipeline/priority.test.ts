/**
 * Accepting first (services/pipeline/priority.ts): while the foreground is busy (for ingest, a DATA in
 * flight and the event loop loaded; for indexing, a DATA in flight), a background message waits, asking
 * again every 100 ms; otherwise, and once its stage is behind, it starts at once. Whether it is behind
 * is what the stage monitor last sampled in this process; the loop's load is Node's own accounting of it.
 */
import { describe, expect, it } from "@effect/vitest"
import { Clock, Duration, Effect, Fiber, Layer, Option, TestClock } from "effect"
import { Bus, type BusShape, type ConsumerLag, type ConsumerRef } from "../../services/bus/bus.ts"
import { backgroundTurn, foregroundBusy, LOADED, loopLoad } from "../../services/pipeline/priority.ts"
import { StageActivity, StageMonitor, StageSettings } from "../../services/pipeline/stages.ts"

/** When (test clock, ms) a turn started at `at` lets its message start. */
const startsAt = (at: number, state: { busy: boolean; behind?: boolean }) =>
  Effect.gen(function*() {
    yield* TestClock.setTime(at)
    const turn = backgroundTurn("ingest", () => state.busy, () => state.behind ?? false)
    const fiber = yield* Effect.fork(Effect.zipRight(turn, Clock.currentTimeMillis))
    for (let step = 0; step < 20; step++) {
      const done = yield* Fiber.poll(fiber)
      if (done._tag === "Some") return yield* fiber
      yield* TestClock.adjust(Duration.millis(5))
    }
    return yield* Effect.die("the turn never came")
  })

/** Keeps the event loop busy for `ms`, as accepting under a load does. */
const spin = (ms: number) => {
  const end = performance.now() + ms
  while (performance.now() < end) {
    // busy
  }
}

describe("background turns", () => {
  it.effect("start at once while the foreground is not busy, whatever the time", () =>
    Effect.gen(function*() {
      expect(yield* startsAt(1_060, { busy: false })).toBe(1_060)
      expect(yield* startsAt(2_099, { busy: false })).toBe(2_099)
    }))

  it.effect("start at once when the stage is behind, so the backlog stays bounded", () =>
    Effect.gen(function*() {
      expect(yield* startsAt(1_060, { busy: true, behind: true })).toBe(1_060)
    }))

  it.effect("wait while the foreground is busy, period after period, and start in the first period it is not", () =>
    Effect.gen(function*() {
      const state = { busy: true }
      yield* TestClock.setTime(2_000)
      const fiber = yield* Effect.fork(Effect.zipRight(backgroundTurn("index", () => state.busy, () => false), Clock.currentTimeMillis))
      yield* TestClock.adjust(Duration.millis(1_000))
      expect(Option.isNone(yield* Fiber.poll(fiber))).toBe(true)
      state.busy = false
      yield* TestClock.adjust(Duration.millis(100))
      expect(yield* Fiber.join(fiber)).toBe(3_100)
    }))

  it("ingest's foreground is busy only with a DATA in flight and the loop loaded: not for a slow sender, not when idle", async () => {
    const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
    // A first reading starts a period; the next, a period later, reads it.
    await pause(120)
    loopLoad()
    spin(150)
    expect(loopLoad()).toBeGreaterThanOrEqual(LOADED)
    // Loaded, but nothing in flight: nothing to give way to.
    expect(foregroundBusy()).toBe(false)
    StageActivity.acceptStarted()
    try {
      // Within the period: the same reading, not a new one.
      expect(foregroundBusy()).toBe(true)
      // A DATA in flight from a slow sender, the loop idle meanwhile: ingest is not held back by it. The
      // loop is this test's, shared with the runner's own work, which a busy CI machine can make take
      // most of one period: the reading must come down within a few periods, not necessarily the first.
      let load = 1
      for (let period = 0; period < 20 && load >= LOADED; period++) {
        await pause(150)
        load = loopLoad()
      }
      expect(load).toBeLessThan(LOADED)
      expect(foregroundBusy()).toBe(false)
    } finally {
      StageActivity.acceptEnded()
    }
  })

  it.effect("the ingest stage counts as behind from the monitor's sample that finds it past STAGE_LAG_WARNING", () =>
    Effect.gen(function*() {
      let oldest = new Date()
      // Only the lag is asked of the bus.
      const bus = { lag: () => Effect.succeed(Option.some({ pending: 5, inFlight: 1, oldest })) } as unknown as BusShape
      const monitor = StageMonitor.Default.pipe(
        Layer.provide(Layer.succeed(Bus, bus)),
        Layer.provide(Layer.succeed(StageSettings, { lagWarning: Duration.seconds(60), interval: Duration.seconds(1), logged: [] }))
      )
      yield* Effect.gen(function*() {
        yield* TestClock.adjust(Duration.seconds(1))
        expect(StageActivity.lagging("ingest")).toBe(false)
        oldest = new Date(Date.now() - 61_000)
        yield* TestClock.adjust(Duration.seconds(1))
        expect(StageActivity.lagging("ingest")).toBe(true)
        oldest = new Date()
        yield* TestClock.adjust(Duration.seconds(1))
        expect(StageActivity.lagging("ingest")).toBe(false)
      }).pipe(Effect.provide(monitor))
    }))

  it.effect("the words and index stages' lag counts their consumers of sent mail too; unknown when either's is", () =>
    Effect.gen(function*() {
      const now = Date.now()
      const lags: Record<string, Option.Option<ConsumerLag>> = {
        words: Option.some({ pending: 2, inFlight: 1, oldest: new Date(now - 10_000) }),
        "words-sent": Option.some({ pending: 3, inFlight: 0, oldest: new Date(now - 70_000) }),
        index: Option.some({ pending: 0, inFlight: 0, oldest: undefined }),
        "index-sent": Option.none()
      }
      const bus = { lag: (consumer: ConsumerRef) => Effect.succeed(lags[consumer.name] ?? Option.some({ pending: 0, inFlight: 0, oldest: undefined })) }
      const monitor = StageMonitor.Default.pipe(
        Layer.provide(Layer.succeed(Bus, bus as unknown as BusShape)),
        Layer.provide(Layer.succeed(StageSettings, { lagWarning: Duration.seconds(60), interval: Duration.seconds(1), logged: [] }))
      )
      const status = yield* Effect.gen(function*() {
        yield* TestClock.adjust(Duration.seconds(1))
        return yield* (yield* StageMonitor).status
      }).pipe(Effect.provide(monitor))
      expect(status.words).toMatchObject({ pending: 5, inFlight: 1, lagging: true })
      expect(status.words.oldestAgeSeconds).toBeGreaterThanOrEqual(70)
      expect(status.index).toMatchObject({ pending: null, inFlight: null, oldestAgeSeconds: null, lagging: false })
    }))
})
