/**
 * A webhook receiver for tests: a real HTTP server on a loopback port that records every request
 * (headers, raw body, arrival time) and answers as the test scripts it: a status per request in
 * turn, or no answer at all.
 */
import * as http from "node:http"
import type { AddressInfo } from "node:net"

export interface Received {
  readonly path: string
  readonly headers: http.IncomingHttpHeaders
  /** The raw body, exactly as it arrived. */
  readonly body: string
  /** Arrival, in milliseconds (performance.now of this process). */
  readonly at: number
}

/** A status to answer with, or "hang": read the request and never answer. */
export type Answer = number | "hang"

export interface Receiver {
  readonly url: string
  readonly port: number
  /** Requests so far, in arrival order; `path` narrows to one endpoint. */
  readonly received: (path?: string) => ReadonlyArray<Received>
  /** Answers for `path`, used in turn; the last repeats. Default 200. */
  readonly script: (path: string, answers: ReadonlyArray<Answer>) => void
  /** Resolve once `count` requests for `path` have arrived. */
  readonly waitFor: (path: string, count: number, timeoutMs?: number) => Promise<ReadonlyArray<Received>>
  readonly close: () => Promise<void>
}

export const startReceiver = async (): Promise<Receiver> => {
  const received: Array<Received> = []
  const scripts = new Map<string, { answers: ReadonlyArray<Answer>; next: number }>()
  const hanging = new Set<http.ServerResponse>()

  const server = http.createServer((request, response) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => {
      const path = request.url ?? "/"
      received.push({ path, headers: request.headers, body: Buffer.concat(chunks).toString("utf8"), at: performance.now() })
      const script = scripts.get(path)
      const answer = script ? script.answers[Math.min(script.next++, script.answers.length - 1)]! : 200
      if (answer === "hang") {
        hanging.add(response)
        response.on("close", () => hanging.delete(response))
        return
      }
      response.statusCode = answer
      response.end(answer >= 200 && answer < 300 ? "ok" : "not ok")
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()))
  const port = (server.address() as AddressInfo).port

  const select = (path?: string) => received.filter((r) => path === undefined || r.path === path)

  return {
    port,
    url: `http://127.0.0.1:${port}`,
    received: select,
    script: (path, answers) => void scripts.set(path, { answers, next: 0 }),
    waitFor: async (path, count, timeoutMs = 20_000) => {
      const deadline = Date.now() + timeoutMs
      while (select(path).length < count) {
        if (Date.now() > deadline) throw new Error(`${path}: ${select(path).length} of ${count} requests arrived in time`)
        await new Promise((resolve) => setTimeout(resolve, 25))
      }
      return select(path)
    },
    close: async () => {
      for (const response of hanging) response.destroy()
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    }
  }
}
