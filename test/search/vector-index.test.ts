/**
 * The VectorIndex port's contract (services/search/vector-index.ts), written once and run against
 * every adapter this machine can reach:
 * - pgvector in an embedded PGlite of its own (`PgvectorIndex.embeddedLayer` on a fresh directory),
 * - pgvector in an SqlClient's database: a PGlite (layers/pglite.ts), and the PostgreSQL at
 *   `DATABASE_URL` in a database of the test's own when that server has the `vector` extension,
 * - Qdrant: the fake (test/support/fake-qdrant.ts), and the server at `QDRANT_URL` when set.
 *
 * Each adapter opens one store for its tests; every test works in collections of its own model
 * name. What is one adapter's own (Qdrant's payload indexes, requests on the wire) is tested with it:
 * test/search/qdrant-index.test.ts.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { QdrantClient } from "@qdrant/js-client-rest"
import { Context, Effect, Layer, Redacted, type Scope } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import pg from "pg"
import * as PgvectorIndex from "../../layers/pgvector-index.ts"
import * as Pglite from "../../layers/pglite.ts"
import * as Postgres from "../../layers/postgres.ts"
import * as QdrantIndex from "../../layers/qdrant-index.ts"
import {
  collectionName,
  type VectorFilter,
  type VectorHit,
  VectorIndex,
  VectorIndexError,
  type VectorIndexShape,
  type VectorPoint
} from "../../services/search/vector-index.ts"
import { startFakeQdrant } from "../support/fake-qdrant.ts"
import { adminDatabaseUrl, createDatabase, createDataDir, uniqueName } from "../support/services.ts"
import { at, DIMS, point, QUERY } from "../support/vector-points.ts"

// ---------------------------------------------------------------------------------------------
// The adapters

interface StoreShape {
  /**
   * An index on the adapter's store, opened as another process would open it (the embedded
   * pgvector serves one process only: there, the same index again).
   */
  readonly open: Effect.Effect<VectorIndexShape, VectorIndexError, Scope.Scope>
  /** The database of the pgvector adapters, to look at their tables. */
  readonly sql?: SqlClient.SqlClient
}

class Store extends Context.Tag("test/VectorIndexStore")<Store, StoreShape>() {}

interface Adapter {
  readonly name: string
  readonly kind: string
  readonly store: Layer.Layer<Store, unknown>
}

/** A temporary directory for the store's lifetime. */
const tempDir = Effect.acquireRelease(
  Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "mailroom-vectors-"))),
  (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
)

/** Indexes made by `PgvectorIndex.layer` over the SqlClient of `database`, which the store keeps open. */
const overSqlClient = (database: Layer.Layer<SqlClient.SqlClient, unknown>) =>
  Layer.scoped(
    Store,
    Effect.gen(function*() {
      const context = yield* Layer.build(database)
      const open = Layer.build(PgvectorIndex.layer).pipe(
        Effect.provide(context),
        Effect.map((built) => Context.get(built, VectorIndex))
      )
      return { open, sql: Context.get(context, SqlClient.SqlClient) }
    })
  )

const embeddedPgvector: Adapter = {
  name: "pgvector, embedded",
  kind: "pgvector (embedded)",
  store: Layer.scoped(
    Store,
    Effect.gen(function*() {
      const dir = yield* tempDir
      // Where global-setup made one (embedded mode), start from its initialised PGlite, as
      // createDataDir does: initdb takes seconds. The other mode opens a directory with nothing in it.
      const template = process.env.MAILROOM_TEST_PGLITE_TEMPLATE
      if (template && fs.existsSync(template)) fs.cpSync(template, path.join(dir, "vectors", "pglite"), { recursive: true })
      const index = yield* Layer.build(PgvectorIndex.embeddedLayer(dir)).pipe(Effect.map(Context.get(VectorIndex)))
      return { open: Effect.succeed(index) }
    })
  )
}

