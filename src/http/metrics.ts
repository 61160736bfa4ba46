/**
 * The API's metrics: requests by route template, method and status, and their latency. The route
 * is the endpoint's path template (`/v1/emails/:id`), found by matching the request against the
 * API's own endpoints, so an id never becomes a label; anything else is `unmatched` (or one of the
 * few pages outside the API: /metrics, /docs).
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
  onEndpoint: ({ endpoint }) => routes.on(endpoint.method, endpoint.path, endpoint.path)
})
for (const page of ["/metrics", "/docs", "/v1/openapi.json"] as const) routes.on(["GET", "HEAD"], page, page)

export const routeOf = (method: string, url: string): string => routes.find(method, url)?.handler ?? "unmatched"

/** Count one answered request; `seconds` since it arrived. */
export const recordRequest = (route: string, method: string, status: number, seconds: number) =>
  Effect.sync(() => {
    const tags = [MetricLabel.make("route", route), MetricLabel.make("method", method)]
    requests.unsafeUpdate(1, [...tags, MetricLabel.make("status", String(status))])
    duration.unsafeUpdate(seconds, tags)
  })
