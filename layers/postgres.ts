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
 * queued behind a statement that ran longer than 5 s.) The 5 s are for a server DATABASE_URL names,
 * which should answer at once or be reported unreachable; the embedded database, ours and in this
 * process, is waited for as long as it needs to come up (`PoolOptions.connecting`).
 *
 * A statement has no time limit of its own (a migration or a large deletion may rightly take minutes),
 * but a connection whose server has gone silent is found out (`watchConnections`, on DATABASE_URL's
 * pool): when the network between them drops packets (a failover moved the server's address, a
 * partition) the kernel waits ~15 minutes before it gives up on the socket, and every request that
 * used it would hang that long. So a connection that has waited STUCK_AFTER for its statement's answer
 * without hearing a byte is checked on a connection of its own: if the server cannot be reached, or is
 * not running that statement (it never received it, or its answer is being lost: the server waits to
 * write it), the connection is dropped, its statement fails (503 to
 * an API client, 451 to SMTP, a retry for the bus) and the pool opens fresh ones. A statement the
 * server is still running is left alone. Behind a pooler (PgBouncer), whose connections' process ids
 * are its own, only a server that cannot be reached is concluded.
 */
import { PgClient } from "@effect/sql-pg"
import type { SqlClient } from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import { Clock, Duration, Effect, Layer, Metric, Redacted, Schedule, String } from "effect"
import Pg from "pg"
import { DatabaseProbe, type DatabaseProbeShape } from "../services/health/database-probe.ts"
import { PLANNED_FOR_ITS_VALUES } from "../services/planning.ts"

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
  /**
   * Drop connections the server no longer answers on (`watchConnections`). Not for the embedded
   * database: nothing stands between it and the process, and its one connection may rightly be busy
   * for long while a second one waits.
   */
  readonly watch?: boolean
  /**
   * Sample this pool into `mailroom_db_pool_*` (the default): the app's database. False for a pool of
   * another purpose (the vector index's own PGlite), which would otherwise overwrite the same gauges.
   */
  readonly sampled?: boolean
  /**
   * How opening a connection is bounded, and how the first one's failure is told: by default within
   * CONNECT_TIMEOUT, as "Could not connect to PostgreSQL at <where>".
   */
  readonly connecting?: Connecting
}

/**
 * How a pool opens connections: each within `timeout` (the first one's answer too), and the first
 * one's failure told as `failure` says (its cause follows). For a database that may rightly be slow
 * to answer (the embedded one, coming up in this process on a loaded machine), a long `timeout`,
 * with `progress` said meanwhile.
 */
export interface Connecting {
  readonly timeout: Duration.Duration
  /** The operator's message when the first connection failed; `timedOut`: no answer within `timeout`. */
  readonly failure: (timedOut: boolean) => string
  /** Logged every `every` while the first connection is awaited, `waited` since it was asked for. */
  readonly progress?: { readonly every: Duration.Duration; readonly say: (waited: Duration.Duration) => string }
}

type QueryCallback = (error: Error | null, result: unknown) => void

/**
 * `pg`'s client with its own connect time limit, which the pool's setting would otherwise set, that
 * knows since when its oldest statement has waited for an answer (`waitingSince`).
 */
class WatchedClient extends Pg.Client {
  /** When each statement still unanswered was sent, oldest first. */
  private readonly sent: Array<number> = []
  /** When the server last said anything on this connection (a large answer arrives over many messages). */
  private heard = 0

