/**
 * The event stream over a WebSocket (`GET /v1/ws`, issue 17), for clients that prefer one socket to
 * Server-Sent Events. The same events, ids and payloads as `/v1/events`; JSON text messages both ways.
 *
 * Client → server:
 *   {"type":"subscribe","types":["email.received"],"mailbox_id":"mbx_…","labels":["billing"],"after":"<event id>"}  (all optional)
 *   {"type":"ping"}
 * Server → client:
 *   {"type":"subscribed","types":[…]|null,"mailbox_id":…|null,"labels":[…]|null}
 *   {"type":"event","id":"email.received:eml_…","event":"email.received","data":{…the webhook payload…}}
 *   {"type":"heartbeat"} every 15 s, {"type":"pong"}
 *   {"type":"error","error":{"code","message","details"}}  (SPEC's envelope, tagged)
 *
 * A new `subscribe` replaces the previous one and, without `after`, continues right after the last
 * event this socket delivered: changing filters loses nothing. (The previous subscription ends before
 * the new one is checked, so that it frees its stream slot; a refused subscribe, malformed or not,
 * leaves the socket without one until the next.) A bad message is answered with an error and the socket stays open;
 * STREAM_QUOTA closes it (1008), and so does a credential that stops working (revoked, expired):
 * an UNAUTHORIZED error, then the close, before anything more is delivered (a `ping` checks it too).
 * A subscription filtered to a mailbox that is deleted ends with that mailbox's NOT_FOUND error, after the
 * events logged before; the socket stays open without a subscription, as after a refused subscribe. A key limited to mailboxes
 * that reaches none any more (every one deleted) is told NOT_FOUND (details.mailboxIds) and the socket closed (1008), as a revoked
 * one is: it has nothing left to subscribe to. The socket holds one of the account's
 * event-stream slots while subscribed, as an SSE stream does; one left without a subscription for
 * SUBSCRIBE_WITHIN_MS (from its opening, or from a refused subscribe) is closed (1008), so that sockets
 * that never subscribe cannot pile up outside the account's limit. On shutdown it closes with 1001 ("going
 * away"): the client reconnects elsewhere with `after` set to the last id it saw.
 */
import { Socket } from "@effect/platform"
import { Effect, Fiber, Option, ParseResult, Schema, Stream } from "effect"
import type { Principal } from "../../../services/accounts/principal.ts"
import { type NotFound, type Unauthorized, ValidationError } from "../../../services/errors.ts"
import { type EventFeed, type Frame, isKeyWithoutMailboxes, type StreamRequest } from "../../../services/events/feed.ts"
import { Label, MAX_LABELS } from "../../../services/mail/label-rules.ts"
import { eventKinds, isEventKind } from "../../../services/webhooks/schemas.ts"
import { fieldDetails, summaryOf } from "../issues.ts"
import { MailboxFilter } from "./api.ts"
import { rule } from "../../../services/schema-rules.ts"

const EventKind = Schema.String.pipe(
  rule((kind) => isEventKind(kind) || `"${kind}" is not an event kind; supported: ${eventKinds.join(", ")}`)
)

const ClientMessage = Schema.Union(
  Schema.Struct({
    type: Schema.Literal("subscribe"),
    // An empty list would be a subscription that hears nothing: left out is every kind.
    types: Schema.optional(
      Schema.Array(EventKind).pipe(Schema.minItems(1, { message: () => "must list at least one event kind (left out: every kind)" }))
    ),
    mailbox_id: Schema.optional(MailboxFilter),
    labels: Schema.optional(Schema.Array(Label).pipe(Schema.minItems(1), Schema.maxItems(MAX_LABELS))),
    after: Schema.optional(Schema.String)
  }),
  Schema.Struct({ type: Schema.Literal("ping") })
)
type Subscribe = Extract<typeof ClientMessage.Type, { readonly type: "subscribe" }>
// A misspelt field (`mailboxId`) is refused, not dropped: dropped, the subscription would hear every mailbox.
const decodeMessage = Schema.decodeUnknownEither(Schema.parseJson(ClientMessage), { errors: "all", onExcessProperty: "error" })

