/** IMAP as bytes on the wire, for suites that check what a library would hide: a bare session over TLS. */
import tls from "node:tls"
import { until } from "./wait.ts"

/** A bare session over TLS on `port` (IMAPS_PORT), past its greeting; `send` answers what came up to its tag's answer. */
export const bareImapOverTls = async (port: number) => {
  const socket = tls.connect({ port, host: "127.0.0.1", rejectUnauthorized: false })
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
  await waitFor(/\r\n/)
  return {
    send: (text: string, tag: string) => {
      socket.write(text)
      return waitFor(new RegExp(`(^|\\r\\n)${tag} (OK|NO|BAD)[^\\r]*\\r\\n`))
    },
    close: () => socket.destroy()
  }
}
