/** User authentication on `{app_url}` (register, login, refresh, logout): the contract. */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import {
  AccountDeleted,
  ActivityEntry,
  ChangeEmailInput,
  ChangePasswordInput,
  ConfirmEmailInput,
  DeleteAccountInput,
  EmailChanged,
  EmailChangeRequested,
  LoginInput,
  LoginSession,
  NewPasswordInput,
  PasswordChanged,
  PasswordReset,
  PasswordResetInput,
  PasswordResetRequested,
  SessionsEnded,
  RefreshedCredentials,
  RefreshInput,
  RegisteredUser,
  RegisterInput,
  RecoveryCodes,
  RecoveryCodesInput,
  SessionCredentials,
  TwoFactorDisableInput,
  TwoFactorEnabled,
  TwoFactorEnableInput,
  TwoFactorSetup,
  TwoFactorSetupInput,
  TwoFactorStatus
} from "../../../services/accounts/schemas.ts"
import { Limit, ListMeta, Offset } from "../../../services/listing.ts"
import { Message, Ok, OkWithMeta } from "../envelope.ts"
import { Conflict, NotFound, RateLimited, Unauthorized, ValidationError } from "../../../services/errors.ts"
import { envelope } from "../errors.ts"
import { ClientRateLimit, SessionAuthentication } from "../security.ts"

