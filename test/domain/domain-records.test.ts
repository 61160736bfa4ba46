/**
 * What verification makes of a custom domain's sending records, without a database: whether its SPF
 * record lets Mailroom's hosts by as receivers read it (services/domains/spf.ts: left to right, first
 * match wins, include and redirect followed) and whether a TXT record publishes its DKIM key. Through
 * verify, with DNS answering, these are test/domain/domains.test.ts's.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { DnsError } from "../../services/dns/dns.ts"
import { dkimKeyPublished } from "../../services/domains/domains.ts"
import { spfConfigured } from "../../services/domains/spf.ts"

const DOMAIN = "race.example"

/** spfConfigured for `record` at race.example, other names answering from `zone` (a name in `down` unanswered). */
const spf = (record: string, options: { readonly asked?: string; readonly zone?: Record<string, string>; readonly down?: ReadonlyArray<string> } = {}) => {
  const looked: Array<string> = []
  const lookup = (name: string) =>
    Effect.suspend(() => {
      looked.push(name)
      if (options.down?.includes(name)) return Effect.fail(new DnsError({ reason: "Unavailable", message: `${name}: SERVFAIL` }))
      const value = options.zone?.[name]
      return value === undefined ? Effect.fail(new DnsError({ reason: "NotFound", message: `${name}: NXDOMAIN` })) : Effect.succeed([value])
    })
  return Effect.map(spfConfigured(DOMAIN, ["mailroom-verification=x", record], options.asked ?? "v=spf1 mx ~all", lookup), (found) => ({ found, looked }))
}

const found = (record: string, options?: Parameters<typeof spf>[1]) => Effect.map(spf(record, options), (result) => result.found)

