/**
 * Whether the database answers, as `/readyz` asks it: a question about the server, not about this
 * process's pool. A pool whose every connection is lent out (a burst of mail, a long report) is busy,
 * not cut off; a readiness check that waited its turn in that queue would report the database gone
 * and have a load balancer take a node out exactly when it is working hardest, and the rest of the
 * nodes after it. The adapter (layers/postgres.ts) asks on a connection of its own when none is free.
 */
import { Context, type Effect } from "effect"

export interface DatabaseProbeShape {
  /** True when the server answered (even with an error of its own: too many connections) within the probe's time limit. */
  readonly reachable: Effect.Effect<boolean>
}

export class DatabaseProbe extends Context.Tag("mailroom/DatabaseProbe")<DatabaseProbe, DatabaseProbeShape>() {}
