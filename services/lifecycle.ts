/**
 * The process's life as the domain sees it. `stopping` completes when a shutdown begins (SIGTERM or
 * SIGINT), before anything drains: work that would only wait (a list waiting for mail) ends at once
 * with what it has, instead of holding the drain until SHUTDOWN_TIMEOUT.
 */
import { Context, Effect, Layer } from "effect"

export class Lifecycle extends Context.Tag("mailroom/Lifecycle")<Lifecycle, {
  /** Completes when the process begins to shut down; never before. */
  readonly stopping: Effect.Effect<void>
}>() {
  /** A process that is never told to stop (the operator's one-off commands, tests in process). */
  static readonly forever = Layer.succeed(Lifecycle, { stopping: Effect.never })
}
