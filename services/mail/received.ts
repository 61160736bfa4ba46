/**
 * `email.received`: how an email is announced as received mail, once it is stored (ingest.ts) or
 * once a person lets through mail held back as spam or blocked (labels.ts). One announcement an
 * email on arrival and one on its release, however often each is made: its bus id is the email's,
 * so the bus drops a repeat, and webhooks and the event log keep one delivery an id.
 */
import { type Bus, encodeJson, subjects } from "../bus/bus.ts"
import type { Publication } from "../bus/outbox.ts"
import type { Extracted } from "./extract.ts"
import { type EmailRow, toReceived } from "./records.ts"

/** The bus id of an email's `email.received`. */
export const emailReceivedEventId = (emailId: string) => `email.received:${emailId}`

/** The bus id of the `email.received` of an email released from `spam`, announced on arrival already (labels.ts). */
export const releasedEventId = (emailId: string) => `email.received:${emailId}:released`

/** The `email.received` of `row`, with what was extracted from it, as the bus carries it. */
export const receivedPublication = (
  row: EmailRow,
  extracted: Extracted | null,
  eventId = emailReceivedEventId(row.id)
): Publication => ({
  subject: subjects.event("email.received"),
  data: encodeJson({
    event: "email.received",
    timestamp: row.createdAt.toISOString(),
    namespace: row.userId,
    data: toReceived(row, extracted)
  }),
  msgId: eventId
})

/** Publish `email.received` for `row`, with what was extracted from it. */
export const announceReceived = (bus: Bus["Type"], row: EmailRow, extracted: Extracted | null, eventId = emailReceivedEventId(row.id)) => {
  const { data, msgId, subject } = receivedPublication(row, extracted, eventId)
  return bus.publish(subject, data, { msgId })
}
