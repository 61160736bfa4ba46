/**
 * The Qdrant VectorIndex (layers/qdrant-index.ts) against a fake Qdrant REST server on loopback:
 * the endpoints the adapter calls, an in-memory brute-force cosine search, and Qdrant's answers
 * (its `{ result, status, time }` envelope, 404/409/400 errors), so the requests the adapter sends are
 * the ones checked. The fake also records those requests, for what only the wire shows (batches,
 * `wait`, search params) and to fail some on purpose.
 *
 * With `QDRANT_URL` (and `QDRANT_API_KEY` when needed) set, the same contract runs against that
 * server too, under a model name of the run's own; its collections are deleted afterwards.
 */
import { describe, expect, it } from "@effect/vitest"
import { QdrantClient } from "@qdrant/js-client-rest"
import { Effect, Exit, Redacted, type Scope } from "effect"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import * as QdrantIndex from "../../layers/qdrant-index.ts"
import {
  collectionName,
  type VectorCollection,
  VectorIndex,
  VectorIndexError,
  type VectorIndexShape,
  type VectorPoint
} from "../../services/search/vector-index.ts"
import { uniqueName } from "../support/services.ts"

// ---------------------------------------------------------------------------------------------
// The fake server

interface Recorded {
  readonly method: string
  readonly path: string
  readonly query: Record<string, string>
  readonly headers: http.IncomingHttpHeaders
  readonly body: unknown
}

interface StoredPoint {
  readonly id: string | number
  readonly vector: ReadonlyArray<number>
  readonly payload: Record<string, unknown>
}

interface FakeCollection {
  readonly size: number
  readonly distance: string
  readonly onDiskPayload: unknown
  readonly payloadSchema: Map<string, { readonly data_type: string; readonly params?: unknown }>
  readonly points: Map<string, StoredPoint>
}

interface Failure {
  readonly method: string
  readonly path: RegExp
  readonly status: number
  readonly error: string
}

interface FakeQdrant {
  readonly url: string
  readonly requests: Array<Recorded>
  readonly collections: Map<string, FakeCollection>
  /** Answer the next request matching `method` and `path` with this error instead. */
  readonly failNext: (failure: Failure) => void
  /** Another process creates the collection between the adapter's existence check and its create. */
  raceOnCreate: boolean
}

