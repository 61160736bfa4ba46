/**
 * Wait for mail (issue 17): an API node learns that a mailbox received an email, whichever worker
 * stored it, from the `email.received` events it hears on the bus (`Bus.listen`, fan-out to every
 * node), and that it sent one from the `mail_sent` signal the node that stored it broadcasts. Hearing is best effort, so a waiter never trusts it alone: it subscribes first, then asks
 * the database, and asks again after every event for its mailbox, so an email stored between the
 * first look and the subscription is not missed, and a lost event costs at most the wait. When the
 * process begins to shut down, every wait ends at once with the answer it has.
 */
import { Duration, Effect, PubSub, Queue, Schema } from "effect"
import { Bus, decodeJson, subjects } from "../bus/bus.ts"
import { Lifecycle } from "../lifecycle.ts"

const Received = Schema.Struct({ data: Schema.Struct({ mailbox_id: Schema.String }) })
const decodeReceived = Schema.decodeUnknownOption(Received)

export class MailArrivals extends Effect.Service<MailArrivals>()("mailroom/MailArrivals", {
  scoped: Effect.gen(function*() {
    const bus = yield* Bus
    const lifecycle = yield* Lifecycle
    /** Mailbox ids, one per email.received heard. */
    const heard = yield* Effect.acquireRelease(PubSub.unbounded<string>(), PubSub.shutdown)
    yield* bus.listen(subjects.event("email.received"), (message) =>
      Effect.suspend(() => {
        const event = decodeReceived(decodeJson(message.data))
        return event._tag === "Some" ? PubSub.publish(heard, event.value.data.mailbox_id) : Effect.void
      }).pipe(Effect.catchAllDefect(() => Effect.void), Effect.asVoid))
    // And mail a mailbox sends, once stored (its sent mail is its mail too): the mailbox is the subject's last token.
    yield* bus.listen(subjects.allMailSent, (message) =>
      Effect.asVoid(PubSub.publish(heard, message.subject.slice(subjects.mailSent("").length))))

    /**
     * Run `look` until `found` says its answer has what the caller waits for, or `timeout` passes:
     * once at once, then after every email the mailbox receives. Answers the last look.
     */
    const waitFor = <A, E, R>(
      mailboxId: string,
      look: Effect.Effect<A, E, R>,
      found: (answer: A) => boolean,
      timeout: Duration.DurationInput
    ): Effect.Effect<A, E, R> =>
      Effect.scoped(Effect.gen(function*() {
        const events = yield* PubSub.subscribe(heard)
        let answer = yield* look
        if (found(answer)) return answer
        const deadline = Date.now() + Duration.toMillis(timeout)
        const waiting = Effect.gen(function*() {
          while (true) {
            const left = deadline - Date.now()
            if (left <= 0) return answer
            const next = yield* Queue.take(events).pipe(Effect.timeout(Duration.millis(left)), Effect.option)
            if (next._tag === "None") return yield* look
            if (next.value !== mailboxId) continue
            answer = yield* look
            if (found(answer)) return answer
          }
        })
        // On shutdown, what it has at once: the server drains right after, and a client that asks
        // again (with its `after`) misses nothing.
        return yield* Effect.raceFirst(waiting, Effect.zipRight(lifecycle.stopping, Effect.sync(() => answer)))
      }))

    return { waitFor } as const
  })
}) {}
