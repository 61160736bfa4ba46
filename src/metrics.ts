/**
 * `GET /metrics`: every metric this process keeps, in the Prometheus text exposition format 0.0.4.
 *
 * The metrics themselves are Effect `Metric`s, defined one module per concern (src/smtp/metrics.ts,
 * src/http/metrics.ts, services/bus/metrics.ts, services/webhooks/metrics.ts,
 * services/search/metrics.ts), all named `mailroom_*`. Effect's registry is the only one: an update
 * is a map look-up and an addition inside the fiber that does the work (no second registry, no
 * exporter on the hot path), and this module turns a snapshot into text when Prometheus scrapes.
 * The process's own (`process_*`, `nodejs_*`: CPU, memory, file descriptors, event-loop delay,
 * garbage collection) follow, from src/runtime-metrics.ts.
 *
 * Served on the API port when the process runs the api role; a process without it serves the same
 * on `METRICS_PORT` (when set), on the API's host, with `/healthz` and `/readyz` beside it, so that
 * every node has probes.
 *
 * `mailroom_node_info{node,roles} 1` says which process answered: its `node` (host:pid) and its roles,
 * as the JSON logs' `node` and `role` name them, so a scrape and a log line are matched, and a query
 * can join a target's series on its roles (`* on (instance) group_left (roles) mailroom_node_info`).
 */
import { createServer, type Server, type ServerResponse } from "node:http"
import { Cause, Effect, Exit, Layer, Metric, MetricKeyType, MetricLabel, MetricState, Option, Runtime } from "effect"
import { isApiError } from "../services/errors.ts"
import { makeReadiness } from "../services/health/readiness.ts"
import type { AppConfigShape } from "./config.ts"
import { nodeId } from "./logging.ts"
import { recordEventLoopBusy, runtimeExposition } from "./runtime-metrics.ts"
import { listenFailure } from "./listen-failure.ts"

export const CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

const escapeLabel = (value: string) => value.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, "\\\"")
const escapeHelp = (value: string) => value.replace(/\\/g, "\\\\").replace(/\n/g, "\\n")

const labels = (pairs: ReadonlyArray<readonly [string, string]>) =>
  pairs.length === 0 ? "" : `{${pairs.map(([key, value]) => `${key}="${escapeLabel(value)}"`).join(",")}}`

const number = (value: number | bigint) =>
  typeof value === "bigint"
    ? value.toString()
    : Number.isNaN(value)
    ? "NaN"
    : value === Number.POSITIVE_INFINITY
    ? "+Inf"
    : value === Number.NEGATIVE_INFINITY
    ? "-Inf"
    : String(value)

interface Family {
  readonly type: "counter" | "gauge" | "histogram"
  readonly help: string
  readonly lines: Array<string>
}

/** The text Prometheus scrapes: one family per metric name, its series sorted for stable output. */
export const exposition = (): string => {
  const families = new Map<string, Family>()
  recordEventLoopBusy()
  for (const pair of Metric.unsafeSnapshot()) {
    const key = pair.metricKey
    // Effect's own fiber counters (on by default) are not named for Prometheus: ours only.
    if (!key.name.startsWith("mailroom_") && !key.name.startsWith("nodejs_")) continue
    const state: unknown = pair.metricState
    const type = MetricKeyType.isCounterKey(key.keyType)
      ? "counter"
      : MetricKeyType.isGaugeKey(key.keyType)
      ? "gauge"
      : MetricKeyType.isHistogramKey(key.keyType)
      ? "histogram"
      : undefined
    // Frequencies and summaries are not used; Prometheus has no direct equivalent of a frequency.
    if (type === undefined) continue
    let family = families.get(key.name)
    if (family === undefined) {
      family = { type, help: key.description._tag === "Some" ? key.description.value : key.name, lines: [] }
      families.set(key.name, family)
    }
    const tags = key.tags.map((tag) => [tag.key, tag.value] as const)
    if (MetricState.isCounterState(state)) {
      family.lines.push(`${key.name}${labels(tags)} ${number(state.count)}`)
    } else if (MetricState.isGaugeState(state)) {
      family.lines.push(`${key.name}${labels(tags)} ${number(state.value)}`)
    } else if (MetricState.isHistogramState(state)) {
      for (const [boundary, count] of state.buckets) {
        family.lines.push(`${key.name}_bucket${labels([...tags, ["le", number(boundary)]])} ${count}`)
      }
      if (!state.buckets.some(([boundary]) => boundary === Number.POSITIVE_INFINITY)) {
        family.lines.push(`${key.name}_bucket${labels([...tags, ["le", "+Inf"]])} ${state.count}`)
      }
      family.lines.push(`${key.name}_sum${labels(tags)} ${number(state.sum)}`)
      family.lines.push(`${key.name}_count${labels(tags)} ${state.count}`)
    }
  }
  let text = ""
  for (const [name, family] of [...families].sort(([a], [b]) => a.localeCompare(b))) {
    text += `# HELP ${name} ${escapeHelp(family.help)}\n# TYPE ${name} ${family.type}\n`
    for (const line of family.lines) text += `${line}\n`
  }
  return text + runtimeExposition()
}

