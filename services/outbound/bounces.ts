/**
 * Bounce reports (issue 16): a delivery status notification (RFC 3464, `multipart/report;
 * report-type=delivery-status`) that comes back to a sent email's bounce address after the receiving
 * server had taken the message. Each recipient it reports `Action: failed` is marked `bounced` with
 * the report's diagnostic, suppressed and told (`email.bounced`). The report is not stored as mail:
 * it is about the sent email, and shows on it.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { Bus } from "../bus/bus.ts"
import { announce, type SentEmail, SentEmailRow, type StatusChange, suppressBounced } from "./ledger.ts"
import { recordDeliveries } from "./metrics.ts"

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
      const recipient = /;\s*(\S+@\S+)/.exec(f.get("final-recipient") ?? f.get("original-recipient") ?? "")?.[1]
      if (recipient === undefined) return []
      const diagnostic = (f.get("diagnostic-code") ?? "").replace(/^[a-z-]+;\s*/i, "")
      return [{ recipient: recipient.replace(/^<|>$/g, "").toLowerCase(), response: diagnostic || `Bounce report: status ${f.get("status") ?? "unknown"}` }]
    })

/**
 * The body of the report's `message/delivery-status` part. Read from the raw text: mail parsers fold
 * that part into the text body, and RFC 3464 keeps it 7-bit text, so no decoding is needed.
 */
export const deliveryStatusOf = (raw: string): string | undefined => {
  const header = /^content-type:[ \t]*message\/(?:global-)?delivery-status\b[^\r\n]*(?:\r?\n[ \t][^\r\n]*)*/im.exec(raw)
  if (header === null) return undefined
  const rest = raw.slice(header.index + header[0].length)
  const bodyStart = rest.search(/\r?\n\r?\n/)
  if (bodyStart < 0) return undefined
  const body = rest.slice(bodyStart).replace(/^\r?\n\r?\n/, "")
  const end = body.search(/\r?\n--/)
  return end < 0 ? body : body.slice(0, end)
}

export class BounceReports extends Effect.Service<BounceReports>()("mailroom/BounceReports", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const bus = yield* Bus

    /** Apply the report `raw` about the sent email `emailId`; answers the recipients it bounced. */
    const record = Effect.fn("BounceReports.record")(function*(emailId: string, raw: Uint8Array) {
      const report = deliveryStatusOf(Buffer.from(raw).toString("latin1"))
      const failures = report === undefined ? [] : failedRecipients(report)
      if (failures.length === 0) {
        yield* Effect.logInfo("A message to a bounce address reports no failed recipient; ignored").pipe(Effect.annotateLogs({ email_id: emailId }))
        return []
      }
      const emails = yield* sql`SELECT user_id, mailbox_id, message_id, thread_id FROM emails WHERE id = ${emailId}`.pipe(
        Effect.flatMap((rows) => Effect.orDie(Schema.decodeUnknown(Schema.Array(SentEmailRow))(rows)))
      )
      if (!emails[0]) return []
      const sent: SentEmail = { id: emailId, ...emails[0] }
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

    return { record } as const
  })
}) {}
