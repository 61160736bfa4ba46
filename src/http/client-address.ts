/**
 * Behind trusted proxies (`TRUSTED_PROXIES`), every route sees the client's address rather than the
 * proxy's (src/trusted-proxies.ts): the limits per address, the account's activity, new-sign-in notices.
 */
import type { HttpApp } from "@effect/platform"
import { HttpServerRequest } from "@effect/platform"
import { Effect, Option } from "effect"
import { clientAddress, type TrustedProxies } from "../trusted-proxies.ts"

export const withClientAddress = (proxies: TrustedProxies) => (app: HttpApp.Default): HttpApp.Default =>
  Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
    const peer = Option.getOrUndefined(request.remoteAddress)
    const client = clientAddress(peer, request.headers["x-forwarded-for"], proxies)
    return client === undefined || client === peer
      ? app
      : Effect.provideService(app, HttpServerRequest.HttpServerRequest, request.modify({ remoteAddress: client }))
  })
