/**
 * Which address a request came from when Mailroom stands behind load balancers or reverse proxies
 * (`TRUSTED_PROXIES`). Every request then reaches the server from a proxy's address, so the limits
 * kept per client address (unauthenticated requests, failed sign-ins), the account's activity and its
 * new-sign-in notices would all see one client. A proxy says whom it served in `X-Forwarded-For`,
 * appending the address it was reached from to whatever the request already carried; only the entries
 * that trusted proxies appended can be believed (a client writes any header it likes).
 *
 * So the client is found by walking the header from its right end, as the proxies appended it: past
 * each trusted proxy to the first address that is not one. A request from a peer that is not trusted
 * keeps the peer's address, whatever it says; an entry that is no address (`unknown`, a proxy's
 * obfuscated name) stops the walk at the proxy that wrote it.
 */
import { BlockList, isIP } from "node:net"
import { canonicalAddress } from "./addresses.ts"

interface Entry {
  readonly address: string
  readonly prefix: number
  readonly type: "ipv4" | "ipv6"
}

/** `10.0.0.5`, `2001:db8::1`, `10.0.0.0/8` or `fd00::/8` as a network; undefined for anything else. */
export const proxyEntry = (entry: string): Entry | undefined => {
  const [address = "", bits, ...rest] = entry.trim().split("/")
  const family = isIP(address)
  if (family === 0 || rest.length > 0) return undefined
  const type = family === 4 ? "ipv4" : "ipv6"
  const max = family === 4 ? 32 : 128
  if (bits === undefined) return { address, prefix: max, type }
  return /^\d{1,3}$/.test(bits) && Number(bits) <= max ? { address, prefix: Number(bits), type } : undefined
}

export interface TrustedProxies {
  readonly trusts: (address: string) => boolean
}

/** The proxies of `entries` (each valid as `proxyEntry` reads it). */
export const trustedProxies = (entries: ReadonlyArray<string>): TrustedProxies => {
  const list = new BlockList()
  for (const text of entries) {
    const entry = proxyEntry(text)
    if (entry === undefined) throw new Error(`Not an address or network: ${JSON.stringify(text)}`)
    list.addSubnet(entry.address, entry.prefix, entry.type)
  }
  return {
    trusts: (address) => {
      const plain = canonicalAddress(address)
      return plain !== undefined && list.check(plain, isIP(plain) === 4 ? "ipv4" : "ipv6")
    }
  }
}

/**
 * One entry of X-Forwarded-For as an address: `192.0.2.1`, `2001:db8::1`, and the forms some proxies
 * write with the client's port, `192.0.2.1:4711` and `[2001:db8::1]:4711`; undefined for anything else.
 */
const hopAddress = (hop: string): string | undefined => {
  const text = hop.trim()
  const bracketed = /^\[([^\]]+)\](?::\d{1,5})?$/.exec(text)
  const withPort = /^(\d{1,3}(?:\.\d{1,3}){3}):\d{1,5}$/.exec(text)
  return canonicalAddress(bracketed?.[1] ?? withPort?.[1] ?? text)
}

/**
 * The address of the client behind `peer` (the socket's), read from `forwardedFor` (X-Forwarded-For,
 * several headers joined by commas) only as far as trusted proxies wrote it.
 */
export const clientAddress = (
  peer: string | undefined,
  forwardedFor: string | undefined,
  proxies: TrustedProxies
): string | undefined => {
  if (peer === undefined || forwardedFor === undefined || !proxies.trusts(peer)) return peer
  let client = peer
  const hops = forwardedFor.split(",")
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = hopAddress(hops[i]!)
    if (hop === undefined) return client
    client = hop
    if (!proxies.trusts(hop)) return hop
  }
  // Every entry a trusted proxy: the farthest is the client (a request from inside the network).
  return client
}