  constructor(config: Pg.ClientConfig | undefined, connectTimeout: Duration.Duration) {
    super({ ...config, connectionTimeoutMillis: Duration.toMillis(connectTimeout), keepAlive: true })
    ;(this as unknown as { readonly connection: { on: (event: "message", listener: () => void) => void } }).connection.on(
      "message",
      () => (this.heard = Date.now())
    )
    const send = this.query.bind(this) as (...args: Array<unknown>) => unknown
    this.query = ((...args: Array<unknown>) => {
      const last = args.length - 1
      const callback = args[last]
      // A cursor (a submittable) reads at its own pace: not watched.
      if (typeof (args[0] as { submit?: unknown } | undefined)?.submit === "function") return send(...args)
      const at = Date.now()
      this.sent.push(at)
      const answered = () => {
        const index = this.sent.indexOf(at)
        if (index >= 0) this.sent.splice(index, 1)
      }
      if (typeof callback === "function") {
        args[last] = (error: Error | null, result: unknown) => {
          answered()
          ;(callback as QueryCallback)(error, result)
        }
        return send(...args)
      }
      return (send(...args) as Promise<unknown>).finally(answered)
    }) as typeof this.query
  }

  /** The server process serving this connection (`pg_stat_activity.pid`), once connected. */
  get serverPid(): number | undefined {
    return announcedPid(this)
  }

  /**
   * Since when this connection has waited for the server in silence: its oldest statement unanswered
   * was sent, and nothing has been heard since (an answer still arriving is not a silence); undefined
   * when no statement waits.
   */
  get waitingSince(): number | undefined {
    const oldest = this.sent[0]
    return oldest === undefined ? undefined : Math.max(oldest, this.heard)
  }

  /** Drop the connection: its statements fail, and the pool no longer lends it. */
  drop(reason: string) {
    cutOff(this, new Error(reason))
  }
}

/** The process id the server announced to `client` at its start (`pg` keeps it, untyped); undefined before. */
const announcedPid = (client: Pg.Client): number | undefined =>
  (client as unknown as { readonly processID: number | null }).processID ?? undefined

/** Close `client`'s socket at once: `end()` would wait for a server that may never answer. */
const cutOff = (client: Pg.Client, error?: Error) =>
  (client as unknown as { readonly connection: { readonly stream: { destroy: (error?: Error) => void } } }).connection.stream.destroy(error)

/**
 * The most statements one connection keeps prepared. Statement texts are the code's templates, a
 * few per batch size, so a connection meets a few hundred; past the cap, statements run unnamed.
 */
const MAX_PREPARED = 1000

/**
 * A client that runs each statement with parameters (as @effect/sql-pg sends them: text, values,
 * callback) as a prepared statement of this connection: named after the order it was first met in,
 * parsed by the server once. A statement whose prepared form the server can no longer run (a
 * migration changed the columns it answers: "cached plan must not change result type") fails that
 * once and is prepared afresh under a new name on its next run. A statement that asks to be planned
 * for its values (services/planning.ts) runs unnamed, planned anew each time.
 */
class PreparingClient extends WatchedClient {
  private readonly names = new Map<string, string>()
  private made = 0
  private cleared = false