const pgliteSqlPgvector: Adapter = {
  name: "pgvector, in a PGlite SqlClient",
  kind: "pgvector",
  store: overSqlClient(Layer.unwrapScoped(Effect.gen(function*() {
    const dataDir = yield* Effect.acquireRelease(Effect.sync(createDataDir), (dir) => Effect.sync(dir.remove))
    return Pglite.layer({ dataDir: dataDir.dir })
  })))
}

const postgresPgvector = (adminUrl: string): Adapter => ({
  name: "pgvector, in PostgreSQL at DATABASE_URL",
  kind: "pgvector",
  store: overSqlClient(Layer.unwrapScoped(Effect.gen(function*() {
    const database = yield* Effect.acquireRelease(
      Effect.promise(() => createDatabase(adminUrl)),
      (database) => Effect.promise(() => database.drop())
    )
    return Postgres.layer({ url: Redacted.make(database.url), maxConnections: 4 })
  })))
})

const fakeQdrant: Adapter = {
  name: "Qdrant, the fake",
  kind: "qdrant",
  store: Layer.scoped(
    Store,
    Effect.gen(function*() {
      const fake = yield* Effect.acquireRelease(Effect.promise(() => startFakeQdrant()), (fake) => Effect.promise(() => fake.close()))
      return { open: QdrantIndex.make({ url: fake.url }) }
    })
  )
}

/** Every model of this run starts with RUN: its collections on a shared Qdrant are found by it afterwards. */
const RUN = uniqueName("vit")
let models = 0
const newModel = () => `${RUN}-${++models}`

const realQdrant = (url: string, apiKey: Redacted.Redacted<string> | undefined): Adapter => ({
  name: "Qdrant at QDRANT_URL",
  kind: "qdrant",
  store: Layer.scoped(
    Store,
    Effect.gen(function*() {
      const prefix = collectionName(RUN, 1).slice(0, -1)
      yield* Effect.addFinalizer(() =>
        Effect.promise(async () => {
          const target = new URL(url)
          const pathPrefix = target.pathname.replace(/\/+$/, "")
          const client = new QdrantClient({
            url: target.origin,
            port: null,
            ...(pathPrefix === "" ? {} : { prefix: pathPrefix }),
            ...(apiKey === undefined ? {} : { apiKey: Redacted.value(apiKey) }),
            checkCompatibility: false
          })
          const { collections } = await client.getCollections()
          for (const { name } of collections) {
            if (name.startsWith(prefix)) await client.deleteCollection(name)
          }
        }))
      return { open: QdrantIndex.make({ url, apiKey }) }
    })
  )
})

/** Whether the PostgreSQL server at `url` can create the `vector` extension. */
const offersPgvector = async (url: string) => {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    return (await client.query("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")).rowCount! > 0
  } finally {
    await client.end()
  }
}

const adapters: ReadonlyArray<Adapter> = [
  embeddedPgvector,
  pgliteSqlPgvector,
  ...(adminDatabaseUrl !== undefined && (await offersPgvector(adminDatabaseUrl)) ? [postgresPgvector(adminDatabaseUrl)] : []),
  fakeQdrant,
  ...(process.env.QDRANT_URL ? [realQdrant(process.env.QDRANT_URL, process.env.QDRANT_API_KEY ? Redacted.make(process.env.QDRANT_API_KEY) : undefined)] : [])
]

// ---------------------------------------------------------------------------------------------
// Points

/** Deterministic numbers in [-1, 1) (mulberry32), so a failing case can be run again. */
const random = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 2 ** 31 - 1
}

const unit = (vector: ReadonlyArray<number>) => {
  const norm = Math.sqrt(vector.reduce((sum, x) => sum + x * x, 0))
  return vector.map((x) => x / norm)
}

const randomUnit = (dimensions: number, next: () => number) => unit(Array.from({ length: dimensions }, next))

