/**
 * The Embedder port on OpenAI's embeddings API (`OPENAI_API_KEY`, `EMBEDDING_MODEL`).
 *
 * - Texts go out in requests of at most 96 inputs and about 200,000 characters (OpenAI caps a
 *   request at 300,000 tokens, and a character is rarely more than a token and a half), four
 *   requests of one call at a time.
 * - The SDK's own retries are off so that ours are one visible Schedule: a 429, a 5xx, a dropped
 *   connection or a time-out is tried again with exponential backoff and jitter, waiting at least
 *   what the answer's `retry-after` asks (a rate limit is waited out, not hammered). A refused key,
 *   a bad request or an unknown model fails at once: trying again cannot fix it. The key never
 *   appears in an error.
 * - Vectors are asked for as floats, put back in input order by their `index` (OpenAI does not
 *   promise the order), checked for length and scaled to unit length as the port promises.
 * - The vector length of the three OpenAI models we know is written down; any other model (a newer
 *   one, or a compatible server behind `baseUrl`) is asked once, when the layer is built.
 */
import { Data, Duration, Effect, Layer, Redacted, Schedule } from "effect"
// Loaded by the layer, only when OPENAI_API_KEY chooses it: most processes never need the SDK.
import type OpenAI from "openai"
import { Embedder, EmbedderError, normalize, readsAnyText } from "../services/search/embedder.ts"

export interface OpenAIEmbedderOptions {
  readonly apiKey: Redacted.Redacted<string>
  /** OpenAI's name of the model, e.g. `text-embedding-3-small`. */
  readonly model: string
  /** Another API address (a proxy, a compatible server, a test double); default OpenAI's own. */
  readonly baseUrl?: string | undefined
  /**
   * Shorter vectors from a model that can give them (the text-embedding-3 family), sent as the
   * API's `dimensions` parameter; default the model's full length.
   */
  readonly dimensions?: number | undefined
  /**
   * The first retry's delay, doubled at each later one; default 500 ms. Tests shorten it so that
   * exhausting the retries takes a second, not half a minute.
   */
  readonly retryBaseDelay?: Duration.DurationInput | undefined
}

const DEFAULT_BASE_URL = "https://api.openai.com/v1"
const MAX_BATCH_INPUTS = 96
const MAX_BATCH_CHARS = 200_000
const PARALLEL_REQUESTS = 4
const REQUEST_TIMEOUT_MS = 30_000
const MAX_RETRIES = 6
/** The longest a `retry-after` is obeyed: a longer ask is an outage, which callers should hear of in minutes. */
const MAX_RETRY_AFTER = Duration.seconds(30)
/** OpenAI takes 8,192 tokens per input; this many characters of English stay under it. */
const MAX_INPUT_CHARS = 24_000
const PROBE_TEXT = "How long are this model's vectors?"

/** Vector lengths of the models we know, so that starting costs no call; `shortens`: takes `dimensions`. */
const KNOWN_MODELS = new Map<string, { readonly dimensions: number; readonly shortens: boolean }>([
  ["text-embedding-3-small", { dimensions: 1536, shortens: true }],
  ["text-embedding-3-large", { dimensions: 3072, shortens: true }],
  ["text-embedding-ada-002", { dimensions: 1536, shortens: false }]
])

/** One request's failure, before the retries have had their say. */
class RequestFailed extends Data.TaggedError("RequestFailed")<{
  readonly message: string
  readonly retryable: boolean
  /** How long the answer asked us to wait before trying again. */
  readonly retryAfter: Duration.Duration | undefined
  readonly cause?: unknown
}> {}

/** `retry-after-ms` (OpenAI's), else `retry-after` in seconds or as an HTTP date; capped. */
const retryAfterOf = (headers: Headers | undefined): Duration.Duration | undefined => {
  const millis = Number.parseFloat(headers?.get("retry-after-ms") ?? "")
  const header = headers?.get("retry-after") ?? ""
  const seconds = Number.parseFloat(header)
  const wait = Number.isFinite(millis)
    ? millis
    : Number.isFinite(seconds)
    ? seconds * 1000
    : Number.isFinite(Date.parse(header))
    ? Date.parse(header) - Date.now()
    : undefined
  return wait === undefined || wait <= 0 ? undefined : Duration.min(Duration.millis(wait), MAX_RETRY_AFTER)
}

