/**
 * Request-level middleware: authentication with rate limiting (one round trip), the per-address
 * limit on open routes, and the `X-RateLimit-*` headers on every response they cover, errors
 * included. A request refused for a missing or invalid credential has no account to count against,
 * so it counts against its client address, as open routes do (DESIGN.md §4): its 401 carries that
 * limiter's headers, and an address past the limit is answered 429 (which also slows key guessing).
 */
import { HttpApp, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect, FiberRef, Layer, Option } from "effect"
import { type Authenticated, Authenticator, bearerCredential, type Credential } from "../../services/accounts/authenticator.ts"
import { MailboxReach } from "../../services/accounts/reach.ts"
import { Forbidden, RateLimited, Unauthorized } from "../../services/errors.ts"
import { DependencyHealth } from "../../services/health/dependency-health.ts"
import type { Decision } from "../../services/ratelimit/rate-limiter.ts"
import { clientWindows, RateLimiter } from "../../services/ratelimit/rate-limiter.ts"
import { AppConfig } from "../config.ts"
import { ApiAuthentication, ClientRateLimit, SESSION_COOKIE, SessionAuthentication } from "./security.ts"
import { MAX_JSON_BYTES, maxBodyBytes } from "./body-limits.ts"
import { orUnavailable } from "./infra.ts"
import { admit } from "./reach.ts"


/** A limit's `X-RateLimit-*` headers. */
export const rateHeaders = (decision: Pick<Decision, "limit" | "remaining" | "resetAt">) => ({
  "x-ratelimit-limit": String(decision.limit),
  "x-ratelimit-remaining": String(decision.remaining),
  "x-ratelimit-reset": String(decision.resetAt)
})

/** Whether a limiter has decided this request (each request runs in a fiber of its own). */
const rateDecided = FiberRef.unsafeMake(false)

/**
 * Put the headers on the response, whatever it turns out to be; except a 429 of another limit
 * (searches, failed logins), which carries that limit's own (errors.ts `errorResponse`).
 */
const announce = (decision: Decision) =>
  Effect.zipRight(
    FiberRef.set(rateDecided, true),
    HttpApp.appendPreResponseHandler((_request, response) =>
      Effect.succeed(
        response.headers["x-ratelimit-limit"] === undefined ? HttpServerResponse.setHeaders(response, rateHeaders(decision)) : response
      )
    )
  )

/**
 * A route with a per-minute limit of its own besides the request limit (searches): its decision's
 * headers replace the request limit's when it has no more left, so that the headers always describe
 * the limit that refuses first (a client pacing itself by them is not surprised by a 429).
 */
export const announceTighter = (decision: Decision) =>
  HttpApp.appendPreResponseHandler((_request, response) => {
    const said = Number(response.headers["x-ratelimit-remaining"] ?? Number.POSITIVE_INFINITY)
    return Effect.succeed(decision.remaining <= said ? HttpServerResponse.setHeaders(response, rateHeaders(decision)) : response)
  })

const enforce = ({ decision, principal }: Authenticated) =>
  Effect.zipRight(
    announce(decision),
    decision.allowed
      ? Effect.succeed(principal)
      : Effect.fail(RateLimited.of({ limit: decision.limit, window: decision.window, retryAfter: decision.retryAfter, resetAt: decision.resetAt }))
  )

/** Count one unauthenticated request against its client address's limit (300 a minute): the decision. */
export const takeForAddress = (limiter: RateLimiter["Type"]) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const address = Option.getOrElse(request.remoteAddress, () => "unknown")
    return yield* limiter.take(`ip:${address}`, clientWindows).pipe(orUnavailable)
  })

/** Count one request against the client address's limit; announce it, and refuse past it. */
const limitByAddress = (limiter: RateLimiter["Type"]) =>
  Effect.gen(function*() {
    const decision = yield* takeForAddress(limiter)
    yield* announce(decision)
    if (!decision.allowed) {
      return yield* RateLimited.of({ limit: decision.limit, window: decision.window, retryAfter: decision.retryAfter, resetAt: decision.resetAt })
    }
  })

/**
 * SPEC: every response carries the rate-limit headers. One that no limiter decided (no route
 * matched; refused before authentication: a body too large or not JSON, a cookie write from another
 * origin) gets its client address's, the limit unauthenticated requests count against, read without
 * counting it: such a refusal spends nothing (the input rules' promise), and a client past its
 * address's limit still hears why its request was wrong. Best effort: with the counters unreachable
 * the answer goes out as it is, since a 404 or a 415 must not turn into a 503.
 */
export const withAddressLimit = (limiter: RateLimiter["Type"]) => (response: HttpServerResponse.HttpServerResponse) =>
  Effect.gen(function*() {
    if (yield* FiberRef.get(rateDecided)) return response
    const request = yield* HttpServerRequest.HttpServerRequest
    const address = Option.getOrElse(request.remoteAddress, () => "unknown")
    const decision = yield* limiter.peek(`ip:${address}`, clientWindows)
    return HttpServerResponse.setHeaders(response, rateHeaders(decision))
  }).pipe(Effect.orElseSucceed(() => response))

/** Authenticate, or refuse as unauthenticated: counted against the address, then 401 (or 429). */
const authenticated = (
  authenticator: Authenticator,
  limiter: RateLimiter["Type"],
  credential: Credential
) =>
  authenticator.authenticate(credential).pipe(
    orUnavailable,
    Effect.catchTag("Unauthorized", (refusal) => Effect.zipRight(limitByAddress(limiter), Effect.fail(refusal))),
    Effect.flatMap(enforce)
  )

