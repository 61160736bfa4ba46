// The DocumentReader's process (layers/document-reader.ts), started with its own session
// (`detached`) and behind the server's work (background-priority.mjs): reads the text of one
// document at a time, PDFs with Mozilla's pdf.js, Word documents (.docx) with mammoth. It is sent
// { id, format, bytes, maxPages, maxChars } over the IPC channel and answers { id, text, pages,
// truncated } or { id, reason, message }. Nothing it reads runs: pdf.js is told to evaluate no code,
// load no fonts and fetch nothing (only the cmaps it ships, for CJK text, are read); mammoth reads
// the document's XML and follows no link. It exits when that channel closes, so it never outlives
// the process that started it.
import mammoth from "mammoth"
import { createRequire } from "node:module"
import * as path from "node:path"
import { lowerPriority } from "./background-priority.mjs"

// The nice value to run at, the one argument the server passes; the parent is told whether it held.
process.send({ id: -1, niced: lowerPriority(Number(process.argv[2] ?? "0")) })
process.on("disconnect", () => process.exit(0))

const require = createRequire(import.meta.url)
// Loaded while the first job is on its way, and awaited by it: no top-level await, so the job
// listener below is in place before the event loop first turns and reads the channel.
const pdfjsLoading = import("pdfjs-dist/legacy/build/pdf.mjs")
pdfjsLoading.catch(() => undefined) // a failed load fails each PDF's reading instead
// pdf.js reads these as files when given a path (in Node).
const root = path.dirname(require.resolve("pdfjs-dist/package.json"))
const cMapUrl = path.join(root, "cmaps") + path.sep
const standardFontDataUrl = path.join(root, "standard_fonts") + path.sep

/** A page's text: its items in reading order, a line break where pdf.js saw a line end. */
const pageText = (content) => {
  let text = ""
  for (const item of content.items) {
    if (typeof item.str !== "string") continue
    text += item.str
    if (item.hasEOL) text += "\n"
  }
  return text.replace(/[ \t]+\n/g, "\n").trim()
}

const readPdf = async ({ bytes, maxPages, maxChars }) => {
  const pdfjs = await pdfjsLoading
  const task = pdfjs.getDocument({
    // pdf.js refuses a Buffer (what the bytes arrive as when the server read them from the database).
    data: new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength),
    isEvalSupported: false,
    disableFontFace: true,
    useSystemFonts: false,
    enableXfa: false,
    cMapUrl,
    cMapPacked: true,
    standardFontDataUrl,
    verbosity: 0
  })
  const document = await task.promise
  try {
    const pages = document.numPages
    const texts = []
    let characters = 0
    let truncated = pages > maxPages
    for (let number = 1; number <= Math.min(pages, maxPages); number++) {
      const page = await document.getPage(number)
      const text = pageText(await page.getTextContent())
      page.cleanup()
      if (text.length > 0) texts.push(text)
      characters += text.length + 2
      if (characters > maxChars) {
        truncated = true
        break
      }
    }
    return { text: texts.join("\n\n"), pages, truncated }
  } finally {
    await document.destroy()
  }
}

/** An OLE file holding an EncryptedPackage stream: how Word stores a .docx protected by a password. */
const ENCRYPTED_PACKAGE = Buffer.from("EncryptedPackage", "utf16le")
const isEncryptedOffice = (bytes) =>
  bytes[0] === 0xd0 && bytes[1] === 0xcf && bytes[2] === 0x11 && bytes[3] === 0xe0 && Buffer.from(bytes).includes(ENCRYPTED_PACKAGE)

class Encrypted extends Error {}

const readDocx = async ({ bytes, maxChars }) => {
  if (isEncryptedOffice(bytes)) throw new Encrypted("The document is protected by a password")
  const { value } = await mammoth.extractRawText({ buffer: Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength) })
  const text = value.replace(/\n{3,}/g, "\n\n").trim()
  return { text: text.slice(0, maxChars), pages: null, truncated: text.length > maxChars }
}

const reasonOf = (error) => (error?.name === "PasswordException" || error instanceof Encrypted ? "encrypted" : "damaged")

process.on("message", async (job) => {
  try {
    process.send({ id: job.id, ...(await (job.format === "docx" ? readDocx(job) : readPdf(job))) })
  } catch (error) {
    process.send({ id: job.id, reason: reasonOf(error), message: String(error?.message ?? error) })
  }
})
