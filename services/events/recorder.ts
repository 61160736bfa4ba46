/**
 * The event recorder (worker role): every event on the bus goes into the event log, under the id
 * webhooks deliver it with, then a signal tells the API nodes' streams of that account to look. The
 * bus message is acknowledged only once the row is stored, so no event is lost to a crash; a
 * redelivery stores nothing twice (the id is unique) and signals again, which is harmless.
 */
import { Effect, Layer, Schema } from "effect"
import { Bus, type BusMessage, decodeJson, subjects } from "../bus/bus.ts"
import { measured } from "../bus/metrics.ts"
import { groupCommit } from "../batching.ts"
import { BusEvent, isEventKind } from "../webhooks/schemas.ts"
import { EventCompletion } from "./completion.ts"
import { EventLog } from "./log.ts"

/** Events handled at once by one process: those arriving together are stored by one INSERT (log.ts). */
const CONCURRENCY = 32

const MailboxData = Schema.Struct({ mailbox_id: Schema.String })
const mailboxOf = (data: unknown): string | null => {
  const found = Schema.decodeUnknownOption(MailboxData)(data)
  return found._tag === "Some" ? found.value.mailbox_id : null
}

export const EventRecorderLive = Layer.scopedDiscard(
  Effect.gen(function*() {
    const bus = yield* Bus
    const log = yield* EventLog
    const completion = yield* EventCompletion

    /** The streams of the accounts whose events were logged look again: once per account however many arrived together. */
    const signal = yield* groupCommit({
      maxBatch: CONCURRENCY,
      parallel: 1,
      run: (userIds: ReadonlyArray<string>) =>
        Effect.as(
          Effect.forEach(new Set(userIds), (userId) => bus.broadcast(subjects.eventsLogged(userId), new Uint8Array(0)), { discard: true }),
          userIds.map(() => undefined)
        )
    })

    const record = (message: BusMessage) =>
      Effect.try(() => decodeJson(message.data)).pipe(
        Effect.flatMap(Schema.decodeUnknown(BusEvent)),
        Effect.matchEffect({
          // Nothing could ever read it: logged and acknowledged.
          onFailure: (error) => Effect.logError("Not logging a malformed event", { subject: message.subject, error }),
          onSuccess: (event) =>
            !isEventKind(event.event) || message.msgId === ""
              ? Effect.logWarning("Not logging an event without a kind or id", { subject: message.subject })
              // One an earlier version wrote is logged with the fields added since (completion.ts).
              : completion.complete(event).pipe(
                Effect.flatMap((complete) =>
                  log.append({
                    eventId: message.msgId,
                    userId: complete.namespace,
                    kind: complete.event,
                    mailboxId: mailboxOf(complete.data),
                    // Exactly the webhook body (webhooks/delivery.ts), so every channel shows one payload.
                    payload: JSON.stringify({ event: complete.event, timestamp: complete.timestamp, data: complete.data })
                  })
                ),
                Effect.zipRight(signal(event.namespace))
              )
        })
      )

    yield* bus.consume(measured({
      name: "event-log",
      stream: "events",
      filter: subjects.allEvents,
      concurrency: CONCURRENCY,
      handler: record
    }))
  })
).pipe(Layer.provide(Layer.merge(EventLog.Default, EventCompletion.Default)))
