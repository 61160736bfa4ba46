/**
 * Accepting first (issue 18). A process that accepts mail (smtp role) and also runs the background
 * stages (ingest, index) shares one event loop, and the machine's cores, between a sender waiting
 * for its 250 and work that may lag. Node has no priorities, so the background takes turns:
 *
 * - The foreground is busy while this process has a DATA in flight (`StageActivity.acceptStarted`
 *   to `acceptEnded`). A lone message is never held back: its ingest starts after its 250, when
 *   nothing is in flight any more.
 * - While it is busy, background messages start only in the first `share` of every `period`
 *   (by the clock, so every background stage of the process uses the same window); one that has
 *   started runs to its end. The rest of each period is the foreground's. So under a steady stream
 *   of mail the background gets about `share` of the time, plus what its messages in flight take to
 *   finish, and whatever the foreground leaves idle in between.
 * - Bounded: once the stage is behind (its oldest message older than STAGE_LAG_WARNING; as the
 *   stage monitor last sampled it), the background runs freely again until it has caught up.
 *   The backlog therefore stays bounded, and under a load the machine cannot take for long,
 *   accepting slows down as it would without turns: senders feel the load, as with Postfix's
 *   `in_flow_delay`, instead of the queue growing without end.
 *
 * What waits is only the start of a message already taken from the bus: for less than a period with
 * a share, or (indexing's turns, below) while accepting stays busy, at most until its stage is
 * behind; the bus is told it is still at work meanwhile (a handler past half its ack wait is kept in
 * progress), so it is not delivered again.
 */
import { Clock, Duration, Effect } from "effect"
import { StageActivity } from "./stages.ts"

export interface TurnSettings {
  /** The part of each period in which background messages may start while the foreground is busy. */
  readonly share: number
  readonly period: Duration.Duration
}

/** A quarter of every 100 ms: measured with bench:smtp (see the README's Benchmarks). */
export const defaultTurns: TurnSettings = { share: 0.25, period: Duration.millis(100) }

/**
 * Indexing's turns: none while mail is being accepted (`share` 0: an email starts only once no DATA
 * is in flight). Embedding is the heaviest work of any stage and the one whose delay costs least
 * (mail is readable once ingested; only search by meaning waits), and on a shared machine it slows
 * accepting even in niced processes on the other core (docs/operations.md §1): with a quarter of each
 * period, accepting with indexing ran at half its rate without (bench:smtp, 2026-11-28: 0.50 and 0.54;
 * with none, 1.01 and 1.10). Bounded as ingest is, by its own stage: once the index stage is behind
 * (`IndexerLive` passes `lagging("index")`), it runs freely again until it has caught up.
 */
export const indexingTurns: TurnSettings = { share: 0, period: Duration.millis(100) }

/**
 * Waits, if need be, until a background message may start (see above). `busy` (the foreground has
 * work) and `behind` (the stage is; ingest unless told otherwise) are this process's; tests give
 * their own.
 */
export const backgroundTurn = (
  settings: TurnSettings = defaultTurns,
  busy: () => boolean = StageActivity.accepting,
  behind: () => boolean = () => StageActivity.lagging("ingest")
): Effect.Effect<void> => {
  const period = Duration.toMillis(settings.period)
  const open = settings.share * period
  const wait: Effect.Effect<void> = Effect.suspend(() => {
    if (!busy() || behind()) return Effect.void
    return Effect.flatMap(Clock.currentTimeMillis, (now) => {
      const phase = now % period
      return phase < open ? Effect.void : Effect.zipRight(Effect.sleep(Duration.millis(period - phase)), wait)
    })
  })
  return wait
}