/** Whether a message the socket could not take meant to subscribe (its `type` says so). */
const meantToSubscribe = (data: string) => {
  try {
    const parsed: unknown = JSON.parse(data)
    return typeof parsed === "object" && parsed !== null && (parsed as { readonly type?: unknown }).type === "subscribe"
  } catch {
    return false
  }
}

/** A refusal as the socket tells it: SPEC's error envelope with a `type`. */
interface Refusal {
  readonly code: string
  readonly message: string
  readonly details?: unknown
}

/** `details` maps each field to its message, as the HTTP routes answer VALIDATION_ERROR. */
const invalidMessage = (error: ParseResult.ParseError): Refusal => {
  const fields = fieldDetails(ParseResult.ArrayFormatter.formatErrorSync(error), { root: "message", rootMessage: "must be a JSON object" })
  return { code: "VALIDATION_ERROR", message: `Not a message this socket understands: ${summaryOf(fields)}`, details: fields.details }
}

/** Close codes (RFC 6455 §7.4.1). */
const GOING_AWAY = 1001
const POLICY_VIOLATION = 1008
const SERVER_ERROR = 1011

/** How long a socket may stay open without a subscription. */
const SUBSCRIBE_WITHIN_MS = 10_000

type Open = EventFeed["open"]
type OpenError = Effect.Effect.Error<ReturnType<Open>>

