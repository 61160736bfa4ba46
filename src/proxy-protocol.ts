/**
 * The PROXY protocol (version 1, HAProxy's `send-proxy`) on the mail listeners (`PROXY_PROTOCOL`): a TCP
 * load balancer opens each connection with one line naming the client it carries,
 * `PROXY TCP4 <client> <balancer> <client port> <balancer port>\r\n` (or `PROXY UNKNOWN …`), before the
 * protocol's own first byte. This reads it for SMTP, submission (src/smtp/listen.ts `readingProxyHeaders`)
 * and IMAP. Only the listed peers are believed, and they must send it.
 */
import { isIP, type Socket } from "node:net"
import { canonicalAddress } from "./addresses.ts"

/** The longest line version 1 allows. */
const MAX_HEADER_BYTES = 107
/** How long a balancer's connection may take to send its whole PROXY header. */
export const PROXY_HEADER_TIMEOUT_MS = 10_000

/** Whether a connection from `peer` must begin with a PROXY header (`peers`: addresses, or `*`). */
export const expectsProxyHeader = (peers: ReadonlyArray<string>, peer: string | undefined) => {
  if (peers.includes("*")) return true
  const address = peer === undefined ? undefined : canonicalAddress(peer)
  return address !== undefined && peers.some((entry) => canonicalAddress(entry) === address)
}

/**
 * The client a PROXY header line names: its address, or undefined for `PROXY UNKNOWN` (a balancer's
 * health check: the peer stands for itself); an Error for anything that is no such line.
 */
export const parseProxyHeader = (line: string): string | undefined | Error => {
  const [word, family, source, destination, sourcePort, destinationPort, ...rest] = line.split(" ")
  if (word !== "PROXY") return new Error("Invalid PROXY header")
  if (family === "UNKNOWN") return undefined
  const ports = [sourcePort, destinationPort].every((port) => /^\d{1,5}$/.test(port ?? "") && Number(port) <= 65535)
  const version = family === "TCP4" ? 4 : family === "TCP6" ? 6 : 0
  const client = version !== 0 && isIP(source ?? "") === version && isIP(destination ?? "") === version && ports && rest.length === 0
    ? canonicalAddress(source!)
    : undefined
  return client ?? new Error("Invalid PROXY header")
}

/**
 * Read the PROXY header `socket` begins with, leaving what follows it to be read; resolves with the
 * client's address (undefined for UNKNOWN), rejects on anything else, on the socket's end, or after
 * `timeoutMs`. The socket is then the caller's to close.
 */
export const readProxyHeader = (socket: Socket, timeoutMs: number) =>
  new Promise<string | undefined>((resolve, reject) => {
    let received = Buffer.alloc(0)
    const finish = (outcome: () => void) => {
      clearTimeout(timer)
      socket.off("readable", onReadable)
      socket.off("end", onEnd)
      socket.off("close", onEnd)
      socket.off("error", onError)
      outcome()
    }
    const onEnd = () => finish(() => reject(new Error("Closed before a PROXY header")))
    const onError = (error: Error) => finish(() => reject(error))
    const onReadable = () => {
      for (let chunk: Buffer | null; (chunk = socket.read() as Buffer | null) !== null;) {
        received = Buffer.concat([received, chunk])
        const end = received.indexOf("\r\n")
        if (end >= 0 && end + 2 <= MAX_HEADER_BYTES) {
          const rest = received.subarray(end + 2)
          if (rest.length > 0) socket.unshift(rest)
          const client = parseProxyHeader(received.subarray(0, end).toString("latin1"))
          return finish(() => (client instanceof Error ? reject(client) : resolve(client)))
        }
        if (received.length >= MAX_HEADER_BYTES) return finish(() => reject(new Error("Invalid PROXY header")))
      }
    }
    const timer = setTimeout(() => finish(() => reject(new Error("No PROXY header in time"))), timeoutMs)
    socket.on("readable", onReadable)
    socket.once("end", onEnd)
    socket.once("close", onEnd)
    socket.once("error", onError)
  })
