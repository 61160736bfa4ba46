/**
 * The inbound pipeline's stages, each at its own pace (issue 18):
 *
 *   accept   SMTP -> raw message durable and on the bus -> 250       (smtp role)
 *   ingest   `mail.inbound.>` -> parse -> store -> `email.received`   (worker role)
 *   words    `email.received` -> full text (searchable by words)      (worker role)
 *   index    `email.received` -> embed -> vectors -> `email.processed`   (indexer role)

 *
 * Words and index both follow ingest, each at its own pace: mail is found by its words at ingest's
 * pace however far behind the embedder is (search/stored-documents.ts).
 *
 * Stages meet only on the bus: a stage takes the next message when it has a free slot, and a slow
 * later stage only makes its own durable consumer fall behind; nothing upstream waits for it. What
 * a stage has not done yet is its lag, read from the bus (JetStream's consumer info, or the embedded
 * bus's own books), so every process sees the same figure whichever process runs the stage, and a
 * stage no process runs still shows its backlog growing.
 *
 * Each process samples the stages every second: its own rate (messages this process finished per
 * second, over the last five seconds), and each stage's lag (waiting, in flight, age of the oldest).
 * The snapshot is served in `/readyz` details and as `mailroom_stage_*` metrics; a stage whose
 * oldest message is older than `STAGE_LAG_WARNING` is logged once when it falls behind and once
 * when it has caught up, by the processes that run it or feed it.
 */
import { Context, Duration, Effect, Metric, MetricLabel, Option, Schedule } from "effect"
import { Bus, type ConsumerLag, type ConsumerRef, subjects } from "../bus/bus.ts"

export type StageName = "accept" | "ingest" | "words" | "index"
export const stageNames: ReadonlyArray<StageName> = ["accept", "ingest", "words", "index"]

/** The durable consumers the bus-fed stages run as (the actors use these, so the names agree). */
export const stageConsumers = {
  ingest: { name: "ingest", stream: "mail", filter: subjects.allInboundMail },
  words: { name: "words", stream: "events", filter: subjects.event("email.received") },
  index: { name: "index", stream: "events", filter: subjects.event("email.received") }
} as const satisfies Record<Exclude<StageName, "accept">, ConsumerRef>

/**
 * The consumers of sent mail's delivery jobs (`mail.outbound.>`) the words and index stages also run:
 * sent mail's words (word-indexer.ts) and vectors (indexer.ts). What they have not done is counted in
 * their stage's lag.
 */
export const sentMailConsumers = {
  words: { name: "words-sent", stream: "mail", filter: subjects.allOutboundMail },
  index: { name: "index-sent", stream: "mail", filter: subjects.allOutboundMail }
} as const satisfies Record<"words" | "index", ConsumerRef>

/** What a stage has done in this process, and how far behind it is on the bus. */
export interface StageStatus {
  /** Messages this process finished per second, over the last few seconds. */
  readonly rate: number
  /** Messages this process finished since it started. */
  readonly handled: number
  /** Waiting for the stage (null: unknown, the bus out of reach; accept: none queue). */
  readonly pending: number | null
  /** Taken by the stage and not finished (accept: messages in DATA in this process). */
  readonly inFlight: number | null
  /** Age of the oldest message the stage has not finished, in seconds (0 when none). */
  readonly oldestAgeSeconds: number | null
  /** True while the oldest is older than the lag threshold. */
  readonly lagging: boolean
}

export interface StageSettingsShape {
  /** A stage whose oldest unfinished message is older than this is behind (logged, `lagging`). */
  readonly lagWarning: Duration.Duration
  /** How often the stages are sampled. */
  readonly interval: Duration.Duration
  /** The stages this process logs about: the ones it runs or feeds. */
  readonly logged: ReadonlyArray<StageName>
}

export class StageSettings extends Context.Reference<StageSettings>()("mailroom/StageSettings", {
  defaultValue: (): StageSettingsShape => ({ lagWarning: Duration.seconds(60), interval: Duration.seconds(1), logged: stageNames })
}) {}

