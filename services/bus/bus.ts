/**
 * The bus: how units of work travel between nodes (DESIGN.md §1).
 *
 * Delivery is at least once. A consumer's handler runs, and only when its effect succeeds is the
 * message acknowledged; a failure (or a crash of the consuming process) brings the message back, so
 * handlers must be idempotent. Publishing is de-duplicated by `msgId`: publishing the same id twice
 * (say, an SMTP node retrying after a lost acknowledgement) stores one message.
 *
 * Adapters: NATS JetStream for clusters (layers/nats-bus.ts), and an in-process bus kept in the SQL
 * database for the single-process embedded default (layers/memory-bus.ts).
 */
import { Cause, Context, Data, Duration, type Effect, Option, type Scope } from "effect"

/** The streams Mailroom uses, and the subjects each one holds. */
export const streams = {
  /**
   * Mail on its way: raw inbound mail waiting to be parsed (`mail.inbound.<mailbox_id>`) and sent
   * mail waiting to be delivered, one job per recipient domain (`mail.outbound.<email_id>`),
   * Mailroom's own mail to a person (`mail.outbound.system.<id>`) and received mail's forwarded copies
   * (`mail.outbound.forward.<email_id>`).
   */
  mail: { name: "MAIL", subjects: ["mail.>"] },
  /** Domain events: `events.<kind>` (email.received, email.processed, api_key.created). */
  events: { name: "EVENTS", subjects: ["events.>"] }
} as const

export type StreamName = keyof typeof streams

export const subjects = {
  inboundMail: (mailboxId: string) => `mail.inbound.${mailboxId}`,
  allInboundMail: "mail.inbound.>",
  outboundMail: (emailId: string) => `mail.outbound.${emailId}`,
  /** Mail Mailroom sends a person itself (outbound/system-mail.ts), delivered by the same consumer. */
  systemMail: (id: string) => `mail.outbound.system.${id}`,
  /** Received mail's copies to a mailbox's forwarding addresses (mail/forwarding.ts), delivered by the same consumer. */
  forwardedMail: (emailId: string) => `mail.outbound.forward.${emailId}`,
  /** A job of sent mail (the email it delivers is the account's sent mail), not of system mail or a forwarded copy. */
  isSentMail: (subject: string) => !subject.startsWith("mail.outbound.system.") && !subject.startsWith("mail.outbound.forward."),
  allOutboundMail: "mail.outbound.>",
  event: (kind: string) => `events.${kind}`,
  allEvents: "events.>",
  /** Broadcast only (never stored): a mailbox stored mail it sent, for whoever waits for its mail (mail/arrivals.ts). */
  mailSent: (mailboxId: string) => `signals.mail_sent.${mailboxId}`,
  allMailSent: "signals.mail_sent.>",
  /** Broadcast only (never stored): an account's events are in the event log. */
  eventsLogged: (userId: string) => `signals.events_logged.${userId}`,
  allEventsLogged: "signals.events_logged.>",
  /** Broadcast only (never stored): a mail program kept flags on an account's mail (imap/store.ts), for its other IMAP sessions. */
  imapFlagsKept: (userId: string) => `signals.imap_flags.${userId}`,
  allImapFlagsKept: "signals.imap_flags.>",
  /**
   * Broadcast only (never stored): what decides where an account's mail goes changed (a mailbox
   * deleted or renamed, a list entry, a plan), told after the change committed (mail/directory.ts).
   */
  directoryChanged: "signals.directory.changed",
  /** Broadcast only (never stored): a draft's `send_at` was set, for the mta's scheduler (outbound/drafts.ts). */
  draftScheduled: "signals.draft_scheduled",
  /** Broadcast only (never stored): an MCP client cancelled a request the API node it reached did not hold (src/http/mcp/cancellation.ts). */
  mcpCancelled: "signals.mcp_cancelled"
} as const

/** Does `subject` match a NATS-style `filter` (`*` one token, `>` the rest)? */
export const subjectMatches = (filter: string, subject: string): boolean => {
  const f = filter.split(".")
  const s = subject.split(".")
  for (let i = 0; i < f.length; i++) {
    if (f[i] === ">") return s.length > i
    if (i >= s.length) return false
    if (f[i] !== "*" && f[i] !== s[i]) return false
  }
  return f.length === s.length
}

export interface BusMessage {
  readonly subject: string
  readonly data: Uint8Array
  /** The de-duplication id given at publish. */
  readonly msgId: string
  /** 1 on the first delivery, 2 on the first redelivery, and so on. */
  readonly deliveryCount: number
  /** The span that published it (W3C `traceparent`), when tracing is on (tracing.ts). */
  readonly traceparent?: string | undefined
}

