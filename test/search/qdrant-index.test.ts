/**
 * What of the Qdrant VectorIndex (layers/qdrant-index.ts) is Qdrant's own: the collection's schema
 * and payload indexes, repairing a collection left half made, a collection of another size, and one
 * deleted behind the adapter's back, against the fake Qdrant (test/support/fake-qdrant.ts) and, with
 * `QDRANT_URL` (and `QDRANT_API_KEY` when needed) set, that server too, under model names of the
 * run's own whose collections are deleted afterwards. Then what only the wire shows, against the
 * fake: batches, `wait`, search params, retries, the API key, a path prefix.
 *
 * What every VectorIndex does (search, filters, upsert, remove, count) is test/search/vector-index.test.ts.
 */
import { describe, expect, it } from "@effect/vitest"
import { QdrantClient } from "@qdrant/js-client-rest"
import { Effect, Exit, Layer, Redacted, type Scope } from "effect"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import * as QdrantIndex from "../../layers/qdrant-index.ts"
import { Embedder, readsAnyText } from "../../services/search/embedder.ts"
import { Vectors } from "../../services/search/vectors.ts"
import {
  collectionName,
  type VectorCollection,
  VectorIndex,
  VectorIndexError,
  type VectorIndexShape
} from "../../services/search/vector-index.ts"
import { type FakeQdrant, type FakeQdrantRequest, startFakeQdrant } from "../support/fake-qdrant.ts"
import { uniqueName } from "../support/services.ts"
import { at, DIMS, point, QUERY } from "../support/vector-points.ts"

/** A fake Qdrant for the test's scope. */
const fakeQdrant = (prefix?: string): Effect.Effect<FakeQdrant, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.promise(() => startFakeQdrant(prefix === undefined ? {} : { prefix })),
    (fake) => Effect.promise(() => fake.close())
  )

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
  target: Effect.map(fakeQdrant(), (fake) => ({ url: fake.url, fake }))
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

// ---------------------------------------------------------------------------------------------
// Qdrant's own, on every Qdrant