// Counters of work done in this process: plain numbers, bumped from hot paths (the SMTP
// callbacks, every bus handler), read once a second by the monitor.
const handledCounts: Record<StageName, number> = { accept: 0, ingest: 0, words: 0, index: 0 }
let acceptInFlight = 0
// Each stage's `lagging` as of the monitor's latest sample (false until one is taken).
const laggingNow: Record<StageName, boolean> = { accept: false, ingest: false, words: false, index: false }

const stageLabels: Record<StageName, ReadonlyArray<MetricLabel.MetricLabel>> = {
  accept: [MetricLabel.make("stage", "accept")],
  ingest: [MetricLabel.make("stage", "ingest")],
  words: [MetricLabel.make("stage", "words")],
  index: [MetricLabel.make("stage", "index")]
}
const handledTotal = Metric.counter("mailroom_stage_handled_total", {
  description: "Messages a pipeline stage (accept, ingest, words, index) finished in this process",
  incremental: true
})
const rateGauge = Metric.gauge("mailroom_stage_rate", {
  description: "Messages a pipeline stage finished per second in this process, over the last 5 seconds"
})
const pendingGauge = Metric.gauge("mailroom_stage_pending", {
  description: "Messages waiting for a pipeline stage on the bus (NaN: unknown)"
})
const inFlightGauge = Metric.gauge("mailroom_stage_in_flight", {
  description: "Messages a pipeline stage has taken and not finished (accept: in this process)"
})
const oldestGauge = Metric.gauge("mailroom_stage_oldest_age_seconds", {
  description: "Age of the oldest message a pipeline stage has not finished (NaN: unknown)"
})

/** Called where a stage finishes or takes work; plain writes, safe outside a fiber. */
export const StageActivity = {
  handled: (stage: StageName, count = 1) => {
    handledCounts[stage] += count
    handledTotal.unsafeUpdate(count, stageLabels[stage])
  },
  acceptStarted: () => {
    acceptInFlight++
  },
  acceptEnded: () => {
    acceptInFlight--
  },
  /** Whether this process has a DATA in flight: what indexing gives way to, and ingest too while the event loop is loaded (priority.ts). */
  accepting: () => acceptInFlight > 0,
  /** Whether the stage was behind (STAGE_LAG_WARNING) at the monitor's latest sample in this process. */
  lagging: (stage: StageName) => laggingNow[stage]
} as const

/** How long the rate is averaged over. */
const RATE_WINDOW_MS = 5_000

type Lag = Pick<StageStatus, "pending" | "inFlight" | "oldestAgeSeconds">
const unknownLag: Lag = { pending: null, inFlight: null, oldestAgeSeconds: null }

/** A stage's lag over two of its consumers: what both hold, the older's oldest; unknown when either is. */
const bothLags = (a: Lag, b: Lag): Lag =>
  a.pending === null || b.pending === null || a.inFlight === null || b.inFlight === null
    ? unknownLag
    : { pending: a.pending + b.pending, inFlight: a.inFlight + b.inFlight, oldestAgeSeconds: Math.max(a.oldestAgeSeconds ?? 0, b.oldestAgeSeconds ?? 0) }

