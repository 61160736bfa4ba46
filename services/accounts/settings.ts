import { Context, type Redacted } from "effect"

/** What the accounts domain needs from the operator's configuration. */
export class AccountSettings extends Context.Tag("mailroom/AccountSettings")<AccountSettings, {
  /** Signs access tokens; the same on every node. */
  readonly jwtSecret: Redacted.Redacted
}>() {}