describe("spfConfigured", () => {
  it.effect("the first term that matches decides: an all or a refusing mx before a passing mx refuses Mailroom's hosts", () =>
    Effect.gen(function*() {
      expect(yield* found("v=spf1 mx ~all")).toEqual(Option.some(true))
      expect(yield* found("v=spf1 +MX -all")).toEqual(Option.some(true))
      expect(yield* found("v=spf1 ip4:192.0.2.1 a:other.example mx ~all")).toEqual(Option.some(true))
      expect(yield* found("v=spf1 -all mx")).toEqual(Option.some(false))
      expect(yield* found("v=spf1 -mx ~all mx")).toEqual(Option.some(false))
      expect(yield* found("v=spf1 ~all mx")).toEqual(Option.some(false))
      expect(yield* found("v=spf1 -mx mx ~all")).toEqual(Option.some(false))
      expect(yield* found("v=spf1 ?mx:race.example mx ~all")).toEqual(Option.some(false))
      expect(yield* found("v=spf1 -all")).toEqual(Option.some(false))
      // Another domain's MX hosts are not Mailroom's, and refusing them refuses nobody of ours.
      expect(yield* found("v=spf1 mx:other.example ~all")).toEqual(Option.some(false))
      expect(yield* found("v=spf1 -mx:other.example mx ~all")).toEqual(Option.some(true))
    }))

  it.effect("mx:<the domain> is mx, a:<the domain> is a", () =>
    Effect.gen(function*() {
      expect(yield* found("v=spf1 mx:race.example ~all")).toEqual(Option.some(true))
      expect(yield* found("v=spf1 mx:RACE.example. ~all")).toEqual(Option.some(true))
      expect(yield* found("v=spf1 a:race.example -all", { asked: "v=spf1 a ~all" })).toEqual(Option.some(true))
      expect(yield* found("v=spf1 -a:race.example a -all", { asked: "v=spf1 a ~all" })).toEqual(Option.some(false))
    }))

  it.effect("include and redirect are followed; mx inside an included record is the included name's", () =>
    Effect.gen(function*() {
      const zone = { "_spf.race.example": "v=spf1 mx:race.example ~all" }
      expect(yield* found("v=spf1 include:_spf.race.example ~all", { zone })).toEqual(Option.some(true))
      expect(yield* found("v=spf1 redirect=_spf.race.example", { zone })).toEqual(Option.some(true))
      // A refusing include matches nothing (RFC 7208 §5.2): the terms after it still decide.
      expect(yield* found("v=spf1 include:_spf.race.example mx -all", { zone: { "_spf.race.example": "v=spf1 -mx:race.example -all" } }))
        .toEqual(Option.some(true))
      expect(yield* found("v=spf1 -include:_spf.race.example mx ~all", { zone })).toEqual(Option.some(false))
      expect(yield* found("v=spf1 include:_spf.race.example ~all", { zone: { "_spf.race.example": "v=spf1 mx ~all" } })).toEqual(Option.some(false))
      // A redirect counts only when nothing matched and there is no all.
      expect(yield* found("v=spf1 -all redirect=_spf.race.example", { zone })).toEqual(Option.some(false))
      expect(yield* found("v=spf1 ip4:192.0.2.1 redirect=_spf.race.example", { zone })).toEqual(Option.some(true))
      // An include or redirect of a name without an SPF record is a permanent error.
      expect(yield* found("v=spf1 include:nothing.example mx ~all", { zone })).toEqual(Option.some(false))
      expect(yield* found("v=spf1 redirect=nothing.example", { zone })).toEqual(Option.some(false))
    }))

  it.effect("behind a relay, its include is wanted: written, included or redirected to", () =>
    Effect.gen(function*() {
      const asked = "v=spf1 include:amazonses.com ~all"
      const zone = { "_spf.race.example": "v=spf1 include:amazonses.com -all", "amazonses.com": "v=spf1 ip4:199.255.192.0/22 -all" }
      expect(yield* found("v=spf1 include:amazonses.com ~all", { asked, zone })).toEqual(Option.some(true))
      expect(yield* found("v=spf1 include:_spf.race.example ~all", { asked, zone })).toEqual(Option.some(true))
      expect(yield* found("v=spf1 redirect=amazonses.com", { asked, zone })).toEqual(Option.some(true))
      expect(yield* found("v=spf1 ~include:amazonses.com include:amazonses.com ~all", { asked, zone })).toEqual(Option.some(false))
      expect(yield* found("v=spf1 mx ~all", { asked, zone })).toEqual(Option.some(false))
    }))

  it.effect("within 10 lookups: a loop or a long chain is a permanent error, not a hang", () =>
    Effect.gen(function*() {
      const loop = yield* spf("v=spf1 include:a.race.example mx ~all", {
        zone: { "a.race.example": "v=spf1 include:b.race.example -all", "b.race.example": "v=spf1 include:a.race.example -all" }
      })
      expect(loop.found).toEqual(Option.some(false))
      expect(loop.looked.length).toBe(10)
      const chain = Object.fromEntries(Array.from({ length: 9 }, (_, n) => [`${n}.race.example`, `v=spf1 include:${n + 1}.race.example -all`]))
      // Nine includes deep and mx the tenth lookup: a pass; one more include and mx is the eleventh.
      expect(yield* found("v=spf1 include:0.race.example mx ~all", { zone: { ...chain, "8.race.example": "v=spf1 -all" } }))
        .toEqual(Option.some(true))
      expect(yield* found("v=spf1 include:0.race.example mx ~all", { zone: { ...chain, "9.race.example": "v=spf1 -all" } }))
        .toEqual(Option.some(false))
    }))

  it.effect("a record that passes every host names no senders: +all or a bare all is not configured, ?all after Mailroom's hosts is", () =>
    Effect.gen(function*() {
      expect(yield* found("v=spf1 +all")).toEqual(Option.some(false))
      expect(yield* found("v=spf1 all")).toEqual(Option.some(false))
      // Whatever it lists first: a forger passes as well as the MX hosts do.
      expect(yield* found("v=spf1 mx +all")).toEqual(Option.some(false))
      expect(yield* found("v=spf1 mx all")).toEqual(Option.some(false))
      expect(yield* found("v=spf1 mx ip4:0.0.0.0/0 -all")).toEqual(Option.some(false))
      expect(yield* found("v=spf1 mx ip6:::/0 ~all")).toEqual(Option.some(false))
      const zone = { "open.race.example": "v=spf1 +all" }
      expect(yield* found("v=spf1 include:open.race.example mx -all", { zone })).toEqual(Option.some(false))
      expect(yield* found("v=spf1 mx redirect=open.race.example", { zone })).toEqual(Option.some(false))
      // Neutral for the rest (RFC 7208 §8.2: as if no record) still names the MX hosts, which pass.
      expect(yield* found("v=spf1 mx ?all")).toEqual(Option.some(true))
      expect(yield* found("v=spf1 ?all")).toEqual(Option.some(false))
      // A range of some hosts is not every host.
      expect(yield* found("v=spf1 mx ip4:192.0.2.0/24 ~all")).toEqual(Option.some(true))
      // An SPF_RECORD of no mechanism asks for one record that names senders.
      expect(yield* found("v=spf1 -all", { asked: "v=spf1 -all" })).toEqual(Option.some(true))
      expect(yield* found("v=spf1 +all", { asked: "v=spf1 -all" })).toEqual(Option.some(false))
    }))

  it.effect("a lookup that cannot be answered leaves nothing found (the caller keeps its last finding), unless the answer came first", () =>
    Effect.gen(function*() {
      expect(yield* found("v=spf1 include:_spf.race.example ~all", { down: ["_spf.race.example"] })).toEqual(Option.none())
      expect(yield* found("v=spf1 mx include:_spf.race.example ~all", { down: ["_spf.race.example"] })).toEqual(Option.some(true))
      expect(yield* found("v=spf1 -all include:_spf.race.example", { down: ["_spf.race.example"] })).toEqual(Option.some(false))
    }))

  it.effect("one SPF record, not none or two (RFC 7208 §4.5)", () =>
    Effect.gen(function*() {
      const lookup = () => Effect.fail(new DnsError({ reason: "NotFound", message: "none" }))
      expect(yield* spfConfigured(DOMAIN, ["v=spf1 mx ~all", "v=spf1 mx -all"], "v=spf1 mx ~all", lookup)).toEqual(Option.some(false))
      expect(yield* spfConfigured(DOMAIN, ["mailroom-verification=x"], "v=spf1 mx ~all", lookup)).toEqual(Option.some(false))
    }))
})

