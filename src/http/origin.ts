/**
 * The request's origin (its address and User-Agent) for what it does: the account's activity records
 * it (services/accounts/activity.ts).
 */
import { HttpServerRequest } from "@effect/platform"
import { Effect, Option } from "effect"
import { RequestOrigin } from "../../services/accounts/activity.ts"

/** Where `request` came from: its client's address and User-Agent. */
export const originOf = (request: HttpServerRequest.HttpServerRequest) => ({
  userAgent: request.headers["user-agent"],
  address: Option.getOrUndefined(request.remoteAddress)
})

/** `effect`, told where the request it serves came from. */
export const fromRequest = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => Effect.provideService(effect, RequestOrigin, originOf(request)))