export interface ConsumerSpec<E> {
  /** Durable name: consumers with the same name share the work; progress survives restarts. */
  readonly name: string
  readonly stream: StreamName
  /** Subject filter within the stream, e.g. `mail.inbound.>`. */
  readonly filter: string
  /** Messages handled at once by this process. */
  readonly concurrency?: number
  /**
   * How long a delivery may stay unacknowledged before the bus gives it to another consumer
   * (covers a crashed process). Default 30 seconds.
   */
  readonly ackWait?: Duration.DurationInput
  /** Delay before a failed message is offered again. Default: 1 s, doubling up to 1 min. */
  readonly retryDelay?: (deliveryCount: number) => Duration.Duration
  readonly handler: (message: BusMessage) => Effect.Effect<void, E>
}

/** A durable consumer, as a stage's lag is asked about (the fields of its ConsumerSpec). */
export interface ConsumerRef {
  readonly name: string
  readonly stream: StreamName
  readonly filter: string
}

/** How far a durable consumer is behind, whichever process runs it (or none does). */
export interface ConsumerLag {
  /** Messages on its filter that no handler has been given yet (redeliveries waiting included). */
  readonly pending: number
  /** Given to a handler and not yet acknowledged. */
  readonly inFlight: number
  /** When the oldest message it has not acknowledged was published; undefined when it has none. */
  readonly oldest: Date | undefined
}

export class BusError extends Data.TaggedError("BusError")<{
  readonly message: string
  readonly cause?: unknown
}> {}

export interface BusShape {
  /**
   * Publish; succeeds once the bus has stored the message durably (the JetStream ack), not before.
   * Publishing an already-seen `msgId` succeeds without storing a second copy.
   */
  readonly publish: (subject: string, data: Uint8Array, options: { readonly msgId: string }) => Effect.Effect<void, BusError>
  /**
   * Run a consumer until the scope closes. Closing the scope stops taking new messages and waits for
   * the handlers in flight to finish (and be acknowledged) before it completes.
   */
  readonly consume: <E>(spec: ConsumerSpec<E>) => Effect.Effect<void, BusError, Scope.Scope>
  /**
   * Hear the messages on `filter` published from now on, in this process, whichever node published
   * them: every listener hears every message (fan-out). Best effort: nothing is acknowledged, kept or
   * redelivered, so a listener that must not miss anything also reads the source of truth. For
   * waking waiters (wait-for-mail), never for work. Ends when the scope closes.
   */
  readonly listen: (filter: string, onMessage: (message: BusMessage) => Effect.Effect<void>) => Effect.Effect<void, never, Scope.Scope>
  /**
   * Tell every listener of `subject`, on every node, now; nothing is stored, acknowledged or
   * redelivered, and a node that is not listening never hears it. For signals whose truth is kept
   * elsewhere (`signals.*`, outside every stream); a failure to send is the signal lost, not an error.
   */
  readonly broadcast: (subject: string, data: Uint8Array) => Effect.Effect<void>
  /**
   * How far behind the durable consumer `consumer` is. One no process has started yet has every
   * message on its filter the stream holds waiting (what it would be given once started), so a stage
   * whose consumers never came up is seen falling behind. None: the adapter cannot tell.
   */
  readonly lag: (consumer: ConsumerRef) => Effect.Effect<Option.Option<ConsumerLag>, BusError>
  /** Is the bus reachable now? (readiness) */
  readonly ping: Effect.Effect<void, BusError>
}

export class Bus extends Context.Tag("mailroom/Bus")<Bus, BusShape>() {}

export const defaultRetryDelay = (deliveryCount: number): Duration.Duration =>
  Duration.millis(Math.min(60_000, 1000 * 2 ** Math.max(0, deliveryCount - 1)))

export const ComeBackAfterTypeId: unique symbol = Symbol.for("mailroom/ComeBackAfter")

/**
 * A handler's failure that knows when its message is worth handling again (another holder's claim
 * ends then, say): the message comes back after `comeBackAfter` rather than the consumer's retryDelay.
 */
export interface ComeBackAfter {
  readonly [ComeBackAfterTypeId]: Duration.Duration
}

/** When a message whose handler failed with `cause` is offered again: as its failure asks, else by the consumer's schedule. */
export const redeliveryDelay = (
  cause: Cause.Cause<unknown>,
  deliveryCount: number,
  retryDelay: (deliveryCount: number) => Duration.Duration
): Duration.Duration => {
  const error = Option.getOrUndefined(Cause.failureOption(cause))
  return typeof error === "object" && error !== null && ComeBackAfterTypeId in error
    ? (error as ComeBackAfter)[ComeBackAfterTypeId]
    : retryDelay(deliveryCount)
}

export const encodeJson = (value: unknown): Uint8Array => new TextEncoder().encode(JSON.stringify(value))
export const decodeJson = (data: Uint8Array): unknown => JSON.parse(new TextDecoder().decode(data))
