/**
 * The SMTP checks' DNS answers kept for a while (services/dns/answers.ts): asked once per question
 * while kept, "no such records" kept shorter, failures not kept, one question in flight shared, an
 * asker that gives up not ending the question for the others, at most `maxEntries` kept, and `peek`
 * giving the kept answer without asking.
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber } from "effect"
import { answerCache } from "../../services/dns/answers.ts"
import { DnsError } from "../../services/dns/dns.ts"

const options = { ttl: "60 seconds", negativeTtl: "30 seconds", maxEntries: 3 } as const

/** A clock the test moves, and a question that counts how often it is asked. */
const setup = () => {
  let time = 1_000_000
  const cache = answerCache<ReadonlyArray<string>>(options, () => time)
  let asked = 0
  const answering = (answer: Effect.Effect<ReadonlyArray<string>, DnsError>) =>
    Effect.suspend(() => {
      asked++
      return answer
    })
  return { cache, answering, asked: () => asked, pass: (ms: number) => void (time += ms) }
}

const notFound = new DnsError({ reason: "NotFound", message: "no such records" })
const unavailable = new DnsError({ reason: "Unavailable", message: "timed out" })

describe("DNS answers for the SMTP checks", () => {
  it.effect("asks a question once while its answer is kept, and again once it expires", () =>
    Effect.gen(function*() {
      const { cache, answering, asked, pass } = setup()
      const question = answering(Effect.succeed(["v=spf1 -all"]))
      expect(yield* cache("TXT example.com", question)).toEqual(["v=spf1 -all"])
      pass(59_000)
      expect(yield* cache("TXT example.com", question)).toEqual(["v=spf1 -all"])
      expect(asked()).toBe(1)
      pass(2_000)
      yield* cache("TXT example.com", question)
      expect(asked()).toBe(2)
    }))

  it.effect("keeps 'no such records' for the shorter time, and a failure to answer not at all", () =>
    Effect.gen(function*() {
      const { cache, answering, asked, pass } = setup()
      const missing = answering(Effect.fail(notFound))
      expect((yield* Effect.flip(cache("TXT _dmarc.example.com", missing))).reason).toBe("NotFound")
      pass(29_000)
      yield* Effect.either(cache("TXT _dmarc.example.com", missing))
      expect(asked()).toBe(1)
      pass(2_000)
      yield* Effect.either(cache("TXT _dmarc.example.com", missing))
      expect(asked()).toBe(2)

      const failing = answering(Effect.fail(unavailable))
      expect((yield* Effect.flip(cache("TXT down.example", failing))).reason).toBe("Unavailable")
      expect((yield* Effect.flip(cache("TXT down.example", failing))).reason).toBe("Unavailable")
      expect(asked()).toBe(4)
    }))

  it.effect("asks a question in flight once for everyone, and an asker giving up leaves it to the rest", () =>
    Effect.gen(function*() {
      const { cache, answering, asked } = setup()
      const release = yield* Deferred.make<void>()
      const slow = answering(Effect.as(Deferred.await(release), ["key"]))
      const first = yield* Effect.fork(cache("TXT sel._domainkey.example.com", slow))
      const second = yield* Effect.fork(cache("TXT sel._domainkey.example.com", slow))
      yield* Effect.yieldNow()
      yield* Fiber.interrupt(first)
      yield* Deferred.succeed(release, undefined)
      expect(yield* Fiber.join(second)).toEqual(["key"])
      expect(asked()).toBe(1)
    }))

  it.effect("keeps at most maxEntries answers, dropping the oldest", () =>
    Effect.gen(function*() {
      const { cache, answering, asked } = setup()
      const question = answering(Effect.succeed(["a"]))
      for (const name of ["a", "b", "c", "d"]) yield* cache(`TXT ${name}.example`, question)
      expect(asked()).toBe(4)
      yield* cache("TXT d.example", question)
      expect(asked()).toBe(4)
      yield* cache("TXT a.example", question)
      expect(asked()).toBe(5)
    }))
  it.effect("peek: the kept answer or 'no such records' without asking; nothing in flight, failed or expired", () =>
    Effect.gen(function*() {
      const { cache, answering, asked, pass } = setup()
      expect(cache.peek("TXT example.com")).toBeUndefined()
      const gate = yield* Deferred.make<void>()
      const slow = answering(Effect.as(Deferred.await(gate), ["v=spf1 -all"]))
      const waiting = yield* Effect.fork(cache("TXT example.com", slow))
      yield* Effect.yieldNow()
      // In flight: no answer yet.
      expect(cache.peek("TXT example.com")).toBeUndefined()
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(waiting)
      expect(cache.peek("TXT example.com")).toEqual(Exit.succeed(["v=spf1 -all"]))
      yield* Effect.either(cache("TXT _dmarc.example.com", answering(Effect.fail(notFound))))
      expect(Exit.isFailure(cache.peek("TXT _dmarc.example.com")!)).toBe(true)
      yield* Effect.either(cache("TXT down.example", answering(Effect.fail(unavailable))))
      expect(cache.peek("TXT down.example")).toBeUndefined()
      expect(asked()).toBe(3)
      pass(31_000)
      expect(cache.peek("TXT _dmarc.example.com")).toBeUndefined()
      expect(cache.peek("TXT example.com")).toEqual(Exit.succeed(["v=spf1 -all"]))
      pass(30_000)
      expect(cache.peek("TXT example.com")).toBeUndefined()
    }))
})
