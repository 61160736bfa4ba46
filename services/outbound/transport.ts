/**
 * The SMTP client port: hand one message to one server for some recipients, and learn what became
 * of each. The adapter (layers/smtp-transport.ts) speaks SMTP with nodemailer's connection.
 */
import { Context, Data, type Effect } from "effect"

export interface SmtpTarget {
  /** Where to connect: an address, or a name the system resolves. */
  readonly host: string
  /** The host's name, for TLS (SNI) when `host` is an address. */
  readonly serverName?: string | undefined
  readonly port: number
  /** TLS from the first byte (smtps); otherwise STARTTLS when the server offers it. */
  readonly secure: boolean
  /** Check the server's certificate: yes for a relay, no for MX hosts (opportunistic TLS, RFC 7435). */
  readonly verifyTls: boolean
  readonly auth?: { readonly user: string; readonly pass: string } | undefined
}

/** What one recipient's RCPT and the DATA that followed came to. */
export interface RecipientOutcome {
  readonly recipient: string
  /** The server's code: 2xx taken, 4xx try later, 5xx refused for good. */
  readonly code: number
  readonly response: string
  /**
   * Whose answer it is: the recipient's own at RCPT, or the message's at DATA (for every recipient
   * the server had taken). Only the former says anything of the address itself.
   */
  readonly stage: "rcpt" | "data"
}

/**
 * The server could not be used for this message at all: it was not reached, it hung up, or it
 * refused the connection, the sender or the data. `code` is the SMTP code when it answered one.
 */
export class SmtpFailure extends Data.TaggedError("SmtpFailure")<{
  readonly code: number | undefined
  readonly response: string
  /** Not reached at all (refused connection, time-out, DNS): the next MX host may do better. */
  readonly unreachable: boolean
  /** The server refused our login (a relay's credentials): our problem to fix, not the recipients'. */
  readonly loginRefused?: boolean | undefined
  /** The target has credentials and is not on loopback, but the session could not be encrypted: the password was not sent. */
  readonly encryptionMissing?: boolean | undefined
  /** The command it refused, when it answered one: MAIL FROM refuses the sender, DATA the message; neither the recipients' addresses. */
  readonly command?: string | undefined
}> {}

export interface SmtpTransportShape {
  readonly send: (
    target: SmtpTarget,
    message: {
      readonly from: string
      readonly to: ReadonlyArray<string>
      readonly raw: Uint8Array
      /**
       * The same message made 7-bit (services/outbound/seven-bit.ts) and signed as such, where it
       * differs: what a server that takes no 8-bit mail (no 8BITMIME, RFC 6152 §3) is given instead.
       */
      readonly sevenBit?: Uint8Array | undefined
      readonly heloName: string
    }
  ) => Effect.Effect<ReadonlyArray<RecipientOutcome>, SmtpFailure>
}

export class SmtpTransport extends Context.Tag("mailroom/SmtpTransport")<SmtpTransport, SmtpTransportShape>() {}