const bearer = (request: HttpServerRequest.HttpServerRequest) => {
  const header = request.headers["authorization"]
  if (header === undefined) return Option.none<string>()
  const match = /^Bearer\s+(.+)$/i.exec(header.trim())
  return match ? Option.some(match[1]!.trim()) : Option.none<string>()
}

/** The credential the API routes (and MCP) take: `X-API-Key`, else `Authorization: Bearer` (a key or an access token). */
export const keyOrBearer = (request: HttpServerRequest.HttpServerRequest): Option.Option<Credential> => {
  const apiKey = request.headers["x-api-key"]?.trim()
  return apiKey ? Option.some({ kind: "apiKey", secret: apiKey }) : Option.map(bearer(request), bearerCredential)
}

/**
 * The credential a request on `surface` was authenticated with, read as ApiAuthentication and
 * SessionAuthentication read it: for a long-lived answer (an event stream) that asks again whether it
 * still works.
 */
export const credentialOf = (request: HttpServerRequest.HttpServerRequest, surface: "api" | "session"): Option.Option<Credential> => {
  if (surface === "api") return keyOrBearer(request)
  const cookie = request.cookies[SESSION_COOKIE]
  return Option.orElse(
    Option.map(bearer(request), (secret): Credential => ({ kind: "accessToken", secret })),
    () => (cookie ? Option.some<Credential>({ kind: "cookie", secret: cookie }) : Option.none())
  )
}

const missing = Unauthorized.of("Missing credential: send X-API-Key or Authorization: Bearer")

/** API keys, and access tokens; a key limited to some mailboxes reaches the route only as reach.ts says. */
export const ApiAuthenticationLive = Layer.effect(
  ApiAuthentication,
  Effect.gen(function*() {
    const authenticator = yield* Authenticator
    const limiter = yield* RateLimiter
    const health = yield* DependencyHealth
    const reach = yield* MailboxReach
    return Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const credential = keyOrBearer(request)
      if (Option.isNone(credential)) return yield* Effect.zipRight(limitByAddress(limiter), missing)
      const principal = yield* authenticated(authenticator, limiter, credential.value)
      yield* admit(reach, principal).pipe(orUnavailable)
      return principal
    }).pipe(Effect.provideService(DependencyHealth, health))
  })
).pipe(Layer.provide(MailboxReach.Default))

const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"])

const LOOPBACK_HOSTS = ["localhost", "127.0.0.1", "[::1]"]

/**
 * The origins our own pages are served from: APP_URL's, and when that names this machine by one
 * loopback name (localhost, as it does by default), the same port by the others: the server says it
 * listens on 127.0.0.1, and a person opening that address is on our page all the same.
 */
const ownOrigins = (appUrl: string): ReadonlySet<string> => {
  const url = new URL(appUrl)
  if (!LOOPBACK_HOSTS.includes(url.hostname)) return new Set([url.origin])
  return new Set(LOOPBACK_HOSTS.map((host) => `${url.protocol}//${host}${url.port === "" ? "" : `:${url.port}`}`))
}

export const SessionAuthenticationLive = Layer.effect(
  SessionAuthentication,
  Effect.gen(function*() {
    const authenticator = yield* Authenticator
    const limiter = yield* RateLimiter
    const { appUrl } = yield* AppConfig
    const health = yield* DependencyHealth
    const origins = ownOrigins(appUrl)
    return Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const token = bearer(request)
      if (Option.isSome(token)) return yield* authenticated(authenticator, limiter, { kind: "accessToken", secret: token.value })
      const cookie = request.cookies[SESSION_COOKIE]
      if (!cookie) {
        return yield* Effect.zipRight(
          limitByAddress(limiter),
          Unauthorized.of("Missing session: log in, or send Authorization: Bearer <access token>")
        )
      }
      // Cookies ride along on cross-site requests; a write must come from our own pages.
      if (!SAFE_METHODS.has(request.method) && !origins.has(request.headers["origin"] ?? "")) {
        return yield* new Forbidden({ message: "Cross-origin request refused", details: { origin: request.headers["origin"] ?? null } })
      }
      return yield* authenticated(authenticator, limiter, { kind: "cookie", secret: cookie })
    }).pipe(Effect.provideService(DependencyHealth, health))
  })
)

export const ClientRateLimitLive = Layer.effect(
  ClientRateLimit,
  Effect.gen(function*() {
    const limiter = yield* RateLimiter
    const health = yield* DependencyHealth
    return limitByAddress(limiter).pipe(Effect.provideService(DependencyHealth, health))
  })
)

/**
 * The most the body of `request` may be (body-limits.ts): a message route's larger limit only for a
 * caller whose credential names an account, so that no one without one makes the server read more
 * than 1 MiB (the body is read, and held to the input rules, before the route authenticates).
 */
export const bodyLimit = (authenticator: Authenticator) => (request: HttpServerRequest.HttpServerRequest): Effect.Effect<number> => {
  const max = maxBodyBytes(request.method, request.url.split("?")[0]!)
  if (max === MAX_JSON_BYTES) return Effect.succeed(max)
  const cookie = request.cookies[SESSION_COOKIE]
  const credential = Option.orElse(keyOrBearer(request), () =>
    cookie ? Option.some<Credential>({ kind: "cookie", secret: cookie }) : Option.none())
  if (Option.isNone(credential)) return Effect.succeed(MAX_JSON_BYTES)
  // Refused or unreachable, the credential earns no more than anyone: the route answers why.
  return authenticator.identify(credential.value).pipe(Effect.as(max), Effect.orElseSucceed(() => MAX_JSON_BYTES))
}
