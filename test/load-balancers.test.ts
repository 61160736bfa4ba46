/**
 * The client behind load balancers, as two pure rules: over HTTP, trusted proxies' X-Forwarded-For
 * (src/trusted-proxies.ts) read from the right, past the listed proxies, never believed from any other
 * peer; on the mail listeners, the PROXY protocol's header (src/proxy-protocol.ts). The wiring is proved
 * by started servers: test/api/activity.test.ts (HTTP), test/smtp/trust.test.ts (SMTP),
 * test/imap/imap.test.ts (IMAP).
 */
import { describe, expect, it } from "vitest"
import { expectsProxyHeader, parseProxyHeader } from "../src/proxy-protocol.ts"
import { clientAddress, proxyEntry, trustedProxies } from "../src/trusted-proxies.ts"

const proxies = trustedProxies(["127.0.0.1", "10.0.0.0/8", "fd00::/8"])
const client = (peer: string | undefined, forwardedFor?: string) => clientAddress(peer, forwardedFor, proxies)

describe("proxyEntry", () => {
  it.each(["10.0.0.5", "10.0.0.0/8", "0.0.0.0/0", "2001:db8::1", "fd00::/8", "::/0", " 192.168.0.0/16 "])("takes %j", (entry) => {
    expect(proxyEntry(entry)).toBeDefined()
  })

  it.each(["", "lb.internal", "10.0.0.0/33", "fd00::/129", "10.0.0.0/", "10.0.0.0/8/8", "10.0.0.0/-1", "10.0.0.0/08x", "300.0.0.1"])(
    "refuses %j",
    (entry) => {
      expect(proxyEntry(entry)).toBeUndefined()
    }
  )
})

describe("clientAddress", () => {
  it("is the peer when the peer is no trusted proxy, whatever it forwards", () => {
    expect(client("198.51.100.4", "203.0.113.7")).toBe("198.51.100.4")
    expect(client("10.0.0.1")).toBe("10.0.0.1")
    expect(client(undefined, "203.0.113.7")).toBeUndefined()
  })

  it("is the last address a trusted proxy appended, not what the client wrote to its left", () => {
    expect(client("127.0.0.1", "203.0.113.7")).toBe("203.0.113.7")
    // The client wrote 198.51.100.1; the outer balancer appended 203.0.113.7, an inner proxy 10.2.3.4.
    expect(client("127.0.0.1", "198.51.100.1, 203.0.113.7, 10.2.3.4")).toBe("203.0.113.7")
    expect(client("10.9.9.9", "198.51.100.1,203.0.113.7")).toBe("203.0.113.7")
  })

  it("reads a dual-stack listener's IPv4 peers, and IPv6 entries, with or without the client's port", () => {
    expect(client("::ffff:127.0.0.1", "203.0.113.7")).toBe("203.0.113.7")
    expect(client("127.0.0.1", "[2001:DB8::5]:4711")).toBe("2001:db8::5")
    expect(client("127.0.0.1", "2001:db8::5")).toBe("2001:db8::5")
    expect(client("127.0.0.1", "203.0.113.7:4711")).toBe("203.0.113.7")
    expect(client("127.0.0.1", "::ffff:203.0.113.7")).toBe("203.0.113.7")
    expect(client("fd00::1", "2001:db8::5, fd12::9")).toBe("2001:db8::5")
    // One client, one spelling: RFC 5952's.
    expect(client("127.0.0.1", "2001:DB8:0:0:0:0:0:7")).toBe("2001:db8::7")
    expect(client("127.0.0.1", "[2001:db8:0000::7]:443")).toBe("2001:db8::7")
  })

  it("stops at the proxy that wrote an entry that is no address", () => {
    expect(client("127.0.0.1", "unknown")).toBe("127.0.0.1")
    expect(client("127.0.0.1", "203.0.113.7, unknown, 10.0.0.8")).toBe("10.0.0.8")
    expect(client("127.0.0.1", "")).toBe("127.0.0.1")
    expect(client("127.0.0.1", "203.0.113.7, <script>")).toBe("127.0.0.1")
    // A link-local address with its zone names no place a limit could count.
    expect(client("127.0.0.1", "fe80::1%eth0")).toBe("127.0.0.1")
  })

  it("is the farthest proxy when every entry is a trusted one (a request from inside the network)", () => {
    expect(client("127.0.0.1", "10.0.0.3, 10.0.0.2")).toBe("10.0.0.3")
  })
})

describe("the PROXY protocol's header", () => {
  it("names the client of TCP4 and TCP6 lines; UNKNOWN names none", () => {
    expect(parseProxyHeader("PROXY TCP4 203.0.113.9 10.0.0.5 40000 25")).toBe("203.0.113.9")
    expect(parseProxyHeader("PROXY TCP6 2001:DB8::9 2001:db8::1 40000 993")).toBe("2001:db8::9")
    expect(parseProxyHeader("PROXY UNKNOWN")).toBeUndefined()
    expect(parseProxyHeader("PROXY UNKNOWN ffff::1 ffff::2 1 2")).toBeUndefined()
  })

  it.each([
    "EHLO client.test",
    "PROXY TCP4 203.0.113.9 10.0.0.5 40000",
    "PROXY TCP4 2001:db8::9 10.0.0.5 40000 25",
    "PROXY TCP6 203.0.113.9 10.0.0.5 40000 25",
    "PROXY TCP4 203.0.113.9 10.0.0.5 40000 70000",
    "PROXY TCP4 mail.example 10.0.0.5 40000 25",
    "PROXY TCP4 203.0.113.9 10.0.0.5 40000 25 extra",
    "proxy TCP4 203.0.113.9 10.0.0.5 40000 25"
  ])("refuses %j", (line) => {
    expect(parseProxyHeader(line)).toBeInstanceOf(Error)
  })

  it("is expected from the listed peers (a dual-stack listener's form too), or from every one with *", () => {
    expect(expectsProxyHeader(["10.0.0.5"], "10.0.0.5")).toBe(true)
    expect(expectsProxyHeader(["10.0.0.5"], "::ffff:10.0.0.5")).toBe(true)
    expect(expectsProxyHeader(["10.0.0.5"], "10.0.0.6")).toBe(false)
    expect(expectsProxyHeader(["2001:DB8::1"], "2001:db8::1")).toBe(true)
    expect(expectsProxyHeader(["*"], "192.0.2.1")).toBe(true)
    expect(expectsProxyHeader([], "10.0.0.5")).toBe(false)
  })
})
