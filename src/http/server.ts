/**
 * The api role: the HttpApi served over node:http, with SPEC's envelope on every answer,
 * OpenAPI at /v1/openapi.json and its docs page at /docs.
 */
import { HttpApiBuilder, type HttpApp, HttpRouter, HttpServer, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { Effect, Layer, Option } from "effect"
import { createServer, type IncomingMessage, type Server, type ServerResponse, STATUS_CODES } from "node:http"
import type { Duplex } from "node:stream"
import { Authenticator } from "../../services/accounts/authenticator.ts"
import { DependencyHealth } from "../../services/health/dependency-health.ts"
import { RateLeases } from "../../services/ratelimit/leases.ts"
import { RateLimiter } from "../../services/ratelimit/rate-limiter.ts"
import { AppConfig } from "../config.ts"
import { CONTENT_TYPE as METRICS_CONTENT_TYPE, exposition } from "../metrics.ts"
import { MailroomApi } from "./api.ts"
import { recordRequest, routeOf } from "./metrics.ts"
import { ApiKeysHandlers, DashboardApiKeysHandlers } from "./api-keys/http.ts"
import { AuthHandlers } from "./auth/http.ts"
import { BillingHandlers, BillingWebhookHandlers, DashboardBillingHandlers } from "./billing/http.ts"
import { PaymentPagesLive } from "./billing/payment-pages.ts"
import { DashboardLive } from "../dashboard/serve.ts"
import { DashboardDomainsHandlers, DomainListHandlers, DomainsHandlers } from "./domains/http.ts"
import { DashboardEmailsHandlers, EmailsHandlers } from "./emails/http.ts"
import { DashboardEventsHandlers, EventsHandlers } from "./events/http.ts"
import { McpLive } from "./mcp/http.ts"
import { OpenApiRoutesLive } from "./openapi.ts"
import { errorResponse, toApiError } from "./errors.ts"
import { HealthHandlers } from "./health/http.ts"
import { isBodyTooLarge, tooLarge } from "./body-limits.ts"
import { screen } from "./input-rules.ts"
import { DashboardMailboxesHandlers, MailboxesHandlers } from "./mailboxes/http.ts"
import { DashboardOutboundHandlers, OutboundHandlers } from "./outbound/http.ts"
import { UnsubscribePagesLive } from "./outbound/unsubscribe-pages.ts"
import { DashboardForwardingHandlers, ForwardingHandlers } from "./forwarding/http.ts"
import { AutoRepliesHandlers, DashboardAutoRepliesHandlers } from "./auto-replies/http.ts"
import { DashboardFiltersHandlers, FiltersHandlers } from "./filters/http.ts"
import { DashboardInvitationsHandlers, InvitationsHandlers } from "./invitations/http.ts"
import { DashboardMeetingsHandlers, MeetingsHandlers } from "./meetings/http.ts"
import { DashboardScheduleHandlers, ScheduleHandlers } from "./schedule/http.ts"
import { ForwardingPagesLive } from "./forwarding/pages.ts"
import { ApiAuthenticationLive, bodyLimit, ClientRateLimitLive, SessionAuthenticationLive, withAddressLimit } from "./middleware.ts"
import { DashboardSearchHandlers, SearchHandlers } from "./search/http.ts"
import { DashboardStatsHandlers, StatsHandlers } from "./stats/http.ts"
import { DashboardSenderListsHandlers, SenderListsHandlers } from "./sender-lists/http.ts"
import { DashboardWebhooksHandlers, WebhooksHandlers } from "./webhooks/http.ts"
import { listenFailure } from "../listen-failure.ts"
import { trustedProxies } from "../trusted-proxies.ts"
import { withClientAddress } from "./client-address.ts"

/**
 * Every answer counted by route template, method and status (src/http/metrics.ts); `GET /metrics`
 * answered here, before the API's routes and input rules.
 */
const measured = (app: HttpApp.Default): HttpApp.Default =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const started = performance.now()
    const path = request.url.split("?")[0]!
    const response = path === "/metrics" && (request.method === "GET" || request.method === "HEAD")
      ? HttpServerResponse.text(exposition(), { contentType: METRICS_CONTENT_TYPE })
      : yield* app
    yield* recordRequest(routeOf(request.method, path), request.method, response.status, (performance.now() - started) / 1000)
    return response
  })