const specifics = (backend: Backend) =>
  describe(backend.name, () => {
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
          email_id: "keyword",
          sender_keys: "keyword",
          received_at: "datetime"
        })
        expect(schema.namespace?.params).toMatchObject({ is_tenant: true })
      }))

    it.scopedLive("adds the payload indexes missing from an existing collection", () =>
      Effect.gen(function*() {
        const { client, index, model } = yield* setup(backend)
        const name = collectionName(model, DIMS)
        // As left by a process that died between creating the collection and its indexes.
        yield* Effect.promise(() => client.createCollection(name, { vectors: { size: DIMS, distance: "Cosine" } }))
        yield* index.collection(model, DIMS)
        const info = yield* Effect.promise(() => client.getCollection(name))
        expect(Object.keys(info.payload_schema).sort()).toEqual(["date", "domain", "email_id", "mailbox_id", "namespace", "received_at", "sender_keys"])
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

    it.scopedLive("the process's collection (Vectors) is opened again after a failure: a deleted one is created by the next write", () =>
      Effect.gen(function*() {
        const { client, index, model } = yield* setup(backend)
        const embedder = { model, dimensions: DIMS, maxInputChars: 1000, reads: readsAnyText, embed: () => Effect.succeed([]) }
        const vectors = yield* Vectors.pipe(
          Effect.provide(Vectors.Default.pipe(Layer.provide(Layer.succeed(Embedder, embedder)), Layer.provide(Layer.succeed(VectorIndex, index))))
        )
        yield* Effect.flatMap(vectors.collection, (c) => c.upsert([point("email-1", 0, 0.5)]))
        yield* Effect.promise(() => client.deleteCollection(collectionName(model, DIMS)))
        // The write that meets the deleted collection fails (the indexer retries it); the next one creates it again.
        yield* Effect.flip(Effect.flatMap(vectors.collection, (c) => c.upsert([point("email-2", 0, 0.5)])))
        yield* Effect.flatMap(vectors.collection, (c) => c.upsert([point("email-2", 0, 0.5)]))
        expect(yield* Effect.flatMap(vectors.collection, (c) => c.count())).toBe(1)
      }))

    it.scopedLive("names the email whose vector has the wrong size", () =>
      Effect.gen(function*() {
        const { index, model } = yield* setup(backend)
        const collection = yield* index.collection(model, DIMS)
        const error = yield* Effect.flip(collection.upsert([point("email-1", 0, 0.5), point("email-2", 3, 0.5, { vector: new Float32Array(3) })]))
        expect(error.message).toContain("email-2 chunk 3 has 3 dimensions")
      }))
  })

specifics(fakeBackend)
describe.skipIf(realUrl === undefined)("real server", () => {
  if (realUrl !== undefined) specifics(realBackend(realUrl))
})

// ---------------------------------------------------------------------------------------------
// What only the wire shows

const requestsTo = (fake: FakeQdrant, method: string, path: RegExp) =>
  fake.requests.filter((request) => request.method === method && path.test(request.path))

const bodyOf = (request: FakeQdrantRequest | undefined): Record<string, unknown> => {
  const body = request?.body
  return typeof body === "object" && body !== null && !Array.isArray(body) ? (body as Record<string, unknown>) : {}
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
      expect(indexes.map((request) => request.path)).toEqual(Array(7).fill(`/collections/${name}/index`))
      expect(indexes.map((request) => request.query.wait)).toEqual(Array(7).fill("true"))
      expect(Object.fromEntries(indexes.map((request) => [bodyOf(request).field_name, bodyOf(request).field_schema]))).toEqual({
        namespace: { type: "keyword", is_tenant: true },
        mailbox_id: { type: "keyword" },
        domain: { type: "keyword" },
        date: { type: "datetime" },
        email_id: { type: "keyword" },
        sender_keys: { type: "keyword" },
        received_at: { type: "datetime" }
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
      expect(fake.collections.get(collectionName(model, DIMS))?.payloadSchema.size).toBe(7)
      yield* collection.upsert([point("email-1", 0, 0.5)])
      expect(yield* collection.count()).toBe(1)
    }))

  it.scopedLive("keeps a deployment's collections apart under its prefix (QDRANT_PREFIX): named with it, and forgetting an account touches its own only", () =>
    Effect.gen(function*() {
      const { fake, index, model, target } = yield* fakeSetup
      const staging = yield* VectorIndex.pipe(Effect.provide(QdrantIndex.layer({ url: target.url, apiKey: target.apiKey, prefix: "staging_" })))
      const [ours, theirs] = [yield* index.collection(model, DIMS), yield* staging.collection(model, DIMS)]
      expect([...fake.collections.keys()]).toEqual(expect.arrayContaining([collectionName(model, DIMS), `staging_${collectionName(model, DIMS)}`]))
      yield* ours.upsert([point("email-1", 0, 0.5)])
      yield* theirs.upsert([point("email-1", 0, 0.5)])
      // The same account (namespace) in both deployments: each forgets its own points only.
      yield* index.forgetNamespace("ns-a")
      expect([yield* ours.count("ns-a"), yield* theirs.count("ns-a")]).toEqual([0, 1])
      yield* ours.upsert([point("email-1", 0, 0.5)])
      yield* staging.forgetNamespace("ns-a")
      expect([yield* ours.count("ns-a"), yield* theirs.count("ns-a")]).toEqual([1, 0])
    }))

  it.scopedLive("upserts in batches of at most 256, waiting, with the payload and derived UUIDs", () =>
    Effect.gen(function*() {
      const { fake, index, model } = yield* fakeSetup
      const collection = yield* index.collection(model, DIMS)
      yield* collection.upsert(Array.from({ length: 600 }, (_, i) =>
        point(`email-${i >> 1}`, i % 2, 0.5, i === 0 ? { senderKeys: ["nora@example.org", "@example.org"], receivedAt: new Date("2026-12-01T09:00:00Z") } : {})))
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
          date: "2025-01-02T03:04:05.000Z",
          sender_keys: ["nora@example.org", "@example.org"],
          received_at: "2026-12-01T09:00:00.000Z"
        }
      })
      // A point without them (the contract's own) carries neither.
      expect(Object.keys(((bodyOf(upserts[0]).points as Array<Record<string, unknown>>)[1]!).payload as object)).not.toContain("sender_keys")
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
      yield* collection.search(QUERY, {
        namespace: "ns-a",
        senderKey: "*.example.org",
        received: { after: new Date("2026-12-01T00:00:00Z"), before: new Date("2026-12-02T00:00:00Z") }
      }, 10)
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
      // Sender and arrival: met, or the point was stored before they were kept (it has no arrival).
      expect(searches[3]?.filter).toEqual({
        must: [
          { key: "namespace", match: { value: "ns-a" } },
          {
            should: [
              { is_empty: { key: "received_at" } },
              {
                must: [
                  { key: "sender_keys", match: { value: "*.example.org" } },
                  { key: "received_at", range: { gte: "2026-12-01T00:00:00.000Z", lt: "2026-12-02T00:00:00.000Z" } }
                ]
              }
            ]
          }
        ]
      })
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
      const fake = yield* fakeQdrant()
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
      const fake = yield* fakeQdrant("/qdrant")
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
