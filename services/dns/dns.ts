/**
 * The Dns port: what Mailroom asks of the domain name system. Webhook targets are resolved through
 * it (and checked) before every delivery; custom-domain verification reads TXT and MX records
 * through it; the SMTP node's SPF, DKIM, DMARC and ARC checks ask it every question they have. The adapter (layers/dns.ts) uses the system resolver, or the servers in `DNS_SERVERS`.
 */
import { Context, Data, type Effect } from "effect"

export interface ResolvedAddress {
  readonly address: string
  readonly family: 4 | 6
}

export class DnsError extends Data.TaggedError("DnsError")<{
  /** NotFound: the name has no such records (NXDOMAIN, NODATA). Unavailable: no answer could be had. */
  readonly reason: "NotFound" | "Unavailable"
  readonly message: string
  readonly cause?: unknown
}> {}

export interface MxRecord {
  readonly priority: number
  /** Lower-cased, without a trailing dot. */
  readonly exchange: string
}

export interface DnsShape {
  /** The IPv4 and IPv6 addresses of `host`, IPv4 first. Fails NotFound when it has none. */
  readonly addresses: (host: string) => Effect.Effect<ReadonlyArray<ResolvedAddress>, DnsError>
  /** The TXT records of `name`, each record's character-strings joined. Fails NotFound when it has none. */
  readonly txt: (name: string) => Effect.Effect<ReadonlyArray<string>, DnsError>
  /** The MX records of `name`. Fails NotFound when it has none. */
  readonly mx: (name: string) => Effect.Effect<ReadonlyArray<MxRecord>, DnsError>
  /**
   * The PTR records of `name` (an `in-addr.arpa` or `ip6.arpa` name), lower-cased, without a
   * trailing dot. Fails NotFound when it has none. SPF's `ptr` mechanism reads them.
   */
  readonly ptr: (name: string) => Effect.Effect<ReadonlyArray<string>, DnsError>
}

export class Dns extends Context.Tag("mailroom/Dns")<Dns, DnsShape>() {}
