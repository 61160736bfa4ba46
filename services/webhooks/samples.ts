/**
 * An example event of each kind, as a test delivery sends it (`POST /webhooks/{id}/test`): the
 * payload a receiver gets for that kind, field for field (the schemas of schemas.ts hold it to that),
 * about an email and a key that do not exist. Its ids say so (`…_example`); a receiver can tell a
 * test by its `webhook-id`, which starts with `test_`.
 */
import type { EmailFields } from "../mail/schemas.ts"
import type { DeliveryEventData } from "../outbound/schemas.ts"
import type { EventKind } from "./schemas.ts"

export interface SampleEvent {
  readonly event: EventKind
  readonly timestamp: string
  readonly data: unknown
}

/**
 * `mailboxId`: the mailbox the example is about (one the webhook is for, if it names some); `label`, one
 * the example email carries besides its own (one the webhook listens for, if it names some).
 */
export const sampleEvent = (kind: EventKind, at: Date, mailboxId = "mbx_example", label?: string): SampleEvent => {
  const timestamp = at.toISOString()
  const email: EmailFields = {
    email_id: "eml_example",
    direction: "inbound",
    message_id: "<example-1@partner.example>",
    subject: "Invoice 1042",
    from: "billing@partner.example",
    from_name: "Partner Billing",
    to: ["agent@agents.example"],
    cc: [],
    reply_to: [],
    date: timestamp,
    mailbox_id: mailboxId,
    domain: "agents.example",
    has_attachments: false,
    thread_id: "thr_example",
    labels: label === undefined || label === "inbound" || label === "unread" ? ["inbound", "unread"] : ["inbound", "unread", label],
    authentication: {
      spf: { result: "pass", domain: "partner.example", aligned: true },
      dkim: [{ result: "pass", domain: "partner.example", selector: "mail", aligned: true }],
      dmarc: { result: "pass", domain: "partner.example", policy: "reject" },
      arc: { result: "none", domain: null }
    },
    authentication_results: "mx.agents.example; spf=pass smtp.mailfrom=partner.example; " +
      "dkim=pass header.d=partner.example header.s=mail; dmarc=pass header.from=partner.example",
    spam: null
  }
  const extracted = {
    reply_text: "Please find invoice 1042 attached. Your code is 482913.",
    codes: [{ value: "482913", context: "Your code is 482913." }],
    links: [{ url: "https://partner.example/invoices/1042", text: "View invoice", kind: null }]
  }
  const sent: EmailFields = {
    ...email,
    email_id: "eml_example_sent",
    direction: "outbound",
    message_id: "<example-2@agents.example>",
    subject: "Re: Invoice 1042",
    from: "agent@agents.example",
    from_name: null,
    to: ["billing@partner.example"],
    labels: label === undefined || label === "sent" ? ["sent"] : ["sent", label],
    authentication: null,
    authentication_results: null
  }
  const delivery = (status: DeliveryEventData["status"], smtpResponse: string, nextAttemptAt: string | null): DeliveryEventData => ({
    email_id: sent.email_id,
    message_id: sent.message_id,
    mailbox_id: mailboxId,
    thread_id: sent.thread_id,
    recipient: "billing@partner.example",
    status,
    attempts: status === "sent" ? 1 : status === "deferred" ? 2 : 5,
    smtp_response: smtpResponse,
    next_attempt_at: nextAttemptAt
  })
  const later = new Date(at.getTime() + 5 * 60_000).toISOString()
  const data: Record<EventKind, unknown> = {
    "email.received": { ...email, extracted },
    "email.processed": { ...email, extracted, embedding_model: "example-embedding-model", processing_ms: 412 },
    "email.labels_changed": { ...email, labels: ["inbound", "billing"], added: ["billing"], removed: ["unread"] },
    "email.deleted": email,
    "email.sent": delivery("sent", "250 2.0.0 Ok: queued as 4F2A1", null),
    "email.delivery_delayed": delivery("deferred", "451 4.7.1 Greylisted, try again later", later),
    "email.bounced": delivery("bounced", "550 5.1.1 <billing@partner.example>: Recipient address rejected", null),
    "email.failed": delivery("failed", "Connection refused by every MX host of partner.example", null),
    "email.unsubscribed": { email_id: sent.email_id, message_id: sent.message_id, mailbox_id: mailboxId, recipient: "billing@partner.example" },
    "email.complained": {
      email_id: sent.email_id,
      message_id: sent.message_id,
      mailbox_id: mailboxId,
      thread_id: sent.thread_id,
      recipient: "billing@partner.example",
      feedback_type: "abuse",
      reported_by: "feedback.partner.example"
    },
    "meeting.answered": {
      meeting_id: "mtg_example",
      mailbox_id: mailboxId,
      uid: `mtg_example@agents.example`,
      summary: "Quarterly planning",
      attendee: { address: "billing@partner.example", name: "Billing", status: "accepted", comment: "See you there", responded_at: timestamp },
      email_id: email.email_id
    },
    "invitation.received": {
      mailbox_id: mailboxId,
      email_id: email.email_id,
      uid: "review-7@partner.example",
      change: "new",
      recurrence_id: null,
      summary: "Contract review",
      start: { date_time: "2026-12-03T14:00:00Z", date: null, time_zone: "Europe/Paris" },
      end: { date_time: "2026-12-03T14:45:00Z", date: null, time_zone: "Europe/Paris" },
      recurrence: null,
      organizer: { address: "billing@partner.example", name: "Billing" },
      response: "needs_action"
    },
    "schedule.reminder": {
      mailbox_id: mailboxId,
      uid: "review-7@partner.example",
      recurrence_id: null,
      role: "attendee",
      meeting_id: null,
      email_id: email.email_id,
      summary: "Contract review",
      location: null,
      url: "https://meet.partner.example/review-7",
      start: { date_time: "2026-12-03T14:00:00Z", date: null, time_zone: "Europe/Paris" },
      end: { date_time: "2026-12-03T14:45:00Z", date: null, time_zone: "Europe/Paris" },
      status: "confirmed",
      response: "accepted",
      busy: true,
      organizer: { address: "billing@partner.example", name: "Billing" },
      starts_in_minutes: 10
    },
    "api_key.created": { keyId: "key_example", name: "example key", keyPrefix: "mr_exampl********", createdAt: timestamp, expirationTs: null, mailboxIds: null, permission: "full_access" }
  }
  return { event: kind, timestamp, data: data[kind] }
}
