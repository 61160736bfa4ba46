/**
 * A cache of what the database says, kept in each process and told of changes over the bus: what
 * Principals (who a credential acts for, issue 19) and WebhookSubscriptions (an account's endpoints)
 * keep. What it may believe, and for how long:
 *
 * - Every entry has an owner (a user). A change that affects what the owner's entries say goes through
 *   `changed(owner)`: it drops every entry of that owner here at once, before the caller answers, and
 *   tells every other node over the bus (`signals.<name>.changed`), which drop theirs as soon as they
 *   hear it.
 * - The bus is best effort, so each node checks that it is hearing it: it broadcasts a beat every
 *   BEAT and listens for its own. While its beats come back, an entry looked up since they started
 *   coming back is trusted until MAX_AGE. When they stop (NATS unreachable, a partition), or for an
 *   entry looked up before the bus came back (a change may have been told while it was away), an
 *   entry is trusted for SHORT_TRUST only, then looked up again: a change the node cannot hear is
 *   honoured within DEAF_AFTER + SHORT_TRUST at worst, inside a second.
 * - An entry that stops holding by itself (a key's expiry, a session's end: `validUntil`) is never
 *   trusted past it.
 * - A lookup that was in flight while a change was applied is used once, not kept: it may have read
 *   the state from before the change.
 * - MAX_AGE bounds what a change told by a node that could not reach the bus at that moment (its
 *   broadcast lost) can leave behind.
 */
import { randomBytes } from "node:crypto"
import { Duration, Effect, Option, Schedule, type Scope } from "effect"
import { Bus, decodeJson, encodeJson } from "./bus.ts"

export const toldCacheTiming = {
  /** How long an entry is believed without the bus's word (with DEAF_AFTER, well inside a second). */
  SHORT_TRUST: Duration.millis(500),
  /** How long an entry is believed at most, whatever the bus says. */
  MAX_AGE: Duration.seconds(30),
  /** How often a node checks that it hears the bus. */
  BEAT: Duration.millis(100),
  /** Silence after which the bus counts as not heard. */
  DEAF_AFTER: Duration.millis(400)
} as const

/** Entries kept at most; past it the oldest are dropped (they are looked up again when used). */
const MAX_ENTRIES = 100_000

export interface ToldCache<V> {
  /**
   * The entry for `key` when it may still be believed, else what `lookup` finds (kept unless a change
   * was applied while it ran). A lookup that finds nothing is not kept.
   */
  readonly resolve: <E, R>(key: string, lookup: Effect.Effect<Option.Option<V>, E, R>) => Effect.Effect<Option.Option<V>, E, R>
  /**
   * Something that decides what `owner`'s entries say has changed (in the database, already
   * committed): forget them here at once and tell every other node.
   */
  readonly changed: (owner: string) => Effect.Effect<void>
}

interface Entry<V> {
  readonly value: V
  readonly owner: string
  readonly fetchedAt: number
}

/** The owner a change message names; nothing for anything else, which is ignored. */
const ownerIn = (data: Uint8Array): string | undefined => {
  try {
    const change = decodeJson(data) as { readonly userId?: unknown } | null
    return typeof change?.userId === "string" ? change.userId : undefined
  } catch {
    return undefined
  }
}

