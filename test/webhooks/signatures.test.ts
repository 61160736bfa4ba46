/**
 * The receiver's side of signing: the exported helper accepts a genuine delivery and nothing else,
 * SPEC's signature is the plain HMAC a receiver can compute with any tool, and the Standard Webhooks
 * headers verify with that scheme's own library. Also the address rules every webhook target meets.
 */
import { createHmac } from "node:crypto"
import { Webhook } from "standardwebhooks"
import { describe, expect, it } from "vitest"
import {
  generateSecret,
  maskSecret,
  signingHeaders,
  verifyServiceSignature,
  verifyWebhook
} from "../../services/webhooks/signatures.ts"
import { nonPublicKind } from "../../services/dns/addresses.ts"
import { parseTargetUrl } from "../../services/webhooks/targets.ts"

const body = JSON.stringify({ event: "email.received", timestamp: "2026-11-23T10:00:00.000Z", data: { email_id: "eml_1", subject: "Grüße" } })
const now = Date.UTC(2026, 10, 23, 10, 0, 5)
const timestamp = Math.floor(now / 1000)

describe("signing and verifying", () => {
  it("X-Service-Signature is sha256=<lowercase hex HMAC-SHA256 of the raw body keyed with the secret>", () => {
    const secret = "my-own-secret-123"
    const headers = signingHeaders({ secret, id: "email.received:eml_1", timestamp, body })
    const expected = createHmac("sha256", secret).update(Buffer.from(body, "utf8")).digest("hex")
    expect(headers["x-service-signature"]).toBe(`sha256=${expected}`)
    expect(verifyServiceSignature(secret, body, headers["x-service-signature"])).toBe(true)
    expect(verifyServiceSignature(secret, Buffer.from(body), headers["x-service-signature"])).toBe(true)
    expect(verifyServiceSignature("another-secret-1", body, headers["x-service-signature"])).toBe(false)
    expect(verifyServiceSignature(secret, `${body} `, headers["x-service-signature"])).toBe(false)
    expect(verifyServiceSignature(secret, body, "sha256=00")).toBe(false)
    expect(verifyServiceSignature(secret, body, undefined)).toBe(false)
  })

  it("verifyWebhook accepts a genuine, fresh delivery, from fetch Headers or Node's header object", () => {
    const secret = generateSecret()
    const headers = signingHeaders({ secret, id: "evt-1", timestamp, body })
    expect(verifyWebhook({ secret, body, headers, now })).toBe(true)
    expect(verifyWebhook({ secret, body, headers: new Headers(headers), now })).toBe(true)
    const upperCased = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toUpperCase(), v]))
    expect(verifyWebhook({ secret, body, headers: upperCased, now })).toBe(true)
  })

  it("verifyWebhook refuses a changed body, another secret, a stale or future timestamp, a changed id and missing headers", () => {
    const secret = generateSecret()
    const headers = signingHeaders({ secret, id: "evt-1", timestamp, body })
    expect(verifyWebhook({ secret, body: body.replace("eml_1", "eml_2"), headers, now })).toBe(false)
    expect(verifyWebhook({ secret: generateSecret(), body, headers, now })).toBe(false)
    expect(verifyWebhook({ secret, body, headers, now: now + 301_000 })).toBe(false)
    expect(verifyWebhook({ secret, body, headers, now: now - 301_000 })).toBe(false)
    expect(verifyWebhook({ secret, body, headers, now: now + 60_000, toleranceSeconds: 30 })).toBe(false)
    expect(verifyWebhook({ secret, body, headers: { ...headers, "webhook-id": "evt-2" }, now })).toBe(false)
    // A replay with a new timestamp but the old signature.
    expect(verifyWebhook({ secret, body, headers: { ...headers, "webhook-timestamp": String(timestamp + 10) }, now })).toBe(false)
    for (const name of Object.keys(headers)) {
      const { [name as keyof typeof headers]: _, ...rest } = headers
      expect(verifyWebhook({ secret, body, headers: rest, now }), `without ${name}`).toBe(false)
    }
  })

  it("the Standard Webhooks headers verify with that scheme's own library (whsec_ secrets as they are, others in raw format)", () => {
    const generated = generateSecret()
    const headers = signingHeaders({ secret: generated, id: "evt-42", timestamp: Math.floor(Date.now() / 1000), body })
    expect(new Webhook(generated).verify(body, headers)).toEqual(JSON.parse(body))
    expect(() => new Webhook(generateSecret()).verify(body, headers)).toThrow()

    const chosen = "a-secret-I-chose-myself"
    const mine = signingHeaders({ secret: chosen, id: "evt-43", timestamp: Math.floor(Date.now() / 1000), body })
    expect(new Webhook(chosen, { format: "raw" }).verify(body, mine)).toEqual(JSON.parse(body))
  })

  it("generated secrets are whsec_ and 32 random bytes; the masked form shows the prefix and the last 4 characters only", () => {
    const secret = generateSecret()
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/)
    expect(Buffer.from(secret.slice(6), "base64")).toHaveLength(32)
    expect(generateSecret()).not.toBe(secret)
    expect(maskSecret(secret)).toBe(`whsec_********${secret.slice(-4)}`)
    expect(maskSecret("short-secret")).toBe("********")
  })
})

