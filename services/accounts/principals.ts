/**
 * Who a credential acts for, cached in each process, so that a request does not ask the database
 * again (issue 19). The cache and what it may believe are bus/told-cache.ts's: a change that affects
 * what a credential may do (a key revoked, a session ended, a plan changed) goes through
 * `changed(userId)`, which applies here before the caller answers and on every other node within a
 * second; a credential that expires by itself is never trusted past it.
 */
import { Effect, Option } from "effect"
import { makeToldCache } from "../bus/told-cache.ts"
import type { Plan } from "../plans/plans.ts"

/** A credential's owner as looked up, with what bounds how long it holds. */
export interface PrincipalRecord {
  readonly userId: string
  readonly plan: Plan
  readonly keyId: Option.Option<string>
  readonly sessionId: Option.Option<string>
  readonly mailboxes: Option.Option<ReadonlyArray<string>>
  readonly readOnly: boolean
  /** When the credential stops working by itself (ms since the epoch); none for a key without expiry. */
  readonly validUntil: Option.Option<number>
}

export class Principals extends Effect.Service<Principals>()("mailroom/Principals", {
  scoped: makeToldCache<PrincipalRecord>({
    name: "principals",
    ownerOf: (record) => record.userId,
    validUntil: (record) => Option.getOrUndefined(record.validUntil)
  })
}) {}
