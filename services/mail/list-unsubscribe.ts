/**
 * Leaving a mailing list a mailbox receives, for the agent that reads it (`POST /emails/{id}/unsubscribe`):
 * the way the email's own `List-Unsubscribe` header offers (RFC 2369), as a mail app's Unsubscribe
 * button uses it.
 *
 * - One-click (RFC 8058: an https URI and `List-Unsubscribe-Post: List-Unsubscribe=One-Click`): a POST
 *   of `List-Unsubscribe=One-Click` to it, from Mailroom, to a public address only (the webhooks' own
 *   check, webhooks/targets.ts: the URL is the sender's choice), 10 s at most, no redirect followed.
 *   A 2xx is done; anything else is 502 UNSUBSCRIBE_FAILED, unless a mailto is offered too. A link
 *   of this Mailroom's own (a list sent from one of its mailboxes) is used without the network.
 * - A `mailto:` URI: a message from the mailbox to that address, with the URI's subject and body
 *   ("unsubscribe" when it names none), sent as any send is (outbound/send.ts).
 * - Only a web page (https without one-click): it may need a person (a form, a confirmation), so it is
 *   not fetched; 422 UNSUBSCRIBE_UNAVAILABLE names it in `details.url`.
 *
 * Only mail whose sender is authenticated (DMARC, or SPF or DKIM aligned, passed): unsubscribing from
 * mail anyone could have forged tells its real sender that the address is read. Block such a sender
 * instead.
 */
import { Duration, Effect, Option } from "effect"
import { UnsubscribeFailed, UnsubscribeUnavailable } from "../errors.ts"
import { isAddress } from "../outbound/schemas.ts"
import { fromSendInput, Outbound } from "../outbound/send.ts"
import { Unsubscribes } from "../outbound/unsubscribes.ts"
import { WebhookTransport } from "../webhooks/attempts.ts"
import { WebhookTargets } from "../webhooks/targets.ts"
import { UNAUTHENTICATED } from "./authentication.ts"
import { Emails } from "./emails.ts"
import { type Email, firstHeader, type UnsubscribeResult } from "./schemas.ts"

/** How long the sender's one-click address has to answer. */
const ONE_CLICK_TIMEOUT = Duration.seconds(10)

export interface MailtoUnsubscribe {
  readonly address: string
  readonly subject: string
  readonly body: string
}

/** What an email's List-Unsubscribe offers, each way at most once (the first of its kind). */
export interface UnsubscribeWays {
  /** An https URI that takes RFC 8058's POST. */
  readonly oneClick?: string | undefined
  readonly mailto?: MailtoUnsubscribe | undefined
  /** An https URI to open in a browser (no one-click). */
  readonly page?: string | undefined
}

const mailtoOf = (uri: string): MailtoUnsubscribe | undefined => {
  try {
    const url = new URL(uri)
    const address = decodeURIComponent(url.pathname).trim()
    if (!isAddress(address)) return undefined
    return { address, subject: url.searchParams.get("subject") || "unsubscribe", body: url.searchParams.get("body") || "unsubscribe" }
  } catch {
    return undefined
  }
}

