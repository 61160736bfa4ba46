/**
 * The Embedder port: turns texts into vectors that mean something together (DESIGN.md §1).
 *
 * Adapters: OpenAI embeddings when `OPENAI_API_KEY` is set (layers/openai-embedder.ts), else the
 * offline Universal Sentence Encoder lite shipped from npm, run in worker threads
 * (layers/local-embedder.ts).
 *
 * Contract, whichever adapter:
 * - one vector per input text, in input order, each `dimensions` long and of unit length (so a
 *   cosine similarity is a dot product);
 * - inputs are capped at `maxInputChars` by the caller (`capInput`), and never empty;
 * - `model` names the vectors' space: vectors of different models are never compared. It is
 *   stored with every vector, and a changed model is detected at start;
 * - `reads` tells the text a model takes no meaning from: the offline model knows no Chinese,
 *   Japanese or Korean letter and no emoji, so every text made only of them is one and the same
 *   vector, the nearest neighbour of all such text and near much else. Such text is not embedded: a
 *   query gets no results by meaning (its words still find mail), a chunk of mail no vector;
 * - `priority` says who waits: a search's query (`"query"`) is embedded before any indexing work
 *   the adapter has not started yet, so that a search never waits behind an indexing backlog, only
 *   behind the batch already in progress; indexing (`"indexing"`, the default) may lag. An adapter
 *   whose calls share no queue (OpenAI: each call is its own requests) may ignore it.
 */
import { Context, Data, type Effect } from "effect"

export class EmbedderError extends Data.TaggedError("EmbedderError")<{
  readonly message: string
  readonly cause?: unknown
}> {}

/** Who waits for an embedding (see the contract above). */
export type EmbedPriority = "query" | "indexing"

export interface EmbedderShape {
  /** Identifies the vector space, e.g. `use-lite-512` or `openai/text-embedding-3-small`. */
  readonly model: string
  readonly dimensions: number
  /** Longest input the adapter takes, in characters; longer text is cut (see `capInput`). */
  readonly maxInputChars: number
  /** Whether the model takes any meaning from `text` (see above); an empty text means nothing. */
  readonly reads: (text: string) => boolean
  readonly embed: (texts: ReadonlyArray<string>, priority?: EmbedPriority) => Effect.Effect<ReadonlyArray<Float32Array>, EmbedderError>
}

export class Embedder extends Context.Tag("mailroom/Embedder")<Embedder, EmbedderShape>() {}

/** `reads` for a model that takes meaning from any text that is not empty. */
export const readsAnyText = (text: string): boolean => /\S/.test(text)

/** A text fit for an embedder: whitespace collapsed, cut at `maxChars`, never empty. */
export const capInput = (text: string, maxChars: number): string => {
  const collapsed = text.replace(/\s+/g, " ").trim()
  const cut = collapsed.length > maxChars ? collapsed.slice(0, maxChars) : collapsed
  return cut.length > 0 ? cut : "(empty)"
}

/** Scale to unit length in place (a zero vector stays zero). */
export const normalize = (vector: Float32Array): Float32Array => {
  let sum = 0
  for (let i = 0; i < vector.length; i++) sum += vector[i]! * vector[i]!
  const norm = Math.sqrt(sum)
  if (norm > 0) for (let i = 0; i < vector.length; i++) vector[i]! /= norm
  return vector
}
