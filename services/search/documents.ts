/**
 * What of an email is searched: its subject, body and readable attachments (text, HTML, PDF, Word:
 * mail/attachment-text.ts), cut into chunks for the embedder (one vector each) and capped for the
 * full-text document; by words, its sender too (display name, address and the address's domain).
 */

/** Characters per chunk: a few paragraphs, the span a sentence encoder still summarises well. */
export const CHUNK_CHARS = 1_000
/** Chunks embedded per email: a very long message is searchable by its first pages by meaning, by all of it by words. */
export const MAX_CHUNKS = 16
/** The full-text document's text is capped (a tsvector holds at most 1 MB). */
export const MAX_DOCUMENT_CHARS = 500_000
/** A subject word counts this many times a body word in full-text ranking. */
export const SUBJECT_BOOST = 2

/**
 * Text as it is indexed and searched: in Unicode's composed form (NFC), so that a letter and its
 * accent written as two code points match the same letter written as one.
 */
export const searchableText = (text: string): string => text.normalize("NFC")

/** Letters a Latin letter with diacritics stands for: its base letter, of the same case. */
const BASES: ReadonlyMap<string, string> = new Map([
  ...[[0xc0, 0x24f], [0x1e00, 0x1eff]].flatMap(([low, high]) =>
    Array.from({ length: high! - low! + 1 }, (_, i) => String.fromCodePoint(low! + i)).flatMap((letter) => {
      const base = letter.normalize("NFD").replace(/\p{M}/gu, "")
      return /^[A-Za-z]$/.test(base) && base !== letter ? [[letter, base] as const] : []
    })
  ),
  // Letters Unicode does not decompose.
  ...Object.entries({ ß: "ss", ẞ: "SS", æ: "ae", Æ: "AE", œ: "oe", Œ: "OE", ø: "o", Ø: "O", ł: "l", Ł: "L", đ: "d", Đ: "D", ð: "d", Ð: "D", þ: "th", Þ: "TH", ħ: "h", Ħ: "H", ı: "i", ŧ: "t", Ŧ: "T" })
])

/**
 * Text without the diacritics of Latin letters, so that "munchen" finds "München" and "resume"
 * "résumé", as a mail client's search does.
 */
export const foldAccents = (text: string): string => text.replace(/[\u00c0-\u024f\u1e00-\u1eff]/g, (letter) => BASES.get(letter) ?? letter)

/** A run of Chinese, Japanese or Korean letters (the prolonged sound mark ー is Katakana's too). */
const CJK_RUN = /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}\u30fc]+/gu

const LETTER_OR_DIGIT = /[\p{L}\p{N}]/u

/**
 * Chinese, Japanese and Korean written without spaces between words, cut in overlapping pairs of
 * letters ("東京都庁" is 東京 京都 都庁), as CJK search engines index them: PostgreSQL would keep the
 * whole run as one word, which no query but the whole run finds. A letter standing alone stays; with
 * `letters` (mail as it is indexed) each letter of a longer run is added too, so that a query of one
 * letter ("雨") finds it.
 */
export const cjkBigrams = (text: string, letters = false): string =>
  text.replace(CJK_RUN, (run, at: number) => {
    const each = [...run]
    const pairs = each.slice(1).map((letter, i) => each[i]! + letter)
    const words = each.length === 1 ? run : [...pairs, ...(letters ? each : [])].join(" ")
    // Apart from the Latin letters and digits written against it ("iPhone用", "LG디스플레이"): each its own word.
    const before = at > 0 && LETTER_OR_DIGIT.test(text[at - 1]!) ? " " : ""
    const after = at + run.length < text.length && LETTER_OR_DIGIT.test(text[at + run.length]!) ? " " : ""
    return before + words + after
  })

/**
 * Text as its words are looked up (`indexed`: as mail's are indexed), PostgreSQL's English stemming
 * following: accents folded (`foldAccents`) and CJK cut in pairs (`cjkBigrams`). Only the words are:
 * meaning is read from the text as written.
 */
export const wordForm = (text: string, indexed = false): string => cjkBigrams(foldAccents(text), indexed)