class HttpError {
  constructor(readonly status: number, readonly error: string) {}
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const numbers = (value: unknown, what: string): ReadonlyArray<number> => {
  if (!Array.isArray(value) || !value.every((x) => typeof x === "number")) throw new HttpError(400, `Format error: ${what} is not a dense vector`)
  return value
}

const normalize = (vector: ReadonlyArray<number>) => {
  const norm = Math.sqrt(vector.reduce((sum, x) => sum + x * x, 0))
  return norm === 0 ? vector : vector.map((x) => x / norm)
}

const dot = (a: ReadonlyArray<number>, b: ReadonlyArray<number>) => a.reduce((sum, x, i) => sum + x * b[i]!, 0)

/** Qdrant's filter semantics for the conditions the adapter may send; anything else is refused. */
const matches = (payload: Record<string, unknown>, filter: unknown): boolean => {
  if (filter === undefined || filter === null) return true
  if (!isRecord(filter)) throw new HttpError(400, "Format error: filter")
  for (const key of Object.keys(filter)) {
    if (key !== "must") throw new HttpError(400, `fake Qdrant: filter clause ${key} not implemented`)
  }
  const must = Array.isArray(filter.must) ? filter.must : [filter.must]
  return must.every((condition: unknown) => {
    if (!isRecord(condition) || typeof condition.key !== "string" || !isRecord(condition.match)) {
      throw new HttpError(400, `fake Qdrant: condition ${JSON.stringify(condition)} not implemented`)
    }
    const value = payload[condition.key]
    const match = condition.match
    if ("value" in match) return value === match.value
    if ("any" in match && Array.isArray(match.any)) return match.any.includes(value)
    throw new HttpError(400, `fake Qdrant: match ${JSON.stringify(match)} not implemented`)
  })
}

const collectionInfo = (collection: FakeCollection) => ({
  status: "green",
  optimizer_status: "ok",
  indexed_vectors_count: 0,
  points_count: collection.points.size,
  segments_count: 1,
  config: {
    params: {
      vectors: { size: collection.size, distance: collection.distance },
      shard_number: 1,
      replication_factor: 1,
      write_consistency_factor: 1,
      on_disk_payload: collection.onDiskPayload ?? true
    },
    hnsw_config: { m: 16, ef_construct: 100, full_scan_threshold: 10000, max_indexing_threads: 0, on_disk: false },
    optimizer_config: {
      deleted_threshold: 0.2,
      vacuum_min_vector_number: 1000,
      default_segment_number: 0,
      max_segment_size: null,
      memmap_threshold: null,
      indexing_threshold: 20000,
      flush_interval_sec: 5,
      max_optimization_threads: null
    },
    wal_config: { wal_capacity_mb: 32, wal_segments_ahead: 0 },
    quantization_config: null
  },
  payload_schema: Object.fromEntries(
    [...collection.payloadSchema].map(([field, index]) => [field, {
      ...index,
      points: [...collection.points.values()].filter((p) => p.payload[field] !== undefined).length
    }])
  )
})

let operationId = 0
const updated = (query: Record<string, string>) => ({
  operation_id: ++operationId,
  status: query.wait === "true" ? "completed" : "acknowledged"
})

const route = (fake: FakeQdrant, request: Recorded): unknown => {
  const { method, path, query, body } = request
  if (method === "GET" && path === "/collections") {
    return { collections: [...fake.collections.keys()].map((name) => ({ name })) }
  }
  const match = /^\/collections\/([^/]+)(\/.*)?$/.exec(path)
  if (match === null) throw new HttpError(404, `fake Qdrant: no route for ${method} ${path}`)
  const name = decodeURIComponent(match[1]!)
  const rest = match[2] ?? ""
  const existing = fake.collections.get(name)

  if (method === "GET" && rest === "/exists") return { exists: existing !== undefined }
  if (method === "PUT" && rest === "") {
    if (fake.raceOnCreate && existing === undefined) {
      fake.raceOnCreate = false
      route(fake, request)
    }
    if (fake.collections.has(name)) throw new HttpError(409, `Wrong input: Collection \`${name}\` already exists!`)
    if (!isRecord(body) || !isRecord(body.vectors) || typeof body.vectors.size !== "number" || typeof body.vectors.distance !== "string") {
      throw new HttpError(400, "fake Qdrant: only a single unnamed vector is implemented")
    }
    fake.collections.set(name, {
      size: body.vectors.size,
      distance: body.vectors.distance,
      onDiskPayload: body.on_disk_payload,
      payloadSchema: new Map(),
      points: new Map()
    })
    return true
  }
  if (existing === undefined) throw new HttpError(404, `Not found: Collection \`${name}\` doesn't exist!`)
  const collection = existing

  if (method === "GET" && rest === "") return collectionInfo(collection)
  if (method === "DELETE" && rest === "") {
    fake.collections.delete(name)
    return true
  }
  if (!isRecord(body)) throw new HttpError(400, "Format error: body")

  if (method === "PUT" && rest === "/index") {
    const schema = body.field_schema
    if (typeof body.field_name !== "string") throw new HttpError(400, "Format error: field_name")
    const dataType = typeof schema === "string" ? schema : isRecord(schema) && typeof schema.type === "string" ? schema.type : undefined
    if (dataType === undefined) throw new HttpError(400, "Format error: field_schema")
    // Qdrant accepts the same index twice.
    collection.payloadSchema.set(body.field_name, isRecord(schema) ? { data_type: dataType, params: schema } : { data_type: dataType })
    return updated(query)
  }
  if (method === "PUT" && rest === "/points") {
    if (!Array.isArray(body.points)) throw new HttpError(400, "fake Qdrant: only the list form of points is implemented")
    const points = body.points.map((point: unknown) => {
      if (!isRecord(point)) throw new HttpError(400, "Format error: point")
      const id = point.id
      if (!(typeof id === "string" && UUID.test(id)) && !(typeof id === "number" && Number.isInteger(id) && id >= 0)) {
        throw new HttpError(400, `Format error in JSON body: value ${String(id)} is not a valid point ID`)
      }
      const vector = numbers(point.vector, "vector")
      if (vector.length !== collection.size) {
        throw new HttpError(400, `Wrong input: Vector dimension error: expected dim: ${collection.size}, got ${vector.length}`)
      }
      return { id, vector: normalize(vector), payload: isRecord(point.payload) ? point.payload : {} }
    })
    for (const point of points) collection.points.set(String(point.id), point)
    return updated(query)
  }
  if (method === "POST" && rest === "/points/query/groups") {
    const vector = normalize(numbers(body.query, "query"))
    if (vector.length !== collection.size) {
      throw new HttpError(400, `Wrong input: Vector dimension error: expected dim: ${collection.size}, got ${vector.length}`)
    }
    if (typeof body.group_by !== "string") throw new HttpError(400, "Format error: group_by")
    const groupSize = typeof body.group_size === "number" ? body.group_size : 3
    const limit = typeof body.limit === "number" ? body.limit : 10
    const groupBy = body.group_by
    const scored = [...collection.points.values()]
      .filter((point) => matches(point.payload, body.filter))
      .map((point) => ({ point, score: dot(vector, point.vector) }))
      .sort((a, b) => b.score - a.score)
    const groups = new Map<unknown, Array<{ id: string | number; version: number; score: number }>>()
    for (const { point, score } of scored) {
      const key = point.payload[groupBy]
      if (typeof key !== "string" && typeof key !== "number") continue
      const hits = groups.get(key) ?? []
      if (!groups.has(key)) {
        if (groups.size === limit) continue
        groups.set(key, hits)
      }
      if (hits.length < groupSize) hits.push({ id: point.id, version: 1, score })
    }
    return { groups: [...groups].map(([id, hits]) => ({ id, hits })) }
  }
  if (method === "POST" && rest === "/points/delete") {
    if (body.filter === undefined) throw new HttpError(400, "fake Qdrant: only delete by filter is implemented")
    for (const [id, point] of collection.points) {
      if (matches(point.payload, body.filter)) collection.points.delete(id)
    }
    return updated(query)
  }
  if (method === "POST" && rest === "/points/count") {
    return { count: [...collection.points.values()].filter((point) => matches(point.payload, body.filter)).length }
  }
  throw new HttpError(404, `fake Qdrant: no route for ${method} ${path}`)
}

/** A fake Qdrant on loopback, serving under `prefix` (as behind a proxy) when given. */
const startFake = (prefix = ""): Effect.Effect<FakeQdrant, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.async<{ fake: FakeQdrant; server: http.Server }>((resume) => {
      const failures: Array<Failure> = []
      const server = http.createServer()
      server.listen(0, "127.0.0.1", () => {
        const { port } = server.address() as AddressInfo
        const fake: FakeQdrant = {
          url: `http://127.0.0.1:${port}${prefix}`,
          requests: [],
          collections: new Map(),
          failNext: (failure) => failures.push(failure),
          raceOnCreate: false
        }
        server.on("request", (req: http.IncomingMessage, res: http.ServerResponse) => {
          const chunks: Array<Buffer> = []
          req.on("data", (chunk: Buffer) => chunks.push(chunk))
          req.on("end", () => {
            const started = performance.now()
            const url = new URL(req.url ?? "/", "http://fake")
            const text = Buffer.concat(chunks).toString("utf8")
            const answer = (status: number, payload: object) => {
              res.writeHead(status, { "content-type": "application/json" })
              res.end(JSON.stringify({ ...payload, time: (performance.now() - started) / 1000 }))
            }
            if (!url.pathname.startsWith(prefix)) return answer(404, { status: { error: "not under the prefix" } })
            const request: Recorded = {
              method: req.method ?? "GET",
              path: url.pathname.slice(prefix.length),
              query: Object.fromEntries(url.searchParams),
              headers: req.headers,
              body: text === "" ? undefined : JSON.parse(text)
            }
            fake.requests.push(request)
            const failure = failures.findIndex((f) => f.method === request.method && f.path.test(request.path))
            if (failure >= 0) {
              const { status, error } = failures.splice(failure, 1)[0]!
              return answer(status, { status: { error } })
            }
            try {
              answer(200, { result: route(fake, request), status: "ok" })
            } catch (error) {
              if (!(error instanceof HttpError)) throw error
              answer(error.status, { status: { error: error.error } })
            }
          })
        })
        resume(Effect.succeed({ fake, server }))
      })
    }),
    ({ server }) =>
      Effect.async<void>((resume) => {
        // The client keeps connections alive; close them so that close() returns.
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      })
  ).pipe(Effect.map(({ fake }) => fake))

