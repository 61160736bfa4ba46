/**
 * IMAP4rev1's wire format (RFC 3501 §4, §9): commands read from the client, values written back.
 *
 * - The reader frames commands: a line that ends in a literal's length (`{n}`, or `{n+}` of RFC 7888's
 *   LITERAL+) takes the next n bytes as part of the same command; a synchronising literal is first
 *   invited with `+`. A command past `maxBytes` (a literal announcing more) is refused as it is
 *   announced, before its bytes are read, and the rest of it is skipped.
 * - The parser turns a command into a tag, a name and arguments: atoms, strings (quoted or literal)
 *   and parenthesised lists, nested at most MAX_LIST_NESTING deep (deeper is BAD, before it can exhaust
 *   the stack). An atom with a `[` runs to its `]` (a FETCH section with its field list,
 *   `BODY.PEEK[HEADER.FIELDS (FROM TO)]<0.100>`, is one atom).
 * - The writer quotes a string when it can and sends it as a literal when it must (line ends, bytes
 *   past ASCII, or long).
 *
 * Strings are byte strings (latin1) in both directions: what the client sent and the stored message's
 * bytes pass through unchanged, but for a NUL, which no IMAP string may hold: served as a space.
 */
import { Either, Schema } from "effect"
import { isRealWallTime, utcTime } from "../../services/time-zones.ts"

export type Arg =
  | { readonly kind: "atom"; readonly text: string }
  | { readonly kind: "string"; readonly text: string }
  | { readonly kind: "list"; readonly items: ReadonlyArray<Arg> }

export interface Command {
  readonly tag: string
  /** Upper case. */
  readonly name: string
  readonly args: ReadonlyArray<Arg>
}

/**
 * A command the server cannot take as written (malformed, or naming what does not exist in its syntax):
 * the client's mistake, an expected failure the session answers BAD with its message (never a defect,
 * never logged).
 */
export class BadCommand extends Schema.TaggedError<BadCommand>()("BadCommand", { message: Schema.String }) {}

/** The client's mistake `message`. */
export const badCommand = (message: string) => new BadCommand({ message })

/**
 * What a recursive reader answers, or the BadCommand it stopped at. The readers (a command's parser,
 * SEARCH keys, FETCH sections) are pure and deeply nested, so inside them a mistake is thrown to unwind
 * them; it leaves them only as this Either's Left. Anything else thrown is a bug, and stays a throw.
 */
export const reading = <A>(read: () => A): Either.Either<A, BadCommand> => {
  try {
    return Either.right(read())
  } catch (error) {
    if (error instanceof BadCommand) return Either.left(error)
    throw error
  }
}

/** Inside a reader: the value of `result`, or its BadCommand thrown (caught by `reading`). */
export const valueOf = <A>(result: Either.Either<A, BadCommand>): A => {
  if (Either.isLeft(result)) throw result.left
  return result.right
}

const isSpace = (c: string | undefined) => c === " "

/**
 * How deep a command's lists may nest: more than any command needs (SEARCH keys, whose own limit is as
 * deep, nest furthest), far less than would exhaust the stack of the recursive parser. A command within
 * the line limit can hold tens of thousands of parentheses; past this it is the client's mistake, BAD.
 */
export const MAX_LIST_NESTING = 100

/** An argument that must be a string (an atom, quoted or literal). */
export const astring = (arg: Arg | undefined): Either.Either<string, BadCommand> =>
  arg === undefined || arg.kind === "list" ? Either.left(badCommand("Expected a string")) : Either.right(arg.text)

/** A client's string as text: IMAP strings carry UTF-8 (or ASCII) bytes. */
export const utf8 = (bytes: string) => Buffer.from(bytes, "latin1").toString("utf8")

/** Parse one framed command (its bytes as a byte string, the final line end included or not). */
export const parseCommand = (input: string): Either.Either<Command, BadCommand> => reading(() => parse(input))

