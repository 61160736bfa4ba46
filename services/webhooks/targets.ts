/**
 * Where a webhook may point (SPEC: "HTTPS URL receiving payloads").
 *
 * A webhook makes our servers send requests to an address a customer chose, so an address inside our
 * own network (loopback, private ranges, link-local such as a cloud metadata service, unique-local,
 * and every other range that is not reachable on the public internet) is refused. The check runs when
 * the URL is saved and again, against a fresh resolution, before every attempt: a hostname can be made
 * to resolve elsewhere after it was saved (DNS rebinding). `WEBHOOK_ALLOW_PRIVATE` lifts the check,
 * and allows plain http, for local development and tests.
 */
import { Context, Data, Effect } from "effect"
import { Dns, type ResolvedAddress } from "../dns/dns.ts"

/** Why an address is not public, in words for an error message. */
export type AddressKind =
  | "loopback"
  | "private"
  | "link-local"
  | "unique-local"
  | "shared (carrier-grade NAT)"
  | "multicast"
  | "unspecified"
  | "reserved"

export const MAX_URL_LENGTH = 2048

const parseIPv4 = (text: string): number | undefined => {
  const parts = text.split(".")
  if (parts.length !== 4) return undefined
  let value = 0
  for (const part of parts) {
    if (!/^\d{1,3}$/.test(part)) return undefined
    const octet = Number(part)
    if (octet > 255) return undefined
    value = value * 256 + octet
  }
  return value
}

/** The eight 16-bit groups of an IPv6 address, or undefined when `text` is not one. */
const parseIPv6 = (text: string): ReadonlyArray<number> | undefined => {
  const address = text.replace(/%.*$/, "") // a zone id (fe80::1%eth0) does not change the range
  if (!/^[0-9a-fA-F:.]+$/.test(address)) return undefined
  const halves = address.split("::")
  if (halves.length > 2) return undefined
  const groups = (half: string): Array<number> | undefined => {
    if (half === "") return []
    const out: Array<number> = []
    const items = half.split(":")
    for (let i = 0; i < items.length; i++) {
      const item = items[i]!
      if (i === items.length - 1 && item.includes(".")) {
        const v4 = parseIPv4(item)
        if (v4 === undefined) return undefined
        out.push(Math.floor(v4 / 65536), v4 % 65536)
      } else if (/^[0-9a-fA-F]{1,4}$/.test(item)) {
        out.push(parseInt(item, 16))
      } else {
        return undefined
      }
    }
    return out
  }
  const head = groups(halves[0]!)
  const tail = halves.length === 2 ? groups(halves[1]!) : []
  if (head === undefined || tail === undefined) return undefined
  if (halves.length === 1) return head.length === 8 ? head : undefined
  const missing = 8 - head.length - tail.length
  if (missing < 1) return undefined
  return [...head, ...Array<number>(missing).fill(0), ...tail]
}

const inV4 = (value: number, base: string, bits: number) => {
  const size = 2 ** (32 - bits)
  return Math.floor(value / size) === Math.floor(parseIPv4(base)! / size)
}

const classifyIPv4 = (value: number): AddressKind | undefined => {
  if (inV4(value, "0.0.0.0", 8)) return "unspecified"
  if (inV4(value, "127.0.0.0", 8)) return "loopback"
  if (inV4(value, "10.0.0.0", 8) || inV4(value, "172.16.0.0", 12) || inV4(value, "192.168.0.0", 16)) return "private"
  if (inV4(value, "169.254.0.0", 16)) return "link-local"
  if (inV4(value, "100.64.0.0", 10)) return "shared (carrier-grade NAT)"
  if (inV4(value, "224.0.0.0", 4)) return "multicast"
  // IETF protocol assignments, documentation (TEST-NET-1/2/3), benchmarking, 6to4 relay, reserved, broadcast.
  if (
    inV4(value, "192.0.0.0", 24) || inV4(value, "192.0.2.0", 24) || inV4(value, "198.51.100.0", 24) ||
    inV4(value, "203.0.113.0", 24) || inV4(value, "198.18.0.0", 15) || inV4(value, "192.88.99.0", 24) ||
    inV4(value, "240.0.0.0", 4)
  ) return "reserved"
  return undefined
}

const classifyIPv6 = (g: ReadonlyArray<number>): AddressKind | undefined => {
  const zeroUpTo = (n: number) => g.slice(0, n).every((x) => x === 0)
  const embeddedV4 = g[6]! * 65536 + g[7]!
  if (zeroUpTo(8)) return "unspecified"
  if (zeroUpTo(7) && g[7] === 1) return "loopback"
  // IPv4-mapped (::ffff:a.b.c.d) and NAT64 (64:ff9b::a.b.c.d) reach the IPv4 address inside.
  if (zeroUpTo(5) && g[5] === 0xffff) return classifyIPv4(embeddedV4)
  if (g[0] === 0x64 && g[1] === 0xff9b && g.slice(2, 6).every((x) => x === 0)) return classifyIPv4(embeddedV4)
  // IPv4-compatible (::a.b.c.d, deprecated) and anything else in ::/8.
  if (g[0]! < 0x100) return "reserved"
  if ((g[0]! & 0xfe00) === 0xfc00) return "unique-local"
  if ((g[0]! & 0xffc0) === 0xfe80) return "link-local"
  if ((g[0]! & 0xffc0) === 0xfec0) return "private" // site-local, deprecated but still routed inside sites
  if ((g[0]! & 0xff00) === 0xff00) return "multicast"
  if (g[0] === 0x2001 && g[1] === 0x0db8) return "reserved" // documentation
  if (g[0] === 0x0100 && g.slice(1, 4).every((x) => x === 0)) return "reserved" // discard prefix
  // 6to4 carries an IPv4 address in its second and third groups.
  if (g[0] === 0x2002) return classifyIPv4(g[1]! * 65536 + g[2]!)
  return undefined
}

