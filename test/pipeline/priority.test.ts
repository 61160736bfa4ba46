/**
 * Accepting first (services/pipeline/priority.ts): while the foreground is busy, a background message
 * starts only in the first quarter of each 100 ms (an indexing one not at all); otherwise, and once its
 * stage is behind, at once.
 * Whether it is behind is what the stage monitor last sampled in this process.
 */
import { describe, expect, it } from "@effect/vitest"
import { Clock, Duration, Effect, Fiber, Layer, Option, TestClock } from "effect"
import { Bus, type BusShape } from "../../services/bus/bus.ts"
import { backgroundTurn, defaultTurns, indexingTurns, type TurnSettings } from "../../services/pipeline/priority.ts"
import { StageActivity, StageMonitor, StageSettings } from "../../services/pipeline/stages.ts"

/** When (test clock, ms) a turn started at `at` lets its message start. */
const startsAt = (at: number, state: { busy: boolean; behind?: boolean }, turns: TurnSettings = defaultTurns) =>
  Effect.gen(function*() {
    yield* TestClock.setTime(at)
    const turn = backgroundTurn(turns, () => state.busy, () => state.behind ?? false)
    const fiber = yield* Effect.fork(Effect.zipRight(turn, Clock.currentTimeMillis))
    for (let step = 0; step < 20; step++) {
      const done = yield* Fiber.poll(fiber)
      if (done._tag === "Some") return yield* fiber
      yield* TestClock.adjust(Duration.millis(5))
    }
    return yield* Effect.die("the turn never came")
  })

describe("background turns", () => {
  it.effect("start at once while nothing is being accepted, whatever the time", () =>
    Effect.gen(function*() {
      expect(yield* startsAt(1_060, { busy: false })).toBe(1_060)
      expect(yield* startsAt(2_099, { busy: false })).toBe(2_099)
    }))

  it.effect("start only in the first quarter of each 100 ms while mail is being accepted", () =>
    Effect.gen(function*() {
      expect(yield* startsAt(1_000, { busy: true })).toBe(1_000)
      expect(yield* startsAt(1_024, { busy: true })).toBe(1_024)
      expect(yield* startsAt(1_025, { busy: true })).toBe(1_100)
      expect(yield* startsAt(1_099, { busy: true })).toBe(1_100)
    }))

  it.effect("start at once when the ingest stage is behind, so the backlog stays bounded", () =>
    Effect.gen(function*() {
      expect(yield* startsAt(1_060, { busy: true, behind: true })).toBe(1_060)
    }))

  it.effect("indexing starts nothing while mail is being accepted: only once it is not, or its stage is behind", () =>
    Effect.gen(function*() {
      expect(yield* startsAt(1_000, { busy: false }, indexingTurns)).toBe(1_000)
      expect(yield* startsAt(1_060, { busy: true, behind: true }, indexingTurns)).toBe(1_060)
      // Busy at the start of every period: it waits, period after period, until accepting stops.
      const state = { busy: true }
      yield* TestClock.setTime(2_000)
      const fiber = yield* Effect.fork(Effect.zipRight(backgroundTurn(indexingTurns, () => state.busy, () => false), Clock.currentTimeMillis))
      yield* TestClock.adjust(Duration.millis(1_000))
      expect(Option.isNone(yield* Fiber.poll(fiber))).toBe(true)
      state.busy = false
      yield* TestClock.adjust(Duration.millis(100))
      expect(yield* Fiber.join(fiber)).toBe(3_100)
    }))

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
})
