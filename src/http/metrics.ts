/**
 * The API's metrics: requests by route template, method and status, and their latency. The route
 * is the endpoint's path template (`/v1/emails/:id`), found by matching the request against the
 * API's own endpoints, so an id never becomes a label, or one of the few pages outside the API
 * (`pages`); anything else is `unmatched`.
 */
import { HttpApi } from "@effect/platform"
import { Effect, Metric, MetricBoundaries, MetricLabel } from "effect"
import * as FindMyWay from "find-my-way-ts"
import { MailroomApi } from "./api.ts"

const requests = Metric.counter("mailroom_http_requests_total", {
  description: "HTTP requests answered, by route template, method and status",
  incremental: true
})
const duration = Metric.histogram(
  "mailroom_http_request_duration_seconds",
  MetricBoundaries.fromIterable([0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]),
  "How long the API took to answer a request, by route template and method"
)

const routes = FindMyWay.make<string>({ ignoreTrailingSlash: true })
HttpApi.reflect(MailroomApi, {
  onGroup: () => {},
  // A GET route answers HEAD too.
  onEndpoint: ({ endpoint }) => routes.on(endpoint.method === "GET" ? ["GET", "HEAD"] : endpoint.method, endpoint.path, endpoint.path)
})
/**
 * The pages and endpoints outside the API's contract, as their routers serve them: the operators'
 * and the docs', the dashboard's (src/dashboard/serve.ts), the payment provider's stand-in pages
 * (billing/payment-pages.ts), the pages mailed links open (outbound/unsubscribe-pages.ts,
 * forwarding/pages.ts) and MCP.
 */
const pages: ReadonlyArray<readonly [ReadonlyArray<string>, `/${string}`]> = [
  [["GET", "HEAD"], "/metrics"],
  [["GET", "HEAD"], "/docs"],
  [["GET", "HEAD"], "/v1/openapi.json"],
  [["GET", "HEAD"], "/"],
  [["GET", "HEAD"], "/favicon.ico"],
  [["GET", "HEAD"], "/assets/:version/*"],
  [["GET", "HEAD", "POST"], "/billing/checkout/:id"],
  [["GET", "HEAD", "POST"], "/billing/portal/:id"],
  [["GET", "HEAD", "POST"], "/unsubscribe/:token"],
  [["GET", "HEAD", "POST"], "/forwarding/:token"],
  [["GET", "POST", "DELETE"], "/mcp"]
]
for (const [methods, page] of pages) routes.on([...methods], page, page)

export const routeOf = (method: string, url: string): string => routes.find(method, url)?.handler ?? "unmatched"

/**
 * The label arrays of each series, made once: Effect finds a series' state by the identity of the
 * array it is given (a new array costs a registry look-up with hashing, ~5 µs; the same array, a
 * map hit). Routes and methods are few (unknown paths are all `unmatched`; node's HTTP parser
 * takes only the methods it knows), so this stays small.
 */
const seriesLabels = new Map<string, { readonly request: ReadonlyArray<MetricLabel.MetricLabel>; readonly duration: ReadonlyArray<MetricLabel.MetricLabel> }>()

const labelsOf = (route: string, method: string, status: number) => {
  const key = `${route} ${method} ${status}`
  let labels = seriesLabels.get(key)
  if (labels === undefined) {
    const timing = [MetricLabel.make("route", route), MetricLabel.make("method", method)]
    const sameTiming = [...seriesLabels.values()].find((other) =>
      other.duration[0]!.value === route && other.duration[1]!.value === method
    )?.duration
    labels = { request: [...timing, MetricLabel.make("status", String(status))], duration: sameTiming ?? timing }
    seriesLabels.set(key, labels)
  }
  return labels
}

/** Count one answered request; `seconds` since it arrived. */
export const recordRequest = (route: string, method: string, status: number, seconds: number) =>
  Effect.sync(() => {
    const labels = labelsOf(route, method, status)
    requests.unsafeUpdate(1, labels.request)
    duration.unsafeUpdate(seconds, labels.duration)
  })