/** Is `text` an IP address (either family, IPv6 without brackets)? */
export const isIpAddress = (text: string): boolean => parseIPv4(text) !== undefined || parseIPv6(text) !== undefined

/**
 * Why `address` (an IPv4 or IPv6 literal) is not a public internet address, or undefined when it is.
 * Something that is not an address at all is "reserved": never a place to connect to.
 */
export const nonPublicKind = (address: string): AddressKind | undefined => {
  const v4 = parseIPv4(address)
  if (v4 !== undefined) return classifyIPv4(v4)
  const v6 = parseIPv6(address)
  if (v6 !== undefined) return classifyIPv6(v6)
  return "reserved"
}

export interface TargetUrl {
  readonly url: URL
  /** The host to resolve, or the IP address itself (IPv6 without brackets). */
  readonly host: string
  readonly isIp: boolean
}

/**
 * The URL's own rules, before any resolution: absolute, https (http too when private targets are
 * allowed), a host, no fragment games. Returns the problem in words, or the parsed target.
 */
export const parseTargetUrl = (text: string, allowPrivate: boolean): TargetUrl | string => {
  if (text.length > MAX_URL_LENGTH) return `must be at most ${MAX_URL_LENGTH} characters`
  let url: URL
  try {
    url = new URL(text)
  } catch {
    return "must be an absolute URL, such as https://example.com/webhooks"
  }
  if (url.protocol !== "https:" && !(allowPrivate && url.protocol === "http:")) return "must use https"
  const host = url.hostname.replace(/^\[(.*)\]$/, "$1").replace(/\.$/, "").toLowerCase()
  if (host === "") return "must name a host"
  return { url, host, isIp: isIpAddress(host) }
}

/** The first non-public address among `addresses` and why, for the refusal message. */
export const firstNonPublic = (addresses: ReadonlyArray<string>): { address: string; kind: AddressKind } | undefined => {
  for (const address of addresses) {
    const kind = nonPublicKind(address)
    if (kind !== undefined) return { address, kind }
  }
  return undefined
}

// ---------------------------------------------------------------------------------------------
// Resolution: the same rules applied to the addresses a hostname has now.

/** What the operator decided about webhook targets. */
export class WebhookSettings extends Context.Tag("mailroom/WebhookSettings")<WebhookSettings, {
  /** WEBHOOK_ALLOW_PRIVATE: loopback and private addresses, and plain http, are allowed. */
  readonly allowPrivate: boolean
}>() {}

export class TargetRefused extends Data.TaggedError("TargetRefused")<{
  /** invalid: the URL itself; not-public: where it points; not-found / unavailable: its host's DNS. */
  readonly reason: "invalid" | "not-public" | "not-found" | "unavailable"
  readonly message: string
}> {}

export interface ResolvedTarget {
  readonly url: URL
  /** Checked addresses, IPv4 first: a delivery connects to the first, never to a fresh lookup. */
  readonly addresses: ReadonlyArray<ResolvedAddress>
}

export class WebhookTargets extends Effect.Service<WebhookTargets>()("mailroom/WebhookTargets", {
  effect: Effect.gen(function*() {
    const dns = yield* Dns
    const { allowPrivate } = yield* WebhookSettings

    const parse = (text: string) => {
      const target = parseTargetUrl(text, allowPrivate)
      return typeof target === "string" ? Effect.fail(new TargetRefused({ reason: "invalid", message: target })) : Effect.succeed(target)
    }

    const notPublic = (target: TargetUrl, addresses: ReadonlyArray<ResolvedAddress>) => {
      if (allowPrivate) return undefined
      const bad = firstNonPublic(addresses.map((a) => a.address))
      if (bad === undefined) return undefined
      const where = target.isIp ? `${bad.address} is a ${bad.kind} address` : `${target.host} resolves to ${bad.address}, a ${bad.kind} address`
      return new TargetRefused({ reason: "not-public", message: `${where}; webhooks are delivered to public addresses only` })
    }

    /** Where `text` points now, checked: what a delivery connects to. */
    const resolve = (text: string): Effect.Effect<ResolvedTarget, TargetRefused> =>
      Effect.gen(function*() {
        const target = yield* parse(text)
        const addresses: ReadonlyArray<ResolvedAddress> = target.isIp
          ? [{ address: target.host, family: target.host.includes(":") ? 6 : 4 }]
          : yield* dns.addresses(target.host).pipe(
            Effect.mapError((error) =>
              new TargetRefused({ reason: error.reason === "NotFound" ? "not-found" : "unavailable", message: error.message })
            )
          )
        const refused = notPublic(target, addresses)
        if (refused) return yield* refused
        return { url: target.url, addresses }
      })

    /**
     * May a webhook be saved with `text`? Its rules, and (unless private targets are allowed, as in
     * local development where the receiver may not be up yet) where it resolves now.
     */
    const validate = (text: string): Effect.Effect<void, TargetRefused> =>
      allowPrivate ? Effect.asVoid(parse(text)) : Effect.asVoid(resolve(text))

    return { resolve, validate } as const
  })
}) {}
