/**
 * PostgreSQL through @effect/sql-pg: the production SqlClient (`DATABASE_URL`), and the client the
 * embedded database is reached with too (layers/pglite.ts, over its socket).
 *
 * The `pg` pool is made here rather than inside @effect/sql-pg, so that the process can tell how it is
 * used: `mailroom_db_pool_connections{state="in_use"|"idle"}` and `mailroom_db_pool_waiting` (queries
 * waiting for a connection), sampled every second.
 *
 * Statements with parameters are prepared, once per connection (`PreparingClient`): the server then
 * parses each statement once and, after a few runs, may keep its plan, where an unnamed statement is
 * parsed and planned on every run (for the statement storing an email, ~1.2 ms of the server's CPU of
 * ~4). Poolers that multiplex transactions onto shared server connections (PgBouncer in transaction
 * mode) cannot keep them: `DATABASE_PREPARED_STATEMENTS=false` turns it off.
 *
 * Two time limits, kept apart: opening a connection gives up after 5 s (CONNECT_TIMEOUT), but a
 * query may wait 30 s (ACQUIRE_TIMEOUT) for a connection the pool has lent out. (`pg`'s pool has one
 * setting for both; with 5 s for both, the embedded database's single connection failed every query
 * queued behind a statement that ran longer than 5 s.)
 */
import { PgClient } from "@effect/sql-pg"
import type { SqlClient } from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import { Duration, Effect, type Layer, Metric, Redacted, Schedule, String } from "effect"
import Pg from "pg"

/** Shared client settings: snake_case columns in SQL, camelCase in TypeScript. */
export const clientSettings = {
  transformResultNames: String.snakeToCamel,
  transformQueryNames: String.camelToSnake
} as const

const CONNECT_TIMEOUT = Duration.seconds(5)
const ACQUIRE_TIMEOUT = Duration.seconds(30)
const IDLE_TIMEOUT = Duration.seconds(30)

/** Where the pool connects: a URL, or a host (a socket directory) with a user and database. */
export type Target =
  | { readonly url: Redacted.Redacted }
  | { readonly host: string; readonly port: number; readonly username: string; readonly database: string }

export interface PoolOptions {
  readonly target: Target
  readonly maxConnections: number
  readonly minConnections?: number
  readonly applicationName?: string
  /** Statements with parameters run prepared (`PreparingClient`); false for a transaction-mode pooler. */
  readonly preparedStatements?: boolean
}

/** `pg`'s client with its own connect time limit, which the pool's setting would otherwise set. */
class ClientWithConnectTimeout extends Pg.Client {
  constructor(config?: Pg.ClientConfig) {
    super({ ...config, connectionTimeoutMillis: Duration.toMillis(CONNECT_TIMEOUT) })
  }
}

/**
 * The most statements one connection keeps prepared. Statement texts are the code's templates, a
 * few per batch size, so a connection meets a few hundred; past the cap, statements run unnamed.
 */
const MAX_PREPARED = 1000

type QueryCallback = (error: Error | null, result: unknown) => void

/**
 * A client that runs each statement with parameters (as @effect/sql-pg sends them: text, values,
 * callback) as a prepared statement of this connection: named after the order it was first met in,
 * parsed by the server once. A statement whose prepared form the server can no longer run (a
 * migration changed the columns it answers: "cached plan must not change result type") fails that
 * once and is prepared afresh under a new name on its next run.
 */
class PreparingClient extends ClientWithConnectTimeout {
  private readonly names = new Map<string, string>()
  private made = 0
  private cleared = false

  constructor(config?: Pg.ClientConfig) {
    super(config)
    const unnamed = this.query.bind(this) as (...args: Array<unknown>) => unknown
    this.query = ((...args: Array<unknown>) => {
      const [text, values, callback] = args
      if (typeof text !== "string" || !Array.isArray(values) || values.length === 0 || typeof callback !== "function") {
        return unnamed(...args)
      }
      const name = this.nameOf(text)
      if (name === undefined) return unnamed(...args)
      const run = () =>
        unnamed({ name, text, values }, (error: (Error & { code?: string }) | null, result: unknown) => {
          if (error?.code === "0A000") this.names.delete(text)
          ;(callback as QueryCallback)(error, result)
        })
      if (this.cleared) return run()
      // The embedded database's socket serves one session, which keeps what an earlier connection
      // prepared: this connection's first prepared statement starts from none, as on a server.
      this.cleared = true
      return unnamed("DEALLOCATE ALL", (error: Error | null) => (error ? (callback as QueryCallback)(error, undefined) : run()))
    }) as typeof this.query
  }

