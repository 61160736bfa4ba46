/**
 * One-time codes (sign-up, sign-in, verification): `482913`, `482 913`, `G-551234`, `ABCD-1234`,
 * `X7K9Q2`, with the words around each.
 *
 * Precision comes first: mail is full of numbers that are not codes. A candidate counts only when
 * words saying "code" (in English, German, French, Spanish or Japanese) stand near it, on its line
 * or, for a code standing alone in a box, on the lines above it; and never when the words just
 * before it say what else it is (an order, invoice, phone, price, postal code, promotion). Quoted
 * history (`> ` lines) is not read: a reply quoting an old code does not carry it.
 */

export interface Code {
  readonly value: string
  readonly context: string
}

export const MAX_CODES = 10

const CODE_WORDS =
  /code|passcode|\botp\b|one[- ]?time|\bpin\b|verif|confirm|security|\btoken\b|\b2fa\b|authenti|sign[- ]?in|log[- ]?in|anmeld|best[äa]tig|sicherheit|einmal|\btan\b|v[ée]rif|s[ée]curit[ée]|usage unique|c[óo]digo|verificaci|seguridad|un solo uso|コード|認証|確認|ワンタイム|パスコード|暗証/i

/** Words that, just before a number, say it is something else. */
const OTHER_NUMBER =
  /order|bestell|commande|pedido|注文|invoice|rechnung|facture|factura|請求|ticket|tracking|sendung|suivi|seguimiento|referen|r[ée]f[ée]rence|\bref\b|booking|reservation|r[ée]servation|buchung|reserva|予約|phone|telefon|t[ée]l[ée]phone|tel[ée]fono|電話|\btel\b|\bcall|anruf|appel|llam|\bfax\b|promo|coupon|discount|gutschein|rabatt|cup[óo]n|descuento|r[ée]duction|number|nummer|num[ée]ro|n[úu]mero|番号|\bno\.|\bnr\.|n°|#|ending in|endet auf|termin|zip|postal|\bplz\b|postleitzahl|〒|price|preis|\bprix\b|precio|total|summe|amount|betrag|montant|importe|合計|金額|kundennummer|customer|\bsku\b|version|\bv\d/i

/** A line that sells something: its codes are discounts, not one-time codes. */
const PROMOTION = /\d\s?% (off|rabatt|de r[ée]duction|de descuento)|promo|coupon|discount|gutschein|rabatt|cup[óo]n|descuento|r[ée]duction|割引|クーポン/i

/** What after a number makes it an amount or a measure. */
const UNIT_AFTER = /^\s?(€|\$|£|¥|円|eur\b|usd\b|gbp\b|chf\b|jpy\b|kg\b|km\b|mb\b|gb\b|%|uhr\b|points?\b|punkte\b)/i
const PHONE_BEFORE = /(\+\d{1,3}|\(\d{2,5}\)|\d)[\s-]*$/
const MORE_DIGITS_AFTER = /^[\s-]\d/

