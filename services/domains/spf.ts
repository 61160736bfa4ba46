/**
 * Whether a custom domain's SPF record lets by the hosts Mailroom's mail leaves from (`SPF_RECORD`),
 * read the way receivers read it (RFC 7208 §4.6): terms left to right, the first that matches decides.
 *
 * This check does not know those hosts' addresses, so it compares terms by what they name: each
 * mechanism of SPF_RECORD (its `all` aside) must be reached with a pass (`+` or no qualifier) before
 * an `all` that is not a pass, or the same mechanism with `-`, `~` or `?`, decides otherwise. Terms
 * name the same hosts when they name the same domain: `mx` and `a` are those of the record's own
 * domain, so `mx:<the domain>` is `mx`. `include:` and `redirect=` are followed as receivers follow
 * them (an include matches when its record passes; a redirect's record decides when nothing matched
 * and there is no `all`), within RFC 7208 §4.6.4's 10 lookups, which also ends a loop. Other terms
 * (another host's `a`, `ip4:`, a macro) cannot be compared and are read as not matching.
 *
 * A record that passes every host (`+all` or a bare `all`, `ip4:0.0.0.0/0`, an include or redirect
 * that does) is not configured, whatever it lists first: it names no senders, so a receiver learns
 * nothing from it and a forger passes as well as Mailroom does. `?all` (neutral, which RFC 7208 §8.2
 * says to treat as no SPF at all) after Mailroom's hosts is configured: they pass, and the record only
 * declines to say anything of the rest, as `~all` and `-all` say more firmly.
 */
import { Effect, Option } from "effect"
import type { DnsError } from "../dns/dns.ts"

/** What evaluating a record for one wanted mechanism comes to (RFC 7208 §2.6, as far as this check can tell). */
type Outcome =
  /** The wanted hosts pass. */
  | "pass"
  /** A term that is not a pass matched first: fail, softfail or neutral. */
  | "refused"
  /** No term matched. */
  | "unmatched"
  /** The name has no SPF record. */
  | "none"
  | "permerror"
  /** A lookup could not be answered: nothing can be said. */
  | "temperror"

/**
 * What a record is asked about: the hosts a mechanism of SPF_RECORD names (its canonical form), or
 * any host at all, which only a term that matches every address names.
 */
const ANY_HOST = Symbol("any host")
type Wanted = string | typeof ANY_HOST

/** Whether a term matches every address (of its family): `all`, `ip4:0.0.0.0/0`, `ip6:::/0`. */
const matchesEveryHost = (mechanism: Mechanism) => mechanism.name === "all" || /^ip[46]:[^/]*\/0$/.test(mechanism.canonical)

/** Mechanisms that ask DNS when evaluated, counted against RFC 7208 §4.6.4's limit (with `redirect=`). */
const LOOKING_UP = new Set(["include", "a", "mx", "ptr", "exists"])
const MAX_LOOKUPS = 10

interface Mechanism {
  readonly qualifier: "+" | "-" | "~" | "?"
  readonly name: string
  /** The mechanism without its qualifier, its domain spelled out: `mx` in a record of `d` is `mx:d`. */
  readonly canonical: string
  /** The domain an `include:` names. */
  readonly target: string
}

interface Modifier {
  readonly name: string
  readonly value: string
}

const bareName = (name: string) => name.replace(/\.$/, "")

/** The terms of an SPF record published at `domain` (lower-cased: domain names and mechanism names ignore case). */
export const spfTerms = (record: string, domain: string) => {
  const mechanisms: Array<Mechanism> = []
  const modifiers: Array<Modifier> = []
  for (const term of record.trim().toLowerCase().split(/\s+/).slice(1)) {
    const modifier = /^([a-z][a-z0-9_.-]*)=(.*)$/.exec(term)
    if (modifier) {
      modifiers.push({ name: modifier[1]!, value: bareName(modifier[2]!) })
      continue
    }
    const [, qualifier, name, rest] = /^([-+~?]?)([a-z0-9]*)(.*)$/.exec(term)!
    // a, mx and ptr name the record's own domain unless they say another; a CIDR length stays part of the term.
    const spec = /^(?::([^/]*))?(\/.*)?$/.exec(rest!)
    const target = spec?.[1] !== undefined ? bareName(spec[1]) : undefined
    const canonical = ["a", "mx", "ptr"].includes(name!) && spec
      ? `${name}:${target ?? domain}${spec[2] ?? ""}`
      : (name === "include" || name === "exists") && target !== undefined
      ? `${name}:${target}`
      : `${name}${rest}`
    mechanisms.push({ qualifier: (qualifier || "+") as Mechanism["qualifier"], name: name!, canonical, target: target ?? "" })
  }
  return { mechanisms, modifiers }
}

