/**
 * The cache Principals and WebhookSubscriptions keep (services/bus/told-cache.ts), in process over a
 * bus of its own whose broadcasts the test can stop: what it keeps, what a change drops here and on
 * another node, what it never keeps, and how long it trusts an entry when it cannot hear the bus.
 * (Across real processes on NATS: test/api/rate-limit.test.ts and test/webhooks/delivery.test.ts.)
 */
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Layer, Option, Ref, type Scope } from "effect"
import { Bus, type BusMessage, type BusShape } from "../services/bus/bus.ts"
import { makeToldCache, type ToldCache, toldCacheTiming } from "../services/bus/told-cache.ts"

interface Value {
  readonly owner: string
  readonly version: number
  readonly until?: number
}

/** Listeners and broadcasts only, in memory; `deaf` drops every broadcast (NATS unreachable). */
const smallBus = () => {
  const listeners: Array<{ readonly subject: string; readonly on: (message: BusMessage) => Effect.Effect<void> }> = []
  let deaf = false
  const bus = {
    listen: (subject: string, on: (message: BusMessage) => Effect.Effect<void>) =>
      Effect.sync(() => void listeners.push({ subject, on })),
    broadcast: (subject: string, data: Uint8Array) =>
      deaf
        ? Effect.void
        : Effect.forEach(listeners.filter((l) => l.subject === subject), (l) => l.on({ subject, data, msgId: "", deliveryCount: 1 }), {
          discard: true
        })
  } as unknown as BusShape
  return { layer: Layer.succeed(Bus, bus), setDeaf: (value: boolean) => (deaf = value) }
}

interface Node {
  readonly cache: ToldCache<Value>
  /** How often the database was asked. */
  readonly lookups: Ref.Ref<number>
  readonly get: (key: string) => Effect.Effect<Option.Option<Value>>
}

/** A cache over `bus`, and a lookup that counts its calls and answers the database's current value. */
const cacheOn = (bus: ReturnType<typeof smallBus>, database: Ref.Ref<Map<string, Value>>): Effect.Effect<Node, never, Scope.Scope> =>
  Effect.gen(function*() {
    const cache = yield* makeToldCache<Value>({ name: "test", ownerOf: (v) => v.owner, validUntil: (v) => v.until })
    const lookups = yield* Ref.make(0)
    const lookup = (key: string) =>
      Ref.update(lookups, (n) => n + 1).pipe(Effect.zipRight(Ref.get(database)), Effect.map((rows) => Option.fromNullable(rows.get(key))))
    return { cache, lookups, get: (key: string) => cache.resolve(key, lookup(key)) }
  }).pipe(Effect.provide(bus.layer))

const value = (owner: string, version: number, until?: number): Value => ({ owner, version, ...(until === undefined ? {} : { until }) })