// ---------------------------------------------------------------------------------------------
// Where the tests run

interface Target {
  readonly url: string
  readonly apiKey?: Redacted.Redacted<string> | undefined
  /** The fake, when the target is one. */
  readonly fake?: FakeQdrant
}

interface Backend {
  readonly name: string
  readonly target: Effect.Effect<Target, never, Scope.Scope>
}

const fakeBackend: Backend = {
  name: "fake Qdrant",
  target: Effect.map(startFake(), (fake) => ({ url: fake.url, fake }))
}

const realUrl = process.env.QDRANT_URL
const realApiKey = process.env.QDRANT_API_KEY
const realBackend = (url: string): Backend => ({
  name: `Qdrant at QDRANT_URL`,
  target: Effect.succeed({ url, apiKey: realApiKey ? Redacted.make(realApiKey) : undefined })
})

/** The SDK as the tests use it, to set up and inspect collections behind the adapter's back. */
const rawClient = (target: Target) => {
  const url = new URL(target.url)
  const prefix = url.pathname.replace(/\/+$/, "")
  return new QdrantClient({
    url: url.origin,
    port: null,
    ...(prefix === "" ? {} : { prefix }),
    ...(target.apiKey === undefined ? {} : { apiKey: Redacted.value(target.apiKey) }),
    checkCompatibility: false
  })
}

const openIndex = (target: Target): Effect.Effect<VectorIndexShape, VectorIndexError> =>
  VectorIndex.pipe(Effect.provide(QdrantIndex.layer({ url: target.url, apiKey: target.apiKey })))