/** A unit vector in `query`'s space at cosine similarity `similarity` to it, in a random direction otherwise. */
const towards = (query: ReadonlyArray<number>, similarity: number, next: () => number): Float32Array => {
  const noise = randomUnit(query.length, next)
  const along = noise.reduce((sum, x, i) => sum + x * query[i]!, 0)
  const orthogonal = unit(noise.map((x, i) => x - along * query[i]!))
  return Float32Array.from(query.map((q, i) => similarity * q + Math.sqrt(1 - similarity ** 2) * orthogonal[i]!))
}

const cosine = (a: ArrayLike<number>, b: ArrayLike<number>) => {
  let dot = 0
  let na = 0
  let nb = 0
  for (let i = 0; i < a.length; i++) {
    dot += a[i]! * b[i]!
    na += a[i]! ** 2
    nb += b[i]! ** 2
  }
  return dot / Math.sqrt(na * nb)
}

const emails = (hits: ReadonlyArray<VectorHit>) => hits.map((hit) => hit.emailId)

const expectHits = (hits: ReadonlyArray<VectorHit>, expected: ReadonlyArray<readonly [string, number]>, digits = 4) => {
  expect(emails(hits)).toEqual(expected.map(([emailId]) => emailId))
  hits.forEach((hit, i) => expect(hit.similarity).toBeCloseTo(expected[i]![1], digits))
}

// ---------------------------------------------------------------------------------------------
// The contract