const CANDIDATE = /(?<![A-Za-z0-9_.,/#$€£¥@+=%&-])(\d{3,4} \d{3,4}|[A-Z0-9]{1,8}-[A-Z0-9]{2,8}|[A-Z0-9]{4,10})(?![A-Za-z0-9_/@%-]|[.,]\d)/g

const isYear = (digits: string) => /^(19|20)\d\d$/.test(digits)

/** The value a candidate stands for, or nothing when its shape is not a code's. */
const codeShape = (raw: string): string | undefined => {
  if (/^\d{3,4} \d{3,4}$/.test(raw)) return raw.replace(" ", "")
  if (/^\d+$/.test(raw)) return raw.length >= 4 && raw.length <= 8 && !isYear(raw) ? raw : undefined
  if (raw.includes("-")) {
    const [head, tail] = raw.split("-") as [string, string]
    if (!/\d/.test(raw) || raw.length < 6) return undefined
    // 2026-11 and 12-2026 are dates; 555-0100 is a phone number's end.
    if (/^\d+$/.test(head) && /^\d+$/.test(tail) && (isYear(head) || isYear(tail) || head.length < 3)) return undefined
    return raw
  }
  const digits = raw.replace(/\D/g, "").length
  return /[A-Z]/.test(raw) && digits >= 2 && raw.length >= 5 ? raw : undefined
}

/** Codes written one character per cell ("4 8 2 9 1 3", or one per line) as one word. */
const joinSpelledOut = (text: string) =>
  text
    .replace(/(?<![A-Za-z0-9])[A-Z0-9](?:[ \t][A-Z0-9]){3,7}(?![A-Za-z0-9])/g, (run) => run.replace(/[ \t]/g, ""))
    .replace(/(?:^|\n)((?:[ \t]*[A-Z0-9][ \t]*\n+){3,7}[ \t]*[A-Z0-9][ \t]*)(?=\n|$)/g, (run, cells: string) =>
      run.slice(0, run.length - cells.length) + cells.replace(/\s/g, ""))

const squeeze = (text: string) => text.replace(/\s+/g, " ").trim()

/** The end of `text` that holds its last `count` words, as written (what stands against the code stays against it). */
const lastWords = (text: string, count: number) => {
  const starts = [...text.matchAll(/\S+/g)].map((word) => word.index)
  return starts.length <= count ? text : text.slice(starts[starts.length - count])
}

/** The start of `text` that holds its first `count` words, as written. */
const firstWords = (text: string, count: number) => {
  let end = 0
  let seen = 0
  for (const word of text.matchAll(/\S+/g)) {
    if (seen++ === count) break
    end = word.index + word[0].length
  }
  return text.slice(0, end)
}

/**
 * Whether a word is an address (something@something.something), its digits no code. Found by plain
 * search: the regex it replaces (`\S+@\S+\.\S+`) backtracked over every start of a long word, and
 * one received message with a 2 MB line held the process for minutes, again after each restart.
 */
const looksLikeAddress = (word: string) => {
  const at = word.indexOf("@", 1)
  const dot = word.lastIndexOf(".")
  return at > 0 && dot > at + 1 && dot < word.length - 1
}

/** Lines to read: URLs and addresses blanked (their digits are not codes), quoted history left out. */
const readableLines = (text: string) =>
  joinSpelledOut(text)
    .replace(/https?:\/\/\S+/gi, " ")
    .replace(/\S+/g, (word) => (looksLikeAddress(word) ? " " : word))
    .split(/\r?\n/)
    .map((line) => (/^\s*>/.test(line) ? "" : line))

const MAX_LINES = 2000
/**
 * A line longer than this cannot be a code alone on its line (a box, a heading): what is read of a
 * line for one candidate is a window around it, never the whole line, so a long line costs its length
 * once rather than once per number in it (a line of 100,000 spelled-out digits took seconds).
 */
const MAX_ALONE_LINE = 200
const WINDOW = 200

/** The last `count` lines before `index` that are not blank, nearest last. */
const nonBlankBefore = (lines: ReadonlyArray<string>, index: number, count: number) => {
  const found: Array<string> = []
  for (let i = index - 1; i >= 0 && found.length < count; i--) if (lines[i]!.trim() !== "") found.unshift(lines[i]!)
  return found
}

/** The codes in one text (a body, or the subject). */
const codesIn = (text: string, subject: string): Array<Code> => {
  const lines = readableLines(text).slice(0, MAX_LINES)
  const found: Array<Code> = []
  lines.forEach((line, index) => {
    let promotion: boolean | undefined
    for (const match of line.matchAll(CANDIDATE)) {
      const value = codeShape(match[1]!)
      if (value === undefined) continue
      const start = match.index
      const end = start + match[1]!.length
      const before = line.slice(Math.max(0, start - 60), start)
      const after = line.slice(end, end + 40)
      const alone = line.length <= MAX_ALONE_LINE && line.replace(match[1]!, "").replace(/[^\p{L}\p{N}]/gu, "").length <= 2
      // A code alone on its line is labelled by the lines above it (a heading, then "enter this code").
      const above = alone ? nonBlankBefore(lines, index, 2) : []
      const near = [...above, before, after, alone ? subject : ""].join(" ")
      if (!CODE_WORDS.test(near) || (promotion ??= PROMOTION.test(line))) continue
      const justBefore = line.slice(Math.max(0, start - 30), start)
      if (OTHER_NUMBER.test(justBefore) || (alone && above.length > 0 && OTHER_NUMBER.test(above[above.length - 1]!))) continue
      if (UNIT_AFTER.test(after) || MORE_DIGITS_AFTER.test(after) || (/^\d/.test(value) && PHONE_BEFORE.test(justBefore))) continue
      const context = alone
        ? squeeze([...above.slice(-1), line].join(" "))
        : squeeze(lastWords(line.slice(Math.max(0, start - WINDOW), start), 8) + match[1]! + firstWords(line.slice(end, end + WINDOW), 8))
      found.push({ value, context })
    }
  })
  return found
}

/**
 * The codes of a message: its bodies' (the visible text of its HTML, then its text part) and its
 * subject's, each value once, with the words around its first appearance.
 */
export const extractCodes = (bodies: ReadonlyArray<string>, subject: string): Array<Code> => {
  const codes = new Map<string, Code>()
  for (const text of [...bodies, subject]) {
    for (const code of codesIn(text, subject)) if (!codes.has(code.value) && codes.size < MAX_CODES) codes.set(code.value, code)
  }
  return [...codes.values()]
}
