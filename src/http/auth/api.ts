/** User authentication on `{app_url}` (register, login, refresh, logout): the contract. */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import {
  LoginInput,
  RefreshedCredentials,
  RefreshInput,
  RegisteredUser,
  RegisterInput,
  SessionCredentials
} from "../../../services/accounts/schemas.ts"
import { Message, Ok } from "../envelope.ts"
import { Conflict, RateLimited, Unauthorized } from "../../../services/errors.ts"
import { envelope } from "../errors.ts"
import { ClientRateLimit, SessionAuthentication } from "../security.ts"

export class AuthGroup extends HttpApiGroup.make("auth")
  .add(
    HttpApiEndpoint.post("register", "/register")
      .setPayload(RegisterInput)
      .addSuccess(Ok(RegisteredUser), { status: 201 })
      .addError(envelope(Conflict))
  )
  .add(
    HttpApiEndpoint.post("login", "/login")
      .setPayload(LoginInput)
      .addSuccess(Ok(SessionCredentials))
      .addError(envelope(Unauthorized))
      .addError(envelope(RateLimited))
  )
  .add(
    HttpApiEndpoint.post("refresh", "/refresh")
      .setPayload(RefreshInput)
      .addSuccess(Ok(RefreshedCredentials))
      .addError(envelope(Unauthorized))
  )
  .middleware(ClientRateLimit)
  .add(
    HttpApiEndpoint.post("logout", "/logout")
      .addSuccess(Ok(Message))
      .middleware(SessionAuthentication)
  )
  .prefix("/api/auth")
  .annotate(OpenApi.Title, "User authentication")
{}
