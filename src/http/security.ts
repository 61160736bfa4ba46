/**
 * How a route knows its caller, as the contract declares it: each group names one of these
 * middlewares (middleware.ts implements them).
 */
import { HttpApiMiddleware } from "@effect/platform"
import { Schema } from "effect"
import { CurrentPrincipal } from "../../services/accounts/principal.ts"
import { Forbidden, InternalError, NotFound, RateLimited, ServiceUnavailable, Unauthorized } from "../../services/errors.ts"
import { envelope } from "./errors.ts"

/** The dashboard session's cookie, set by login. */
export const SESSION_COOKIE = "mailroom_session"

/**
 * `{base_url}` routes: `X-API-Key`, or `Authorization: Bearer` with an API key or access token. A key
 * limited to some mailboxes is refused routes about the whole account (403) and what lies outside its
 * mailboxes (404, as if it did not exist).
 */
export class ApiAuthentication extends HttpApiMiddleware.Tag<ApiAuthentication>()("ApiAuthentication", {
  provides: CurrentPrincipal,
  failure: Schema.Union(
    envelope(Unauthorized),
    envelope(Forbidden),
    envelope(NotFound),
    envelope(RateLimited),
    envelope(ServiceUnavailable),
    envelope(InternalError)
  )
}) {}

/** Dashboard routes (`/api/*`): the session cookie set by login, or `Authorization: Bearer <access token>`. */
export class SessionAuthentication extends HttpApiMiddleware.Tag<SessionAuthentication>()("SessionAuthentication", {
  provides: CurrentPrincipal,
  failure: Schema.Union(
    envelope(Unauthorized),
    envelope(Forbidden),
    envelope(RateLimited),
    envelope(ServiceUnavailable),
    envelope(InternalError)
  )
}) {}

/** Routes open to anyone are limited per client address. */
export class ClientRateLimit extends HttpApiMiddleware.Tag<ClientRateLimit>()("ClientRateLimit", {
  failure: Schema.Union(envelope(RateLimited), envelope(ServiceUnavailable), envelope(InternalError))
}) {}