/**
 * The version of reading words (`indexedWords`) that indexes mail now, kept with each email's
 * document: mail indexed by an earlier version is found by fewer words, and `mailroom reindex`
 * reads its words again (Indexer.reword; no embedding). Raise it whenever a change to how words are
 * read would index mail already indexed differently.
 * - 1: before versions were kept (its accents folded in place by migration 0067).
 * - 2: Chinese, Japanese and Korean runs cut in overlapping pairs, and set apart from the Latin
 *   letters and digits written against them ("ABC株式会社のiPhone" is abc, iphone and the run's pairs).
 * - 3: the sender's words indexed too (`senderText`). Mail at 2 differs only by them: the index actor
 *   adds them in place at start (Indexer.addSenderWords, `SENDER_WORDS_FROM`), without `reindex`.
 */
export const WORDS_VERSION = 3

/** The version whose mail lacks only its sender's words, which can be added to it in place. */
export const SENDER_WORDS_FROM = 2

/**
 * The sender as it is found by words: its display name, its address (one word: a query of the whole
 * address finds it) and the address's domain (`github.com`). A sender word counts as a body word
 * does, half a subject word, and not in the document's length: a topical query ranks mail as before.
 */
export const senderText = (name: string | null, address: string): string => {
  const at = address.lastIndexOf("@")
  const parts = [name ?? "", address, at >= 0 ? address.slice(at + 1) : ""].map((part) => part.trim()).filter((part) => part !== "")
  // A name that is the address itself (`"a@b.c" <a@b.c>`) is not counted twice.
  return searchableText(parts.filter((part, i) => parts.findIndex((other) => other.toLowerCase() === part.toLowerCase()) === i).join(" "))
}

/** What the word forms of a subject and a body may take, in UTF-8: a tsvector's lexemes hold less than 1 MiB. */
const WORD_BYTES = { subject: 100_000, body: 900_000, sender: 4_000 } as const

/** `text` cut at a space to at most `max` bytes of UTF-8. */
const withinBytes = (text: string, max: number): string => {
  if (text.length * 3 <= max || Buffer.byteLength(text) <= max) return text
  const cut = Buffer.from(text).subarray(0, max).toString("utf8")
  const space = cut.lastIndexOf(" ")
  return (space > 0 ? cut.slice(0, space) : cut).replace(/\ufffd$/, "")
}

/**
 * An email's subject, body and sender (`senderText`) as their words are indexed (`wordForm`), each
 * within what PostgreSQL can index: CJK cut in pairs takes several times the text's bytes (a long
 * CJK email failed to index), and even uncut, 500,000 characters of CJK are 1.5 MB of UTF-8.
 */
export const indexedWords = (subject: string, body: string, sender = "") => ({
  subject: withinBytes(wordForm(subject, true), WORD_BYTES.subject),
  body: withinBytes(wordForm(body, true), WORD_BYTES.body),
  sender: withinBytes(wordForm(sender, true), WORD_BYTES.sender)
})

/** The searchable body: the message text, then each readable attachment's. */
export const searchableBody = (text: string, attachments: ReadonlyArray<string>): string =>
  searchableText([text, ...attachments].map((part) => part.trim()).filter((part) => part.length > 0).join("\n\n")).slice(0, MAX_DOCUMENT_CHARS)

/**
 * Chunks of about `CHUNK_CHARS`, cut at a sentence end or else a space, the subject leading the
 * first (it says most about the mail). Never empty: a mail with neither subject nor body is one
 * chunk of nothing, which the embedder's `capInput` turns into a placeholder.
 */
export const chunkText = (subject: string, body: string, chunkChars = CHUNK_CHARS, maxChunks = MAX_CHUNKS): Array<string> => {
  const text = [subject.trim(), body.replace(/\s+/g, " ").trim()].filter((part) => part.length > 0).join(". ")
  const chunks: Array<string> = []
  let start = 0
  while (start < text.length && chunks.length < maxChunks) {
    let end = Math.min(text.length, start + chunkChars)
    if (end < text.length) {
      const window = text.slice(start + Math.floor(chunkChars / 2), end)
      const sentence = Math.max(window.lastIndexOf(". "), window.lastIndexOf("? "), window.lastIndexOf("! "))
      const space = window.lastIndexOf(" ")
      const cut = sentence >= 0 ? sentence + 1 : space
      if (cut >= 0) end = start + Math.floor(chunkChars / 2) + cut
    }
    chunks.push(text.slice(start, end).trim())
    start = end
  }
  return chunks.length > 0 ? chunks.filter((chunk) => chunk.length > 0) : [""]
}

/** Words in a text: the document length full-text ranking normalises by. */
export const wordCount = (text: string): number => (text.match(/[\p{L}\p{N}]+/gu) ?? []).length
