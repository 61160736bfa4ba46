/**
 * A Dns layer answering from records a test sets, for in-process suites: what verification reads
 * (TXT, MX) and where webhook hosts resolve, without a DNS server. A name with no records of a kind
 * is NotFound, as NXDOMAIN or NODATA would be; a name marked down is Unavailable (a timeout, SERVFAIL).
 * The real resolver over a real DNS server is test/support/dns-server.ts's, for black-box suites.
 */
import { Effect, Layer } from "effect"
import { Dns, DnsError, type MxRecord, type ResolvedAddress } from "../../services/dns/dns.ts"

export interface FakeDnsRecords {
  readonly txt: Map<string, ReadonlyArray<string>>
  readonly mx: Map<string, ReadonlyArray<MxRecord>>
  readonly addresses: Map<string, ReadonlyArray<ResolvedAddress>>
  readonly ptr: Map<string, ReadonlyArray<string>>
  /** Names whose every question goes unanswered. */
  readonly down: Set<string>
}

export const makeFakeDns = () => {
  const records: FakeDnsRecords = { txt: new Map(), mx: new Map(), addresses: new Map(), ptr: new Map(), down: new Set() }
  const answer = <A>(kind: string, table: Map<string, ReadonlyArray<A>>) => (name: string) =>
    Effect.suspend(() => {
      const key = name.toLowerCase().replace(/\.$/, "")
      if (records.down.has(key)) {
        return Effect.fail(new DnsError({ reason: "Unavailable", message: `${name} could not be resolved (SERVFAIL)` }))
      }
      const found = table.get(key)
      return found && found.length > 0
        ? Effect.succeed(found)
        : Effect.fail(new DnsError({ reason: "NotFound", message: `${name} has no ${kind} records` }))
    })
  const layer = Layer.succeed(Dns, {
    txt: answer("TXT", records.txt),
    mx: answer("MX", records.mx),
    addresses: answer("address", records.addresses),
    ptr: answer("PTR", records.ptr)
  })
  return { records, layer }
}
