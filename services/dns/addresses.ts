/**
 * IP addresses and the ranges they fall in: which are public internet addresses and which are not
 * (loopback, private, link-local, unique-local and other ranges no outside party may make us reach).
 * Pure functions of the address text, IPv4 and IPv6 (including IPv4-mapped, NAT64 and 6to4 forms).
 */

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

/** `kind` as a refusal message says it: "a loopback address", "an unspecified address", "a unique-local address". */
export const kindInWords = (kind: AddressKind) => `${/^([aeio]|un[^i])/.test(kind) ? "an" : "a"} ${kind} address`

/** The first non-public address among `addresses` and why, for the refusal message. */
export const firstNonPublic = (addresses: ReadonlyArray<string>): { address: string; kind: AddressKind } | undefined => {
  for (const address of addresses) {
    const kind = nonPublicKind(address)
    if (kind !== undefined) return { address, kind }
  }
  return undefined
}

/** A listener's or server's host that is this machine itself (its name, or a loopback address): what is sent there stays here. */
export const isLoopbackHost = (host: string) => host === "localhost" || host === "::1" || /^127\.\d+\.\d+\.\d+$/.test(host)