describe("dkimKeyPublished", () => {
  const asked = "v=DKIM1; k=rsa; p=MIIBIjANBgkqh"
  it("the domain's key, with v= and k= or without them (RFC 6376 §3.6.1), folded or with more tags", () => {
    expect(dkimKeyPublished(asked, asked)).toBe(true)
    expect(dkimKeyPublished("p=MIIBIjANBgkqh", asked)).toBe(true)
    expect(dkimKeyPublished("v=DKIM1; p=MIIBIjANBgkqh", asked)).toBe(true)
    expect(dkimKeyPublished("k=rsa;p=MIIBIj ANBgkqh;", asked)).toBe(true)
    expect(dkimKeyPublished("v = DKIM1 ; h=sha256; t=s; p=MIIB IjANBgkqh", asked)).toBe(true)
  })
  it("not another key, another version or algorithm, or a malformed record", () => {
    expect(dkimKeyPublished("p=MIIBIjANBgkqX", asked)).toBe(false)
    expect(dkimKeyPublished("p=", asked)).toBe(false)
    expect(dkimKeyPublished("v=DKIM2; p=MIIBIjANBgkqh", asked)).toBe(false)
    expect(dkimKeyPublished("k=ed25519; p=MIIBIjANBgkqh", asked)).toBe(false)
    expect(dkimKeyPublished("p=MIIBIjANBgkqh; p=MIIBIjANBgkqh", asked)).toBe(false)
    expect(dkimKeyPublished("MIIBIjANBgkqh", asked)).toBe(false)
    expect(dkimKeyPublished("v=spf1 mx ~all", asked)).toBe(false)
  })
})
