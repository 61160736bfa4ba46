/**
 * The event stream over HTTP as Server-Sent Events (https://html.spec.whatwg.org/#server-sent-events):
 * a `retry` hint first, then one SSE event per logged event and a comment per heartbeat; and over a
 * WebSocket (ws.ts).
 */
import { HttpApiBuilder, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect, Layer, Option, Stream } from "effect"
import { CurrentPrincipal } from "../../../services/accounts/principal.ts"
import { EventFeed, type Frame } from "../../../services/events/feed.ts"
import { EventLog } from "../../../services/events/log.ts"
import { Lifecycle } from "../../../services/lifecycle.ts"
import { MailroomApi } from "../api.ts"
import { orUnavailable } from "../infra.ts"
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

/** One handler, served at /v1/events (API keys) and /api/events (dashboard sessions). */
const makeStream = Effect.gen(function*() {
    const feed = yield* EventFeed
    return ({ headers, urlParams }: { readonly headers: typeof EventStreamHeaders.Type; readonly urlParams: typeof EventStreamParams.Type }) =>
      Effect.gen(function*() {
        const principal = yield* CurrentPrincipal
        const fromHeader = Option.fromNullable(headers["last-event-id"]).pipe(Option.filter((id) => id !== ""))
        const events = yield* feed.open({
          userId: principal.userId,
          plan: principal.plan,
          filter: { kinds: urlParams.types, mailboxId: urlParams.mailbox_id },
          after: Option.orElse(fromHeader, () => Option.fromNullable(urlParams.after)),
          afterField: Option.isSome(fromHeader) ? "last-event-id" : "after"
        }).pipe(orUnavailable)
        const body = Stream.concat(
          Stream.make(encoder.encode(`retry: ${RECONNECT_MS}\n\n`)),
          // An error after the headers cannot be answered with an envelope: the stream just ends, and
          // the client reconnects with its last id.
          events.pipe(Stream.map(frame), Stream.catchAllCause((cause) => Stream.fromEffect(Effect.logWarning("An event stream failed", cause)).pipe(Stream.drain)))
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
  return () =>
    Effect.gen(function*() {
      const principal = yield* CurrentPrincipal
      const request = yield* HttpServerRequest.HttpServerRequest
      if (request.headers["upgrade"]?.toLowerCase() !== "websocket") return yield* notAnUpgrade()
      const socket = yield* Effect.orDie(request.upgrade)
      yield* serveSocket(socket, principal, feed.open, lifecycle.stopping)
      // The socket is closed; the handshake's 101 was the answer.
      return HttpServerResponse.empty()
    })
})

export const EventsHandlers = HttpApiBuilder.group(MailroomApi, "events", (handlers) =>
  Effect.gen(function*() {
    const stream = yield* makeStream
    const socket = yield* makeSocket
    return handlers.handleRaw("stream", stream).handleRaw("socket", socket)
  })).pipe(Layer.provide(EventFeed.Default), Layer.provide(EventLog.Default))

export const DashboardEventsHandlers = HttpApiBuilder.group(MailroomApi, "dashboardEvents", (handlers) =>
  Effect.map(makeStream, (stream) => handlers.handleRaw("stream", stream))
).pipe(Layer.provide(EventFeed.Default), Layer.provide(EventLog.Default))
