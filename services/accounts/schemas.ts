/**
 * The shapes of the accounts domain, with the messages a user sees when input is refused
 * (they become `details.<field>` of a 400 VALIDATION_ERROR).
 */
import { Schema } from "effect"
import { maxCharacters, minCharacters, oneLine, trimmed } from "../characters.ts"
import { rule } from "../schema-rules.ts"

const EMAIL = /^[^\s@"(),:;<>[\\\]]+@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+$/

export const Email = trimmed({ minLength: 1, maxLength: 254 }).pipe(
  Schema.maxLength(254, { message: () => "must be at most 254 characters" }),
  Schema.pattern(EMAIL, { message: () => "must be a valid email address" })
)

export const Password = Schema.String.pipe(
  minCharacters(8, "must be at least 8 characters"),
  maxCharacters(1024, "must be at most 1024 characters"),
  // Spaces count as characters (a passphrase's are kept as typed), but eight of them alone are no password.
  rule((password) => /\S/.test(password), { message: () => "must not be only spaces" })
)

/** A person's name: one line of text (no line breaks or other control characters). */
export const PersonName = trimmed({ minLength: 1, maxLength: 200 }).pipe(
  minCharacters(1, "must not be empty"),
  maxCharacters(200, "must be at most 200 characters"),
  oneLine
)

const allErrors = { parseOptions: { errors: "all" as const } }

export const RegisterInput = Schema.Struct({
  email: Email,
  password: Password,
  name: PersonName
}).annotations({ identifier: "RegisterInput", ...allErrors })
export type RegisterInput = typeof RegisterInput.Type

export const LoginInput = Schema.Struct({
  email: trimmed({ minLength: 1 }).pipe(Schema.minLength(1, { message: () => "is required" })),
  password: Schema.String.pipe(Schema.minLength(1, { message: () => "is required" })),
  code: Schema.optional(Schema.String.pipe(Schema.maxLength(64)).annotations({
    description: "With two-factor sign-in on: the authenticator app's current 6-digit code, or one of the account's unused recovery codes"
  }))
}).annotations({ identifier: "LoginInput", ...allErrors })
export type LoginInput = typeof LoginInput.Type

export const ChangePasswordInput = Schema.Struct({
  currentPassword: Schema.String.pipe(Schema.minLength(1, { message: () => "is required" })),
  newPassword: Password
}).annotations({ identifier: "ChangePasswordInput", ...allErrors })
export type ChangePasswordInput = typeof ChangePasswordInput.Type

export const DeleteAccountInput = Schema.Struct({
  password: Schema.String.pipe(Schema.minLength(1, { message: () => "is required" })).annotations({
    description: "The account's password, asked again: deleting cannot be undone"
  })
}).annotations({ identifier: "DeleteAccountInput", ...allErrors })

export const AccountDeleted = Schema.Struct({
  deleted: Schema.Literal(true),
  email: Schema.String.annotations({ description: "The account's email, free to register again" }),
  mailboxes: Schema.Number.annotations({
    description: "Its mailboxes deleted; their addresses stay held from other accounts for 30 days"
  }),
  emails: Schema.Number.annotations({ description: "Its emails deleted, received and sent" })
}).annotations({ identifier: "AccountDeleted" })

export const PasswordChanged = Schema.Struct({
  message: Schema.String,
  otherSessionsEnded: Schema.Number.annotations({ description: "The account's other login sessions, signed out by the change" })
}).annotations({ identifier: "PasswordChanged" })
export type PasswordChanged = typeof PasswordChanged.Type

/** One of the account's login sessions, as the account page lists them. */
export const LoginSession = Schema.Struct({
  sessionId: Schema.String,
  current: Schema.Boolean.annotations({ description: "The session this request was made with" }),
  userAgent: Schema.NullOr(Schema.String).annotations({ description: "The client as it named itself when it logged in" }),
  clientAddress: Schema.NullOr(Schema.String).annotations({ description: "The address it logged in from" }),
  createdAt: Schema.String,
  lastActiveAt: Schema.String.annotations({ description: "Its last use: a request with its access token or cookie, a token refresh, or the log-in" }),
  expiresAt: Schema.String.annotations({ description: "When its refresh token expires, unless it is used before" })
}).annotations({ identifier: "LoginSession" })
export type LoginSession = typeof LoginSession.Type

export const SessionsEnded = Schema.Struct({
  ended: Schema.Number.annotations({ description: "The sessions signed out" })
}).annotations({ identifier: "SessionsEnded" })

export const RefreshInput = Schema.Struct({
  refreshToken: Schema.String.pipe(Schema.minLength(1, { message: () => "is required" }))
}).annotations({ identifier: "RefreshInput", ...allErrors })

export const User = Schema.Struct({
  userId: Schema.String,
  email: Schema.String,
  name: Schema.String
}).annotations({ identifier: "User" })
export type User = typeof User.Type

export const RegisteredUser = Schema.Struct({
  ...User.fields,
  createdAt: Schema.String
}).annotations({ identifier: "RegisteredUser" })
export type RegisteredUser = typeof RegisteredUser.Type

export const SessionCredentials = Schema.Struct({
  accessToken: Schema.String,
  refreshToken: Schema.String,
  expiresIn: Schema.Number.annotations({ description: "Seconds the access token is valid" }),
  user: User
}).annotations({ identifier: "SessionCredentials" })

export const RefreshedCredentials = Schema.Struct({
  accessToken: Schema.String,
  expiresIn: Schema.Number,
  refreshToken: Schema.String.annotations({ description: "The rotated refresh token; the one sent is no longer valid" })
}).annotations({ identifier: "RefreshedCredentials" })

export const PasswordResetInput = Schema.Struct({
  email: trimmed({
    minLength: 1,
    description: "The account's email: a link to choose a new password is mailed there, if an account uses it"
  }).pipe(Schema.minLength(1, { message: () => "is required" }))
}).annotations({ identifier: "PasswordResetInput", ...allErrors })

export const PasswordResetRequested = Schema.Struct({
  message: Schema.String
}).annotations({ identifier: "PasswordResetRequested" })

export const NewPasswordInput = Schema.Struct({
  token: Schema.String.pipe(Schema.minLength(1, { message: () => "is required" })).annotations({
    description: "The token of the link mailed by POST /api/auth/password-reset (what follows #/reset-password/)"
  }),
  password: Password
}).annotations({ identifier: "NewPasswordInput", ...allErrors })
export type NewPasswordInput = typeof NewPasswordInput.Type

export const PasswordReset = Schema.Struct({
  email: Schema.String.annotations({ description: "The account whose password was set: sign in with it" }),
  sessionsEnded: Schema.Number.annotations({ description: "The account's login sessions, every one signed out by the reset" }),
  message: Schema.String
}).annotations({ identifier: "PasswordReset" })
export type PasswordReset = typeof PasswordReset.Type

export const ChangeEmailInput = Schema.Struct({
  newEmail: Email,
  password: Schema.String.pipe(Schema.minLength(1, { message: () => "is required" })).annotations({
    description: "The account's password, asked again"
  })
}).annotations({ identifier: "ChangeEmailInput", ...allErrors })

export const EmailChangeRequested = Schema.Struct({
  newEmail: Schema.String.annotations({ description: "Where the link to confirm was mailed; the account's email stays until it is used" }),
  message: Schema.String
}).annotations({ identifier: "EmailChangeRequested" })

export const ConfirmEmailInput = Schema.Struct({
  token: Schema.String.pipe(Schema.minLength(1, { message: () => "is required" })).annotations({
    description: "The token of the link mailed by POST /api/auth/email (what follows #/confirm-email/)"
  })
}).annotations({ identifier: "ConfirmEmailInput", ...allErrors })

export const EmailChanged = Schema.Struct({
  email: Schema.String.annotations({ description: "The account's email now: sign in with it" }),
  previousEmail: Schema.String.annotations({ description: "The email it had, which was told of the change" })
}).annotations({ identifier: "EmailChanged" })

const PasswordAgain = Schema.String.pipe(Schema.minLength(1, { message: () => "is required" })).annotations({
  description: "The account's password, asked again"
})
const SecondFactorCode = Schema.String.pipe(
  Schema.minLength(1, { message: () => "is required" }),
  Schema.maxLength(64, { message: () => "must be at most 64 characters" })
)

export const TwoFactorStatus = Schema.Struct({
  enabled: Schema.Boolean.annotations({ description: "Whether a login asks for a code from an authenticator app after the password" }),
  enabledAt: Schema.NullOr(Schema.String),
  recoveryCodesLeft: Schema.Number.annotations({ description: "Unused recovery codes; 0 while it is off" })
}).annotations({ identifier: "TwoFactorStatus" })

export const TwoFactorSetupInput = Schema.Struct({ password: PasswordAgain }).annotations({ identifier: "TwoFactorSetupInput", ...allErrors })

export const TwoFactorSetup = Schema.Struct({
  secret: Schema.String.annotations({ description: "The authenticator app's secret, base32, for typing into the app" }),
  otpauthUri: Schema.String.annotations({ description: "The same as an otpauth://totp/ URI, what the app scans from a QR code" })
}).annotations({ identifier: "TwoFactorSetup" })

export const TwoFactorEnableInput = Schema.Struct({
  code: SecondFactorCode.annotations({ description: "The app's current 6-digit code for the secret setup answered" })
}).annotations({ identifier: "TwoFactorEnableInput", ...allErrors })

export const TwoFactorEnabled = Schema.Struct({
  enabledAt: Schema.String,
  recoveryCodes: Schema.Array(Schema.String).annotations({
    description: "10 codes, each signing in once in place of the app's: shown this once, keep them somewhere safe"
  })
}).annotations({ identifier: "TwoFactorEnabled" })

export const TwoFactorDisableInput = Schema.Struct({
  password: PasswordAgain,
  code: SecondFactorCode.annotations({ description: "The app's current code, or an unused recovery code" })
}).annotations({ identifier: "TwoFactorDisableInput", ...allErrors })

export const RecoveryCodesInput = Schema.Struct({ password: PasswordAgain }).annotations({ identifier: "RecoveryCodesInput", ...allErrors })

export const RecoveryCodes = Schema.Struct({
  recoveryCodes: Schema.Array(Schema.String).annotations({ description: "10 new codes, shown this once; the earlier ones no longer work" })
}).annotations({ identifier: "RecoveryCodes" })

/** What the account's activity records (activity.ts). */
export const ActivityKind = Schema.Literal(
  "login",
  "login_failed",
  "password_changed",
  "password_reset",
  "password_set",
  "email_changed",
  "two_factor_enabled",
  "two_factor_disabled",
  "recovery_codes_regenerated",
  "sessions_signed_out",
  "api_key_created",
  "api_key_revoked"
).annotations({
  description: "login (detail.secondFactor: app or recovery_code, for an account with two-factor sign-in); login_failed " +
    "(detail.reason: password or code; a wrong password of an unknown email is nobody's); password_changed (from a " +
    "session); password_reset (from a mailed link); password_set (by an operator); email_changed (detail.previousEmail, " +
    "email); two_factor_enabled; two_factor_disabled (detail.by: operator when it was); recovery_codes_regenerated; " +
    "sessions_signed_out (detail.ended); api_key_created (detail.keyId, name, permission) and api_key_revoked (detail.keyId, name)"
})
export type ActivityKind = typeof ActivityKind.Type

export const ActivityEntry = Schema.Struct({
  activityId: Schema.String,
  kind: ActivityKind,
  at: Schema.String,
  clientAddress: Schema.NullOr(Schema.String).annotations({ description: "The address the request came from; null for an operator's command" }),
  userAgent: Schema.NullOr(Schema.String).annotations({ description: "The client, as it named itself" }),
  detail: Schema.Record({ key: Schema.String, value: Schema.Union(Schema.String, Schema.Number, Schema.Boolean) })
}).annotations({ identifier: "ActivityEntry" })
export type ActivityEntry = typeof ActivityEntry.Type
