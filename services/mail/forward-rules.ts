/**
 * What a forwarded copy carries, and which received mail is forwarded (forwarding.ts; the copies are
 * queued in store.ts and delivered by outbound/forwards.ts). Pure.
 *
 * Every copy names the mailbox that forwarded it in a header of its own. A message that already names
 * the mailbox it arrives at came round a loop (A forwards to B, B to A: another provider keeps the
 * header) and is stored but not forwarded again; one that names MAX_FORWARD_HOPS mailboxes is not
 * forwarded whatever they are, which ends a loop through addresses renamed since. Received mail only,
 * never what is labelled spam or blocked, and only to addresses confirmed and not suspended.
 *
 * Anyone can write the header, and a stranger who names the mailbox (or five others) would switch its
 * forwarding off for that message: so a field counts only when Mailroom wrote it. Each carries a MAC
 * of the mailbox and the message's Message-ID under `ForwardingKey` (derived from JWT_SECRET, which
 * every node shares), `X-Mailroom-Forwarded-By: <mailbox>; mac=<hex>`; a field without a valid one is
 * left in the message, and ignored. The Message-ID binds it to its message (another provider on the
 * way keeps the fields, and rarely that one), so a field copied from a copy stops only copies of that
 * message, which are the same message anyway.
 */
import { Context, Schema } from "effect"
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto"
import { Address } from "../outbound/schemas.ts"
import { firstHeader, type Headers } from "./schemas.ts"

export const FORWARDED_BY_HEADER = "X-Mailroom-Forwarded-By"

/** The addresses one mailbox may forward to. */
export const MAX_FORWARDS = 5

/** Forwarded this many times, a message is forwarded no more. */
export const MAX_FORWARD_HOPS = 5

/**
 * The key of the forwarded-by fields' MACs: the same on every node (the app derives it from JWT_SECRET,
 * `forwardingKeyOf`). A process given none (a test, a tool) has a random one of its own, which still
 * ends loops that come back to it.
 */
export class ForwardingKey extends Context.Reference<ForwardingKey>()("mailroom/ForwardingKey", {
  defaultValue: (): { readonly key: Buffer } => ({ key: randomBytes(32) })
}) {}

/** The forwarding key derived from the server's secret (a key of its own: a MAC here is no access token). */
export const forwardingKeyOf = (secret: string): { readonly key: Buffer } => ({
  key: createHmac("sha256", secret).update("mailroom/forwarded-by/v1").digest()
})

/** Hex characters of a field's MAC (128 bits). */
const MAC_LENGTH = 32

/** What binds a field to its message: its Message-ID as written, without folding white space; empty when it has none. */
const messageBinding = (headers: Headers): string => (firstHeader(headers, "message-id") ?? "").replace(/\s+/g, "")

const macOf = (key: Buffer, mailbox: string, headers: Headers) =>
  createHmac("sha256", key).update(`${mailbox.toLowerCase()}\n${messageBinding(headers)}`).digest("hex").slice(0, MAC_LENGTH)

/** The value of the field a copy of the message with `headers` forwarded by `mailbox` carries. */
export const forwardedByValue = (key: Buffer, mailbox: string, headers: Headers): string =>
  `${mailbox.toLowerCase()}; mac=${macOf(key, mailbox, headers)}`

const FIELD = /^\s*([^\s;]+)\s*;\s*mac=([0-9a-f]+)\s*$/i

/**
 * The mailboxes (lower-cased addresses) that forwarded this message before, as the fields Mailroom
 * wrote name them: one without a valid MAC under `key` is not counted.
 */
export const forwardedBy = (key: Buffer, headers: Headers): ReadonlyArray<string> => {
  const value = headers[FORWARDED_BY_HEADER.toLowerCase()]
  const values = value === undefined ? [] : typeof value === "string" ? [value] : value
  return values.flatMap((v) => {
    const field = FIELD.exec(v)
    if (field === null || field[2]!.length !== MAC_LENGTH) return []
    const mailbox = field[1]!.toLowerCase()
    const valid = timingSafeEqual(Buffer.from(field[2]!.toLowerCase(), "latin1"), Buffer.from(macOf(key, mailbox, headers), "latin1"))
    return valid ? [mailbox] : []
  })
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

