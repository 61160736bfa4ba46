/**
 * MCP's cancellation (protocol 2025-03-26 on, "Cancellation"): a client gives up a request it sent by
 * sending `notifications/cancelled` with that request's id. The server stops the work (a tool call's
 * fiber is interrupted: nothing it had not done yet is done) and sends no answer for it; an id it does
 * not know, or whose answer has gone, is ignored without a word, as the protocol asks.
 *
 * The endpoint is stateless, so a cancellation comes in a request of its own, which a load balancer may
 * hand to another API node than the one running the call. A node that has no such call in flight tells
 * the others on the bus (a broadcast: best effort, as the protocol's cancellation is).
 *
 * Whose a request id is: the account's, within the MCP session the client was given at `initialize`
 * (`Mcp-Session-Id`, an opaque random name no node keeps: it only keeps one client's ids apart from
 * another's, since every client counts its ids from 0). A client that sends none shares the account's
 * ids with others that send none.
 */
import { randomBytes } from "node:crypto"
import { Deferred, Effect, Option, Schema } from "effect"
import { Bus, decodeJson, encodeJson, subjects } from "../../../services/bus/bus.ts"

/** JSON-RPC's request ids: a string or a number (1 and "1" are two ids). */
const RequestId = Schema.Union(Schema.String, Schema.Number)

/** `notifications/cancelled`'s params (`reason` is optional and only logged). */
const CancelledParams = Schema.Struct({ requestId: RequestId, reason: Schema.optional(Schema.String) })
const decodeParams = Schema.decodeUnknownOption(CancelledParams)

const Told = Schema.Struct({ userId: Schema.String, session: Schema.NullOr(Schema.String), requestId: RequestId, reason: Schema.optional(Schema.String) })
const decodeTold = Schema.decodeUnknownOption(Told)

/** The client's `Mcp-Session-Id`, when it is one this endpoint could have given (visible ASCII, bounded). */
export const sessionOf = (header: string | undefined): string | undefined =>
  header !== undefined && /^[\x21-\x7e]{1,128}$/.test(header) ? header : undefined

/** A fresh session name for `initialize`'s answer: 128 random bits, nothing kept. */
export const newSession = (): string => randomBytes(16).toString("base64url")

/** The request a `notifications/cancelled` message cancels, if the message is one and says which. */
export const cancelledBy = (body: unknown): Option.Option<{ readonly requestId: string | number; readonly reason?: string | undefined }> => {
  if (typeof body !== "object" || body === null || Array.isArray(body)) return Option.none()
  const message = body as Record<string, unknown>
  return message.method === "notifications/cancelled" && !("id" in message) ? decodeParams(message.params) : Option.none()
}

const keyOf = (userId: string, session: string | undefined, requestId: string | number) => JSON.stringify([userId, session ?? null, requestId])

export interface Owner {
  readonly userId: string
  readonly session: string | undefined
}

/**
 * The requests in flight on this node, by whose they are, and the cancellations that reach them.
 * Scoped: it listens on the bus for cancellations other nodes were sent.
 */
export const makeCancellations = Effect.gen(function*() {
  const bus = yield* Bus
  const inFlight = new Map<string, { readonly cancel: Deferred.Deferred<string | undefined> }>()

  /** Cancels the request here if it is in flight here: whether it was. */
  const cancelHere = (key: string, reason: string | undefined) =>
    Effect.suspend(() => {
      const entry = inFlight.get(key)
      if (entry === undefined) return Effect.succeed(false)
      inFlight.delete(key)
      return Effect.as(Deferred.succeed(entry.cancel, reason), true)
    })

  yield* bus.listen(subjects.mcpCancelled, (message) =>
    Effect.suspend(() => {
      const told = decodeTold(decodeJson(message.data))
      return Option.isSome(told)
        ? Effect.asVoid(cancelHere(keyOf(told.value.userId, told.value.session ?? undefined, told.value.requestId), told.value.reason))
        : Effect.void
    }).pipe(
      // A malformed broadcast (not JSON) is no cancellation; nothing else could be done with it.
      Effect.catchAllDefect(() => Effect.void)
    ))

  return {
    /**
     * Holds a request as in flight for the scope's life: the Deferred completes (with the client's
     * reason) when its client cancels it. A second request under the same id (a client reusing an
     * id still in flight, against JSON-RPC) takes the id over; the first is no longer cancellable.
     */
    hold: (owner: Owner, requestId: string | number) =>
      Effect.gen(function*() {
        const key = keyOf(owner.userId, owner.session, requestId)
        const entry = { cancel: yield* Deferred.make<string | undefined>() }
        yield* Effect.acquireRelease(
          Effect.sync(() => inFlight.set(key, entry)),
          () => Effect.sync(() => inFlight.get(key) === entry && inFlight.delete(key))
        )
        return entry.cancel
      }),
    /** A client's `notifications/cancelled`: here if the request is here, else told to the other nodes. */
    cancel: (owner: Owner, requestId: string | number, reason: string | undefined) =>
      Effect.flatMap(cancelHere(keyOf(owner.userId, owner.session, requestId), reason), (here) =>
        here ? Effect.void : bus.broadcast(subjects.mcpCancelled, encodeJson({ userId: owner.userId, session: owner.session ?? null, requestId, reason })))
  } as const
})
