/**
 * The VectorIndex port: nearest-neighbour search over email vectors (DESIGN.md §1).
 *
 * Adapters: Qdrant when `QDRANT_URL` is set (layers/qdrant-index.ts), else pgvector
 * (layers/pgvector-index.ts): in the SQL database when it has the extension, otherwise in an
 * embedded PGlite under `DATA_DIR`.
 *
 * Vectors live in one collection per embedding model (vectors of different models are never
 * compared). An email has one point per chunk of its text; search answers emails, each with the
 * similarity of its best chunk.
 */
import { Context, Data, type Effect } from "effect"
import type { ReceivedRange } from "../mail/received-range.ts"

export class VectorIndexError extends Data.TaggedError("VectorIndexError")<{
  readonly message: string
  readonly cause?: unknown
}> {}

export interface VectorPoint {
  readonly emailId: string
  /** 0 for the first chunk of the email's text, 1 for the next, … */
  readonly chunk: number
  readonly namespace: string
  readonly mailboxId: string
  readonly domain: string
  readonly date: Date
  /**
   * The sender's keys (mail/narrowing.ts `senderKeys`) and when the email arrived, which a search
   * narrows by. Points stored before these were kept have neither.
   */
  readonly senderKeys?: ReadonlyArray<string> | undefined
  readonly receivedAt?: Date | undefined
  /** Unit length, the collection's dimension. */
  readonly vector: Float32Array
}

export interface VectorFilter {
  readonly namespace: string
  /** Only these mailboxes (given when a search is restricted to a domain). */
  readonly mailboxIds?: ReadonlyArray<string> | undefined
  /**
   * Only senders with this key (mail/narrowing.ts `senderKey`), and only mail that arrived within
   * this span. A point stored without its sender or arrival is let through either: the caller
   * keeps what meets them (search.ts reads the emails).
   */
  readonly senderKey?: string | undefined
  readonly received?: ReceivedRange | undefined
}

export interface VectorHit {
  readonly emailId: string
  /** Cosine similarity of the email's best chunk, -1..1. */
  readonly similarity: number
}

/** An email's sender keys and arrival, for the points stored without them (`VectorCollection.describe`). */
export interface PointDescription {
  readonly emailId: string
  readonly senderKeys: ReadonlyArray<string>
  readonly receivedAt: Date
}

/** A page of `VectorCollection.undescribed`: emails, and where the next page starts (none: the last). */
export interface UndescribedPage {
  readonly emailIds: ReadonlyArray<string>
  readonly next: string | undefined
}

export interface VectorCollection {
  readonly model: string
  readonly dimensions: number
  /** Insert or replace; the same (emailId, chunk) twice leaves one point. */
  readonly upsert: (points: ReadonlyArray<VectorPoint>) => Effect.Effect<void, VectorIndexError>
  /**
   * The `limit` emails nearest to `vector` within the filter, best first. `exact` scans every
   * vector instead of using the approximate index (benchmarks measure the index against it).
   */
  readonly search: (
    vector: Float32Array,
    filter: VectorFilter,
    limit: number,
    options?: { readonly exact?: boolean }
  ) => Effect.Effect<ReadonlyArray<VectorHit>, VectorIndexError>
  /**
   * Emails with points stored before their sender and arrival were kept, a page at a time: from the
   * start, then from the page's `next`, in the index's own order: every such email at least once a
   * walk (one whose points straddle two pages is on both).
   */
  readonly undescribed: (from: string | undefined, limit: number) => Effect.Effect<UndescribedPage, VectorIndexError>
  /** Give every point of these emails its sender keys and arrival (leaving its vector as it is). */
  readonly describe: (emails: ReadonlyArray<PointDescription>) => Effect.Effect<void, VectorIndexError>
  /** Remove every point of these emails. */
  readonly remove: (emailIds: ReadonlyArray<string>) => Effect.Effect<void, VectorIndexError>
  /** Points stored for a namespace (or all). */
  readonly count: (namespace?: string) => Effect.Effect<number, VectorIndexError>
}

export interface VectorIndexShape {
  /** `qdrant`, `pgvector` or `pgvector (embedded)`, for logs and health. */
  readonly kind: string
  /** The collection for a model, created (with its indexes) when missing. */
  readonly collection: (model: string, dimensions: number) => Effect.Effect<VectorCollection, VectorIndexError>
  /** Remove every point of a namespace (an account) from every collection, every model's. */
  readonly forgetNamespace: (namespace: string) => Effect.Effect<void, VectorIndexError>
  readonly ping: Effect.Effect<void, VectorIndexError>
}

export class VectorIndex extends Context.Tag("mailroom/VectorIndex")<VectorIndex, VectorIndexShape>() {}

/** Every collection's name starts so; the index may hold collections of other software too. */
export const COLLECTION_PREFIX = "emails_"

/**
 * A collection or table name for a model: lowercase letters, digits and `_`, at most 48 characters
 * (PostgreSQL cuts names at 63, and its index names add a suffix); a longer model name keeps its
 * start and a hash of the whole, so two long names never share a collection.
 */
export const collectionName = (model: string, dimensions: number) => {
  const slug = model.toLowerCase().replace(/[^a-z0-9]+/g, "_").replace(/^_|_$/g, "")
  const name = `${COLLECTION_PREFIX}${slug}_${dimensions}`
  if (name.length <= 48) return name
  let hash = 0
  for (const char of `${model}/${dimensions}`) hash = (Math.imul(hash, 31) + char.charCodeAt(0)) >>> 0
  return `${COLLECTION_PREFIX}${slug.slice(0, 24)}_${hash.toString(16).padStart(8, "0")}_${dimensions}`
}
