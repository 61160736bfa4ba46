/**
 * Text parts' bytes as the characters they stand for: attachments read as text (attachment-texts.ts)
 * and calendars (invitations, the schedule). The charset the part's Content-Type named, kept with the
 * attachment, decides; a byte-order mark outranks it (it cannot be wrong about UTF-16); without either,
 * UTF-8 when the bytes are UTF-8, else Windows-1252, the charset undeclared mail is most often in.
 * Decoded by iconv-lite, as mailparser decodes bodies (Node's own TextDecoder reads Windows-1252 as
 * ISO-8859-1: no € for 0x80), to which the 7-bit charsets it lacks are added here: HZ (RFC 1843) and
 * ISO-2022-KR (RFC 1557), read through its GB2312 and EUC-KR tables, and ISO-2022-JP (RFC 1468), read
 * through EUC-JP, so bodies, encoded words and attachments in them read as their characters
 * (mailparser reads ISO-2022-JP bodies and encoded words itself, through encoding-japanese, before
 * it asks iconv-lite).
 */
import iconv from "iconv-lite"
import { TextDecoder } from "node:util"
import { once } from "../once.ts"

/** The charset a byte-order mark at the start of `bytes` says, and the mark's length. */
const byteOrderMark = (bytes: Uint8Array): { readonly charset: string; readonly length: number } | undefined => {
  if (bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) return { charset: "utf-8", length: 3 }
  if (bytes[0] === 0xff && bytes[1] === 0xfe) return { charset: "utf-16le", length: 2 }
  if (bytes[0] === 0xfe && bytes[1] === 0xff) return { charset: "utf-16be", length: 2 }
  return undefined
}

const strictUtf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true })

/** `bytes` as UTF-8 when they are, else as Windows-1252 (in which every byte means a character). */
const undeclared = (bytes: Buffer): string => {
  try {
    return strictUtf8.decode(bytes)
  } catch {
    return iconv.decode(bytes, "windows-1252")
  }
}

/**
 * `bytes` decoded by `charset` (null: none declared; one no decoder knows counts as none), without
 * NUL characters, which PostgreSQL text cannot hold (parse.ts drops them from bodies alike).
 */
export const decodeText = (bytes: Uint8Array, charset: string | null): string => {
  const mark = byteOrderMark(bytes)
  const body = Buffer.from(bytes.buffer, bytes.byteOffset + (mark?.length ?? 0), bytes.byteLength - (mark?.length ?? 0))
  const declared = mark?.charset ?? (charset !== null && iconv.encodingExists(charset.trim()) ? charset.trim() : undefined)
  const text = declared === undefined ? undeclared(body) : iconv.decode(body, declared, { stripBOM: false })
  return text.replaceAll("\u0000", "")
}

/** How many bytes the UTF-8 character starting at `at` takes, or 0 when none starts there (RFC 3629). */
const utf8Length = (bytes: Uint8Array, at: number): number => {
  const lead = bytes[at]!
  const [length, low, high] = lead >= 0xc2 && lead <= 0xdf ? [2, 0x80, 0xbf]
    : lead === 0xe0 ? [3, 0xa0, 0xbf]
    : lead === 0xed ? [3, 0x80, 0x9f]
    : lead >= 0xe1 && lead <= 0xef ? [3, 0x80, 0xbf]
    : lead === 0xf0 ? [4, 0x90, 0xbf]
    : lead >= 0xf1 && lead <= 0xf3 ? [4, 0x80, 0xbf]
    : lead === 0xf4 ? [4, 0x80, 0x8f]
    : [0, 0, 0]
  if (length === 0 || at + length > bytes.length) return 0
  if (bytes[at + 1]! < low || bytes[at + 1]! > high) return 0
  for (let i = 2; i < length; i++) if (bytes[at + i]! < 0x80 || bytes[at + i]! > 0xbf) return 0
  return length
}