export const serveSocket = (
  socket: Socket.Socket,
  principal: Principal,
  recheck: StreamRequest["recheck"],
  open: Open,
  stopping: Effect.Effect<void>
) =>
  Effect.scoped(Effect.gen(function*() {
    const write = yield* socket.writer
    const send = (message: unknown) => write(JSON.stringify(message))
    const close = (code: number, reason: string) => write(new Socket.CloseEvent(code, reason))
    const refuse = (refusal: Refusal) => send({ type: "error", error: refusal })

    /** Messages are handled one at a time, in the order they came. */
    const turn = yield* Effect.makeSemaphore(1)
    let lastId = Option.none<string>()
    let subscription: Fiber.RuntimeFiber<void, unknown> | undefined
    /** Counts subscriptions, so that one that ends by itself does not mistake a later one for its own. */
    let subscriptions = 0
    /** Since when the socket has had no subscription; undefined while it has one. */
    let unsubscribedSince: number | undefined = Date.now()

    const deliver = (frame: Frame) =>
      frame._tag === "Heartbeat"
        ? send({ type: "heartbeat" })
        : Effect.suspend(() => {
          lastId = Option.some(frame.event.eventId)
          // The payload is the logged JSON text: spliced in, not parsed and written again.
          return write(`{"type":"event","id":${JSON.stringify(frame.event.eventId)},"event":${JSON.stringify(frame.event.kind)},"data":${frame.event.payload}}`)
        })

    /** The credential stopped working (revoked, logged out, expired): told, and the socket closed. */
    const revoked = (error: Unauthorized) =>
      refuse({ code: error.code, message: error.message }).pipe(Effect.zipRight(close(POLICY_VIOLATION, "credential no longer valid")))

    /** `then`, once the credential is found still working; else the refusal (revoked: the socket closes). */
    const whileValid = <R>(then: Effect.Effect<void, Socket.SocketError, R>) =>
      Effect.flatMap(Effect.either(recheck), (still) =>
        still._tag === "Right" ? then : still.left._tag === "Unauthorized" ? revoked(still.left) : answerRefusal(still.left))

    /** The current subscription ended: the socket has none until the next subscribe. */
    const unsubscribe = Effect.suspend(() => {
      const ending = subscription
      subscription = undefined
      unsubscribedSince ??= Date.now()
      return ending === undefined ? Effect.void : Fiber.interrupt(ending)
    })

    /** Every mailbox of the key was deleted: told, and the socket closed, as for a revoked key (nothing is left to hear). */
    const keyEmptied = (error: NotFound) =>
      refuse({ code: error.code, message: error.message, details: error.details }).pipe(
        Effect.zipRight(close(POLICY_VIOLATION, "the key's mailboxes were deleted"))
      )

    /** The mailbox subscription `which` listened to was deleted: told, and the socket left without a subscription. */
    const mailboxDeleted = (which: number, error: NotFound) =>
      isKeyWithoutMailboxes(error) ? keyEmptied(error) : refuse({ code: error.code, message: error.message, details: error.details }).pipe(
        Effect.zipRight(Effect.sync(() => {
          if (which !== subscriptions) return
          subscription = undefined
          unsubscribedSince ??= Date.now()
        }))
      )

    const subscribe = (request: Subscribe) =>
      Effect.gen(function*() {
        yield* unsubscribe
        const which = ++subscriptions
        const opened = yield* Effect.either(open({
          recheck,
          userId: principal.userId,
          plan: principal.plan,
          filter: {
            kinds: request.types,
            mailboxId: request.mailbox_id,
            mailboxes: Option.getOrUndefined(principal.mailboxes),
            labels: request.labels
          },
          after: request.after === undefined ? lastId : Option.some(request.after),
          afterField: "after"
        }))
        if (opened._tag === "Left") return yield* answerRefusal(opened.left)
        const events = opened.right
        yield* send({ type: "subscribed", types: request.types ?? null, mailbox_id: request.mailbox_id ?? null, labels: request.labels ?? null })
        unsubscribedSince = undefined
        subscription = yield* events.pipe(
          // (The feed also ends its streams when the process stops: the session closes the socket then.)
          Stream.runForEach(deliver),
          Effect.catchTags({ Unauthorized: revoked, NotFound: (error) => mailboxDeleted(which, error) }),
          Effect.catchAllCause((cause) =>
            Effect.logWarning("An event socket failed", cause).pipe(Effect.zipRight(close(SERVER_ERROR, "event stream failed")))
          ),
          Effect.forkScoped
        )
      })

    const answerRefusal = (error: OpenError) =>
      error._tag === "NotFound" && isKeyWithoutMailboxes(error)
        ? keyEmptied(error)
        : "code" in error && typeof error.code === "string"
        ? refuse({ code: error.code, message: error.message, details: error.details }).pipe(
          Effect.zipRight(error.code === "STREAM_QUOTA" ? close(POLICY_VIOLATION, "too many open event streams") : Effect.void)
        )
        : Effect.logWarning("Could not open an event socket's stream", error).pipe(
          Effect.zipRight(refuse({ code: "SERVICE_UNAVAILABLE", message: "The event stream is unavailable; retry shortly" }))
        )

    const handle = (data: string | Uint8Array) =>
      Effect.gen(function*() {
        if (typeof data !== "string") {
          return yield* refuse({
            code: "VALIDATION_ERROR",
            message: "Messages are JSON text, not binary frames",
            details: { message: "must be a text frame" }
          })
        }
        const message = decodeMessage(data)
        if (message._tag === "Left") {
          // A refused subscribe leaves the socket without a subscription, whatever was wrong with it.
          if (meantToSubscribe(data)) yield* unsubscribe
          return yield* refuse(invalidMessage(message.left))
        }
        if (message.right.type === "ping") return yield* whileValid(send({ type: "pong" }))
        return yield* whileValid(subscribe(message.right))
      }).pipe(turn.withPermits(1))

    // On shutdown the socket says why it closes, before the server's teardown cuts it off without a
    // code (1005, "no status").
    const unsubscribedTooLong = Effect.gen(function*() {
      for (;;) {
        yield* Effect.sleep(1_000)
        if (unsubscribedSince !== undefined && Date.now() - unsubscribedSince >= SUBSCRIBE_WITHIN_MS) {
          return yield* close(POLICY_VIOLATION, `no subscription: subscribe within ${SUBSCRIBE_WITHIN_MS / 1000} s`)
        }
      }
    })
    yield* socket.runRaw(handle).pipe(
      Effect.raceFirst(Effect.zipRight(stopping, close(GOING_AWAY, "server shutting down"))),
      Effect.raceFirst(unsubscribedTooLong)
    )
  })).pipe(
    // The client left (cleanly or not): nothing to answer.
    Effect.catchTag("SocketError", () => Effect.void)
  )

/** For a request that is not a WebSocket handshake. */
export const notAnUpgrade = () =>
  new ValidationError({
    message: "upgrade: /v1/ws is a WebSocket endpoint; connect with a WebSocket client",
    details: { upgrade: "must be websocket" }
  })