describe("ToldCache", () => {
  it.scoped("keeps what it looked up; a change of an owner drops that owner's entries here at once and on another node over the bus", () =>
    Effect.gen(function*() {
      const bus = smallBus()
      const database = yield* Ref.make(new Map([["k1", value("ada", 1)], ["k2", value("ada", 1)], ["k3", value("bob", 1)]]))
      const here = yield* cacheOn(bus, database)
      const there = yield* cacheOn(bus, database)
      for (const key of ["k1", "k2", "k3"]) {
        yield* here.get(key)
        yield* there.get(key)
      }
      yield* Ref.set(database, new Map([["k1", value("ada", 2)], ["k2", value("ada", 2)], ["k3", value("bob", 2)]]))
      // Kept: the database is not asked again, so the old versions are answered.
      expect((yield* here.get("k1")).pipe(Option.map((v) => v.version))).toEqual(Option.some(1))
      expect(yield* Ref.get(here.lookups)).toBe(3)

      yield* here.cache.changed("ada")
      for (const node of [here, there]) {
        expect((yield* node.get("k1")).pipe(Option.map((v) => v.version))).toEqual(Option.some(2))
        expect((yield* node.get("k2")).pipe(Option.map((v) => v.version))).toEqual(Option.some(2))
        // Another owner's entry stays.
        expect((yield* node.get("k3")).pipe(Option.map((v) => v.version))).toEqual(Option.some(1))
      }
    }))

  it.scoped("ignores a change message it cannot read, and still hears the next one", () =>
    Effect.gen(function*() {
      const bus = smallBus()
      const database = yield* Ref.make(new Map([["k1", value("ada", 1)]]))
      const node = yield* cacheOn(bus, database)
      yield* node.get("k1")
      const changedSubject = "signals.test.changed"
      const busShape = yield* Effect.provide(Bus, bus.layer)
      for (const bad of ["not json", "null", "[]", JSON.stringify({ userId: 7 }), JSON.stringify({})]) {
        yield* busShape.broadcast(changedSubject, new TextEncoder().encode(bad))
      }
      yield* Ref.set(database, new Map([["k1", value("ada", 2)]]))
      expect((yield* node.get("k1")).pipe(Option.map((v) => v.version))).toEqual(Option.some(1))
      yield* busShape.broadcast(changedSubject, new TextEncoder().encode(JSON.stringify({ userId: "ada" })))
      expect((yield* node.get("k1")).pipe(Option.map((v) => v.version))).toEqual(Option.some(2))
    }))

  it.scoped("keeps nothing for a key the lookup did not find, nor what a lookup read while a change was applied", () =>
    Effect.gen(function*() {
      const bus = smallBus()
      const database = yield* Ref.make(new Map<string, Value>())
      const node = yield* cacheOn(bus, database)
      expect(yield* node.get("k1")).toEqual(Option.none())
      expect(yield* node.get("k1")).toEqual(Option.none())
      expect(yield* Ref.get(node.lookups)).toBe(2)

      // A lookup that read version 1, then a change applied before it came back: answered once, not kept.
      yield* Ref.set(database, new Map([["k1", value("ada", 1)]]))
      const raced = yield* node.cache.resolve(
        "k1",
        Ref.get(database).pipe(
          Effect.map((rows) => Option.fromNullable(rows.get("k1"))),
          Effect.tap(() => Ref.set(database, new Map([["k1", value("ada", 2)]]))),
          Effect.tap(() => node.cache.changed("ada"))
        )
      )
      expect(raced.pipe(Option.map((v) => v.version))).toEqual(Option.some(1))
      expect((yield* node.get("k1")).pipe(Option.map((v) => v.version))).toEqual(Option.some(2))
    }))

  it.live("never trusts an entry past its own end (validUntil)", () =>
    Effect.scoped(Effect.gen(function*() {
      const bus = smallBus()
      const database = yield* Ref.make(new Map([["k1", value("ada", 1, Date.now() + 150)]]))
      const node = yield* cacheOn(bus, database)
      yield* node.get("k1")
      yield* node.get("k1")
      expect(yield* Ref.get(node.lookups)).toBe(1)
      yield* Effect.sleep(Duration.millis(200))
      yield* node.get("k1")
      expect(yield* Ref.get(node.lookups)).toBe(2)
    })))

  it.live("trusts an entry past SHORT_TRUST only while it hears its own beats; deaf, it asks again after SHORT_TRUST", () =>
    Effect.scoped(Effect.gen(function*() {
      const shortTrust = Duration.toMillis(toldCacheTiming.SHORT_TRUST)
      const hearing = smallBus()
      const deaf = smallBus()
      deaf.setDeaf(true)
      const database = yield* Ref.make(new Map([["k1", value("ada", 1)]]))
      const heard = yield* cacheOn(hearing, database)
      const unheard = yield* cacheOn(deaf, database)
      // The first look-up starts the beats; an entry looked up once they come back is trusted longer.
      yield* heard.get("warm-up")
      yield* unheard.get("warm-up")
      yield* Effect.sleep(Duration.millis(250))
      yield* heard.get("k1")
      yield* unheard.get("k1")
      yield* Effect.sleep(Duration.millis(shortTrust + 150))
      yield* heard.get("k1")
      yield* unheard.get("k1")
      // Each asked once for the warm-up and once for k1; the deaf one asked for k1 again.
      expect(yield* Ref.get(heard.lookups)).toBe(2)
      expect(yield* Ref.get(unheard.lookups)).toBe(3)
    })))
})
