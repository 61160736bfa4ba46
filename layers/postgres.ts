/**
 * PostgreSQL through @effect/sql-pg: the production SqlClient (`DATABASE_URL`), and the client the
 * embedded database is reached with too (layers/pglite.ts, over its socket).
 *
 * The `pg` pool is made here rather than inside @effect/sql-pg, so that the process can tell how it is
 * used: `mailroom_db_pool_connections{state="in_use"|"idle"}` and `mailroom_db_pool_waiting` (queries
 * waiting for a connection), sampled every second.
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
}

/** `pg`'s client with its own connect time limit, which the pool's setting would otherwise set. */
class ClientWithConnectTimeout extends Pg.Client {
  constructor(config?: Pg.ClientConfig) {
    super({ ...config, connectionTimeoutMillis: Duration.toMillis(CONNECT_TIMEOUT) })
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
        Client: ClientWithConnectTimeout,
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
}

export const layer = (options: PostgresOptions): Layer.Layer<PgClient.PgClient | SqlClient, SqlError> =>
  pooledClient({
    target: { url: options.url },
    maxConnections: options.maxConnections ?? 10,
    ...(options.applicationName === undefined ? {} : { applicationName: options.applicationName })
  })
