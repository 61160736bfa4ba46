/**
 * Who may change, by mail, what a mailbox keeps of a calendar: only an event's organizer updates it or
 * calls it off, and an attendee answers only for itself (RFC 5546 §3.2). A calendar's ORGANIZER and
 * ATTENDEE lines are whatever its writer put, and so is an email's From, and anyone who got an
 * invitation knows its UID: a change counts only when the email's From is that party's address and
 * the inbound checks vouch for the From (not labelled `unauthenticated`, services/mail/authentication.ts:
 * DMARC, or SPF or DKIM aligned, passed; mail another mailbox of this server sent is its own). Otherwise
 * a stranger could take a meeting off an agent's schedule, move it, or decline for its attendees.
 *
 * What is refused is kept (`calendar_refusals`) so that the email's invitation says why it changed
 * nothing; a person who takes `unauthenticated` off the email overrules the checks, and it is read again.
 */
import type { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { UNAUTHENTICATED } from "../mail/authentication.ts"
import { routingForm } from "../mail/inbound.ts"
import type { NotAppliedReason } from "../invitations/schemas.ts"

/** A received calendar's sender, as its email has it. */
export interface CalendarSender {
  /** The email's From address (null when it names none). */
  readonly from: string | null
  /** Whether the inbound checks vouch for that From: the email is not labelled `unauthenticated`. */
  readonly authenticated: boolean
}

/** The sender of an email with these From and labels. */
export const senderOf = (email: { readonly fromAddress: string | null; readonly labels: ReadonlyArray<string> }): CalendarSender => ({
  from: email.fromAddress,
  authenticated: !email.labels.includes(UNAUTHENTICATED)
})

const isFrom = (sender: CalendarSender, address: string) => sender.from !== null && routingForm(sender.from) === routingForm(address)

/** Why `sender` may not change an event `organizer` (its address; none named) organizes, or undefined when it may. */
export const organizerRefusal = (sender: CalendarSender, organizer: string | undefined): NotAppliedReason | undefined =>
  organizer === undefined || !isFrom(sender, organizer) ? "not_organizer" : sender.authenticated ? undefined : "unverified_sender"

/** Why `sender` may not answer for `attendee` (an address), or undefined when it may. */
export const attendeeRefusal = (sender: CalendarSender, attendee: string): NotAppliedReason | undefined =>
  !isFrom(sender, attendee) ? "not_attendee" : sender.authenticated ? undefined : "unverified_sender"

/** The email's calendar changed nothing, for `reason`: kept for its invitation to say (the latest reason). */
export const keepRefusal = (sql: SqlClient.SqlClient, emailId: string, reason: NotAppliedReason) =>
  Effect.asVoid(sql`
    INSERT INTO calendar_refusals (email_id, reason) VALUES (${emailId}, ${reason})
    ON CONFLICT (email_id) DO UPDATE SET reason = EXCLUDED.reason, refused_at = now()`)

/** The email's calendar was applied (read again once a person vouched for it): no refusal stands. */
export const dropRefusal = (sql: SqlClient.SqlClient, emailId: string) =>
  Effect.asVoid(sql`DELETE FROM calendar_refusals WHERE email_id = ${emailId}`)