export class AuthGroup extends HttpApiGroup.make("auth")
  .add(
    HttpApiEndpoint.post("register", "/register")
      .setPayload(RegisterInput)
      .addSuccess(Ok(RegisteredUser), { status: 201 })
      .addError(envelope(Conflict))
      .annotateContext(OpenApi.annotations({
        summary: "Register a user",
        description: "Creates the account on the free plan. An email already registered is 409 CONFLICT; an invalid email or a password under 8 characters (or of spaces alone) 400 VALIDATION_ERROR"
      }))
  )
  .add(
    HttpApiEndpoint.post("login", "/login")
      .setPayload(LoginInput)
      .addSuccess(Ok(SessionCredentials))
      .addError(envelope(Unauthorized))
      .addError(envelope(RateLimited))
      .annotateContext(OpenApi.annotations({
        summary: "Log in",
        description: "Answers an access token (900 s) and a refresh token (30 days), and sets the dashboard session cookie. Wrong credentials are 401; 10 failed logins per account in 15 minutes are 429. " +
          "An account with two-factor sign-in on needs code too: without it 401 with details.code \"is required\" (ask for it and send all three again); a wrong or used code is 401 on details.code and counts as a failed login"
      }))
  )
  .add(
    HttpApiEndpoint.post("refresh", "/refresh")
      .setPayload(RefreshInput)
      .addSuccess(Ok(RefreshedCredentials))
      .addError(envelope(Unauthorized))
      .annotateContext(OpenApi.annotations({
        summary: "Refresh an access token",
        description: "Exchanges a refresh token for a new access token and a new refresh token; the old refresh token stops working. " +
          "Presenting a refresh token that was already exchanged is taken as a leaked token: 401, and the session it belonged to ends " +
          "(its newest access and refresh tokens stop working too; log in again). A client that may retry a refresh it lost the answer of " +
          "must not retry with the same token"
      }))
  )
  .add(
    HttpApiEndpoint.post("requestPasswordReset", "/password-reset")
      .setPayload(PasswordResetInput)
      .addSuccess(Ok(PasswordResetRequested), { status: 202 })
      .annotateContext(OpenApi.annotations({
        summary: "Ask for a link to choose a new password",
        description: "Mails a link to the account's email (the dashboard's page #/reset-password/<token>), which works once " +
          "for 60 minutes. The answer is the same whether or not an account uses the email; at most 5 links an hour " +
          "are mailed per account, and further asks are answered alike without mailing one"
      }))
  )
  .add(
    HttpApiEndpoint.post("resetPassword", "/password-reset/confirm")
      .setPayload(NewPasswordInput)
      .addSuccess(Ok(PasswordReset))
      .addError(envelope(ValidationError))
      .annotateContext(OpenApi.annotations({
        summary: "Choose a new password with a mailed link",
        description: "The token is the link's (what follows #/reset-password/). Sets the password, ends every link of the " +
          "account, signs out every session (API keys keep working) and forgets the account's failed logins. A token " +
          "not valid, used or expired is 400 VALIDATION_ERROR on details.token; a password under 8 characters on details.password"
      }))
  )
  .add(
    HttpApiEndpoint.post("confirmEmail", "/email/confirm")
      .setPayload(ConfirmEmailInput)
      .addSuccess(Ok(EmailChanged))
      .addError(envelope(ValidationError))
      .addError(envelope(Conflict))
      .annotateContext(OpenApi.annotations({
        summary: "Confirm a new email with a mailed link",
        description: "The token is the link's (what follows #/confirm-email/); no session is needed. The account signs in with " +
          "the new email from now on, its other links end, and the old address is told. A token not valid, used or expired " +
          "is 400 VALIDATION_ERROR on details.token; 409 CONFLICT if another account registered the address meanwhile"
      }))
  )
  .middleware(ClientRateLimit)
  .add(
    HttpApiEndpoint.post("logout", "/logout")
      .addSuccess(Ok(Message))
      .middleware(SessionAuthentication)
      .annotateContext(OpenApi.annotations({
        summary: "Log out",
        description: "Ends this login's session: its access token, refresh token and cookie stop working; other sessions keep working"
      }))
  )
  .add(
    HttpApiEndpoint.post("changePassword", "/password")
      .setPayload(ChangePasswordInput)
      .addSuccess(Ok(PasswordChanged))
      .addError(envelope(ValidationError))
      .addError(envelope(RateLimited))
      .addError(envelope(Conflict))
      .middleware(SessionAuthentication)
      .annotateContext(OpenApi.annotations({
        summary: "Change the password",
        description: "From a login session (access token or the dashboard's cookie), with the current password: a wrong one is 400 " +
          "VALIDATION_ERROR on details.currentPassword and counts as a failed login (10 in 15 minutes, then 429). Every other " +
          "session of the account is signed out; this one goes on, and API keys keep working."
      }))
  )
  .add(
    HttpApiEndpoint.post("changeEmail", "/email")
      .setPayload(ChangeEmailInput)
      .addSuccess(Ok(EmailChangeRequested), { status: 202 })
      .addError(envelope(ValidationError))
      .addError(envelope(Conflict))
      .addError(envelope(RateLimited))
      .middleware(SessionAuthentication)
      .annotateContext(OpenApi.annotations({
        summary: "Change the account's email",
        description: "From a login session, with the password (a wrong one is 400 VALIDATION_ERROR on details.password and " +
          "counts as a failed login). Mails a link to the new address, which works once for 24 hours " +
          "(POST /api/auth/email/confirm); the email changes only then. An address another account uses is 409 CONFLICT " +
          "on details.newEmail; the account's own is 400; more than 5 links an hour is 429"
      }))
  )
  .add(
    HttpApiEndpoint.get("sessions", "/sessions")
      .addSuccess(Ok(Schema.Array(LoginSession)))
      .middleware(SessionAuthentication)
      .annotateContext(OpenApi.annotations({
        summary: "List login sessions",
        description: "The account's sessions still signed in, the most recently active first: where each logged in from " +
          "(User-Agent, address), when, and which one is this request's (current)"
      }))
  )
  .add(
    HttpApiEndpoint.del("endSession", "/sessions/:sessionId")
      .setPath(Schema.Struct({ sessionId: Schema.String }))
      .addSuccess(Ok(SessionsEnded))
      .addError(envelope(NotFound))
      .middleware(SessionAuthentication)
      .annotateContext(OpenApi.annotations({
        summary: "Sign a session out",
        description: "Its access token, refresh token and cookie stop working on every node at once. A session that is not " +
          "the account's, or no longer signed in, is 404 NOT_FOUND"
      }))
  )
  .add(
    HttpApiEndpoint.post("endOtherSessions", "/sessions/end-others")
      .addSuccess(Ok(SessionsEnded))
      .middleware(SessionAuthentication)
      .annotateContext(OpenApi.annotations({
        summary: "Sign out everywhere else",
        description: "Every session of the account but this request's is signed out; API keys keep working"
      }))
  )
  .add(
    HttpApiEndpoint.del("deleteAccount", "/account")
      .setPayload(DeleteAccountInput)
      .addSuccess(Ok(AccountDeleted))
      .addError(envelope(ValidationError))
      .addError(envelope(RateLimited))
      .middleware(SessionAuthentication)
      .annotateContext(OpenApi.annotations({
        summary: "Delete the account",
        description: "From a login session (access token or the dashboard's cookie), with the password: a wrong one is 400 " +
          "VALIDATION_ERROR on details.password and counts as a failed login (10 in 15 minutes, then 429). Everything the " +
          "account holds is deleted for good, at once: mailboxes, mail, drafts, search data, keys, sessions, domains, " +
          "webhooks and lists; a paid subscription ends now (not refunded) and the payment provider forgets the card. " +
          "Its mailboxes' addresses are held from other accounts for 30 days; its email may be registered again at once. " +
          "503 SERVICE_UNAVAILABLE while the payment provider or the search index cannot be reached: the account stays; retry."
      }))
  )
  .add(
    HttpApiEndpoint.get("activity", "/activity")
      .setUrlParams(Schema.Struct({ limit: Schema.optional(Limit), offset: Schema.optional(Offset) }).annotations({ parseOptions: { errors: "all" } }))
      .addSuccess(OkWithMeta(Schema.Array(ActivityEntry), ListMeta))
      .middleware(SessionAuthentication)
      .annotateContext(OpenApi.annotations({
        summary: "The account's security activity",
        description: "Newest first, the last 90 days: sign-ins and refused ones, changes of password, email and two-factor " +
          "sign-in, sessions signed out, API keys made and revoked; each with when, and the address and client of the " +
          "request that caused it (null for an operator's command). limit 1-100 (20), offset"
      }))
  )
  .add(
    HttpApiEndpoint.get("twoFactor", "/two-factor")
      .addSuccess(Ok(TwoFactorStatus))
      .middleware(SessionAuthentication)
      .annotateContext(OpenApi.annotations({
        summary: "Two-factor sign-in: on or off",
        description: "Whether a login asks for an authenticator app's code after the password, since when, and how many recovery codes are left"
      }))
  )
  .add(
    HttpApiEndpoint.post("setUpTwoFactor", "/two-factor/setup")
      .setPayload(TwoFactorSetupInput)
      .addSuccess(Ok(TwoFactorSetup))
      .addError(envelope(ValidationError))
      .addError(envelope(Conflict))
      .addError(envelope(RateLimited))
      .middleware(SessionAuthentication)
      .annotateContext(OpenApi.annotations({
        summary: "Set up an authenticator app",
        description: "From a login session, with the password (a wrong one is 400 on details.password and counts as a failed login). " +
          "Answers a new TOTP secret (SHA-1, 6 digits, 30 s) as text and as an otpauth:// URI for a QR code; nothing changes at " +
          "sign-in until POST /api/auth/two-factor/enable confirms a code of it. Setting up again replaces a secret not yet turned on; " +
          "409 CONFLICT while two-factor sign-in is on"
      }))
  )
  .add(
    HttpApiEndpoint.post("enableTwoFactor", "/two-factor/enable")
      .setPayload(TwoFactorEnableInput)
      .addSuccess(Ok(TwoFactorEnabled))
      .addError(envelope(ValidationError))
      .addError(envelope(Conflict))
      .middleware(SessionAuthentication)
      .annotateContext(OpenApi.annotations({
        summary: "Turn two-factor sign-in on",
        description: "With the app's current code for the secret setup answered (else 400 on details.code). Answers 10 recovery codes, " +
          "shown this once. From now on a login needs code as well; the account's email is told. 409 CONFLICT when nothing " +
          "is set up, or when it is on already"
      }))
  )
  .add(
    HttpApiEndpoint.post("newRecoveryCodes", "/two-factor/recovery-codes")
      .setPayload(RecoveryCodesInput)
      .addSuccess(Ok(RecoveryCodes))
      .addError(envelope(ValidationError))
      .addError(envelope(Conflict))
      .addError(envelope(RateLimited))
      .middleware(SessionAuthentication)
      .annotateContext(OpenApi.annotations({
        summary: "Make new recovery codes",
        description: "With the password (400 on details.password otherwise): 10 new codes, shown this once; the earlier ones stop " +
          "working. 409 CONFLICT while two-factor sign-in is off"
      }))
  )
  .add(
    HttpApiEndpoint.del("disableTwoFactor", "/two-factor")
      .setPayload(TwoFactorDisableInput)
      .addSuccess(Ok(TwoFactorStatus))
      .addError(envelope(ValidationError))
      .addError(envelope(Conflict))
      .addError(envelope(RateLimited))
      .middleware(SessionAuthentication)
      .annotateContext(OpenApi.annotations({
        summary: "Turn two-factor sign-in off",
        description: "With the password and a code (the app's, or an unused recovery code): a wrong one is 400 on its field and counts " +
          "as a failed login. The account's email is told. 409 CONFLICT while it is off"
      }))
  )
  .prefix("/api/auth")
  .annotate(OpenApi.Title, "User authentication")
  .annotate(
    OpenApi.Description,
    "Register, log in, refresh and log out; choose a new password, or confirm a new email, from a mailed link (on {app_url}); open routes are limited per client address"
  )
{}
