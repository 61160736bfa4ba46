/** IMAP as bytes on the wire, for suites that check what a library would hide: a bare session, in the clear or over TLS. */
import net from "node:net"
import tls from "node:tls"
import { until } from "./wait.ts"

/**
 * A bare IMAP connection over `socket`: lines in, answers out. `waitFor` hands over what the server
 * said up to the end of what `pattern` matches; `send` writes and waits so for `answer`.
 */
const imapSession = (socket: net.Socket) => {
  let buffer = ""
  socket.setEncoding("latin1")
  socket.on("data", (chunk: string) => {
    buffer += chunk
  })
  const waitFor = (pattern: RegExp) =>
    until(`${pattern} from the server`, async () => {
      const match = pattern.exec(buffer)
      if (!match) return undefined
      const text = buffer.slice(0, match.index + match[0].length)
      buffer = buffer.slice(match.index + match[0].length)
      return text
    }, 10_000, 10, 10)
  return {
    waitFor,
    send: async (text: string, answer: RegExp) => {
      socket.write(text)
      return waitFor(answer)
    },
    write: (text: string) => void socket.write(text),
    close: () => socket.destroy()
  }
}

/** A bare connection on `port` (IMAP_PORT), connected; its greeting is still to be read. */
export const bareImap = async (port: number) => {
  const socket = net.connect(port, "127.0.0.1")
  await new Promise((resolve) => socket.once("connect", resolve))
  return imapSession(socket)
}

/**
 * A bare session over TLS on `port` (IMAPS_PORT), past its greeting; `send` answers what came up to
 * its tag's answer, `answer` what came up to the end of what a pattern matches (after a `write`).
 */
export const bareImapOverTls = async (port: number) => {
  const over = imapSession(tls.connect({ port, host: "127.0.0.1", rejectUnauthorized: false }))
  await over.waitFor(/\r\n/)
  return {
    send: (text: string, tag: string) => over.send(text, new RegExp(`(^|\\r\\n)${tag} (OK|NO|BAD)[^\\r]*\\r\\n`)),
    answer: over.waitFor,
    write: over.write,
    close: over.close
  }
}
