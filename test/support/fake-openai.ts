/**
 * A stand-in for OpenAI's embeddings API (`POST /v1/embeddings`) for suites that send mail in bulk:
 * Mailroom embeds every email it receives, and the offline model spends ~0.1 s of CPU per email,
 * which is not what those suites measure. Its vectors are hashed bags of words (texts that share
 * words are near), in OpenAI's answer format. Point a server at it with `fakeOpenAiEnv(fake)`.
 */
import * as http from "node:http"
import type { AddressInfo } from "node:net"

const DIMENSIONS = 64

export interface FakeOpenAi {
  readonly url: string
  /** Texts embedded so far. */
  readonly embedded: () => number
  readonly close: () => Promise<void>
}

/** A bag of hashed words: texts that share words get near vectors (never all zeros). */
export const hashedWords = (text: string, dimensions: number): Array<number> => {
  const vector: Array<number> = new Array<number>(dimensions).fill(0)
  for (const word of text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []) {
    let hash = 7
    for (const char of word) hash = (Math.imul(hash, 31) + char.charCodeAt(0)) >>> 0
    vector[hash % dimensions]! += 1
  }
  if (!vector.some((x) => x > 0)) vector[0] = 1
  return vector
}

/**
 * `millisecondsPerInput`: how long each answer waits for every text it embeds, so that indexing takes
 * time as a model's does (a suite that stops a server in the middle of it) without a model's CPU.
 */
export const startFakeOpenAi = async (options: { readonly millisecondsPerInput?: number } = {}): Promise<FakeOpenAi> => {
  let embedded = 0
  const server = http.createServer((request, response) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => {
      const send = (status: number, body: unknown) => {
        response.writeHead(status, { "content-type": "application/json" })
        response.end(JSON.stringify(body))
      }
      if (request.method !== "POST" || request.url !== "/v1/embeddings") {
        return send(404, { error: { message: `No route ${request.method} ${request.url}`, type: "invalid_request_error" } })
      }
      let body: { model?: unknown; input?: unknown }
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8"))
      } catch {
        return send(400, { error: { message: "Invalid JSON", type: "invalid_request_error" } })
      }
      const inputs = Array.isArray(body.input) ? body.input : [body.input]
      if (typeof body.model !== "string" || !inputs.every((input) => typeof input === "string" && input.length > 0)) {
        return send(400, { error: { message: "model and non-empty input strings are required", type: "invalid_request_error" } })
      }
      const answer = () => {
        embedded += inputs.length
        send(200, {
          object: "list",
          model: body.model,
          data: inputs.map((input, index) => ({ object: "embedding", index, embedding: hashedWords(input as string, DIMENSIONS) })),
          usage: { prompt_tokens: 0, total_tokens: 0 }
        })
      }
      const wait = (options.millisecondsPerInput ?? 0) * inputs.length
      if (wait > 0) setTimeout(answer, wait)
      else answer()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}/v1`,
    embedded: () => embedded,
    close: () => new Promise((resolve) => server.close(() => resolve()))
  }
}

/** Server settings that make Mailroom embed through `fake` (a model the adapter asks the length of). */
export const fakeOpenAiEnv = (fake: FakeOpenAi): Record<string, string> => ({
  OPENAI_API_KEY: "sk-test-fake",
  OPENAI_BASE_URL: fake.url,
  EMBEDDING_MODEL: "hashed-words"
})
