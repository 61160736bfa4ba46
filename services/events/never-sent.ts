/**
 * The one rule for a listener to events (a webhook, a live event stream) whose narrowing leaves it
 * nothing to hear: refused with 400 VALIDATION_ERROR rather than kept as an endpoint or a stream that
 * silently hears nothing. Events about no mailbox (api_key.created) never reach a listener narrowed
 * to some mailboxes; events that carry no labels (deliveries of sent mail) never reach one narrowed
 * to some labels (webhooks/subscriptions.ts and events/log.ts filter so). A listener that asks for
 * some such kinds beside others is taken: those others reach it.
 */
import { Effect } from "effect"
import { ValidationError } from "../errors.ts"
import { aboutAMailbox, carryingLabels } from "../webhooks/schemas.ts"

export interface Listening {
  /** What the client calls the listener: "webhook", "stream". */
  readonly listener: string
  /** The request's field that lists the kinds (`events`, `types`): the refusal's details name it. */
  readonly kindsField: string
  readonly kinds: ReadonlyArray<string>
  /** How it is narrowed to some mailboxes, as the client knows it (`mailbox_id`); undefined when it is not. */
  readonly mailboxes: string | undefined
  /** Whether it is narrowed to some labels. */
  readonly labels: boolean
}

/** Nothing when some kind asked for can reach the listener as it is narrowed; else the refusal. */
export const neverSent = (listening: Listening): Effect.Effect<void, ValidationError> => {
  const { kinds, kindsField, labels, listener, mailboxes } = listening
  const why = (kind: string) =>
    mailboxes !== undefined && !aboutAMailbox.has(kind)
      ? `${kind} is about no mailbox`
      : labels && !carryingLabels.has(kind)
      ? `${kind} carries no labels`
      : undefined
  const reasons = kinds.map(why)
  if (reasons.length === 0 || reasons.some((reason) => reason === undefined)) return Effect.void
  const narrowing = [mailboxes ?? "", labels ? "labels" : ""].filter((part) => part !== "").join(" and ")
  const message = `would never be sent any of these events: ${reasons.join("; ")}, and the ${listener} is narrowed to ${narrowing}`
  return Effect.fail(new ValidationError({ message: `This ${listener} ${message}`, details: { [kindsField]: message } }))
}