/** Where the first byte of `bytes` that starts no UTF-8 character (RFC 3629) is; their length when every one does. */
export const firstInvalidUtf8 = (bytes: Uint8Array): number => {
  let at = 0
  while (at < bytes.length) {
    const length = bytes[at]! < 0x80 ? 1 : utf8Length(bytes, at)
    if (length === 0) return at
    at += length
  }
  return at
}

/**
 * `bytes` with each run of bytes that are no part of a UTF-8 character read as Windows-1252 and
 * written in UTF-8; valid UTF-8 stays as it is. The bytes themselves when all of them are UTF-8.
 * For a whole message whose 8-bit text was sent without a charset (parse.ts): the base64 and
 * quoted-printable parts are ASCII, so only the 8-bit ones change.
 */
export const legacyBytesAsUtf8 = (bytes: Buffer): Buffer => {
  const parts: Array<Buffer> = []
  let copied = 0
  let at = 0
  while (at < bytes.length) {
    const length = bytes[at]! < 0x80 ? 1 : utf8Length(bytes, at)
    if (length > 0) {
      at += length
      continue
    }
    const run = at
    while (at < bytes.length && bytes[at]! >= 0x80 && utf8Length(bytes, at) === 0) at++
    parts.push(bytes.subarray(copied, run), Buffer.from(iconv.decode(bytes.subarray(run, at), "windows-1252"), "utf8"))
    copied = at
  }
  if (parts.length === 0) return bytes
  parts.push(bytes.subarray(copied))
  return Buffer.concat(parts)
}

/**
 * The charset name text parts are labelled with to be read as UTF-8 whose bytes that are no UTF-8 read
 * as Windows-1252, each run by itself (`legacyBytesAsUtf8`): what 8-bit text gets, for text sent
 * quoted-printable or base64 too (parse.ts). Registered with iconv-lite below, which mailparser decodes by.
 */
export const LENIENT_UTF8 = "x-mailroom-utf-8-lenient"

/** The codec iconv-lite reads LENIENT_UTF8 with: a part's bytes gathered, then read whole (a character may span chunks). */
class LenientUtf8Codec {
  decoder = class {
    private readonly chunks: Array<Buffer> = []
    write(chunk: Buffer): string {
      this.chunks.push(chunk)
      return ""
    }
    end(): string {
      return legacyBytesAsUtf8(Buffer.concat(this.chunks)).toString("utf8")
    }
  }
  encoder = class {
    write(text: string): Buffer {
      return Buffer.from(text, "utf8")
    }
    end(): undefined {
      return undefined
    }
  }
}

/** U+FFFD, what a malformed byte of HZ or ISO-2022-KR is read as. */
const REPLACEMENT = 0xfffd
const LF = 0x0a
const CR = 0x0d
const TILDE = 0x7e

/** Whether `byte` is one of the 94 graphic bytes (0x21 to 0x7E) a 94 × 94 set's row or cell is written as. */
const graphic = (byte: number | undefined): byte is number => byte !== undefined && byte >= 0x21 && byte <= 0x7e

/**
 * The characters of a 94 × 94 double-byte set (GB2312, KS X 1001) by row and cell (index 94 × row +
 * cell, each from 0), read through `euc`, the iconv-lite charset that writes them with their high bits
 * set; U+FFFD for each code no character has (iconv-lite reads those as U+FFFD and more). Read once,
 * on first use, with a line end after each code, so that an unassigned one cannot take the next one's bytes.
 */
const doubleByteSet = (euc: string): () => Uint16Array =>
  once(() => {
    const bytes = Buffer.alloc(94 * 94 * 3)
    for (let code = 0; code < 94 * 94; code++) {
      bytes[code * 3] = 0xa1 + Math.floor(code / 94)
      bytes[code * 3 + 1] = 0xa1 + (code % 94)
      bytes[code * 3 + 2] = LF
    }
    const read = iconv.decode(bytes, euc).split("\n").slice(0, 94 * 94)
    return Uint16Array.from(read, (character) => (character.length === 1 ? character.charCodeAt(0) : REPLACEMENT))
  })

