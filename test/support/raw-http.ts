/**
 * Requests the contract does not allow, on purpose, to see them refused: a body in a media type other
 * than JSON, or bytes with no type at all (`rawRequest`), or bytes no HTTP client would send
 * (`rawExchange`). Everything else a suite sends goes through the typed client (typed-client.ts); this
 * is the one way around it, so each such request is visible as one.
 */
import * as net from "node:net"

export interface RawReply {
  readonly status: number
  readonly headers: Headers
  readonly text: string
  /** The body read as JSON; undefined when it is not JSON. */
  readonly json: unknown
}

export const rawRequest = async (
  url: string,
  init: { readonly method: string; readonly headers?: Record<string, string>; readonly body?: string | Uint8Array | ReadableStream<Uint8Array>; readonly duplex?: "half" }
): Promise<RawReply> => {
  const response = await fetch(url, { ...init, redirect: "manual" })
  const text = await response.text()
  let json: unknown = undefined
  try {
    json = text.length > 0 ? JSON.parse(text) : undefined
  } catch {
    json = undefined
  }
  return { status: response.status, headers: response.headers, text, json }
}

/**
 * `bytes` written as they are on a connection of its own to the server on `port`: everything it answers
 * until it closes, as text (the request should say `Connection: close`).
 */
export const rawExchange = (port: number, bytes: string): Promise<string> =>
  new Promise((resolve, reject) => {
    const socket = net.connect(port, "127.0.0.1", () => socket.write(bytes))
    let received = ""
    socket.setEncoding("utf8")
    socket.on("data", (chunk: string) => (received += chunk))
    socket.once("end", () => resolve(received))
    socket.once("error", reject)
  })