/**
 * The API's own paths (the versioned API and the dashboard's), whose every answer carries rate-limit
 * headers; not the payment provider's calls, which prove themselves by signature and are no client's.
 */
const isApiPath = (url: string) => /^\/(?:v1|api)(?:[/?]|$)/.test(url) && !url.startsWith("/v1/billing/webhook")

/**
 * Around every route: refuse oversized bodies before reading them, cap what is read, hold every
 * request to the input rules (input-rules.ts: JSON bodies, bounded nesting, no NUL), answer every
 * failure (decode errors, unknown routes, defects) with the error envelope, give an API answer
 * that no limiter decided its address's rate-limit headers (middleware.ts `withAddressLimit`), and
 * every answer `X-Content-Type-Options: nosniff`.
 */
const EnvelopeMiddleware = HttpApiBuilder.middleware(Effect.map(Effect.all([DependencyHealth, RateLimiter, Authenticator]), ([health, limiter, authenticator]) => (app: HttpApp.Default) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const max = yield* bodyLimit(authenticator)(request)
    if (Number(request.headers["content-length"] ?? 0) > max) return errorResponse(tooLarge(max))
    return yield* Effect.flatMap(screen(request), (screened) => Effect.provideService(app, HttpServerRequest.HttpServerRequest, screened)).pipe(
      // A body without a length (chunked) is cut off where it passes the limit.
      HttpServerRequest.withMaxBodySize(Option.some(max)),
      Effect.catchIf(isBodyTooLarge, () => Effect.fail(tooLarge(max)))
    )
  }).pipe(
    Effect.catchAllCause((cause) => Effect.map(toApiError(cause), errorResponse)),
    Effect.flatMap((response) =>
      Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
        isApiPath(request.url) ? withAddressLimit(limiter)(response) : Effect.succeed(response))
    ),
    // No answer is read as anything but the type it says (a browser sniffing JSON that quotes mail as HTML).
    Effect.map((response) =>
      response.headers["x-content-type-options"] === undefined ? HttpServerResponse.setHeader(response, "x-content-type-options", "nosniff") : response
    ),
    Effect.provideService(DependencyHealth, health),
    measured
  )
))

const Handlers = Layer.mergeAll(
  HealthHandlers,
  AuthHandlers,
  ApiKeysHandlers,
  DashboardApiKeysHandlers,
  BillingHandlers,
  DashboardBillingHandlers,
  BillingWebhookHandlers,
  MailboxesHandlers,
  DashboardMailboxesHandlers,
  EmailsHandlers,
  DashboardEmailsHandlers,
  OutboundHandlers,
  DashboardOutboundHandlers,
  InvitationsHandlers,
  DashboardInvitationsHandlers,
  MeetingsHandlers,
  DashboardMeetingsHandlers,
  ScheduleHandlers,
  DashboardScheduleHandlers,
  WebhooksHandlers,
  DashboardWebhooksHandlers,
  SenderListsHandlers,
  DashboardSenderListsHandlers,
  ForwardingHandlers,
  DashboardForwardingHandlers,
  AutoRepliesHandlers,
  DashboardAutoRepliesHandlers,
  FiltersHandlers,
  DashboardFiltersHandlers,
  DomainsHandlers,
  DashboardDomainsHandlers,
  DomainListHandlers,
  SearchHandlers,
  DashboardSearchHandlers,
  StatsHandlers,
  DashboardStatsHandlers,
  EventsHandlers,
  DashboardEventsHandlers
)
const Middleware = Layer.mergeAll(ApiAuthenticationLive, SessionAuthenticationLive, ClientRateLimitLive).pipe(
  Layer.provideMerge(Layer.mergeAll(Authenticator.Default, RateLeases.Default, RateLimiter.layer))
)

/**
 * The API: every feature's handlers, each with the domain services it uses. What stays open are the
 * adapters and settings, chosen in src/app.ts: SQL, bus, payment provider, DNS, vectors, settings.
 */
