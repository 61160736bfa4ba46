/**
 * The Qdrant VectorIndex (`QDRANT_URL`, REST API): the clustered adapter, shared by every worker.
 *
 * One collection per embedding model (`collectionName`, after the deployment's `prefix`), cosine distance, created with its payload
 * indexes on first use. Several workers may start at once, so creation is idempotent: a collection
 * someone else just created is fine, and indexes missing after a crash halfway are added by the next
 * caller. `namespace` is the tenant key (Qdrant keeps each tenant's points together), and `email_id`
 * is indexed because search groups by it.
 *
 * Point ids are UUIDs derived from (email, chunk), so indexing an email again replaces its points
 * instead of adding more. Writes wait until applied (`wait: true`): the index actor acknowledges its
 * bus message after the upsert, and a search right after must find the email.
 *
 * Needs Qdrant 1.11 or later (grouped query API, tenant indexes).
 */
// Loaded by the layer, only when QDRANT_URL chooses it: most processes never need the client.
import type { Schemas } from "@qdrant/js-client-rest"
import { Array as Arr, Duration, Effect, Layer, Redacted, Schedule } from "effect"
import { createHash } from "node:crypto"
import {
  COLLECTION_PREFIX,
  collectionName,
  type VectorCollection,
  type VectorFilter,
  VectorIndex,
  VectorIndexError,
  type PointDescription,
  type VectorIndexShape,
  type VectorPoint
} from "../services/search/vector-index.ts"
import { bounds } from "../services/mail/narrowing.ts"

export interface QdrantIndexOptions {
  /** `http(s)://host:port[/prefix]`, taken literally: no port means the scheme's default. */
  readonly url: string
  readonly apiKey?: Redacted.Redacted<string> | undefined
  /** Put before every collection's name (QDRANT_PREFIX), so that several deployments share one Qdrant; none by default. */
  readonly prefix?: string | undefined
}

/** Points per upsert request: a few hundred KB of JSON at common dimensions. */
const UPSERT_BATCH = 256
/** Email ids per delete-by-filter request, to keep the `match.any` list (and the request) bounded. */
const DELETE_BATCH = 1_000
/**
 * Bound on one request. Writes wait for the points to be applied, which can take seconds while
 * Qdrant is optimizing segments; past this the server is in trouble and a caller should hear so.
 */
const REQUEST_TIMEOUT = Duration.seconds(60)
/** A health check answers quickly or reports the index down. */
const PING_TIMEOUT = Duration.seconds(5)
/** Candidates the HNSW search keeps: recall against speed. */
const MIN_HNSW_EF = 128
/**
 * Connection errors, 5xx and 429 are worth another try soon (a restarting node, a busy one); every
 * request here is idempotent (deterministic ids, delete by filter), so repeating one is safe.
 */
const TRANSIENT_RETRY = Schedule.exponential(Duration.millis(100)).pipe(
  Schedule.jittered,
  Schedule.intersect(Schedule.recurs(3))
)

const PAYLOAD_INDEXES: ReadonlyArray<readonly [field: string, schema: Schemas["PayloadFieldSchema"]]> = [
  // Every search filters on the namespace: Qdrant co-locates a tenant's points and builds its
  // HNSW links per tenant.
  ["namespace", { type: "keyword", is_tenant: true }],
  ["mailbox_id", { type: "keyword" }],
  ["domain", { type: "keyword" }],
  ["date", { type: "datetime" }],
  // Search groups by it and remove filters on it.
  ["email_id", { type: "keyword" }],
  ["sender_keys", { type: "keyword" }],
  ["received_at", { type: "datetime" }]
]

