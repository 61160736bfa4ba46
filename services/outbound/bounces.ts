/**
 * Reports about a sent email that come back to its bounce address (`bounces+<email_id>-<tag>@<domain>`,
 * one per recipient: bounce-address.ts), applied to that recipient and not stored as mail (a received
 * email's forwarded copies go with bounce addresses too, one per forwarding domain: a delivery report
 * about one marks that copy `bounced`):
 *
 * - A delivery status notification (RFC 3464, `multipart/report; report-type=delivery-status`): the
 *   receiving server took the message, then could not deliver it. Each recipient it reports
 *   `Action: failed` is marked `bounced` with the report's diagnostic, suppressed and told
 *   (`email.bounced`).
 * - A complaint (ARF, RFC 5965: `report-type=feedback-report`, `Feedback-Type: abuse`): the recipient
 *   reported the message as spam, and their provider's feedback loop tells the sender (here, or at a
 *   mailbox of the account: `recordReceived`). The recipient
 *   (its `Original-Rcpt-To`; the email's only recipient when the provider left it out, as most redact
 *   it) is suppressed, reason `complained`, whatever it was suppressed for before, and the account is
 *   told (`email.complained`). Its delivery stays what it was: the message was delivered. Other
 *   feedback types (`not-spam`, `virus`, …) change nothing.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { Bus, encodeJson, subjects } from "../bus/bus.ts"
import { legacyBytesAsUtf8 } from "../mail/charsets.ts"
import { domainOf } from "../mailboxes/rules.ts"
import type { BounceScope } from "./bounce-address.ts"
import { suspendRefused } from "./forwards.ts"
import { announce, type SentEmail, SentEmailRow, type StatusChange, suppressBounced } from "./ledger.ts"
import { recordDeliveries } from "./metrics.ts"
import type { ComplaintEventData } from "./schemas.ts"

export interface ReportedFailure {
  readonly recipient: string
  readonly response: string
}

/** The header-like fields of one block of a delivery-status body, lower-cased names. */
const fields = (block: string) =>
  new Map(
    block
      .replace(/\r?\n[ \t]+/g, " ")
      .split(/\r?\n/)
      .flatMap((line) => {
        const colon = line.indexOf(":")
        return colon > 0 ? [[line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim()] as const] : []
      })
  )

/**
 * The failed recipients of a `message/delivery-status` body: its per-recipient blocks (after the
 * per-message one) with `Action: failed`, each with its diagnostic (`Diagnostic-Code`, else `Status`).
 */
export const failedRecipients = (deliveryStatus: string): ReadonlyArray<ReportedFailure> =>
  deliveryStatus
    .split(/\r?\n\s*\r?\n/)
    .map(fields)
    .filter((f) => (f.get("action") ?? "").toLowerCase() === "failed")
    .flatMap((f) => {
      const recipient = /;\s*([^\s;@]+@\S+)/.exec(f.get("final-recipient") ?? f.get("original-recipient") ?? "")?.[1]
      if (recipient === undefined) return []
      const diagnostic = (f.get("diagnostic-code") ?? "").replace(/^[a-z-]+;\s*/i, "")
      return [{ recipient: recipient.replace(/^<|>$/g, "").toLowerCase(), response: diagnostic || `Bounce report: status ${f.get("status") ?? "unknown"}` }]
    })

/** `text` (a binary string) undone from the transfer encoding `encoding` names, as bytes. */
const transferDecoded = (text: string, encoding: string): Buffer =>
  encoding === "base64"
    ? Buffer.from(text.replace(/[^A-Za-z0-9+/=]/g, ""), "base64")
    : encoding === "quoted-printable"
    ? Buffer.from(text.replace(/=\r?\n/g, "").replace(/=([0-9a-f]{2})/gi, (_, hex: string) => String.fromCharCode(parseInt(hex, 16))), "latin1")
    : Buffer.from(text, "latin1")

