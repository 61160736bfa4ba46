/**
 * The extraction corpus (test/fixtures/extraction): each raw message read as ingest reads it
 * (parse.ts), run through the extractor, and scored against the expected answers written beside
 * it. Shared by the bench (bench/extraction.ts) and the domain test.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { Effect } from "effect"
import { type Extracted, extract } from "../../services/mail/extract.ts"
import { parseMessage } from "../../services/mail/parse.ts"

export const corpusDirectory = path.join(path.dirname(fileURLToPath(import.meta.url)), "../fixtures/extraction")

interface ExpectedLink {
  readonly url: string
  readonly kind: string | null
}

export interface Expected {
  readonly codes: ReadonlyArray<string>
  readonly links: ReadonlyArray<ExpectedLink>
  readonly reply_text?: string
}

export interface Case {
  readonly file: string
  readonly expected: Expected
  readonly actual: Extracted
}

/** Precision and recall of one kind of answer, over the whole corpus. */
export interface Score {
  readonly truePositives: number
  readonly falsePositives: number
  readonly falseNegatives: number
  readonly precision: number
  readonly recall: number
}

export interface Report {
  readonly messages: number
  readonly codes: Score
  /** A link counts as found when its URL and its kind are both right. */
  readonly links: Score
  readonly replies: { readonly scored: number; readonly exact: number; readonly normalised: number }
  /** What went wrong, one line per difference. */
  readonly misses: ReadonlyArray<string>
}

export const readCorpus = Effect.gen(function*() {
  const manifest = JSON.parse(fs.readFileSync(path.join(corpusDirectory, "expected.json"), "utf8")) as {
    messages: Record<string, Expected>
  }
  return yield* Effect.forEach(Object.entries(manifest.messages), ([file, expected]) =>
    Effect.map(parseMessage(fs.readFileSync(path.join(corpusDirectory, file))), (parsed): Case => ({
      file,
      expected,
      actual: extract(parsed)
    })))
})

const score = (truePositives: number, falsePositives: number, falseNegatives: number): Score => ({
  truePositives,
  falsePositives,
  falseNegatives,
  precision: truePositives + falsePositives === 0 ? 1 : truePositives / (truePositives + falsePositives),
  recall: truePositives + falseNegatives === 0 ? 1 : truePositives / (truePositives + falseNegatives)
})

/** Compare two sets of answers: counts, and a line for each one found wrongly or missed. */
const compare = (file: string, what: string, found: ReadonlyArray<string>, expected: ReadonlyArray<string>, misses: Array<string>) => {
  const wanted = new Set(expected)
  const got = new Set(found)
  const tp = [...got].filter((value) => wanted.has(value)).length
  for (const value of got) if (!wanted.has(value)) misses.push(`${file}: ${what} found but not expected: ${value}`)
  for (const value of wanted) if (!got.has(value)) misses.push(`${file}: ${what} expected but not found: ${value}`)
  return [tp, got.size - tp, wanted.size - tp] as const
}

const normalise = (text: string) => text.replace(/\s+/g, " ").trim()

export const scoreCorpus = (cases: ReadonlyArray<Case>): Report => {
  const misses: Array<string> = []
  const totals = { codes: [0, 0, 0], links: [0, 0, 0] }
  const replies = { scored: 0, exact: 0, normalised: 0 }
  for (const { actual, expected, file } of cases) {
    const codes = compare(file, "code", actual.codes.map((c) => c.value), expected.codes, misses)
    const linkKey = (link: ExpectedLink) => `${link.url} [${link.kind ?? "-"}]`
    const links = compare(file, "link", actual.links.map(linkKey), expected.links.map(linkKey), misses)
    codes.forEach((n, i) => (totals.codes[i]! += n))
    links.forEach((n, i) => (totals.links[i]! += n))
    if (expected.reply_text !== undefined) {
      replies.scored++
      if (actual.reply_text === expected.reply_text) replies.exact++
      if (normalise(actual.reply_text ?? "") === normalise(expected.reply_text)) replies.normalised++
      else misses.push(`${file}: reply_text ${JSON.stringify(actual.reply_text)}, expected ${JSON.stringify(expected.reply_text)}`)
    }
  }
  return {
    messages: cases.length,
    codes: score(totals.codes[0]!, totals.codes[1]!, totals.codes[2]!),
    links: score(totals.links[0]!, totals.links[1]!, totals.links[2]!),
    replies,
    misses
  }
}
