/**
 * Mail Mailroom itself sends to a person (a link to choose a new password), not an agent's: it
 * belongs to no mailbox, is not stored as mail and counts against no plan.
 *
 * It is built and signed here, from `no-reply@` the first shared domain with the operator's DKIM
 * key, and handed to the mta on the bus (`mail.outbound.system.<id>`), which delivers it as it
 * delivers sent mail: to a mailbox of this Mailroom through the inbound path, else through
 * `SMTP_RELAY_URL` or the domain's MX hosts, tried again on the retry schedule until the mail is no
 * longer worth delivering (`expiresAt`: a link that no longer works). Published before the caller
 * answers, so a crash after the answer loses nothing.
 */
import { Effect, Schema } from "effect"
import { newId } from "../accounts/tokens.ts"
import { Bus, encodeJson, subjects } from "../bus/bus.ts"
import { escapeHtml } from "../html.ts"
import { MailboxSettings } from "../mailboxes/mailboxes.ts"
import { compose } from "./compose.ts"
import { DkimKeys } from "./dkim.ts"

/**
 * The local part Mailroom's own mail comes from, on the first shared domain: always reserved, whatever
 * DISALLOWED_EMAIL_NAME says (src/app.ts), so that no account's mailbox can send as Mailroom.
 */
export const SYSTEM_SENDER = "no-reply"

/** One system message on its way: everything the mta needs travels in the job. */
export const SystemMailJob = Schema.Struct({
  system_mail_id: Schema.String,
  mail_from: Schema.String,
  to: Schema.String,
  /** The signed message, base64. */
  raw: Schema.Uint8ArrayFromBase64,
  /** Not delivered after this (milliseconds since the epoch): the mta gives up. */
  expires_at: Schema.Number
})
export type SystemMailJob = typeof SystemMailJob.Type

/** A paragraph of a system message, or a link (the text part shows its address, the HTML part its label). */
export type Paragraph = string | { readonly link: string; readonly label: string }

/** The text and HTML parts of a system message, from its paragraphs (what a person wrote, escaped). */
export const letter = (paragraphs: ReadonlyArray<Paragraph>) => ({
  text: paragraphs.map((p) => (typeof p === "string" ? p : p.link)).join("\n\n"),
  html: `<!doctype html><html><body style="font-family: sans-serif; line-height: 1.5">${
    paragraphs.map((p) =>
      typeof p === "string" ? `<p>${escapeHtml(p)}</p>` : `<p><a href="${escapeHtml(p.link)}">${escapeHtml(p.label)}</a></p>`
    ).join("")
  }</body></html>`
})

/** How long a notice (telling a person what happened to their account) is tried for before it is given up. */
export const NOTICE_HOURS = 24

/**
 * How Mailroom's mail to a person begins. Never with their name: whoever registers an address types
 * the name, and Mailroom would sign their words into mail to that address's owner (a reset link
 * asked for an address someone else registered, greeting "Hello <a phishing line>").
 */
export const GREETING = "Hello,"

/** A notice to `person` at `to` (their email unless said): a greeting, then `paragraphs`; tried for NOTICE_HOURS. */
export const notice = (
  person: { readonly email: string },
  subject: string,
  paragraphs: ReadonlyArray<string>,
  to: string = person.email
): SystemMessage => ({
  to,
  expiresAt: new Date(Date.now() + NOTICE_HOURS * 3_600_000),
  subject,
  ...letter([GREETING, ...paragraphs])
})

export interface SystemMessage {
  readonly to: string
  readonly subject: string
  readonly text: string
  readonly html: string
  readonly expiresAt: Date
}

export class SystemMail extends Effect.Service<SystemMail>()("mailroom/SystemMail", {
  dependencies: [DkimKeys.Default],
  effect: Effect.gen(function*() {
    const bus = yield* Bus
    const dkim = yield* DkimKeys
    const { sharedDomains } = yield* MailboxSettings
    const domain = sharedDomains[0]!
    const from = { name: "Mailroom", address: `${SYSTEM_SENDER}@${domain}` }

    /** Queue `message` for delivery; answers its id (the Message-ID's left part, in the mta's log). */
    const send = Effect.fn("SystemMail.send")(function*(message: SystemMessage) {
      const id = newId("sys")
      const raw = yield* compose({
        from,
        to: [{ address: message.to }],
        cc: [],
        subject: message.subject,
        text: message.text,
        html: message.html,
        attachments: [],
        // RFC 3834: no auto-responder answers it.
        headers: { "Auto-Submitted": "auto-generated" },
        messageId: `<${id}@${domain}>`,
        references: [],
        date: new Date(),
        dkim: yield* dkim.signer(domain, undefined)
      }).pipe(Effect.orDie)
      const job = SystemMailJob.make({ system_mail_id: id, mail_from: from.address, to: message.to, raw, expires_at: message.expiresAt.getTime() })
      yield* bus.publish(subjects.systemMail(id), encodeJson(Schema.encodeSync(SystemMailJob)(job)), { msgId: id })
      return id
    })

    return { send } as const
  })
}) {}
