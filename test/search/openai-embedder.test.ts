/**
 * The OpenAI Embedder (layers/openai-embedder.ts) against a local HTTP server standing in for
 * OpenAI's `POST /v1/embeddings`: it records what the official SDK sends, answers vectors derived
 * from each input's text (in shuffled `index` order, as OpenAI may), and can be told to refuse,
 * rate-limit, fail or drop the connection.
 */
import { afterAll, beforeEach, describe, expect, it } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { layer, type OpenAIEmbedderOptions } from "../../layers/openai-embedder.ts"
import { Embedder, normalize } from "../../services/search/embedder.ts"

const KEY = "sk-test-mailroom-0123456789abcdef"

/** The models the fake serves, with their vector lengths; any other name is a 404 like OpenAI's. */
const MODELS: Record<string, number> = {
  "text-embedding-3-small": 1536,
  "text-embedding-3-large": 3072,
  "text-embedding-ada-002": 1536,
  "acme-embed-v1": 384
}

/** A vector that depends only on the text, not of unit length (so normalising is visible). */
const rawVector = (text: string, dimensions: number): Array<number> => {
  let seed = 2166136261
  for (let i = 0; i < text.length; i++) seed = Math.imul(seed ^ text.charCodeAt(i), 16777619) >>> 0
  return Array.from({ length: dimensions }, () => {
    seed = (seed + 0x6d2b79f5) >>> 0
    let t = seed
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return (((t ^ (t >>> 14)) >>> 0) / 4294967296 - 0.5) * 3
  })
}

const expectedVector = (text: string, dimensions: number) => normalize(Float32Array.from(rawVector(text, dimensions)))

const dot = (a: Float32Array, b: Float32Array) => a.reduce((sum, x, i) => sum + x * b[i]!, 0)

type Reply =
  | { readonly kind: "vectors"; readonly dimensions?: number }
  | { readonly kind: "error"; readonly status: number; readonly headers?: Record<string, string>; readonly message: string; readonly code?: string }
  | { readonly kind: "drop" }

interface Sent {
  readonly at: number
  readonly method: string
  readonly path: string
  readonly authorization: string | undefined
  readonly body: { readonly model: string; readonly input: Array<string>; readonly encoding_format?: string; readonly dimensions?: number }
}

