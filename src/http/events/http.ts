/**
 * The event stream over HTTP as Server-Sent Events (https://html.spec.whatwg.org/#server-sent-events):
 * a `retry` hint first, then one SSE event per logged event and a comment per heartbeat; and over a
 * WebSocket (ws.ts).
 */
import { HttpApiBuilder, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect, Layer, Option, Stream } from "effect"
import { Authenticator } from "../../../services/accounts/authenticator.ts"
import { CurrentPrincipal, type Principal } from "../../../services/accounts/principal.ts"
import { Unauthorized } from "../../../services/errors.ts"
import { EventFeed, type Frame } from "../../../services/events/feed.ts"
import { EventLog } from "../../../services/events/log.ts"
import { Lifecycle } from "../../../services/lifecycle.ts"
import { MailroomApi } from "../api.ts"
import { orUnavailable } from "../infra.ts"
import { credentialOf } from "../middleware.ts"
import type { EventStreamHeaders, EventStreamParams } from "./api.ts"
import { notAnUpgrade, serveSocket } from "./ws.ts"

/** How long a client waits before reconnecting (ms), per the SSE `retry` field. */
const RECONNECT_MS = 2000

const encoder = new TextEncoder()

/** Payloads are single-line JSON; ids and kinds are ours. Nothing here can break a frame. */
const frame = (item: Frame): Uint8Array =>
  encoder.encode(
    item._tag === "Heartbeat"
      ? ": heartbeat\n\n"
      : `id: ${item.event.eventId}\nevent: ${item.event.kind}\ndata: ${item.event.payload}\n\n`
  )

/** The mailboxes a principal reaches, as a comparable text ("*": the whole account). */
const reachOf = (principal: Principal) => Option.match(principal.mailboxes, { onNone: () => "*", onSome: (ids) => [...ids].sort().join(",") })

/**
 * Whether the request's credential still works as it did when the stream opened (middleware.ts reads
 * it as the request was authenticated): a stream asks before every frame, and ends once it does not.
 * A key whose mailboxes changed since ends it too: the stream's filter was its reach then, and a
 * narrowed key must hear nothing more of a mailbox taken from it (the client reconnects under the new one).
 */
const recheckOf = (authenticator: Authenticator, surface: "api" | "session", opened: Principal) =>
  Effect.map(HttpServerRequest.HttpServerRequest, (request) =>
    Option.match(credentialOf(request, surface), {
      onNone: () => Unauthorized.of("Missing credential"),
      onSome: (credential) =>
        Effect.flatMap(authenticator.identify(credential), (now) =>
          reachOf(now) === reachOf(opened)
            ? Effect.void
            : Unauthorized.of("The key's mailboxes changed since this stream opened: connect again"))
    }))

/** One handler, served at /v1/events (API keys) and /api/events (dashboard sessions). */
const makeStream = (surface: "api" | "session") =>
  Effect.gen(function*() {
    const feed = yield* EventFeed
    const authenticator = yield* Authenticator
    return ({ headers, urlParams }: { readonly headers: typeof EventStreamHeaders.Type; readonly urlParams: typeof EventStreamParams.Type }) =>
      Effect.gen(function*() {
        const principal = yield* CurrentPrincipal
        const fromHeader = Option.fromNullable(headers["last-event-id"]).pipe(Option.filter((id) => id !== ""))
        const events = yield* feed.open({
          userId: principal.userId,
          plan: principal.plan,
          filter: {
            kinds: urlParams.types,
            mailboxId: urlParams.mailbox_id,
            mailboxes: Option.getOrUndefined(principal.mailboxes),
            labels: urlParams.labels
          },
          after: Option.orElse(fromHeader, () => Option.fromNullable(urlParams.after)),
          afterField: Option.isSome(fromHeader) ? "last-event-id" : "after",
          recheck: yield* recheckOf(authenticator, surface, principal)
        }).pipe(orUnavailable)
        const body = Stream.concat(
          Stream.make(encoder.encode(`retry: ${RECONNECT_MS}\n\n`)),
          // An error after the headers cannot be answered with an envelope: the stream just ends, and
          // the client reconnects with its last id (a credential that stopped working, a mailbox
          // filtered to that was deleted, or every mailbox of a limited key: and is refused, 401 or 404).
          events.pipe(
            Stream.map(frame),
            Stream.catchTags({ Unauthorized: () => Stream.empty, NotFound: () => Stream.empty }),
            Stream.catchAllCause((cause) => Stream.fromEffect(Effect.logWarning("An event stream failed", cause)).pipe(Stream.drain))
          )
        )
        return HttpServerResponse.stream(body, {
          contentType: "text/event-stream",
          headers: { "cache-control": "no-cache, no-transform", "x-accel-buffering": "no" }
        })
      })
  })

/** `GET /v1/ws`: the handshake upgrades, and the session runs until either side closes. */
const makeSocket = Effect.gen(function*() {
  const feed = yield* EventFeed
  const lifecycle = yield* Lifecycle
  const authenticator = yield* Authenticator
  return () =>
    Effect.gen(function*() {
      const principal = yield* CurrentPrincipal
      const request = yield* HttpServerRequest.HttpServerRequest
      if (request.headers["upgrade"]?.toLowerCase() !== "websocket") return yield* notAnUpgrade()
      const recheck = yield* recheckOf(authenticator, "api", principal)
      // `Upgrade: websocket` without `Connection: Upgrade` reaches here as a plain request: not a handshake either.
      const socket = yield* request.upgrade.pipe(Effect.catchTag("RequestError", () => Effect.fail(notAnUpgrade())))
      yield* serveSocket(socket, principal, recheck, feed.open, lifecycle.stopping)
      // The socket is closed; the handshake's 101 was the answer.
      return HttpServerResponse.empty()
    })
})

export const EventsHandlers = HttpApiBuilder.group(MailroomApi, "events", (handlers) =>
  Effect.gen(function*() {
    const stream = yield* makeStream("api")
    const socket = yield* makeSocket
    return handlers.handleRaw("stream", stream).handleRaw("socket", socket)
  })).pipe(Layer.provide(EventFeed.Default), Layer.provide(EventLog.Default))

export const DashboardEventsHandlers = HttpApiBuilder.group(MailroomApi, "dashboardEvents", (handlers) =>
  Effect.map(makeStream("session"), (stream) => handlers.handleRaw("stream", stream))
).pipe(Layer.provide(EventFeed.Default), Layer.provide(EventLog.Default))