const gb2312 = doubleByteSet("gb2312")
const ksx1001 = doubleByteSet("euc-kr")

/** The character of a 94 × 94 `set` whose row and cell are written `row` and `cell` (0x21 to 0x7E). */
const character = (set: Uint16Array, row: number, cell: number) => set[(row - 0x21) * 94 + cell - 0x21]!

/** UTF-16 code units as text (in slices: a spread of millions would pass the call stack's limit). */
const unitsText = (units: Uint16Array, length: number): string => {
  const slices: Array<string> = []
  for (let at = 0; at < length; at += 8192) slices.push(String.fromCharCode(...units.subarray(at, Math.min(length, at + 8192))))
  return slices.join("")
}

/**
 * HZ (RFC 1843: GB2312 in 7 bits, for mail and news) as the characters it stands for. In ASCII mode
 * `~~` is a tilde, `~` and a line end are no character (a line continued), `~{` starts GB mode and a
 * `~}` there (already in ASCII) changes nothing; in GB mode `~}` ends it and each two bytes are a
 * GB2312 character, its row and cell without their high bits. Malformed input loses only its own
 * bytes, each as U+FFFD: a `~` before anything else, a byte with its high bit set (HZ has none), a GB
 * byte without its pair (one before a `~}` too: that `~}` still ends GB mode), a code of no character.
 * A line end in GB mode (RFC 1843 has GB mode closed before one) goes back to ASCII.
 */
export const decodeHz = (bytes: Uint8Array): string => {
  // Each byte makes at most one UTF-16 code unit (GB2312 is all in the BMP).
  const out = new Uint16Array(bytes.length)
  let length = 0
  let gb = false
  let at = 0
  while (at < bytes.length) {
    const byte = bytes[at]!
    const next = bytes[at + 1]
    if (byte === LF || byte === CR) {
      gb = false
      out[length++] = byte
      at++
    } else if (!gb && byte === TILDE) {
      if (next === TILDE) out[length++] = TILDE
      else if (next === 0x7b) gb = true
      if (next === TILDE || next === 0x7b || next === 0x7d || next === LF) at += 2
      else if (next === CR && bytes[at + 2] === LF) at += 3
      else {
        out[length++] = REPLACEMENT
        at++
      }
    } else if (!gb) {
      out[length++] = byte < 0x80 ? byte : REPLACEMENT
      at++
    } else if (byte === TILDE && next === 0x7d) {
      gb = false
      at += 2
    } else if (graphic(byte) && graphic(next) && !(next === TILDE && bytes[at + 2] === 0x7d)) {
      out[length++] = character(gb2312(), byte, next)
      at += 2
    } else {
      // A space or control character stands for itself; anything else is a byte out of place.
      out[length++] = byte < 0x21 ? byte : REPLACEMENT
      at++
    }
  }
  return unitsText(out, length)
}

/** ESC, SO and SI (ISO 2022's escape and its shifts out of ASCII and back). */
const ESC = 0x1b
const SO = 0x0e
const SI = 0x0f

/**
 * ISO-2022-KR (RFC 1557: KS C 5601, now KS X 1001, in 7 bits) as the characters it stands for.
 * `ESC $ ) C` designates KS X 1001 (once, at a line's start); SO shifts into it and SI back to ASCII;
 * in it each two bytes are a character, its row and cell without their high bits, and a space stays
 * a space. A line end goes back to ASCII, as RFC 1557 closes each line's shifts before its end. SO
 * shifts whether or not the designation came first: KS X 1001 is the one set ISO-2022-KR designates
 * (an encoded word often leaves it out). Malformed input loses only its own bytes, each as U+FFFD: an
 * escape sequence other than the designation (ISO 2022's syntax: ESC, bytes 0x20 to 0x2F, a final
 * byte), a byte with its high bit set, a shifted byte without its pair, a code of no character.
 */