/** The innermost code or message of a connection failure (fetch hides `ECONNREFUSED` two causes deep). */
const connectionDetail = (error: unknown): string => {
  let detail = "no detail"
  for (let current = error, depth = 0; current instanceof Error && depth < 4; current = current.cause, depth++) {
    const code = (current as { code?: unknown }).code
    detail = typeof code === "string" ? code : current.message
  }
  return detail
}

/** What OpenAI said in the body of a refusal, if anything. */
const openAIMessage = (error: InstanceType<typeof OpenAI.APIError>): string | undefined => {
  const body = error.error
  return typeof body === "object" && body !== null && "message" in body && typeof body.message === "string" ? body.message : undefined
}

export const layer = (options: OpenAIEmbedderOptions): Layer.Layer<Embedder, EmbedderError> =>
  Layer.effect(
    Embedder,
    Effect.gen(function*() {
      const apiKey = Redacted.value(options.apiKey)
      const model = options.model
      // Explicit values for everything the SDK would otherwise read from the environment
      // (OPENAI_BASE_URL, OPENAI_ORG_ID, …): our configuration is read in one place only.
      const { default: OpenAIClient } = yield* Effect.promise(() => import("openai"))
      const client = new OpenAIClient({
        apiKey,
        baseURL: options.baseUrl ?? DEFAULT_BASE_URL,
        organization: null,
        project: null,
        webhookSecret: null,
        maxRetries: 0,
        timeout: REQUEST_TIMEOUT_MS
      })
      // A server that echoes the key (OpenAI echoes part of it) must not put it in our messages.
      const scrub = (text: string) => (apiKey.length > 0 ? text.replaceAll(apiKey, "[redacted]") : text)

      const classify = (error: unknown): RequestFailed => {
        if (error instanceof OpenAIClient.APIConnectionTimeoutError) {
          return new RequestFailed({ message: `OpenAI did not answer within ${REQUEST_TIMEOUT_MS / 1000} s`, retryable: true, retryAfter: undefined, cause: error })
        }
        if (error instanceof OpenAIClient.APIConnectionError) {
          return new RequestFailed({ message: `Could not reach OpenAI (${scrub(connectionDetail(error))})`, retryable: true, retryAfter: undefined, cause: error })
        }
        if (error instanceof OpenAIClient.APIError && error.status !== undefined) {
          const status = error.status
          const said = openAIMessage(error)
          const detail = said === undefined ? "" : `: ${scrub(said)}`
          // The SDK's error holds the answer's body, which may quote the key: keep only its ids.
          const cause = { status, code: error.code, type: error.type, requestId: error.requestID }
          const retryAfter = retryAfterOf(error.headers)
          const fail = (message: string, retryable: boolean) => new RequestFailed({ message, retryable, retryAfter, cause })
          // An exhausted quota is also a 429, but no amount of waiting refills it.
          if (status === 429 && error.code === "insufficient_quota") return fail(`OpenAI says the account is out of quota (429)${detail}`, false)
          if (status === 429) return fail(`OpenAI is rate limiting us (429)${detail}`, true)
          if (status === 408) return fail("OpenAI timed out the request (408)", true)
          if (status >= 500) return fail(`OpenAI failed (${status})${detail}`, true)
          if (status === 401) return fail("OpenAI refused the API key (401)", false)
          if (status === 403) return fail(`OpenAI denied access (403)${detail}`, false)
          if (status === 404) return fail(`OpenAI does not know model "${model}", or the API address is wrong (404)${detail}`, false)
          return fail(`OpenAI rejected the request (${status})${detail}`, false)
        }
        return new RequestFailed({
          message: `OpenAI call failed: ${scrub(error instanceof Error ? error.message : String(error))}`,
          retryable: false,
          retryAfter: undefined,
          cause: error
        })
      }

      const retrySchedule = Schedule.exponential(options.retryBaseDelay ?? "500 millis", 2).pipe(
        Schedule.jittered,
        Schedule.intersect(Schedule.recurs(MAX_RETRIES)),
        Schedule.whileInput((failure: RequestFailed) => failure.retryable),
        // The failure becomes the schedule's output, so that the delay can read its retry-after.
        Schedule.passthrough,
        Schedule.modifyDelay((failure, delay) => failure.retryAfter === undefined ? delay : Duration.max(delay, failure.retryAfter))
      )

      /** One request, retried; its vectors in the order of `inputs`, unit length, `expected` long if given. */
      const request = (inputs: ReadonlyArray<string>, dimensions: number | undefined, expected: number | undefined) =>
        Effect.tryPromise({
          try: (signal) =>
            client.embeddings.create(
              { model, input: [...inputs], encoding_format: "float", ...(dimensions === undefined ? {} : { dimensions }) },
              { signal }
            ),
          catch: classify
        }).pipe(
          Effect.retry(retrySchedule),
          Effect.mapError((failure) =>
            new EmbedderError({
              message: failure.retryable ? `${failure.message}, still after ${MAX_RETRIES} retries` : failure.message,
              cause: failure.cause
            })
          ),
          Effect.flatMap((response) => {
            const data = response.data
            if (!Array.isArray(data) || data.length !== inputs.length) {
              return Effect.fail(new EmbedderError({ message: `OpenAI answered ${Array.isArray(data) ? data.length : "no"} vectors for ${inputs.length} inputs` }))
            }
            const vectors = new Array<Float32Array>(inputs.length)
            for (const item of data) {
              const index = item.index
              if (!Number.isInteger(index) || index < 0 || index >= inputs.length || vectors[index] !== undefined) {
                return Effect.fail(new EmbedderError({ message: `OpenAI answered a vector with a wrong or repeated index (${index})` }))
              }
              const length = Array.isArray(item.embedding) ? item.embedding.length : 0
              if (length === 0 || (expected !== undefined && length !== expected)) {
                return Effect.fail(
                  new EmbedderError({ message: `OpenAI model "${model}" answered a vector of ${length} dimensions, expected ${expected ?? "some"}` })
                )
              }
              vectors[index] = normalize(Float32Array.from(item.embedding))
            }
            // As many vectors as inputs, each index in range and none repeated: every slot is filled.
            return Effect.succeed(vectors)
          })
        )

      const known = KNOWN_MODELS.get(model)
      const asked = options.dimensions
      if (asked !== undefined && (!Number.isInteger(asked) || asked < 1)) {
        return yield* new EmbedderError({ message: `Embedding dimensions must be a positive whole number, not ${asked}` })
      }
      if (known !== undefined && asked !== undefined && asked !== known.dimensions && (!known.shortens || asked > known.dimensions)) {
        return yield* new EmbedderError({
          message: `OpenAI model "${model}" gives ${known.dimensions}-dimension vectors${known.shortens ? " or shorter" : ""}, not ${asked}`
        })
      }
      /** The `dimensions` parameter, sent only when it changes something (ada-002 refuses it). */
      const sent = asked !== undefined && asked !== known?.dimensions ? asked : undefined
      const dimensions = known !== undefined
        ? sent ?? known.dimensions
        : yield* request([PROBE_TEXT], sent, sent).pipe(
          Effect.map((vectors) => vectors[0]!.length),
          Effect.mapError((error) =>
            new EmbedderError({ message: `Could not learn the vector length of OpenAI model "${model}": ${error.message}`, cause: error.cause })
          )
        )

      const embed = Effect.fn("OpenAIEmbedder.embed")(function*(texts: ReadonlyArray<string>) {
        const parts = yield* Effect.forEach(batchesOf(texts), (batch) => request(batch, sent, dimensions), { concurrency: PARALLEL_REQUESTS })
        return parts.flat()
      })

      return { model: `openai/${model}`, dimensions, maxInputChars: MAX_INPUT_CHARS, reads: readsAnyText, embed }
    })
  )

/** Consecutive runs of the texts, each small enough for one request (an oversized text goes alone). */
const batchesOf = (texts: ReadonlyArray<string>): Array<Array<string>> => {
  const batches: Array<Array<string>> = []
  let current: Array<string> = []
  let chars = 0
  for (const text of texts) {
    if (current.length > 0 && (current.length === MAX_BATCH_INPUTS || chars + text.length > MAX_BATCH_CHARS)) {
      batches.push(current)
      current = []
      chars = 0
    }
    current.push(text)
    chars += text.length
  }
  if (current.length > 0) batches.push(current)
  return batches
}
