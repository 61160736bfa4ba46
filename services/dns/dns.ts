/**
 * The Dns port: what Mailroom asks of the domain name system. Webhook targets are resolved through
 * it (and checked) before every delivery; custom-domain verification reads TXT and MX records
 * through it. The adapter (layers/dns.ts) uses the system resolver, or the servers in `DNS_SERVERS`.
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

export interface DnsShape {
  /** The IPv4 and IPv6 addresses of `host`, IPv4 first. Fails NotFound when it has none. */
  readonly addresses: (host: string) => Effect.Effect<ReadonlyArray<ResolvedAddress>, DnsError>
}

export class Dns extends Context.Tag("mailroom/Dns")<Dns, DnsShape>() {}
