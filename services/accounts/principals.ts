/**
 * Who a credential acts for, cached in each process, so that a request does not ask the database
 * again (issue 19). What the cache may believe, and for how long:
 *
 * - A change that affects what a credential may do (a key revoked, a session ended, a plan changed)
 *   goes through `changed(userId)`: it drops every cached credential of that user here, before the
 *   caller answers, and tells every other node over the bus (`signals.principals.changed`), which
 *   drop theirs as soon as they hear it.
 * - The bus is best effort, so each node checks that it is hearing it: it broadcasts a beat every
 *   BEAT and listens for its own. While its beats come back, an entry looked up since they started
 *   coming back is trusted until MAX_AGE. When they stop (NATS unreachable, a partition), or for an
 *   entry looked up before the bus came back (a change may have been told while it was away), an
 *   entry is trusted for SHORT_TRUST only, then looked up again: a change the node cannot hear is
 *   honoured within DEAF_AFTER + SHORT_TRUST at worst, inside the 1 s promised.
 * - A credential that expires by itself (a key's expiry, a session's end) is never trusted past it.
 * - A lookup that was in flight while a change was applied is used once, not kept: it may have read
 *   the state from before the change.
 * - MAX_AGE bounds what a change told by a node that could not reach the bus at that moment (its
 *   broadcast lost) can leave behind.
 */
import { randomBytes } from "node:crypto"
import { Duration, Effect, Option, Schedule } from "effect"
import { Bus, decodeJson, encodeJson } from "../bus/bus.ts"
import type { Plan } from "../plans/plans.ts"

/** A credential's owner as looked up, with what bounds how long it holds. */
export interface PrincipalRecord {
  readonly userId: string
  readonly plan: Plan
  readonly keyId: Option.Option<string>
  readonly sessionId: Option.Option<string>
  /** When the credential stops working by itself (ms since the epoch); none for a key without expiry. */
  readonly validUntil: Option.Option<number>
}

interface Entry {
  readonly record: PrincipalRecord
  readonly fetchedAt: number
}

export const principalTiming = {
  /** How long an entry is believed without the bus's word (with DEAF_AFTER, well inside the 1 s promised). */
  SHORT_TRUST: Duration.millis(500),
  /** How long an entry is believed at most, whatever the bus says. */
  MAX_AGE: Duration.seconds(30),
  /** How often a node checks that it hears the bus. */
  BEAT: Duration.millis(100),
  /** Silence after which the bus counts as not heard. */
  DEAF_AFTER: Duration.millis(400)
} as const

const CHANGED = "signals.principals.changed"
const beatSubject = (node: string) => `signals.principals.beat.${node}`
/** Entries kept at most; past it the oldest are dropped (they are looked up again when used). */
const MAX_ENTRIES = 100_000

export class Principals extends Effect.Service<Principals>()("mailroom/Principals", {
  scoped: Effect.gen(function*() {
    const bus = yield* Bus
    const shortTrust = Duration.toMillis(principalTiming.SHORT_TRUST)
    const maxAge = Duration.toMillis(principalTiming.MAX_AGE)
    const deafAfter = Duration.toMillis(principalTiming.DEAF_AFTER)

    const entries = new Map<string, Entry>()
    const keysOfUser = new Map<string, Set<string>>()
    /** Changes applied so far: a lookup that saw this number move while in flight is not kept. */
    let changes = 0
    const node = randomBytes(6).toString("hex")
    let lastBeat = 0
    /** When this node's beats started coming back after a silence (or never, yet). */
    let hearingSince = Number.POSITIVE_INFINITY

    const forget = (key: string, entry: Entry) => {
      entries.delete(key)
      const keys = keysOfUser.get(entry.record.userId)
      keys?.delete(key)
      if (keys?.size === 0) keysOfUser.delete(entry.record.userId)
    }

    const dropUser = (userId: string) => {
      changes++
      const keys = keysOfUser.get(userId)
      if (keys === undefined) return
      keysOfUser.delete(userId)
      for (const key of keys) entries.delete(key)
    }

    const heardBeat = (now: number) => {
      if (now - lastBeat > deafAfter) hearingSince = now
      lastBeat = now
    }

    yield* bus.listen(CHANGED, (message) =>
      Effect.sync(() => {
        const change = decodeJson(message.data) as { readonly userId?: unknown }
        if (typeof change.userId === "string") dropUser(change.userId)
      }))
    // Only a node that caches (one that authenticates requests) beats, from its first look-up on.
    yield* bus.listen(beatSubject(node), () => Effect.sync(() => heardBeat(Date.now())))
    const scope = yield* Effect.scope
    let beating = false
    const startBeating = Effect.suspend(() => {
      if (beating) return Effect.void
      beating = true
      return bus.broadcast(beatSubject(node), new Uint8Array()).pipe(
        Effect.repeat(Schedule.spaced(principalTiming.BEAT)),
        Effect.forkIn(scope),
        Effect.asVoid
      )
    })

    const trusted = (entry: Entry, now: number) => {
      if (Option.isSome(entry.record.validUntil) && now >= entry.record.validUntil.value) return false
      const age = now - entry.fetchedAt
      if (age < shortTrust) return true
      const hearing = now - lastBeat <= deafAfter
      return hearing && entry.fetchedAt >= hearingSince && age < maxAge
    }

    /** The cached owner of a credential, when it may still be believed. */
    const cached = (key: string): Option.Option<PrincipalRecord> => {
      const entry = entries.get(key)
      if (entry === undefined) return Option.none()
      if (trusted(entry, Date.now())) return Option.some(entry.record)
      forget(key, entry)
      return Option.none()
    }

    /**
     * Look a credential up through `lookup` and keep what it found, unless a change was applied
     * while it ran.
     */
    const resolve = <E, R>(
      key: string,
      lookup: Effect.Effect<Option.Option<PrincipalRecord>, E, R>
    ): Effect.Effect<Option.Option<PrincipalRecord>, E, R> =>
      Effect.suspend(() => {
        if (!beating) return Effect.zipRight(startBeating, resolve(key, lookup))
        const hit = cached(key)
        if (Option.isSome(hit)) return Effect.succeed(hit)
        const before = changes
        const startedAt = Date.now()
        return Effect.tap(lookup, (found) =>
          Effect.sync(() => {
            if (Option.isNone(found) || changes !== before) return
            if (entries.size >= MAX_ENTRIES) {
              const oldest = entries.entries().next()
              if (oldest.done !== true) forget(...oldest.value)
            }
            entries.set(key, { record: found.value, fetchedAt: startedAt })
            const keys = keysOfUser.get(found.value.userId) ?? new Set<string>()
            keys.add(key)
            keysOfUser.set(found.value.userId, keys)
          }))
      })

    /**
     * Something that decides what a user's credentials may do has changed (in the database, already
     * committed): forget them here at once and tell every other node.
     */
    const changed = (userId: string) =>
      Effect.suspend(() => {
        dropUser(userId)
        return bus.broadcast(CHANGED, encodeJson({ userId }))
      })

    return { resolve, changed } as const
  })
}) {}
