/**
 * The process's own metrics, beside Mailroom's: what an operator needs to tell a node that is busy from
 * one that is stuck, leaking or out of file descriptors.
 *
 * Named as every Prometheus client library names them (Prometheus, "Writing client libraries":
 * `process_*`; prom-client's Node.js collectors: `nodejs_*`), so that generic dashboards and alerts
 * read them unchanged. Most are read from the process when Prometheus scrapes; two run from the
 * start: libuv's event-loop delay histogram (a 10 ms timer in C++, none of ours in JavaScript) and a
 * PerformanceObserver of garbage collections. One is ours, `mailroom_event_loop_busy_seconds_total`:
 * the time the event loop spent running code rather than waiting (Node's event-loop utilization),
 * whose rate is how saturated a node's main thread is (1 = always busy), the figure that says when an
 * API or SMTP node needs a sibling.
 */
import { Effect, Layer, Metric, MetricBoundaries } from "effect"
import * as fs from "node:fs"
import { constants, type EventLoopUtilization, monitorEventLoopDelay, performance, PerformanceObserver } from "node:perf_hooks"

const gcDuration = Metric.histogram(
  "nodejs_gc_duration_seconds",
  MetricBoundaries.fromIterable([0.001, 0.01, 0.1, 1, 2, 5]),
  "Garbage collection pauses of the main thread, by kind (minor, major, incremental, weakcb)"
)
const GC_KINDS: ReadonlyArray<readonly [number, string]> = [
  [constants.NODE_PERFORMANCE_GC_MINOR, "minor"],
  [constants.NODE_PERFORMANCE_GC_MAJOR, "major"],
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL, "incremental"],
  [constants.NODE_PERFORMANCE_GC_WEAKCB, "weakcb"]
]
const gcByKind = new Map(GC_KINDS.map(([kind, name]) => [kind, Metric.tagged(gcDuration, "kind", name)]))

const busy = Metric.counter("mailroom_event_loop_busy_seconds_total", {
  description: "Time the main thread's event loop spent running code rather than waiting for I/O or timers; its rate is the loop's utilization (1 = saturated)",
  incremental: true
})

/** How often libuv's timer samples the event loop's delay. */
const DELAY_RESOLUTION_MS = 10

/** The delay histogram while the layer is up; read and reset by each scrape. */
let delay: ReturnType<typeof monitorEventLoopDelay> | undefined
let utilization: EventLoopUtilization | undefined

/**
 * Starts the event-loop delay histogram and the garbage-collection observer, for as long as the
 * process runs; each GC kind's series exists from the start (at zero), as prom-client's do.
 */
export const RuntimeMetricsLive = Layer.scopedDiscard(
  Effect.gen(function*() {
    for (const metric of gcByKind.values()) yield* Metric.value(metric)
    yield* Effect.acquireRelease(
      Effect.sync(() => {
        const histogram = monitorEventLoopDelay({ resolution: DELAY_RESOLUTION_MS })
        histogram.enable()
        delay = histogram
        utilization = performance.eventLoopUtilization()
        const observer = new PerformanceObserver((list) => {
          for (const entry of list.getEntries()) {
            const kind = (entry as { readonly detail?: { readonly kind?: number } }).detail?.kind
            const metric = kind === undefined ? undefined : gcByKind.get(kind)
            metric?.unsafeUpdate(entry.duration / 1000, [])
          }
        })
        observer.observe({ entryTypes: ["gc"] })
        return { histogram, observer }
      }),
      ({ histogram, observer }) =>
        Effect.sync(() => {
          observer.disconnect()
          histogram.disable()
          if (delay === histogram) delay = undefined
        })
    )
  })
)

/** Counts the event loop's busy time since the last scrape into `busy` (before Effect's snapshot is read). */
export const recordEventLoopBusy = () => {
  if (utilization === undefined) return
  const now = performance.eventLoopUtilization()
  const since = performance.eventLoopUtilization(now, utilization)
  utilization = now
  busy.unsafeUpdate(since.active / 1000, [])
}