export const ApiLive = HttpApiBuilder.api(MailroomApi).pipe(
  Layer.provide(Handlers),
  Layer.provide(Middleware)
)

/**
 * A request node's HTTP parser refuses (a malformed Content-Length, bytes not allowed in a header,
 * headers over the limit) never reaches the app; it is answered here, with the envelope too, and the
 * connection closed. Nothing is written over a response already under way on the connection.
 */
const clientErrorReply = (error: NodeJS.ErrnoException, socket: Duplex) => {
  // `_httpMessage` is node's own record of the response in flight on this socket (what its default handler checks).
  const inFlight = (socket as Duplex & { readonly _httpMessage?: { readonly headersSent: boolean } | null })._httpMessage
  if (error.code === "ECONNRESET" || !socket.writable || inFlight?.headersSent) {
    socket.destroy()
    return
  }
  const [status, code, message] = error.code === "HPE_HEADER_OVERFLOW"
    ? [431, "HEADERS_TOO_LARGE", "The request headers are too large"]
    : error.code === "ERR_HTTP_REQUEST_TIMEOUT"
    ? [408, "REQUEST_TIMEOUT", "The request was not received in time"]
    : [400, "BAD_REQUEST", "Malformed HTTP request"]
  const body = JSON.stringify({ success: false, error: { code, message } })
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`
  )
}

/**
 * A request that arrives while the server drains (pipelined behind one in flight, or on a kept-alive
 * connection) is answered 503 here, and its connection closed, so the client retries elsewhere.
 */
const shuttingDownReply = (response: ServerResponse) => {
  const body = JSON.stringify({ success: false, error: { code: "SERVICE_UNAVAILABLE", message: "The server is shutting down; retry", details: { retry_after: 1 } } })
  response.writeHead(503, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(body),
    "retry-after": "1",
    connection: "close"
  })
  response.end(body)
}

/** How long a client that goes on sending a refused body is read after its answer, before it is cut off. */
const LINGER_MS = 2_000

/**
 * A chunked body cut off at its limit (413): the platform stops reading it by destroying the request,
 * which destroys the connection before the answer is written, and the client saw a reset instead of
 * the 413. Here the rest is read and thrown away instead, the connection is closed after the answer
 * (`Connection: close`), and a client still sending LINGER_MS after it is cut off. (A body with a
 * Content-Length over the limit is answered before it is read; node then reads the rest itself.)
 */
const answerBeforeClosing = (request: IncomingMessage, response: ServerResponse) => {
  if (request.headers["transfer-encoding"] === undefined) return
  const destroy = request.destroy.bind(request)
  request.destroy = (error?: Error) => {
    if (request.complete || error !== undefined) return destroy(error)
    response.shouldKeepAlive = false
    request.resume()
    const cut = () => {
      if (!request.complete) destroy()
    }
    response.once("finish", () => setTimeout(cut, LINGER_MS).unref())
    // An answer that never comes does not keep the connection either.
    setTimeout(cut, 30_000).unref()
    return request
  }
}

/**
 * How long an idle connection is kept for the client's next request: past a load balancer's idle
 * time-out (60 s on the common ones), so that the balancer, not this server, closes it; a server that
 * closes first races the balancer's next request on it, which then fails (a reset, a 502). Node's own
 * 5 s lost that race to clients whose process was busy for a moment (seen in the fuzz suite, under load).
 */
const KEEP_ALIVE_MS = 65_000

/**
 * The drain: node's close stops taking connections and closes the idle ones, but a connection whose
 * answer was still in flight would then be kept for the whole keep-alive, well past SHUTDOWN_TIMEOUT.
 * Until the server is closed, each connection is closed as soon as it is idle.
 *
 * A connection that has asked nothing yet is not idle to node: one a client opened ahead of its next
 * request (fetch's pool does, as do load balancers) held every shutdown for SHUTDOWN_TIMEOUT. Those are
 * closed by the same sweep; a connection upgraded to a WebSocket is its session's to close (with 1001).
 * (`asked` is told of each request by the server's early request listener, createApiServer's.)
 */
const closingIdleConnections = (server: Server) => {
  const unasked = new Set<Duplex>()
  server.on("connection", (socket: Duplex) => {
    unasked.add(socket)
    socket.once("close", () => unasked.delete(socket))
  })
  server.on("upgrade", (request: IncomingMessage) => unasked.delete(request.socket))
  const close = server.close.bind(server)
  server.close = ((callback?: (error?: Error) => void) => {
    const sweep = setInterval(() => {
      server.closeIdleConnections()
      for (const socket of unasked) socket.destroy()
    }, 50)
    server.once("close", () => clearInterval(sweep))
    return close(callback)
  }) as Server["close"]
  return { server, asked: (request: IncomingMessage) => unasked.delete(request.socket) }
}

/**
 * The API's node server, and its drain. The app's services (their batched statements, the bus) are
 * released when the HTTP layer's scope closes, which is before the platform closes the server: a
 * request still being answered then found them gone and was answered 503 "shutting down", a send
 * among them possibly stored all the same. `drained` (HttpServerLive runs it before anything is
 * released) stops taking connections and requests, answering any that still arrives 503
 * (`shuttingDownReply`), and waits for the answers in flight.
 */
const createApiServer = () => {
  const { asked, server } = closingIdleConnections(createServer({ keepAliveTimeout: KEEP_ALIVE_MS }))
  server.on("clientError", clientErrorReply)
  let draining = false
  let inFlight = 0
  const idle: Array<() => void> = []
  // Registered before the app's listener, so it runs first.
  const ours = (request: IncomingMessage, response: ServerResponse) => {
    asked(request)
    answerBeforeClosing(request, response)
    if (draining) return shuttingDownReply(response)
    inFlight++
    response.once("close", () => {
      if (--inFlight === 0) for (const resume of idle.splice(0)) resume()
    })
  }
  server.on("request", ours)
  const drained = Effect.async<void>((resume) => {
    draining = true
    // The app's listener goes now: what arrives from here on is answered by `ours` alone.
    for (const listener of server.listeners("request")) if (listener !== ours) server.off("request", listener as typeof ours)
    if (server.listening) server.close()
    if (inFlight === 0) return resume(Effect.void)
    idle.push(() => resume(Effect.void))
  })
  return { server, drained }
}

/** Node's HTTP parser takes at most 16 KiB of request line and headers: no path parameter is longer. */
const MAX_PATH_PARAM = 16 * 1024

export const HttpServerLive = Layer.unwrapEffect(
  Effect.map(AppConfig, (config) => {
    const { drained, server } = createApiServer()
    const serving = HttpApiBuilder.serve(
      config.trustedProxies.length === 0 ? undefined : withClientAddress(trustedProxies(config.trustedProxies))
    ).pipe(
      Layer.provide(OpenApiRoutesLive),
      Layer.provide(PaymentPagesLive),
      Layer.provide(UnsubscribePagesLive),
      Layer.provide(ForwardingPagesLive),
      Layer.provide(DashboardLive),
      // The MCP endpoint authenticates and limits by itself, with the API's authenticator and limiter.
      Layer.provide(McpLive.pipe(Layer.provide(Middleware))),
      Layer.provide(EnvelopeMiddleware.pipe(Layer.provide(Layer.mergeAll(RateLimiter.layer, Authenticator.Default)))),
      Layer.provide(ApiLive),
      // A path's id may be as long as a request line can carry: past the router's 100 characters it
      // matched no route ("No such route") instead of its route's 404 naming the id.
      Layer.provide(HttpRouter.setRouterConfig({ maxParamLength: MAX_PATH_PARAM })),
      HttpServer.withLogAddress,
      Layer.provide(
        NodeHttpServer.layer(() => server, { port: config.port, host: config.host }).pipe(
          Layer.mapError((error) =>
            listenFailure({ name: "HTTP", host: config.host, hostVariable: "HOST", port: config.port, portVariable: "PORT" }, error)
          )
        )
      )
    )
    // Built after the server and everything it serves, so released first: the answers in flight are
    // finished while the services they use are still there.
    return Layer.scopedDiscard(Effect.addFinalizer(() => drained)).pipe(Layer.provide(serving))
  })
)

