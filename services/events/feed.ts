/**
 * Live events for agents without a public URL (issue 17): an account's events, from the event log,
 * as they are logged, on whichever API node the client is connected to.
 *
 * - Nothing is missed: a stream subscribes to the "logged" signals before its first read, reads the
 *   log after each signal for its account, and reads anyway every `POLL` (a signal is best effort).
 *   Resuming from an event id continues right after it, in log order (log.ts), so a client that
 *   reconnects with the last id it saw gets exactly what it missed.
 * - Heartbeats every `HEARTBEAT` keep proxies from closing a quiet stream; each one also refreshes
 *   the stream's slot. An account has at most its plan's `eventStreams` open across all API nodes;
 *   a slot not refreshed for `STALE` (its node died) no longer counts.
 * - On shutdown every stream ends at once: clients reconnect elsewhere with their last id.
 * - A stream whose credential stops working (revoked, logged out, expired) ends before its next frame,
 *   event or heartbeat: its client hears nothing more, and a reconnection is refused.
 * - A stream filtered to a mailbox ends (with NOT_FOUND) once the mailbox is deleted, after the events
 *   logged before: a reconnection is 404, so a client stops rather than listen to nothing forever. The
 *   deletion is told on every node by the directory's signal (mail/directory.ts), after it committed;
 *   the stream looks anyway every `POLL`, so a lost signal costs at most that.
 * - A stream of a key limited to mailboxes ends likewise (with NOT_FOUND naming the key's mailboxes)
 *   once none of them is an active mailbox, and such a key's stream is refused from then on: a mailbox
 *   deleted stays in the key's list and reaches nothing, so the stream would hear nothing, ever.
 */
import { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Chunk, Duration, Effect, Option, PubSub, Queue, Schedule, Stream } from "effect"
import { newId } from "../accounts/tokens.ts"
import { Bus, decodeJson, subjects } from "../bus/bus.ts"
import { NotFound, StreamQuotaReached, type Unauthorized, ValidationError } from "../errors.ts"
import { Lifecycle } from "../lifecycle.ts"
import { mailboxNotFound, ownMailbox } from "../mailboxes/owned.ts"
import { limits, type Plan } from "../plans/plans.ts"
import { eventKinds } from "../webhooks/schemas.ts"
import { type EventFilter, EventLog, type LoggedEvent, type Position } from "./log.ts"
import { neverSent } from "./never-sent.ts"

export const HEARTBEAT = Duration.seconds(15)
/** A slot not refreshed for this long belonged to a node that died. */
const STALE = "45 seconds"
/** Reads without a signal at least this often: what a lost signal can cost. */
const POLL = Duration.seconds(5)
/** Events read from the log at once. */
const BATCH = 200
/** Behind a transaction still running, the log is asked again after this, doubling up to a second. */
const HELD_RETRY_MS = 20

export type Frame =
  | { readonly _tag: "Event"; readonly event: LoggedEvent }
  | { readonly _tag: "Heartbeat" }

export interface StreamRequest {
  readonly userId: string
  readonly plan: Plan
  readonly filter: EventFilter
  /** Resume after this event (`Last-Event-ID` or `after`); from now on when absent. */
  readonly after: Option.Option<string>
  /** Where the resume point came from, for the error that names it. */
  readonly afterField: string
  /**
   * Fails once the credential the stream was opened with stops working (a key revoked or expired, a
   * session logged out or expired): asked before every frame, so that such a stream hears nothing
   * more and ends with that failure.
   */
  readonly recheck: Effect.Effect<void, Unauthorized | SqlError>
}

const signalPrefix = subjects.eventsLogged("")

/** The end of a limited key's streams once it reaches no mailbox (every one it is limited to deleted). */
const keyReachesNoMailbox = (mailboxes: ReadonlyArray<string>) =>
  new NotFound({ message: "None of this API key's mailboxes exists any more: it has no events to hear", details: { mailboxIds: [...mailboxes] } })

/** Whether `error` is a stream's end because its key reaches no mailbox (not one mailbox's deletion). */
export const isKeyWithoutMailboxes = (error: NotFound): boolean => error.details !== undefined && "mailboxIds" in error.details

/**
 * What a stream heard of its account: events logged, or a change of where its mail goes (a mailbox
 * deleted, among others).
 */
interface Signal {
  readonly userId: string
  readonly what: "logged" | "rerouted"
}

