/**
 * A forgotten password: a link mailed to the account's email, that sets a new one once.
 *
 * - Asking answers the same whether or not an account uses the email (the answer never says which);
 *   for one that does, a link is mailed (outbound/system-mail.ts), at most 5 an hour per account so
 *   that nobody can fill a person's inbox with them.
 * - The link carries a random token (256 bits) in its fragment, which browsers send to no server;
 *   only its SHA-256 is kept. It works once, for an hour; any of the account's unexpired links
 *   works, and using one ends them all.
 * - The password is then set as `Accounts.setPassword` sets it: every session of the account ends
 *   and its failed logins are forgotten; API keys keep working.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { ValidationError } from "../errors.ts"
import { GREETING, letter, SystemMail } from "../outbound/system-mail.ts"
import { mailedLinkWindows, RateLimiter } from "../ratelimit/rate-limiter.ts"
import { Accounts } from "./accounts.ts"
import type { NewPasswordInput, PasswordReset as PasswordResetAnswer } from "./schemas.ts"
import { opaqueToken, sha256 } from "./tokens.ts"

/** How long a mailed link works. */
export const RESET_LINK_MINUTES = 60
const resetTokenPrefix = "mrp_"

/** The mail: who asked is unknown to us, so it says what to do when it was not them. */
const resetMessage = (email: string, link: string) => ({
  subject: "Choose a new Mailroom password",
  ...letter([
    GREETING,
    `Someone asked to choose a new password for the Mailroom account ${email}. If it was you, open this link within ${RESET_LINK_MINUTES} minutes and choose one:`,
    { link, label: "Choose a new password" },
    "The link works once. Choosing a new password signs out every session of the account; its API keys keep working.",
    "If you did not ask, ignore this email: your password stays as it is."
  ])
})

const badLink = () => ValidationError.field("token", "is not a valid link, or it was used or has expired: ask for a new one")

export class PasswordReset extends Effect.Service<PasswordReset>()("mailroom/PasswordReset", {
  dependencies: [Accounts.Default, RateLimiter.layer, SystemMail.Default],
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const accounts = yield* Accounts
    const limiter = yield* RateLimiter
    const mail = yield* SystemMail

    /**
     * Mail a link to choose a new password to the account that uses `email`, if one does and its
     * hourly allowance is not spent. `pageUrl` is the dashboard's address; the link opens its page.
     */
    const request = Effect.fn("PasswordReset.request")(function*(email: string, pageUrl: string) {
      const rows = yield* sql<{ id: string; email: string; name: string }>`
        SELECT id, email, name FROM users WHERE email_normalized = ${email.toLowerCase()}`
      const user = rows[0]
      if (!user) return
      const allowance = yield* limiter.take(`password_reset:${user.id}`, mailedLinkWindows)
      if (!allowance.allowed) {
        return yield* Effect.logInfo("Password reset link not mailed: the account's hourly allowance is spent").pipe(
          Effect.annotateLogs({ user_id: user.id })
        )
      }
      const token = opaqueToken(resetTokenPrefix)
      const expiresAt = new Date(Date.now() + RESET_LINK_MINUTES * 60_000)
      yield* sql`INSERT INTO password_resets ${sql.insert({ tokenHash: sha256(token), userId: user.id, expiresAt })}`
      const link = `${pageUrl.replace(/\/+$/, "")}/#/reset-password/${token}`
      const systemMailId = yield* mail.send({ to: user.email, expiresAt, ...resetMessage(user.email, link) })
      yield* Effect.logInfo("Password reset link mailed").pipe(Effect.annotateLogs({ user_id: user.id, system_mail_id: systemMailId }))
    })

    /** Set the password of the account a mailed link was for; the link, and every other of the account's, ends. */
    const confirm = Effect.fn("PasswordReset.confirm")(function*(input: NewPasswordInput) {
      // Taken in one statement: of two uses of one link at once, one finds it gone. An expired link goes too.
      const taken = yield* sql<{ userId: string; live: boolean }>`
        DELETE FROM password_resets WHERE token_hash = ${sha256(input.token)} RETURNING user_id, expires_at > now() AS live`
      const link = taken[0]
      if (!link?.live) return yield* badLink()
      // The account deleted since the link was taken: its links went with it.
      const done = yield* Effect.catchTag(accounts.setPassword(link.userId, input.password, "link"), "NotFound", badLink)
      return {
        ...done,
        message: "Password set; every session of the account is signed out: sign in with the new password"
      } satisfies PasswordResetAnswer
    })

    return { request, confirm } as const
  })
}) {}
