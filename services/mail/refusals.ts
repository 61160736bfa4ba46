/**
 * Why the SMTP node refuses a recipient or a message, and the reply each refusal gets
 * (DESIGN.md §4 "SMTP refusals"). Permanent refusals (5xx) tell the sender to give up; temporary ones
 * (4xx) to try again later. Nothing is ever answered 250 unless it is durable.
 */
import { Data } from "effect"

export interface SmtpReply {
  /** The basic reply code, e.g. 550. */
  readonly code: number
  /** The text after the code, starting with the enhanced status code (RFC 3463). */
  readonly text: string
}

/** Unknown or deleted recipient: 550 5.1.1. */
export class UnknownRecipient extends Data.TaggedError("UnknownRecipient")<{ readonly address: string }> {
  get reply(): SmtpReply {
    return { code: 550, text: `5.1.1 <${this.address}>: no such mailbox here` }
  }
}

/**
 * A mailbox on a custom domain of an account back on the free plan, which has the shared pool only
 * (SPEC rule 6): 450 4.2.1, mailbox disabled for now, so senders keep the mail and retry while the
 * owner upgrades (or pays); the mailbox and its mail are kept, and the API shows the domain's
 * `receives_mail` false.
 */
export class PlanExcludesDomain extends Data.TaggedError("PlanExcludesDomain")<{ readonly address: string }> {
  get reply(): SmtpReply {
    return { code: 450, text: `4.2.1 <${this.address}>: not receiving for now: the account's plan does not include custom domains` }
  }
}

/** Bigger than the recipient's plan allows: 552 5.3.4. */
export class MessageTooBig extends Data.TaggedError("MessageTooBig")<{ readonly limit: number }> {
  get reply(): SmtpReply {
    return { code: 552, text: `5.3.4 Message too big: the limit for this recipient is ${this.limit} bytes` }
  }
}

/** The recipient's account received its plan's emails for today: 452 4.2.2 (try tomorrow). */
export class DailyLimitReached extends Data.TaggedError("DailyLimitReached")<{ readonly address: string; readonly limit: number }> {
  get reply(): SmtpReply {
    return { code: 452, text: `4.2.2 <${this.address}>: daily limit of ${this.limit} emails reached, try again tomorrow` }
  }
}

/** The recipient's account received its plan's emails for this billing period: 552 5.2.2. */
export class MonthlyLimitReached extends Data.TaggedError("MonthlyLimitReached")<{ readonly address: string; readonly limit: number }> {
  get reply(): SmtpReply {
    return { code: 552, text: `5.2.2 <${this.address}>: monthly limit of ${this.limit} emails reached` }
  }
}

/**
 * The recipient's account has used its plan's storage (or this message would pass it): 452 4.2.2,
 * mailbox full, so the sender keeps trying while the owner deletes a mailbox or upgrades.
 */
export class StorageFull extends Data.TaggedError("StorageFull")<{ readonly address: string; readonly limit: number }> {
  get reply(): SmtpReply {
    return { code: 452, text: `4.2.2 <${this.address}>: mailbox full: the account's storage of ${this.limit} bytes is used` }
  }
}

/**
 * The recipient's allow or block lists refuse the envelope sender (sender-list-rules.ts): 550 5.7.1,
 * for this recipient only; the message's other recipients are answered on their own.
 */
export class SenderRefused extends Data.TaggedError("SenderRefused")<{ readonly address: string }> {
  get reply(): SmtpReply {
    return { code: 550, text: `5.7.1 <${this.address}>: the recipient does not accept mail from this sender` }
  }
}

/** The database or the bus failed us: 451 4.3.0, so the sender keeps the message and retries. */
export class TemporaryFailure extends Data.TaggedError("TemporaryFailure")<{ readonly reason: string; readonly cause?: unknown }> {
  get reply(): SmtpReply {
    return { code: 451, text: "4.3.0 Temporary failure, please try again later" }
  }
}

export type RecipientRefusal =
  | UnknownRecipient
  | PlanExcludesDomain
  | SenderRefused
  | MessageTooBig
  | DailyLimitReached
  | MonthlyLimitReached
  | StorageFull
  | TemporaryFailure
/** Why a message is refused at DATA: its size, a limit parallel sessions used up since RCPT, or a failure. */
export type MessageRefusal = MessageTooBig | DailyLimitReached | MonthlyLimitReached | TemporaryFailure

/**
 * Limits on one client, against address harvesting and connection floods. RFC 5321 §4.5.3.1.8 makes
 * 100 recipients the least a server must take per message; past it the sender is told to send the
 * rest in another transaction.
 */
export const MAX_RECIPIENTS_PER_MESSAGE = 100
/** A session that names this many unknown recipients is closed: a real sender rarely has so many wrong. */
export const MAX_UNKNOWN_RECIPIENTS_PER_SESSION = 20

/** More recipients than one message may have: 452 4.5.3 (send the rest in another transaction). */
export class TooManyRecipients extends Data.TaggedError("TooManyRecipients")<{ readonly limit: number }> {
  get reply(): SmtpReply {
    return { code: 452, text: `4.5.3 Too many recipients: at most ${this.limit} per message` }
  }
}

/**
 * A recipient whose plan takes messages of another size than the recipients already accepted: one
 * message has one size, and the smallest limit would refuse it for all. 452 4.5.3 tells the sender
 * to send to this one in another transaction (as past the recipients' limit), where it gets its own.
 */
export class SizeLimitDiffers extends Data.TaggedError("SizeLimitDiffers")<{ readonly address: string }> {
  get reply(): SmtpReply {
    return { code: 452, text: `4.5.3 <${this.address}>: takes messages of another size than this message's other recipients; send to it in another transaction` }
  }
}

/** The session named too many unknown recipients: 421 4.7.0, and the connection is closed. */
export class TooManyUnknownRecipients extends Data.TaggedError("TooManyUnknownRecipients")<{ readonly limit: number }> {
  get reply(): SmtpReply {
    return { code: 421, text: `4.7.0 Too many unknown recipients (${this.limit}), closing connection` }
  }
}

/** The client's address already holds its share of connections: 421 4.7.0, and the connection is closed. */
export class TooManyConnections extends Data.TaggedError("TooManyConnections")<{ readonly limit: number }> {
  get reply(): SmtpReply {
    return { code: 421, text: `4.7.0 Too many connections from your address (at most ${this.limit}), try again later` }
  }
}

/**
 * DMARC_ENFORCE=true and the message fails DMARC under its From domain's `p=reject`: 550 5.7.1, as
 * the domain's owner asked (RFC 7489 §6.7).
 */
export class SpamRejected extends Data.TaggedError("SpamRejected")<{}> {
  get reply(): SmtpReply {
    return { code: 550, text: "5.7.1 Message refused as spam" }
  }
}

/** DMARC_ENFORCE's refusal: the From domain (null: the From names no single author). */
export class DmarcRejected extends Data.TaggedError("DmarcRejected")<{ readonly domain: string | null }> {
  get reply(): SmtpReply {
    return this.domain === null
      ? { code: 550, text: "5.7.1 Message refused: its From must name exactly one author for DMARC to be checked" }
      : { code: 550, text: `5.7.1 Message refused: it fails DMARC and ${this.domain} publishes p=reject` }
  }
}