/** The user a directory signal names, if it names one. */
const reroutedUser = (data: Uint8Array): string | undefined => {
  try {
    const change = decodeJson(data) as { readonly userId?: unknown } | null
    return typeof change?.userId === "string" ? change.userId : undefined
  } catch {
    // Not ours to judge: the directory reads the same signal; a stream still looks every POLL.
    return undefined
  }
}

export class EventFeed extends Effect.Service<EventFeed>()("mailroom/EventFeed", {
  scoped: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const bus = yield* Bus
    const log = yield* EventLog
    const lifecycle = yield* Lifecycle

    /**
     * The signals heard, one per "events logged" or "directory changed" signal. Sliding: a stream busy
     * writing to a slow client lets its oldest signals go rather than grow without bound; a lost one
     * costs at most `POLL`.
     */
    const heard = yield* Effect.acquireRelease(PubSub.sliding<Signal>(1024), PubSub.shutdown)
    const tell = (signal: Signal) => PubSub.publish(heard, signal).pipe(Effect.asVoid)
    yield* bus.listen(subjects.allEventsLogged, (message) => tell({ userId: message.subject.slice(signalPrefix.length), what: "logged" }))
    yield* bus.listen(subjects.directoryChanged, (message) =>
      Effect.suspend(() => {
        const userId = reroutedUser(message.data)
        return userId === undefined ? Effect.void : tell({ userId, what: "rerouted" })
      }))

    /** Whether a mailbox a stream was opened for is no longer an active mailbox of the account's (deleted). */
    const gone = (userId: string, mailboxId: string) =>
      ownMailbox(sql, userId, mailboxId).pipe(Effect.as(false), Effect.catchTag("NotFound", () => Effect.succeed(true)))

    /** Whether none of a limited key's mailboxes is an active mailbox of the account's any more. */
    const noneLeft = (userId: string, mailboxes: ReadonlyArray<string>) =>
      Effect.map(
        sql`SELECT 1 FROM mailboxes WHERE user_id = ${userId} AND status = 'active' AND id = ANY(${[...mailboxes]}::text[]) LIMIT 1`,
        (rows) => rows.length === 0
      )

    /** Why a stream with `filter` can hear nothing more: its mailbox deleted, or every one of its key's; none while it can. */
    const reachLost = (userId: string, filter: EventFilter) =>
      Effect.gen(function*() {
        if (filter.mailboxId !== undefined && (yield* gone(userId, filter.mailboxId))) return mailboxNotFound(filter.mailboxId)
        if (filter.mailboxes !== undefined && (yield* noneLeft(userId, filter.mailboxes))) return keyReachesNoMailbox(filter.mailboxes)
        return undefined
      })

    /** One of the account's slots, or STREAM_QUOTA when all are taken (counted under a per-account lock). */
    const takeSlot = (userId: string, plan: Plan) =>
      Effect.gen(function*() {
        const limit = limits[plan].eventStreams
        yield* sql`SELECT pg_advisory_xact_lock(hashtext(${`event_streams:${userId}`}))`
        yield* sql`DELETE FROM event_streams WHERE user_id = ${userId} AND refreshed_at < now() - ${STALE}::interval`
        const counted = yield* sql<{ count: number }>`SELECT count(*)::int AS count FROM event_streams WHERE user_id = ${userId}`
        const count = counted[0]?.count ?? 0
        if (count >= limit) {
          return yield* new StreamQuotaReached({
            message: `The ${plan} plan allows ${limit} open event streams; close one first`,
            details: { count, limit, plan }
          })
        }
        const id = newId("es")
        yield* sql`INSERT INTO event_streams (id, user_id) VALUES (${id}, ${userId})`
        return id
      }).pipe(sql.withTransaction)

    const refreshSlot = (id: string) => sql`UPDATE event_streams SET refreshed_at = now() WHERE id = ${id}`.pipe(Effect.asVoid)
    // Best effort: a slot left behind stops counting once it is stale.
    const releaseSlot = (id: string) => sql`DELETE FROM event_streams WHERE id = ${id}`.pipe(Effect.ignore)

    /**
     * The account's events after `from`, as they are logged; never ends by itself, unless the mailbox
     * it is filtered to is deleted, or every mailbox of the key it is limited to: then it fails with
     * that NOT_FOUND once it has read every event logged before.
     */
    const follow = (userId: string, filter: EventFilter, from: Position): Stream.Stream<LoggedEvent, SqlError | NotFound> =>
      Stream.unwrapScoped(Effect.gen(function*() {
        const signals = yield* PubSub.subscribe(heard)
        /** A stream that a mailbox's deletion can end: filtered to one, or of a key limited to some. */
        const bounded = filter.mailboxId !== undefined || filter.mailboxes !== undefined
        /** What woke the stream: a signal of its account (a reroute only matters to a bounded one), or `POLL` passing. */
        const signalled = Effect.gen(function*() {
          for (;;) {
            const signal = yield* Queue.take(signals)
            if (signal.userId === userId && (signal.what === "logged" || bounded)) return signal.what
          }
        }).pipe(Effect.timeoutTo({ duration: POLL, onSuccess: (what) => what, onTimeout: () => "poll" as const }))
        let cursor = from
        let readNow = true
        let heldDelay = HELD_RETRY_MS
        let checkedAt = Date.now()
        let lost: NotFound | undefined
        const next = Effect.gen(function*() {
          while (true) {
            const woke = readNow ? "read" : yield* signalled
            // Asked before the read, so that every event logged before the deletion is read before the end.
            if (bounded && lost === undefined && (woke === "rerouted" || Date.now() - checkedAt >= Duration.toMillis(POLL))) {
              checkedAt = Date.now()
              lost = yield* reachLost(userId, filter)
            }
            const read = yield* log.read(userId, cursor, filter, BATCH)
            cursor = read.next
            readNow = read.events.length === BATCH
            if (read.held) {
              yield* Effect.sleep(Duration.millis(heldDelay))
              heldDelay = Math.min(heldDelay * 2, 1000)
              readNow = true
            } else {
              heldDelay = HELD_RETRY_MS
            }
            if (lost !== undefined) {
              if (read.events.length === 0 && !read.held) return yield* lost
              readNow = true
            }
            if (read.events.length > 0) return Chunk.fromIterable(read.events)
          }
        })
        return Stream.repeatEffectChunk(next)
      }))

    /**
     * Checks the request and takes a slot; the stream gives the slot back when it ends (the client
     * left, or the process is stopping).
     */
    const open = Effect.fn("EventFeed.open")(function*(request: StreamRequest) {
      const { filter, userId } = request
      // A stream that could never hear any kind it asks for is refused as such a webhook is.
      yield* neverSent({
        listener: "stream",
        kindsField: "types",
        kinds: filter.kinds ?? eventKinds,
        mailboxes: filter.mailboxId !== undefined ? "mailbox_id" : filter.mailboxes !== undefined ? "the key's mailboxes" : undefined,
        labels: filter.labels !== undefined
      })
      if (filter.mailboxId !== undefined) {
        // A mailbox a limited key does not reach is, to it, one that does not exist.
        if (filter.mailboxes !== undefined && !filter.mailboxes.includes(filter.mailboxId)) return yield* mailboxNotFound(filter.mailboxId)
        yield* ownMailbox(sql, userId, filter.mailboxId)
      }
      // A key all of whose mailboxes were deleted would listen to nothing forever: refused, as its stream ended.
      if (filter.mailboxes !== undefined && (yield* noneLeft(userId, filter.mailboxes))) return yield* keyReachesNoMailbox(filter.mailboxes)
      const from = yield* Option.match(request.after, {
        onNone: () => log.now,
        onSome: (eventId) =>
          log.positionOf(userId, eventId, filter.mailboxes).pipe(Effect.flatMap(Option.match({
            onSome: Effect.succeed,
            onNone: () =>
              Effect.fail(ValidationError.field(
                request.afterField,
                "is not an event of this account from the last 7 days; connect without it to start from now"
              ))
          })))
      })
      const slot = yield* takeSlot(userId, request.plan)
      const events = follow(userId, filter, from).pipe(Stream.map((event): Frame => ({ _tag: "Event", event })))
      const heartbeats = Stream.repeatEffectWithSchedule(
        Effect.as(refreshSlot(slot), { _tag: "Heartbeat" } as Frame),
        Schedule.spaced(HEARTBEAT)
      )
      return Stream.merge(events, heartbeats).pipe(
        Stream.tap(() => request.recheck),
        Stream.interruptWhen(lifecycle.stopping),
        Stream.ensuring(releaseSlot(slot))
      )
    })

    return { open } as const
  })
}) {}
