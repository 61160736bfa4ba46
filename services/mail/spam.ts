/**
 * Spam scoring of inbound mail through rspamd (issue 20, item 2; DESIGN.md §4b "spam").
 *
 * - With RSPAMD_URL set, the SMTP node asks rspamd about every message before it answers DATA (with
 *   the envelope: client address, HELO, MAIL FROM, recipients), at the same time as it checks the
 *   message's authentication. The SMTP node, not the ingest stage, because only it can still refuse
 *   the message (SPAM_REJECT) and only it knows the envelope first-hand.
 * - The answer is stored with the email as `spam {status, score, action, symbols}`; an action that
 *   says spam (`add header`, `rewrite subject`, `reject`) labels the email `spam`. With
 *   SPAM_REJECT=true a `reject` is answered 550 5.7.1 and nothing is stored.
 * - rspamd down, failing or slow must never lose mail: the message is accepted with
 *   `status: "unchecked"`. Without RSPAMD_URL nothing is scored and `spam` is null: nothing pretends.
 *
 * Only `effect` here: the HTTP contract reads these schemas; the port's adapter is layers/rspamd.ts.
 */
import { Context, type Effect, Schema } from "effect"

export const SpamStatus = Schema.Literal("checked", "unchecked")

export const Spam = Schema.Struct({
  status: SpamStatus.annotations({ description: "checked: rspamd answered; unchecked: it could not be asked (the mail was kept)" }),
  score: Schema.NullOr(Schema.Number).annotations({ description: "rspamd's score; null when unchecked" }),
  action: Schema.NullOr(Schema.String).annotations({
    description: "rspamd's action: no action, greylist, add header, rewrite subject, soft reject or reject; null when unchecked"
  }),
  symbols: Schema.Array(Schema.String).annotations({ description: "The rules that matched, by name" })
}).annotations({ identifier: "Spam", description: "rspamd's verdict on the message, when RSPAMD_URL is set" })
export type Spam = typeof Spam.Type

/** What the SMTP node knows of a message when DATA ends. */
export interface ScannedMessage {
  readonly clientIp: string
  readonly helo: string | undefined
  readonly mailFrom: string
  readonly recipients: ReadonlyArray<string>
  readonly raw: Uint8Array
}

/**
 * The port: scores a message, or answers `undefined` when no filter is configured. Never fails: a
 * filter that cannot be asked gives an `unchecked` verdict.
 */
export class SpamFilter extends Context.Tag("mailroom/SpamFilter")<SpamFilter, {
  readonly check: (message: ScannedMessage) => Effect.Effect<Spam | undefined>
}>() {}

export const SPAM = "spam"

const spamActions: ReadonlyArray<string> = ["add header", "rewrite subject", "reject"]

/** Whether the verdict says spam: the label `spam` is set. */
export const isSpam = (spam: Spam): boolean => spam.status === "checked" && spam.action !== null && spamActions.includes(spam.action)

/** Whether SPAM_REJECT refuses the message: rspamd says reject. */
export const spamRejects = (spam: Spam): boolean => spam.status === "checked" && spam.action === "reject"

export const unchecked: Spam = { status: "unchecked", score: null, action: null, symbols: [] }
