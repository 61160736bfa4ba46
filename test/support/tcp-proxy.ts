/**
 * A TCP proxy a test can cut: stands in front of PostgreSQL so a test can make the database
 * unreachable (and bring it back) without touching the machine's shared server. Two ways: `cut`
 * refuses (every connection reset, new ones refused: a stopped server), `freeze` is silent (bytes
 * neither way, connections held open, new ones accepted and left unanswered: a network that drops
 * packets, as after a failover moved the server's address).
 */
import * as net from "node:net"

export interface TcpProxy {
  readonly port: number
  /** Drop every connection and refuse new ones. */
  readonly cut: () => Promise<void>
  /** Accept connections again (same port). */
  readonly restore: () => Promise<void>
  /**
   * Carry no byte either way, on open connections and new ones, which stay open. With `only: "open"`,
   * new connections still work: the old ones went to an address that is gone, the new ones reach the
   * server at its new one.
   */
  readonly freeze: (only?: "open") => void
  /** Carry bytes again: what was held back arrives, as TCP retransmits it once a network heals. */
  readonly thaw: () => void
  /** Bytes carried from the server to the clients so far. */
  readonly carried: () => number
  readonly close: () => Promise<void>
}

interface Pair {
  readonly client: net.Socket
  readonly upstream: net.Socket
}

export const startTcpProxy = async (target: { host: string; port: number }, port = 0): Promise<TcpProxy> => {
  const pairs = new Set<Pair>()
  let server: net.Server | undefined
  let boundPort = port
  let frozen = false
  let carried = 0

  const flow = ({ client, upstream }: Pair) => {
    client.pipe(upstream)
    upstream.pipe(client)
  }
  const hold = ({ client, upstream }: Pair) => {
    client.unpipe(upstream)
    upstream.unpipe(client)
    client.pause()
    upstream.pause()
  }

  const listen = () =>
    new Promise<void>((resolve, reject) => {
      const s = net.createServer((client) => {
        const pair = { client, upstream: net.connect(target.port, target.host) }
        pair.upstream.on("data", (chunk: Buffer) => (carried += chunk.length))
        pairs.add(pair)
        const drop = () => {
          client.destroy()
          pair.upstream.destroy()
          pairs.delete(pair)
        }
        client.on("error", drop).on("close", drop)
        pair.upstream.on("error", drop).on("close", drop)
        if (frozen) hold(pair)
        else flow(pair)
      })
      s.once("error", reject)
      s.listen(boundPort, "127.0.0.1", () => {
        boundPort = (s.address() as net.AddressInfo).port
        server = s
        resolve()
      })
    })

  const stop = () =>
    new Promise<void>((resolve) => {
      for (const { client, upstream } of pairs) {
        client.destroy()
        upstream.destroy()
      }
      pairs.clear()
      if (!server) return resolve()
      server.close(() => resolve())
      server = undefined
    })

  await listen()
  return {
    get port() {
      return boundPort
    },
    cut: stop,
    restore: listen,
    freeze: (only) => {
      frozen = only === undefined
      for (const pair of pairs) hold(pair)
    },
    thaw: () => {
      frozen = false
      for (const pair of pairs) flow(pair)
    },
    carried: () => carried,
    close: stop
  }
}
