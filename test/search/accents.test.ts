/**
 * Words are found without their accents, as in a mail client's search: "munchen" finds "München" and
 * "München" finds "munchen", over the suite's real database (PGlite, or PostgreSQL with
 * DATABASE_URL). Mail indexed before words were folded is folded by migration 0067: its old lexemes
 * (with accents) are written back as they were, the migration's script run again, and the same
 * queries find it. Chinese, Japanese and Korean, written without spaces, are found by any word of a
 * run (indexed in pairs of letters).
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import { cjkBigrams, foldAccents } from "../../services/search/documents.ts"
import { Indexer } from "../../services/search/indexer.ts"
import { Ranker } from "../../services/search/ranker.ts"
import { migrationsDirectory } from "../../src/database.ts"
import { testDatabase } from "../support/database.ts"
import { indexedMail, otherTopics, rankerAndIndexer } from "../support/search-services.ts"

const mail = [
  ["eml_1", "Trip to München", "We meet at the café to go over your résumé and the défense of the thesis. Ærø next."],
  ["eml_2", "Trip to munchen", "We meet at the cafe to go over your resume and the defense of the thesis. Aero next."],
  ...otherTopics
] as const

/** Queries typed with accents and without, each of which should find both emails. */
const queries = ["munchen", "MÜNCHEN", "Munchen", "cafe", "café", "resume", "résumé", "RÉSUMÉ", "defense", "Défense", "aero", "Ærø"]

const found = (query: string) =>
  Effect.flatMap(Ranker, (ranker) => ranker.rank("usr_1", query, "text", undefined)).pipe(
    Effect.map((ranked) => ranked.map((r) => r.emailId).sort())
  )

layer(testDatabase, { timeout: "60 seconds" })("Words without their accents", (it) => {
  it("folds the diacritics of Latin letters (both cases) and letters Unicode does not decompose, nothing else", () => {
    expect(foldAccents("Ça coûte 5 € à Łódź, Straße, Ærø, Œuvre, naïve, Việt Nam")).toBe("Ca coute 5 € a Lodz, Strasse, AEro, OEuvre, naive, Viet Nam")
    // Other scripts keep their letters: й is not и, nor ё е.
    expect(foldAccents("Привет, ёжик; 東京; Ελλάδα")).toBe("Привет, ёжик; 東京; Ελλάδα")
  })

  it.effect("a word written with accents and without finds both spellings", () =>
    Effect.gen(function*() {
      yield* indexedMail(mail)
      for (const query of queries) expect([query, yield* found(query)]).toEqual([query, ["eml_1", "eml_2"]])
    }).pipe(Effect.provide(rankerAndIndexer)))
})

layer(testDatabase, { timeout: "60 seconds" })("Words indexed before they were folded", (it) => {
  it.effect("migration 0067 folds them in place: the same queries find the mail, and the lexicon counts what the postings hold", () =>
    Effect.gen(function*() {
      yield* indexedMail(mail.filter(([id]) => id !== "eml_2"))
      const sql = yield* SqlClient.SqlClient
      // Lexemes as the index held them before: stemmed with their accents.
      const before = [["munchen", "münchen"], ["cafe", "café"], ["resum", "résumé"], ["defens", "défens"], ["aero", "ærø"]]
      for (const [now, then] of before) {
        yield* sql`UPDATE search_terms SET lexeme = ${then} WHERE lexeme = ${now}`
        yield* sql`UPDATE search_lexicon SET lexeme = ${then} WHERE lexeme = ${now}`
      }
      // A posting of an email holding both spellings ("café" beside "cafe") becomes one.
      yield* sql`INSERT INTO search_terms (user_id, lexeme, email_id, doc, mailbox_id, frequency, length)
                 SELECT user_id, 'cafe', email_id, doc, mailbox_id, 2, length FROM search_terms WHERE lexeme = 'café'`
      yield* sql`INSERT INTO search_lexicon (user_id, lexeme, documents) VALUES ('usr_1', 'cafe', 1)`
      expect(yield* found("munchen")).toEqual([])

      const script = fs.readFileSync(`${migrationsDirectory}/0067_search_folded_lexemes.sql`, "utf8")
      yield* sql.unsafe(script).raw.pipe(sql.withTransaction)

      for (const query of queries) expect([query, yield* found(query)]).toEqual([query, ["eml_1"]])
      const cafe = yield* sql<{ frequency: number }>`SELECT frequency FROM search_terms WHERE lexeme = 'cafe'`
      expect(cafe.map((row) => Number(row.frequency))).toEqual([3])
      const accented = yield* sql<{ lexeme: string }>`
        SELECT lexeme FROM search_terms WHERE octet_length(lexeme) <> char_length(lexeme)
        UNION ALL SELECT lexeme FROM search_lexicon WHERE octet_length(lexeme) <> char_length(lexeme)`
      expect(accented).toEqual([])
      const miscounted = yield* sql<{ lexeme: string }>`
        SELECT l.lexeme FROM search_lexicon l
        LEFT JOIN (SELECT user_id, lexeme, count(*) AS n FROM search_terms GROUP BY user_id, lexeme) p USING (user_id, lexeme)
        WHERE l.documents IS DISTINCT FROM p.n`
      expect(miscounted).toEqual([])
    }).pipe(Effect.provide(rankerAndIndexer)))
})

