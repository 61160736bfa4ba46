/**
 * The Content-Type an outgoing attachment is written with (RFC 2045 §5.1): its media type, and for a
 * text one the charset its bytes are in, without which a mail program reads them as US-ASCII (RFC 2046
 * §4.1.2) or guesses, and shows `Caf� cr�me` for Latin-1 `Café crème`.
 *
 * A sender may name the charset (`text/plain; charset=iso-8859-1`); no other parameter is taken: the
 * composer writes `name` from the filename, a `boundary` or `method` would change what the part is, and
 * a parameter Mailroom neither writes nor reads is only a way to smuggle text into a header. A text
 * attachment named without a charset whose bytes are UTF-8, and not ASCII alone, is labelled utf-8:
 * UTF-8 that is not ASCII almost never happens by chance in another charset, so the label is what the
 * sender meant; ASCII needs none (it is the default), and other bytes are left unlabelled rather than
 * labelled by a guess. A forward carries the charset each attachment came with (stored with it).
 */
import { TextDecoder } from "node:util"

/** A type or subtype name (RFC 6838 §4.2 restricted-name characters). */
const NAME = "[a-z0-9!#$&^_.+-]+"
const MEDIA_TYPE = new RegExp(`^${NAME}/${NAME}$`, "i")
/** A parameter name: an RFC 2045 token. */
const PARAMETER = /^([a-z0-9!#$%&'*+.^_`{|}~-]+)[ \t]*=[ \t]*(.*)$/i
/**
 * A charset name as IANA registers them (utf-8, iso-8859-1, shift_jis, ANSI_X3.4-1968): letters, digits
 * and - _ . +, at most 40. Any such name, not only those Mailroom can decode (iconv-lite has no
 * iso-2022-jp, which Japanese mail is often in): the recipient's mail program reads it, not Mailroom.
 */
const CHARSET = /^[a-z0-9._+-]{1,40}$/i

/** The longest content_type taken. */
export const MAX_CONTENT_TYPE = 255

export interface ContentType {
  /** `type/subtype`, lower case. */
  readonly essence: string
  /** Lower case, without quotes. */
  readonly charset?: string | undefined
}

/** A charset value as given: a name, bare or in double quotes. */
const charsetName = (value: string): string | undefined => {
  const bare = value.replace(/^"(.*)"$/, "$1")
  return CHARSET.test(bare) ? bare.toLowerCase() : undefined
}

/** `value` read as a content_type, or what is wrong with it: the message a 400 names the field with. */
export const readContentType = (value: string): ContentType | string => {
  const malformed = "must be a media type such as application/pdf, with a charset for text if you like: text/plain; charset=utf-8"
  if (value.length > MAX_CONTENT_TYPE) return `must be at most ${MAX_CONTENT_TYPE} characters`
  // Only spaces and tabs: a CR, LF or other control character never reaches a header.
  if (/[\u0000-\u0008\u000a-\u001f\u007f-\uffff]/.test(value)) return malformed
  const [head, ...rest] = value.split(";")
  const essence = head!.trim()
  if (!MEDIA_TYPE.test(essence)) return malformed
  let charset: string | undefined
  for (const part of rest) {
    const parameter = PARAMETER.exec(part.trim())
    if (parameter === null) return malformed
    const name = parameter[1]!.toLowerCase()
    if (name !== "charset") return `may carry a charset parameter only: ${JSON.stringify(parameter[1])} is not taken`
    if (charset !== undefined) return "must name one charset"
    charset = charsetName(parameter[2]!)
    if (charset === undefined) return `must name its charset as a name such as utf-8 or iso-8859-1 (letters, digits and - _ . +, at most 40)`
  }
  return { essence: essence.toLowerCase(), charset }
}

const strictUtf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true })

/** Whether `bytes` are UTF-8 holding at least one character beyond ASCII. */
const isUtf8BeyondAscii = (bytes: Uint8Array): boolean => {
  if (bytes.every((byte) => byte < 0x80)) return false
  try {
    strictUtf8.decode(bytes)
    return true
  } catch {
    return false
  }
}

/**
 * The Content-Type an attachment goes with: `given` (already checked, or stored: an unreadable one is
 * sent as opaque bytes), else `byName`, the type its filename suggests (the composer's guess: this
 * module is the API schemas', which the client package carries, so it imports no mail library), and
 * for text its charset as above. Undefined: nothing to add to what the composer works out from the filename.
 */
export const outgoingContentType = (given: string | undefined, byName: string, bytes: Uint8Array): string | undefined => {
  const read = given === undefined ? undefined : readContentType(given)
  const type: ContentType | undefined = typeof read === "string" ? { essence: "application/octet-stream" } : read
  const essence = type?.essence ?? byName.toLowerCase()
  const charset = type?.charset ?? (essence.startsWith("text/") && isUtf8BeyondAscii(bytes) ? "utf-8" : undefined)
  if (charset !== undefined) return `${essence}; charset=${charset}`
  return type === undefined ? undefined : essence
}

/**
 * A stored attachment's content type with the charset it came with (kept by the inbound parser): what
 * a forward sends it as. A charset that is no well-formed name is left off, as the download does.
 */
export const storedContentType = (contentType: string, charset: string | null): string => {
  const name = charset === null ? undefined : charsetName(charset.trim())
  return name === undefined ? contentType : `${contentType}; charset=${name}`
}