/**
 * The body of the report's `message/<type>` part, from the raw message `raw` (a binary string): mail
 * parsers fold that part into the text body. RFC 3464 and 5965 keep it 7-bit text; RFC 6533's
 * `message/global-delivery-status` is UTF-8 (`Diagnostic-Code: smtp; 550 5.1.1 Empfänger unbekannt`),
 * 8-bit or in a transfer encoding: read as UTF-8 (bytes that are no UTF-8, a sender's mistake, as
 * Windows-1252, as received mail's are).
 */
const reportPart = (raw: string, type: "delivery-status" | "feedback-report"): string | undefined => {
  const header = new RegExp(`^content-type:[ \\t]*message\\/(?:global-)?${type}\\b[^\\r\\n]*(?:\\r?\\n[ \\t][^\\r\\n]*)*`, "im").exec(raw)
  if (header === null) return undefined
  const rest = raw.slice(header.index + header[0].length)
  const bodyStart = rest.search(/\r?\n\r?\n/)
  if (bodyStart < 0) return undefined
  // The part's header block: from the last blank or boundary line before its Content-Type to its body.
  const blockStart = Math.max(raw.lastIndexOf("\n\n", header.index), raw.lastIndexOf("\n\r\n", header.index), raw.lastIndexOf("\n--", header.index), 0)
  const block = raw.slice(blockStart, header.index + header[0].length + bodyStart)
  const encoding = /^content-transfer-encoding:[ \t]*([^\s;]+)/im.exec(block)?.[1]?.toLowerCase() ?? "7bit"
  const body = rest.slice(bodyStart).replace(/^\r?\n\r?\n/, "")
  const end = body.search(/\r?\n--/)
  return legacyBytesAsUtf8(transferDecoded(end < 0 ? body : body.slice(0, end), encoding)).toString("utf8")
}

/** The `message/delivery-status` (or RFC 6533 `message/global-delivery-status`) body of the report `raw` (a binary string), decoded. */
export const deliveryStatusOf = (raw: string) => reportPart(raw, "delivery-status")

/** What a feedback report (RFC 5965 §3.5) says: its type, the recipient it names (if any), who reports. */
export interface Complaint {
  readonly feedbackType: string
  readonly recipient: string | undefined
  readonly reporter: string | undefined
}

export const complaintOf = (raw: string): Complaint | undefined => {
  const report = reportPart(raw, "feedback-report")
  if (report === undefined) return undefined
  const f = fields(report)
  return {
    feedbackType: (f.get("feedback-type") ?? "").toLowerCase(),
    recipient: /<?([^<>\s]+@[^<>\s]+?)>?$/.exec(f.get("original-rcpt-to") ?? "")?.[1]?.toLowerCase(),
    reporter: (f.get("reporting-mta") ?? "").replace(/^[a-z-]+;\s*/i, "") || f.get("user-agent")
  }
}

/**
 * The email Mailroom sent that a feedback report is about: the Message-ID of the original it encloses
 * (`message/rfc822`, or `text/rfc822-headers` as most providers send it), read past the report's own
 * header. Only an id Mailroom writes (`<eml_…@domain>`, send.ts).
 */
export const reportedEmailId = (raw: string): string | undefined => {
  const report = /^content-type:[ \t]*message\/feedback-report\b/im.exec(raw)
  if (report === null) return undefined
  return /^message-id:[ \t]*<(eml_[0-9a-f]{24})@[^>\s]+>/im.exec(raw.slice(report.index))?.[1]
}

/** Which of an email's recipients a report may speak of, and how the log says so (" at example.com"). */
interface Scope {
  readonly speaksFor: (recipient: string) => boolean
  readonly of: string
  /** The one recipient a per-recipient bounce address was made for. */
  readonly recipient?: string | undefined
}

/** A report to a bounce address tagged for `tagged` (bounce-address.ts; undefined: a bare address, of mail stored before keys). */
const scopeOf = (tagged: BounceScope | undefined): Scope =>
  tagged === undefined
    ? { speaksFor: () => true, of: "" }
    : tagged.recipient !== undefined
    // No address in the log line (addresses only at debug: README, Logs).
    ? { speaksFor: (recipient) => recipient === tagged.recipient, of: " its bounce address was made for", recipient: tagged.recipient }
    : { speaksFor: (recipient) => domainOf(recipient) === tagged.domain, of: ` at ${tagged.domain}` }

