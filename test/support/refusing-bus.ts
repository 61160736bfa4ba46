/**
 * The in-process bus, made to refuse what is published while a test says so (as NATS does when it is
 * unreachable): for the changes that owe the bus their announcements (services/bus/outbox.ts).
 */
import { Effect, Layer } from "effect"
import * as MemoryBus from "../../layers/memory-bus.ts"
import { Bus, BusError } from "../../services/bus/bus.ts"

export const makeRefusingBus = () => {
  let refusing = false
  const layer = Layer.effect(
    Bus,
    Effect.map(Bus, (bus) => ({
      ...bus,
      publish: (subject: string, data: Uint8Array, options: { readonly msgId: string }) =>
        refusing ? Effect.fail(new BusError({ message: "NATS is down" })) : bus.publish(subject, data, options)
    }))
  ).pipe(Layer.provideMerge(MemoryBus.layer))
  /** `effect`, with the bus refusing every publish until it ends. */
  const whileRefusing = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    Effect.acquireUseRelease(Effect.sync(() => (refusing = true)), () => effect, () => Effect.sync(() => (refusing = false)))
  return { layer, whileRefusing }
}