const cjk = [
  ["eml_1", "東京都庁の会議", "来週の会議は東京都庁で行います。資料を準備してください。"],
  ["eml_2", "한국어 수업", "다음 주 한국어를 공부합니다."],
  ["eml_3", "大阪の天気", "明日は雨です。"],
  ["eml_10", "Windows版のリリース", "ABC株式会社のiPhone用アプリ。Samsung전자와 LG디스플레이. 2024年3月15日に発売。"],
  ...otherTopics
] as const

layer(testDatabase, { timeout: "60 seconds" })("Words of Chinese, Japanese and Korean", (it) => {
  it("cuts a run of CJK letters in overlapping pairs (indexed, its letters too); a letter alone stays, other text too", () => {
    expect(cjkBigrams("東京都庁 in Tokyo, 東, 会議, カタカナー")).toBe("東京 京都 都庁 in Tokyo, 東, 会議, カタ タカ カナ ナー")
    expect(cjkBigrams("東京都 in Tokyo, 東", true)).toBe("東京 京都 東 京 都 in Tokyo, 東")
    // Latin letters and digits written against a run are words of their own.
    expect(cjkBigrams("ABC株式会社のiPhone用, LG디스플레이 2024年")).toBe("ABC 株式 式会 会社 社の iPhone 用, LG 디스 스플 플레 레이 2024 年")
  })

  it.effect("a word inside a run finds its email, and only that one", () =>
    Effect.gen(function*() {
      yield* indexedMail(cjk)
      for (const [query, ids] of [["東京", ["eml_1"]], ["都庁", ["eml_1"]], ["会議", ["eml_1"]], ["資料", ["eml_1"]], ["한국어", ["eml_2"]], ["天気", ["eml_3"]], ["雨", ["eml_3"]], ["雨 東京", ["eml_1", "eml_3"]], ["iphone", ["eml_10"]], ["Samsung", ["eml_10"]], ["windows", ["eml_10"]], ["iPhone用", ["eml_10"]], ["전자", ["eml_10"]], ["2024", ["eml_10"]]] as const) {
        expect([query, yield* found(query)]).toEqual([query, ids])
      }
    }).pipe(Effect.provide(rankerAndIndexer)))

  it.effect("a long CJK email is indexed within what PostgreSQL can index, from its start (it failed: a run's pairs passed a tsvector's 1 MiB)", () =>
    Effect.gen(function*() {
      // Sentences of letters drawn from 3,000: nearly every pair a lexeme of its own.
      let seed = 7
      const letter = () => String.fromCodePoint(0x4e00 + ((seed = (seed * 48271) % 2147483647) % 3000))
      const sentences = Array.from({ length: 25_000 }, () => Array.from({ length: 19 }, letter).join("") + "。").join("")
      yield* Effect.flatMap(SqlClient.SqlClient, (sql) => sql`INSERT INTO emails (id, mailbox_id, user_id, message_id, thread_id, subject, from_address, to_addresses, sent_at,
                                     received_at, mail_from, rcpt_to, headers, text_body, has_attachments, raw_sha256, size)
                 VALUES ('eml_long', 'mbx_1', 'usr_1', '<long@test>', 'eml_long', '長文', 'x@example.com', ${["y@example.com"]}, now(),
                         now(), 'x@example.com', 'y@example.com', '{}', ${"開始報告" + sentences}, false, ${"0".repeat(64)}, 1)`)
      yield* Effect.flatMap(Indexer, (indexer) => indexer.index("eml_long"))
      expect(yield* found("報告")).toContain("eml_long")
    }).pipe(Effect.provide(rankerAndIndexer)))
})
