/**
 * The recipient directory each process that accepts mail keeps in memory (issue 18, item 3), so
 * that RCPT does not ask the database for every message. What it may believe, and for how long:
 *
 * - It keeps what the RCPT lookup found for an address (the mailbox, its owner, the plan, the
 *   owner's counts of the day and the billing period) for FRESH_FOR at most, and only for owners
 *   without allow or block lists: a list's answer depends on the sender, so those addresses are
 *   asked for every message, as before. An unknown address is never kept, so a mailbox created a
 *   moment ago receives on its first RCPT.
 * - A change that decides where mail to a user's addresses goes or whether it is taken (a mailbox
 *   renamed or deleted, a domain's mailboxes moved to another domain, a list entry added or removed,
 *   a plan changed) goes through `changed(userId)`: it drops that user's addresses here before the caller
 *   answers, and tells every other process over the bus (`signals.directory.changed`), which drop
 *   theirs as soon as they hear it. The bus is best effort; FRESH_FOR bounds what a lost signal can
 *   leave behind.
 * - A lookup that was in flight while a change was applied is used once, not kept: it may have read
 *   the state from before the change.
 * - Counts: what this process accepts is added to the kept counts at once (`counted`), so one
 *   process misses none of its own; other processes' mail shows within FRESH_FOR. A message stored
 *   while a lookup ran may be counted twice here, which only errs towards the limit. Near a limit
 *   Inbound asks the database anyway (`nearLimit`), so the limits hold as they did without the
 *   directory.
 * - Changes that only let more mail in (a mailbox created, a domain verified) need no signal: no
 *   refusal is kept.
 */
import { Duration, Effect } from "effect"
import { Bus, decodeJson, encodeJson, subjects } from "../bus/bus.ts"
import type { Plan } from "../plans/plans.ts"

/** What RCPT needs to know of an address, as the database answered it. */
export interface DirectoryEntry {
  readonly mailboxId: string
  readonly userId: string
  readonly plan: Plan
  readonly periodStart: Date
  /** The UTC day `today` counts. */
  readonly day: string
  /** The owner's emails of `day` and of the billing period, with this process's since added. */
  readonly today: number
  readonly thisPeriod: number
  /** The bytes of the owner's stored mail, when looked up (mail is charged once stored, not here). */
  readonly storage: number
}

interface Kept {
  entry: DirectoryEntry
  readonly fetchedAt: number
}

/** How long a kept address is believed without being asked again. */
export const FRESH_FOR = Duration.seconds(1)
/** Within this share of a limit (and at least one email of it), RCPT asks the database. */
const LIMIT_MARGIN = 0.02
/** Addresses kept at most; past it the oldest are dropped (they are asked again when used). */
const MAX_ENTRIES = 100_000

const CHANGED = subjects.directoryChanged

/** Whether `count` is close enough to `limit` that only the database's count may decide. */
export const nearLimit = (count: number, limit: number | null): boolean =>
  limit !== null && count + Math.max(1, Math.floor(limit * LIMIT_MARGIN)) >= limit

export class RecipientDirectory extends Effect.Service<RecipientDirectory>()("mailroom/RecipientDirectory", {
  scoped: Effect.gen(function*() {
    const bus = yield* Bus
    const freshFor = Duration.toMillis(FRESH_FOR)
    const kept = new Map<string, Kept>()
    const addressesOfUser = new Map<string, Set<string>>()
    /** Changes applied so far: a lookup that saw this number move while in flight is not kept. */
    let changes = 0

    const forget = (address: string, userId: string) => {
      kept.delete(address)
      const addresses = addressesOfUser.get(userId)
      addresses?.delete(address)
      if (addresses?.size === 0) addressesOfUser.delete(userId)
    }

    const dropUser = (userId: string) => {
      changes++
      const addresses = addressesOfUser.get(userId)
      if (addresses === undefined) return
      addressesOfUser.delete(userId)
      for (const address of addresses) kept.delete(address)
    }

    yield* bus.listen(CHANGED, (message) =>
      Effect.sync(() => {
        const change = decodeJson(message.data) as { readonly userId?: unknown }
        if (typeof change.userId === "string") dropUser(change.userId)
      }))

    /** The kept entry of a lower-cased address, while it may be believed on `day`. */
    const get = (address: string, day: string): DirectoryEntry | undefined => {
      const found = kept.get(address)
      if (found === undefined) return undefined
      if (Date.now() - found.fetchedAt < freshFor && found.entry.day === day) return found.entry
      forget(address, found.entry.userId)
      return undefined
    }

    /** A mark to hand to `keep`: taken before the lookup whose answer it keeps. */
    const mark = () => ({ changes, at: Date.now() })

    /** Keep what a lookup started at `since` found for `address`, unless a change came meanwhile. */
    const keep = (address: string, entry: DirectoryEntry, since: ReturnType<typeof mark>) => {
      if (since.changes !== changes) return
      const previous = kept.get(address)
      if (previous !== undefined) forget(address, previous.entry.userId)
      if (kept.size >= MAX_ENTRIES) {
        const oldest = kept.entries().next()
        if (oldest.done !== true) forget(oldest.value[0], oldest.value[1].entry.userId)
      }
      kept.set(address, { entry, fetchedAt: since.at })
      const addresses = addressesOfUser.get(entry.userId) ?? new Set<string>()
      addresses.add(address)
      addressesOfUser.set(entry.userId, addresses)
    }

    /** This process stored `emails` more (or, negative, gave them back) for `userId` on `day`. */
    const counted = (userId: string, day: string, emails: number) => {
      for (const address of addressesOfUser.get(userId) ?? []) {
        const found = kept.get(address)!
        const { entry } = found
        found.entry = {
          ...entry,
          today: entry.day === day ? entry.today + emails : entry.today,
          thisPeriod: entry.thisPeriod + emails
        }
      }
    }

    /**
     * Something that decides where a user's mail goes, or whether it is taken, has changed (in the
     * database, already committed): forget their addresses here at once and tell every other process.
     */
    const changed = (userId: string) =>
      Effect.suspend(() => {
        dropUser(userId)
        return bus.broadcast(CHANGED, encodeJson({ userId }))
      })

    return { get, mark, keep, counted, changed } as const
  })
}) {}
