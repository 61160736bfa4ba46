/**
 * Text parts' bytes as the characters they stand for: attachments read as text (attachment-texts.ts)
 * and calendars (invitations, the schedule). The charset the part's Content-Type named, kept with the
 * attachment, decides; a byte-order mark outranks it (it cannot be wrong about UTF-16); without either,
 * UTF-8 when the bytes are UTF-8, else Windows-1252, the charset undeclared mail is most often in.
 * Decoded by iconv-lite, as mailparser decodes bodies (Node's own TextDecoder reads Windows-1252 as
 * ISO-8859-1: no € for 0x80).
 */
import iconv from "iconv-lite"
import { TextDecoder } from "node:util"

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

/** Whether `text`, read as Windows-1252, was bytes that are UTF-8 (so reading it so was wrong: "ï¿½" for U+FFFD). */
export const readsAsUtf8 = (text: string): boolean => {
  const bytes = iconv.encode(text, "windows-1252")
  return firstInvalidUtf8(bytes) === bytes.length
}

/** A Content-Type header of a text part, folded lines included (a binary string, a character a byte). */
const TEXT_CONTENT_TYPE = /^Content-Type:[ \t]*text\/[^\r\n]*(?:\r?\n[ \t][^\r\n]*)*/gim

/**
 * `message` with every text part that names no charset labelled Windows-1252, and, when the message
 * has no Content-Type at all, labelled text/plain in Windows-1252: for text sent quoted-printable or
 * base64 without a charset, whose bytes (after the transfer encoding) are no UTF-8, so that a parser
 * reads them as what such mail is nearly always written in (parse.ts). The message itself when no
 * part lacks a charset.
 */
export const labelledWindows1252 = (message: Buffer): Buffer => relabelled(message, false)

/**
 * `message` with every text part labelled UTF-8 labelled Windows-1252 instead: for text sent
 * quoted-printable or base64 whose charset says UTF-8 and whose bytes are not (parse.ts reads it so
 * only when the first reading lost characters). The message itself when no part names UTF-8.
 */
export const utf8RelabelledWindows1252 = (message: Buffer): Buffer => relabelled(message, true)

const UTF8_CHARSET = /(charset\s*=\s*)(?:"utf-?8"|'utf-?8'|utf-?8)(?=[\s;]|$)/i

/** Text parts labelled Windows-1252: those that name no charset, or (`utf8`) those that name UTF-8. */
const relabelled = (message: Buffer, utf8: boolean): Buffer => {
  const text = message.toString("latin1")
  const headEnd = text.search(/\r?\n\r?\n/)
  const head = headEnd === -1 ? text : text.slice(0, headEnd)
  let changed = false
  const labelled = text.replace(TEXT_CONTENT_TYPE, (header) => {
    if (utf8) {
      if (!UTF8_CHARSET.test(header)) return header
      changed = true
      return header.replace(UTF8_CHARSET, "$1windows-1252")
    }
    if (/charset\s*=/i.test(header)) return header
    changed = true
    return `${header.replace(/[\s;]+$/, "")}; charset=windows-1252`
  })
  if (!utf8 && !/^Content-Type:/im.test(head)) return Buffer.from(`Content-Type: text/plain; charset=windows-1252\r\n${labelled}`, "latin1")
  return changed ? Buffer.from(labelled, "latin1") : message
}