export const decodeIso2022Kr = (bytes: Uint8Array): string => {
  // Each byte makes at most one UTF-16 code unit (KS X 1001 is all in the BMP).
  const out = new Uint16Array(bytes.length)
  let length = 0
  let korean = false
  let at = 0
  while (at < bytes.length) {
    const byte = bytes[at]!
    const next = bytes[at + 1]
    if (byte === ESC && next === 0x24 && bytes[at + 2] === 0x29 && bytes[at + 3] === 0x43) {
      at += 4
    } else if (byte === ESC) {
      at++
      while (at < bytes.length && bytes[at]! >= 0x20 && bytes[at]! <= 0x2f) at++
      if (at < bytes.length && bytes[at]! >= 0x30 && bytes[at]! <= 0x7e) at++
      out[length++] = REPLACEMENT
    } else if (byte === SO || byte === SI) {
      korean = byte === SO
      at++
    } else if (byte === LF || byte === CR) {
      korean = false
      out[length++] = byte
      at++
    } else if (byte >= 0x80) {
      out[length++] = REPLACEMENT
      at++
    } else if (korean && graphic(byte)) {
      out[length++] = graphic(next) ? character(ksx1001(), byte, next) : REPLACEMENT
      at += graphic(next) ? 2 : 1
    } else {
      out[length++] = byte
      at++
    }
  }
  return unitsText(out, length)
}

/**
 * A codec iconv-lite reads a 7-bit charset with by `decode`: a part's bytes gathered, then read whole
 * (a shift may come chunks before the characters it governs). Only for reading received mail:
 * nothing here writes these charsets, and nothing asks iconv-lite to.
 */
const sevenBitCodec = (decode: (bytes: Uint8Array) => string, name: string) =>
  class {
    decoder = class {
      private readonly chunks: Array<Buffer> = []
      write(chunk: Buffer): string {
        this.chunks.push(chunk)
        return ""
      }
      end(): string {
        return decode(Buffer.concat(this.chunks))
      }
    }
    encoder = class {
      write(): Buffer {
        throw new Error(`Mail is not written in ${name} here`)
      }
      end(): undefined {
        return undefined
      }
    }
  }

iconv.getCodec("utf-8") // iconv-lite loads its table of encodings on first use: then ours are added to it.
{
  const encodings = (iconv as unknown as { encodings: Record<string, unknown> }).encodings
  encodings[LENIENT_UTF8.replace(/[^0-9a-z]/g, "")] = LenientUtf8Codec
  // RFC 1843's HZ, as IANA names it (HZ-GB-2312) and as mail programs label it.
  encodings["hzgb2312"] = sevenBitCodec(decodeHz, "HZ")
  encodings["hz"] = "hzgb2312"
  // RFC 1557's ISO-2022-KR, and its IANA alias.
  encodings["iso2022kr"] = sevenBitCodec(decodeIso2022Kr, "ISO-2022-KR")
  encodings["csiso2022kr"] = "iso2022kr"
  // RFC 1468's ISO-2022-JP, its IANA alias, and the names of its extensions (-1, -2, -3, -ext) and of
  // JIS, which mail programs label it with: what is read of them is ISO-2022-JP's sets and katakana.
  encodings["iso2022jp"] = sevenBitCodec((bytes) => iconv.decode(iso2022jpAsEucJp(bytes), "euc-jp"), "ISO-2022-JP")
  for (const alias of ["csiso2022jp", "iso2022jp1", "iso2022jp2", "csiso2022jp2", "iso2022jp3", "iso2022jpext", "jis", "jisencoding"]) {
    encodings[alias] = "iso2022jp"
  }
}

