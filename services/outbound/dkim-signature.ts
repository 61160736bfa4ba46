/**
 * A DKIM signature (RFC 6376) on a message we built: rsa-sha256, relaxed/relaxed canonicalization.
 *
 * The RSA operation runs on libuv's thread pool (`crypto.sign` with a callback), off the event loop
 * that serves requests, with a key parsed once (a `KeyObject`): a 2048-bit signature costs ~0.3 ms
 * of CPU, and parsing the PEM for each one (as nodemailer's signer does) another ~0.4.
 */
import { Effect } from "effect"
import { createHash, type KeyObject, sign } from "node:crypto"

export interface DkimKey {
  readonly domainName: string
  readonly keySelector: string
  readonly privateKey: KeyObject
}

/**
 * The fields signed when present (RFC 6376 §5.4.1's list of what a message is recognized by). Each
 * is also listed once more than it occurs, which signs its absence: a field added in transit (a
 * second Subject, a Reply-To) breaks the signature instead of being shown beside it.
 */
const SIGNED_FIELDS = [
  "from", "sender", "reply-to", "subject", "date", "message-id", "to", "cc", "mime-version", "content-type",
  "content-transfer-encoding", "in-reply-to", "references", "list-id", "list-unsubscribe", "list-unsubscribe-post"
]

const CRLF = "\r\n"

/** A header field's relaxed form (§3.4.2): the name lower-cased, the value unfolded, its runs of white space one space. */
const relaxedField = (name: string, value: string) =>
  `${name.trim().toLowerCase()}:${value.replace(/\r\n/g, "").replace(/[ \t]+/g, " ").trim()}${CRLF}`

/** The body's relaxed form (§3.4.4): white space runs one space, none at line ends, no empty lines at the end. */
export const relaxedBody = (body: string): string => {
  const lines = body.split(CRLF).map((line) => line.replace(/[ \t]+/g, " ").replace(/ $/, ""))
  while (lines.length > 0 && lines[lines.length - 1] === "") lines.pop()
  return lines.length === 0 ? "" : lines.join(CRLF) + CRLF
}

interface Field {
  readonly name: string
  readonly value: string
}

/** The header's fields, in order, each with its value as written (folds kept). */
const fieldsOf = (header: string): Array<Field> => {
  const fields: Array<Field> = []
  for (const line of header.split(CRLF)) {
    if ((line.startsWith(" ") || line.startsWith("\t")) && fields.length > 0) {
      const last = fields[fields.length - 1]!
      fields[fields.length - 1] = { name: last.name, value: `${last.value}${CRLF}${line}` }
      continue
    }
    const colon = line.indexOf(":")
    if (colon > 0) fields.push({ name: line.slice(0, colon), value: line.slice(colon + 1) })
  }
  return fields
}

/**
 * The signature's tags as its field's value (each ending in `;`), folded so that no line passes 78
 * characters (RFC 5322 §2.1.1: a server may cut or refuse a longer one, and a line cut breaks the
 * signature): between tags, and within `h=` after a colon, where §3.5 allows white space. A sender's
 * many `X-…` fields make a long `h=`.
 */
const foldedTags = (tags: ReadonlyArray<string>): string => {
  const pieces = tags.flatMap((tag) => {
    if (!tag.startsWith("h=")) return [`${tag};`]
    const names = tag.split(":")
    return names.map((name, i) => (i < names.length - 1 ? `${name}:` : `${name};`))
  })
  let value = ""
  let column = "DKIM-Signature:".length
  for (const [i, piece] of pieces.entries()) {
    // A space after each tag; none between h='s names, unless folded there.
    const gap = i === 0 || pieces[i - 1]!.endsWith(";") ? " " : ""
    if (column + gap.length + piece.length > 76) {
      value += `${CRLF} ${piece}`
      column = 1 + piece.length
    } else {
      value += gap + piece
      column += gap.length + piece.length
    }
  }
  return value
}

const signature = (data: Buffer, key: KeyObject) =>
  Effect.async<string, Error>((resume) => {
    sign("sha256", data, key, (error, signed) => resume(error ? Effect.fail(error) : Effect.succeed(signed.toString("base64"))))
  })

/**
 * `raw` (CRLF line ends, as the composer writes them) with a DKIM-Signature field in front. `alsoSigned`:
 * the names of further fields to sign where present (a sender's own `X-…` fields), each instance as it
 * is, without signing the absence of another (filters on the way add fields of their own).
 */
export const dkimSign = (raw: Buffer, key: DkimKey, now: Date, alsoSigned: ReadonlyArray<string> = []): Effect.Effect<Buffer, Error> =>
  Effect.gen(function*() {
    const text = raw.toString("latin1")
    const end = text.indexOf(CRLF + CRLF)
    const header = end < 0 ? text : text.slice(0, end)
    const body = end < 0 ? "" : text.slice(end + 4)
    const bodyHash = createHash("sha256").update(relaxedBody(body), "latin1").digest("base64")

    const fields = fieldsOf(header)
    const signed: Array<string> = []
    let canonical = ""
    const further = new Set(alsoSigned.map((name) => name.trim().toLowerCase()).filter((name) => !SIGNED_FIELDS.includes(name)))
    const listed = [...SIGNED_FIELDS.map((name) => ({ name, absence: true })), ...[...further].map((name) => ({ name, absence: false }))]
    for (const { absence, name } of listed) {
      const instances = fields.filter((field) => field.name.trim().toLowerCase() === name)
      if (instances.length === 0) continue
      // Bottom-up, as verifiers pair repeated names with instances (§5.4.2), and (the standard list)
      // one more for none.
      for (const field of instances.reverse()) canonical += relaxedField(field.name, field.value)
      signed.push(...instances.map(() => name), ...(absence ? [name] : []))
    }
    const tags = [
      "v=1", "a=rsa-sha256", "c=relaxed/relaxed", `d=${key.domainName}`, `s=${key.keySelector}`,
      `t=${Math.floor(now.getTime() / 1000)}`, `bh=${bodyHash}`, `h=${signed.join(":")}`
    ]
    const value = `${foldedTags(tags)}${CRLF} b=`
    canonical += relaxedField("DKIM-Signature", value).slice(0, -CRLF.length)
    const b = yield* signature(Buffer.from(canonical, "latin1"), key.privateKey)
    // Folded every 72 characters: white space inside b= is ignored by verifiers (§3.5).
    const folded = b.replace(/.{72}(?=.)/g, `$&${CRLF} `)
    return Buffer.concat([Buffer.from(`DKIM-Signature:${value}${folded}${CRLF}`, "latin1"), raw])
  })
