/**
 * A fake Qdrant REST server on loopback, for any test that needs a shared vector index without a
 * Qdrant: the endpoints layers/qdrant-index.ts calls, an in-memory brute-force cosine search, and
 * Qdrant's answers (its `{ result, status, time }` envelope, its 404/409/400 errors). It accepts only
 * the request shapes the adapter is meant to send and refuses anything else with a 400 naming it, so
 * a test against the fake checks the requests too. It records every request, for what only the
 * wire shows (batches, `wait`, search params), and can fail some on purpose.
 *
 * One fake may serve several processes at once (a cluster test): its state lives in the test
 * process, and every request is answered whole before the next is read.
 */
import * as http from "node:http"
import type { AddressInfo } from "node:net"

export interface FakeQdrantRequest {
  readonly method: string
  /** Without the fake's prefix. */
  readonly path: string
  readonly query: Record<string, string>
  readonly headers: http.IncomingHttpHeaders
  readonly body: unknown
}

export interface FakeQdrantPoint {
  readonly id: string | number
  /** Normalized, as Qdrant stores vectors of a cosine collection. */
  readonly vector: ReadonlyArray<number>
  readonly payload: Record<string, unknown>
}

export interface FakeQdrantCollection {
  readonly size: number
  readonly distance: string
  readonly onDiskPayload: unknown
  readonly payloadSchema: Map<string, { readonly data_type: string; readonly params?: unknown }>
  readonly points: Map<string, FakeQdrantPoint>
}

export interface FakeQdrantFailure {
  readonly method: string
  readonly path: RegExp
  readonly status: number
  readonly error: string
}

