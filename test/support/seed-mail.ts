/**
 * Mail seeded straight into a test database, for in-process suites of what reads or changes stored
 * mail (how mail gets there, SMTP and ingest, is test/smtp's subject).
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { createHash } from "node:crypto"
import { inboundLabels } from "../../services/mail/label-rules.ts"
import { parseMessage } from "../../services/mail/parse.ts"
import { senderForms } from "../../services/mail/sender-list-rules.ts"
import type { InboundMessage } from "../../services/mail/schemas.ts"
import type { NewEmail } from "../../services/mail/store.ts"
import { uniqueName } from "./services.ts"
import type { TestUser } from "./users.ts"

export const DOMAIN = "agents.localhost"

export const storeBlob = (bytes: Uint8Array) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const sha256 = createHash("sha256").update(bytes).digest("hex")
    yield* sql`INSERT INTO blobs (sha256, size, content) VALUES (${sha256}, ${bytes.length}, ${bytes}) ON CONFLICT DO NOTHING`
    return sha256
  })

export interface Mailbox {
  readonly owner: TestUser
  readonly mailboxId: string
  readonly address: string
}

export const insertMailbox = (owner: TestUser) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const mailboxId = uniqueName("mbx")
    const local = mailboxId.replace(/_/g, "-")
    yield* sql`INSERT INTO mailboxes (id, user_id, local_part, domain, address_normalized)
               VALUES (${mailboxId}, ${owner.userId}, ${local}, ${DOMAIN}, ${`${local}@${DOMAIN}`})`
    return { owner, mailboxId, address: `${local}@${DOMAIN}` } satisfies Mailbox
  })

export interface SeededEmail {
  readonly subject: string
  /** Minutes before now it arrived. */
  readonly receivedMinutesAgo: number
  /** Minutes before now its Date header says it was sent (default: as it arrived). */
  readonly sentMinutesAgo?: number
  readonly text?: string
  readonly html?: string
  readonly threadId?: string
  /** Its From address (default sender@example.com). */
  readonly from?: string
  readonly attachments?: ReadonlyArray<{
    readonly filename: string
    readonly contentType: string
    readonly bytes: Uint8Array
    /** The charset its Content-Type named, as the inbound parser keeps it (default none). */
    readonly charset?: string
  }>
  /** What ingest labels an inbound email with, unless given. */
  readonly labels?: ReadonlyArray<string>
  /** More stored headers (decoded values; an array for a header given more than once). */
  readonly headers?: Readonly<Record<string, string | ReadonlyArray<string>>>
}

export const insertEmail = (mailbox: Mailbox, email: SeededEmail) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const id = uniqueName("eml")
    const raw = new TextEncoder().encode(`Subject: ${email.subject}\r\nMessage-ID: <${id}@test>\r\n\r\n${email.text ?? ""}`)
    const rawSha = yield* storeBlob(raw)
    const headers = { subject: email.subject, "message-id": `<${id}@test>`, received: ["from a", "from b"], ...email.headers }
    yield* sql`INSERT INTO emails (id, mailbox_id, user_id, message_id, thread_id, subject, from_address, to_addresses, sent_at,
                                   received_at, mail_from, rcpt_to, headers, text_body, html_body, has_attachments, raw_sha256, size, labels)
               VALUES (${id}, ${mailbox.mailboxId}, ${mailbox.owner.userId}, ${`<${id}@test>`}, ${email.threadId ?? `thr_${id}`},
                       ${email.subject}, ${email.from ?? "sender@example.com"}, ${[mailbox.address]},
                       now() - ${`${email.sentMinutesAgo ?? email.receivedMinutesAgo} minutes`}::interval,
                       now() - ${`${email.receivedMinutesAgo} minutes`}::interval, 'bounce@example.com', ${mailbox.address},
                       ${JSON.stringify(headers)}::jsonb, ${email.text ?? ""}, ${email.html ?? null},
                       ${(email.attachments ?? []).length > 0}, ${rawSha}, ${raw.length},
                       ${[...(email.labels ?? inboundLabels)]}::text[])`
    const attachmentIds: Array<string> = []
    for (const [position, attachment] of (email.attachments ?? []).entries()) {
      const checksum = yield* storeBlob(attachment.bytes)
      const attachmentId = uniqueName("att")
      attachmentIds.push(attachmentId)
      yield* sql`INSERT INTO attachments (id, email_id, position, filename, content_type, size, checksum, charset)
                 VALUES (${attachmentId}, ${id}, ${position}, ${attachment.filename}, ${attachment.contentType},
                         ${attachment.bytes.length}, ${checksum}, ${attachment.charset ?? null})`
    }
    return { id, raw, attachmentIds }
  })

/**
 * What the SMTP node hands ingest for the message `raw` (its bytes stored) to `mailbox`: a new email id,
 * an envelope from ada@example.test, received now; `fields` change any of it.
 */
export const inboundMessage = (mailbox: Mailbox, raw: Uint8Array, fields: Partial<InboundMessage> = {}) =>
  Effect.map(storeBlob(raw), (sha): InboundMessage => ({
    email_id: uniqueName("eml"),
    mailbox_id: mailbox.mailboxId,
    user_id: mailbox.owner.userId,
    raw_sha256: sha,
    size: raw.byteLength,
    mail_from: "ada@example.test",
    rcpt_to: mailbox.address,
    received_at: new Date().toISOString(),
    ...fields
  }))

/** What the ingest actor would store for the message `raw` (its bytes stored) in `mailbox`: store.ts's input. */
export const newInbound = (mailbox: Mailbox, raw: Uint8Array, messageId: string, emailId = uniqueName("eml")) =>
  Effect.gen(function*() {
    const parsed = yield* parseMessage(raw)
    return {
      emailId,
      mailboxId: mailbox.mailboxId,
      userId: mailbox.owner.userId,
      direction: "inbound",
      labels: ["inbound"],
      rawSha256: yield* storeBlob(raw),
      size: raw.byteLength,
      mailFrom: "ada@example.test",
      rcptTo: mailbox.address,
      receivedAt: new Date(),
      messageId,
      parsed,
      headerFromForms: parsed.from === undefined ? [] : senderForms(parsed.from)
    } satisfies NewEmail
  })
