/**
 * Text the offline model takes no meaning from: it knows no Chinese, Japanese or Korean letter and no
 * emoji, so every text made only of them is one and the same vector (embedder.ts `reads`). Such mail
 * gets no vector and such a query no results by meaning, so an all-Japanese email is not a perfect
 * match by meaning for every Japanese query and a near match for many English ones; words still find
 * it. With the real model (its vocabulary and its vectors) over the suite's database.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as LocalEmbedder from "../../layers/local-embedder.ts"
import * as WordNet from "../../layers/wordnet.ts"
import * as DocumentReader from "../../layers/document-reader.ts"
import { Embedder } from "../../services/search/embedder.ts"
import { Indexer } from "../../services/search/indexer.ts"
import { Ranker } from "../../services/search/ranker.ts"
import { Vectors } from "../../services/search/vectors.ts"
import { testDatabase } from "../support/database.ts"
import { indexedMail, otherTopics, testVectorIndex } from "../support/search-services.ts"

const withTheModel = Layer.merge(Ranker.Default, Indexer.Default).pipe(
  Layer.provideMerge(Vectors.Default),
  Layer.provide(Layer.mergeAll(LocalEmbedder.layer({ threads: 1 }), testVectorIndex, WordNet.layer, DocumentReader.layer))
)

const mail = [
  ["eml_1", "東京の会議", "来週の会議は東京で行います。"],
  ["eml_2", "大阪の天気", "明日の大阪は雨です。"],
  ["eml_3", "", ""],
  ["eml_10", "Weather in Osaka", "Rain in Osaka tomorrow, bring an umbrella."],
  ...otherTopics
] as const

const ranked = (query: string, mode: "hybrid" | "vector") =>
  Effect.flatMap(Ranker, (ranker) => ranker.rank("usr_1", query, mode, undefined)).pipe(Effect.map((hits) => hits.map((hit) => hit.emailId)))

layer(testDatabase, { timeout: "120 seconds" })("Text the model takes no meaning from", (it) => {
  it.effect("is text of letters outside its vocabulary and emoji, which it embeds as one vector, or of no letter at all", () =>
    Effect.gen(function*() {
      const texts = ["東京の会議", "明日の大阪は雨です。", "🤖🎉"]
      const vectors = yield* (yield* Embedder).embed(texts)
      for (const vector of vectors.slice(1)) expect([...vector]).toEqual([...vectors[0]!])
      for (const text of [...texts, "!!! ...", "---"]) expect([text, LocalEmbedder.reads(text)]).toEqual([text, false])
      // Any letter it knows gives the text a meaning of its own.
      for (const text of ["東京 meeting", "Grüße", "привет", "xyzzy", "１２３"]) expect([text, LocalEmbedder.reads(text)]).toEqual([text, true])
      const [meeting] = yield* (yield* Embedder).embed(["東京 meeting"])
      expect([...meeting!]).not.toEqual([...vectors[0]!])
    }).pipe(Effect.provide(LocalEmbedder.layer({ threads: 1 }))))

  it.effect("gets no vector; its words still find it, and a query of it is answered by words alone", () =>
    Effect.gen(function*() {
      yield* indexedMail(mail)
      const sql = yield* SqlClient.SqlClient
      // Each is indexed (a document and its words), with the model.
      const documents = yield* sql<{ emailId: string }>`SELECT email_id FROM search_documents WHERE model = ${LocalEmbedder.MODEL} ORDER BY email_id`
      expect(documents.map((row) => row.emailId)).toEqual(mail.map(([id]) => id).sort())
      // By meaning, the English mail only: the Japanese and the empty one have no vector.
      const byMeaning = yield* ranked("weather in Osaka", "vector")
      expect(byMeaning[0]).toBe("eml_10")
      expect(byMeaning).not.toContain("eml_1")
      expect(byMeaning).not.toContain("eml_2")
      expect(byMeaning).not.toContain("eml_3")
      // A Japanese word finds the email holding it, not every Japanese email (they were one vector).
      expect(yield* ranked("東京", "hybrid")).toEqual(["eml_1"])
      expect(yield* ranked("大阪", "hybrid")).toEqual(["eml_2"])
      expect(yield* ranked("東京", "vector")).toEqual([])
    }).pipe(Effect.provide(withTheModel)))
})