const contract = (adapter: Adapter) =>
  layer(adapter.store, { timeout: "90 seconds", excludeTestServices: true })(adapter.name, (it) => {
    /** A fresh model: collections no other test touches. */
    const setup = Effect.gen(function*() {
      const store = yield* Store
      return { store, index: yield* store.open, model: newModel() }
    })

    it.scoped("answers ping and names its kind", () =>
      Effect.gen(function*() {
        const { index } = yield* setup
        expect(index.kind).toBe(adapter.kind)
        yield* index.ping
      }))

    it.scoped("creates a model's collection once, also when two processes ask at once, and keeps it", () =>
      Effect.gen(function*() {
        const { index, model, store } = yield* setup
        const other = yield* store.open
        const [mine, theirs] = yield* Effect.all([index.collection(model, DIMS), other.collection(model, DIMS)], { concurrency: 2 })
        expect([mine.model, mine.dimensions]).toEqual([model, DIMS])
        yield* mine.upsert([point("email-1", 0, 0.5)])
        expect(yield* theirs.count()).toBe(1)
        // Asking again, here or from a process started later, opens what is there.
        const again = yield* index.collection(model, DIMS)
        const later = yield* (yield* store.open).collection(model, DIMS)
        expect([yield* again.count(), yield* later.count()]).toEqual([1, 1])
        // Another dimension is another collection: vectors of different sizes are never compared.
        const wider = yield* index.collection(model, DIMS * 2)
        expect(yield* wider.count()).toBe(0)
      }))

    it.scoped("refuses a vector or a query of the wrong size, naming the collection, and stores nothing of that upsert", () =>
      Effect.gen(function*() {
        const { index, model } = yield* setup
        const collection = yield* index.collection(model, DIMS)
        const upserted = yield* Effect.flip(collection.upsert([point("email-1", 0, 0.5), point("email-2", 0, 0.5, { vector: new Float32Array(3).fill(0.5) })]))
        expect(upserted).toBeInstanceOf(VectorIndexError)
        expect(upserted.message).toContain(collectionName(model, DIMS))
        expect(yield* collection.count()).toBe(0)
        const searched = yield* Effect.flip(collection.search(Float32Array.from([1, 0, 0]), { namespace: "ns-a" }, 10))
        expect(searched).toBeInstanceOf(VectorIndexError)
      }))

    it.scoped("replaces a chunk upserted again, vector and payload", () =>
      Effect.gen(function*() {
        const { index, model } = yield* setup
        const collection = yield* index.collection(model, DIMS)
        yield* collection.upsert([point("email-1", 0, 0.2), point("email-1", 1, 0.1)])
        yield* collection.upsert([point("email-1", 0, 0.8, { mailboxId: "mb-2" })])
        expect(yield* collection.count()).toBe(2)
        expectHits(yield* collection.search(QUERY, { namespace: "ns-a", mailboxIds: ["mb-2"] }, 10), [["email-1", 0.8]])
        // Chunk 1 was not replaced: it is still in mb-1.
        expectHits(yield* collection.search(QUERY, { namespace: "ns-a", mailboxIds: ["mb-1"] }, 10), [["email-1", 0.1]])
        // Moved to another namespace (an account's mail moved), it is found there only.
        yield* collection.upsert([point("email-1", 1, 0.1, { namespace: "ns-b" })])
        expectHits(yield* collection.search(QUERY, { namespace: "ns-b" }, 10), [["email-1", 0.1]])
        expectHits(yield* collection.search(QUERY, { namespace: "ns-a" }, 10), [["email-1", 0.8]])
      }))

    it.scoped("answers each email once, with the similarity of its best chunk, best first", () =>
      Effect.gen(function*() {
        const { index, model } = yield* setup
        const collection = yield* index.collection(model, DIMS)
        yield* collection.upsert([
          point("email-1", 0, 0.3),
          point("email-1", 1, 0.9),
          point("email-2", 0, 0.5),
          point("email-3", 0, 0.7),
          point("email-3", 1, -0.2)
        ])
        for (const exact of [false, true]) {
          expectHits(yield* collection.search(QUERY, { namespace: "ns-a" }, 10, { exact }), [["email-1", 0.9], ["email-3", 0.7], ["email-2", 0.5]])
          expectHits(yield* collection.search(QUERY, { namespace: "ns-a" }, 2, { exact }), [["email-1", 0.9], ["email-3", 0.7]])
        }
        expect(yield* collection.search(QUERY, { namespace: "ns-a" }, 0)).toEqual([])
      }))

    it.scoped("answers `limit` emails when the nearest chunks all belong to a long email", () =>
      Effect.gen(function*() {
        const { index, model } = yield* setup
        const collection = yield* index.collection(model, DIMS)
        // A long email is cut into up to 16 chunks (services/search/documents.ts), all on its topic.
        yield* collection.upsert([
          ...Array.from({ length: 16 }, (_, chunk) => point("email-long", chunk, 0.99 - chunk / 1000)),
          point("email-2", 0, 0.6),
          point("email-3", 0, 0.5)
        ])
        for (const exact of [false, true]) {
          expectHits(yield* collection.search(QUERY, { namespace: "ns-a" }, 2, { exact }), [["email-long", 0.99], ["email-2", 0.6]])
          expectHits(yield* collection.search(QUERY, { namespace: "ns-a" }, 3, { exact }), [["email-long", 0.99], ["email-2", 0.6], ["email-3", 0.5]])
        }
      }))

    it.scoped("searches only the namespace, and only the given mailboxes", () =>
      Effect.gen(function*() {
        const { index, model } = yield* setup
        const collection = yield* index.collection(model, DIMS)
        yield* collection.upsert([
          point("email-1", 0, 0.9, { mailboxId: "mb-1" }),
          point("email-2", 0, 0.8, { mailboxId: "mb-2" }),
          point("email-3", 0, 0.95, { namespace: "ns-b", mailboxId: "mb-3" })
        ])
        for (const exact of [false, true]) {
          const search = (namespace: string, mailboxIds?: ReadonlyArray<string>) =>
            collection.search(QUERY, { namespace, mailboxIds }, 10, { exact }).pipe(Effect.map(emails))
          expect(yield* search("ns-a")).toEqual(["email-1", "email-2"])
          expect(yield* search("ns-a", ["mb-2"])).toEqual(["email-2"])
          expect(yield* search("ns-a", ["mb-2", "mb-1"])).toEqual(["email-1", "email-2"])
          // Another namespace's mailbox is not reached by naming it.
          expect(yield* search("ns-a", ["mb-3"])).toEqual([])
          // A domain without mailboxes: nothing, not everything.
          expect(yield* search("ns-a", [])).toEqual([])
          expect(yield* search("ns-b")).toEqual(["email-3"])
          expect(yield* search("ns-c")).toEqual([])
        }
      }))

    it.scoped("narrows to a sender's key and a span of arrival, letting through points stored without them", () =>
      Effect.gen(function*() {
        const { index, model } = yield* setup
        const collection = yield* index.collection(model, DIMS)
        const day = (d: number) => new Date(Date.UTC(2026, 11, d))
        yield* collection.upsert([
          point("email-1", 0, 0.9, { senderKeys: ["nora@example.org", "@example.org"], receivedAt: day(1) }),
          point("email-1", 1, 0.2, { senderKeys: ["nora@example.org", "@example.org"], receivedAt: day(1) }),
          point("email-2", 0, 0.8, { senderKeys: ["ann@eu.example.org", "@eu.example.org", "*.example.org"], receivedAt: day(3) }),
          point("email-3", 0, 0.7, { senderKeys: [], receivedAt: day(5) }),
          // Stored before sender and arrival were kept: neither is known.
          point("email-4", 0, 0.6),
          point("email-5", 0, 0.95, { namespace: "ns-b", senderKeys: ["nora@example.org"], receivedAt: day(1) })
        ])
        for (const exact of [false, true]) {
          const search = (narrowing: Partial<VectorFilter>) =>
            collection.search(QUERY, { namespace: "ns-a", ...narrowing }, 10, { exact }).pipe(Effect.map(emails))
          expect(yield* search({})).toEqual(["email-1", "email-2", "email-3", "email-4"])
          expect(yield* search({ senderKey: "nora@example.org" })).toEqual(["email-1", "email-4"])
          expect(yield* search({ senderKey: "*.example.org" })).toEqual(["email-2", "email-4"])
          expect(yield* search({ senderKey: "@example.net" })).toEqual(["email-4"])
          // At or after its start, before its end.
          expect(yield* search({ received: { after: day(3) } })).toEqual(["email-2", "email-3", "email-4"])
          expect(yield* search({ received: { before: day(3) } })).toEqual(["email-1", "email-4"])
          expect(yield* search({ received: { after: day(2), before: day(5) } })).toEqual(["email-2", "email-4"])
          expect(yield* search({ senderKey: "@example.org", received: { after: day(2) } })).toEqual(["email-4"])
          expect(yield* search({ mailboxIds: ["mb-1"], senderKey: "nora@example.org", received: { before: day(2) } })).toEqual(["email-1", "email-4"])
        }
        // Stored again with them, the point is judged by them.
        yield* collection.upsert([point("email-4", 0, 0.6, { senderKeys: ["bob@example.net", "@example.net"], receivedAt: day(9) })])
        expect(emails(yield* collection.search(QUERY, { namespace: "ns-a", senderKey: "nora@example.org" }, 10))).toEqual(["email-1"])
        expect(emails(yield* collection.search(QUERY, { namespace: "ns-a", senderKey: "@example.net" }, 10))).toEqual(["email-4"])
      }))

    it.scoped("walks the emails whose points lack sender and arrival, a page at a time, and describes them", () =>
      Effect.gen(function*() {
        const { index, model } = yield* setup
        const collection = yield* index.collection(model, DIMS)
        const old = Array.from({ length: 7 }, (_, i) => `email-old-${i}`)
        yield* collection.upsert([
          ...old.flatMap((emailId, i) => (i % 2 === 0 ? [0, 1] : [0]).map((chunk) => point(emailId, chunk, 0.5 + i / 100))),
          point("email-new", 0, 0.9, { senderKeys: ["nora@example.org"], receivedAt: new Date("2026-12-01T00:00:00Z") }),
          point("email-other", 0, 0.9, { namespace: "ns-b", senderKeys: [], receivedAt: new Date("2026-12-01T00:00:00Z") })
        ])
        const walk = Effect.gen(function*() {
          const seen = new Set<string>()
          let from: string | undefined
          let pages = 0
          do {
            const page = yield* collection.undescribed(from, 3)
            page.emailIds.forEach((id) => seen.add(id))
            from = page.next
            pages++
          } while (from !== undefined && pages < 20)
          return { seen: [...seen].sort(), pages }
        })
        const first = yield* walk
        expect(first.seen).toEqual(old)
        expect(first.pages).toBeGreaterThan(1)
        yield* collection.describe(old.map((emailId, i) => ({
          emailId,
          senderKeys: i < 2 ? ["nora@example.org", "@example.org"] : ["bob@example.net"],
          receivedAt: new Date(`2026-11-0${i + 1}T00:00:00Z`)
        })))
        expect(yield* walk).toEqual({ seen: [], pages: 1 })
        // Every chunk judged by what it was given; the vectors as they were.
        const found = yield* collection.search(QUERY, { namespace: "ns-a", senderKey: "nora@example.org" }, 10)
        expectHits(found, [["email-new", 0.9], ["email-old-1", 0.51], ["email-old-0", 0.5]])
        expect(emails(yield* collection.search(QUERY, { namespace: "ns-a", received: { after: new Date("2026-11-06T00:00:00Z") } }, 10)))
          .toEqual(["email-new", "email-old-6", "email-old-5"])
        yield* collection.describe([])
      }))

    it.scoped("pgvector: a collection's table of before gains sender and arrival, its rows let through a narrowed search", () =>
      Effect.gen(function*() {
        const { index, model, store } = yield* setup
        if (store.sql === undefined) return
        const sql = store.sql
        const table = collectionName(model, DIMS)
        yield* sql`CREATE EXTENSION IF NOT EXISTS vector`
        // The table as versions before 2026-12 made it, with one of their rows.
        yield* sql`CREATE TABLE ${sql(table)} (email_id text NOT NULL, chunk integer NOT NULL, namespace text NOT NULL,
                     mailbox_id text NOT NULL, domain text NOT NULL, date timestamptz NOT NULL,
                     embedding vector(${sql.literal(String(DIMS))}) NOT NULL, PRIMARY KEY (email_id, chunk))`
        yield* sql`INSERT INTO ${sql(table)} VALUES ('email-old', 0, 'ns-a', 'mb-1', 'a.example', now(), ${`[${Array.from(at(0.5)).join(",")}]`})`
        const collection = yield* index.collection(model, DIMS)
        yield* collection.upsert([point("email-new", 0, 0.9, { senderKeys: ["bob@example.net"], receivedAt: new Date("2026-12-01T00:00:00Z") })])
        const search = (filter: Partial<VectorFilter>) => collection.search(QUERY, { namespace: "ns-a", ...filter }, 10).pipe(Effect.map(emails))
        expect(yield* search({ senderKey: "bob@example.net" })).toEqual(["email-new", "email-old"])
        expect(yield* search({ senderKey: "ann@example.net" })).toEqual(["email-old"])
        expect(yield* search({ received: { after: new Date("2026-12-02T00:00:00Z") } })).toEqual(["email-old"])
        const stored = yield* sql<{ emailId: string; senderKeys: ReadonlyArray<string> | null }>`
          SELECT email_id, sender_keys FROM ${sql(table)} ORDER BY email_id`
        expect(stored).toEqual([{ emailId: "email-new", senderKeys: ["bob@example.net"] }, { emailId: "email-old", senderKeys: null }])
      }))

    it.scoped("answers the true nearest emails of a namespace, exact and approximate alike", () =>
      Effect.gen(function*() {
        const { index, model } = yield* setup
        const dimensions = 32
        const next = random(42)
        const query = randomUnit(dimensions, next)
        const collection = yield* index.collection(model, dimensions)
        // 80 emails of two chunks each, in two namespaces, at similarities all over -1..1.
        const points = Array.from({ length: 80 }, (_, i) =>
          [0, 1].map((chunk): VectorPoint => ({
            ...point(`email-${i}`, chunk, 0, { namespace: i % 4 === 0 ? "ns-b" : "ns-a", mailboxId: `mb-${i % 3}` }),
            vector: towards(query, next(), next)
          }))).flat()
        yield* collection.upsert(points)
        const truth = (filter: (p: VectorPoint) => boolean, limit: number) => {
          const best = new Map<string, number>()
          for (const p of points.filter(filter)) best.set(p.emailId, Math.max(best.get(p.emailId) ?? -Infinity, cosine(p.vector, query)))
          return [...best].sort((a, b) => b[1] - a[1]).slice(0, limit)
        }
        const vector = Float32Array.from(query)
        for (const exact of [false, true]) {
          expectHits(yield* collection.search(vector, { namespace: "ns-a" }, 10, { exact }), truth((p) => p.namespace === "ns-a", 10))
          expectHits(yield* collection.search(vector, { namespace: "ns-b" }, 100, { exact }), truth((p) => p.namespace === "ns-b", 100))
          expectHits(
            yield* collection.search(vector, { namespace: "ns-a", mailboxIds: ["mb-1"] }, 5, { exact }),
            truth((p) => p.namespace === "ns-a" && p.mailboxId === "mb-1", 5)
          )
        }
      }))

    it.scoped("answers a small namespace its `limit` emails when a large one lies nearer the query", () =>
      Effect.gen(function*() {
        const { index, model } = yield* setup
        const dimensions = 16
        const next = random(7)
        const query = randomUnit(dimensions, next)
        const collection = yield* index.collection(model, dimensions)
        // 600 emails of another account nearer the query than any of this one's 30: a search that
        // filtered only the index's first candidates (its ef_search) would find none of them.
        const near = Array.from({ length: 600 }, (_, i): VectorPoint => ({
          ...point(`theirs-${i}`, 0, 0, { namespace: "ns-large" }),
          vector: towards(query, 0.9 + next() * 0.09, next)
        }))
        const far = Array.from({ length: 30 }, (_, i): VectorPoint => ({
          ...point(`mine-${i}`, 0, 0, { namespace: "ns-small" }),
          vector: towards(query, 0.2 + next() * 0.5, next)
        }))
        yield* collection.upsert([...near, ...far])
        const truth = [...far].sort((a, b) => cosine(b.vector, query) - cosine(a.vector, query)).slice(0, 10)
          .map((p) => [p.emailId, cosine(p.vector, query)] as const)
        for (const exact of [false, true]) {
          expectHits(yield* collection.search(Float32Array.from(query), { namespace: "ns-small" }, 10, { exact }), truth)
        }
      }))

    it.scoped("removes every chunk of the given emails, and nothing else", () =>
      Effect.gen(function*() {
        const { index, model } = yield* setup
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

    it.scoped("forgets a namespace in every model's collection, and nothing of another", () =>
      Effect.gen(function*() {
        const { index, model } = yield* setup
        // Namespaces of this test's own: forgetting reaches every collection of the store.
        const gone = uniqueName("ns-gone")
        const kept = uniqueName("ns-kept")
        const collections = [yield* index.collection(model, DIMS), yield* index.collection(newModel(), DIMS * 2)]
        for (const [i, collection] of collections.entries()) {
          const wide = (p: VectorPoint) => (i === 0 ? p : { ...p, vector: Float32Array.from([...p.vector, 0, 0, 0, 0]) })
          yield* collection.upsert([
            wide(point(`${gone}-1`, 0, 0.9, { namespace: gone })),
            wide(point(`${gone}-1`, 1, 0.8, { namespace: gone })),
            wide(point(`${kept}-1`, 0, 0.7, { namespace: kept }))
          ])
        }
        yield* index.forgetNamespace(gone)
        for (const collection of collections) {
          expect([yield* collection.count(gone), yield* collection.count(kept)]).toEqual([0, 1])
        }
        // Nothing to forget is no failure.
        yield* index.forgetNamespace(uniqueName("ns-none"))
      }))

    it.scoped("counts the points of a namespace, or all of them", () =>
      Effect.gen(function*() {
        const { index, model } = yield* setup
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

    it.scoped("stores a large upsert completely: every point counted and searchable on return", () =>
      Effect.gen(function*() {
        const { index, model } = yield* setup
        const collection = yield* index.collection(model, DIMS)
        const points = Array.from({ length: 300 }, (_, i) => [
          point(`email-${i}`, 0, -0.5 + i / 1000, { namespace: i % 3 === 0 ? "ns-b" : "ns-a" }),
          point(`email-${i}`, 1, -0.6 + i / 1000, { namespace: i % 3 === 0 ? "ns-b" : "ns-a" })
        ]).flat()
        yield* collection.upsert(points)
        expect(yield* collection.count()).toBe(600)
        expect(yield* collection.count("ns-b")).toBe(200)
        for (const exact of [false, true]) {
          const hits = yield* collection.search(QUERY, { namespace: "ns-a" }, 5, { exact })
          expect(emails(hits)).toEqual(["email-299", "email-298", "email-296", "email-295", "email-293"])
        }
      }))

    it.scoped("holds vectors of 2,500 dimensions (3,072 is a common embedding size)", () =>
      Effect.gen(function*() {
        const { index, model, store } = yield* setup
        const dimensions = 2_500
        const next = random(7)
        const query = randomUnit(dimensions, next)
        const collection = yield* index.collection(model, dimensions)
        const near = (emailId: string, chunk: number, similarity: number): VectorPoint => ({
          ...point(emailId, chunk, 0),
          vector: towards(query, similarity, next)
        })
        yield* collection.upsert([near("email-1", 0, 0.2), near("email-1", 1, 0.85), near("email-2", 0, 0.6), near("email-3", 0, -0.3)])
        const vector = Float32Array.from(query)
        for (const exact of [false, true]) {
          // pgvector stores these as halfvec: similarities to about three digits.
          expectHits(yield* collection.search(vector, { namespace: "ns-a" }, 10, { exact }), [["email-1", 0.85], ["email-2", 0.6], ["email-3", -0.3]], 2)
        }
        yield* collection.remove(["email-1"])
        expect(yield* collection.count()).toBe(2)

        if (store.sql === undefined) return
        // pgvector: the table `collectionName` names, `vector` up to 2,000 dimensions and `halfvec`
        // above (HNSW indexes no wider `vector`), each with its cosine HNSW index.
        const sql = store.sql
        const column = (table: string) =>
          sql<{ type: string }>`SELECT format_type(atttypid, atttypmod) AS type FROM pg_attribute
                                WHERE attrelid = ${table}::regclass AND attname = 'embedding'`.pipe(Effect.map((rows) => rows[0]?.type))
        const indexes = (table: string) =>
          sql<{ indexdef: string }>`SELECT indexdef FROM pg_indexes WHERE tablename = ${table}`.pipe(Effect.map((rows) => rows.map((row) => row.indexdef).join("\n")))
        yield* index.collection(model, DIMS)
        expect(yield* column(collectionName(model, DIMS))).toBe(`vector(${DIMS})`)
        expect(yield* indexes(collectionName(model, DIMS))).toMatch(/USING hnsw \(embedding vector_cosine_ops\)/)
        expect(yield* column(collectionName(model, dimensions))).toBe(`halfvec(${dimensions})`)
        expect(yield* indexes(collectionName(model, dimensions))).toMatch(/USING hnsw \(embedding halfvec_cosine_ops\)/)
      }))
  })

for (const adapter of adapters) contract(adapter)
