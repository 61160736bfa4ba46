import { Context, type Option } from "effect"
import type { Plan } from "../plans/plans.ts"

/** Who is calling, as established by the authentication middleware. */
export interface Principal {
  readonly userId: string
  readonly plan: Plan
  readonly via: "apiKey" | "accessToken" | "cookie"
  readonly keyId: Option.Option<string>
  readonly sessionId: Option.Option<string>
  /**
   * The mailboxes an API key is limited to (`mailboxIds` on create): it sees the account as holding
   * those only. None: the whole account (every session and access token, and keys made without a limit).
   */
  readonly mailboxes: Option.Option<ReadonlyArray<string>>
  /** A read-only API key (`permission: read_only`): it reads and searches, and changes nothing. */
  readonly readOnly: boolean
}

export class CurrentPrincipal extends Context.Tag("mailroom/CurrentPrincipal")<CurrentPrincipal, Principal>() {}
