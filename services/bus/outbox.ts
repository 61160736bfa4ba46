/**
 * The outbox: publications a change owes the bus, written in the change's own transaction, so that a
 * committed change is never left unannounced because the bus refused it or the process died before
 * publishing. `stage` writes them with the change; once it commits, `deliver` publishes them and
 * deletes each the bus took; the sweep (`OutboxLive`, in the worker role) publishes again what is left
 * after `STRANDED_AFTER_SECONDS`.
 *
 * A publication may therefore reach the bus twice (published, then the process died before deleting
 * it): its `msgId` makes the bus drop the repeat while it remembers the first (NATS: two minutes, past
 * `STRANDED_AFTER_SECONDS`), and what the bus carries is idempotent by that id past it (bus.ts).
 * Several nodes sweep apart: each takes the rows it publishes by moving their `attempted_at` on.
 */
import { SqlClient } from "@effect/sql"
import { Duration, Effect, Layer, Schedule } from "effect"
import { DependencyHealth } from "../health/dependency-health.ts"
import { Bus, type BusError, type BusShape } from "./bus.ts"

/** One message owed to the bus. */
export interface Publication {
  readonly subject: string
  readonly data: Uint8Array
  readonly msgId: string
}

/** How long a staged publication is left to the change that staged it (publishing takes milliseconds). */
const STRANDED_AFTER_SECONDS = 30
const SWEEP_EVERY = Duration.seconds(10)
/** Publications taken by one sweep at most (the next sweep takes the rest). */
const SWEEP_BATCH = 500

/** Rows written by one INSERT at most: 3 parameters a row, within PostgreSQL's 65,535 a statement. */
const STAGE_CHUNK = 1_000
/**
 * Publications in flight at once: each is acknowledged by the bus on its own, and one at a time a
 * change to 20,000 emails waited 20,000 round trips (NATS), or 20,000 INSERTs (the embedded bus, which
 * stores those that come together in one: layers/memory-bus.ts).
 */
const PUBLISH_WINDOW = 1_000

/**
 * Write `publications` in the caller's transaction, STAGE_CHUNK to a statement (in order: `position`
 * counts up). One already waiting under the same id stays as it is (the bus would keep only one of the two).
 */
export const stage = (sql: SqlClient.SqlClient, publications: ReadonlyArray<Publication>) =>
  Effect.forEach(chunked(publications, STAGE_CHUNK), (chunk) =>
    sql`
    INSERT INTO outbox ${sql.insert(chunk.map((p) => ({ msg_id: p.msgId, subject: p.subject, data: p.data })))}
    ON CONFLICT (msg_id) DO NOTHING`, { discard: true })

const chunked = <A>(items: ReadonlyArray<A>, size: number): Array<ReadonlyArray<A>> => {
  const chunks: Array<ReadonlyArray<A>> = []
  for (let from = 0; from < items.length; from += size) chunks.push(items.slice(from, from + size))
  return chunks
}

/**
 * Publish `publications` in order, PUBLISH_WINDOW in flight at once (each sent once the one before it
 * was, acknowledged on its own), until the bus refuses one, and delete those it took. What it
 * refused, and what had not been sent by then, stays for the sweep; the refusal is the caller's to
 * tell. Publications sent after the refused one, before its refusal came back, may have been taken:
 * they go before it (the sweep publishes it again).
 */
const publishAll = (sql: SqlClient.SqlClient, bus: BusShape, publications: ReadonlyArray<Publication>) =>
  Effect.gen(function*() {
    let refused: BusError | undefined
    const results = yield* Effect.forEach(
      publications,
      (p) =>
        Effect.suspend(() =>
          refused !== undefined ? Effect.succeed(undefined) : bus.publish(p.subject, p.data, { msgId: p.msgId }).pipe(
            Effect.as(p.msgId),
            Effect.catchAll((error) => Effect.sync(() => void (refused ??= error)))
          )
        ),
      { concurrency: PUBLISH_WINDOW }
    )
    const taken = results.filter((msgId): msgId is string => typeof msgId === "string")
    if (taken.length > 0) yield* sql`DELETE FROM outbox WHERE msg_id = ANY(${taken}::text[])`
    return { taken: taken.length, refused }
  })

/**
 * Publish what a committed change staged. Never fails: what the bus refused, or a database that is
 * gone before the rows are deleted, is logged and left to the sweep.
 */
export const deliver = (sql: SqlClient.SqlClient, bus: BusShape, publications: ReadonlyArray<Publication>) =>
  publications.length === 0 ? Effect.void : Effect.gen(function*() {
    const { refused } = yield* publishAll(sql, bus, publications)
    if (refused !== undefined) {
      yield* Effect.logWarning("Bus refused a change's announcement; the outbox sweep publishes it again", {
        msgIds: publications.map((p) => p.msgId).slice(0, 20).join(","),
        error: refused.message
      })
    }
  }).pipe(Effect.catchAllCause((cause) => Effect.logWarning("A change's announcements are left to the outbox sweep", cause)))

/** One sweep: publications left `STRANDED_AFTER_SECONDS` published again; answers how many the bus took. */
export const sweepOutbox = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const bus = yield* Bus
  const taken = yield* sql<{ msgId: string; subject: string; data: Uint8Array; position: string }>`
    UPDATE outbox SET attempted_at = now()
    WHERE msg_id IN (
      SELECT msg_id FROM outbox
      WHERE attempted_at < now() - make_interval(secs => ${STRANDED_AFTER_SECONDS})
      ORDER BY position LIMIT ${SWEEP_BATCH}
      FOR UPDATE SKIP LOCKED)
    RETURNING msg_id, subject, data, position`
  if (taken.length === 0) return 0
  // In the order they were staged (UPDATE ... RETURNING keeps none).
  const rows = [...taken].sort((a, b) => Number(a.position) - Number(b.position))
  const { refused, taken: published } = yield* publishAll(sql, bus, rows)
  if (published > 0) {
    yield* Effect.logWarning("Announcements a change left unpublished were published by the outbox sweep").pipe(
      Effect.annotateLogs({ published, msg_ids: rows.slice(0, Math.min(published, 20)).map((r) => r.msgId).join(",") })
    )
  }
  if (refused !== undefined) return yield* refused
  return published
})

/** The sweep, every SWEEP_EVERY (in the worker role; any number of nodes). */
export const OutboxLive = Layer.scopedDiscard(
  Effect.gen(function*() {
    const health = yield* DependencyHealth
    yield* sweepOutbox.pipe(
      Effect.catchAllCause((cause) => health.report("Publishing the outbox failed; will retry", cause)),
      Effect.repeat(Schedule.spaced(SWEEP_EVERY)),
      Effect.forkScoped
    )
  })
)
