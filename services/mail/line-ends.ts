/**
 * Mail's line ends are CRLF (RFC 5322 §2.1, RFC 5321 §2.3.8), and what Mailroom keeps of a message is
 * served as it is kept: IMAP must send CRLF throughout (RFC 3501 §4.3), with RFC822.SIZE and partial
 * offsets counting the bytes it sends, and the stored size is what those count. So the MX stores a
 * message whose sender wrote bare LFs with CRLFs, once, as submission does (outbound/submitted.ts),
 * rather than every reader mending it and every size being recomputed as it is served.
 */

const LF = 0x0a
const CR = 0x0d

/** `raw` with each bare LF made CRLF; `raw` itself when it has none (the usual case costs one scan). */
export const withCrlf = (raw: Buffer): Buffer => {
  let bare = 0
  for (let i = 0; i < raw.length; i++) if (raw[i] === LF && (i === 0 || raw[i - 1] !== CR)) bare++
  if (bare === 0) return raw
  const out = Buffer.allocUnsafe(raw.length + bare)
  let at = 0
  for (let i = 0; i < raw.length; i++) {
    const byte = raw[i]!
    if (byte === LF && (i === 0 || raw[i - 1] !== CR)) out[at++] = CR
    out[at++] = byte
  }
  return out
}
