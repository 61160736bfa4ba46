/**
 * What follows a change of a recipient's delivery status, wherever it was learnt (an attempt by the
 * mta, or a bounce report that came back later): a bounced address joins the account's suppression
 * list, and each change is told as an event (webhooks, and everything else built on events).
 */
import type { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { type BusShape, encodeJson, subjects } from "../bus/bus.ts"
import type { DeliveryEventData, DeliveryEventKind } from "./schemas.ts"

/** The columns of a sent email the changes are told with (`emails` as the SQL client names them). */
export const SentEmailRow = Schema.Struct({
  userId: Schema.String,
  mailboxId: Schema.String,
  messageId: Schema.String,
  threadId: Schema.String
})

/** The sent email the changes are about. */
export interface SentEmail extends Schema.Schema.Type<typeof SentEmailRow> {
  readonly id: string
}

export interface StatusChange {
  readonly recipient: string
  readonly status: "sent" | "deferred" | "bounced" | "failed" | "suppressed"
  readonly attempts: number
  readonly response: string
  readonly nextAttemptAt: Date | null
  /**
   * A bounce that says the address takes no mail, so that the account stops sending to it; left out,
   * the response says (`refusesTheAddress`, as a bounce report's diagnostic about that recipient).
   */
  readonly suppress?: boolean | undefined
}

/**
 * Whether a permanent refusal says the address itself takes no mail: RFC 3463's addressing status
 * (5.1.x, but 5.1.7 and 5.1.8, which are about the sender) or a disabled mailbox (5.2.1). A full
 * mailbox (5.2.2), a policy or spam refusal (5.7.x), a relay's "relaying denied" are about this
 * message or this sender, and say nothing of the address. A refusal without an enhanced code ("550 No
 * such user") is the address's when `bare` says so: when the answer was the recipient's own (at RCPT,
 * or a bounce report's line about it).
 */
export const refusesTheAddress = (response: string, bare: boolean): boolean => {
  const enhanced = /\b5\.(\d{1,3})\.(\d{1,3})\b/.exec(response)
  if (enhanced === null) return bare
  const [, subject, detail] = enhanced
  return (subject === "1" && detail !== "7" && detail !== "8") || (subject === "2" && detail === "1")
}

const eventOf: Record<StatusChange["status"], DeliveryEventKind> = {
  sent: "email.sent",
  deferred: "email.delivery_delayed",
  bounced: "email.bounced",
  failed: "email.failed",
  // Given up on without an attempt, as final as a failure: the event's status says why.
  suppressed: "email.failed"
}

/** Recipients whose address bounced are no longer sent to by the account (until it removes them). */
export const suppressBounced = (sql: SqlClient.SqlClient, email: SentEmail, changes: ReadonlyArray<StatusChange>) => {
  const bounced = changes.filter((c) => c.status === "bounced" && (c.suppress ?? refusesTheAddress(c.response, true)))
  return bounced.length === 0 ? Effect.void : sql`
    INSERT INTO suppressions (user_id, address, reason, last_response, email_id)
    SELECT ${email.userId}, a, 'bounced', r, ${email.id}
    FROM unnest(${bounced.map((c) => c.recipient.toLowerCase())}::text[], ${bounced.map((c) => c.response)}::text[]) AS t(a, r)
    ON CONFLICT (user_id, address) DO UPDATE SET last_response = EXCLUDED.last_response, email_id = EXCLUDED.email_id`.pipe(Effect.asVoid)
}

/** One event per change, de-duplicated on the bus by email, recipient, kind and attempt. */
export const announce = (bus: BusShape, email: SentEmail, changes: ReadonlyArray<StatusChange>, at: Date) =>
  Effect.forEach(changes, (c) => {
    const kind = eventOf[c.status]
    const data: DeliveryEventData = {
      email_id: email.id,
      message_id: email.messageId,
      mailbox_id: email.mailboxId,
      thread_id: email.threadId,
      recipient: c.recipient,
      status: c.status,
      attempts: c.attempts,
      smtp_response: c.response,
      next_attempt_at: c.nextAttemptAt?.toISOString() ?? null
    }
    return bus.publish(
      subjects.event(kind),
      encodeJson({ event: kind, timestamp: at.toISOString(), namespace: email.userId, data }),
      { msgId: `${kind}:${email.id}:${c.recipient}:${c.attempts}` }
    )
  }, { discard: true })