/** A Content-Type header of a text part, folded lines included (a binary string, a character a byte). */
const TEXT_CONTENT_TYPE = /^Content-Type:[ \t]*text\/[^\r\n]*(?:\r?\n[ \t][^\r\n]*)*/gim

const UTF8_CHARSET = /(charset\s*=\s*)(?:"utf-?8"|'utf-?8'|utf-?8)(?=[\s;]|$)/i

/**
 * `message` with every text part that names no charset or names UTF-8 labelled LENIENT_UTF8 (and,
 * when the message has no Content-Type at all, labelled text/plain so): for text sent
 * quoted-printable or base64 whose bytes (after the transfer encoding) are not all UTF-8, so that
 * its UTF-8 characters read as UTF-8 and only its other bytes as Windows-1252, what such mail is
 * nearly always written in, as the same bytes sent 8-bit are read (parse.ts). The message itself when
 * no part lacks a charset or names UTF-8.
 */
export const labelledLenientUtf8 = (message: Buffer): Buffer => {
  const text = message.toString("latin1")
  const headEnd = text.search(/\r?\n\r?\n/)
  const head = headEnd === -1 ? text : text.slice(0, headEnd)
  let changed = false
  const labelled = text.replace(TEXT_CONTENT_TYPE, (header) => {
    if (UTF8_CHARSET.test(header)) {
      changed = true
      return header.replace(UTF8_CHARSET, `$1${LENIENT_UTF8}`)
    }
    if (/charset\s*=/i.test(header)) return header
    changed = true
    return `${header.replace(/[\s;]+$/, "")}; charset=${LENIENT_UTF8}`
  })
  if (!/^Content-Type:/im.test(head)) return Buffer.from(`Content-Type: text/plain; charset=${LENIENT_UTF8}\r\n${labelled}`, "latin1")
  return changed ? Buffer.from(labelled, "latin1") : message
}

/** The charset a `<meta charset=…>` or `<meta http-equiv="Content-Type" content="text/html; charset=…">` names. */
const META_CHARSET = /<meta\b[^>]*?\bcharset\s*=\s*["']?\s*([\w.:+-]+)/i

/**
 * The charset an HTML document's start names in a meta tag, as a browser takes it (HTML §13.2.3.2):
 * UTF-16, which a document whose meta tag reads as ASCII cannot be in, is UTF-8. Undefined when it
 * names none, or one no decoder knows.
 */
export const htmlMetaCharset = (html: string): string | undefined => {
  const named = META_CHARSET.exec(html)?.[1]?.toLowerCase()
  if (named === undefined) return undefined
  const charset = /^utf-?16/.test(named) ? "utf-8" : named === "x-user-defined" ? "windows-1252" : named
  return iconv.encodingExists(charset) ? charset : undefined
}

/** How much of an html part's start is looked through for its meta tag (browsers look at 1,024 bytes; mail's heads run longer). */
const META_SCAN_BYTES = 8 * 1024

/** The first bytes of a part's body `text` (a binary string) undone from `encoding`, as a binary string. */
const bodyStart = (text: string, encoding: string): string => {
  if (encoding === "base64") {
    const letters = text.replace(/[^A-Za-z0-9+/]/g, "")
    return Buffer.from(letters.slice(0, letters.length - (letters.length % 4)), "base64").toString("latin1")
  }
  if (encoding === "quoted-printable") {
    return text.replace(/=\r?\n/g, "").replace(/=([0-9a-f]{2})/gi, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)))
  }
  return text
}

/**
 * `message` with each text/html part whose Content-Type names no charset labelled with the charset
 * its own `<meta>` tag names (`<meta charset="Shift_JIS">`, or the http-equiv form), as browsers and
 * mail programs read such html: a charset the Content-Type names stands. The message itself when no
 * such part names one. Its html is read so (parse.ts), and an html attachment keeps that charset.
 */