/** Whether mail from `reporter` (a domain) may speak for addresses at `domain`: the same domain, or one it is part of. */
const hostsFor = (reporter: string, domain: string) => reporter === domain || reporter.endsWith(`.${domain}`)

/** The feedback types that are a complaint: the recipient reported spam, or fraud (phishing). */
const COMPLAINTS = ["abuse", "fraud"]

export class BounceReports extends Effect.Service<BounceReports>()("mailroom/BounceReports", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const bus = yield* Bus

    /** The sent email `emailId`, as its events name it; none when it was deleted meanwhile. */
    const sentEmail = (emailId: string) =>
      sql`SELECT user_id, mailbox_id, message_id, thread_id FROM emails WHERE id = ${emailId}`.pipe(
        Effect.flatMap((rows) => Effect.orDie(Schema.decodeUnknown(Schema.Array(SentEmailRow))(rows))),
        Effect.map((rows): SentEmail | undefined => rows[0] && { id: emailId, ...rows[0] })
      )

    const ignored = (emailId: string, why: string) =>
      Effect.as(Effect.logInfo(`A message to a bounce address ${why}; ignored`).pipe(Effect.annotateLogs({ email_id: emailId })), [])

    /**
     * The failed recipients a delivery-status report lists, of those it may speak of (`scope`): the
     * others are left as they are, and the log says how many. To one recipient's bounce address, a
     * failure of an address the email was not sent to is that recipient's: their mail went on from
     * there (an alias, a forward) and failed, which is what VERP is for.
     */
    const reportedFailures = (emailId: string, text: string, scope: Scope) =>
      Effect.gen(function*() {
        const report = deliveryStatusOf(text)
        const listed = report === undefined ? [] : failedRecipients(report)
        const failures = scope.recipient === undefined || listed.length === 0
          ? listed
          : yield* onwardFailures(emailId, listed, scope.recipient)
        const admitted = failures.filter((f) => scope.speaksFor(f.recipient))
        const others = failures.length - admitted.length
        if (others > 0) {
          yield* Effect.logInfo(
            `A report names ${others} recipient${others === 1 ? "" : "s"} it may not speak for (only those${scope.of} count); left as they are`
          ).pipe(Effect.annotateLogs({ email_id: emailId }))
        }
        return admitted
      })

    /** `failures`, with those of addresses the sent email `emailId` did not go to made `recipient`'s (once). */
    const onwardFailures = (emailId: string, failures: ReadonlyArray<ReportedFailure>, recipient: string) =>
      Effect.map(
        sql<{ recipient: string }>`SELECT lower(recipient) AS recipient FROM outbound_deliveries WHERE email_id = ${emailId}`,
        (rows) => {
          const sentTo = new Set(rows.map((r) => r.recipient))
          const own = failures.map((f) => (sentTo.has(f.recipient) ? f : { ...f, recipient }))
          return own.filter((f, i) => own.findIndex((g) => g.recipient === f.recipient) === i)
        }
      )

    /**
     * A recipient of `emailId` reported it as spam: suppressed (reason complained) and told, once. Only
     * a recipient the report may speak for (`scope`).
     */
    const complained = (emailId: string, complaint: Complaint, scope: Scope) =>
      Effect.gen(function*() {
        if (!COMPLAINTS.includes(complaint.feedbackType)) return yield* ignored(emailId, `is feedback of type "${complaint.feedbackType}"`)
        const sent = yield* sentEmail(emailId)
        if (sent === undefined) return []
        const recipients = (yield* sql<{ recipient: string }>`
          SELECT DISTINCT lower(recipient) AS recipient FROM outbound_deliveries WHERE email_id = ${emailId}`)
          .map((r) => r.recipient)
          .filter(scope.speaksFor)
        const recipient = complaint.recipient !== undefined
          ? recipients.find((r) => r === complaint.recipient)
          : recipients.length === 1
          ? recipients[0]
          : undefined
        if (recipient === undefined) {
          return yield* ignored(emailId, `is a complaint that names none of the email's recipients${scope.of}`)
        }
        const response = `Reported as spam (${complaint.feedbackType}) by ${complaint.reporter ?? "the recipient's provider"}`
        // The delivery says so (stats count it), and the address is suppressed, in one statement: a
        // report that comes again finds both done or neither.
        const changed = yield* sql`
          WITH delivery AS (
            UPDATE outbound_deliveries SET complained_at = coalesce(complained_at, now())
            WHERE email_id = ${emailId} AND lower(recipient) = ${recipient})
          INSERT INTO suppressions (user_id, address, reason, last_response, email_id)
          VALUES (${sent.userId}, ${recipient}, 'complained', ${response}, ${emailId})
          ON CONFLICT (user_id, address) DO UPDATE SET reason = 'complained', last_response = EXCLUDED.last_response, email_id = EXCLUDED.email_id
            WHERE suppressions.reason <> 'complained' OR suppressions.email_id = EXCLUDED.email_id
          RETURNING 1`
        // Told again when the same report comes again (its event was perhaps not published the first
        // time): the bus drops a repeat it still remembers, and webhooks are at least once anyway.
        if (changed.length === 0) return []
        const data: ComplaintEventData = {
          email_id: emailId,
          message_id: sent.messageId,
          mailbox_id: sent.mailboxId,
          thread_id: sent.threadId,
          recipient,
          feedback_type: complaint.feedbackType,
          reported_by: complaint.reporter ?? null
        }
        yield* bus.publish(
          subjects.event("email.complained"),
          encodeJson({ event: "email.complained", timestamp: new Date().toISOString(), namespace: sent.userId, data }),
          { msgId: `email.complained:${emailId}:${recipient}` }
        )
        yield* Effect.logInfo("Complaint recorded").pipe(Effect.annotateLogs({ email_id: emailId }))
        return [recipient]
      })

    /**
     * A report about a received email's forwarded copies (forwards.ts): each address it reports failed
     * is marked `bounced`, and suspended on the mailbox's forwarding. Nothing is suppressed (the account
     * sent nothing to it) and a complaint changes nothing: the copy is the sender's message, not the account's.
     */
    const copyBounced = (emailId: string, text: string, scope: Scope) =>
      Effect.gen(function*() {
        const failures = yield* reportedFailures(emailId, text, scope)
        if (failures.length === 0) return yield* ignored(emailId, "about a forwarded copy reports no failed address it may speak for")
        // One transaction: a report that comes again finds the copy bounced and its address suspended, or neither.
        const bounced = yield* Effect.gen(function*() {
          const changed = yield* sql<{ address: string; response: string }>`
            UPDATE forward_deliveries f SET status = 'bounced', last_response = u.response, next_attempt_at = NULL, updated_at = now()
            FROM (SELECT * FROM unnest(${failures.map((f) => f.recipient)}::text[], ${failures.map((f) => f.response)}::text[]) AS t(address, response)) u
            WHERE f.email_id = ${emailId} AND f.address = u.address AND f.status <> 'bounced'
            RETURNING f.address, f.last_response AS response`
          yield* suspendRefused(sql, emailId, changed)
          return changed
        }).pipe(sql.withTransaction)
        yield* recordDeliveries(bounced.map(() => "bounced"))
        yield* Effect.logInfo("Bounce report about a forwarded copy recorded").pipe(
          Effect.annotateLogs({ email_id: emailId, bounced: bounced.map((b) => b.address).join(",") })
        )
        return bounced.map((b) => b.address)
      })

    /**
     * Apply the report `raw` about the sent email `emailId` (or a received one's forwarded copies),
     * come to the bounce address tagged for `tagged`, a recipient or a domain's (bounce-address.ts;
     * undefined: a bare address, of mail stored before keys): only those recipients are changed.
     * Answers the recipients it bounced or suppressed.
     */
    const record = Effect.fn("BounceReports.record")(function*(emailId: string, raw: Uint8Array, tagged: BounceScope | undefined) {
      const text = Buffer.from(raw).toString("latin1")
      const scope = scopeOf(tagged)
      const received = yield* sql`SELECT 1 FROM emails WHERE id = ${emailId} AND direction = 'inbound'`
      if (received.length > 0) return yield* copyBounced(emailId, text, scope)
      const complaint = complaintOf(text)
      if (complaint !== undefined) return yield* complained(emailId, complaint, scope)
      const failures = yield* reportedFailures(emailId, text, scope)
      if (failures.length === 0) return yield* ignored(emailId, "reports no failed recipient it may speak for")
      const sent = yield* sentEmail(emailId)
      if (sent === undefined) return []
      // Only recipients of this email, and each once: a repeated report changes nothing. So the
      // recipients it bounces are suppressed in the same transaction: a report whose suppression was
      // lost would find nothing left to change when it came again.
      const changes = yield* Effect.gen(function*() {
        const updated = yield* sql<{ recipient: string; attempts: number; lastResponse: string }>`
          UPDATE outbound_deliveries d SET status = 'bounced', last_response = u.response, next_attempt_at = NULL, updated_at = now()
          FROM (SELECT * FROM unnest(${failures.map((f) => f.recipient)}::text[], ${failures.map((f) => f.response)}::text[]) AS t(recipient, response)) u
          WHERE d.email_id = ${emailId} AND lower(d.recipient) = u.recipient AND d.status <> 'bounced'
          RETURNING d.recipient, d.attempts, d.last_response`
        const changes: Array<StatusChange> = updated.map((row) => ({
          recipient: row.recipient,
          status: "bounced",
          attempts: row.attempts,
          response: row.lastResponse,
          nextAttemptAt: null
        }))
        yield* suppressBounced(sql, sent, changes)
        return changes
      }).pipe(sql.withTransaction)
      yield* announce(bus, sent, changes, new Date())
      yield* recordDeliveries(changes.map(() => "bounced"))
      yield* Effect.logInfo("Bounce report recorded").pipe(Effect.annotateLogs({ email_id: emailId, bounced: changes.map((c) => c.recipient).join(",") }))
      return changes.map((c) => c.recipient)
    })

    /**
     * A feedback report that came to a mailbox of the account `userId` as mail (the address the
     * account gave a provider's feedback loop: Yahoo's and Microsoft's report to one registered
     * address, not to each message's bounce address), about an email the account sent: applied as one
     * to its bounce address is. Only a report whose sender is authenticated (`reporterDomain`, its
     * header From domain when DMARC, or SPF or DKIM aligned, passed; undefined otherwise): anyone can
     * write a report. The report itself stays mail.
     */
    const recordReceived = Effect.fn("BounceReports.recordReceived")(function*(userId: string, raw: Uint8Array, reporterDomain: string | undefined) {
      const text = Buffer.from(raw).toString("latin1")
      const complaint = complaintOf(text)
      const emailId = complaint === undefined ? undefined : reportedEmailId(text)
      if (complaint === undefined || emailId === undefined) return []
      if (reporterDomain === undefined) {
        yield* Effect.logInfo("A feedback report from an unauthenticated sender arrived as mail; not applied").pipe(Effect.annotateLogs({ email_id: emailId }))
        return []
      }
      const own = yield* sql`SELECT 1 FROM emails WHERE id = ${emailId} AND user_id = ${userId} AND direction = 'outbound'`
      if (own.length === 0) return []
      // A provider reports on its own users: a recipient it names must be at its domain (or the
      // domain it is a part of: arf.mail.yahoo.com for yahoo.com). Anyone can sign a report, and
      // any recipient can tell another's address. A report that names nobody is applied only to an
      // email with a single recipient (`complained`), who alone saw the Message-ID it names.
      const scope: Scope = complaint.recipient === undefined
        ? { speaksFor: () => true, of: "" }
        : { speaksFor: (recipient) => hostsFor(reporterDomain, domainOf(recipient)), of: ` hosted by ${reporterDomain}` }
      return yield* complained(emailId, complaint, scope)
    })

    return { record, recordReceived } as const
  })
}) {}