describe("webhook targets", () => {
  it.each([
    ["127.0.0.1", "loopback"],
    ["127.255.0.9", "loopback"],
    ["10.0.0.1", "private"],
    ["172.16.5.4", "private"],
    ["172.31.255.255", "private"],
    ["192.168.1.1", "private"],
    ["169.254.169.254", "link-local"],
    ["100.64.0.1", "shared (carrier-grade NAT)"],
    ["0.0.0.0", "unspecified"],
    ["224.0.0.1", "multicast"],
    ["255.255.255.255", "reserved"],
    ["192.0.2.10", "reserved"],
    ["::1", "loopback"],
    ["::", "unspecified"],
    ["fd12:3456::1", "unique-local"],
    ["fc00::1", "unique-local"],
    ["fe80::1%eth0", "link-local"],
    ["::ffff:127.0.0.1", "loopback"],
    ["::ffff:7f00:1", "loopback"],
    ["::ffff:10.1.2.3", "private"],
    ["64:ff9b::a9fe:a9fe", "link-local"],
    ["2002:c0a8:0101::1", "private"],
    ["ff02::1", "multicast"],
    ["2001:db8::1", "reserved"],
    ["not-an-address", "reserved"]
  ])("%s is not public (%s)", (address, kind) => {
    expect(nonPublicKind(address)).toBe(kind)
  })

  it.each(["93.184.216.34", "8.8.8.8", "172.32.0.1", "100.128.0.1", "2606:4700:4700::1111", "::ffff:8.8.8.8", "2002:0808:0808::1"])(
    "%s is public",
    (address) => expect(nonPublicKind(address)).toBeUndefined()
  )

  it("URLs: https only, http when private targets are allowed; IPv6 literals unbracketed", () => {
    expect(parseTargetUrl("http://example.com/hook", false)).toBe("must use https")
    expect(parseTargetUrl("ftp://example.com/hook", false)).toBe("must use https")
    expect(parseTargetUrl("ftp://example.com/hook", true)).toBe("must use https or http")
    expect(parseTargetUrl("not a url", false)).toMatch(/absolute URL/)
    // What the WHATWG parser would read as http://x/, but nobody writes meaning it.
    for (const loose of ["http:///x", "http:x", "http:\\\\x", " http://x", "http://x/a b"]) {
      expect(parseTargetUrl(loose, true), loose).toMatch(/absolute URL/)
    }
    expect(parseTargetUrl(`https://example.com/${"a".repeat(2100)}`, false)).toMatch(/at most 2048/)
    expect(parseTargetUrl("http://127.0.0.1:8080/x", true)).toMatchObject({ host: "127.0.0.1", isIp: true })
    expect(parseTargetUrl("https://[::1]/x", false)).toMatchObject({ host: "::1", isIp: true })
    expect(parseTargetUrl("https://Hooks.Example.COM./x", false)).toMatchObject({ host: "hooks.example.com", isIp: false })
  })
})