export const makeToldCache = <V>(options: {
  /** Names the bus subjects: `signals.<name>.changed` and `signals.<name>.beat.<node>`. */
  readonly name: string
  /** Whose entry it is: `changed(owner)` drops every entry of that owner. */
  readonly ownerOf: (value: V) => string
  /** When the value stops holding by itself (ms since the epoch), if it does. */
  readonly validUntil?: (value: V) => number | undefined
}): Effect.Effect<ToldCache<V>, never, Bus | Scope.Scope> =>
  Effect.gen(function*() {
    const bus = yield* Bus
    const changedSubject = `signals.${options.name}.changed`
    const shortTrust = Duration.toMillis(toldCacheTiming.SHORT_TRUST)
    const maxAge = Duration.toMillis(toldCacheTiming.MAX_AGE)
    const deafAfter = Duration.toMillis(toldCacheTiming.DEAF_AFTER)

    const entries = new Map<string, Entry<V>>()
    const keysOfOwner = new Map<string, Set<string>>()
    /** Changes applied so far: a lookup that saw this number move while in flight is not kept. */
    let changes = 0
    const node = randomBytes(6).toString("hex")
    const beatSubject = `signals.${options.name}.beat.${node}`
    let lastBeat = 0
    /** When this node's beats started coming back after a silence (or never, yet). */
    let hearingSince = Number.POSITIVE_INFINITY

    const forget = (key: string, entry: Entry<V>) => {
      entries.delete(key)
      const keys = keysOfOwner.get(entry.owner)
      keys?.delete(key)
      if (keys?.size === 0) keysOfOwner.delete(entry.owner)
    }

    const dropOwner = (owner: string) => {
      changes++
      const keys = keysOfOwner.get(owner)
      if (keys === undefined) return
      keysOfOwner.delete(owner)
      for (const key of keys) entries.delete(key)
    }

    const heardBeat = (now: number) => {
      if (now - lastBeat > deafAfter) hearingSince = now
      lastBeat = now
    }

    yield* bus.listen(changedSubject, (message) =>
      Effect.sync(() => {
        const owner = ownerIn(message.data)
        if (owner !== undefined) dropOwner(owner)
      }))
    // Only a node that uses the cache beats, from its first look-up on.
    yield* bus.listen(beatSubject, () => Effect.sync(() => heardBeat(Date.now())))
    const scope = yield* Effect.scope
    let beating = false
    const startBeating = Effect.suspend(() => {
      if (beating) return Effect.void
      beating = true
      // Started by a request's look-up, the beat would take on that fiber's state: forked from a region
      // that cannot be interrupted (an MCP request's), it could not be either, and every SIGTERM after
      // one MCP request waited for SHUTDOWN_TIMEOUT and exited 1.
      return bus.broadcast(beatSubject, new Uint8Array()).pipe(
        Effect.repeat(Schedule.spaced(toldCacheTiming.BEAT)),
        Effect.interruptible,
        Effect.forkIn(scope),
        Effect.asVoid
      )
    })

    const trusted = (entry: Entry<V>, now: number) => {
      const until = options.validUntil?.(entry.value)
      if (until !== undefined && now >= until) return false
      const age = now - entry.fetchedAt
      if (age < shortTrust) return true
      const hearing = now - lastBeat <= deafAfter
      return hearing && entry.fetchedAt >= hearingSince && age < maxAge
    }

    const cached = (key: string): Option.Option<V> => {
      const entry = entries.get(key)
      if (entry === undefined) return Option.none()
      if (trusted(entry, Date.now())) return Option.some(entry.value)
      forget(key, entry)
      return Option.none()
    }

    const resolve = <E, R>(key: string, lookup: Effect.Effect<Option.Option<V>, E, R>): Effect.Effect<Option.Option<V>, E, R> =>
      Effect.suspend(() => {
        if (!beating) return Effect.zipRight(startBeating, resolve(key, lookup))
        const hit = cached(key)
        if (Option.isSome(hit)) return Effect.succeed(hit)
        const before = changes
        const startedAt = Date.now()
        return Effect.tap(lookup, (found) =>
          Effect.sync(() => {
            if (Option.isNone(found) || changes !== before) return
            // Another lookup of the key may have finished first.
            const replaced = entries.get(key)
            if (replaced !== undefined) forget(key, replaced)
            if (entries.size >= MAX_ENTRIES) {
              const oldest = entries.entries().next()
              if (oldest.done !== true) forget(...oldest.value)
            }
            const owner = options.ownerOf(found.value)
            entries.set(key, { value: found.value, owner, fetchedAt: startedAt })
            const keys = keysOfOwner.get(owner) ?? new Set<string>()
            keys.add(key)
            keysOfOwner.set(owner, keys)
          }))
      })

    const changed = (owner: string) =>
      Effect.suspend(() => {
        dropOwner(owner)
        return bus.broadcast(changedSubject, encodeJson({ userId: owner }))
      })

    return { resolve, changed }
  })
