/**
 * A TCP proxy a test can cut: stands in front of PostgreSQL so a test can make the database
 * unreachable (and bring it back) without touching the machine's shared server.
 */
import * as net from "node:net"

export interface TcpProxy {
  readonly port: number
  /** Drop every connection and refuse new ones. */
  readonly cut: () => Promise<void>
  /** Accept connections again (same port). */
  readonly restore: () => Promise<void>
  readonly close: () => Promise<void>
}

export const startTcpProxy = async (target: { host: string; port: number }, port = 0): Promise<TcpProxy> => {
  const sockets = new Set<net.Socket>()
  let server: net.Server | undefined
  let boundPort = port

  const listen = () =>
    new Promise<void>((resolve, reject) => {
      const s = net.createServer((client) => {
        const upstream = net.connect(target.port, target.host)
        sockets.add(client)
        sockets.add(upstream)
        const drop = () => {
          client.destroy()
          upstream.destroy()
          sockets.delete(client)
          sockets.delete(upstream)
        }
        client.on("error", drop).on("close", drop)
        upstream.on("error", drop).on("close", drop)
        client.pipe(upstream)
        upstream.pipe(client)
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
      for (const socket of sockets) socket.destroy()
      sockets.clear()
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
    close: stop
  }
}
