/**
 * A client's IP address in one spelling, whichever way a socket, a proxy's X-Forwarded-For or a PROXY
 * header wrote it, so that the limits kept per address count one client once (src/trusted-proxies.ts,
 * src/proxy-protocol.ts).
 */
import { isIP } from "node:net"

/**
 * `address` as one spelling: a dual-stack listener's `::ffff:192.0.2.1` is 192.0.2.1, an IPv6 address is
 * RFC 5952's (lower case, zeros compressed: `2001:db8:0:0:0:0:0:7` and `2001:DB8::7` are `2001:db8::7`);
 * undefined for anything that is no IP address, and for a zone-qualified one (`fe80::1%eth0`: a link's
 * own, meaningless elsewhere).
 */
export const canonicalAddress = (address: string): string | undefined => {
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(address)
  const plain = mapped ? mapped[1]! : address
  const family = isIP(plain)
  if (family === 4) return plain
  if (family !== 6 || plain.includes("%")) return undefined
  try {
    return new URL(`http://[${plain}]/`).hostname.slice(1, -1)
  } catch {
    return undefined
  }
}
