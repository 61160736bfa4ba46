/**
 * How a route knows its caller, as the contract declares it: each group names one of these
 * middlewares (middleware.ts implements them).
 */
import { HttpApiMiddleware } from "@effect/platform"
import { Schema } from "effect"
import { CurrentPrincipal } from "../../services/accounts/principal.ts"
import { ForbiddenError, InternalErrorError, RateLimitedError, UnauthorizedError, UnavailableError } from "./errors.ts"

/** `{base_url}` routes: `X-API-Key`, or `Authorization: Bearer` with an API key or access token. */
export class ApiAuthentication extends HttpApiMiddleware.Tag<ApiAuthentication>()("ApiAuthentication", {
  provides: CurrentPrincipal,
  failure: Schema.Union(UnauthorizedError, RateLimitedError, UnavailableError, InternalErrorError)
}) {}

/** Dashboard routes (`/api/*`): the session cookie set by login, or `Authorization: Bearer <access token>`. */
export class SessionAuthentication extends HttpApiMiddleware.Tag<SessionAuthentication>()("SessionAuthentication", {
  provides: CurrentPrincipal,
  failure: Schema.Union(UnauthorizedError, ForbiddenError, RateLimitedError, UnavailableError, InternalErrorError)
}) {}

/** Routes open to anyone are limited per client address. */
export class ClientRateLimit extends HttpApiMiddleware.Tag<ClientRateLimit>()("ClientRateLimit", {
  failure: Schema.Union(RateLimitedError, UnavailableError, InternalErrorError)
}) {}
