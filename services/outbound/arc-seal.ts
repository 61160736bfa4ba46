/**
 * ARC (RFC 8617) for mail Mailroom passes on (forwarded copies, forwards.ts): the port that seals a
 * message with an ARC set (ARC-Authentication-Results with Mailroom's verdicts as it received the
 * message, ARC-Message-Signature, ARC-Seal), signed with the mailbox domain's DKIM key. A receiver
 * that trusts Mailroom's seal can then judge the message by the sender's SPF and DKIM as they were
 * here, which SPF at the forwarded address cannot (the copy comes from Mailroom's address).
 *
 * The adapter is layers/arc-seal.ts (mailauth's sealer).
 */
import { Context, type Effect } from "effect"
import type { DkimKey } from "./dkim-signature.ts"

export interface Sealing {
  /** The key, its domain and selector (the mailbox domain's DKIM key). */
  readonly key: DkimKey
  /** What Mailroom found when it received the message: an RFC 8601 result, `authserv-id; spf=…; dkim=…; dmarc=…`. */
  readonly results: string
  /** The message's ARC chain as it arrived: none, or one that validated (a failed chain is not sealed). */
  readonly chain: "none" | "pass"
}

export class ArcSeal extends Context.Tag("mailroom/ArcSeal")<ArcSeal, {
  /** The ARC set's fields to put in front of `raw` (CRLF-ended). */
  readonly seal: (raw: Uint8Array, sealing: Sealing) => Effect.Effect<Uint8Array, Error>
}>() {}
