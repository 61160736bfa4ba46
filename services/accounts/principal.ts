import { Context, type Option } from "effect"
import type { Plan } from "../plans/plans.ts"

/** Who is calling, as established by the authentication middleware. */
export interface Principal {
  readonly userId: string
  readonly plan: Plan
  readonly via: "apiKey" | "accessToken" | "cookie"
  readonly keyId: Option.Option<string>
  readonly sessionId: Option.Option<string>
}

export class CurrentPrincipal extends Context.Tag("mailroom/CurrentPrincipal")<CurrentPrincipal, Principal>() {}
