/**
 * Calendar invitations an agent receives (schemas.ts; reading and writing iCalendar: icalendar.ts):
 * what an email's invitation says, and the mailbox's answer to its organizer.
 *
 * An email's invitation is its first calendar part: a `text/calendar` part (the iMIP alternative
 * Google, Outlook and Apple send), else an `application/ics` or `.ics` attachment. It is read when
 * asked (a few kilobytes; nothing is kept but the answers).
 *
 * Answering sends an iTIP REPLY to the organizer, as a reply to the invitation (same conversation,
 * In-Reply-To set) through the ordinary send path: the plan's sends, suppressions, DKIM and delivery
 * apply as to any reply. The answer given is kept (`invitation_responses`, the latest one) and read
 * back with the invitation; answering again (a change of mind) sends a new REPLY.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Either } from "effect"
import { InvitationNotRespondable, InvitationUnreadable, NoInvitation, NotFound } from "../errors.ts"
import { decodeText } from "../mail/charsets.ts"
import { routingForm } from "../mail/inbound.ts"
import type { Idempotency } from "../outbound/idempotency.ts"
import { mailboxAddresses, Replies } from "../outbound/replies.ts"
import { senderOf } from "../schedule/calendar-sender.ts"
import { Schedule, type ScheduleRevision } from "../schedule/schedule.ts"
import { calendarPart } from "./calendar-part.ts"
import { attendeeOf, type CalendarEvent, readInvitation, replyCalendar } from "./icalendar.ts"
import {
  type Invitation,
  type InvitationResponse,
  MAX_CALENDAR_BYTES,
  type NotAppliedReason,
  type NotRespondableReason,
  type RespondInput,
  type ResponseStatus
} from "./schemas.ts"

interface CalendarRow {
  readonly mailboxId: string
  readonly direction: "inbound" | "outbound"
  readonly mailboxAddress: string
  readonly rcptTo: string
  readonly fromAddress: string | null
  readonly labels: ReadonlyArray<string>
  /** Why the worker did not apply the calendar, for who sent it (schedule/calendar-sender.ts); null when it did not refuse it. */
  readonly notAppliedReason: NotAppliedReason | null
  readonly attachmentId: string | null
  readonly size: number | string | null
  readonly content: Uint8Array | null
  readonly charset: string | null
  readonly status: ResponseStatus | null
  readonly comment: string | null
  readonly replyEmailId: string | null
  readonly respondedAt: Date | null
}

type Closed = NotRespondableReason

/**
 * Why the mailbox cannot answer an invitation, or undefined when it can. One reason, the first that holds,
 * in this order (the dashboard shows the one state it names):
 * 1. what the email is: a cancellation (`cancelled`), not an invitation (`not_a_request`), none to answer
 *    (`no_organizer`), the mailbox's own (`own_invitation`);
 * 2. the schedule (`latest`, the revision it holds of the event, when it holds one) moved past this email's
 *    revision: called off since (`cancelled`), which outranks replaced (`superseded`): a called-off event has
 *    nothing to answer, whichever revision the email brought, and an update the organizer ignores
 *    (RFC 5546 §2.1.4) is answered through the newer one. Vouching for this email would change nothing;
 * 3. the change this email brings was refused for who sent it (`not_applied`, `refused`: its
 *    not_applied_reason): answering it would answer a time or an event the schedule does not hold, and
 *    send a REPLY on the word of whoever wrote it. A person vouches for it first (takes `unauthenticated`
 *    off it, which applies it); a stranger's stays unanswerable;
 * 4. the schedule has the event called off at this same revision (`cancelled`; a cancellation that did not
 *    raise SEQUENCE): answering would put it back. After 3: vouching for this email would apply it over that.
 */
const closedReason = (
  event: CalendarEvent,
  outbound: boolean,
  isMine: (address: string) => boolean,
  latest: ScheduleRevision | undefined,
  refused: NotAppliedReason | null
): Closed | undefined =>
  event.method === "CANCEL" || event.status === "cancelled"
    ? "cancelled"
    : event.method !== "REQUEST"
    ? "not_a_request"
    : event.organizer === null
    ? "no_organizer"
    : outbound || isMine(event.organizer.address)
    ? "own_invitation"
    : latest !== undefined && latest.sequence > event.sequence
    ? latest.status === "cancelled" ? "cancelled" : "superseded"
    : refused !== null
    ? "not_applied"
    : latest !== undefined && latest.status === "cancelled"
    ? "cancelled"
    : undefined

