import { HttpApiBuilder, HttpApp, HttpServerRequest, HttpServerResponse } from "@effect/platform"
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

    /** The caller's login session: SessionAuthentication admits login sessions only, each with its id. */
    const session = Effect.flatMap(CurrentPrincipal, (principal) =>
      Option.match(principal.sessionId, {
        onNone: () => Unauthorized.of("Log in: this needs a login session"),
        onSome: (sessionId) => Effect.succeed({ userId: principal.userId, sessionId })
      }))

    return handlers
      .handle("register", ({ payload }) =>
        accounts.register(payload).pipe(orUnavailable, Effect.map((data) => ({ success: true as const, data }))))
      .handle("login", ({ payload }) =>
        Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
          accounts.login(payload, { userAgent: request.headers["user-agent"], address: Option.getOrUndefined(request.remoteAddress) })).pipe(
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
      .handle("sessions", () =>
        Effect.gen(function*() {
          const { userId, sessionId } = yield* session
          const data = yield* accounts.sessions(userId, sessionId).pipe(orUnavailable)
          return { success: true as const, data }
        }))
      .handle("endSession", ({ path }) =>
        Effect.gen(function*() {
          const { userId } = yield* session
          const data = yield* accounts.endSession(userId, path.sessionId).pipe(orUnavailable)
          return { success: true as const, data }
        }))
      .handle("endOtherSessions", () =>
        Effect.gen(function*() {
          const { userId, sessionId } = yield* session
          const data = yield* accounts.endOtherSessions(userId, sessionId).pipe(orUnavailable)
          return { success: true as const, data }
        }))
      .handle("changePassword", ({ payload }) =>
        Effect.gen(function*() {
          const { userId, sessionId } = yield* session
          const data = yield* accounts.changePassword(userId, sessionId, payload).pipe(orUnavailable)
          return { success: true as const, data }
        }))
  })).pipe(Layer.provide(Accounts.Default))
