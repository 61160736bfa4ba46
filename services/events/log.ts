/**
 * The event log (issue 17): every event, as webhooks receive it, kept 7 days in SQL, so that an event
 * stream can resume from any event it was sent, on any API node, without loss or repetition.
 *
 * A position is (txid, seq): the writing transaction's id, then the row's sequence number. Reads go
 * in that order and stop below the oldest transaction still running (the snapshot's xmin), so a row
 * committed later can never land behind a position a reader already passed (migration 0015 says why
 * `seq` alone cannot promise that). A read that ends below the limit has seen everything below that
 * horizon, so its next position is the horizon itself: a stream filtered to rare kinds does not
 * re-scan what it skipped.
 */
import { SqlClient, SqlSchema } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Option, Schema } from "effect"
import { groupCommitIsolated } from "../batching.ts"

/** How long events can be resumed from. */
export const RETENTION = "7 days"

export interface Position {
  readonly txid: string
  readonly seq: string
}

export interface LoggedEvent {
  readonly eventId: string
  readonly kind: string
  /** The webhook body: `{ event, timestamp, data }`. */
  readonly payload: string
  readonly position: Position
}

export interface EventFilter {
  /** Only these kinds; every kind when absent. */
  readonly kinds?: ReadonlyArray<string> | undefined
  /** Only events about this mailbox (an event about no mailbox, such as api_key.created, never matches). */
  readonly mailboxId?: string | undefined
  /** Only events about these mailboxes (a key limited to them); likewise never an event about no mailbox. */
  readonly mailboxes?: ReadonlyArray<string> | undefined
  /** Only events about an email carrying one of these labels (an event that carries none never matches). */
  readonly labels?: ReadonlyArray<string> | undefined
}

export interface Read {
  readonly events: ReadonlyArray<LoggedEvent>
  readonly next: Position
  /**
   * Committed events of the account wait above the horizon behind a transaction still running
   * elsewhere: they become readable as soon as it ends, so the reader should look again soon.
   */
  readonly held: boolean
}

const Row = Schema.Struct({ eventId: Schema.String, kind: Schema.String, payload: Schema.String, txid: Schema.String, seq: Schema.String })
const decodeRows = Schema.decodeUnknown(Schema.Array(Row))

/** An event as the log stores it. */
export type NewLoggedEvent = {
  readonly eventId: string
  readonly userId: string
  readonly kind: string
  readonly mailboxId: string | null
  readonly payload: string
}

/** Events stored by one INSERT at most. */
const MAX_BATCH = 64

export class EventLog extends Effect.Service<EventLog>()("mailroom/EventLog", {
  scoped: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    /** Events appended while an INSERT is in flight go together in the next one (batching.ts). */
    const insert = yield* groupCommitIsolated({
      maxBatch: MAX_BATCH,
      parallel: 1,
      run: (entries: ReadonlyArray<NewLoggedEvent>) =>
        Effect.as(sql`INSERT INTO event_log ${sql.insert([...entries])} ON CONFLICT (event_id) DO NOTHING`, entries.map(() => undefined))
    })

    /** Stores an event once (a redelivered event id changes nothing). */
    const append = Effect.fn("EventLog.append")(function*(entry: NewLoggedEvent) {
      yield* insert(entry)
    })

    const horizon = sql<{ xmin: string }>`SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS xmin`.pipe(
      Effect.map((rows) => rows[0]!.xmin)
    )

    /** Where a stream starting now begins: after everything already logged. */
    const now = Effect.map(horizon, (xmin): Position => ({ txid: xmin, seq: "0" }))

    const findPosition = SqlSchema.findOne({
      Request: Schema.Struct({ userId: Schema.String, eventId: Schema.String }),
      Result: Schema.Struct({ txid: Schema.String, seq: Schema.String, mailboxId: Schema.NullOr(Schema.String) }),
      execute: ({ eventId, userId }) =>
        sql`SELECT txid::text AS txid, seq::text AS seq, mailbox_id FROM event_log WHERE event_id = ${eventId} AND user_id = ${userId}`
    })

    /**
     * The position of one of the account's logged events; none when it is not one (or has expired),
     * or when it is no event of `mailboxes` (a key limited to them: the rest of the account's mail is,
     * to it, mail that does not exist).
     */
    const positionOf = (
      userId: string,
      eventId: string,
      mailboxes?: ReadonlyArray<string>
    ): Effect.Effect<Option.Option<Position>, SqlError> =>
      findPosition({ userId, eventId }).pipe(
        // A row that does not decode is our own bug, not the caller's.
        Effect.catchTag("ParseError", Effect.die),
        Effect.map(Option.flatMap(({ mailboxId, seq, txid }) =>
          mailboxes === undefined || (mailboxId !== null && mailboxes.includes(mailboxId)) ? Option.some({ txid, seq }) : Option.none()
        ))
      )

    /** The body of one of the account's logged events (as webhooks received it); none once it has expired. */
    const payloadOf = (userId: string, eventId: string): Effect.Effect<Option.Option<string>, SqlError> =>
      Effect.map(
        sql<{ payload: string }>`SELECT payload FROM event_log WHERE event_id = ${eventId} AND user_id = ${userId}`,
        (rows) => Option.fromNullable(rows[0]?.payload)
      )

    /** The account's events after `after` that match `filter`, oldest first, at most `limit`. */
    const read = Effect.fn("EventLog.read")(function*(userId: string, after: Position, filter: EventFilter, limit: number) {
      const xmin = yield* horizon
      const kinds = filter.kinds === undefined ? sql`` : sql`AND kind = ANY(${[...filter.kinds]}::text[])`
      const mailbox = filter.mailboxId === undefined ? sql`` : sql`AND mailbox_id = ${filter.mailboxId}`
      const mailboxes = filter.mailboxes === undefined ? sql`` : sql`AND mailbox_id = ANY(${[...filter.mailboxes]}::text[])`
      // The email's labels are in the payload (the webhook body), read only for a stream that asks.
      const labelled = filter.labels === undefined
        ? sql``
        : sql`AND jsonb_exists_any(payload::jsonb -> 'data' -> 'labels', ${[...filter.labels]}::text[])`
      const rows = yield* sql`
        SELECT event_id, kind, payload, txid::text AS txid, seq::text AS seq
        FROM event_log
        WHERE user_id = ${userId}
          AND (txid, seq) > (${after.txid}::xid8, ${after.seq}::bigint)
          AND txid < ${xmin}::xid8
          ${kinds} ${mailbox} ${mailboxes} ${labelled}
        ORDER BY event_log.txid, event_log.seq -- the columns: bare names would be the text aliases above ("100" < "99")
        LIMIT ${limit}`.pipe(Effect.flatMap((found) => Effect.orDie(decodeRows(found))))
      const events = rows.map((row): LoggedEvent => ({
        eventId: row.eventId,
        kind: row.kind,
        payload: row.payload,
        position: { txid: row.txid, seq: row.seq }
      }))
      if (events.length === limit) return { events, next: events[events.length - 1]!.position, held: false } satisfies Read
      const above = yield* sql<{ held: boolean }>`
        SELECT EXISTS (SELECT 1 FROM event_log WHERE user_id = ${userId} AND txid >= ${xmin}::xid8) AS held`
      return { events, next: { txid: xmin, seq: "0" }, held: above[0]?.held === true } satisfies Read
    })

    return { append, now, payloadOf, positionOf, read } as const
  })
}) {}
