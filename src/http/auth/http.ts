import { HttpApiBuilder, HttpApp, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Duration, Effect, Layer, Option } from "effect"
import { Accounts } from "../../../services/accounts/accounts.ts"
import { AccountActivity } from "../../../services/accounts/activity.ts"
import { AccountClosure } from "../../../services/accounts/closure.ts"
import { EmailChange } from "../../../services/accounts/email-change.ts"
import { LoginNotices } from "../../../services/accounts/login-notices.ts"
import { PasswordReset } from "../../../services/accounts/password-reset.ts"
import { TwoFactor } from "../../../services/accounts/two-factor.ts"
import { CurrentPrincipal } from "../../../services/accounts/principal.ts"
import { Unauthorized } from "../../../services/errors.ts"
import { page } from "../../../services/listing.ts"
import { AppConfig } from "../../config.ts"
import { MailroomApi } from "../api.ts"
import { orUnavailable } from "../infra.ts"
import { fromRequest, originOf } from "../origin.ts"
import { SESSION_COOKIE } from "../security.ts"

export const AuthHandlers = HttpApiBuilder.group(MailroomApi, "auth", (handlers) =>
  Effect.gen(function*() {
    const accounts = yield* Accounts
    const closure = yield* AccountClosure
    const resets = yield* PasswordReset
    const emailChange = yield* EmailChange
    const twoFactor = yield* TwoFactor
    const notices = yield* LoginNotices
    const activity = yield* AccountActivity
    const { appUrl } = yield* AppConfig
    const cookieOptions = { httpOnly: true, sameSite: "lax", secure: appUrl.startsWith("https:"), path: "/" } as const

    const setCookie = (value: string, maxAge: Duration.DurationInput) =>
      HttpApp.appendPreResponseHandler((_request, response) =>
        Effect.succeed(HttpServerResponse.unsafeSetCookie(response, SESSION_COOKIE, value, { ...cookieOptions, maxAge }))
      )

    /**
     * What the caller's login session asks, answered in the envelope. SessionAuthentication admits
     * login sessions only, each with its id.
     */
    const forSession = <A, E, R>(ask: (userId: string, sessionId: string) => Effect.Effect<A, E, R>) =>
      Effect.gen(function*() {
        const principal = yield* CurrentPrincipal
        if (Option.isNone(principal.sessionId)) return yield* Unauthorized.of("Log in: this needs a login session")
        const data = yield* orUnavailable(fromRequest(ask(principal.userId, principal.sessionId.value)))
        return { success: true as const, data }
      })

    return handlers
      .handle("register", ({ payload }) =>
        accounts.register(payload).pipe(orUnavailable, Effect.map((data) => ({ success: true as const, data }))))
      .handle("login", ({ payload }) =>
        Effect.gen(function*() {
          const client = originOf(yield* HttpServerRequest.HttpServerRequest)
          const session = yield* orUnavailable(accounts.login(payload, client))
          yield* setCookie(session.cookieToken, Duration.seconds(session.cookieMaxAge))
          yield* notices.afterLogin(session, client)
          const { accessToken, expiresIn, refreshToken, user } = session
          return { success: true as const, data: { accessToken, refreshToken, expiresIn, user } }
        }))
      .handle("requestPasswordReset", ({ payload }) =>
        resets.request(payload.email, appUrl).pipe(
          orUnavailable,
          Effect.as({
            success: true as const,
            data: { message: "If an account uses this email, a link to choose a new password is on its way; it works for 60 minutes" }
          })
        ))
      .handle("resetPassword", ({ payload }) =>
        fromRequest(resets.confirm(payload)).pipe(orUnavailable, Effect.map((data) => ({ success: true as const, data }))))
      .handle("confirmEmail", ({ payload }) =>
        fromRequest(emailChange.confirm(payload.token)).pipe(orUnavailable, Effect.map((data) => ({ success: true as const, data }))))
      .handle("changeEmail", ({ payload }) => forSession((userId) => emailChange.request(userId, payload, appUrl)))
      .handle("refresh", ({ payload }) =>
        accounts.refresh(payload.refreshToken).pipe(orUnavailable, Effect.map((data) => ({ success: true as const, data }))))
      .handle("logout", () =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          if (Option.isSome(principal.sessionId)) yield* accounts.logout(principal.sessionId.value).pipe(orUnavailable)
          yield* setCookie("", Duration.zero)
          return { success: true as const, data: { message: "Logged out; this session's tokens no longer work" } }
        }))
      .handle("sessions", () => forSession((userId, sessionId) => accounts.sessions(userId, sessionId)))
      .handle("endSession", ({ path }) => forSession((userId) => accounts.endSession(userId, path.sessionId)))
      .handle("endOtherSessions", () => forSession((userId, sessionId) => accounts.endOtherSessions(userId, sessionId)))
      .handle("changePassword", ({ payload }) => forSession((userId, sessionId) => accounts.changePassword(userId, sessionId, payload)))
      .handle("activity", ({ urlParams }) =>
        Effect.map(forSession((userId) => activity.list(userId, page(urlParams))), ({ data }) => ({
          success: true as const,
          data: data.entries,
          meta: data.meta
        })))
      .handle("twoFactor", () => forSession((userId) => twoFactor.status(userId)))
      .handle("setUpTwoFactor", ({ payload }) => forSession((userId) => twoFactor.setup(userId, payload.password)))
      .handle("enableTwoFactor", ({ payload }) => forSession((userId) => twoFactor.enable(userId, payload.code)))
      .handle("newRecoveryCodes", ({ payload }) => forSession((userId) => twoFactor.regenerateRecoveryCodes(userId, payload.password)))
      .handle("disableTwoFactor", ({ payload }) => forSession((userId) => twoFactor.disable(userId, payload)))
      .handle("deleteAccount", ({ payload }) =>
        forSession((userId) =>
          Effect.zipRight(
            accounts.confirmPassword(userId, payload.password, "password"),
            // Gone meanwhile: deleted by another of its sessions.
            Effect.catchTag(closure.close(userId), "NotFound", () => Effect.fail(Unauthorized.of("The account no longer exists")))
          )
        ).pipe(Effect.tap(() => setCookie("", Duration.zero))))
  })).pipe(Layer.provide([Accounts.Default, AccountClosure.Default, PasswordReset.Default, EmailChange.Default, TwoFactor.Default, AccountActivity.Default, LoginNotices.Default]))
