/**
 * Prepared statements (layers/postgres.ts, `PreparingClient`): a statement with parameters is
 * prepared once on its connection and answers as before; `DATABASE_PREPARED_STATEMENTS=false`
 * prepares nothing; a statement whose columns a migration changed fails once, then runs afresh; and
 * on the embedded database, whose socket keeps one session across connections, a new connection
 * prepares again without colliding with what the last one left. Every connection runs without JIT.
 */
import { SqlClient } from "@effect/sql"
import { PGlite } from "@electric-sql/pglite"
import { PGLiteSocketServer } from "@electric-sql/pglite-socket"
import { Effect, Either, Redacted } from "effect"
import Pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Postgres from "../../layers/postgres.ts"
import { plannedForItsValues } from "../../services/planning.ts"
import { adminDatabaseUrl, createDatabase, mode, type TestDatabase } from "../support/services.ts"
import { freePort } from "../support/server.ts"

const run = <A, E>(client: ReturnType<typeof Postgres.pooledClient>, effect: Effect.Effect<A, E, SqlClient.SqlClient>) =>
  Effect.runPromise(Effect.scoped(Effect.provide(effect, client)))

const prepared = Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ statement: string }>`SELECT statement FROM pg_prepared_statements`)

describe("a new connection's SET jit = off", () => {
  const answering = (outcome: () => Promise<unknown>) => ({ query: outcome })

  it("serves the connection when the server refuses the setting, and ends it when the connection fails meanwhile", async () => {
    const refused = new Pg.DatabaseError('unrecognized configuration parameter "jit"', 0, "error")
    refused.code = "42704"
    await expect(Postgres.withoutJit(answering(() => Promise.reject(refused)))).resolves.toBeUndefined()
    await expect(Postgres.withoutJit(answering(() => Promise.resolve({ rows: [] })))).resolves.toBeUndefined()
    const lost = new Error("Connection terminated unexpectedly")
    await expect(Postgres.withoutJit(answering(() => Promise.reject(lost)))).rejects.toBe(lost)
    const reset = Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET" })
    await expect(Postgres.withoutJit(answering(() => Promise.reject(reset)))).rejects.toBe(reset)
  })
})

describe.skipIf(mode !== "postgres")("prepared statements on PostgreSQL", () => {
  let database: TestDatabase
  beforeAll(async () => {
    database = await createDatabase(adminDatabaseUrl!)
  })
  afterAll(() => database?.drop())

  const client = (preparedStatements?: boolean) =>
    Postgres.pooledClient({ target: { url: Redacted.make(database.url) }, maxConnections: 1, ...(preparedStatements === undefined ? {} : { preparedStatements }) })

  it("a statement with parameters is prepared once on its connection and answers each run; turned off, none is", async () => {
    const runs = Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const answers = yield* Effect.forEach([1, 2, 3], (n) => sql<{ v: number }>`SELECT ${n}::int + 1 AS v`)
      return { answers: answers.map((rows) => rows[0]!.v), prepared: (yield* prepared).map((row) => row.statement) }
    })
    const on = await run(client(), runs)
    expect(on.answers).toEqual([2, 3, 4])
    expect(on.prepared).toEqual(["SELECT $1::int + 1 AS v"])
    const off = await run(client(false), runs)
    expect(off).toEqual({ answers: [2, 3, 4], prepared: [] })
  })

  it("a statement planned for its values (services/planning.ts) runs unnamed, planned afresh each run", async () => {
    const outcome = await run(client(), Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const answers = yield* Effect.forEach([1, 2, 3, 4, 5, 6, 7], (n) => sql<{ v: number }>`SELECT ${plannedForItsValues(sql)} ${n}::int + 1 AS v`)
      const kept = yield* sql<{ v: number }>`SELECT ${1}::int AS v`
      return { answers: [...answers, kept].map((rows) => rows[0]!.v), prepared: (yield* prepared).map((row) => row.statement) }
    }))
    expect(outcome).toEqual({ answers: [2, 3, 4, 5, 6, 7, 8, 1], prepared: ["SELECT $1::int AS v"] })
  })

  it("a statement whose columns changed under it fails once, then is prepared afresh", async () => {
    const outcome = await run(client(), Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`CREATE TABLE notes (id int PRIMARY KEY)`
      yield* sql`INSERT INTO notes VALUES (1)`
      const read = sql<Record<string, unknown>>`SELECT * FROM notes WHERE id = ${1}`
      const before = yield* read
      yield* sql`ALTER TABLE notes ADD COLUMN body text DEFAULT 'hi'`
      const stale = yield* Effect.either(read)
      const after = yield* read
      return { before, stale, after }
    }))
    expect(outcome.before).toEqual([{ id: 1 }])
    expect(Either.isLeft(outcome.stale) && String((outcome.stale.left.cause as Error).message)).toContain("cached plan must not change result type")
    expect(outcome.after).toEqual([{ id: 1, body: "hi" }])
  })

  it("every connection runs without JIT compilation (the server's default is on), prepared or not", async () => {
    const settings = (preparedStatements: boolean) =>
      run(
        Postgres.pooledClient({ target: { url: Redacted.make(database.url) }, maxConnections: 3, preparedStatements }),
        // At once, so that the pool opens three connections.
        Effect.all(
          Array.from({ length: 3 }, () =>
            Effect.flatMap(SqlClient.SqlClient, (sql) =>
              sql<{ jit: string; pid: number }>`SELECT current_setting('jit') AS jit, pg_backend_pid() AS pid, pg_sleep(0.2)`)),
          { concurrency: 3 }
        )
      )
    for (const preparedStatements of [true, false]) {
      const rows = (await settings(preparedStatements)).map(([row]) => row!)
      expect(rows.map((row) => row.jit)).toEqual(["off", "off", "off"])
      expect(new Set(rows.map((row) => row.pid)).size).toBe(3)
    }
    // The server's own default, for a connection not of the pool.
    const other = new Pg.Client({ connectionString: database.url })
    await other.connect()
    const { rows } = await other.query<{ jit: string }>("SHOW jit")
    await other.end()
    expect(rows[0]?.jit).toBe("on")
  })
})

describe.skipIf(mode !== "embedded")("prepared statements on the embedded database", () => {
  it("a new connection to the socket's one session prepares its statements again without colliding", async () => {
    const db = await PGlite.create()
    const port = await freePort()
    const server = new PGLiteSocketServer({ db, port, host: "127.0.0.1" })
    await server.start()
    try {
      const client = Postgres.pooledClient({ target: { host: "127.0.0.1", port, username: "postgres", database: "template1" }, maxConnections: 1 })
      for (const n of [1, 2]) {
        const rows = await run(client, Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ v: number }>`SELECT ${n}::int + 1 AS v`))
        expect(rows).toEqual([{ v: n + 1 }])
        // The socket takes its next connection once the last one has gone.
        await new Promise((resolve) => setTimeout(resolve, 300))
      }
    } finally {
      await server.stop()
      await db.close()
    }
  })
})