  constructor(config: Pg.ClientConfig | undefined, connectTimeout: Duration.Duration) {
    super(config, connectTimeout)
    const unnamed = this.query.bind(this) as (...args: Array<unknown>) => unknown
    this.query = ((...args: Array<unknown>) => {
      const [text, values, callback] = args
      if (typeof text !== "string" || !Array.isArray(values) || values.length === 0 || typeof callback !== "function") {
        return unnamed(...args)
      }
      const name = text.includes(PLANNED_FOR_ITS_VALUES) ? undefined : this.nameOf(text)
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

/** A statement unanswered this long has its connection checked (`watchConnections`). */
const STUCK_AFTER = Duration.seconds(10)
const WATCH_EVERY = Duration.seconds(2)
/** How long the check may take to connect and answer before the server counts as unreachable. */
const PROBE_TIMEOUT = Duration.seconds(5)

/** The pool's counts now: suspended, so that each repetition reads them afresh (not the first reading's). */
const sample = (pool: Pg.Pool) =>
  Effect.suspend(() =>
    Effect.all([
      Metric.set(inUse, pool.totalCount - pool.idleCount),
      Metric.set(idle, pool.idleCount),
      Metric.set(waiting, pool.waitingCount)
    ], { discard: true })
  )

/**
 * Where a target points, for an operator's message: host (or socket directory), port and database,
 * never the password. Read the way `pg` reads it (its own URL forms, PGHOST and the like), by a
 * client that is made and never connected.
 */
const describeTarget = (target: Target): string => {
  const client = new Pg.Client(connectionSettings(target))
  return `${client.host}:${client.port}, database ${client.database ?? client.user ?? "postgres"}`
}

const connectionSettings = (target: Target) =>
  "url" in target
    ? { connectionString: Redacted.value(target.url) }
    : { host: target.host, port: target.port, user: target.username, database: target.database }

/**
 * What the server says of the connections checked: which are running a statement (undefined when it
 * cannot tell: a pooler such as PgBouncer stands between, whose connections' process ids are its own),
 * or that it cannot be reached.
 */
type Check = { readonly reachable: true; readonly running: ReadonlySet<number> | undefined } | { readonly reachable: false }

/**
 * `ask` on a connection of its own, outside the pool (which may be full, or silent). "silent" when it
 * cannot connect and answer within `timeout`; "answered" when the server answered with an error of its
 * own (too many connections, say): it is there.
 */
const askAlone = <A>(target: Target, timeout: Duration.Duration, ask: (client: Pg.Client) => Promise<A>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => {
      const client = new Pg.Client({
        ...connectionSettings(target),
        connectionTimeoutMillis: Duration.toMillis(timeout),
        application_name: "mailroom-watch"
      })
      // Its failures are the answer; a socket closed under it must not be reported again.
      client.on("error", () => {})
      return { client, ended: false }
    }),
    (probe) =>
      Effect.tryPromise({
        try: async () => {
          await probe.client.connect()
          const answer = await ask(probe.client)
          await probe.client.end()
          probe.ended = true
          return answer
        },
        // The server answered with an error of its own (a DatabaseError), or the network failed.
        catch: (error) => (error instanceof Pg.DatabaseError ? "answered" as const : "silent" as const)
      }).pipe(
        Effect.timeoutFail({ duration: timeout, onTimeout: () => "silent" as const }),
        Effect.merge
      ),
    // A connection that did not end (the server is silent, or refused it) is cut off: ending would wait for it.
    (probe) => Effect.sync(() => probe.ended || cutOff(probe.client))
  )

/**
 * Which of the server processes `pids` are running a statement, asked on a connection of its own.
 * Unreachable when it cannot connect and answer within PROBE_TIMEOUT; undefined (nothing to conclude)
 * when the server answered with an error of its own.
 */
const runningStatements = (target: Target, pids: ReadonlyArray<number>) =>
  askAlone(target, PROBE_TIMEOUT, async (client): Promise<Check> => {
    const { rows } = await client.query<{ me: number; running: Array<number> }>(
      // A backend waiting to write its answer (ClientWrite) to a connection that has heard nothing
      // for STUCK_AFTER is not running it: the answer is being lost on the way.
      `SELECT pg_backend_pid() AS me,
              array(SELECT pid FROM pg_stat_activity WHERE pid = ANY($1::int[]) AND state = 'active'
                      AND wait_event IS DISTINCT FROM 'ClientWrite') AS running`,
      [pids]
    )
    // The server's own id for this connection is the one it announced unless a pooler answered for it.
    const direct = rows[0]?.me === announcedPid(client)
    return { reachable: true, running: direct ? new Set(rows[0]?.running) : undefined }
  }).pipe(
    Effect.map((answer): Check | undefined =>
      answer === "silent" ? { reachable: false } : answer === "answered" ? undefined : answer
    )
  )

/** How long `/readyz`'s question may take (`probe`). */
const READY_TIMEOUT = Duration.seconds(2)

/**
 * Whether the server answers (services/health/database-probe.ts): through the pool while it has a
 * connection free (no new connection for a frequent check); when every one is lent out, on a
 * connection of its own, so that a busy pool is not taken for a server gone. The embedded database's
 * pool (unwatched: its one connection is reached in-process) is always asked through the pool.
 */
const probe = (pool: Pg.Pool, options: PoolOptions): DatabaseProbeShape => ({
  reachable: Effect.suspend(() => {
    const full = pool.idleCount === 0 && pool.totalCount >= options.maxConnections
    if (full && options.watch === true) {
      return askAlone(options.target, READY_TIMEOUT, (client) => client.query("SELECT 1")).pipe(Effect.map((answer) => answer !== "silent"))
    }
    return Effect.tryPromise(() => pool.query("SELECT 1")).pipe(
      Effect.timeout(READY_TIMEOUT),
      Effect.as(true),
      Effect.orElseSucceed(() => false)
    )
  })
})

/**
 * Every WATCH_EVERY: the connections whose oldest statement has waited STUCK_AFTER are checked, and
 * those the server no longer answers on are dropped (see the top of this file).
 */
const watchConnections = (target: Target, clients: ReadonlySet<WatchedClient>) =>
  Effect.gen(function*() {
    const now = Date.now()
    const stuck = [...clients].flatMap((client) => {
      const since = client.waitingSince
      const pid = client.serverPid
      return since !== undefined && pid !== undefined && now - since >= Duration.toMillis(STUCK_AFTER) ? [{ client, since, pid }] : []
    })
    if (stuck.length === 0) return
    const check = yield* runningStatements(target, stuck.map((s) => s.pid))
    if (check === undefined) return
    for (const { client, pid, since } of stuck) {
      // Answered while the check ran: nothing to do.
      if (client.waitingSince !== since || (check.reachable && (check.running === undefined || check.running.has(pid)))) continue
      const seconds = Math.round((Date.now() - since) / 1000)
      const why = check.reachable ? "the server is not running its statement" : "the server cannot be reached"
      yield* Effect.logWarning(`A PostgreSQL connection heard nothing for ${seconds} s while waiting for an answer, and ${why}: dropped`)
      client.drop(`PostgreSQL said nothing for ${seconds} s (${why})`)
    }
  })

/**
 * A new connection's first statement, before it is lent: no JIT compilation. It starts on any
 * statement the planner costs past 100,000 (one reading a large mailbox's mail), where compiling takes
 * 100-250 ms and saves less (an IMAP poll of 190,000 messages 0.58 → 0.38 s). A SET, not a startup
 * option, which poolers refuse. A server that refuses the setting (its answer an error of its own) is
 * served all the same; any other failure (the connection lost meanwhile) ends the connection instead
 * of lending it, and the statement waiting for it hears why.
 */
export const withoutJit = (client: { readonly query: (text: string) => Promise<unknown> }): Promise<void> =>
  client.query("SET jit = off").then(
    () => undefined,
    (error: unknown) => {
      if (error instanceof Pg.DatabaseError) return
      throw error
    }
  )

/** A server DATABASE_URL names: answered within CONNECT_TIMEOUT, or said unreachable at once. */
const configuredServer = (target: Target): Connecting => ({
  timeout: CONNECT_TIMEOUT,
  failure: () => `Could not connect to PostgreSQL at ${describeTarget(target)}`
})

/**
 * The pool's first query: its first connection opened and answered, within `connecting.timeout`,
 * with `connecting.progress` logged while it is awaited.
 */
const firstAnswer = (pool: Pg.Pool, connecting: Connecting) => {
  const first = Effect.tryPromise({
    try: () => pool.query("SELECT 1"),
    catch: (cause) => new SqlError({ cause, message: connecting.failure(false) })
  }).pipe(
    Effect.timeoutFail({
      duration: connecting.timeout,
      onTimeout: () =>
        new SqlError({
          cause: new Error(`No answer within ${Duration.format(connecting.timeout)}`),
          message: connecting.failure(true)
        })
    })
  )
  const { progress } = connecting
  if (progress === undefined) return first
  const telling = Effect.flatMap(Clock.currentTimeMillis, (asked) =>
    Clock.currentTimeMillis.pipe(
      Effect.flatMap((now) => Effect.logInfo(progress.say(Duration.millis(now - asked)))),
      Effect.delay(progress.every),
      Effect.forever
    ))
  return Effect.raceFirst(first, telling)
}

/**
 * A pool that answered one query, ended with the scope; sampled into the pool gauges meanwhile, and
 * its connections watched (`options.watch`).
 */
const acquirePool = (options: PoolOptions) => {
  const clients = new Set<WatchedClient>()
  return Effect.acquireRelease(
    Effect.suspend(() => {
      const { target } = options
      const connecting = options.connecting ?? configuredServer(target)
      const Base = options.preparedStatements === false ? WatchedClient : PreparingClient
      // The pool's setting bounds the wait for a lent connection, and opening one too (pg-pool
      // times a new client with it): the first connection is opened under `connecting.timeout`
      // alone, and the pool's bound set once it has answered.
      const acquireTimeout = Duration.toMillis(ACQUIRE_TIMEOUT)
      const firstTimeout = Duration.toMillis(Duration.max(connecting.timeout, ACQUIRE_TIMEOUT))
      const pool = new Pg.Pool({
        ...connectionSettings(target),
        connectionTimeoutMillis: firstTimeout,
        Client: class extends Base {
          constructor(config?: Pg.ClientConfig) {
            super(config, connecting.timeout)
            clients.add(this)
            this.once("end", () => clients.delete(this))
          }
        },
        onConnect: withoutJit,
        idleTimeoutMillis: Duration.toMillis(IDLE_TIMEOUT),
        max: options.maxConnections,
        min: options.minConnections,
        application_name: options.applicationName ?? "mailroom"
      })
      // A connection that fails while idle is dropped by the pool; the next query opens another.
      pool.on("error", () => {})
      // Interruptible (the acquisition is not): a query that timed out is given up at once (and a
      // stop during a long wait of the embedded database is not held up by it).
      return Effect.interruptible(firstAnswer(pool, connecting)).pipe(
        Effect.tap(() => {
          pool.options.connectionTimeoutMillis = acquireTimeout
        }),
        // A connection still opening is cut off: ending the pool would wait for it.
        Effect.onError(() =>
          Effect.promise(() => {
            for (const client of clients) cutOff(client, new Error("Gave up connecting"))
            return pool.end()
          })
        ),
        Effect.as(pool)
      )
    }),
    (pool) => Effect.promise(() => pool.end()).pipe(Effect.interruptible, Effect.timeoutOption(1000))
  ).pipe(
    Effect.tap((pool) =>
      options.sampled === false ? Effect.void : sample(pool).pipe(Effect.repeat(Schedule.spaced(SAMPLE_EVERY)), Effect.forkScoped)
    ),
    Effect.tap(() =>
      options.watch === true
        ? watchConnections(options.target, clients).pipe(Effect.repeat(Schedule.spaced(WATCH_EVERY)), Effect.forkScoped)
        : Effect.void
    )
  )
}

export const pooledClient = (options: PoolOptions): Layer.Layer<PgClient.PgClient | SqlClient | DatabaseProbe, SqlError> =>
  Layer.unwrapScoped(Effect.map(acquirePool(options), (pool) =>
    Layer.merge(
      PgClient.layerFromPool({ ...clientSettings, acquire: Effect.succeed(pool), applicationName: options.applicationName ?? "mailroom" }),
      Layer.succeed(DatabaseProbe, probe(pool, options))
    )))

export interface PostgresOptions {
  readonly url: Redacted.Redacted
  readonly maxConnections?: number
  readonly applicationName?: string
  readonly preparedStatements?: boolean
}

export const layer = (options: PostgresOptions): Layer.Layer<PgClient.PgClient | SqlClient | DatabaseProbe, SqlError> =>
  pooledClient({
    target: { url: options.url },
    maxConnections: options.maxConnections ?? 10,
    watch: true,
    ...(options.applicationName === undefined ? {} : { applicationName: options.applicationName }),
    ...(options.preparedStatements === undefined ? {} : { preparedStatements: options.preparedStatements })
  })