const fileDescriptors = (): { readonly open: number; readonly max: number } | undefined => {
  try {
    const open = fs.readdirSync("/proc/self/fd").length
    const limit = /^Max open files\s+(\d+)/m.exec(fs.readFileSync("/proc/self/limits", "utf8"))
    return { open, max: limit ? Number(limit[1]) : Number.NaN }
  } catch {
    // Not Linux: no /proc to read them from.
    return undefined
  }
}

const family = (name: string, type: "counter" | "gauge", help: string, samples: ReadonlyArray<readonly [string, number]>) =>
  `# HELP ${name} ${help}\n# TYPE ${name} ${type}\n${samples.map(([labels, value]) => `${name}${labels} ${value}\n`).join("")}`

const START_SECONDS = performance.timeOrigin / 1000

/**
 * The text of the families read at scrape time. The event-loop delay figures describe the time
 * since the previous scrape (the histogram is reset), as prom-client's do, but without the sampling
 * timer's own 10 ms (prom-client's read ~0.010 on an idle loop, these ~0); NaN before any sample.
 */
export const runtimeExposition = (): string => {
  const cpu = process.cpuUsage()
  const memory = process.memoryUsage()
  const seconds = (nanoseconds: number) => nanoseconds / 1e9
  let text = family("process_cpu_user_seconds_total", "counter", "User CPU time the process spent, in seconds", [["", cpu.user / 1e6]]) +
    family("process_cpu_system_seconds_total", "counter", "System CPU time the process spent, in seconds", [["", cpu.system / 1e6]]) +
    family("process_cpu_seconds_total", "counter", "User and system CPU time the process spent, in seconds", [["", (cpu.user + cpu.system) / 1e6]]) +
    family("process_start_time_seconds", "gauge", "When the process started, in seconds since the Unix epoch", [["", START_SECONDS]]) +
    family("process_resident_memory_bytes", "gauge", "Resident memory size, in bytes", [["", memory.rss]]) +
    family("nodejs_heap_size_total_bytes", "gauge", "V8's heap, in bytes", [["", memory.heapTotal]]) +
    family("nodejs_heap_size_used_bytes", "gauge", "V8's heap in use, in bytes", [["", memory.heapUsed]]) +
    family("nodejs_external_memory_bytes", "gauge", "Memory of objects V8 manages outside its heap (buffers), in bytes", [["", memory.external]])
  const descriptors = fileDescriptors()
  if (descriptors !== undefined) {
    text += family("process_open_fds", "gauge", "Open file descriptors", [["", descriptors.open]]) +
      family("process_max_fds", "gauge", "The most file descriptors the process may open", [["", descriptors.max]])
  }
  if (delay !== undefined) {
    const sampled = delay.count > 0
    // libuv records the time between two runs of its timer: what passes the timer's interval is the delay.
    const figure = (value: number) => (sampled ? Math.max(0, seconds(value) - DELAY_RESOLUTION_MS / 1000) : Number.NaN)
    text += family("nodejs_eventloop_lag_min_seconds", "gauge", "The least event-loop delay (how late a 10 ms timer ran) since the last scrape, in seconds", [["", figure(delay.min)]]) +
      family("nodejs_eventloop_lag_max_seconds", "gauge", "The greatest event-loop delay since the last scrape, in seconds", [["", figure(delay.max)]]) +
      family("nodejs_eventloop_lag_mean_seconds", "gauge", "The mean event-loop delay since the last scrape, in seconds", [["", figure(delay.mean)]]) +
      family("nodejs_eventloop_lag_p50_seconds", "gauge", "The median event-loop delay since the last scrape, in seconds", [["", figure(delay.percentile(50))]]) +
      family("nodejs_eventloop_lag_p90_seconds", "gauge", "The 90th percentile of event-loop delay since the last scrape, in seconds", [["", figure(delay.percentile(90))]]) +
      family("nodejs_eventloop_lag_p99_seconds", "gauge", "The 99th percentile of event-loop delay since the last scrape, in seconds", [["", figure(delay.percentile(99))]])
    delay.reset()
  }
  const [major, minor, patch] = process.versions.node.split(".")
  text += family("nodejs_version_info", "gauge", "The Node.js version the process runs on", [[
    `{version="${process.version}",major="${major}",minor="${minor}",patch="${patch}"}`,
    1
  ]])
  return text
}
