/**
 * SMTP submission (RFC 6409): mail programs and SMTP libraries send from a mailbox with an API key as
 * the password, and their messages go out as every send does (send.ts `submitComposed`: signed, kept as
 * sent mail, counted, delivered by the mta). This service is the submission server's rules; the
 * listener (src/smtp/submission.ts) asks it at AUTH, MAIL FROM and the end of DATA, and answers with
 * the reply each refusal carries.
 *
 * - AUTH: the password is an API key (the user name is not read; a client must send one). A key
 *   that is unknown, revoked or expired: 535 5.7.8.
 * - MAIL FROM: a mailbox of the key's account (of its mailboxes, for a key limited to some), active;
 *   else 553 5.7.1. A read-only key sends nothing: 550 5.7.1. Each message counts as one request
 *   against the key's rate limit, as a send over the API does (451 4.7.1 past it, with when to retry).
 * - End of DATA: the send's own refusals, as SMTP replies (`replyFor`).
 */
import { SqlClient } from "@effect/sql"
import { Cause, Data, Effect, Option } from "effect"
import { Authenticator } from "../accounts/authenticator.ts"
import type { Principal } from "../accounts/principal.ts"
import type { SmtpReply } from "../mail/refusals.ts"
import { Outbound } from "./send.ts"

/** A submission refused: the reply the client gets. */
export class SubmissionRefused extends Data.TaggedError("SubmissionRefused")<{ readonly reply: SmtpReply }> {
  static of(code: number, text: string) {
    return new SubmissionRefused({ reply: { code, text } })
  }
}

/** Anything unforeseen (the database or the bus unreachable): the client keeps the message and retries. */
export const temporaryFailure = SubmissionRefused.of(451, "4.3.0 Temporary failure; nothing was sent, try again later")

/** The refusals a send ends in, by tag, as SMTP replies (RFC 3463's enhanced codes). */
const replies: Record<string, (message: string, field?: string) => SmtpReply> = {
  ValidationError: (message, field) =>
    field === "from"
      ? { code: 550, text: `5.7.1 ${message}` }
      : field === "to"
      ? { code: 554, text: `5.5.1 ${message}` }
      : { code: 550, text: `5.6.0 ${message}` },
  RecipientSuppressed: (message) => ({ code: 550, text: `5.7.1 ${message}` }),
  SenderDomainUnverified: (message) => ({ code: 550, text: `5.7.1 ${message}` }),
  // Gmail's reply to a sender past its day's sends, which mail programs show as such.
  SendQuotaReached: (message) => ({ code: 550, text: `5.4.5 ${message}` }),
  StorageQuotaReached: (message) => ({ code: 552, text: `5.2.2 ${message}` }),
  PayloadTooLarge: (message) => ({ code: 552, text: `5.3.4 ${message}` }),
  NotFound: () => ({ code: 553, text: "5.7.1 The sending mailbox no longer exists" })
}

/** The reply for a send's failure: its refusal's, or a temporary failure for anything else. */
const replyFor = (error: { readonly _tag: string; readonly message?: string; readonly details?: unknown }): SmtpReply => {
  const reply = replies[error._tag]
  if (reply === undefined) return temporaryFailure.reply
  const details = error.details as Record<string, unknown> | undefined
  // A validation error names its field as its details' one key.
  const field = details === undefined ? undefined : Object.keys(details)[0]
  // A message says which field it is about at its start; the reply says it in words.
  const message = (error.message ?? "").replace(/^(from|to|message): /, "")
  return reply(message.replace(/[\r\n]+/g, " "), field)
}

