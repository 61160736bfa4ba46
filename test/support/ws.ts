/**
 * A WebSocket client for tests (the `ws` package, as Node 20 has no WebSocket of its own): connects
 * with headers, queues the JSON messages it receives, and tells how the handshake and the close went.
 */
import WebSocket from "ws"

export interface TestSocket {
  /** The handshake's status: 101 when upgraded, else the HTTP answer's status (and its JSON body). */
  readonly status: number
  readonly body: unknown
  readonly send: (message: unknown) => void
  readonly sendRaw: (data: string | Buffer) => void
  /** The next message received other than a heartbeat, parsed; fails after `timeoutMs`. */
  readonly next: (timeoutMs?: number) => Promise<Record<string, any>>
  /** Messages received within `ms`, other than heartbeats. */
  readonly drain: (ms: number) => Promise<Array<Record<string, any>>>
  /** The close code, once the server closed the socket (waits up to `timeoutMs`). */
  readonly closed: (timeoutMs?: number) => Promise<number>
  readonly close: () => void
}

export const openSocket = (url: string, headers: Record<string, string>): Promise<TestSocket> =>
  new Promise((resolve, reject) => {
    const socket = new WebSocket(url.replace(/^http/, "ws"), { headers })
    const received: Array<Record<string, any>> = []
    const waiting: Array<() => void> = []
    let closeCode: number | undefined
    const wake = () => waiting.splice(0).forEach((wakeUp) => wakeUp())
    socket.on("message", (data: Buffer, isBinary) => {
      received.push(isBinary ? { binary: true } : JSON.parse(data.toString("utf8")))
      wake()
    })
    socket.on("close", (code) => {
      closeCode = code
      wake()
    })
    const waitFor = <A>(ready: () => A | undefined, timeoutMs: number, what: string) =>
      new Promise<A>((done, fail) => {
        const check = () => {
          const value = ready()
          if (value === undefined) return false
          clearTimeout(timer)
          done(value)
          return true
        }
        const timer = setTimeout(() => fail(new Error(`No ${what} within ${timeoutMs} ms`)), timeoutMs)
        const loop = () => {
          if (!check()) waiting.push(loop)
        }
        loop()
      })
    const api: Omit<TestSocket, "status" | "body"> = {
      send: (message) => socket.send(JSON.stringify(message)),
      sendRaw: (data) => socket.send(data),
      next: (timeoutMs = 10_000) =>
        waitFor(() => {
          while (received[0]?.type === "heartbeat") received.shift()
          return received.shift()
        }, timeoutMs, "message"),
      drain: async (ms) => {
        await new Promise((done) => setTimeout(done, ms))
        return received.splice(0).filter((message) => message.type !== "heartbeat")
      },
      closed: (timeoutMs = 10_000) => waitFor(() => closeCode, timeoutMs, "close"),
      close: () => socket.close()
    }
    socket.once("open", () => resolve({ status: 101, body: undefined, ...api }))
    socket.once("unexpected-response", (_request, response) => {
      const chunks: Array<Buffer> = []
      response.on("data", (chunk: Buffer) => chunks.push(chunk))
      response.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8")
        let body: unknown = text
        try {
          body = JSON.parse(text)
        } catch {
          // not JSON: kept as text
        }
        socket.terminate()
        resolve({ status: response.statusCode ?? 0, body, ...api })
      })
    })
    socket.once("error", (error) => {
      if (socket.readyState === WebSocket.CONNECTING) reject(error)
    })
  })
