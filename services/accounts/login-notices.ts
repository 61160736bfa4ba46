/**
 * What the account's email is told after a login, so that a sign-in its owner did not make does not go
 * unnoticed:
 *
 * - a sign-in from somewhere new: neither the client (User-Agent) nor the address of any sign-in of the
 *   last 90 days (activity.ts). Either one known is enough to stay quiet, so that a browser updated at
 *   home, or a laptop on another network, says nothing; the first sign-in of an account (at sign-up)
 *   has nothing to compare with and says nothing either;
 * - a recovery code used in place of the authenticator app, with how many are left.
 *
 * Best effort: the login stands whatever happens here.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Option } from "effect"
import { notice, SystemMail } from "../outbound/system-mail.ts"
import { ACTIVITY_RETENTION_DAYS } from "./activity.ts"
import type { LoginClient, NewSession } from "./accounts.ts"

export class LoginNotices extends Effect.Service<LoginNotices>()("mailroom/LoginNotices", {
  dependencies: [SystemMail.Default],
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const mail = yield* SystemMail

    /** Is this login's client or address one of the account's earlier sign-ins? None earlier: the first. */
    const familiar = (userId: string, client: LoginClient) =>
      Effect.map(
        sql<{ earlier: string; known: boolean }>`
          WITH earlier AS (
            SELECT user_agent, client_address FROM account_activity
            WHERE user_id = ${userId} AND kind = 'login' AND at > now() - ${`${ACTIVITY_RETENTION_DAYS} days`}::interval
            ORDER BY at DESC, id DESC OFFSET 1)
          SELECT count(*) AS earlier,
                 coalesce(bool_or(user_agent IS NOT DISTINCT FROM ${client.userAgent ?? null}
                                  OR client_address IS NOT DISTINCT FROM ${client.address ?? null}), false) AS known
          FROM earlier`,
        (rows) => Number(rows[0]!.earlier) === 0 || rows[0]!.known
      )

    /** After `session` was opened for `client` (and recorded in the account's activity). */
    const afterLogin = Effect.fn("LoginNotices.afterLogin")(function*(session: NewSession, client: LoginClient) {
      const { user } = session
      const when = new Date().toUTCString()
      const from = `${client.userAgent ?? "an unnamed client"}, from the address ${client.address ?? "unknown"}`
      const recoveryCode = Option.filter(session.secondFactor, (used) => used.method === "recovery_code")
      if (Option.isSome(recoveryCode)) {
        const left = recoveryCode.value.recoveryCodesLeft
        yield* mail.send(notice(user, "A recovery code signed in to your Mailroom account", [
          `A recovery code was used instead of the authenticator app to sign in to the Mailroom account ${user.email} (${when}, ${from}); it will not work again. ${left} ${left === 1 ? "is" : "are"} left.`,
          left <= 2 ? "Make new ones on the account page before they run out." : "New ones can be made on the account page at any time.",
          "If it was not you, change your password and make new recovery codes."
        ]))
      } else if (!(yield* familiar(user.userId, client))) {
        yield* mail.send(notice(user, "New sign-in to your Mailroom account", [
          `The Mailroom account ${user.email} was signed in to from somewhere it had not been in the last ${ACTIVITY_RETENTION_DAYS} days: ${from}, ${when}.`,
          "If it was you, there is nothing to do.",
          "If it was not, change your password now (it signs every other session out), and look at the account page's recent activity."
        ]))
      }
    }, (effect, _session, client) =>
      Effect.catchAll(effect, (error) =>
        Effect.logWarning(`Could not tell the account of a sign-in: ${String(error)}`).pipe(Effect.annotateLogs({ client_address: client.address ?? "" }))))

    return { afterLogin } as const
  })
}) {}
