/**
 * `email.received`: how an email is announced as received mail, once it is stored (ingest.ts) or
 * once a person lets through mail a block list held back (labels.ts). One announcement an email,
 * however often it is made: its bus id is the email's, so the bus drops a repeat.
 */
import { type Bus, encodeJson, subjects } from "../bus/bus.ts"
import type { Extracted } from "./extract.ts"
import { type EmailRow, toReceived } from "./records.ts"

/** The bus id of an email's `email.received`. */
export const emailReceivedEventId = (emailId: string) => `email.received:${emailId}`

/** Publish `email.received` for `row`, with what was extracted from it. */
export const announceReceived = (bus: Bus["Type"], row: EmailRow, extracted: Extracted | null) =>
  bus.publish(
    subjects.event("email.received"),
    encodeJson({
      event: "email.received",
      timestamp: row.createdAt.toISOString(),
      namespace: row.userId,
      data: toReceived(row, extracted)
    }),
    { msgId: emailReceivedEventId(row.id) }
  )
