/**
 * What a forwarded copy carries, and which received mail is forwarded (forwarding.ts; the copies are
 * queued in store.ts and delivered by outbound/forwards.ts). Pure.
 *
 * Every copy names the mailbox that forwarded it in a header of its own. A message that already names
 * the mailbox it arrives at came round a loop (A forwards to B, B to A: another provider keeps the
 * header) and is stored but not forwarded again; one that names MAX_FORWARD_HOPS mailboxes is not
 * forwarded whatever they are, which ends a loop through addresses renamed since. Received mail only,
 * never what is labelled spam or blocked, and only to addresses confirmed and not suspended.
 */
import { Schema } from "effect"
import { Address } from "../outbound/schemas.ts"
import { type Headers } from "./schemas.ts"

export const FORWARDED_BY_HEADER = "X-Mailroom-Forwarded-By"

/** The addresses one mailbox may forward to. */
export const MAX_FORWARDS = 5

/** Forwarded this many times, a message is forwarded no more. */
export const MAX_FORWARD_HOPS = 5

/** The mailboxes (lower-cased addresses) that forwarded this message before, as its headers name them. */
export const forwardedBy = (headers: Headers): ReadonlyArray<string> => {
  const value = headers[FORWARDED_BY_HEADER.toLowerCase()]
  const values = value === undefined ? [] : typeof value === "string" ? [value] : value
  return values.map((v) => v.trim().toLowerCase()).filter((v) => v.length > 0)
}

export const ForwardingInput = Schema.Struct({
  address: Address.annotations({ description: "Where to forward the mailbox's mail (any case; kept lower-cased)" })
}).annotations({ identifier: "ForwardingInput", parseOptions: { errors: "all", onExcessProperty: "error" } })

export const ForwardingStatus = Schema.Literal("pending", "active", "suspended").annotations({
  description: "`pending` until the address's owner confirmed with the link mailed to it; `active` forwards; " +
    "`suspended` after a copy was refused for good (see suspended_reason): nothing is forwarded until the address is added again"
})

export const ForwardingAddress = Schema.Struct({
  address: Schema.String,
  mailbox_id: Schema.String,
  status: ForwardingStatus,
  created_at: Schema.String,
  confirmed_at: Schema.NullOr(Schema.String),
  suspended_reason: Schema.NullOr(Schema.String).annotations({ description: "Why it is suspended: the receiving server's refusal" })
}).annotations({ identifier: "ForwardingAddress" })
export type ForwardingAddress = typeof ForwardingAddress.Type

export const RemovedForwarding = Schema.Struct({
  address: Schema.String,
  mailbox_id: Schema.String,
  deleted: Schema.Literal(true)
}).annotations({ identifier: "RemovedForwarding" })

