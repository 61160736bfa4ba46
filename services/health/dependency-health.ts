/**
 * Outages of what Mailroom depends on (the SQL database, the bus), told as an operator wants to
 * read them: one warning when a dependency stops answering, one when it answers again, with how long
 * it was gone and how many operations failed meanwhile. In between, failures are only counted.
 *
 * Why: every per-message boundary (bus consumers, the webhook actor, the indexer, housekeeping, the
 * SMTP and HTTP edges) used to log its own failure with a stack trace, so a 12-second PostgreSQL
 * outage wrote thousands of identical warnings. An unreachable dependency is an expected condition:
 * it is retried and the operator needs to know that it happened, when, and for how long, not where
 * in the code each failed query was.
 *
 * - Every boundary hands its failure to `report`, which sorts it: an unreachable dependency (a SQL
 *   connection failure, a bus error, the vector index's or the embedder's network error) is an outage; `Backpressure`
 *   (a consumer asking for a message again later because it is at its limit) is flow control, logged
 *   at debug only; another system that cannot be reached (a document reader: a
 *   network error under the failure) is a warning of one line saying which and why, the same line
 *   again at most once a minute with how often it was met; anything else is a real fault and is
 *   logged as before, with its cause.
 * - The end of an outage is seen by a probe (registered with `watch`) tried every second while the
 *   dependency is down, or told by an adapter that knows it first (`recovered`, e.g. NATS reconnected).
 * - Operations that were already waiting when the dependency came back can still fail just after;
 *   for a few seconds after an end such failures are counted as stragglers of that outage (debug),
 *   rather than opening a new one.
 */
import { Cause, Clock, Duration, Effect, FiberRef, HashMap, Schedule } from "effect"

export type Dependency = "database" | "bus" | "vectorIndex" | "embedder"

/**
 * Marks an error as flow control: the operation is fine and will be offered again later (say, a
 * webhook endpoint already at its limit of deliveries in flight). Never a warning.
 */
export const BackpressureTypeId: unique symbol = Symbol.for("mailroom/Backpressure")

export interface Backpressure {
  readonly [BackpressureTypeId]: true
  readonly message: string
}

const isBackpressure = (error: unknown): error is Backpressure =>
  typeof error === "object" && error !== null && BackpressureTypeId in error

/** What a failure means for the operator. */
export type Failure =
  | { readonly _tag: "Outage"; readonly dependency: Dependency; readonly reason: string }
  | { readonly _tag: "Backpressure"; readonly reason: string }
  /** Another system (a document reader, say) could not be reached: retried, said in one line. */
  | { readonly _tag: "Unreachable"; readonly reason: string }
  | { readonly _tag: "Fault" }

const CONNECTION_CODE = /^(08|57P0[123]|53300)/
const NETWORK_CODE = /^E(CONNREFUSED|CONNRESET|TIMEDOUT|PIPE|NOTFOUND|HOSTUNREACH|AI_AGAIN)$/
const CONNECTION_MESSAGE = /Connection terminated|timeout exceeded when trying to connect|Failed to connect|Could not connect to PostgreSQL|connection error|Failed to acquire/i

const messageOf = (value: unknown): string | undefined => {
  const message = (value as { message?: unknown } | null)?.message
  return typeof message === "string" && message !== "" ? message : undefined
}

/** `error` and the causes under it, outermost first (a cycle ends the walk). */
export const causeChain = (error: unknown): ReadonlyArray<object> => {
  const chain: Array<object> = []
  let current: unknown = error
  while (typeof current === "object" && current !== null && !chain.includes(current)) {
    chain.push(current)
    current = (current as { cause?: unknown }).cause
  }
  return chain
}

/** Whether this one error (not its causes) says a connection failed: a SQLSTATE, a network code or a driver message. */
export const isConnectionFailure = (error: object): boolean => {
  const { code } = error as { code?: unknown }
  const message = messageOf(error)
  return (typeof code === "string" && (CONNECTION_CODE.test(code) || NETWORK_CODE.test(code))) ||
    (message !== undefined && CONNECTION_MESSAGE.test(message))
}

/**
 * A statement the database gave up so that concurrent ones could go on (SQLSTATE 40P01, a deadlock;
 * 40001, a serialization failure): no fault and no outage, and the same work tried again succeeds.
 */
export const isTransientConflict = (error: unknown): boolean =>
  causeChain(error).some((e) => ["40P01", "40001"].includes((e as { code?: unknown }).code as string))

/**
 * `effect`, tried again while it fails on a transient conflict (above), after a short jittered pause
 * that doubles each time up to a second, at most `times` more times; any other failure, or the last
 * conflict, is its own.
 */