export class StageMonitor extends Effect.Service<StageMonitor>()("mailroom/StageMonitor", {
  scoped: Effect.gen(function*() {
    const bus = yield* Bus
    const settings = yield* StageSettings
    const threshold = Duration.toSeconds(settings.lagWarning)
    const samples: Array<{ readonly at: number; readonly counts: Record<StageName, number> }> = []
    /** Stages seen behind: since when (here), and the oldest waiting message seen meanwhile, in seconds. */
    const behind = new Map<StageName, { readonly since: number; worst: number }>()
    let snapshot: Record<StageName, StageStatus> = Object.fromEntries(
      stageNames.map((stage) => [stage, { rate: 0, handled: 0, ...unknownLag, lagging: false }])
    ) as Record<StageName, StageStatus>

    const lagOf = (consumer: ConsumerRef, now: number) =>
      bus.lag(consumer).pipe(
        Effect.map(Option.match({
          onNone: (): Lag => unknownLag,
          onSome: (lag: ConsumerLag): Lag => ({
            pending: lag.pending,
            inFlight: lag.inFlight,
            oldestAgeSeconds: lag.oldest === undefined ? 0 : Math.max(0, (now - lag.oldest.getTime()) / 1000)
          })
        })),
        // An unreachable bus is DependencyHealth's to tell (readiness, its probe); the lag is then
        // unknown until the next sample.
        Effect.orElseSucceed(() => unknownLag)
      )

    /** Log a stage falling behind and catching up, once each, where this process answers for it. */
    const tell = (stage: StageName, status: StageStatus, now: number) => {
      if (!settings.logged.includes(stage)) return Effect.void
      const seen = behind.get(stage)
      if (seen !== undefined) seen.worst = Math.max(seen.worst, status.oldestAgeSeconds ?? 0)
      if (status.lagging && seen === undefined) {
        behind.set(stage, { since: now, worst: status.oldestAgeSeconds ?? 0 })
        return Effect.logWarning(
          `The ${stage} stage is behind: ${status.pending} messages waiting, ${status.inFlight} in flight, the oldest ` +
            `${status.oldestAgeSeconds?.toFixed(1)} s old (STAGE_LAG_WARNING ${threshold} s); earlier stages go on at their own pace`
        ).pipe(Effect.annotateLogs({ stage, pending: status.pending, in_flight: status.inFlight, oldest_age_seconds: status.oldestAgeSeconds }))
      }
      if (!status.lagging && seen !== undefined && status.oldestAgeSeconds !== null) {
        behind.delete(stage)
        // A process that starts (or first looks) while the stage is behind saw only the end of it: the
        // oldest message's age says how far behind it really was.
        return Effect.logInfo(
          `The ${stage} stage has caught up after ${((now - seen.since) / 1000).toFixed(1)} s behind here; ` +
            `its oldest message had waited ${seen.worst.toFixed(1)} s`
        ).pipe(
          Effect.annotateLogs({ stage, pending: status.pending, in_flight: status.inFlight })
        )
      }
      return Effect.void
    }

    const sample = Effect.gen(function*() {
      const now = Date.now()
      const counts = { ...handledCounts }
      samples.push({ at: now, counts })
      while (samples.length > 2 && now - samples[1]!.at >= RATE_WINDOW_MS) samples.shift()
      const first = samples[0]!
      const elapsed = (now - first.at) / 1000
      const rate = (stage: StageName) => (elapsed > 0 ? (counts[stage] - first.counts[stage]) / elapsed : 0)
      const [ingest, words, wordsSent, index, indexSent] = yield* Effect.all(
        [
          lagOf(stageConsumers.ingest, now),
          lagOf(stageConsumers.words, now),
          lagOf(sentMailConsumers.words, now),
          lagOf(stageConsumers.index, now),
          lagOf(sentMailConsumers.index, now)
        ],
        { concurrency: "unbounded" }
      )
      const lags: Record<StageName, Lag> = {
        accept: { pending: null, inFlight: acceptInFlight, oldestAgeSeconds: null },
        ingest,
        words: bothLags(words, wordsSent),
        index: bothLags(index, indexSent)
      }
      const next = {} as Record<StageName, StageStatus>
      for (const stage of stageNames) {
        const lag = lags[stage]
        const status: StageStatus = {
          rate: rate(stage),
          handled: counts[stage],
          ...lag,
          lagging: lag.oldestAgeSeconds !== null && lag.oldestAgeSeconds >= threshold
        }
        next[stage] = status
        laggingNow[stage] = status.lagging
        const labels = stageLabels[stage]
        rateGauge.unsafeUpdate(status.rate, labels)
        pendingGauge.unsafeUpdate(status.pending ?? Number.NaN, labels)
        inFlightGauge.unsafeUpdate(status.inFlight ?? Number.NaN, labels)
        oldestGauge.unsafeUpdate(status.oldestAgeSeconds ?? Number.NaN, labels)
        yield* tell(stage, status, now)
      }
      snapshot = next
    })

    yield* sample.pipe(Effect.repeat(Schedule.spaced(settings.interval)), Effect.forkScoped)

    return {
      /** The latest sample (at most `interval` old), with `handled` as of now. */
      status: Effect.sync(() => {
        const now = { ...snapshot }
        for (const stage of stageNames) now[stage] = { ...now[stage], handled: handledCounts[stage] }
        return now
      })
    } as const
  })
}) {}