export class Submission extends Effect.Service<Submission>()("mailroom/Submission", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const authenticator = yield* Authenticator
    const outbound = yield* Outbound

    /** AUTH: who the API key given as the password acts for. */
    const signIn = (apiKey: string): Effect.Effect<Principal, SubmissionRefused> =>
      authenticator.identify({ kind: "apiKey", secret: apiKey }).pipe(
        Effect.catchTags({
          Unauthorized: () => Effect.fail(SubmissionRefused.of(535, "5.7.8 Authentication failed: the password must be a valid API key")),
          SqlError: () => Effect.fail(temporaryFailure)
        })
      )

    /**
     * MAIL FROM: the mailbox at `address` the key may send from, this message counted against the
     * key's rate limit. (The key is asked again: one revoked since AUTH sends nothing more.)
     */
    const sender = (apiKey: string, address: string): Effect.Effect<{ readonly principal: Principal; readonly mailboxId: string }, SubmissionRefused> =>
      Effect.gen(function*() {
        const { decision, principal } = yield* authenticator.authenticate({ kind: "apiKey", secret: apiKey })
        if (principal.readOnly) return yield* SubmissionRefused.of(550, "5.7.1 This API key is read-only: it cannot send")
        if (!decision.allowed) {
          return yield* SubmissionRefused.of(
            451,
            `4.7.1 Rate limit of ${decision.limit} requests a ${decision.window} reached; try again in ${decision.retryAfter} s`
          )
        }
        const rows = yield* sql<{ id: string }>`
          SELECT id FROM mailboxes
          WHERE user_id = ${principal.userId} AND address_normalized = ${address.toLowerCase()} AND status = 'active'`
        const mailboxId = rows[0]?.id
        const allowed = mailboxId !== undefined &&
          Option.match(principal.mailboxes, { onNone: () => true, onSome: (ids) => ids.includes(mailboxId) })
        if (!allowed) {
          return yield* SubmissionRefused.of(553, `5.7.1 <${address}> is not a mailbox this API key sends from`)
        }
        return { principal, mailboxId }
      }).pipe(
        Effect.catchTags({
          Unauthorized: () => Effect.fail(SubmissionRefused.of(535, "5.7.8 The API key is no longer valid")),
          SqlError: () => Effect.fail(temporaryFailure)
        })
      )

    /**
     * End of DATA: the message sent from the mailbox to the envelope's recipients; its email id. The
     * key is asked again (not counted again): one revoked, made read-only or narrowed away from the
     * mailbox while the message was being written sends nothing.
     */
    const send = (
      apiKey: string,
      mailboxId: string,
      message: { readonly raw: Uint8Array; readonly recipients: ReadonlyArray<string> }
    ): Effect.Effect<string, SubmissionRefused> =>
      authenticator.identify({ kind: "apiKey", secret: apiKey }).pipe(
        Effect.catchTags({
          Unauthorized: () => Effect.fail(SubmissionRefused.of(535, "5.7.8 The API key is no longer valid: nothing was sent")),
          SqlError: () => Effect.fail(temporaryFailure)
        }),
        Effect.filterOrFail(
          (principal) => !principal.readOnly,
          () => SubmissionRefused.of(550, "5.7.1 This API key is read-only: it cannot send")
        ),
        Effect.filterOrFail(
          (principal) => Option.match(principal.mailboxes, { onNone: () => true, onSome: (ids) => ids.includes(mailboxId) }),
          () => SubmissionRefused.of(550, "5.7.1 This API key no longer sends from this mailbox: nothing was sent")
        ),
        Effect.flatMap((principal) => sendAs(principal, mailboxId, message))
      )

    const sendAs = (
      principal: Principal,
      mailboxId: string,
      message: { readonly raw: Uint8Array; readonly recipients: ReadonlyArray<string> }
    ): Effect.Effect<string, SubmissionRefused> =>
      outbound.submitComposed(principal.userId, mailboxId, message).pipe(
        Effect.map((accepted) => accepted.email_id),
        Effect.catchAll((error) => {
          const reply = replyFor(error)
          const logged = reply.code === 451 ? Effect.logWarning("A submitted message was answered 451", Cause.fail(error)) : Effect.void
          return Effect.zipRight(logged, Effect.fail(new SubmissionRefused({ reply })))
        })
      )

    return { signIn, sender, send } as const
  })
}) {}