export const retryOnConflict = <A, E, R>(effect: Effect.Effect<A, E, R>, times = 20): Effect.Effect<A, E, R> =>
  Effect.retry(effect, {
    while: isTransientConflict,
    schedule: Schedule.exponential("20 millis").pipe(
      Schedule.union(Schedule.spaced("1 second")),
      Schedule.jittered,
      Schedule.intersect(Schedule.recurs(times))
    )
  })

/**
 * Which dependency, if any, `error` says is unreachable. The database's: a SQL error about the
 * connection (SQLSTATE class 08, the server shutting down or full, a network error under it, the
 * pool giving up), also when wrapped, as the bus kept in the database wraps it. The vector index's:
 * its error with a network error under it (Qdrant, or an embedded index apart); the embedder's
 * likewise (OpenAI). The innermost of those errors above the network error is the one that could not
 * be reached (pgvector in the app's PostgreSQL is the database). The bus's: any other bus error not
 * caused by a SQL error. Other systems' network errors (a document reader, a relay) are not these.
 */
export const unreachableDependency = (error: unknown): Dependency | undefined => {
  let bus = false
  let sql = false
  let owner: Dependency | undefined
  for (const current of causeChain(error)) {
    const { _tag } = current as { _tag?: unknown }
    if (_tag === "BusError") bus = true
    if (_tag === "SqlError") {
      sql = true
      owner = "database"
    }
    if (_tag === "VectorIndexError") owner = "vectorIndex"
    if (_tag === "EmbedderError") owner = "embedder"
    if (owner !== undefined && isConnectionFailure(current)) return owner
  }
  // A bus kept in the database that failed on something other than the connection: a fault.
  return bus && !sql ? "bus" : undefined
}

/** One line about an error and what lies under it: "Connection error: Connection terminated unexpectedly". */
export const shortReason = (error: unknown): string => {
  const parts: Array<string> = []
  for (const current of causeChain(error)) {
    if (parts.length === 3) break
    const message = messageOf(current)
    if (message !== undefined && !parts.some((part) => part.includes(message))) parts.push(message)
  }
  const reason = parts.length > 0 ? parts.join(": ") : String(error)
  return reason.length > 200 ? `${reason.slice(0, 197)}...` : reason
}

/** Sort a failure: the first unreachable dependency in it, else backpressure, else a fault. */
export const classify = (cause: Cause.Cause<unknown>): Failure => {
  if (Cause.isInterruptedOnly(cause)) return { _tag: "Fault" }
  const errors = [...Cause.failures(cause), ...Cause.defects(cause)]
  if (errors.length === 0) return { _tag: "Fault" }
  for (const error of errors) {
    const dependency = unreachableDependency(error)
    if (dependency !== undefined) return { _tag: "Outage", dependency, reason: shortReason(error) }
  }
  if (errors.every(isBackpressure)) return { _tag: "Backpressure", reason: errors.map(shortReason).join("; ") }
  // Failures only: a defect is a bug wherever it happened, and keeps its stack.
  const failures = [...Cause.failures(cause)]
  if (failures.length === errors.length && failures.every((error) => causeChain(error).some(isConnectionFailure))) {
    return { _tag: "Unreachable", reason: errors.map(shortReason).join("; ") }
  }
  return { _tag: "Fault" }
}

/** How often a down dependency's probe is tried. */
const PROBE_EVERY = Duration.seconds(1)
/** After an end, failures for this long are stragglers: operations that were already waiting. */
const STRAGGLERS = Duration.seconds(5)
/** Another system's failure, the same again within this long after it was said, is only counted. */
const REPEAT_QUIET = Duration.minutes(1)

const defaultNames: Record<Dependency, string> = {
  database: "The database",
  bus: "The bus",
  vectorIndex: "The vector index",
  embedder: "The embedder"
}

interface Down {
  readonly since: number
  failures: number
}

interface Watched {
  readonly name: string
  readonly probe: Effect.Effect<void, unknown>
}

/**
 * An outage's lines stand for every operation that failed, not for the one that happened to meet it
 * first: they carry none of its log annotations (its consumer, subject, retry delay).
 */
const aboutTheOutage = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.locally(effect, FiberRef.currentLogAnnotations, HashMap.empty())

