/**
 * The webhook transport over node:http and node:https.
 *
 * The connection goes to the address the caller resolved and checked, never to a second lookup of
 * the host (a rebinding DNS server could answer differently the second time); TLS still verifies the
 * certificate against the URL's host name. One connection per attempt (no keep-alive pool shared
 * between endpoints), no redirects followed, and the whole exchange (connect, TLS, answer) is cut at
 * the time-out.
 */
import { Duration, Effect, Layer } from "effect"
import * as http from "node:http"
import * as https from "node:https"
import type { LookupFunction } from "node:net"
import { type PostRequest, TransportError, WebhookTransport } from "../services/webhooks/attempts.ts"

/** What is read of an answer's body before the connection is dropped: receivers are not asked for more. */
const MAX_RESPONSE_BYTES = 64 * 1024

const describe = (error: unknown): string => {
  const { code, message } = error as { code?: string; message?: string }
  if (code === "ECONNREFUSED") return "connection refused"
  if (code === "ECONNRESET") return "connection reset by the endpoint"
  if (code === "EHOSTUNREACH" || code === "ENETUNREACH") return "endpoint unreachable"
  return code !== undefined && message !== undefined && !message.includes(code) ? `${code}: ${message}` : message ?? String(error)
}

export const post = (request: PostRequest) =>
  Effect.async<{ readonly status: number }, TransportError>((resume) => {
    const { url, addresses } = request.target
    const pinned = addresses[0]!
    const lookup: LookupFunction = (_host, options, callback) => {
      if (options.all === true) (callback as (e: null, a: Array<{ address: string; family: number }>) => void)(null, [pinned])
      else callback(null, pinned.address, pinned.family)
    }
    const timeoutMs = Duration.toMillis(request.timeout)
    const client = url.protocol === "https:" ? https : http
    let settled = false
    const settle = (effect: Effect.Effect<{ readonly status: number }, TransportError>) => {
      if (settled) return
      settled = true
      resume(effect)
    }
    const req = client.request(url, {
      method: "POST",
      headers: { ...request.headers, "content-length": String(Buffer.byteLength(request.body)) },
      agent: false,
      lookup
    }, (response) => {
      // The status is the answer; the body is read (so the endpoint can finish) up to a limit.
      let read = 0
      response.on("data", (chunk: Buffer) => {
        read += chunk.length
        if (read > MAX_RESPONSE_BYTES) response.destroy()
      })
      response.on("end", () => clearTimeout(timer))
      response.on("error", () => clearTimeout(timer))
      settle(Effect.succeed({ status: response.statusCode ?? 0 }))
    })
    const timer = setTimeout(() => {
      req.destroy()
      settle(Effect.fail(new TransportError({ message: `no answer within ${timeoutMs / 1000} s` })))
    }, timeoutMs)
    req.on("error", (error) => {
      clearTimeout(timer)
      settle(Effect.fail(new TransportError({ message: describe(error) })))
    })
    req.on("close", () => {
      if (settled) return
      clearTimeout(timer)
      settle(Effect.fail(new TransportError({ message: "the connection closed without an answer" })))
    })
    req.end(request.body)
    return Effect.sync(() => {
      clearTimeout(timer)
      req.destroy()
    })
  })

export const layer: Layer.Layer<WebhookTransport> = Layer.succeed(WebhookTransport, { post })