/** The SPF records (RFC 7208 §4.5) among a name's TXT records. */
const spfRecords = (txt: ReadonlyArray<string>) => txt.filter((value) => /^v=spf1(\s|$)/i.test(value.trim()))

/**
 * Whether `domain`'s TXT records (`txt`) hold one SPF record that lets by every mechanism of `asked`
 * (SPF_RECORD), asking `lookup` for the records of what it includes or redirects to. None when a
 * lookup failed before an answer could be had (the caller keeps what it found before).
 */
export const spfConfigured = (
  domain: string,
  txt: ReadonlyArray<string>,
  asked: string,
  lookup: (name: string) => Effect.Effect<ReadonlyArray<string>, DnsError>
): Effect.Effect<Option.Option<boolean>> => {
  const name = bareName(domain.toLowerCase())
  const wanted = spfTerms(asked, name)
  // SPF_RECORD's own `redirect=X` lets by what X's record does: what `include:X` there would.
  const mechanisms = [
    ...wanted.mechanisms.filter((mechanism) => mechanism.name !== "all").map((mechanism) => mechanism.canonical),
    ...wanted.modifiers.filter((modifier) => modifier.name === "redirect").map((modifier) => `include:${modifier.value}`)
  ]
  const recordsOf = (target: string) =>
    lookup(target).pipe(
      Effect.map(spfRecords),
      Effect.map((records) => ({ records, failed: false })),
      Effect.catchAll((error) => Effect.succeed({ records: [] as ReadonlyArray<string>, failed: error.reason !== "NotFound" }))
    )

  const outcomeFor = (want: Wanted) => {
    let lookups = 0
    const counted = () => ++lookups > MAX_LOOKUPS
    /** Whether the hosts `want` names pass `target`'s record (an include's or a redirect's). */
    const followed = (target: string): Effect.Effect<Outcome> =>
      Effect.flatMap(recordsOf(target), ({ records, failed }) => failed ? Effect.succeed<Outcome>("temperror") : evaluate(target, records))
    const evaluate = (at: string, records: ReadonlyArray<string>): Effect.Effect<Outcome> =>
      Effect.gen(function*() {
        if (records.length === 0) return "none"
        if (records.length > 1) return "permerror"
        const { mechanisms, modifiers } = spfTerms(records[0]!, at)
        for (const mechanism of mechanisms) {
          if (LOOKING_UP.has(mechanism.name) && counted()) return "permerror"
          const pass = mechanism.qualifier === "+"
          const matches = want === ANY_HOST ? matchesEveryHost(mechanism) : mechanism.canonical === want || mechanism.name === "all"
          if (matches) return pass ? "pass" : "refused"
          // A macro (%{…}) names hosts only a real sender's message tells: not comparable.
          if (mechanism.name !== "include" || mechanism.target === "" || mechanism.target.includes("%")) continue
          const included = yield* followed(mechanism.target)
          if (included === "pass") return pass ? "pass" : "refused"
          // RFC 7208 §5.2: an include of a name without an SPF record is a permanent error.
          if (included === "none") return "permerror"
          if (included === "permerror" || included === "temperror") return included
        }
        const redirects = modifiers.filter((modifier) => modifier.name === "redirect")
        if (redirects.length > 1) return "permerror"
        const redirect = redirects[0]
        if (redirect === undefined || mechanisms.some((mechanism) => mechanism.name === "all") || redirect.value.includes("%")) return "unmatched"
        if (counted()) return "permerror"
        if (`include:${redirect.value}` === want) return "pass"
        const outcome = yield* followed(redirect.value)
        // RFC 7208 §6.1: a redirect to a name without an SPF record is a permanent error.
        return outcome === "none" ? "permerror" : outcome
      })
    return evaluate(name, spfRecords(txt))
  }

  // Asked only of a record that passes Mailroom's hosts; only one shown to pass every host is refused
  // for it (an include that could not be looked up is not taken for a pass).
  const unlessEveryHost = Effect.map(outcomeFor(ANY_HOST), (outcome) => Option.some(outcome !== "pass"))
  // An SPF_RECORD of no mechanism asks only that the domain publish one SPF record (one that names its senders).
  if (mechanisms.length === 0) return spfRecords(txt).length === 1 ? unlessEveryHost : Effect.succeed(Option.some(false))
  return Effect.flatMap(Effect.forEach(mechanisms, outcomeFor), (outcomes) =>
    outcomes.every((outcome) => outcome === "pass")
      ? unlessEveryHost
      : Effect.succeed(outcomes.some((outcome) => outcome !== "pass" && outcome !== "temperror") ? Option.some(false) : Option.none()))
}