const count = (n: number) => `${n.toLocaleString("en-US")} operation${n === 1 ? "" : "s"} failed`
const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`

export class DependencyHealth extends Effect.Service<DependencyHealth>()("mailroom/DependencyHealth", {
  scoped: Effect.gen(function*() {
    const scope = yield* Effect.scope
    const down = new Map<Dependency, Down>()
    const endedAt = new Map<Dependency, number>()
    const watched = new Map<Dependency, Watched>()
    const nameOf = (dependency: Dependency) => watched.get(dependency)?.name ?? defaultNames[dependency]

    const recovered = Effect.fn("DependencyHealth.recovered")(function*(dependency: Dependency) {
      const outage = down.get(dependency)
      if (outage === undefined) return
      down.delete(dependency)
      const now = Date.now()
      endedAt.set(dependency, now)
      // At the start's level, so that whoever saw the start also sees the end.
      yield* aboutTheOutage(
        Effect.logWarning(`${nameOf(dependency)} reachable again after ${seconds(now - outage.since)} (${count(outage.failures)})`)
      )
    })

    /** Try the probe every second until it answers (or another signal ended the outage first). */
    const probeUntilBack = (dependency: Dependency, probe: Effect.Effect<void, unknown>) =>
      Effect.sleep(PROBE_EVERY).pipe(
        Effect.zipRight(Effect.suspend(() => (down.has(dependency) ? probe : Effect.void))),
        Effect.retry(Schedule.spaced(PROBE_EVERY)),
        Effect.zipRight(recovered(dependency)),
        aboutTheOutage,
        // Started by whichever fiber saw the outage: interruptible whatever that one was, so a stop ends it.
        Effect.interruptible,
        Effect.forkIn(scope),
        Effect.asVoid
      )

    const failed = Effect.fn("DependencyHealth.failed")(function*(dependency: Dependency, reason: string) {
      const outage = down.get(dependency)
      if (outage !== undefined) {
        outage.failures++
        return
      }
      const ended = endedAt.get(dependency)
      if (ended !== undefined && Date.now() - ended < Duration.toMillis(STRAGGLERS)) {
        return yield* Effect.logDebug(`${nameOf(dependency)}: an operation begun during the outage failed: ${reason}`)
      }
      down.set(dependency, { since: Date.now(), failures: 1 })
      // "Qdrant unreachable: could not …" rather than "Qdrant unreachable: Qdrant: could not …".
      const name = nameOf(dependency)
      const said = reason.startsWith(`${name}: `) ? reason.slice(name.length + 2) : reason
      yield* aboutTheOutage(Effect.logWarning(`${name} unreachable: ${said}`))
      const watch = watched.get(dependency)
      if (watch !== undefined) yield* probeUntilBack(dependency, watch.probe)
    })

    /**
     * Another system could not be reached: a warning, then the same line again at most once a
     * minute, saying how many times it was met in between (those at debug). Such a system has no
     * probe here, so there is no "reachable again"; a minute without it ends the repeat.
     */
    const repeats = new Map<string, { said: number; since: number }>()
    const unreachable = (line: string) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const seen = repeats.get(line)
        if (seen !== undefined && now - seen.since < Duration.toMillis(REPEAT_QUIET)) {
          seen.said++
          return Effect.logDebug(line)
        }
        repeats.set(line, { said: 0, since: now })
        if (repeats.size > 100) repeats.delete(repeats.keys().next().value!)
        const more = seen !== undefined && seen.said > 0
          ? ` (${seen.said.toLocaleString("en-US")} more time${seen.said === 1 ? "" : "s"} in the ${seconds(now - seen.since)} before)`
          : ""
        return Effect.logWarning(`${line}${more}`)
      })

    /**
     * A per-message (or per-round) boundary's failure: counted when a dependency is unreachable,
     * debug for backpressure, otherwise logged as a warning with its cause (a fault to look into).
     */
    const report = Effect.fn("DependencyHealth.report")(function*(message: string, cause: Cause.Cause<unknown>) {
      const failure = classify(cause)
      switch (failure._tag) {
        case "Outage":
          return yield* failed(failure.dependency, failure.reason)
        case "Backpressure":
          return yield* Effect.logDebug(`${message}: ${failure.reason}`)
        case "Unreachable":
          // Where the code failed says nothing here: which system, and why, does.
          return yield* unreachable(`${message}: ${failure.reason}`)
        case "Fault":
          return yield* Effect.logWarning(message, cause)
      }
    })

    /**
     * How to tell that `dependency` is back (say `SELECT 1`), and its name in the log
     * ("PostgreSQL"). Without a probe, only `recovered` ends an outage.
     */
    const watch = (dependency: Dependency, options: Watched) => Effect.sync(() => void watched.set(dependency, options))

    /** Is `dependency` known to be down now? */
    const isDown = (dependency: Dependency) => Effect.sync(() => down.has(dependency))

    return { report, failed, recovered, watch, isDown } as const
  })
}) {}
