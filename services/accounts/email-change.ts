/**
 * Changing the email an account signs in with: asked from a login session with the password, and
 * made only once the new address confirms it by a mailed link, so that nobody moves an account to an
 * address they cannot read (or to someone else's). Then the old address is told, so that a change
 * its owner did not make does not go unnoticed, and the payment provider, which mails receipts and
 * invoices. Sessions, keys and everything else stay.
 *
 * A link works once, for 24 hours; asking again mails a new one (the older ones still work until
 * they expire or one is used). At most 5 are mailed per account an hour, as password links are.
 */
import { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Option } from "effect"
import { PaymentProvider } from "../billing/payments.ts"
import { Conflict, RateLimited, ValidationError } from "../errors.ts"
import { GREETING, letter, notice, SystemMail } from "../outbound/system-mail.ts"
import { mailedLinkWindows, RateLimiter } from "../ratelimit/rate-limiter.ts"
import { isUniqueViolation } from "../unique-violation.ts"
import { Accounts } from "./accounts.ts"
import { AccountActivity } from "./activity.ts"
import { Principals } from "./principals.ts"
import { opaqueToken, sha256 } from "./tokens.ts"

/** How long a mailed confirmation works. */
export const EMAIL_LINK_HOURS = 24
const emailTokenPrefix = "mre_"

const taken = (field: string) =>
  new Conflict({ message: "An account with this email is already registered", details: { [field]: "already registered" } })

export class EmailChange extends Effect.Service<EmailChange>()("mailroom/EmailChange", {
  dependencies: [Accounts.Default, RateLimiter.layer, SystemMail.Default, AccountActivity.Default],
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const accounts = yield* Accounts
    const limiter = yield* RateLimiter
    const mail = yield* SystemMail
    const principals = yield* Principals
    const payments = yield* PaymentProvider
    const activity = yield* AccountActivity

    /**
     * Mail a link to `newEmail` that moves the account there. The password is asked again (a session
     * left open must not be enough): a wrong one is 400 on `details.password` and counts as a failed login.
     */
    const request = Effect.fn("EmailChange.request")(
      function*(userId: string, input: { readonly newEmail: string; readonly password: string }, pageUrl: string) {
        yield* accounts.confirmPassword(userId, input.password, "password")
        const rows = yield* sql<{ email: string; name: string; taken: boolean }>`
          SELECT email, name, EXISTS (SELECT 1 FROM users WHERE email_normalized = ${input.newEmail.toLowerCase()}) AS taken
          FROM users WHERE id = ${userId}`
        const user = rows[0]!
        if (user.email.toLowerCase() === input.newEmail.toLowerCase()) {
          return yield* ValidationError.field("newEmail", "is the account's email already")
        }
        if (user.taken) return yield* taken("newEmail")
        const allowance = yield* limiter.take(`email_change:${userId}`, mailedLinkWindows)
        if (!allowance.allowed) {
          return yield* RateLimited.of({ ...allowance, message: "Too many confirmation links mailed for this account; try again later" })
        }
        const token = opaqueToken(emailTokenPrefix)
        const expiresAt = new Date(Date.now() + EMAIL_LINK_HOURS * 3_600_000)
        yield* sql`INSERT INTO email_changes ${sql.insert({ tokenHash: sha256(token), userId, newEmail: input.newEmail, expiresAt })}`
        const link = `${pageUrl.replace(/\/+$/, "")}/#/confirm-email/${token}`
        yield* mail.send({
          to: input.newEmail,
          expiresAt,
          subject: "Confirm your new Mailroom email",
          ...letter([
            GREETING,
            `The Mailroom account ${user.email} asked to sign in with ${input.newEmail} from now on. Open this link within ${EMAIL_LINK_HOURS} hours to confirm:`,
            { link, label: `Use ${input.newEmail}` },
            `Until then the account's email stays ${user.email}. If you did not ask, ignore this email: nothing changes.`
          ])
        })
        return { newEmail: input.newEmail, message: `A link to confirm was mailed to ${input.newEmail}; it works for ${EMAIL_LINK_HOURS} hours` }
      }
    )

    /** Move the account to the address a mailed link confirms, and tell the old address. */
    const confirm = Effect.fn("EmailChange.confirm")(function*(token: string) {
      const done = yield* sql.withTransaction(Effect.gen(function*() {
        // Taken in one statement: of two uses of one link at once, one finds it gone.
        const links = yield* sql<{ userId: string; newEmail: string; live: boolean }>`
          DELETE FROM email_changes WHERE token_hash = ${sha256(token)} RETURNING user_id, new_email, expires_at > now() AS live`
        const link = links[0]
        if (!link?.live) return Option.none()
        const before = yield* sql<{ email: string }>`SELECT email FROM users WHERE id = ${link.userId} FOR UPDATE`
        yield* sql`UPDATE users SET email = ${link.newEmail}, email_normalized = ${link.newEmail.toLowerCase()} WHERE id = ${link.userId}`
        // The other links of the account: a move to another address must be asked again, and a new
        // password's links went to the old address, which is no longer the account's.
        yield* sql`DELETE FROM email_changes WHERE user_id = ${link.userId}`
        yield* sql`DELETE FROM password_resets WHERE user_id = ${link.userId}`
        return Option.some({ userId: link.userId, email: link.newEmail, previousEmail: before[0]!.email })
      })).pipe(
        Effect.catchTag("SqlError", (error): Effect.Effect<never, Conflict | SqlError> =>
          isUniqueViolation(error) ? Effect.fail(taken("newEmail")) : Effect.fail(error))
      )
      if (Option.isNone(done)) {
        return yield* ValidationError.field("token", "is not a valid link, or it was used or has expired: ask for a new one")
      }
      const { email, previousEmail, userId } = done.value
      yield* principals.changed(userId)
      yield* Effect.logInfo("Account email changed").pipe(Effect.annotateLogs({ user_id: userId }))
      yield* activity.record(userId, "email_changed", { previousEmail, email })
      // Receipts and invoices follow. The change is made either way: a provider that could not be told
      // now is told at the account's next checkout or portal visit.
      yield* payments.emailChanged(userId).pipe(
        Effect.catchTag("PaymentError", (error) =>
          Effect.logWarning("The payment provider was not told of the account's new email; it is told at the next billing visit").pipe(
            Effect.annotateLogs({ user_id: userId, error: error.message })
          ))
      )
      // Told once it is done: the person who owns the old address learns of a change they did not make.
      yield* mail.send(notice({ email }, "Your Mailroom email was changed", [
        `The Mailroom account that signed in with ${previousEmail} signs in with ${email} from now on; the change was confirmed from that address.`,
        "If you did not make this change, someone who knew your password did: ask your Mailroom operator for help."
      ], previousEmail))
      return { email, previousEmail }
    })

    return { request, confirm } as const
  })
}) {}
