/**
 * How many messages each background stage of the worker handles at once.
 *
 * On PostgreSQL every stage gets its own connections and the defaults suit. The embedded database
 * (PGlite) is one backend on one connection: every statement of every stage waits in one line, and
 * a stage with eight messages in flight keeps eight statements ahead of each API read and each SMTP
 * accept. There the background stages take turns with the foreground instead: indexing (the most
 * SQL per email: vectors, postings, lexicon; and the embedder's threads) one email at a time, ingest
 * two. The words stage takes up to eight, but they share one statement (a batch), so it keeps at
 * most one statement in the line. Mail still arrives at the SMTP rate; what waits is the backlog, which the bus keeps.
 */
import { Context } from "effect"

export interface StageLimitsShape {
  /** Inbound messages parsed and stored at once (the ingest actor). */
  readonly ingest: number
  /** Emails whose words are indexed at once (the words actor; in batches of these). */
  readonly words: number
  /** Emails embedded and indexed at once (the index actor). */
  readonly index: number
}

export class StageLimits extends Context.Reference<StageLimits>()("mailroom/StageLimits", {
  defaultValue: (): StageLimitsShape => ({ ingest: 8, words: 16, index: 8 })
}) {
  /** For the embedded database's single connection (see above). */
  static readonly embedded: StageLimitsShape = { ingest: 2, words: 8, index: 1 }
}