/** A target, a model name no other test uses, and an index; the model's collections are deleted afterwards. */
const setup = (backend: Backend) =>
  Effect.gen(function*() {
    const target = yield* backend.target
    const model = uniqueName("mailroom-test-model")
    const client = rawClient(target)
    const prefix = collectionName(model, 1).slice(0, -1)
    yield* Effect.addFinalizer(() =>
      Effect.promise(async () => {
        const { collections } = await client.getCollections()
        for (const { name } of collections) {
          if (name.startsWith(prefix)) await client.deleteCollection(name)
        }
      }).pipe(Effect.orDie))
    const index = yield* openIndex(target)
    return { target, model, client, index, fake: target.fake }
  })

const DIMS = 4

/** A unit vector whose cosine similarity to QUERY is `similarity`. */
const at = (similarity: number): Float32Array => Float32Array.from([similarity, Math.sqrt(1 - similarity ** 2), 0, 0])
const QUERY = at(1)

const point = (emailId: string, chunk: number, similarity: number, rest: Partial<VectorPoint> = {}): VectorPoint => ({
  emailId,
  chunk,
  namespace: "ns-a",
  mailboxId: "mb-1",
  domain: "a.example",
  date: new Date("2025-01-02T03:04:05.000Z"),
  vector: at(similarity),
  ...rest
})

const emails = (hits: ReadonlyArray<{ readonly emailId: string }>) => hits.map((hit) => hit.emailId)

const expectHits = (
  hits: ReadonlyArray<{ readonly emailId: string; readonly similarity: number }>,
  expected: ReadonlyArray<readonly [string, number]>
) => {
  expect(emails(hits)).toEqual(expected.map(([emailId]) => emailId))
  hits.forEach((hit, i) => expect(hit.similarity).toBeCloseTo(expected[i]![1], 4))
}

// ---------------------------------------------------------------------------------------------
// The contract, on every backend