/**
 * Where the invitation stands: why it cannot be answered, and the email to read instead (the one with the
 * revision the schedule holds) when the schedule's revision is another email's and outranks or stands
 * instead of this one's (superseded, called off since, this one not applied).
 */
const standing = (
  emailId: string,
  found: { readonly event: CalendarEvent; readonly outbound: boolean; readonly isMine: (address: string) => boolean; readonly notAppliedReason: NotAppliedReason | null },
  latest: ScheduleRevision | undefined
) => {
  // A refusal kept for the email whose revision the schedule holds is stale (it was applied since): not one.
  const refused = latest?.emailId === emailId ? null : found.notAppliedReason
  const closed = closedReason(found.event, found.outbound, found.isMine, latest, refused)
  const pointed = closed === "superseded" || closed === "cancelled" || closed === "not_applied"
  const latestEmailId = pointed && latest !== undefined && latest.emailId !== emailId ? latest.emailId : null
  return { closed, refused, latestEmailId }
}

const SUBJECTS: Record<ResponseStatus, string> = { accepted: "Accepted", declined: "Declined", tentative: "Tentative" }
const VERBS: Record<ResponseStatus, string> = { accepted: "accepted", declined: "declined", tentative: "tentatively accepted" }

export class Invitations extends Effect.Service<Invitations>()("mailroom/Invitations", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const replies = yield* Replies
    const schedule = yield* Schedule

    /** The email's calendar part and the mailbox's answer to it; 404 when the email is not the caller's. */
    const calendarOf = (userId: string, emailId: string) =>
      Effect.gen(function*() {
        const rows = yield* sql<CalendarRow>`
          SELECT e.mailbox_id, e.direction, m.local_part || '@' || m.domain AS mailbox_address, e.rcpt_to, e.from_address, e.labels,
                 f.reason AS not_applied_reason, a.id AS attachment_id, a.size, b.content, a.charset,
                 r.status, r.comment, r.reply_email_id, r.responded_at
          FROM emails e
          JOIN mailboxes m ON m.id = e.mailbox_id AND m.status = 'active'
          LEFT JOIN LATERAL (${calendarPart(sql)}) a ON true
          LEFT JOIN blobs b ON b.sha256 = a.checksum AND a.size <= ${MAX_CALENDAR_BYTES}
          LEFT JOIN invitation_responses r ON r.email_id = e.id
          LEFT JOIN calendar_refusals f ON f.email_id = e.id
          WHERE e.id = ${emailId} AND e.user_id = ${userId}`
        const row = rows[0]
        if (row === undefined) return yield* new NotFound({ message: "Email not found", details: { email_id: emailId } })
        if (row.attachmentId === null) {
          return yield* new NoInvitation({ message: "This email carries no calendar invitation", details: { email_id: emailId } })
        }
        const unreadable = (reason: "damaged" | "no_event" | "too_large", message: string) =>
          new InvitationUnreadable({ message, details: { email_id: emailId, attachment_id: row.attachmentId, reason } })
        if (row.content === null) {
          return yield* unreadable("too_large", `The calendar is larger than ${MAX_CALENDAR_BYTES / 1024 / 1024} MB: it is not read`)
        }
        const text = decodeText(row.content, row.charset)
        const event = readInvitation(text)
        if (Either.isLeft(event)) {
          return yield* event.left === "damaged"
            ? unreadable("damaged", "The calendar is not valid iCalendar: it cannot be read")
            : unreadable("no_event", "The calendar describes no event with an identity (UID) and a start")
        }
        const own = mailboxAddresses(row)
        const isMine = (address: string) => own.has(routingForm(address))
        const response: InvitationResponse | null = row.status === null ? null : {
          status: row.status,
          comment: row.comment,
          email_id: row.replyEmailId,
          responded_at: new Date(row.respondedAt!).toISOString()
        }
        return {
          text,
          event: event.right,
          mailboxId: row.mailboxId,
          attachmentId: row.attachmentId,
          outbound: row.direction === "outbound",
          isMine,
          sender: senderOf(row),
          notAppliedReason: row.notAppliedReason,
          response
        }
      })

    /**
     * What the email's invitation says, whether and how the mailbox answered it, and where the event
     * stands on the schedule (replaced by a later email's update, cancelled since).
     */
    const get = Effect.fn("Invitations.get")(function*(userId: string, emailId: string) {
      const found = yield* calendarOf(userId, emailId)
      const latest = yield* schedule.revision(found.mailboxId, found.event.uid)
      const { closed, latestEmailId, refused } = standing(emailId, found, latest)
      return {
        email_id: emailId,
        attachment_id: found.attachmentId,
        ...found.event,
        attendees: found.event.attendees.map((attendee) => ({ ...attendee, is_mailbox: found.isMine(attendee.address) })),
        respondable: closed === undefined,
        not_respondable_reason: closed ?? null,
        latest_email_id: latestEmailId,
        schedule_status: latest?.status ?? null,
        not_applied_reason: refused,
        response: found.response
      } satisfies Invitation
    })

    /**
     * Answer the invitation: a REPLY to its organizer (202's answer once it is queued), then the
     * answer kept. The attendee answering is the mailbox as the invitation names it (a renamed mailbox,
     * or one invited by a subaddress, answers as the address the organizer knows); a mailbox the
     * invitation does not name answers by its own address (RFC 5546 lets an uninvited party reply).
     */
    const respond = Effect.fn("Invitations.respond")(function*(
      userId: string,
      emailId: string,
      input: RespondInput,
      idempotency?: Idempotency
    ) {
      const found = yield* calendarOf(userId, emailId)
      const { event } = found
      const latest = yield* schedule.revision(found.mailboxId, event.uid)
      const { closed, latestEmailId, refused } = standing(emailId, found, latest)
      if (closed !== undefined) {
        return yield* new InvitationNotRespondable({
          message: closed === "cancelled"
            ? "The event is cancelled: there is nothing to answer"
            : closed === "not_a_request"
            ? `The calendar (${event.method ?? "no method"}) asks for no answer: only an invitation (REQUEST) is answered`
            : closed === "no_organizer"
            ? "The invitation names no organizer to answer"
            : closed === "superseded"
            ? `An update of this invitation arrived since (revision ${latest!.sequence}, email ${latest!.emailId}): answer that one`
            : closed === "not_applied"
            ? refused === "unverified_sender"
              ? "This update was not applied to the schedule: nothing proves it comes from its organizer (unverified_sender). " +
                "Take the unauthenticated label off the email to vouch for it, then answer it"
              : `This update was not applied to the schedule: it does not come from the event's organizer (${refused}). ` +
                (latestEmailId === null ? "Answer the organizer's own invitation" : `Answer the invitation the schedule holds (email ${latestEmailId})`)
            : "The mailbox organizes or sent this invitation: attendees answer it",
          details: {
            email_id: emailId,
            method: event.method,
            reason: closed,
            ...(closed === "not_applied" && refused !== null ? { not_applied_reason: refused } : {}),
            ...(latestEmailId === null ? {} : { latest_email_id: latestEmailId })
          }
        })
      }
      const organizer = event.organizer!
      const now = new Date()
      const comment = input.comment?.trim() || undefined
      const accepted = yield* replies.answer(userId, emailId, (original) => {
        const invited = attendeeOf(event, (address) => mailboxAddresses(original).has(routingForm(address)))
        const attendee = invited ?? { address: original.mailboxAddress, name: null }
        const title = event.summary ?? "an event"
        return {
          to: [{ address: organizer.address, name: organizer.name ?? undefined }],
          cc: [],
          bcc: [],
          subject: `${SUBJECTS[input.status]}: ${event.summary ?? original.subject}`,
          text: [`${attendee.name ?? attendee.address} has ${VERBS[input.status]} the invitation to ${title}.`, ...(comment ? ["", comment] : [])]
            .join("\n"),
          attachments: [],
          headers: {},
          calendar: { method: "REPLY", content: replyCalendar(found.text, { attendee, status: input.status, comment, now }) }
        }
      }, idempotency)
      yield* sql`
        INSERT INTO invitation_responses (email_id, user_id, status, comment, reply_email_id, responded_at)
        VALUES (${emailId}, ${userId}, ${input.status}, ${comment ?? null}, ${accepted.email_id}, ${now})
        ON CONFLICT (email_id) DO UPDATE SET status = EXCLUDED.status, comment = EXCLUDED.comment,
          reply_email_id = EXCLUDED.reply_email_id, responded_at = EXCLUDED.responded_at`
      // On the schedule with the answer, also when the worker left it off (mail marked spam, or older than the schedule).
      yield* schedule.receive({ emailId, mailboxId: found.mailboxId, userId, isMine: found.isMine, sender: found.sender, text: found.text })
      yield* schedule.answered(found.mailboxId, event.uid, input.status)
      yield* Effect.logInfo("Invitation answered").pipe(
        Effect.annotateLogs({ email_id: emailId, status: input.status, reply_email_id: accepted.email_id })
      )
      return accepted
    })

    return { get, respond } as const
  }),
  dependencies: [Replies.Default, Schedule.Default]
}) {}
