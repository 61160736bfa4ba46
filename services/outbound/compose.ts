/**
 * Building an outgoing message: MIME by nodemailer's composer (the library every Node mailer uses),
 * then a DKIM signature by nodemailer's signer. The bytes made here are stored and sent as they are:
 * the sent email's raw is exactly what every recipient gets, on every attempt.
 *
 * Only bytes the caller gave are used: the composer's file and URL access are off, so an attachment
 * can never name a path on this machine or an address to fetch.
 */
import { Effect } from "effect"
import DKIM from "nodemailer/lib/dkim"
import MailComposer from "nodemailer/lib/mail-composer"
import type { AttachmentInput } from "./schemas.ts"

export interface NamedAddress {
  readonly name?: string | undefined
  readonly address: string
}

export interface DkimSigner {
  readonly domainName: string
  readonly keySelector: string
  /** PEM. */
  readonly privateKey: string
}

export interface Composition {
  readonly from: NamedAddress
  readonly to: ReadonlyArray<NamedAddress>
  readonly cc: ReadonlyArray<NamedAddress>
  readonly replyTo?: NamedAddress | undefined
  readonly subject: string
  readonly text?: string | undefined
  readonly html?: string | undefined
  readonly attachments: ReadonlyArray<AttachmentInput>
  readonly headers: Readonly<Record<string, string>>
  /** With the angle brackets. */
  readonly messageId: string
  readonly inReplyTo?: string | undefined
  readonly references: ReadonlyArray<string>
  readonly date: Date
  readonly dkim: DkimSigner
}

export class CompositionError extends Error {}

const toComposer = (address: NamedAddress) => (address.name ? { name: address.name, address: address.address } : address.address)

/** The message, signed, as bytes with CRLF line ends. */
export const compose = (message: Composition): Effect.Effect<Uint8Array, CompositionError> =>
  Effect.tryPromise({
    try: async () => {
      const composer = new MailComposer({
        from: toComposer(message.from),
        to: message.to.map(toComposer),
        cc: message.cc.length > 0 ? message.cc.map(toComposer) : undefined,
        replyTo: message.replyTo ? toComposer(message.replyTo) : undefined,
        subject: message.subject,
        text: message.text,
        html: message.html,
        attachments: message.attachments.map((a) => ({
          filename: a.filename,
          content: Buffer.from(a.content, "base64"),
          ...(a.content_type ? { contentType: a.content_type } : {}),
          ...(a.content_id ? { cid: a.content_id } : {})
        })),
        headers: { ...message.headers },
        messageId: message.messageId,
        inReplyTo: message.inReplyTo,
        references: message.references.length > 0 ? [...message.references] : undefined,
        date: message.date,
        newline: "\r\n",
        disableFileAccess: true,
        disableUrlAccess: true,
        xMailer: false
      })
      const unsigned = await composer.compile().build()
      const signed = new DKIM({
        domainName: message.dkim.domainName,
        keySelector: message.dkim.keySelector,
        privateKey: message.dkim.privateKey
      }).sign(unsigned)
      const chunks: Array<Buffer> = []
      for await (const chunk of signed) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk))
      return new Uint8Array(Buffer.concat(chunks))
    },
    catch: (cause) => new CompositionError(`The message could not be built: ${cause instanceof Error ? cause.message : String(cause)}`, { cause })
  })