/** Qdrant accepts unsigned integers or UUIDs as point ids: a UUID (v5 layout) from SHA-256 of the key. */
export const pointId = (emailId: string, chunk: number): string => {
  const bytes = createHash("sha256").update(`${emailId}:${chunk}`).digest().subarray(0, 16)
  bytes[6] = (bytes[6]! & 0x0f) | 0x50
  bytes[8] = (bytes[8]! & 0x3f) | 0x80
  const hex = bytes.toString("hex")
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`
}

// The client throws the fetch library's ApiError for non-2xx answers (status, and the server's
// `{ status: { error } }` body as `data`), and undici's `TypeError: fetch failed` with a coded
// cause when no answer came. Read structurally: ApiError belongs to a transitive dependency.
const field = (value: unknown, key: string): unknown =>
  typeof value === "object" && value !== null && key in value ? (value as Record<string, unknown>)[key] : undefined

const httpStatus = (cause: unknown): number | undefined => {
  const status = field(cause, "status")
  return typeof status === "number" ? status : undefined
}

const serverMessage = (cause: unknown): string | undefined => {
  const data = field(cause, "data")
  const error = field(field(data, "status"), "error")
  if (typeof error === "string") return error
  return typeof data === "string" && data.length > 0 ? data.slice(0, 200) : undefined
}

const networkCode = (cause: unknown): string | undefined => {
  const code = field(cause, "code") ?? field(field(cause, "cause"), "code")
  return typeof code === "string" ? code : undefined
}

const describe = (cause: unknown): string => {
  const status = httpStatus(cause)
  if (status !== undefined) {
    const detail = serverMessage(cause)
    return `Qdrant answered ${status}${detail === undefined ? "" : `: ${detail}`}`
  }
  const code = networkCode(cause)
  const message = cause instanceof Error ? cause.message : String(cause)
  return code === undefined || message.includes(code) ? message : `${message} (${code})`
}

const isTransient = (cause: unknown): boolean => {
  const status = httpStatus(cause)
  if (status !== undefined) return status >= 500 || status === 429
  // The client's own error for a 429 that carried Retry-After.
  if (cause instanceof Error && cause.name === "QdrantClientResourceExhaustedError") return true
  // No answer at all: refused, reset, DNS hiccup. A timeout is not retried: the server is slow,
  // and piling the same request on it again would not make it faster.
  return networkCode(cause) !== undefined || (cause instanceof TypeError && cause.message === "fetch failed")
}

/** Creating what exists: 409 from Qdrant 1.x, 400 "… already exists!" from older servers. */
const isAlreadyExists = (cause: unknown): boolean => {
  const status = httpStatus(cause)
  return status === 409 || (status === 400 && /already exists/i.test(serverMessage(cause) ?? ""))
}

/** One SDK call: its failure named after `what`, transient ones tried again. */
const call = <A>(what: string, run: () => Promise<A>): Effect.Effect<A, VectorIndexError> =>
  Effect.tryPromise({
    try: run,
    catch: (cause) => new VectorIndexError({ message: `Qdrant: could not ${what}: ${describe(cause)}`, cause })
  }).pipe(Effect.retry({ schedule: TRANSIENT_RETRY, while: (error) => isTransient(error.cause) }))

const vectorSize = (info: Schemas["CollectionInfo"]): number | undefined => {
  const vectors = info.config.params.vectors
  return vectors !== undefined && "size" in vectors && typeof vectors.size === "number" ? vectors.size : undefined
}

/** A point stored before sender and arrival were kept has no arrival (every point since has one). */
const UNDESCRIBED: Schemas["Condition"] = { is_empty: { key: "received_at" } }

/** A filter's sender and arrival, or none. */
const narrowing = ({ received, senderKey }: VectorFilter): Array<Schemas["FieldCondition"]> => [
  ...(senderKey === undefined ? [] : [{ key: "sender_keys", match: { value: senderKey } }]),
  ...(received === undefined || !bounds(received) ? [] : [{
    key: "received_at",
    range: {
      ...(received.after === undefined ? {} : { gte: received.after.toISOString() }),
      ...(received.before === undefined ? {} : { lt: received.before.toISOString() })
    }
  }])
]

const searchFilter = (filter: VectorFilter): Schemas["Filter"] => {
  const narrowed = narrowing(filter)
  return {
    must: [
      { key: "namespace", match: { value: filter.namespace } },
      ...(filter.mailboxIds === undefined ? [] : [{ key: "mailbox_id", match: { any: Array.from(filter.mailboxIds) } }]),
      // Met, or let through for the caller to judge when the point was stored without them.
      ...(narrowed.length === 0 ? [] : [{ should: [UNDESCRIBED, { must: narrowed }] }])
    ]
  }
}

const toPoint = (point: VectorPoint): Schemas["PointStruct"] => ({
  id: pointId(point.emailId, point.chunk),
  vector: Array.from(point.vector),
  payload: {
    email_id: point.emailId,
    chunk: point.chunk,
    namespace: point.namespace,
    mailbox_id: point.mailboxId,
    domain: point.domain,
    date: point.date.toISOString(),
    ...(point.senderKeys === undefined ? {} : { sender_keys: [...point.senderKeys] }),
    ...(point.receivedAt === undefined ? {} : { received_at: point.receivedAt.toISOString() })
  }
})

/** What Qdrant would refuse with a less helpful message, or `toISOString` would throw on. */
const invalidPoint = (point: VectorPoint, name: string, dimensions: number): string | undefined => {
  if (point.vector.length !== dimensions) {
    return `vector of email ${point.emailId} chunk ${point.chunk} has ${point.vector.length} dimensions, ${name} holds ${dimensions}`
  }
  if (Number.isNaN(point.date.getTime())) return `email ${point.emailId} has an invalid date`
  if (point.receivedAt !== undefined && Number.isNaN(point.receivedAt.getTime())) return `email ${point.emailId} has an invalid arrival time`
  return undefined
}

const makeClient = (options: QdrantIndexOptions) =>
  Effect.flatMap(Effect.promise(() => import("@qdrant/js-client-rest")), ({ QdrantClient }) => Effect.try({
    try: () => {
      const url = new URL(options.url)
      // The client drops a URL's path and puts 6333 where the URL has no port; a Qdrant behind a
      // proxy (https://host/qdrant) is reached at the address as written. `port: null` keeps the
      // URL's own (or the scheme's default).
      const prefix = url.pathname.replace(/\/+$/, "")
      return new QdrantClient({
        url: url.origin,
        port: null,
        ...(prefix === "" ? {} : { prefix }),
        ...(options.apiKey === undefined ? {} : { apiKey: Redacted.value(options.apiKey) }),
        timeout: Duration.toMillis(REQUEST_TIMEOUT),
        // Versions: docker-compose.yml pins the server this client supports (1.18, the client's own
        // minor). The client's check stays off all the same: it runs unawaited at construction and
        // writes to the console, past our logger (a JSON log line would be broken by it); a server
        // out of reach shows up as a failed call instead, with our error message.
        checkCompatibility: false
      })
    },
    catch: (cause) =>
      new VectorIndexError({
        message: `Qdrant: invalid QDRANT_URL: ${cause instanceof Error ? cause.message : String(cause)}`,
        cause
      })
  }))

export const make = (options: QdrantIndexOptions): Effect.Effect<VectorIndexShape, VectorIndexError> =>
  Effect.gen(function*() {
    const client = yield* makeClient(options)
    const prefix = options.prefix ?? ""
    // Collections known to be ready, so that callers asking per message cost no round trip.
    const ready = new Map<string, VectorCollection>()

    const ensure = Effect.fn("QdrantIndex.ensureCollection")(function*(name: string, dimensions: number) {
      const { exists } = yield* call(`check whether ${name} exists`, () => client.collectionExists(name))
      if (!exists) {
        yield* call(`create ${name}`, () =>
          client.createCollection(name, {
            vectors: { size: dimensions, distance: "Cosine" },
            // Payloads are small (ids and a date) and read by every filtered search.
            on_disk_payload: false
          })).pipe(
            // Another worker created it between our check and our request.
            Effect.catchIf((error) => isAlreadyExists(error.cause), () => Effect.void)
          )
      }
      const info = yield* call(`read ${name}`, () => client.getCollection(name))
      const size = vectorSize(info)
      if (size !== dimensions) {
        return yield* new VectorIndexError({
          message: size === undefined
            ? `Qdrant: collection ${name} has no single unnamed vector of ${dimensions} dimensions`
            : `Qdrant: collection ${name} holds vectors of ${size} dimensions, not ${dimensions}`
        })
      }
      for (const [fieldName, schema] of PAYLOAD_INDEXES) {
        if (info.payload_schema[fieldName] !== undefined) continue
        // Creating an index that exists (a concurrent worker) is accepted by Qdrant as is.
        yield* call(`index ${fieldName} in ${name}`, () =>
          client.createPayloadIndex(name, { field_name: fieldName, field_schema: schema, wait: true }))
      }
    })

    const open = (model: string, dimensions: number, name: string): VectorCollection => {
      // A collection deleted behind our back (an operator rebuilding the index) is forgotten, so
      // that the caller's next `collection()` creates it again instead of failing until a restart.
      const onCollection = <A>(what: string, run: () => Promise<A>) =>
        call(what, run).pipe(Effect.tapError((error) => Effect.sync(() => {
          if (httpStatus(error.cause) === 404) ready.delete(name)
        })))

      const upsert = Effect.fn("QdrantIndex.upsert")(function*(points: ReadonlyArray<VectorPoint>) {
        for (const point of points) {
          const invalid = invalidPoint(point, name, dimensions)
          if (invalid !== undefined) return yield* new VectorIndexError({ message: `Qdrant: could not store points: ${invalid}` })
        }
        yield* Effect.forEach(
          Arr.chunksOf(points, UPSERT_BATCH),
          (batch) =>
            onCollection(`store ${batch.length} points in ${name}`, () =>
              client.upsert(name, { wait: true, points: batch.map(toPoint) })),
          { discard: true }
        )
      })

      const search = Effect.fn("QdrantIndex.search")(function*(
        vector: Float32Array,
        filter: VectorFilter,
        limit: number,
        options?: { readonly exact?: boolean }
      ) {
        if (limit <= 0 || (filter.mailboxIds !== undefined && filter.mailboxIds.length === 0)) return []
        if (vector.length !== dimensions) {
          return yield* new VectorIndexError({
            message: `Qdrant: could not search ${name}: the query has ${vector.length} dimensions, not ${dimensions}`
          })
        }
        const result = yield* onCollection(`search ${name}`, () =>
          client.queryGroups(name, {
            query: Array.from(vector),
            filter: searchFilter(filter),
            params: options?.exact === true ? { exact: true } : { hnsw_ef: Math.max(MIN_HNSW_EF, limit * 2) },
            // Search answers emails: the best chunk of each.
            group_by: "email_id",
            group_size: 1,
            limit,
            with_payload: false,
            with_vector: false
          }))
        return result.groups
          .flatMap((group) => {
            const best = group.hits[0]
            return best === undefined ? [] : [{ emailId: String(group.id), similarity: best.score }]
          })
          .sort((a, b) => b.similarity - a.similarity)
      })

      const undescribed = Effect.fn("QdrantIndex.undescribed")(function*(from: string | undefined, limit: number) {
        const page = yield* onCollection(`read ${name}`, () =>
          client.scroll(name, {
            filter: { must: [UNDESCRIBED] },
            limit,
            ...(from === undefined ? {} : { offset: from }),
            with_payload: ["email_id"],
            with_vector: false
          }))
        const emailIds = new Set(page.points.flatMap((point) => {
          const emailId = point.payload?.email_id
          return typeof emailId === "string" ? [emailId] : []
        }))
        const next = page.next_page_offset
        return { emailIds: [...emailIds], next: typeof next === "string" || typeof next === "number" ? String(next) : undefined }
      })

      const describe = Effect.fn("QdrantIndex.describe")(function*(emails: ReadonlyArray<PointDescription>) {
        yield* Effect.forEach(
          Arr.chunksOf(emails, UPSERT_BATCH),
          (batch) =>
            onCollection(`describe ${batch.length} emails in ${name}`, () =>
              client.batchUpdate(name, {
                wait: true,
                operations: batch.map((email) => ({
                  set_payload: {
                    payload: { sender_keys: [...email.senderKeys], received_at: email.receivedAt.toISOString() },
                    filter: { must: [{ key: "email_id", match: { value: email.emailId } }] }
                  }
                }))
              })),
          { discard: true }
        )
      })

      const remove = Effect.fn("QdrantIndex.remove")(function*(emailIds: ReadonlyArray<string>) {
        yield* Effect.forEach(
          Arr.chunksOf(emailIds, DELETE_BATCH),
          (batch) =>
            onCollection(`remove ${batch.length} emails from ${name}`, () =>
              client.delete(name, { wait: true, filter: { must: [{ key: "email_id", match: { any: batch } }] } })),
          { discard: true }
        )
      })

      const count = Effect.fn("QdrantIndex.count")(function*(namespace?: string) {
        const result = yield* onCollection(`count points in ${name}`, () =>
          client.count(name, {
            exact: true,
            ...(namespace === undefined ? {} : { filter: { must: [{ key: "namespace", match: { value: namespace } }] } })
          }))
        return result.count
      })

      return { model, dimensions, upsert, search, undescribed, describe, remove, count }
    }

    const collection = Effect.fn("QdrantIndex.collection")(function*(model: string, dimensions: number) {
      const name = `${prefix}${collectionName(model, dimensions)}`
      const known = ready.get(name)
      if (known !== undefined) return known
      yield* ensure(name, dimensions)
      const opened = open(model, dimensions, name)
      ready.set(name, opened)
      return opened
    })

    const ping = call("list collections", () => client.getCollections()).pipe(
      Effect.timeoutFail({
        duration: PING_TIMEOUT,
        onTimeout: () => new VectorIndexError({ message: `Qdrant: no answer within ${Duration.format(PING_TIMEOUT)}` })
      }),
      Effect.asVoid
    )

    const forgetNamespace = Effect.fn("QdrantIndex.forgetNamespace")(function*(namespace: string) {
      const { collections } = yield* call("list collections", () => client.getCollections())
      const ours = collections.map((c) => c.name).filter((name) => name.startsWith(`${prefix}${COLLECTION_PREFIX}`))
      yield* Effect.forEach(
        ours,
        (name) =>
          call(`remove the points of ${namespace} from ${name}`, () =>
            client.delete(name, { wait: true, filter: { must: [{ key: "namespace", match: { value: namespace } }] } })),
        { discard: true }
      )
    })

    return { kind: "qdrant", collection, forgetNamespace, ping } satisfies VectorIndexShape
  })

export const layer = (options: QdrantIndexOptions): Layer.Layer<VectorIndex, VectorIndexError> =>
  Layer.effect(VectorIndex, make(options))