  private nameOf(text: string): string | undefined {
    const known = this.names.get(text)
    if (known !== undefined || this.names.size >= MAX_PREPARED) return known
    const name = `mailroom_${this.made++}`
    this.names.set(text, name)
    return name
  }
}

const connections = Metric.gauge("mailroom_db_pool_connections", {
  description: "Database connections this process holds, by state: in_use (lent to a query or transaction) or idle"
})
const inUse = Metric.tagged(connections, "state", "in_use")
const idle = Metric.tagged(connections, "state", "idle")
const waiting = Metric.gauge("mailroom_db_pool_waiting", {
  description: "Queries and transactions waiting for a database connection (the pool is at its maximum)"
})
const SAMPLE_EVERY = Duration.seconds(1)

const sample = (pool: Pg.Pool) =>
  Effect.all([
    Metric.set(inUse, pool.totalCount - pool.idleCount),
    Metric.set(idle, pool.idleCount),
    Metric.set(waiting, pool.waitingCount)
  ], { discard: true })

/** A pool that answered one query, ended with the scope; sampled into the pool gauges meanwhile. */
const acquirePool = (options: PoolOptions) =>
  Effect.acquireRelease(
    Effect.suspend(() => {
      const { target } = options
      const pool = new Pg.Pool({
        ...("url" in target
          ? { connectionString: Redacted.value(target.url) }
          : { host: target.host, port: target.port, user: target.username, database: target.database }),
        // The pool's setting bounds the wait for a lent connection; the client's, opening one.
        connectionTimeoutMillis: Duration.toMillis(ACQUIRE_TIMEOUT),
        Client: options.preparedStatements === false ? ClientWithConnectTimeout : PreparingClient,
        idleTimeoutMillis: Duration.toMillis(IDLE_TIMEOUT),
        max: options.maxConnections,
        min: options.minConnections,
        application_name: options.applicationName ?? "mailroom"
      })
      // A connection that fails while idle is dropped by the pool; the next query opens another.
      pool.on("error", () => {})
      return Effect.tryPromise({
        try: () => pool.query("SELECT 1"),
        catch: (cause) => new SqlError({ cause, message: "PgClient: Failed to connect" })
      }).pipe(
        Effect.timeoutFail({
          duration: CONNECT_TIMEOUT,
          onTimeout: () => new SqlError({ cause: new Error("Connection timed out"), message: "PgClient: Connection timed out" })
        }),
        Effect.tapError(() => Effect.promise(() => pool.end())),
        Effect.as(pool)
      )
    }),
    (pool) => Effect.promise(() => pool.end()).pipe(Effect.interruptible, Effect.timeoutOption(1000))
  ).pipe(
    Effect.tap((pool) => sample(pool).pipe(Effect.repeat(Schedule.spaced(SAMPLE_EVERY)), Effect.forkScoped))
  )

export const pooledClient = (options: PoolOptions): Layer.Layer<PgClient.PgClient | SqlClient, SqlError> =>
  PgClient.layerFromPool({
    ...clientSettings,
    acquire: acquirePool(options),
    applicationName: options.applicationName ?? "mailroom"
  })

export interface PostgresOptions {
  readonly url: Redacted.Redacted
  readonly maxConnections?: number
  readonly applicationName?: string
  readonly preparedStatements?: boolean
}

export const layer = (options: PostgresOptions): Layer.Layer<PgClient.PgClient | SqlClient, SqlError> =>
  pooledClient({
    target: { url: options.url },
    maxConnections: options.maxConnections ?? 10,
    ...(options.applicationName === undefined ? {} : { applicationName: options.applicationName }),
    ...(options.preparedStatements === undefined ? {} : { preparedStatements: options.preparedStatements })
  })
