/**
 * The Dns port over node:dns. With `DNS_SERVERS` (host:port entries) every question goes to those
 * servers, over UDP and, for truncated answers, TCP; without it, addresses come from the system
 * resolver (getaddrinfo, which also reads /etc/hosts) and records from the system's DNS servers. `localhost` and `*.localhost` are loopback without
 * asking anyone (RFC 6761).
 */
import { Duration, Effect, Layer } from "effect"
import * as dns from "node:dns"
import { Dns, DnsError, type DnsShape, type MxRecord, type ResolvedAddress } from "../services/dns/dns.ts"

/** An answer later than this is no answer: a delivery or a verification should not hang on DNS. */
const QUERY_TIMEOUT = Duration.seconds(5)

const NOT_FOUND_CODES = new Set([dns.NOTFOUND, dns.NODATA, "ENOTFOUND", "ENODATA"])

const errorCode = (error: unknown) => (error as { code?: string } | null)?.code

const loopback: ReadonlyArray<ResolvedAddress> = [{ address: "127.0.0.1", family: 4 }, { address: "::1", family: 6 }]

const isLocalhostName = (host: string) => host === "localhost" || host.endsWith(".localhost")

const failure = (host: string) => (error: unknown) =>
  NOT_FOUND_CODES.has(errorCode(error) ?? "")
    ? new DnsError({ reason: "NotFound", message: `${host} does not resolve`, cause: error })
    : new DnsError({ reason: "Unavailable", message: `${host} could not be resolved (${errorCode(error) ?? String(error)})`, cause: error })

const withDeadline = (host: string) => <A>(effect: Effect.Effect<A, DnsError>) =>
  Effect.timeoutFail(effect, {
    duration: QUERY_TIMEOUT,
    onTimeout: () => new DnsError({ reason: "Unavailable", message: `${host} could not be resolved in time` })
  })

/** Addresses from the system resolver. */
const systemAddresses = (host: string) =>
  Effect.tryPromise({
    try: () => dns.promises.lookup(host, { all: true, verbatim: false }),
    catch: failure(host)
  }).pipe(
    Effect.map((found) => found.map(({ address, family }) => ({ address, family: family === 6 ? 6 : 4 }) as ResolvedAddress)),
    withDeadline(host)
  )

/** Addresses from the configured servers: A and AAAA asked together; one family missing is fine. */
const serverAddresses = (resolver: dns.promises.Resolver) => (host: string) =>
  Effect.tryPromise({
    try: async () => {
      const [v4, v6] = await Promise.allSettled([resolver.resolve4(host), resolver.resolve6(host)])
      const found: Array<ResolvedAddress> = [
        ...(v4.status === "fulfilled" ? v4.value.map((address) => ({ address, family: 4 as const })) : []),
        ...(v6.status === "fulfilled" ? v6.value.map((address) => ({ address, family: 6 as const })) : [])
      ]
      if (found.length > 0) return found
      const errors = [v4, v6].flatMap((result) => (result.status === "rejected" ? [result.reason] : []))
      // Not found only when every question was answered "no such records"; else the servers failed us.
      throw errors.find((error) => !NOT_FOUND_CODES.has(errorCode(error) ?? "")) ?? errors[0] ?? Object.assign(new Error("no addresses"), { code: dns.NODATA })
    },
    catch: failure(host)
  }).pipe(withDeadline(host))

/** A record question to `resolver` (the configured servers, or the system's), with the deadline. */
const ask = <A>(host: string, question: () => Promise<A>) =>
  Effect.tryPromise({ try: question, catch: failure(host) }).pipe(withDeadline(host))

export const make = (options: { readonly servers: ReadonlyArray<string> }): DnsShape => {
  // Without DNS_SERVERS, record questions go to the servers the system is configured with.
  const resolver = new dns.promises.Resolver({ timeout: 2_000, tries: 2 })
  if (options.servers.length > 0) resolver.setServers([...options.servers])
  const lookup = options.servers.length === 0 ? systemAddresses : serverAddresses(resolver)
  const normalize = (name: string) => name.toLowerCase().replace(/\.$/, "")
  return {
    addresses: (host) => {
      const name = normalize(host)
      return isLocalhostName(name) ? Effect.succeed(loopback) : lookup(name)
    },
    txt: (name) =>
      ask(name, () => resolver.resolveTxt(normalize(name))).pipe(
        // A record longer than 255 characters arrives split into several strings: they are one value.
        Effect.map((records) => records.map((strings) => strings.join("")))
      ),
    mx: (name) =>
      ask(name, () => resolver.resolveMx(normalize(name))).pipe(
        Effect.map((records) =>
          records.map((record): MxRecord => ({ priority: record.priority, exchange: normalize(record.exchange) }))
        )
      ),
    ptr: (name) => ask(name, () => resolver.resolvePtr(normalize(name))).pipe(Effect.map((names) => names.map(normalize)))
  }
}

export const layer = (options: { readonly servers: ReadonlyArray<string> }): Layer.Layer<Dns> => Layer.sync(Dns, () => make(options))