const parse = (input: string): Command => {
  let at = 0
  const end = input.endsWith("\r\n") ? input.length - 2 : input.endsWith("\n") ? input.length - 1 : input.length

  const atom = (): string => {
    const start = at
    let depth = 0
    while (at < end) {
      const c = input[at]!
      if (c === "[") depth++
      else if (c === "]" && depth > 0) depth--
      else if (depth === 0 && (c === " " || c === "(" || c === ")" || c === "\r" || c === "\n")) break
      at++
    }
    if (at === start) throw badCommand(`Unexpected ${JSON.stringify(input[at] ?? "end of line")}`)
    return input.slice(start, at)
  }

  const quoted = (): string => {
    at++
    let text = ""
    while (at < end) {
      const c = input[at]!
      if (c === "\"") {
        at++
        return text
      }
      if (c === "\\") {
        at++
        if (at >= end) break
      } else if (c === "\r" || c === "\n") {
        break
      }
      text += input[at]
      at++
    }
    throw badCommand("Unterminated quoted string")
  }

  const literal = (): string => {
    const match = /^\{(\d+)\+?\}\r?\n/.exec(input.slice(at, at + 32))
    if (!match) throw badCommand("Malformed literal")
    const length = Number(match[1])
    const start = at + match[0].length
    if (start + length > input.length) throw badCommand("Literal shorter than announced")
    at = start + length
    return input.slice(start, at)
  }

  /** `depth`: how many lists this value is inside already. */
  const value = (depth: number): Arg => {
    const c = input[at]
    if (c === "(") {
      if (depth >= MAX_LIST_NESTING) throw badCommand(`Lists nested more than ${MAX_LIST_NESTING} deep`)
      at++
      const items: Array<Arg> = []
      while (at < end && input[at] !== ")") {
        items.push(value(depth + 1))
        if (isSpace(input[at])) at++
      }
      if (input[at] !== ")") throw badCommand("Unterminated list")
      at++
      return { kind: "list", items }
    }
    if (c === "\"") return { kind: "string", text: quoted() }
    if (c === "{") return { kind: "string", text: literal() }
    return { kind: "atom", text: atom() }
  }

  // No string of a command holds NUL (RFC 3501 §9: CHAR and CHAR8 begin at %x01); an APPEND's literal is a message, kept as sent.
  if (!isAppend(input) && input.includes("\u0000")) throw badCommand("A command holds no NUL character")
  const tag = atom()
  if (/[+*]/.test(tag) || !isSpace(input[at])) throw badCommand("Expected a tag and a command")
  at++
  const name = atom().toUpperCase()
  const args: Array<Arg> = []
  while (at < end) {
    if (!isSpace(input[at])) throw badCommand(`Unexpected ${JSON.stringify(input[at])}`)
    at++
    if (at === end) break
    args.push(value(0))
  }
  return { tag, name, args }
}

