/**
 * Rate limits by leased tokens (issue 19): a process takes a subject's requests from the shared
 * counters (`mailroom_rate_lease`, migration 0018) a lease at a time, and grants them from memory,
 * so the hot path asks the database once per lease rather than once per request.
 *
 * The guarantee:
 * - A lease is at most 2% of the smallest of the subject's window limits, and at least 1, so low
 *   limits stay exact: with a lease of 1 every request is counted in the database, as before.
 * - Tokens are taken from the shared counters before they are granted, so N processes together
 *   never grant more than the limit; what a lease can cost is the other way round: a process may
 *   hold up to one lease of tokens it has not used while another is refused (at most N × lease).
 *   One process is exact.
 * - A lease ends with the earliest of its windows (the minute); tokens left then are given back to
 *   the windows still running (the hour, the day), as are those left when the process stops.
 * - `X-RateLimit-Remaining` counts what this process may still grant: the shared counter's remainder
 *   when the lease was taken, plus the tokens it holds.
 *
 * Requests for several subjects that arrive together share one round trip (group commit); requests
 * for one subject wait for its lease in flight rather than each taking one. A lease's last token
 * sends for the next lease at once, so a subject in steady use is not kept waiting for the round
 * trip; the process still holds at most one lease. A lease of one request is not taken ahead: it
 * would count a request before it is made, and low limits are to stay exact across processes.
 */
import { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Duration, Effect, Runtime, Schedule } from "effect"
import { groupCommit } from "../batching.ts"
import { type Decision, type DecisionRow, toDecision, type Window, windowName } from "./rate-limiter.ts"

/** A lease is at most this share of the smallest window limit (and at least one request). */
export const LEASE_SHARE = 0.02

export const leaseSize = (windows: ReadonlyArray<Window>): number =>
  Math.max(1, Math.floor(Math.min(...windows.map((w) => w.limit)) * LEASE_SHARE))

/** How often leases that ended are given back and idle subjects forgotten. */
const SWEEP_EVERY = Duration.seconds(2)
const MAX_BATCH = 256

interface LeaseRow extends DecisionRow {
  readonly idx: string | number
  readonly granted: number
  readonly windowStarts: ReadonlyArray<string | number>
  readonly leaseUntil: string | number
}

interface LeaseRequest {
  readonly subject: string
  readonly windows: ReadonlyArray<Window>
  readonly want: number
}

/** A request waiting for its subject's next lease: resumed with its decision, or the lookup's failure. */
type Waiter = (result: Effect.Effect<Decision, SqlError>) => void

/** One subject's lease in this process. */
interface Lease {
  readonly subject: string
  readonly windows: ReadonlyArray<Window>
  tokens: number
  /** When the lease ends (ms). */
  until: number
  /** The windows it was counted in (their starts, unix seconds). */
  starts: ReadonlyArray<number>
  /** The reported window as the lease left it: limit, shared remainder, reset. */
  limit: number
  sharedRemaining: number
  resetAt: number
  windowSeconds: number
  /** Requests waiting for the lease in flight (or the next), served in arrival order. */
  readonly queue: Array<Waiter>
  fetching: boolean
  lastUsed: number
}