export const withHtmlMetaCharsets = (message: Buffer): Buffer => {
  const text = message.toString("latin1")
  let changed = false
  const labelled = text.replace(TEXT_CONTENT_TYPE, (header, at: number) => {
    if (!/^Content-Type:[ \t]*text\/html\b/i.test(header) || /charset\s*=/i.test(header)) return header
    // The part's header block: from the line after the last blank or boundary line before it, to the first blank line after.
    const before = text.slice(0, at)
    const blockStart = Math.max(before.lastIndexOf("\n\n"), before.lastIndexOf("\n\r\n"), before.lastIndexOf("\n--"), 0)
    const blank = /\r?\n\r?\n/.exec(text.slice(at))
    if (blank === null) return header
    const bodyAt = at + blank.index + blank[0].length
    const encoding = /^Content-Transfer-Encoding:[ \t]*([^\s;]+)/im.exec(text.slice(blockStart, bodyAt))?.[1]?.toLowerCase() ?? "7bit"
    const scanned = text.slice(bodyAt, bodyAt + META_SCAN_BYTES * (encoding === "base64" ? 2 : 3))
    const boundary = scanned.search(/\r?\n--/)
    const charset = htmlMetaCharset(bodyStart(boundary === -1 ? scanned : scanned.slice(0, boundary), encoding).slice(0, META_SCAN_BYTES))
    if (charset === undefined) return header
    changed = true
    return `${header.replace(/[\s;]+$/, "")}; charset="${charset}"`
  })
  return changed ? Buffer.from(labelled, "latin1") : message
}

/**
 * ISO-2022-JP's bytes (RFC 1468: escape sequences switch between ASCII and JIS X 0208; JIS X 0212 and
 * half-width katakana too) as the EUC-JP bytes of the same characters, which iconv-lite reads. A line
 * end goes back to ASCII, as RFC 1468 has every line end in it.
 */
const iso2022jpAsEucJp = (bytes: Uint8Array): Buffer => {
  const out: Array<number> = []
  let set: "ascii" | "jis0208" | "jis0212" | "katakana" = "ascii"
  const sequence = (at: number, text: string) => text.split("").every((c, i) => bytes[at + i] === c.charCodeAt(0))
  for (let at = 0; at < bytes.length; at++) {
    const byte = bytes[at]!
    if (byte === 0x1b) {
      const next = [["$B", "jis0208"], ["$@", "jis0208"], ["$(D", "jis0212"], ["(B", "ascii"], ["(J", "ascii"], ["(I", "katakana"]] as const
      const found = next.find(([text]) => sequence(at + 1, text))
      if (found !== undefined) {
        set = found[1]
        at += found[0].length
        continue
      }
    }
    const pair = byte >= 0x21 && byte <= 0x7e && bytes[at + 1] !== undefined && bytes[at + 1]! >= 0x21 && bytes[at + 1]! <= 0x7e
    if ((set === "jis0208" || set === "jis0212") && pair) {
      if (set === "jis0212") out.push(0x8f)
      out.push(byte | 0x80, bytes[++at]! | 0x80)
    } else if (set === "katakana" && byte >= 0x21 && byte <= 0x5f) {
      out.push(0x8e, byte | 0x80)
    } else {
      if (byte === 0x0a || byte === 0x0d) set = "ascii"
      out.push(byte)
    }
  }
  return Buffer.from(out)
}

