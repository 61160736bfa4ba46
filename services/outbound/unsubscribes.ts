/**
 * One-click unsubscribe (RFC 8058; RFC 2369's List-Unsubscribe). A message sent with
 * `list_unsubscribe` goes to one recipient and carries a link of its own:
 *
 *   List-Unsubscribe: <{APP_URL}/unsubscribe/{token}>
 *   List-Unsubscribe-Post: List-Unsubscribe=One-Click
 *
 * both signed by the message's DKIM signature, which RFC 8058 asks for and mail providers check before
 * they show their own "Unsubscribe" button. The provider (or the person, from the page the link opens)
 * POSTs to it: the address the message was sent to joins the account's suppression list (reason
 * `unsubscribed`, with the email), and the account hears it (`email.unsubscribed`). A GET only shows
 * the page: link checkers and previews fetch links, and must not unsubscribe anyone.
 *
 * The token is 256 random bits; only its SHA-256 is kept (migrations/0046). A link keeps working after
 * its email is deleted, and again after the account lifted the suppression (the person's wish stands).
 */
import { SqlClient } from "@effect/sql"
import { Effect, Option, Schema } from "effect"
import { randomBytes } from "node:crypto"
import { sha256 } from "../accounts/tokens.ts"
import { Bus, encodeJson, subjects } from "../bus/bus.ts"
import { deliver, stage } from "../bus/outbox.ts"
import type { UnsubscribedEventData } from "./schemas.ts"
import { OutboundSettings } from "./settings.ts"

/** `{{unsubscribe_url}}` in a body sent with `list_unsubscribe`: the link itself, for a visible footer. */
export const UNSUBSCRIBE_PLACEHOLDER = "{{unsubscribe_url}}"

/** The page a link opens (and the URL one-click POSTs to). */
const unsubscribeUrl = (appUrl: string, token: string) => `${appUrl.replace(/\/+$/, "")}/unsubscribe/${token}`

/** The headers that offer one-click unsubscribe with `url`. */
export const unsubscribeHeaders = (url: string): Readonly<Record<string, string>> => ({
  "List-Unsubscribe": `<${url}>`,
  "List-Unsubscribe-Post": "List-Unsubscribe=One-Click"
})

/** What a link is about, as its page shows it. */
export interface UnsubscribeLink {
  readonly address: string
  /** The sending mailbox's address; null when the mailbox is gone. */
  readonly sender: string | null
  /** Is the address on the account's suppression list now (for any reason)? */
  readonly suppressed: boolean
}

const LinkRow = Schema.Struct({
  userId: Schema.String,
  mailboxId: Schema.String,
  emailId: Schema.String,
  messageId: Schema.String,
  address: Schema.String,
  sender: Schema.NullOr(Schema.String),
  suppressed: Schema.Boolean
})

export class Unsubscribes extends Effect.Service<Unsubscribes>()("mailroom/Unsubscribes", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const bus = yield* Bus
    const { appUrl } = yield* OutboundSettings

    /**
     * A new link for the email `emailId`, sent to `address` alone: its URL. Kept before the message is
     * stored (a send refused after it leaves a link no message carries, which nobody can use).
     */
    const create = Effect.fn("Unsubscribes.create")(function*(
      link: { readonly userId: string; readonly mailboxId: string; readonly emailId: string; readonly messageId: string; readonly address: string }
    ) {
      const token = randomBytes(32).toString("base64url")
      yield* sql`INSERT INTO unsubscribe_links ${
        sql.insert({
          tokenSha256: sha256(token),
          userId: link.userId,
          mailboxId: link.mailboxId,
          emailId: link.emailId,
          messageId: link.messageId,
          address: link.address.toLowerCase()
        })
      }`
      return unsubscribeUrl(appUrl, token)
    })

    const read = (tokenSha256: string) =>
      sql`
        SELECT l.user_id, l.mailbox_id, l.email_id, l.message_id, l.address,
               (SELECT m.local_part || '@' || m.domain FROM mailboxes m WHERE m.id = l.mailbox_id) AS sender,
               EXISTS (SELECT 1 FROM suppressions s WHERE s.user_id = l.user_id AND s.address = l.address) AS suppressed
        FROM unsubscribe_links l WHERE l.token_sha256 = ${tokenSha256}`.pipe(
        Effect.flatMap((rows) => Effect.orDie(Schema.decodeUnknown(Schema.Array(LinkRow))(rows))),
        Effect.map((rows) => Option.fromNullable(rows[0]))
      )

    /** The link `token`, as its page shows it; none for a token no message carried (or its account is gone). */
    const find = Effect.fn("Unsubscribes.find")(function*(token: string) {
      return Option.map(yield* read(sha256(token)), ({ address, sender, suppressed }): UnsubscribeLink => ({ address, sender, suppressed }))
    })

    /**
     * Unsubscribe the address the link `token` was sent to: it joins the account's suppression list,
     * unless it is there already (whatever the reason), and the account is told. Using a link again
     * changes nothing more. None for an unknown token.
     */
    const unsubscribe = Effect.fn("Unsubscribes.unsubscribe")(function*(token: string) {
      const tokenSha256 = sha256(token)
      const found = yield* read(tokenSha256)
      if (Option.isNone(found)) return Option.none<UnsubscribeLink>()
      const link = found.value
      const now = new Date()
      const data: UnsubscribedEventData = {
        email_id: link.emailId,
        message_id: link.messageId,
        mailbox_id: link.mailboxId,
        recipient: link.address
      }
      // The account is told with the change (bus/outbox.ts): a bus that is down delays it, never loses it.
      const owed = [{
        subject: subjects.event("email.unsubscribed"),
        data: encodeJson({ event: "email.unsubscribed", timestamp: now.toISOString(), namespace: link.userId, data }),
        msgId: `email.unsubscribed:${link.emailId}:${link.address}:${now.getTime()}`
      }]
      const added = yield* sql.withTransaction(Effect.gen(function*() {
        yield* sql`UPDATE unsubscribe_links SET used_at = coalesce(used_at, ${now}) WHERE token_sha256 = ${tokenSha256}`
        const added = yield* sql`
          INSERT INTO suppressions (user_id, address, reason, last_response, email_id)
          VALUES (${link.userId}, ${link.address}, 'unsubscribed', 'Unsubscribed with the message''s List-Unsubscribe link', ${link.emailId})
          ON CONFLICT (user_id, address) DO NOTHING
          RETURNING 1`
        if (added.length > 0) yield* stage(sql, owed)
        return added
      }))
      if (added.length > 0) {
        yield* deliver(sql, bus, owed)
        yield* Effect.logInfo("A recipient unsubscribed").pipe(Effect.annotateLogs({ email_id: link.emailId, user_id: link.userId }))
      }
      return Option.some<UnsubscribeLink>({ address: link.address, sender: link.sender, suppressed: true })
    })

    /** The token of `url` when it is one of this Mailroom's links (a list hosted here, read by a mailbox here). */
    const tokenOf = (url: string): string | undefined => {
      const prefix = unsubscribeUrl(appUrl, "")
      const token = url.startsWith(prefix) ? url.slice(prefix.length) : ""
      return /^[A-Za-z0-9_-]{43}$/.test(token) ? token : undefined
    }

    return { create, find, unsubscribe, tokenOf } as const
  })
}) {}