export class RateLeases extends Effect.Service<RateLeases>()("mailroom/RateLeases", {
  scoped: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const leases = new Map<string, Lease>()
    const fork = Runtime.runFork(yield* Effect.runtime<never>())

    const leaseAll = yield* groupCommit({
      maxBatch: MAX_BATCH,
      parallel: 1,
      run: (batch: ReadonlyArray<LeaseRequest>) => {
        // Rows are locked in subject order, so concurrent batches of several processes queue rather than deadlock.
        const order = batch.map((_, i) => i).sort((a, b) => (batch[a]!.subject < batch[b]!.subject ? -1 : 1))
        const sorted = order.map((i) => batch[i]!)
        return sql<LeaseRow>`
          SELECT c.idx, l.*
          FROM unnest(${sorted.map((r) => r.subject)}::text[], ${sorted.map((r) => r.windows.map((w) => w.seconds).join(","))}::text[],
                      ${sorted.map((r) => r.windows.map((w) => w.limit).join(","))}::text[], ${sorted.map((r) => r.want)}::int[])
               WITH ORDINALITY AS c(subject, windows, limits, want, idx)
          CROSS JOIN LATERAL mailroom_rate_lease(c.subject, string_to_array(c.windows, ',')::int[],
                                                 string_to_array(c.limits, ',')::int[], c.want) l
          ORDER BY c.idx`.pipe(
          Effect.map((rows) => {
            const results = new Array<LeaseRow>(batch.length)
            rows.forEach((row) => {
              results[order[Number(row.idx) - 1]!] = row
            })
            return results
          }),
          Effect.withSpan("RateLeases.lease", { attributes: { size: batch.length } })
        )
      }
    })

    const giveBack = (subject: string, starts: ReadonlyArray<number>, count: number) =>
      sql`SELECT mailroom_rate_return(${subject}, ${starts}::bigint[], ${count})`.pipe(
        Effect.asVoid,
        Effect.catchAll((error) => Effect.logDebug(`Could not give back ${count} unused requests of ${subject}`, error))
      )

    /** The lease's unused tokens, taken out of it (to give back) when it has ended. */
    const expire = (lease: Lease, now: number): number => {
      if (lease.tokens === 0 || now < lease.until) return 0
      const unused = lease.tokens
      lease.tokens = 0
      return unused
    }

    const granted = (lease: Lease, now: number): Decision => ({
      allowed: true,
      limit: lease.limit,
      remaining: Math.max(0, lease.sharedRemaining + lease.tokens),
      resetAt: lease.resetAt,
      window: windowName(lease.windowSeconds),
      retryAfter: Math.max(1, Math.ceil(lease.resetAt - now / 1000))
    })

    /** Grant one of the lease's tokens. */
    const grant = (lease: Lease, now: number): Decision => {
      lease.tokens--
      return granted(lease, now)
    }

    /** Whether the next lease is taken as soon as this one's last token is granted (see above). */
    const takesAhead = (lease: Lease) => lease.tokens === 0 && leaseSize(lease.windows) > 1

    /**
     * Take the next lease for the requests queued on `lease`, as many tokens as they are (a lease at
     * least), and serve them in order; those that came meanwhile go in the next one. It runs on a
     * fiber of its own, so a caller that gives up (a closed connection) leaves the others served.
     */
    const refill = (lease: Lease): Effect.Effect<void> =>
      Effect.suspend(() => {
        lease.fetching = true
        const want = Math.max(leaseSize(lease.windows), lease.queue.length)
        return leaseAll({ subject: lease.subject, windows: lease.windows, want }).pipe(
          Effect.exit,
          Effect.flatMap((exit) =>
            Effect.suspend(() => {
              lease.fetching = false
              const now = Date.now()
              if (exit._tag === "Failure") {
                for (const waiter of lease.queue.splice(0)) waiter(Effect.failCause(exit.cause))
                return Effect.void
              }
              const row = exit.value
              if (row.granted <= 0) {
                const refusal = toDecision({ ...row, allowed: false }, now)
                for (const waiter of lease.queue.splice(0)) waiter(Effect.succeed(refusal))
                return Effect.void
              }
              lease.tokens += row.granted
              lease.until = Number(row.leaseUntil) * 1000
              lease.starts = row.windowStarts.map(Number)
              lease.limit = row.maxRequests
              lease.sharedRemaining = row.remaining
              lease.resetAt = Number(row.resetAt)
              lease.windowSeconds = row.windowSeconds
              while (lease.tokens > 0 && lease.queue.length > 0) lease.queue.shift()!(Effect.succeed(grant(lease, now)))
              // Fewer granted than asked (the limit is near): the rest ask again, and hear the refusal.
              // All used at once: the next lease is taken ahead, as after any last token.
              return lease.queue.length > 0 || takesAhead(lease) ? refill(lease) : Effect.void
            })
          )
        )
      })

    /** Count one request of `subject` against `windows`; refused requests are not counted. */
    const take = (subject: string, windows: ReadonlyArray<Window>): Effect.Effect<Decision, SqlError> =>
      Effect.suspend(() => {
        const now = Date.now()
        // A lease holds for the limits it was taken under: after a plan change the subject starts a
        // new one, and the old one's tokens go back when it ends.
        const key = `${subject} ${windows.map((w) => `${w.limit}/${w.seconds}`).join(" ")}`
        let lease = leases.get(key)
        if (lease === undefined) {
          lease = {
            subject,
            windows,
            tokens: 0,
            until: 0,
            starts: [],
            limit: 0,
            sharedRemaining: 0,
            resetAt: 0,
            windowSeconds: 0,
            queue: [],
            fetching: false,
            lastUsed: now
          }
          leases.set(key, lease)
        }
        lease.lastUsed = now
        const unused = expire(lease, now)
        if (unused > 0) fork(giveBack(subject, lease.starts, unused))
        if (lease.tokens > 0) {
          const decision = grant(lease, now)
          if (takesAhead(lease) && !lease.fetching) fork(refill(lease))
          return Effect.succeed(decision)
        }
        const current = lease
        return Effect.async<Decision, SqlError>((resume) => {
          current.queue.push(resume)
          if (!current.fetching) fork(refill(current))
          // A caller that gives up leaves the queue; a token the lease took for it stays for the next.
          return Effect.sync(() => {
            const index = current.queue.indexOf(resume)
            if (index >= 0) current.queue.splice(index, 1)
          })
        })
      })

    /** Give back what ended leases hold, and forget subjects idle for a while. */
    const sweep = Effect.suspend(() => {
      const now = Date.now()
      const backs: Array<Effect.Effect<void>> = []
      for (const [key, lease] of leases) {
        const unused = expire(lease, now)
        if (unused > 0) backs.push(giveBack(lease.subject, lease.starts, unused))
        if (lease.tokens === 0 && !lease.fetching && lease.queue.length === 0 && now - lease.lastUsed > 60_000) leases.delete(key)
      }
      return Effect.all(backs, { concurrency: 4, discard: true })
    })
    yield* sweep.pipe(Effect.repeat(Schedule.spaced(SWEEP_EVERY)), Effect.forkScoped)

    // On the way out, what this process holds goes back to the shared counters.
    yield* Effect.addFinalizer(() =>
      Effect.suspend(() => {
        const backs: Array<Effect.Effect<void>> = []
        for (const lease of leases.values()) {
          if (lease.tokens > 0) backs.push(giveBack(lease.subject, lease.starts, lease.tokens))
          lease.tokens = 0
        }
        return Effect.all(backs, { concurrency: 4, discard: true })
      })
    )

    return { take } as const
  })
}) {}
