/**
 * DNS answers kept for a short while, for the questions that repeat with every message: the SMTP
 * node's SPF, DKIM, DMARC and ARC checks (layers/mailauth.ts) and the mta's MX and address lookups
 * (outbound/mta.ts). Other askers (webhook targets, domain verification) want the answer of now and
 * ask the Dns port itself.
 *
 * Each inbound message asks the same few questions of its sender's domain (the SPF record, the DKIM
 * key, the DMARC record), and mail comes from few domains: bench:smtp measured the checks at two thirds
 * of the SMTP node's CPU per message, most of it asking DNS again what it had just answered. Outbound
 * mail goes to few domains too. So:
 *
 * - an answer is kept for `ttl` and a "no such records" answer for `negativeTtl`; a failure to get an
 *   answer (a time-out, a server failure) is not kept, so the next message asks again;
 * - the same question asked while it is in flight waits for that answer instead of asking twice;
 * - at most `maxEntries` answers are kept, the oldest dropped first.
 *
 * The port gives no record TTLs, so the times are fixed and short: a changed SPF or MX record or a
 * rotated DKIM key is seen within a minute, as with any resolver that caches.
 */
import { Cause, Deferred, Duration, Effect, Exit, Option } from "effect"
import type { DnsError } from "./dns.ts"

export interface AnswerCacheOptions {
  /** How long an answer is kept. */
  readonly ttl: Duration.DurationInput
  /** How long "no such records" is kept. */
  readonly negativeTtl: Duration.DurationInput
  /** Answers kept at most. */
  readonly maxEntries: number
}

/** For the inbound checks, and for delivery's MX and address lookups alike. */
export const keptAnswers: AnswerCacheOptions = {
  ttl: Duration.seconds(60),
  negativeTtl: Duration.seconds(30),
  maxEntries: 10_000
}

interface Entry<A> {
  readonly answer: Deferred.Deferred<A, DnsError>
  /** When the answer stops being used (ms since the epoch); infinite while it is in flight. */
  expires: number
  /** The answer once it came (records, or "no such records"). */
  kept?: Exit.Exit<A, DnsError>
}

/**
 * `ask` with its answers kept: `(key, question)` answers from the cache while it holds an answer for
 * `key`, else runs `question` once for everyone asking meanwhile. `peek(key)` is the kept answer
 * itself, or `undefined` (none, expired, or still in flight): for a caller outside Effect that answers
 * many questions a second (the checks' thread, layers/mailauth.ts) and need not start a fiber for
 * each. `keptUntil(key)` is when that answer stops being used, so another keeper of it (that thread)
 * can keep it exactly as long.
 */
export const answerCache = <A>(options: AnswerCacheOptions, now: () => number = Date.now) => {
  const ttl = Duration.toMillis(options.ttl)
  const negativeTtl = Duration.toMillis(options.negativeTtl)
  const entries = new Map<string, Entry<A>>()

  const keep = (key: string, entry: Entry<A>) => {
    if (entries.size >= options.maxEntries) {
      const oldest = entries.keys().next()
      if (oldest.done !== true) entries.delete(oldest.value)
    }
    entries.set(key, entry)
  }

  /** The entry holding a kept answer for `key` that is still used, if any. */
  const keptEntry = (key: string): Entry<A> | undefined => {
    const cached = entries.get(key)
    return cached?.kept !== undefined && cached.expires > now() ? cached : undefined
  }

  const peek = (key: string): Exit.Exit<A, DnsError> | undefined => keptEntry(key)?.kept

  /** When the kept answer for `key` stops being used (ms since the epoch), or `undefined` when none is kept. */
  const keptUntil = (key: string): number | undefined => keptEntry(key)?.expires

  const ask = (key: string, question: Effect.Effect<A, DnsError>): Effect.Effect<A, DnsError> =>
    Effect.suspend(() => {
      const cached = entries.get(key)
      if (cached !== undefined && cached.expires > now()) return Deferred.await(cached.answer)
      if (cached !== undefined) entries.delete(key)
      return Effect.flatMap(Deferred.make<A, DnsError>(), (answer) => {
        const entry: Entry<A> = { answer, expires: Number.POSITIVE_INFINITY }
        keep(key, entry)
        // The question runs on its own (its deadline is the Dns port's): an asker that gives up, say at
        // its message's deadline, leaves it to answer the others waiting for it.
        const settle = (exit: Exit.Exit<A, DnsError>) =>
          Effect.suspend(() => {
            const notFound = Exit.isFailure(exit) &&
              Option.exists(Cause.failureOption(exit.cause), (error) => error.reason === "NotFound")
            if (Exit.isSuccess(exit)) entry.expires = now() + ttl
            else if (notFound) entry.expires = now() + negativeTtl
            else if (entries.get(key) === entry) entries.delete(key)
            if (Exit.isSuccess(exit) || notFound) entry.kept = exit
            return Deferred.done(answer, exit)
          })
        return question.pipe(
          Effect.exit,
          Effect.flatMap(settle),
          Effect.forkDaemon,
          Effect.zipRight(Deferred.await(answer))
        )
      })
    })

  return Object.assign(ask, { peek, keptUntil })
}