const fakeOpenAI = async () => {
  const requests: Array<Sent> = []
  let script: Array<Reply> = []
  let fallback: Reply = { kind: "vectors" }
  let delayMs = 0
  let inFlight = 0
  let peakInFlight = 0
  const server = http.createServer((req, res) => {
    let raw = ""
    req.on("data", (chunk) => (raw += chunk))
    req.on("end", () => {
      const body = JSON.parse(raw) as Sent["body"]
      requests.push({ at: Date.now(), method: req.method ?? "", path: req.url ?? "", authorization: req.headers.authorization, body })
      const reply = script.shift() ?? fallback
      if (reply.kind === "drop") return req.socket.destroy()
      const answer = (status: number, json: unknown, headers: Record<string, string> = {}) => {
        res.writeHead(status, { "content-type": "application/json", "x-request-id": `req_${requests.length}`, ...headers })
        res.end(JSON.stringify(json))
      }
      const error = (status: number, message: string, code: string | null, headers?: Record<string, string>) =>
        answer(status, { error: { message, type: "invalid_request_error", param: null, code } }, headers)
      if (req.method !== "POST" || req.url !== "/v1/embeddings") return error(404, `Unrecognized request URL (${req.method}: ${req.url})`, null)
      if (reply.kind === "error") return error(reply.status, reply.message, reply.code ?? null, reply.headers)
      const native = MODELS[body.model]
      if (native === undefined) return error(404, `The model \`${body.model}\` does not exist or you do not have access to it.`, "model_not_found")
      const dimensions = reply.dimensions ?? body.dimensions ?? native
      const data = body.input.map((text, index) => ({ object: "embedding", index, embedding: rawVector(text, dimensions) }))
      // OpenAI does not promise the order: answer in a scrambled (but repeatable) one.
      data.sort((a, b) => ((a.index * 7919) % 101) - ((b.index * 7919) % 101) || b.index - a.index)
      inFlight++
      peakInFlight = Math.max(peakInFlight, inFlight)
      setTimeout(() => {
        inFlight--
        answer(200, { object: "list", data, model: body.model, usage: { prompt_tokens: 1, total_tokens: 1 } })
      }, delayMs)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    /** Answer `replies` to the next requests, then `then` (vectors unless told) to every later one. */
    reset: (replies: Array<Reply> = [], options: { readonly then?: Reply; readonly delayMs?: number } = {}) => {
      requests.length = 0
      script = [...replies]
      fallback = options.then ?? { kind: "vectors" }
      delayMs = options.delayMs ?? 0
      peakInFlight = 0
    },
    peakInFlight: () => peakInFlight,
    close: () => new Promise<void>((resolve) => server.close(() => resolve()))
  }
}

const openai = await fakeOpenAI()
afterAll(() => openai.close())
beforeEach(() => openai.reset())

const options = (overrides: Partial<OpenAIEmbedderOptions> = {}): OpenAIEmbedderOptions => ({
  apiKey: Redacted.make(KEY),
  model: "text-embedding-3-small",
  baseUrl: `${openai.url}/v1`,
  // Short backoff so that exhausting six retries takes under a second.
  retryBaseDelay: "10 millis",
  ...overrides
})

/** Build the layer and embed `texts`. */
const embedWith = (texts: ReadonlyArray<string>, overrides: Partial<OpenAIEmbedderOptions> = {}) =>
  Effect.gen(function*() {
    const embedder = yield* Embedder
    return { embedder, vectors: yield* embedder.embed(texts) }
  }).pipe(Effect.provide(layer(options(overrides))))

const texts = (n: number, prefix = "email") => Array.from({ length: n }, (_, i) => `${prefix} ${i}: the invoice for order #${i * 37}`)

const expectVectorsOf = (vectors: ReadonlyArray<Float32Array>, inputs: ReadonlyArray<string>, dimensions: number) => {
  expect(vectors).toHaveLength(inputs.length)
  vectors.forEach((vector, i) => {
    expect(vector).toBeInstanceOf(Float32Array)
    expect(vector).toHaveLength(dimensions)
    expect(Math.sqrt(dot(vector, vector))).toBeCloseTo(1, 5)
    // The vector of this very input: another input's would be nearly orthogonal.
    expect(dot(vector, expectedVector(inputs[i]!, dimensions))).toBeCloseTo(1, 5)
  })
}

describe("OpenAI embedder: requests", () => {
  it.live("embeds 250 texts in 3 requests of 96/96/58 and answers their vectors in input order, unit length", () =>
    Effect.gen(function*() {
      const inputs = texts(250)
      const { embedder, vectors } = yield* embedWith(inputs)
      expect(embedder.model).toBe("openai/text-embedding-3-small")
      expect(embedder.dimensions).toBe(1536)
      expect(embedder.maxInputChars).toBe(24_000)
      expectVectorsOf(vectors, inputs, 1536)

      // A known model costs no call at start: the three requests are the batches.
      const sent = [...openai.requests].sort((a, b) => inputs.indexOf(a.body.input[0]!) - inputs.indexOf(b.body.input[0]!))
      expect(sent.map((r) => r.body.input.length)).toEqual([96, 96, 58])
      expect(sent.flatMap((r) => r.body.input)).toEqual(inputs)
      for (const request of sent) {
        expect(`${request.method} ${request.path}`).toBe("POST /v1/embeddings")
        expect(request.authorization).toBe(`Bearer ${KEY}`)
        expect(request.body).toEqual({ model: "text-embedding-3-small", input: expect.any(Array), encoding_format: "float" })
      }
    }))

  it.live("cuts a request at about 200,000 characters", () =>
    Effect.gen(function*() {
      const inputs = texts(10, "x".repeat(23_990))
      const { vectors } = yield* embedWith(inputs)
      expectVectorsOf(vectors, inputs, 1536)
      expect(openai.requests.map((r) => r.body.input.length).sort()).toEqual([2, 8])
    }))

  it.live("sends at most 4 requests at once, and the `dimensions` option as the API's parameter", () =>
    Effect.gen(function*() {
      openai.reset([], { delayMs: 100 })
      const inputs = texts(96 * 10)
      const { embedder, vectors } = yield* embedWith(inputs, { dimensions: 8 })
      expect(embedder.dimensions).toBe(8)
      expectVectorsOf(vectors, inputs, 8)
      expect(openai.requests).toHaveLength(10)
      expect(openai.peakInFlight()).toBe(4)
      for (const request of openai.requests) expect(request.body.dimensions).toBe(8)
    }))

  it.live("makes no request for no texts", () =>
    Effect.gen(function*() {
      const { vectors } = yield* embedWith([])
      expect(vectors).toEqual([])
      expect(openai.requests).toHaveLength(0)
    }))
})

describe("OpenAI embedder: failures and retries", () => {
  const rateLimited: Reply = { kind: "error", status: 429, headers: { "retry-after": "1" }, message: "Rate limit reached for requests", code: "rate_limit_exceeded" }

  it.live("waits out a 429 for its retry-after, twice, then succeeds", () =>
    Effect.gen(function*() {
      openai.reset([rateLimited, rateLimited])
      const inputs = texts(3)
      const { vectors } = yield* embedWith(inputs)
      expectVectorsOf(vectors, inputs, 1536)
      const at = openai.requests.map((r) => r.at)
      expect(at).toHaveLength(3)
      // The backoff alone would have waited 10-20 ms; the header asked for a second.
      expect(at[1]! - at[0]!).toBeGreaterThanOrEqual(990)
      expect(at[2]! - at[1]!).toBeGreaterThanOrEqual(990)
    }))

  it.live("retries a 500 and succeeds", () =>
    Effect.gen(function*() {
      openai.reset([{ kind: "error", status: 500, message: "The server had an error while processing your request." }])
      const inputs = texts(2)
      const { vectors } = yield* embedWith(inputs)
      expectVectorsOf(vectors, inputs, 1536)
      expect(openai.requests).toHaveLength(2)
    }))

  it.live("retries a dropped connection and succeeds", () =>
    Effect.gen(function*() {
      openai.reset([{ kind: "drop" }])
      const inputs = texts(2)
      const { vectors } = yield* embedWith(inputs)
      expectVectorsOf(vectors, inputs, 1536)
      expect(openai.requests).toHaveLength(2)
    }))

  it.live("fails at once on a refused key (401), saying so without the key", () =>
    Effect.gen(function*() {
      // OpenAI quotes (part of) the key in its answer: a fake that quotes all of it.
      openai.reset([], { then: { kind: "error", status: 401, message: `Incorrect API key provided: ${KEY}.`, code: "invalid_api_key" } })
      const error = yield* embedWith(texts(2)).pipe(Effect.flip)
      expect(error._tag).toBe("EmbedderError")
      expect(error.message).toContain("401")
      expect(error.message).toContain("API key")
      expect(error.message).not.toContain(KEY)
      expect(JSON.stringify({ message: error.message, cause: error.cause })).not.toContain(KEY)
      expect(openai.requests).toHaveLength(1)
    }))

  it.live("fails at once on a bad request (400), with OpenAI's reason", () =>
    Effect.gen(function*() {
      openai.reset([], { then: { kind: "error", status: 400, message: "This model's maximum context length is 8192 tokens." } })
      const error = yield* embedWith(texts(2)).pipe(Effect.flip)
      expect(error.message).toBe("OpenAI rejected the request (400): This model's maximum context length is 8192 tokens.")
      expect(openai.requests).toHaveLength(1)
    }))

  it.live("fails at once when the account is out of quota, though that is a 429", () =>
    Effect.gen(function*() {
      openai.reset([], { then: { kind: "error", status: 429, message: "You exceeded your current quota.", code: "insufficient_quota" } })
      const error = yield* embedWith(texts(2)).pipe(Effect.flip)
      expect(error.message).toContain("out of quota")
      expect(openai.requests).toHaveLength(1)
    }))

  it.live("gives up on an always-503 after 6 retries (7 requests)", () =>
    Effect.gen(function*() {
      openai.reset([], { then: { kind: "error", status: 503, message: "The engine is currently overloaded." } })
      const error = yield* embedWith(texts(2)).pipe(Effect.flip)
      expect(error._tag).toBe("EmbedderError")
      expect(error.message).toContain("503")
      expect(error.message).toContain("6 retries")
      expect(openai.requests).toHaveLength(7)
      // Exponential backoff from 10 ms: 10 + 20 + … + 320 = 630 ms, less at most 20 % of jitter
      // (six waits of a fixed 10 ms would add up to 60).
      expect(openai.requests[6]!.at - openai.requests[0]!.at).toBeGreaterThanOrEqual(500)
    }))

  it.live("fails when a vector is not the model's length", () =>
    Effect.gen(function*() {
      openai.reset([{ kind: "vectors", dimensions: 1024 }])
      const error = yield* embedWith(texts(2)).pipe(Effect.flip)
      expect(error.message).toContain("1024")
      expect(error.message).toContain("1536")
    }))
})

describe("OpenAI embedder: models", () => {
  it.live("learns the vector length of a model it does not know from one call at start", () =>
    Effect.gen(function*() {
      const inputs = texts(3)
      const { embedder, vectors } = yield* embedWith(inputs, { model: "acme-embed-v1" })
      expect(embedder.model).toBe("openai/acme-embed-v1")
      expect(embedder.dimensions).toBe(384)
      expectVectorsOf(vectors, inputs, 384)
      expect(openai.requests.map((r) => r.body.input.length)).toEqual([1, 3])
      expect(openai.requests[0]!.body).toEqual({ model: "acme-embed-v1", input: [expect.any(String)], encoding_format: "float" })
    }))

  it.live("fails to start, naming the model, when that call fails", () =>
    Effect.gen(function*() {
      const error = yield* embedWith(texts(1), { model: "no-such-model" }).pipe(Effect.flip)
      expect(error._tag).toBe("EmbedderError")
      expect(error.message).toContain(`"no-such-model"`)
      expect(error.message).toContain("404")
      expect(openai.requests).toHaveLength(1)
    }))

  it.live("refuses dimensions a known model cannot give, without a call", () =>
    Effect.gen(function*() {
      const ada = yield* embedWith(texts(1), { model: "text-embedding-ada-002", dimensions: 512 }).pipe(Effect.flip)
      expect(ada.message).toBe(`OpenAI model "text-embedding-ada-002" gives 1536-dimension vectors, not 512`)
      const small = yield* embedWith(texts(1), { dimensions: 2048 }).pipe(Effect.flip)
      expect(small.message).toBe(`OpenAI model "text-embedding-3-small" gives 1536-dimension vectors or shorter, not 2048`)
      expect(openai.requests).toHaveLength(0)
    }))
})
