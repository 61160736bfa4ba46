/**
 * A real DNS server for tests, on a loopback port, over UDP and TCP (RFC 1035 framing, with the
 * two-byte length prefix on TCP). It answers authoritatively from a table the test edits while it
 * runs; unknown names get NXDOMAIN. Point Mailroom at it with `DNS_SERVERS=127.0.0.1:<port>`.
 */
import * as dgram from "node:dgram"
import * as net from "node:net"
import dnsPacket from "dns-packet"

export interface Records {
  readonly A?: ReadonlyArray<string>
  readonly AAAA?: ReadonlyArray<string>
  /** Each record is a list of character-strings (one TXT record may be split into several). */
  readonly TXT?: ReadonlyArray<ReadonlyArray<string>>
  readonly MX?: ReadonlyArray<{ readonly preference: number; readonly exchange: string }>
  /** Answer over UDP only "truncated" (TC bit, no records), so resolvers must ask again over TCP. */
  readonly tcpOnly?: boolean
}

export interface DnsServer {
  readonly port: number
  /** `host:port`, as DNS_SERVERS takes it. */
  readonly address: string
  readonly set: (name: string, records: Records) => void
  readonly remove: (name: string) => void
  /** Questions asked so far, as `<type> <name> <udp|tcp>`. */
  readonly questions: () => ReadonlyArray<string>
  readonly close: () => Promise<void>
}

const NXDOMAIN = 3
const TTL = 1

const normalize = (name: string) => name.toLowerCase().replace(/\.$/, "")

export const startDnsServer = async (): Promise<DnsServer> => {
  const table = new Map<string, Records>()
  const asked: Array<string> = []

  const answer = (query: dnsPacket.DecodedPacket, transport: "udp" | "tcp"): Buffer => {
    const question = query.questions?.[0]
    const name = question ? normalize(question.name) : ""
    if (question) asked.push(`${question.type} ${name} ${transport}`)
    const records = table.get(name)
    if (records?.tcpOnly === true && transport === "udp") {
      return dnsPacket.encode({
        type: "response",
        id: query.id ?? 0,
        flags: dnsPacket.AUTHORITATIVE_ANSWER | dnsPacket.TRUNCATED_RESPONSE,
        questions: query.questions ?? []
      })
    }
    const answers: Array<dnsPacket.Answer> = []
    if (question && records) {
      const base = { name: question.name, ttl: TTL, class: "IN" as const }
      if (question.type === "A") for (const data of records.A ?? []) answers.push({ ...base, type: "A", data })
      if (question.type === "AAAA") for (const data of records.AAAA ?? []) answers.push({ ...base, type: "AAAA", data })
      if (question.type === "TXT") for (const data of records.TXT ?? []) answers.push({ ...base, type: "TXT", data: data.map((s) => Buffer.from(s)) })
      if (question.type === "MX") for (const data of records.MX ?? []) answers.push({ ...base, type: "MX", data: { ...data } })
    }
    return dnsPacket.encode({
      type: "response",
      id: query.id ?? 0,
      flags: dnsPacket.AUTHORITATIVE_ANSWER | (records === undefined ? NXDOMAIN : 0),
      questions: query.questions ?? [],
      answers
    })
  }

  const onQuery = (udp: dgram.Socket) => (message: Buffer, remote: dgram.RemoteInfo) => {
    try {
      udp.send(answer(dnsPacket.decode(message), "udp"), remote.port, remote.address)
    } catch {
      // Not a DNS query: a real server would drop it too.
    }
  }

  const sockets = new Set<net.Socket>()
  const tcp = net.createServer((socket) => {
    sockets.add(socket)
    socket.on("close", () => sockets.delete(socket))
    let buffer = Buffer.alloc(0)
    socket.on("data", (chunk) => {
      buffer = Buffer.concat([buffer, chunk])
      while (buffer.length >= 2 && buffer.length >= 2 + buffer.readUInt16BE(0)) {
        const length = buffer.readUInt16BE(0)
        const query = dnsPacket.decode(buffer.subarray(2, 2 + length))
        buffer = buffer.subarray(2 + length)
        const response = answer(query, "tcp")
        const framed = Buffer.alloc(2 + response.length)
        framed.writeUInt16BE(response.length, 0)
        response.copy(framed, 2)
        socket.write(framed)
      }
    })
    socket.on("error", () => socket.destroy())
  })

  /**
   * UDP and TCP on one port number: a free UDP port may be taken for TCP by another suite's socket,
   * so a pair that cannot be had is given up and another port tried.
   */
  const listen = async (): Promise<{ udp: dgram.Socket; port: number }> => {
    for (let attempt = 1; ; attempt++) {
      const udp = dgram.createSocket("udp4")
      udp.on("message", onQuery(udp))
      await new Promise<void>((resolve, reject) => {
        udp.once("error", reject)
        udp.bind(0, "127.0.0.1", () => resolve())
      })
      const port = udp.address().port
      try {
        await new Promise<void>((resolve, reject) => {
          tcp.once("error", reject)
          tcp.listen(port, "127.0.0.1", () => {
            tcp.off("error", reject)
            resolve()
          })
        })
        return { udp, port }
      } catch (error) {
        await new Promise<void>((resolve) => udp.close(() => resolve()))
        if ((error as NodeJS.ErrnoException).code !== "EADDRINUSE" || attempt >= 20) throw error
      }
    }
  }
  const { udp, port } = await listen()

  return {
    port,
    address: `127.0.0.1:${port}`,
    set: (name, records) => void table.set(normalize(name), records),
    remove: (name) => void table.delete(normalize(name)),
    questions: () => [...asked],
    close: async () => {
      for (const socket of sockets) socket.destroy()
      await Promise.all([
        new Promise<void>((resolve) => tcp.close(() => resolve())),
        new Promise<void>((resolve) => udp.close(() => resolve()))
      ])
    }
  }
}