/** The ways `headers` (an email's, lower-cased names) offer to unsubscribe. */
export const unsubscribeWaysOf = (headers: Email["headers"]): UnsubscribeWays => {
  const uris = [...(firstHeader(headers, "list-unsubscribe") ?? "").matchAll(/<\s*([^>]+?)\s*>/g)].map((m) => m[1]!)
  const oneClickOffered = /\bList-Unsubscribe\s*=\s*One-Click\b/i.test(firstHeader(headers, "list-unsubscribe-post") ?? "")
  // http too: the one-click POST goes only where webhooks may (https, unless WEBHOOK_ALLOW_PRIVATE lets
  // a development setup use plain http), and an http page is still a page.
  const web = uris.find((uri) => /^https?:\/\//i.test(uri))
  const mailto = uris.filter((uri) => /^mailto:/i.test(uri)).map(mailtoOf).find((m) => m !== undefined)
  return { oneClick: oneClickOffered ? web : undefined, mailto, page: oneClickOffered ? undefined : web }
}

export class ListUnsubscribe extends Effect.Service<ListUnsubscribe>()("mailroom/ListUnsubscribe", {
  effect: Effect.gen(function*() {
    const emails = yield* Emails
    const targets = yield* WebhookTargets
    const transport = yield* WebhookTransport
    const outbound = yield* Outbound
    const unsubscribes = yield* Unsubscribes

    const unavailable = (emailId: string, reason: string, message: string, url?: string) =>
      new UnsubscribeUnavailable({ message, details: { email_id: emailId, reason, ...(url === undefined ? {} : { url }) } })

    /**
     * RFC 8058's POST to `url`; its status, or why it was not answered. A link of this Mailroom's own
     * (mail between two of its mailboxes) is used here, without the network.
     */
    const oneClick = (url: string) => {
      const own = unsubscribes.tokenOf(url)
      return own !== undefined
        ? Effect.map(unsubscribes.unsubscribe(own), (done) => Option.isSome(done) ? { status: 200 } : { status: 404, error: "answered HTTP 404" })
        : oneClickAway(url)
    }

    const oneClickAway = (url: string) =>
      targets.resolve(url).pipe(
        Effect.flatMap((target) =>
          transport.post({
            target,
            headers: { "content-type": "application/x-www-form-urlencoded", "user-agent": "Mailroom (one-click unsubscribe)" },
            body: "List-Unsubscribe=One-Click",
            timeout: ONE_CLICK_TIMEOUT
          })
        ),
        Effect.map(({ status }) => status >= 200 && status < 300 ? { status } : { status, error: `answered HTTP ${status}` }),
        Effect.catchTags({
          TargetRefused: (refused) => Effect.succeed({ status: null, error: refused.message.replace(/; webhooks are .*$/, "") }),
          TransportError: (failed) => Effect.succeed({ status: null, error: failed.message })
        })
      )

    const unsubscribe = Effect.fn("ListUnsubscribe.unsubscribe")(function*(userId: string, emailId: string) {
      const email = yield* emails.get(userId, emailId)
      if (email.direction === "outbound") {
        return yield* unavailable(emailId, "sent", "Mailroom sent this email: only received mail can be unsubscribed from")
      }
      const ways = unsubscribeWaysOf(email.headers)
      if (ways.oneClick === undefined && ways.mailto === undefined) {
        return yield* ways.page === undefined
          ? unavailable(emailId, "none", "The email names no way to unsubscribe (no List-Unsubscribe header with an https or mailto address)")
          : unavailable(emailId, "page", "The email's unsubscribe is a web page, which may need a person: open details.url", ways.page)
      }
      if (email.labels.includes(UNAUTHENTICATED)) {
        return yield* unavailable(
          emailId,
          "unauthenticated",
          "The email's sender is not authenticated: unsubscribing would tell whoever sent it that the address is read. Block the sender instead"
        )
      }
      const tried = ways.oneClick === undefined ? undefined : yield* oneClick(ways.oneClick)
      if (tried !== undefined && !("error" in tried)) {
        yield* Effect.logInfo("Unsubscribed with one click").pipe(Effect.annotateLogs({ email_id: emailId }))
        return { email_id: emailId, method: "one_click", url: ways.oneClick!, status: tried.status, address: null, sent_email_id: null } satisfies UnsubscribeResult
      }
      if (ways.mailto === undefined) {
        return yield* new UnsubscribeFailed({
          message: `The sender's unsubscribe address ${ways.oneClick} ${tried!.error}`,
          details: { email_id: emailId, url: ways.oneClick!, ...(tried!.status === null ? { error: tried!.error } : { status: tried!.status }) }
        })
      }
      const { address, subject, body } = ways.mailto
      // Sent without a key: the key's refusal cannot happen.
      const sent = yield* outbound.submit(userId, email.mailbox_id, fromSendInput({ to: [address], subject, text: body })).pipe(
        Effect.catchTag("IdempotencyKeyReused", (error) => Effect.die(error))
      )
      yield* Effect.logInfo("Unsubscribed by mail").pipe(Effect.annotateLogs({ email_id: emailId, sent_email_id: sent.email_id }))
      return { email_id: emailId, method: "mailto", url: null, status: null, address, sent_email_id: sent.email_id } satisfies UnsubscribeResult
    })

    return { unsubscribe } as const
  }),
  dependencies: [Unsubscribes.Default]
}) {}
