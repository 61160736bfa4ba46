/**
 * Search's services over the suite's migrated database for in-process suites: a small deterministic
 * embedder (a bag of hashed words: texts sharing words get similar vectors) and pgvector in the test
 * database when it has the extension (PGlite does), else in a PGlite beside it. What such suites test
 * is the SQL and the bookkeeping, not the model.
 */
import { Effect, Layer } from "effect"
import * as PgvectorIndex from "../../layers/pgvector-index.ts"
import * as WordNet from "../../layers/wordnet.ts"
import { Embedder, normalize } from "../../services/search/embedder.ts"
import { Indexer } from "../../services/search/indexer.ts"
import { Ranker } from "../../services/search/ranker.ts"
import { Vectors } from "../../services/search/vectors.ts"
import { TestDataDir } from "./database.ts"
import { hashedWords } from "./fake-openai.ts"

export const HASHED_DIMENSIONS = 32

/** The hashed-words vector of `text`, as the embedder below makes it. */
export const hashedVector = (text: string) => normalize(Float32Array.from(hashedWords(text, HASHED_DIMENSIONS)))

export const hashedWordsEmbedder = (model: string) =>
  Layer.succeed(Embedder, {
    model,
    dimensions: HASHED_DIMENSIONS,
    maxInputChars: 2_000,
    embed: (texts) => Effect.succeed(texts.map(hashedVector))
  })

export const testVectorIndex = Layer.unwrapEffect(
  Effect.map(TestDataDir, (dataDir) => PgvectorIndex.autoLayer({ dataDir, embedded: "allow" }))
)

/** The indexer, with its Vectors, over `embedder` (the hashed-words one by default). */
export const indexerWith = (embedder: Layer.Layer<Embedder> = hashedWordsEmbedder("words-v1")) =>
  Indexer.Default.pipe(Layer.provideMerge(Vectors.Default), Layer.provide(Layer.merge(embedder, testVectorIndex)))

/** The ranker and the indexer sharing one Vectors, over the hashed-words embedder; WordNet's thesaurus. */
export const rankerAndIndexer = Layer.merge(Ranker.Default, Indexer.Default).pipe(
  Layer.provideMerge(Vectors.Default),
  Layer.provide(Layer.mergeAll(hashedWordsEmbedder("words-v1"), testVectorIndex, WordNet.layer))
)
