/**
 * PDFs for the suites, written out here so that what they hold is plain to read: one page per text
 * given, each line a line of Helvetica. `password` encrypts the file with the standard security
 * handler (revision 2, RC4 40-bit: the oldest any reader opens), as a bank statement protected by a
 * password is; a reader then needs the password to read it.
 */
import { createHash } from "node:crypto"

/** RC4, which PDF's standard security handler uses (OpenSSL 3 keeps it out of Node's ciphers). */
const rc4 = (key: Uint8Array, data: Uint8Array): Uint8Array => {
  const s = Array.from({ length: 256 }, (_, i) => i)
  for (let i = 0, j = 0; i < 256; i++) {
    j = (j + s[i]! + key[i % key.length]!) & 255
    ;[s[i], s[j]] = [s[j]!, s[i]!]
  }
  const out = new Uint8Array(data.length)
  for (let n = 0, i = 0, j = 0; n < data.length; n++) {
    i = (i + 1) & 255
    j = (j + s[i]!) & 255
    ;[s[i], s[j]] = [s[j]!, s[i]!]
    out[n] = data[n]! ^ s[(s[i]! + s[j]!) & 255]!
  }
  return out
}

const md5 = (...parts: ReadonlyArray<Uint8Array>) => {
  const hash = createHash("md5")
  for (const part of parts) hash.update(part)
  return new Uint8Array(hash.digest())
}

/** The standard security handler's padding (PDF 32000-1, 7.6.3.3). */
const PADDING = Buffer.from("28BF4E5E4E758A4164004E56FFFA01082E2E00B6D0683E802F0CA9FE6453697A", "hex")
const padded = (password: string) => Buffer.concat([Buffer.from(password, "latin1"), PADDING]).subarray(0, 32)

const hex = (bytes: Uint8Array) => `<${Buffer.from(bytes).toString("hex")}>`

/** Encryption by revision 2 for `password` (the owner's the same): the dictionary and each object's key. */
const encryption = (password: string, fileId: Uint8Array) => {
  const owner = rc4(md5(padded(password)).subarray(0, 5), padded(password))
  const permissions = -4 // every permission
  const p = Buffer.alloc(4)
  p.writeInt32LE(permissions)
  const key = md5(padded(password), owner, p, fileId).subarray(0, 5)
  const user = rc4(key, PADDING)
  return {
    dictionary: `<< /Filter /Standard /V 1 /R 2 /O ${hex(owner)} /U ${hex(user)} /P ${permissions} >>`,
    objectKey: (id: number) =>
      md5(key, Uint8Array.of(id & 255, (id >> 8) & 255, (id >> 16) & 255, 0, 0)).subarray(0, Math.min(16, key.length + 5))
  }
}

const escape = (line: string) => line.replace(/[\\()]/g, (c) => `\\${c}`)

/** A PDF of `pages`, each a text of lines; encrypted with `password` when given. */
export const makePdf = (pages: ReadonlyArray<string>, options: { readonly password?: string } = {}): Uint8Array => {
  const fileId = md5(Buffer.from(pages.join("\f")))
  const encrypt = options.password === undefined ? undefined : encryption(options.password, fileId)
  // Objects: 1 catalog, 2 pages, 3 font, then a content stream and a page per page.
  const objects: Array<(id: number) => Buffer> = []
  const plain = (body: string) => objects.push(() => Buffer.from(body, "latin1"))
  plain("<< /Type /Catalog /Pages 2 0 R >>")
  const pageIds = pages.map((_, i) => 5 + 2 * i)
  plain(`<< /Type /Pages /Kids [${pageIds.map((id) => `${id} 0 R`).join(" ")}] /Count ${pages.length} >>`)
  plain("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
  for (const [i, text] of pages.entries()) {
    const content = Buffer.from(
      text.split("\n").map((line, n) => `BT /F1 12 Tf 72 ${720 - 16 * n} Td (${escape(line)}) Tj ET`).join("\n"),
      "latin1"
    )
    objects.push((id) => {
      const stream = encrypt ? Buffer.from(rc4(encrypt.objectKey(id), content)) : content
      return Buffer.concat([Buffer.from(`<< /Length ${stream.length} >>\nstream\n`, "latin1"), stream, Buffer.from("\nendstream", "latin1")])
    })
    plain(`<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents ${4 + 2 * i} 0 R /Resources << /Font << /F1 3 0 R >> >> >>`)
  }
  if (encrypt) plain(encrypt.dictionary)
  const chunks: Array<Buffer> = [Buffer.from("%PDF-1.4\n", "latin1")]
  let length = chunks[0]!.length
  const offsets = objects.map((body, i) => {
    const offset = length
    const chunk = Buffer.concat([Buffer.from(`${i + 1} 0 obj\n`, "latin1"), body(i + 1), Buffer.from("\nendobj\n", "latin1")])
    chunks.push(chunk)
    length += chunk.length
    return offset
  })
  const id = hex(fileId)
  const trailer = [
    `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n`,
    ...offsets.map((offset) => `${String(offset).padStart(10, "0")} 00000 n \n`),
    `trailer\n<< /Size ${objects.length + 1} /Root 1 0 R /ID [${id} ${id}]${encrypt ? ` /Encrypt ${objects.length} 0 R` : ""} >>\n`,
    `startxref\n${length}\n%%EOF\n`
  ].join("")
  return new Uint8Array(Buffer.concat([...chunks, Buffer.from(trailer, "latin1")]))
}
