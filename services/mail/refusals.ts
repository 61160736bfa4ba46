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

/** The database or the bus failed us: 451 4.3.0, so the sender keeps the message and retries. */
export class TemporaryFailure extends Data.TaggedError("TemporaryFailure")<{ readonly reason: string; readonly cause?: unknown }> {
  get reply(): SmtpReply {
    return { code: 451, text: "4.3.0 Temporary failure, please try again later" }
  }
}

export type RecipientRefusal = UnknownRecipient | MessageTooBig | DailyLimitReached | MonthlyLimitReached | TemporaryFailure
export type MessageRefusal = MessageTooBig | TemporaryFailure
