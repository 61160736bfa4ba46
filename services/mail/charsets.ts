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