const contract = (backend: Backend) =>
  describe(backend.name, () => {
    it.scopedLive("answers ping and calls itself qdrant", () =>
      Effect.gen(function*() {
        const { index } = yield* setup(backend)
        expect(index.kind).toBe("qdrant")
        yield* index.ping
      }))

    it.scopedLive("creates the model's collection with cosine distance, its size and the payload indexes", () =>
      Effect.gen(function*() {
        const { client, index, model } = yield* setup(backend)
        const collection = yield* index.collection(model, DIMS)
        expect([collection.model, collection.dimensions]).toEqual([model, DIMS])
        const info = yield* Effect.promise(() => client.getCollection(collectionName(model, DIMS)))
        expect(info.config.params.vectors).toMatchObject({ size: DIMS, distance: "Cosine" })
        const schema = info.payload_schema
        expect(Object.fromEntries(Object.entries(schema).map(([field, index]) => [field, index?.data_type]))).toEqual({
          namespace: "keyword",
          mailbox_id: "keyword",
          domain: "keyword",
          date: "datetime",
          email_id: "keyword"
        })
        expect(schema.namespace?.params).toMatchObject({ is_tenant: true })
      }))

    it.scopedLive("lets two processes create the same collection at once, and both use it", () =>
      Effect.gen(function*() {
        const { index, model, target } = yield* setup(backend)
        const other = yield* openIndex(target)
        const [mine, theirs] = yield* Effect.all([index.collection(model, DIMS), other.collection(model, DIMS)], { concurrency: 2 })
        yield* mine.upsert([point("email-1", 0, 0.5)])
        expect(yield* theirs.count()).toBe(1)
      }))

    it.scopedLive("adds the payload indexes missing from an existing collection", () =>
      Effect.gen(function*() {
        const { client, index, model } = yield* setup(backend)
        const name = collectionName(model, DIMS)
        // As left by a process that died between creating the collection and its indexes.
        yield* Effect.promise(() => client.createCollection(name, { vectors: { size: DIMS, distance: "Cosine" } }))
        yield* index.collection(model, DIMS)
        const info = yield* Effect.promise(() => client.getCollection(name))
        expect(Object.keys(info.payload_schema).sort()).toEqual(["date", "domain", "email_id", "mailbox_id", "namespace"])
      }))

    it.scopedLive("fails when the collection holds vectors of another size, naming it and both sizes", () =>
      Effect.gen(function*() {
        const { client, index, model } = yield* setup(backend)
        const name = collectionName(model, DIMS)
        yield* Effect.promise(() => client.createCollection(name, { vectors: { size: 3, distance: "Cosine" } }))
        const error = yield* Effect.flip(index.collection(model, DIMS))
        expect(error).toBeInstanceOf(VectorIndexError)
        expect(error.message).toContain(name)
        expect(error.message).toMatch(/\b3\b.*\b4\b/)
      }))

    it.scopedLive("answers each email once, with the similarity of its best chunk, best first", () =>
      Effect.gen(function*() {
        const { index, model } = yield* setup(backend)
        const collection = yield* index.collection(model, DIMS)
        yield* collection.upsert([
          point("email-1", 0, 0.3),
          point("email-1", 1, 0.9),
          point("email-2", 0, 0.5),
          point("email-3", 0, 0.7),
          point("email-3", 1, -0.2)
        ])
        expectHits(yield* collection.search(QUERY, { namespace: "ns-a" }, 10), [["email-1", 0.9], ["email-3", 0.7], ["email-2", 0.5]])
        expectHits(yield* collection.search(QUERY, { namespace: "ns-a" }, 2), [["email-1", 0.9], ["email-3", 0.7]])
        expectHits(yield* collection.search(QUERY, { namespace: "ns-a" }, 10, { exact: true }), [
          ["email-1", 0.9],
          ["email-3", 0.7],
          ["email-2", 0.5]
        ])
      }))

    it.scopedLive("searches only the namespace, and only the given mailboxes", () =>
      Effect.gen(function*() {
        const { index, model } = yield* setup(backend)
        const collection = yield* index.collection(model, DIMS)
        yield* collection.upsert([
          point("email-1", 0, 0.9, { mailboxId: "mb-1" }),
          point("email-2", 0, 0.8, { mailboxId: "mb-2" }),
          point("email-3", 0, 0.95, { namespace: "ns-b", mailboxId: "mb-3" })
        ])
        expect(emails(yield* collection.search(QUERY, { namespace: "ns-a" }, 10))).toEqual(["email-1", "email-2"])
        expect(emails(yield* collection.search(QUERY, { namespace: "ns-a", mailboxIds: ["mb-2"] }, 10))).toEqual(["email-2"])
        expect(emails(yield* collection.search(QUERY, { namespace: "ns-a", mailboxIds: ["mb-2", "mb-1"] }, 10))).toEqual([
          "email-1",
          "email-2"
        ])
        // Another namespace's mailbox is not reached by naming it.
        expect(emails(yield* collection.search(QUERY, { namespace: "ns-a", mailboxIds: ["mb-3"] }, 10))).toEqual([])
        expect(yield* collection.search(QUERY, { namespace: "ns-a", mailboxIds: [] }, 10)).toEqual([])
        expect(emails(yield* collection.search(QUERY, { namespace: "ns-b" }, 10))).toEqual(["email-3"])
        expect(yield* collection.search(QUERY, { namespace: "ns-c" }, 10)).toEqual([])
      }))

    it.scopedLive("replaces a chunk upserted again, vector and payload", () =>
      Effect.gen(function*() {
        const { index, model } = yield* setup(backend)
        const collection = yield* index.collection(model, DIMS)
        yield* collection.upsert([point("email-1", 0, 0.2), point("email-1", 1, 0.1)])
        yield* collection.upsert([point("email-1", 0, 0.8, { mailboxId: "mb-2" })])
        expect(yield* collection.count()).toBe(2)
        expectHits(yield* collection.search(QUERY, { namespace: "ns-a", mailboxIds: ["mb-2"] }, 10), [["email-1", 0.8]])
        // Chunk 1 was not replaced: it is still in mb-1.
        expectHits(yield* collection.search(QUERY, { namespace: "ns-a", mailboxIds: ["mb-1"] }, 10), [["email-1", 0.1]])
      }))

    it.scopedLive("stores a large upsert completely: every point counted and searchable on return", () =>
      Effect.gen(function*() {
        const { index, model } = yield* setup(backend)
        const collection = yield* index.collection(model, DIMS)
        const points = Array.from({ length: 300 }, (_, i) => [
          point(`email-${i}`, 0, -0.5 + i / 1000, { namespace: i % 3 === 0 ? "ns-b" : "ns-a" }),
          point(`email-${i}`, 1, -0.6 + i / 1000, { namespace: i % 3 === 0 ? "ns-b" : "ns-a" })
        ]).flat()
        yield* collection.upsert(points)
        expect(yield* collection.count()).toBe(600)
        expect(yield* collection.count("ns-b")).toBe(200)
        const hits = yield* collection.search(QUERY, { namespace: "ns-a" }, 5, { exact: true })
        expect(emails(hits)).toEqual(["email-299", "email-298", "email-296", "email-295", "email-293"])
      }))

    it.scopedLive("removes every chunk of the given emails, and nothing else", () =>
      Effect.gen(function*() {
        const { index, model } = yield* setup(backend)
        const collection = yield* index.collection(model, DIMS)
        yield* collection.upsert([
          point("email-1", 0, 0.9),
          point("email-1", 1, 0.8),
          point("email-2", 0, 0.7),
          point("email-3", 0, 0.6, { namespace: "ns-b" })
        ])
        yield* collection.remove(["email-1", "email-3", "email-unknown"])
        expect(yield* collection.count()).toBe(1)
        expect(emails(yield* collection.search(QUERY, { namespace: "ns-a" }, 10))).toEqual(["email-2"])
        yield* collection.remove([])
        expect(yield* collection.count()).toBe(1)
      }))

    it.scopedLive("counts the points of a namespace, or all of them", () =>
      Effect.gen(function*() {
        const { index, model } = yield* setup(backend)
        const collection = yield* index.collection(model, DIMS)
        expect(yield* collection.count()).toBe(0)
        yield* collection.upsert([
          point("email-1", 0, 0.1),
          point("email-1", 1, 0.2),
          point("email-2", 0, 0.3),
          point("email-3", 0, 0.4, { namespace: "ns-b" }),
          point("email-4", 0, 0.5, { namespace: "ns-b" })
        ])
        expect(yield* collection.count()).toBe(5)
        expect(yield* collection.count("ns-a")).toBe(3)
        expect(yield* collection.count("ns-b")).toBe(2)
        expect(yield* collection.count("ns-c")).toBe(0)
      }))

    it.scopedLive("creates the collection again when it was deleted behind the index's back", () =>
      Effect.gen(function*() {
        const { client, index, model } = yield* setup(backend)
        const stale = yield* index.collection(model, DIMS)
        yield* Effect.promise(() => client.deleteCollection(collectionName(model, DIMS)))
        const error = yield* Effect.flip(stale.upsert([point("email-1", 0, 0.5)]))
        expect(error.message).toContain(collectionName(model, DIMS))
        const fresh = yield* index.collection(model, DIMS)
        yield* fresh.upsert([point("email-1", 0, 0.5)])
        expect(yield* fresh.count()).toBe(1)
      }))

    it.scopedLive("refuses a vector of the wrong size with an error naming the email", () =>
      Effect.gen(function*() {
        const { index, model } = yield* setup(backend)
        const collection = yield* index.collection(model, DIMS)
        const error = yield* Effect.flip(collection.upsert([point("email-1", 0, 0.5, { vector: new Float32Array(3) })]))
        expect(error.message).toContain("email-1")
        expect(yield* collection.count()).toBe(0)
      }))
  })

