/**
 * The world a sending suite's server delivers into: a receiving SMTP server the suite runs (on
 * 127.0.0.1, so the server runs with OUTBOUND_ALLOW_PRIVATE), found as partner.test's MX through a DNS server of the suite's own, which also publishes Mailroom's DKIM key
 * for the shared domain (so an independent verifier can check what arrives). Call it before
 * `useSuiteServer`, whose server then takes `env()`: its hooks run first. With `allowPrivate: false`
 * the server runs as it does by default, without OUTBOUND_ALLOW_PRIVATE, and reaches none of it.
 */
import { generateKeyPairSync, type KeyObject } from "node:crypto"
import * as dns from "node:dns"
import { afterAll, beforeAll } from "vitest"
import { type DnsServer, startDnsServer } from "./dns-server.ts"
import { type MxServer, startMxServer } from "./mx-server.ts"

/** A DKIM TXT record publishing `publicKey`, in strings of at most 255 characters as DNS holds them. */
export const dkimTxt = (publicKey: KeyObject) =>
  `v=DKIM1; k=rsa; p=${publicKey.export({ type: "spki", format: "der" }).toString("base64")}`.match(/.{1,255}/g)!

export const useOutboundWorld = (options: { readonly allowPrivate?: boolean } = {}) => {
  const dkim = generateKeyPairSync("rsa", { modulusLength: 2048 })
  let mx: MxServer | undefined
  let names: DnsServer | undefined
  beforeAll(async () => {
    mx = await startMxServer()
    names = await startDnsServer()
    names.set("partner.test", { MX: [{ preference: 10, exchange: "mx.partner.test" }] })
    names.set("mx.partner.test", { A: ["127.0.0.1"] })
    names.set("mailroom._domainkey.agents.localhost", { TXT: [dkimTxt(dkim.publicKey)] })
  })
  afterAll(async () => {
    await mx?.close()
    await names?.close()
  })
  return {
    get mx() {
      return mx!
    },
    get names() {
      return names!
    },
    /** The server's settings, read when it starts (after the servers above): `extra` besides. */
    env: (extra: Record<string, string | (() => string)> = {}): Record<string, string> => {
      const env = {
        DNS_SERVERS: () => names!.address,
        OUTBOUND_SMTP_PORT: () => String(mx!.port),
        // The receiving server is on 127.0.0.1, which the mta refuses by default.
        ...(options.allowPrivate === false ? {} : { OUTBOUND_ALLOW_PRIVATE: "true" }),
        DKIM_PRIVATE_KEY: dkim.privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
        ...extra
      }
      return Object.defineProperties({}, Object.fromEntries(Object.entries(env).map(([name, value]) =>
        [name, { enumerable: true, get: typeof value === "function" ? value : () => value }])))
    },
    /** DNS as the suite's server sees it, for a verifier (mailauth's `resolver`). */
    resolver: () => {
      const r = new dns.promises.Resolver()
      r.setServers([names!.address])
      return (name: string, type: string) => r.resolve(name, type as "TXT") as Promise<never>
    }
  }
}
