/**
 * A sent email's jobs on the bus. A send is stored first (its deliveries `published` false), then its
 * jobs are published, then marked published: so a job the bus never took — the process died between
 * store and publish, or the bus refused it and the send could not be taken back — shows as a delivery
 * left unpublished. The mta role looks for those every `SWEEP_EVERY` and publishes their jobs again,
 * so a send answered 202 is never left queued for ever.
 *
 * Publishing again is safe: a job is published under one id per email and domain, which the bus drops
 * as a duplicate while it remembers the first (NATS: two minutes, past the sweep's `STRANDED_AFTER`),
 * and a job whose recipients were settled already does nothing. Several mta nodes sweep apart: each
 * takes the rows it republishes by moving their time on, so another leaves them for `STRANDED_AFTER`.
 */
import { SqlClient } from "@effect/sql"
import { Duration, Effect, Layer, Schedule } from "effect"
import { Bus, type BusShape, encodeJson, subjects } from "../bus/bus.ts"
import { DependencyHealth } from "../health/dependency-health.ts"
import type { OutboundJob } from "./schemas.ts"

/** How long a delivery may stay unpublished before it is taken for stranded (a send takes milliseconds). */
const STRANDED_AFTER_SECONDS = 30
const SWEEP_EVERY = Duration.seconds(10)
/** Deliveries taken by one sweep at most (the next sweep takes the rest). */
const SWEEP_BATCH = 500

/** Hand one job (an email's recipients in one domain) to the mta. */
export const publishJob = (bus: BusShape, job: OutboundJob) =>
  bus.publish(subjects.outboundMail(job.email_id), encodeJson(job), { msgId: `outbound:${job.email_id}:${job.domain}` })

/** One sweep: the stranded deliveries' jobs published again; answers how many jobs. */
export const requeueStranded = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const bus = yield* Bus
  const taken = yield* sql<{ emailId: string; domain: string }>`
    UPDATE outbound_deliveries SET updated_at = now()
    WHERE (email_id, recipient) IN (
      SELECT email_id, recipient FROM outbound_deliveries
      WHERE NOT published AND updated_at < now() - make_interval(secs => ${STRANDED_AFTER_SECONDS})
      ORDER BY updated_at LIMIT ${SWEEP_BATCH}
      FOR UPDATE SKIP LOCKED)
    RETURNING email_id, domain`
  const jobs = [...new Map(taken.map((row) => [`${row.emailId} ${row.domain}`, { email_id: row.emailId, domain: row.domain }])).values()]
  if (jobs.length === 0) return 0
  yield* Effect.forEach(jobs, (job) => publishJob(bus, job), { concurrency: 16, discard: true })
  const emailIds = [...new Set(jobs.map((job) => job.email_id))].sort()
  yield* sql`UPDATE outbound_deliveries SET published = true WHERE email_id = ANY(${emailIds}::text[]) AND NOT published`
  yield* Effect.logWarning("Sent emails whose delivery was never queued were queued again").pipe(
    Effect.annotateLogs({ jobs: jobs.length, email_ids: emailIds.slice(0, 20).join(",") })
  )
  return jobs.length
})

/** The sweep, every SWEEP_EVERY (in the mta role; any number of nodes). */
export const RequeueLive = Layer.scopedDiscard(
  Effect.gen(function*() {
    const health = yield* DependencyHealth
    yield* requeueStranded.pipe(
      Effect.catchAllCause((cause) => health.report("Queueing stranded sends again failed; will retry", cause)),
      Effect.repeat(Schedule.spaced(SWEEP_EVERY)),
      Effect.forkScoped
    )
  })
)
