/**
 * Accepting first (issue 18). A process that accepts mail (smtp role) and also runs the background
 * stages (ingest, index) shares one event loop, and the machine's cores, between a sender waiting
 * for its 250 and work that may lag. Node has no priorities, so the background gives way:
 *
 * - The foreground is busy while this process has a DATA in flight (`StageActivity.acceptStarted`
 *   to `acceptEnded`) **and** its event loop was loaded over the latest period (busy at least
 *   `LOADED` of it). A lone message is never held back: its ingest starts after its 250, when
 *   nothing is in flight any more. Nor is ingest held back by senders that are merely slow (a DATA
 *   in flight for seconds costs the loop next to nothing): only by accepting that uses the loop.
 * - While it is busy, a background message waits; whether it may start is asked again every
 *   `PERIOD`. One that has started runs to its end, and its work counts in the next period's load,
 *   so under a load the loop can carry beside it the background takes the periods accepting leaves,
 *   and under a load the loop cannot, none until its stage is behind.
 * - Bounded: once the stage is behind (its oldest message older than STAGE_LAG_WARNING; as the
 *   stage monitor last sampled it), its messages start freely again until it has caught up. The
 *   backlog therefore stays bounded, and under a load the machine cannot take for long, accepting
 *   slows down as it would without this: senders feel the load, as with Postfix's `in_flow_delay`,
 *   instead of the queue growing without end.
 *
 * Indexing gives way to any DATA in flight, loaded loop or not (`IndexerLive` passes
 * `StageActivity.accepting`): each email it starts keeps an embedding process busy on the other core
 * for up to a second, which the loop's load does not show, and on a shared machine that slows
 * accepting even from niced processes (docs/operations.md §1).
 *
 * Measured with bench:smtp (README, Benchmarks): with a quarter of every 100 ms for ingest while a
 * DATA was in flight, ingest took the main thread from accepting (its messages started in the quarter
 * ran on into the rest); with none while the loop is loaded, accepting over reused connections ran at
 * 1.8-2.3 times the rate. Both stages cost least when delayed: the mail is already durable, and a
 * stage behind is visible (/readyz, logs).
 *
 * What waits is only the start of a message already taken from the bus, at most until its stage is
 * behind; the bus is told it is still at work meanwhile (a handler past half its ack wait is kept in
 * progress), so it is not delivered again.
 */
import { Duration, Effect } from "effect"
import { performance } from "node:perf_hooks"
import { type StageName, StageActivity } from "./stages.ts"

/** How often a waiting background message asks again, and what the loop's load is measured over. */
export const PERIOD = Duration.millis(100)

/** The share of a period the event loop must have been busy for accepting to count as using it. */
export const LOADED = 0.5

/**
 * This process's event-loop utilization over the latest period: measured when asked, at most once a
 * period (so every stage of the process reads the same figure), from Node's own accounting of the
 * loop's active and idle time.
 */
export const loopLoad: () => number = (() => {
  const periodMs = Duration.toMillis(PERIOD)
  let mark = performance.eventLoopUtilization()
  let markedAt = performance.now()
  let load = 0
  return () => {
    const now = performance.now()
    if (now - markedAt >= periodMs) {
      const next = performance.eventLoopUtilization()
      load = performance.eventLoopUtilization(next, mark).utilization
      mark = next
      markedAt = now
    }
    return load
  }
})()

/** The foreground is busy: a DATA in flight here, and the event loop loaded (see above). */
export const foregroundBusy = (): boolean => StageActivity.accepting() && loopLoad() >= LOADED

/**
 * Waits, if need be, until a background message of `stage` may start (see above). `busy` (the
 * foreground is) and `behind` (the stage is) are this process's; tests give their own.
 */
export const backgroundTurn = (
  stage: StageName,
  busy: () => boolean = foregroundBusy,
  behind: () => boolean = () => StageActivity.lagging(stage)
): Effect.Effect<void> => {
  const wait: Effect.Effect<void> = Effect.suspend(() =>
    !busy() || behind() ? Effect.void : Effect.zipRight(Effect.sleep(PERIOD), wait)
  )
  return wait
}