/** An escape sequence of ISO-2022-JP (into JIS X 0208 or 0212, or back to ASCII): header text written in it raw. */
const ISO_2022_JP_ESCAPE = /\x1b(?:\$[@B]|\$\(D|\([BJI])/

/** ISO-2022-KR's designation of KS C 5601, or its shift into it (SO) before a character: header text written in it raw. */
// eslint-disable-next-line no-control-regex
const ISO_2022_KR_SHIFT = /\x1b\$\)C|\x0e[\x21-\x7e]{2}/

/** Whether `charset` names HZ (RFC 1843), as iconv-lite reads the name. */
const isHz = (charset: string | undefined) => charset !== undefined && /^(?:hzgb2312|hz)$/.test(charset.toLowerCase().replace(/[^0-9a-z]/g, ""))

/**
 * 7-bit header text read in the ISO-2022 charset whose escapes or shifts it holds (ISO-2022-JP's, ISO-2022-KR's),
 * or in HZ when the message's text is in HZ (`declared`) and the text holds a `~{` that reads as GB2312;
 * else as it is. Undefined when none of those applies.
 */
const sevenBitHeaderText = (text: string, declared: string | undefined): string | undefined => {
  const bytes = Buffer.from(text, "latin1")
  if (ISO_2022_JP_ESCAPE.test(text)) return iconv.decode(bytes, "iso-2022-jp")
  if (ISO_2022_KR_SHIFT.test(text)) return decodeIso2022Kr(bytes)
  if (isHz(declared) && text.includes("~{")) {
    const read = decodeHz(bytes)
    if (!read.includes("\ufffd")) return read
  }
  return undefined
}

/** Whether `charset` reads ASCII as ASCII (header text around 8-bit bytes is ASCII: not UTF-16's, nor UTF-7's). */
const asciiCompatible = (charset: string) => {
  const ascii = "Subject: Re: a-z A-Z 0-9 <ann@example.com> (=?_\"'.,;)"
  return iconv.encodingExists(charset) && iconv.decode(Buffer.from(ascii, "latin1"), charset) === ascii
}

/** C1 control characters (U+0080 to U+009F): what Latin-1 makes of Windows-1252's and other charsets' bytes. */
// eslint-disable-next-line no-control-regex
const C1_CONTROLS = /[\u0080-\u009f]/

/**
 * The charset the text parts of `message` name (the first that does, a binary string's Content-Type
 * lines), when it is one raw 8-bit header text can be read by: a charset other than UTF-8 and ASCII
 * that reads ASCII as ASCII. What such a sender's headers are most likely in too (headerBytesText).
 */
export const declaredTextCharset = (message: Buffer): string | undefined => {
  for (const [header] of message.toString("latin1").matchAll(TEXT_CONTENT_TYPE)) {
    const charset = /charset\s*=\s*["']?([^"'\s;]+)/i.exec(header)?.[1]?.toLowerCase()
    if (charset === undefined) continue
    if (/^(?:utf-?8|us-?ascii|ascii)$/.test(charset) || !asciiCompatible(charset)) return undefined
    return charset
  }
  return undefined
}

/**
 * Header text its sender wrote raw, not in encoded words (`bytes`): with no 8-bit byte, ISO-2022-JP
 * or ISO-2022-KR when it holds that charset's escape sequences or shifts, HZ when the message's text is
 * in HZ and it holds HZ's `~{` (sevenBitHeaderText), else as it is; else UTF-8 when its bytes are (RFC 6532, what
 * SMTPUTF8 mail carries); else in `declared`, the charset the message's text names
 * (declaredTextCharset), when they read as that with no character lost nor any C1 control character;
 * else Windows-1252, each run of bytes that are no UTF-8, as 8-bit body text without a charset is
 * (its “quotes” and € included, which Latin-1 would have as control characters).
 */
export const headerBytesText = (bytes: Uint8Array, declared: string | undefined): string => {
  const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const eightBit = buffer.some((byte) => byte >= 0x80)
  if (!eightBit) {
    const text = buffer.toString("latin1")
    return sevenBitHeaderText(text, declared) ?? text
  }
  if (firstInvalidUtf8(buffer) === buffer.length) return buffer.toString("utf8")
  if (declared !== undefined) {
    const text = iconv.decode(buffer, declared)
    if (!text.includes("\ufffd") && !C1_CONTROLS.test(text)) return text
  }
  return legacyBytesAsUtf8(buffer).toString("utf8")
}