/** The tag of a line that could not be parsed, when it has one, to answer BAD to. */
export const tagOf = (input: string): string => {
  // A tag is an astring without "+" (RFC 3501 §9): "+ BAD" would read as a continuation request.
  // Printable ASCII only: bytes that are none are sent back to no one.
  const match = /^([^\s(){%*"\\+\x00-\x1f\x7f-\uffff]+)\s/.exec(input)
  return match?.[1] ?? "*"
}

const isAppend = (command: string) => /^[^\s]+ APPEND /i.test(command)

/** What the reader hands on: a framed command, an invitation for a literal, or a refused one. */
export type Framed =
  | { readonly kind: "command"; readonly bytes: string }
  | { readonly kind: "continue" }
  /** A command past its limit (`append`: an APPEND, whose limit is the largest message taken). */
  | { readonly kind: "tooLong"; readonly tag: string; readonly append: boolean; readonly limit: number }

/**
 * Frames commands out of a connection's bytes. `push` returns what the bytes completed; a literal's
 * bytes are waited for whole.
 */
export class CommandReader {
  private buffer = ""
  /** Where the command being framed has been scanned to (past its literals). */
  private scanned = 0
  /** Where the literal being received ends, while its bytes are still coming. */
  private literalEnd = 0
  /** Bytes of a refused command still to be skipped. */
  private skipping = 0
  /**
   * `maxBytes` bounds a command; an APPEND's, whose literal is a whole message, `maxAppendBytes`
   * (held whole while it is read: one at a time per connection).
   */
  constructor(private readonly maxBytes: number, private readonly maxAppendBytes: number = maxBytes) {}

  private limitFor(command: string) {
    return isAppend(command) ? this.maxAppendBytes : this.maxBytes
  }

  private tooLong(command: string): Framed {
    return { kind: "tooLong", tag: tagOf(command), append: isAppend(command), limit: this.limitFor(command) }
  }

  push(chunk: Buffer): Array<Framed> {
    this.buffer += chunk.toString("latin1")
    const out: Array<Framed> = []
    while (true) {
      if (this.skipping > 0) {
        const skipped = Math.min(this.skipping, this.buffer.length)
        this.buffer = this.buffer.slice(skipped)
        this.skipping -= skipped
        if (this.skipping > 0) return out
        // What follows the skipped literal, up to its line's end, is the refused command's too.
        const lineEnd = this.buffer.indexOf("\n")
        if (lineEnd < 0) {
          this.buffer = ""
          this.skipping = 0
          return out
        }
        const rest = this.buffer.slice(0, lineEnd + 1)
        this.buffer = this.buffer.slice(lineEnd + 1)
        const more = /\{(\d+)\+?\}\r?\n$/.exec(rest)
        if (more) this.skipping = Number(more[1])
        continue
      }
      if (this.literalEnd > 0) {
        if (this.buffer.length < this.literalEnd) return out
        this.scanned = this.literalEnd
        this.literalEnd = 0
      }
      const lineEnd = this.buffer.indexOf("\n", this.scanned)
      if (lineEnd < 0) {
        this.scanned = this.buffer.length
        if (this.buffer.length > this.limitFor(this.buffer)) {
          out.push(this.tooLong(this.buffer))
          this.buffer = ""
          this.scanned = 0
        }
        return out
      }
      const line = this.buffer.slice(0, lineEnd + 1)
      const announced = /\{(\d+)(\+?)\}\r?\n$/.exec(line)
      if (announced === null) {
        this.buffer = this.buffer.slice(lineEnd + 1)
        this.scanned = 0
        if (line.length > this.limitFor(line)) out.push(this.tooLong(line))
        else out.push({ kind: "command", bytes: line })
        continue
      }
      const length = Number(announced[1])
      if (lineEnd + 1 + length > this.limitFor(line)) {
        out.push(this.tooLong(line))
        this.buffer = this.buffer.slice(lineEnd + 1)
        this.scanned = 0
        // A synchronising literal was never invited, so the client sends none; LITERAL+'s comes anyway.
        this.skipping = announced[2] === "+" ? length : 0
        continue
      }
      // The command goes on after the literal, once its bytes are here.
      if (announced[2] !== "+" && this.buffer.length < lineEnd + 1 + length) out.push({ kind: "continue" })
      this.literalEnd = lineEnd + 1 + length
    }
  }
}

/** Written as it is: a keyword, a flag, a section name. */
export class Raw {
  constructor(readonly text: string) {}
}
/** Always written as a literal: a message's bytes. */
export class Literal {
  constructor(readonly text: string) {}
}
export type Out = null | string | number | Raw | Literal | ReadonlyArray<Out>

/**
 * A literal of `text`. No literal holds NUL (RFC 3501 §4.3, §9: CHAR8 begins at %x01), and a message
 * kept as received may: each NUL is served as a space, a byte for a byte, so RFC822.SIZE and partial
 * fetches' offsets stay those of the stored message (the API's raw download keeps it). BINARY (RFC
 * 3516), which could carry it, is not offered.
 */
const literal = (text: string) => `{${text.length}}\r\n${text.replaceAll("\u0000", " ")}`

/** One value in IMAP's syntax, as a byte string. */
export const serialize = (value: Out): string => {
  if (value === null) return "NIL"
  if (typeof value === "number") return String(value)
  if (value instanceof Raw) return value.text
  if (value instanceof Literal) return literal(value.text)
  if (typeof value === "string") {
    // eslint-disable-next-line no-control-regex
    return value.length <= 1024 && !/[\u0000-\u001f\u007f-\u00ff]/.test(value)
      ? `"${value.replace(/["\\]/g, (c) => "\\" + c)}"`
      : literal(value)
  }
  return `(${value.map(serialize).join(" ")})`
}

/** A sequence set (`1:4,7,9:*`), as ranges; `*` is Infinity until it is resolved against a mailbox. */
export type SequenceSet = ReadonlyArray<readonly [number, number]>

export const parseSequenceSet = (text: string): SequenceSet | undefined => {
  const ranges: Array<readonly [number, number]> = []
  for (const piece of text.split(",")) {
    const match = /^(\d+|\*)(?::(\d+|\*))?$/.exec(piece)
    if (!match) return undefined
    const from = match[1] === "*" ? Infinity : Number(match[1])
    const to = match[2] === undefined ? from : match[2] === "*" ? Infinity : Number(match[2])
    if (from === 0 || to === 0 || !Number.isSafeInteger(from) && from !== Infinity || !Number.isSafeInteger(to) && to !== Infinity) return undefined
    ranges.push([from, to])
  }
  return ranges
}

/** Whether `n` is in `set`, where `*` stands for `largest` (the mailbox's last sequence number or UID). */
export const inSequenceSet = (set: SequenceSet, n: number, largest: number): boolean =>
  set.some(([from, to]) => {
    const a = from === Infinity ? largest : from
    const b = to === Infinity ? largest : to
    return n >= Math.min(a, b) && n <= Math.max(a, b)
  })

/** A set of numbers as a sequence set, runs joined (`1:3,5`): for COPYUID and the like. */
export const formatSequenceSet = (numbers: ReadonlyArray<number>): string => {
  const sorted = [...numbers].sort((a, b) => a - b)
  const runs: Array<string> = []
  let i = 0
  while (i < sorted.length) {
    let j = i
    while (j + 1 < sorted.length && sorted[j + 1] === sorted[j]! + 1) j++
    runs.push(i === j ? String(sorted[i]) : `${sorted[i]}:${sorted[j]}`)
    i = j + 1
  }
  return runs.join(",")
}

/** A mailbox name in RFC 3501 §5.1.3's modified UTF-7 (what clients send and expect without UTF8=ACCEPT). */
export const encodeMailboxName = (name: string): string =>
  name.replace(/&/g, "&-").replace(/[^\x20-\x7e]+/g, (run) => {
    const bytes = Buffer.alloc(run.length * 2)
    for (let i = 0; i < run.length; i++) bytes.writeUInt16BE(run.charCodeAt(i), i * 2)
    return "&" + bytes.toString("base64").replace(/=+$/, "").replace(/\//g, ",") + "-"
  })

export const decodeMailboxName = (name: string): string =>
  name.replace(/&([^-]*)-/g, (_, encoded: string) => {
    if (encoded.length === 0) return "&"
    const bytes = Buffer.from(encoded.replace(/,/g, "/"), "base64")
    let text = ""
    for (let i = 0; i + 1 < bytes.length; i += 2) text += String.fromCharCode(bytes.readUInt16BE(i))
    return text
  })

const months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

/** INTERNALDATE's form: `25-Nov-2026 09:30:00 +0000`. */
export const formatInternalDate = (date: Date): string => {
  const two = (n: number) => String(n).padStart(2, "0")
  return `${two(date.getUTCDate())}-${months[date.getUTCMonth()]}-${date.getUTCFullYear()} ` +
    `${two(date.getUTCHours())}:${two(date.getUTCMinutes())}:${two(date.getUTCSeconds())} +0000`
}

/** A SEARCH date (`1-Feb-2026`) as the UTC midnight it starts, or undefined. */
export const parseSearchDate = (text: string): Date | undefined => {
  const match = /^(\d{1,2})-([A-Za-z]{3})-(\d{4})$/.exec(text)
  if (!match) return undefined
  const month = months.findIndex((name) => name.toLowerCase() === match[2]!.toLowerCase())
  const [day, year] = [Number(match[1]), Number(match[3])]
  if (month < 0 || !isRealWallTime({ year, month: month + 1, day, hour: 0, minute: 0, second: 0 })) return undefined
  return new Date(utcTime(year, month, day))
}

/**
 * Text for a response line: one line (a line break a client wrote, quoted back, would end the line
 * early), never ending in what reads as a literal's announcement (`{7}`).
 */
export const answerText = (text: string): string => text.replace(/[\r\n]+/g, " ").replace(/\{(\d+\+?)\}$/, "($1)")