const nodeInfo = Metric.gauge("mailroom_node_info", {
  description: "The process that answers: its node (host:pid) and roles, as its log lines name them; always 1"
})

/** Every process's `mailroom_node_info`, set as it starts. */
const nodeInfoLayer = (config: AppConfigShape) =>
  Layer.effectDiscard(Effect.sync(() =>
    nodeInfo.unsafeUpdate(1, [MetricLabel.make("node", nodeId), MetricLabel.make("roles", config.roles.join(","))])
  ))

/**
 * Every process's node info; and for a process without the api role, `/metrics` on its own port
 * (`METRICS_PORT`), and the API's `/healthz` and `/readyz`, answered alike. A process with the api
 * role serves them on the API port instead (src/http/server.ts).
 */
export const metricsServerLayer = (config: AppConfigShape) => Layer.merge(nodeInfoLayer(config), metricsPortLayer(config))

const metricsPortLayer = (config: AppConfigShape) =>
  config.roles.includes("api") || config.metricsPort._tag === "None"
    ? Layer.empty
    : Layer.scopedDiscard(Effect.gen(function*() {
      const port = config.metricsPort._tag === "Some" ? config.metricsPort.value : 0
      const readiness = yield* makeReadiness
      const run = Runtime.runPromiseExit(yield* Effect.runtime<never>())
      const json = (response: ServerResponse, status: number, body: unknown) => {
        response.writeHead(status, { "content-type": "application/json" })
        response.end(JSON.stringify(body))
      }
      const ready = async (response: ServerResponse) => {
        const exit = await run(readiness)
        if (Exit.isSuccess(exit)) return json(response, 200, { success: true, data: exit.value })
        const failure = Cause.failureOption(exit.cause)
        const error = Option.isSome(failure) && isApiError(failure.value) ? failure.value : undefined
        json(response, 503, { success: false, error: { code: "SERVICE_UNAVAILABLE", message: error?.message ?? "Not ready" } })
      }
      const server: Server = createServer((request, response) => {
        const path = (request.url ?? "/").split("?")[0]
        const reading = request.method === "GET" || request.method === "HEAD"
        if (path === "/metrics" && reading) {
          response.writeHead(200, { "content-type": CONTENT_TYPE })
          response.end(request.method === "HEAD" ? undefined : exposition())
          return
        }
        if (path === "/healthz" && reading) return json(response, 200, { success: true, data: { status: "ok" } })
        if (path === "/readyz" && reading) return void ready(response)
        json(response, 404, { success: false, error: { code: "NOT_FOUND", message: "Only /metrics, /healthz and /readyz are served here" } })
      })
      yield* Effect.acquireRelease(
        Effect.async<void, Error>((resume) => {
          server.once("error", (error) =>
            resume(Effect.fail(listenFailure({ name: "Metrics", host: config.host, hostVariable: "HOST", port, portVariable: "METRICS_PORT" }, error)))
          )
          server.listen(port, config.host, () => {
            resume(Effect.void)
          })
        }),
        () =>
          Effect.async<void>((resume) => {
            server.close(() => resume(Effect.void))
          })
      )
      yield* Effect.logInfo(`Metrics on http://${config.host}:${port}/metrics (probes: /healthz, /readyz)`)
    }))
