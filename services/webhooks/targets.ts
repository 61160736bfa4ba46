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
import { firstNonPublic, isIpAddress, kindInWords } from "../dns/addresses.ts"
import { Dns, type ResolvedAddress } from "../dns/dns.ts"

export const MAX_URL_LENGTH = 2048

export interface TargetUrl {
  readonly url: URL
  /** The host to resolve, or the IP address itself (IPv6 without brackets). */
  readonly host: string
  readonly isIp: boolean
}

/**
 * The URL's own rules, before any resolution: absolute, https (http too when private targets are
 * allowed), a host. Returns the problem in words, or the parsed target.
 */
export const parseTargetUrl = (text: string, allowPrivate: boolean): TargetUrl | string => {
  if (text.length > MAX_URL_LENGTH) return `must be at most ${MAX_URL_LENGTH} characters`
  // As RFC 3986 writes one: the WHATWG parser also reads `https:///x`, `https:x` and ` https://x`
  // (as https://x/), which are not what the customer meant to save.
  if (!/^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#\\]/.test(text) || /\s/.test(text)) return "must be an absolute URL, such as https://example.com/webhooks"
  let url: URL
  try {
    url = new URL(text)
  } catch {
    return "must be an absolute URL, such as https://example.com/webhooks"
  }
  if (url.protocol !== "https:" && !(allowPrivate && url.protocol === "http:")) return allowPrivate ? "must use https or http" : "must use https"
  const host = url.hostname.replace(/^\[(.*)\]$/, "$1").replace(/\.$/, "").toLowerCase()
  if (host === "") return "must name a host"
  return { url, host, isIp: isIpAddress(host) }
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
      const kind = kindInWords(bad.kind)
      const where = target.isIp ? `${bad.address} is ${kind}` : `${target.host} resolves to ${bad.address}, ${kind}`
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