export interface FakeQdrant {
  /** `http://127.0.0.1:<port>[<prefix>]`: a QDRANT_URL. */
  readonly url: string
  /** Every request so far, in arrival order. */
  readonly requests: Array<FakeQdrantRequest>
  readonly collections: Map<string, FakeQdrantCollection>
  /** Answer the next request matching `method` and `path` with this error instead. */
  readonly failNext: (failure: FakeQdrantFailure) => void
  /** Another process creates the collection between the adapter's existence check and its create. */
  raceOnCreate: boolean
  /** Stop listening and drop the connections clients keep alive. */
  readonly close: () => Promise<void>
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

/** A datetime as Qdrant compares one (RFC 3339), or a refusal. */
const moment = (value: unknown, what: string): number => {
  const time = typeof value === "string" ? Date.parse(value) : Number.NaN
  if (Number.isNaN(time)) throw new HttpError(400, `Format error: ${what} is not a datetime`)
  return time
}

/** One field condition: a payload array meets it when any of its values does (as in Qdrant). */
const meets = (payload: Record<string, unknown>, condition: Record<string, unknown>): boolean => {
  if (isRecord(condition.is_empty) && typeof condition.is_empty.key === "string") {
    const value = payload[condition.is_empty.key]
    return value === undefined || value === null || (Array.isArray(value) && value.length === 0)
  }
  if (typeof condition.key !== "string") throw new HttpError(400, `fake Qdrant: condition ${JSON.stringify(condition)} not implemented`)
  const stored = payload[condition.key]
  const values: ReadonlyArray<unknown> = Array.isArray(stored) ? stored : stored === undefined ? [] : [stored]
  const { match, range } = condition
  if (isRecord(match) && "value" in match) return values.includes(match.value)
  if (isRecord(match) && Array.isArray(match.any)) return values.some((value) => (match.any as Array<unknown>).includes(value))
  if (isRecord(range)) {
    const bounds = Object.entries(range).map(([op, bound]) => {
      if (!["gt", "gte", "lt", "lte"].includes(op)) throw new HttpError(400, `fake Qdrant: range ${op} not implemented`)
      return [op, moment(bound, `range.${op}`)] as const
    })
    return values.some((value) => {
      if (typeof value !== "string") return false
      const at = Date.parse(value)
      return bounds.every(([op, bound]) => op === "gt" ? at > bound : op === "gte" ? at >= bound : op === "lt" ? at < bound : at <= bound)
    })
  }
  throw new HttpError(400, `fake Qdrant: condition ${JSON.stringify(condition)} not implemented`)
}

/** Qdrant's filter semantics for the clauses and conditions the adapter may send; anything else is refused. */
const matches = (payload: Record<string, unknown>, filter: unknown): boolean => {
  if (filter === undefined || filter === null) return true
  if (!isRecord(filter)) throw new HttpError(400, "Format error: filter")
  const clause = (key: string): ReadonlyArray<unknown> =>
    filter[key] === undefined ? [] : Array.isArray(filter[key]) ? filter[key] : [filter[key]]
  for (const key of Object.keys(filter)) {
    if (key !== "must" && key !== "should") throw new HttpError(400, `fake Qdrant: filter clause ${key} not implemented`)
  }
  // A condition is a field's, or a filter of its own (nested clauses).
  const holds = (condition: unknown): boolean => {
    if (!isRecord(condition)) throw new HttpError(400, `fake Qdrant: condition ${JSON.stringify(condition)} not implemented`)
    return "must" in condition || "should" in condition ? matches(payload, condition) : meets(payload, condition)
  }
  const should = clause("should")
  return clause("must").every(holds) && (should.length === 0 || should.some(holds))
}

const collectionInfo = (collection: FakeQdrantCollection) => ({
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

interface State {
  readonly collections: Map<string, FakeQdrantCollection>
  raceOnCreate: boolean
  operationId: number
}

const updated = (state: State, query: Record<string, string>) => ({
  operation_id: ++state.operationId,
  status: query.wait === "true" ? "completed" : "acknowledged"
})

const route = (state: State, request: FakeQdrantRequest): unknown => {
  const { method, path, query, body } = request
  if (method === "GET" && path === "/collections") {
    return { collections: [...state.collections.keys()].map((name) => ({ name })) }
  }
  const match = /^\/collections\/([^/]+)(\/.*)?$/.exec(path)
  if (match === null) throw new HttpError(404, `fake Qdrant: no route for ${method} ${path}`)
  const name = decodeURIComponent(match[1]!)
  const rest = match[2] ?? ""
  const existing = state.collections.get(name)

  if (method === "GET" && rest === "/exists") return { exists: existing !== undefined }
  if (method === "PUT" && rest === "") {
    if (state.raceOnCreate && existing === undefined) {
      state.raceOnCreate = false
      route(state, request)
    }
    if (state.collections.has(name)) throw new HttpError(409, `Wrong input: Collection \`${name}\` already exists!`)
    if (!isRecord(body) || !isRecord(body.vectors) || typeof body.vectors.size !== "number" || typeof body.vectors.distance !== "string") {
      throw new HttpError(400, "fake Qdrant: only a single unnamed vector is implemented")
    }
    state.collections.set(name, {
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
    state.collections.delete(name)
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
    return updated(state, query)
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
    return updated(state, query)
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
    return updated(state, query)
  }
  if (method === "POST" && rest === "/points/scroll") {
    // Qdrant's order: by point id, from `offset` (inclusive); the next page's first id, or null.
    const limit = typeof body.limit === "number" ? body.limit : 10
    if (body.with_vector === true) throw new HttpError(400, "fake Qdrant: scrolling with vectors is not implemented")
    const fields = Array.isArray(body.with_payload) ? body.with_payload as Array<string> : undefined
    const found = [...collection.points.values()]
      .filter((point) => (body.offset === undefined || body.offset === null || String(point.id) >= String(body.offset)) && matches(point.payload, body.filter))
      .sort((a, b) => (String(a.id) < String(b.id) ? -1 : 1))
    return {
      points: found.slice(0, limit).map((point) => ({
        id: point.id,
        payload: fields === undefined ? point.payload : Object.fromEntries(fields.map((field) => [field, point.payload[field]]))
      })),
      next_page_offset: found[limit]?.id ?? null
    }
  }
  if (method === "POST" && rest === "/points/batch") {
    if (!Array.isArray(body.operations)) throw new HttpError(400, "Format error: operations")
    for (const operation of body.operations) {
      const set = isRecord(operation) ? operation.set_payload : undefined
      if (!isRecord(set) || !isRecord(set.payload) || set.filter === undefined) {
        throw new HttpError(400, "fake Qdrant: only set_payload by filter is implemented in a batch")
      }
      for (const point of collection.points.values()) {
        if (matches(point.payload, set.filter)) Object.assign(point.payload, set.payload)
      }
    }
    // One result per operation.
    return body.operations.map(() => updated(state, query))
  }
  if (method === "POST" && rest === "/points/count") {
    return { count: [...collection.points.values()].filter((point) => matches(point.payload, body.filter)).length }
  }
  throw new HttpError(404, `fake Qdrant: no route for ${method} ${path}`)
}

/** A fake Qdrant on a free loopback port, serving under `prefix` (as behind a proxy) when given. */
export const startFakeQdrant = async (options: { readonly prefix?: string } = {}): Promise<FakeQdrant> => {
  const prefix = options.prefix ?? ""
  const failures: Array<FakeQdrantFailure> = []
  const requests: Array<FakeQdrantRequest> = []
  const state: State = { collections: new Map(), raceOnCreate: false, operationId: 0 }

  const server = http.createServer((req, res) => {
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
      let body: unknown
      try {
        body = text === "" ? undefined : JSON.parse(text)
      } catch (error) {
        return answer(400, { status: { error: `Format error in JSON body: ${(error as Error).message}` } })
      }
      const request: FakeQdrantRequest = {
        method: req.method ?? "GET",
        path: url.pathname.slice(prefix.length),
        query: Object.fromEntries(url.searchParams),
        headers: req.headers,
        body
      }
      requests.push(request)
      const failure = failures.findIndex((f) => f.method === request.method && f.path.test(request.path))
      if (failure >= 0) {
        const { status, error } = failures.splice(failure, 1)[0]!
        return answer(status, { status: { error } })
      }
      try {
        answer(200, { result: route(state, request), status: "ok" })
      } catch (error) {
        // A bug in the fake answers as Qdrant's own would, rather than take the test process down.
        if (!(error instanceof HttpError)) return answer(500, { status: { error: `Service internal error: ${String(error)}` } })
        answer(error.status, { status: { error: error.error } })
      }
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()))
  const { port } = server.address() as AddressInfo

  return {
    url: `http://127.0.0.1:${port}${prefix}`,
    requests,
    collections: state.collections,
    failNext: (failure) => void failures.push(failure),
    get raceOnCreate() {
      return state.raceOnCreate
    },
    set raceOnCreate(value: boolean) {
      state.raceOnCreate = value
    },
    close: async () => {
      // Clients keep connections alive; close them so that close() returns.
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    }
  }
}
