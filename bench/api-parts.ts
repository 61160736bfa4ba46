/**
 * `npm run bench:api-parts`: what the parts of an authenticated API request cost this process's CPU,
 * measured in process (no HTTP, no load generator, nothing else on the cores), beside the floor of a
 * statement measured in the same run (issue 19). `bench:api` says how fast the whole server is; on a
 * 2-core machine its figures move by ±15% from run to run, too much to weigh one part of a request.
 * This one says where a request's CPU goes. On PostgreSQL (a throwaway database on BENCH_DATABASE_URL,
 * default postgres://postgres@127.0.0.1:5432/test), 10 calls in flight at once, as bench:api's 10
 * connections:
 *
 *   (1) bare pg      a two-row SELECT of the key table, prepared, through a `pg` pool: the floor
 *   (2) SqlClient    the same SELECT through the SqlClient every service uses (@effect/sql-pg over
 *                    layers/postgres.ts)
 *   (3) key list     ApiKeys.list, the statement and rows of `GET /v1/api-keys?limit=2`
 *   (4) authenticate Authenticator.authenticate with a known API key: its principal from the cache and a
 *                    request from its lease (a lease statement every 2% of the plan's limit)
 *
 * Each part runs BENCH_CALLS (20,000) calls a round, the parts taking turns, BENCH_ROUNDS (5) rounds after
 * a warm-up round; it prints the median CPU per call (user + system, every thread) and its ratio to (1).
 */
import { SqlClient } from "@effect/sql"
import { Effect, Layer, Redacted } from "effect"
import pg from "pg"
import * as MemoryBus from "../layers/memory-bus.ts"
import * as Postgres from "../layers/postgres.ts"
import { Authenticator } from "../services/accounts/authenticator.ts"
import { Principals } from "../services/accounts/principals.ts"
import { AccountSettings } from "../services/accounts/settings.ts"
import { DependencyHealth } from "../services/health/dependency-health.ts"
import { ApiKeys } from "../services/keys/api-keys.ts"
import { migrate } from "../src/database.ts"
import { createDatabase, testSecret } from "../test/support/services.ts"
import { insertUser } from "../test/support/users.ts"

const ADMIN_DATABASE_URL = process.env.BENCH_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test"
const CALLS = Number(process.env.BENCH_CALLS ?? 20_000)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5)
const IN_FLIGHT = 10
/** Accounts and keys: the enterprise plan's 500 requests a minute per key leave room for every round. */
const ACCOUNTS = 40
const KEYS_PER_ACCOUNT = 4

const LIST = "SELECT id, name, created_at FROM api_keys WHERE user_id = $1 ORDER BY created_at DESC LIMIT 2"

const median = (values: ReadonlyArray<number>) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!

const main = async () => {
  const database = await createDatabase(ADMIN_DATABASE_URL)
  const bare = new pg.Pool({ connectionString: database.url, max: IN_FLIGHT })
  try {
    const services = Layer.mergeAll(ApiKeys.Default, Authenticator.Default).pipe(
      Layer.provideMerge(Principals.Default),
      Layer.provideMerge(MemoryBus.layer),
      Layer.provide(Layer.merge(Layer.succeed(AccountSettings, { jwtSecret: Redacted.make(testSecret()) }), DependencyHealth.Default)),
      Layer.provideMerge(Layer.effectDiscard(migrate)),
      Layer.provideMerge(Postgres.layer({ url: Redacted.make(database.url), maxConnections: IN_FLIGHT }))
    )
    const program = Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const keys = yield* ApiKeys
      const authenticator = yield* Authenticator
      const users = yield* Effect.forEach(Array.from({ length: ACCOUNTS }), () => insertUser("enterprise"))
      const secrets: Array<string> = []
      for (const user of users) {
        for (let i = 0; i < KEYS_PER_ACCOUNT; i++) secrets.push((yield* keys.create(user.userId, { name: `bench ${i}` })).apiKey)
      }
      const owner = (i: number) => users[i % users.length]!.userId

      const parts: ReadonlyArray<readonly [string, (i: number) => Effect.Effect<unknown, unknown>]> = [
        ["(1) bare pg", (i) => Effect.promise(() => bare.query({ name: "bench_list", text: LIST, values: [owner(i)] }))],
        ["(2) SqlClient", (i) => sql`SELECT id, name, created_at FROM api_keys WHERE user_id = ${owner(i)} ORDER BY created_at DESC LIMIT 2`],
        ["(3) key list", (i) => keys.list(owner(i), { limit: 2, offset: 0 }, { field: "createdAt", direction: "desc" })],
        ["(4) authenticate", (i) => authenticator.authenticate({ kind: "apiKey", secret: secrets[i % secrets.length]! })]
      ]

      /** CPU µs per call of one round of `call`, IN_FLIGHT calls at a time. */
      const round = (call: (i: number) => Effect.Effect<unknown, unknown>) =>
        Effect.gen(function*() {
          let next = 0
          const before = process.cpuUsage()
          yield* Effect.all(
            Array.from({ length: IN_FLIGHT }, () =>
              Effect.gen(function*() {
                while (next < CALLS) yield* call(next++)
              })),
            { concurrency: "unbounded", discard: true }
          )
          const used = process.cpuUsage(before)
          return (used.user + used.system) / CALLS
        })

      console.log(`bench:api-parts — node ${process.version}, ${CALLS.toLocaleString("en-US")} calls a round, ${IN_FLIGHT} in flight, ${ROUNDS} rounds after a warm-up`)
      for (const [, call] of parts) yield* round(call)
      const samples = new Map(parts.map(([name]) => [name, [] as Array<number>]))
      for (let r = 0; r < ROUNDS; r++) {
        for (const [name, call] of parts) samples.get(name)!.push(yield* round(call))
      }
      const floor = median(samples.get(parts[0]![0])!)
      console.log("\npart                 CPU µs/call   × (1)")
      for (const [name] of parts) {
        const value = median(samples.get(name)!)
        console.log(`${name.padEnd(20)} ${value.toFixed(1).padStart(11)}   ${(value / floor).toFixed(2).padStart(5)}`)
      }
    })
    await Effect.runPromise(Effect.scoped(Effect.provide(program, services)).pipe(Effect.withTracerEnabled(false)))
  } finally {
    await bare.end()
    await database.drop()
  }
}

main().catch((error) => {
  console.error("bench:api-parts FAILED:", error)
  process.exit(1)
})