contract(fakeBackend)
describe.skipIf(realUrl === undefined)("real server", () => {
  if (realUrl !== undefined) contract(realBackend(realUrl))
})

// ---------------------------------------------------------------------------------------------
// What only the wire shows

const requestsTo = (fake: FakeQdrant, method: string, path: RegExp) =>
  fake.requests.filter((request) => request.method === method && path.test(request.path))

const bodyOf = (request: Recorded | undefined): Record<string, unknown> => {
  const body = request?.body
  return isRecord(body) ? body : {}
}

describe("requests sent to Qdrant", () => {
  const fakeSetup = Effect.gen(function*() {
    const { fake, ...rest } = yield* setup(fakeBackend)
    if (fake === undefined) return yield* Effect.die("no fake")
    return { fake, ...rest }
  })

  it.scopedLive("creates the collection and its indexes as documented, waiting for each index", () =>
    Effect.gen(function*() {
      const { fake, index, model } = yield* fakeSetup
      const name = collectionName(model, DIMS)
      yield* index.collection(model, DIMS)
      expect(bodyOf(requestsTo(fake, "PUT", /^\/collections\/[^/]+$/)[0])).toMatchObject({
        vectors: { size: DIMS, distance: "Cosine" },
        on_disk_payload: false
      })
      const indexes = requestsTo(fake, "PUT", /\/index$/)
      expect(indexes.map((request) => request.path)).toEqual(Array(5).fill(`/collections/${name}/index`))
      expect(indexes.map((request) => request.query.wait)).toEqual(Array(5).fill("true"))
      expect(Object.fromEntries(indexes.map((request) => [bodyOf(request).field_name, bodyOf(request).field_schema]))).toEqual({
        namespace: { type: "keyword", is_tenant: true },
        mailbox_id: { type: "keyword" },
        domain: { type: "keyword" },
        date: { type: "datetime" },
        email_id: { type: "keyword" }
      })
    }))

  it.scopedLive("opens a ready collection once, without creating anything", () =>
    Effect.gen(function*() {
      const { fake, index, model, target } = yield* fakeSetup
      yield* index.collection(model, DIMS)
      const before = fake.requests.length
      yield* index.collection(model, DIMS)
      expect(fake.requests.length).toBe(before)
      const other = yield* openIndex(target)
      yield* other.collection(model, DIMS)
      expect(fake.requests.slice(before).map((request) => `${request.method} ${request.path}`)).toEqual([
        `GET /collections/${collectionName(model, DIMS)}/exists`,
        `GET /collections/${collectionName(model, DIMS)}`
      ])
    }))

  it.scopedLive("takes 'already exists' for success when another process created the collection first", () =>
    Effect.gen(function*() {
      const { fake, index, model } = yield* fakeSetup
      fake.raceOnCreate = true
      const collection = yield* index.collection(model, DIMS)
      expect(requestsTo(fake, "PUT", /^\/collections\/[^/]+$/)).toHaveLength(1)
      expect(fake.collections.get(collectionName(model, DIMS))?.payloadSchema.size).toBe(5)
      yield* collection.upsert([point("email-1", 0, 0.5)])
      expect(yield* collection.count()).toBe(1)
    }))

  it.scopedLive("upserts in batches of at most 256, waiting, with the payload and derived UUIDs", () =>
    Effect.gen(function*() {
      const { fake, index, model } = yield* fakeSetup
      const collection = yield* index.collection(model, DIMS)
      yield* collection.upsert(Array.from({ length: 600 }, (_, i) => point(`email-${i >> 1}`, i % 2, 0.5)))
      const upserts = requestsTo(fake, "PUT", /\/points$/)
      expect(upserts.map((request) => (bodyOf(request).points as Array<unknown>).length)).toEqual([256, 256, 88])
      expect(upserts.map((request) => request.query.wait)).toEqual(["true", "true", "true"])
      const [first] = bodyOf(upserts[0]).points as Array<Record<string, unknown>>
      expect(first).toEqual({
        id: QdrantIndex.pointId("email-0", 0),
        vector: Array.from(at(0.5)),
        payload: {
          email_id: "email-0",
          chunk: 0,
          namespace: "ns-a",
          mailbox_id: "mb-1",
          domain: "a.example",
          date: "2025-01-02T03:04:05.000Z"
        }
      })
      expect(QdrantIndex.pointId("email-0", 0)).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
      expect(QdrantIndex.pointId("email-0", 0)).toBe(QdrantIndex.pointId("email-0", 0))
      expect(QdrantIndex.pointId("email-0", 1)).not.toBe(QdrantIndex.pointId("email-0", 0))
    }))

  it.scopedLive("searches by groups of email_id, one hit each, with the filter and search params", () =>
    Effect.gen(function*() {
      const { fake, index, model } = yield* fakeSetup
      const collection = yield* index.collection(model, DIMS)
      yield* collection.search(QUERY, { namespace: "ns-a" }, 10)
      yield* collection.search(QUERY, { namespace: "ns-a", mailboxIds: ["mb-1", "mb-2"] }, 100)
      yield* collection.search(QUERY, { namespace: "ns-a" }, 10, { exact: true })
      const searches = requestsTo(fake, "POST", /\/points\/query\/groups$/).map(bodyOf)
      expect(searches[0]).toEqual({
        query: Array.from(QUERY),
        filter: { must: [{ key: "namespace", match: { value: "ns-a" } }] },
        params: { hnsw_ef: 128 },
        group_by: "email_id",
        group_size: 1,
        limit: 10,
        with_payload: false,
        with_vector: false
      })
      expect(searches[1]).toMatchObject({
        filter: {
          must: [{ key: "namespace", match: { value: "ns-a" } }, { key: "mailbox_id", match: { any: ["mb-1", "mb-2"] } }]
        },
        params: { hnsw_ef: 200 },
        limit: 100
      })
      expect(searches[2]?.params).toEqual({ exact: true })
    }))

  it.scopedLive("answers an empty mailbox list with no hits, without asking Qdrant", () =>
    Effect.gen(function*() {
      const { fake, index, model } = yield* fakeSetup
      const collection = yield* index.collection(model, DIMS)
      yield* collection.upsert([point("email-1", 0, 0.5)])
      expect(yield* collection.search(QUERY, { namespace: "ns-a", mailboxIds: [] }, 10)).toEqual([])
      expect(requestsTo(fake, "POST", /\/points\/query\/groups$/)).toHaveLength(0)
    }))

  it.scopedLive("removes by an email_id filter in batches of 1000, waiting", () =>
    Effect.gen(function*() {
      const { fake, index, model } = yield* fakeSetup
      const collection = yield* index.collection(model, DIMS)
      yield* collection.remove(Array.from({ length: 2500 }, (_, i) => `email-${i}`))
      const deletes = requestsTo(fake, "POST", /\/points\/delete$/)
      expect(deletes.map((request) => request.query.wait)).toEqual(["true", "true", "true"])
      const filters = deletes.map((request) => bodyOf(request).filter as { must: Array<{ key: string; match: { any: Array<string> } }> })
      expect(filters.map((filter) => filter.must[0]?.key)).toEqual(["email_id", "email_id", "email_id"])
      expect(filters.map((filter) => filter.must[0]?.match.any.length)).toEqual([1000, 1000, 500])
      expect(filters[2]?.must[0]?.match.any.at(-1)).toBe("email-2499")
    }))

  it.scopedLive("counts exactly, filtering by namespace when given", () =>
    Effect.gen(function*() {
      const { fake, index, model } = yield* fakeSetup
      const collection = yield* index.collection(model, DIMS)
      yield* collection.count()
      yield* collection.count("ns-a")
      expect(requestsTo(fake, "POST", /\/points\/count$/).map(bodyOf)).toEqual([
        { exact: true },
        { exact: true, filter: { must: [{ key: "namespace", match: { value: "ns-a" } }] } }
      ])
    }))

  it.scopedLive("retries a 503 or a 429 and then succeeds", () =>
    Effect.gen(function*() {
      const { fake, index, model } = yield* fakeSetup
      const collection = yield* index.collection(model, DIMS)
      fake.failNext({ method: "PUT", path: /\/points$/, status: 503, error: "Service Unavailable: node restarting" })
      fake.failNext({ method: "PUT", path: /\/points$/, status: 429, error: "Too many requests" })
      yield* collection.upsert([point("email-1", 0, 0.5)])
      expect(requestsTo(fake, "PUT", /\/points$/)).toHaveLength(3)
      expect(yield* collection.count()).toBe(1)
    }))

  it.scopedLive("does not retry a client error, and says what failed and why", () =>
    Effect.gen(function*() {
      const { fake, index, model } = yield* fakeSetup
      const collection = yield* index.collection(model, DIMS)
      fake.failNext({ method: "POST", path: /\/points\/query\/groups$/, status: 400, error: "Wrong input: bad filter" })
      const error = yield* Effect.flip(collection.search(QUERY, { namespace: "ns-a" }, 10))
      expect(error).toBeInstanceOf(VectorIndexError)
      expect(error.message).toBe(`Qdrant: could not search ${collectionName(model, DIMS)}: Qdrant answered 400: Wrong input: bad filter`)
      expect(requestsTo(fake, "POST", /\/points\/query\/groups$/)).toHaveLength(1)
    }))

  it.scopedLive("fails a search after a few tries when the server keeps answering 500", () =>
    Effect.gen(function*() {
      const { fake, index, model } = yield* fakeSetup
      const collection: VectorCollection = yield* index.collection(model, DIMS)
      for (let i = 0; i < 10; i++) fake.failNext({ method: "POST", path: /\/points\/count$/, status: 500, error: "Service internal error" })
      const error = yield* Effect.flip(collection.count())
      expect(error.message).toContain("Qdrant answered 500")
      expect(requestsTo(fake, "POST", /\/points\/count$/)).toHaveLength(4)
    }))

  it.scopedLive("reports an unreachable server from ping", () =>
    Effect.gen(function*() {
      // A port that was just free: nothing listens there.
      const server = http.createServer()
      const port = yield* Effect.async<number>((resume) => {
        server.listen(0, "127.0.0.1", () => {
          const { port } = server.address() as AddressInfo
          server.close(() => resume(Effect.succeed(port)))
        })
      })
      const index = yield* openIndex({ url: `http://127.0.0.1:${port}` })
      const started = Date.now()
      const error = yield* Effect.flip(index.ping)
      expect(error).toBeInstanceOf(VectorIndexError)
      expect(error.message).toContain("ECONNREFUSED")
      expect(Date.now() - started).toBeLessThan(5_000)
    }))

  it.scopedLive("sends the API key in its header, and never in an error", () =>
    Effect.gen(function*() {
      const fake = yield* startFake()
      const key = "s3cret-qdrant-key"
      const index = yield* openIndex({ url: fake.url, apiKey: Redacted.make(key) })
      yield* index.ping
      expect(fake.requests[0]?.headers["api-key"]).toBe(key)
      fake.failNext({ method: "GET", path: /^\/collections\/[^/]+\/exists$/, status: 403, error: "Forbidden" })
      const exit = yield* Effect.exit(index.collection("some-model", DIMS))
      expect(Exit.isFailure(exit)).toBe(true)
      expect(JSON.stringify(exit)).not.toContain(key)
      expect(String(Exit.isFailure(exit) ? exit.cause : "")).not.toContain(key)
    }))

  it.scopedLive("reaches a Qdrant behind a path prefix at that path", () =>
    Effect.gen(function*() {
      const fake = yield* startFake("/qdrant")
      const index = yield* openIndex({ url: `${fake.url}/` })
      yield* index.ping
      const collection = yield* index.collection("some-model", DIMS)
      yield* collection.upsert([point("email-1", 0, 0.5)])
      expect(yield* collection.count()).toBe(1)
    }))

  it.effect("fails to build on a URL that is not one", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(openIndex({ url: "qdrant:6333" }))
      expect(error).toBeInstanceOf(VectorIndexError)
      expect(error.message).toContain("QDRANT_URL")
    }))
})
