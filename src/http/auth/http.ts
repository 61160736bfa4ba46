import { HttpApiBuilder, HttpApp, HttpServerResponse } from "@effect/platform"
import { Duration, Effect, Layer, Option } from "effect"
import { Accounts } from "../../../services/accounts/accounts.ts"
import { CurrentPrincipal } from "../../../services/accounts/principal.ts"
import { Unauthorized } from "../../../services/errors.ts"
import { AppConfig } from "../../config.ts"
import { MailroomApi } from "../api.ts"
import { orUnavailable } from "../infra.ts"
import { SESSION_COOKIE } from "../security.ts"

export const AuthHandlers = HttpApiBuilder.group(MailroomApi, "auth", (handlers) =>
  Effect.gen(function*() {
    const accounts = yield* Accounts
    const { appUrl } = yield* AppConfig
    const cookieOptions = { httpOnly: true, sameSite: "lax", secure: appUrl.startsWith("https:"), path: "/" } as const

    const setCookie = (value: string, maxAge: Duration.DurationInput) =>
      HttpApp.appendPreResponseHandler((_request, response) =>
        Effect.succeed(HttpServerResponse.unsafeSetCookie(response, SESSION_COOKIE, value, { ...cookieOptions, maxAge }))
      )

    return handlers
      .handle("register", ({ payload }) =>
        accounts.register(payload).pipe(orUnavailable, Effect.map((data) => ({ success: true as const, data }))))
      .handle("login", ({ payload }) =>
        accounts.login(payload).pipe(
          orUnavailable,
          Effect.tap((session) => setCookie(session.cookieToken, Duration.seconds(session.cookieMaxAge))),
          Effect.map(({ accessToken, expiresIn, refreshToken, user }) => ({
            success: true as const,
            data: { accessToken, refreshToken, expiresIn, user }
          }))
        ))
      .handle("refresh", ({ payload }) =>
        accounts.refresh(payload.refreshToken).pipe(orUnavailable, Effect.map((data) => ({ success: true as const, data }))))
      .handle("logout", () =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          if (Option.isSome(principal.sessionId)) yield* accounts.logout(principal.sessionId.value).pipe(orUnavailable)
          yield* setCookie("", Duration.zero)
          return { success: true as const, data: { message: "Logged out; this session's tokens no longer work" } }
        }))
      .handle("changePassword", ({ payload }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          // SessionAuthentication admits login sessions only, each with its id.
          if (Option.isNone(principal.sessionId)) return yield* Unauthorized.of("Sign in to change the password")
          const data = yield* accounts.changePassword(principal.userId, principal.sessionId.value, payload).pipe(orUnavailable)
          return { success: true as const, data }
        }))
  })).pipe(Layer.provide(Accounts.Default))
