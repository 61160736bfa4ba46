/**
 * Attachments' text in process, over the suite's migrated database: which attachments can be read
 * and how (attachment-text.ts, pure), reading one for the API (a PDF read once per file and kept,
 * unreadable ones and why, 404 across accounts), every readable one of a batch for search, and the
 * reader's thread held to its deadline and memory. The route and MCP tool are test/search/search.test.ts's
 * and test/api/mcp.test.ts's subject.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { type Duration, Effect, Layer } from "effect"
import * as DocumentReaderLive from "../../layers/document-reader.ts"
import { AttachmentUnreadable, NotFound } from "../../services/errors.ts"
import { type DocumentFormat, DocumentReader, formatOf, MAX_TEXT_CHARS } from "../../services/mail/attachment-text.ts"
import { AttachmentTexts, readInline } from "../../services/mail/attachment-texts.ts"
import { testDatabase } from "../support/database.ts"
import { makeDocx, zip } from "../support/docx.ts"
import { makePdf } from "../support/pdf.ts"
import { insertEmail, insertMailbox, type Mailbox, storeBlob } from "../support/seed-mail.ts"
import { uniqueName } from "../support/services.ts"
import { insertUser } from "../support/users.ts"

/** Documents the reader was asked to read, by this suite's counting reader. */
let documentReads = 0
const countingReader = Layer.effect(DocumentReader, Effect.map(DocumentReader, (reader) => ({
  ...reader,
  read: (format: DocumentFormat, bytes: Uint8Array) => Effect.zipRight(Effect.sync(() => void documentReads++), reader.read(format, bytes))
}))).pipe(Layer.provide(DocumentReaderLive.layer))

const services = AttachmentTexts.Default.pipe(
  Layer.provide(countingReader),
  Layer.provideMerge(testDatabase)
)

const text = (value: string) => new TextEncoder().encode(value)

/** An email in `mailbox` with these attachments; answers its id and the attachments' ids, in order. */
const withAttachments = (mailbox: Mailbox, attachments: ReadonlyArray<{ filename: string | null; contentType: string; bytes: Uint8Array }>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const { id: emailId } = yield* insertEmail(mailbox, { subject: "With attachments", receivedMinutesAgo: 1 })
    const ids: Array<string> = []
    for (const [position, attachment] of attachments.entries()) {
      const checksum = yield* storeBlob(attachment.bytes)
      const id = uniqueName("att")
      yield* sql`INSERT INTO attachments (id, email_id, position, filename, content_type, size, checksum)
                 VALUES (${id}, ${emailId}, ${position}, ${attachment.filename}, ${attachment.contentType}, ${attachment.bytes.length}, ${checksum})`
      ids.push(id)
    }
    return { emailId, ids }
  })

const invoice = makePdf(["Invoice 42\nTotal due: 450 EUR", "Thank you for your business"])

layer(services, { timeout: 60_000 })("attachment texts", (it) => {
  it("reads PDFs by their bytes, Word, HTML and text by their type, Word and text also by a name; nothing else", () => {
    expect(formatOf("application/octet-stream", "scan", invoice)).toBe("pdf")
    expect(formatOf("application/vnd.openxmlformats-officedocument.wordprocessingml.document", null, text("PK"))).toBe("docx")
    expect(formatOf("application/zip", "Contract.DOCX", text("PK"))).toBe("docx")
    expect(formatOf("application/zip", "archive.zip", text("PK"))).toBeUndefined()
    expect(formatOf("application/msword", "old.doc", text("\xd0\xcf"))).toBeUndefined()
    expect(formatOf("application/pdf", null, text("not a pdf"))).toBeUndefined()
    expect(formatOf("text/html; charset=utf-8", null, text("<p>hi</p>"))).toBe("html")
    expect(formatOf("text/csv", null, text("a,b"))).toBe("text")
    expect(formatOf("application/vnd.api+json", null, text("{}"))).toBe("text")
    expect(formatOf("application/octet-stream", "notes.md", text("# Notes"))).toBe("text")
    expect(formatOf("application/octet-stream", "photo.jpg", text("\xff\xd8"))).toBeUndefined()
    expect(formatOf("image/png", "a.png", text("\x89PNG"))).toBeUndefined()
    // Decoded by the charset the type named (charsets.ts); HTML as a reader sees it.
    expect(readInline("text", "iso-8859-1", Uint8Array.of(0x63, 0x61, 0x66, 0xe9)).text).toBe("café")
    expect(readInline("text", "no-such", text("plain")).text).toBe("plain")
    expect(readInline("html", null, text("<style>p{}</style><p>Hello <b>there</b></p>")).text).toBe("Hello there")
    const long = readInline("text", null, text("x".repeat(MAX_TEXT_CHARS + 10)))
    expect([long.text.length, long.truncated]).toEqual([MAX_TEXT_CHARS, true])
  })

  it.effect("reads a PDF's pages once per file and keeps them; the same file in another email is not read again", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const texts = yield* AttachmentTexts
      const mailbox = yield* insertMailbox(yield* insertUser())
      const first = yield* withAttachments(mailbox, [{ filename: "invoice.pdf", contentType: "application/octet-stream", bytes: invoice }])
      const second = yield* withAttachments(mailbox, [{ filename: "copy.pdf", contentType: "application/pdf", bytes: invoice }])
      const before = documentReads
      const read = yield* texts.read(mailbox.owner.userId, first.emailId, first.ids[0]!)
      expect(read).toEqual({
        attachment_id: first.ids[0],
        filename: "invoice.pdf",
        content_type: "application/octet-stream",
        size: invoice.byteLength,
        format: "pdf",
        text: "Invoice 42\nTotal due: 450 EUR\n\nThank you for your business",
        characters: "Invoice 42\nTotal due: 450 EUR\n\nThank you for your business".length,
        pages: 2,
        truncated: false
      })
      const again = yield* texts.read(mailbox.owner.userId, second.emailId, second.ids[0]!)
      expect([again.text, again.filename, documentReads - before]).toEqual([read.text, "copy.pdf", 1])
      // Asked for at once (an agent told of new mail while the indexer reads it): read once.
      const memo = makePdf(["Memo: the offsite moves to Friday"])
      const third = yield* withAttachments(mailbox, [{ filename: "memo.pdf", contentType: "application/pdf", bytes: memo }])
      const fourth = yield* withAttachments(mailbox, [{ filename: "memo.pdf", contentType: "application/pdf", bytes: memo }])
      const readsBefore = documentReads
      const both = yield* Effect.all([
        texts.read(mailbox.owner.userId, third.emailId, third.ids[0]!),
        texts.ofEmails([fourth.emailId])
      ], { concurrency: 2 })
      expect([both[0].text, both[1].get(fourth.emailId), documentReads - readsBefore]).toEqual([
        "Memo: the offsite moves to Friday",
        ["Memo: the offsite moves to Friday"],
        1
      ])
      const kept = yield* sql<{ reader: string; pages: number }>`SELECT reader, pages FROM document_texts WHERE text LIKE 'Invoice 42%'`
      expect(kept).toHaveLength(1)
      expect(kept[0]!.reader).toMatch(/^pdf\.js \d+\.\d+/)
    }))

  it.effect("reads a Word document's paragraphs; says why one has none: damaged, or protected by a password", () =>
    Effect.gen(function*() {
      const texts = yield* AttachmentTexts
      const mailbox = yield* insertMailbox(yield* insertUser())
      const docx = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
      const email = yield* withAttachments(mailbox, [
        { filename: "contract.docx", contentType: docx, bytes: makeDocx(["Contract for services", "Fee: 1,200 EUR & VAT"]) },
        { filename: "notes.docx", contentType: "application/octet-stream", bytes: zip([["notes.txt", Buffer.from("not a document")]]) },
        {
          filename: "secret.docx",
          contentType: docx,
          bytes: new Uint8Array(Buffer.concat([Buffer.from("d0cf11e0a1b11ae1", "hex"), Buffer.alloc(512), Buffer.from("EncryptedPackage", "utf16le")]))
        }
      ])
      const contract = yield* texts.read(mailbox.owner.userId, email.emailId, email.ids[0]!)
      expect(contract).toMatchObject({ format: "docx", text: "Contract for services\n\nFee: 1,200 EUR & VAT", pages: null, truncated: false })
      const reasons = []
      for (const id of email.ids.slice(1)) {
        const error = yield* Effect.flip(texts.read(mailbox.owner.userId, email.emailId, id))
        if (!(error instanceof AttachmentUnreadable)) return expect.fail(`expected ATTACHMENT_UNREADABLE, got ${String(error)}`)
        reasons.push([error.message, error.details?.["reason"]])
      }
      expect(reasons).toEqual([
        ["The document is damaged or is not what its type says: its text cannot be read", "damaged"],
        ["The document is protected by a password: its text cannot be read", "encrypted"]
      ])
    }))

  it.effect("says why an attachment has no text: its type, a password, damage; 404 for another account's", () =>
    Effect.gen(function*() {
      const texts = yield* AttachmentTexts
      const mailbox = yield* insertMailbox(yield* insertUser())
      const email = yield* withAttachments(mailbox, [
        { filename: "photo.png", contentType: "image/png", bytes: Uint8Array.of(0x89, 0x50, 0x4e, 0x47) },
        { filename: "statement.pdf", contentType: "application/pdf", bytes: makePdf(["Balance: 1,000"], { password: "s3cret" }) },
        { filename: "broken.pdf", contentType: "application/pdf", bytes: text("%PDF-1.7\nnothing else") },
        // Called a PDF, by its type or by its name only, and no PDF at all.
        { filename: "invoice.pdf", contentType: "application/pdf", bytes: text("Not a PDF") },
        { filename: "invoice.pdf", contentType: "application/octet-stream", bytes: text("Not a PDF either") }
      ])
      const refusal = (id: string) => Effect.flip(texts.read(mailbox.owner.userId, email.emailId, id))
      const reasons = []
      for (const id of email.ids) {
        const error = yield* refusal(id)
        if (!(error instanceof AttachmentUnreadable)) return expect.fail(`expected ATTACHMENT_UNREADABLE, got ${String(error)}`)
        expect([error.status, error.code]).toEqual([422, "ATTACHMENT_UNREADABLE"])
        reasons.push(error.details)
      }
      expect(reasons).toEqual([
        { email_id: email.emailId, attachment_id: email.ids[0], content_type: "image/png", reason: "unsupported_type" },
        { email_id: email.emailId, attachment_id: email.ids[1], content_type: "application/pdf", reason: "encrypted" },
        { email_id: email.emailId, attachment_id: email.ids[2], content_type: "application/pdf", reason: "damaged" },
        { email_id: email.emailId, attachment_id: email.ids[3], content_type: "application/pdf", reason: "damaged" },
        { email_id: email.emailId, attachment_id: email.ids[4], content_type: "application/octet-stream", reason: "damaged" }
      ])
      // Why is kept too: the damaged file is not read again.
      const before = documentReads
      yield* refusal(email.ids[2]!)
      expect(documentReads).toBe(before)
      const stranger = yield* insertUser()
      const notFound = yield* Effect.flip(texts.read(stranger.userId, email.emailId, email.ids[0]!))
      if (!(notFound instanceof NotFound)) return expect.fail(`expected NOT_FOUND, got ${String(notFound)}`)
      expect(notFound.details).toEqual({ email_id: email.emailId, attachment_id: email.ids[0] })
    }))

  it.effect("gives search every readable attachment's text, by email, in order", () =>
    Effect.gen(function*() {
      const texts = yield* AttachmentTexts
      const mailbox = yield* insertMailbox(yield* insertUser())
      const one = yield* withAttachments(mailbox, [
        { filename: "notes.txt", contentType: "text/plain", bytes: text("Plain notes") },
        { filename: "photo.png", contentType: "image/png", bytes: Uint8Array.of(0x89, 0x50) },
        { filename: "report.pdf", contentType: "application/pdf", bytes: makePdf(["Quarterly report: zeolite yields"]) },
        { filename: "page.html", contentType: "text/html", bytes: text("<h1>Agenda</h1><p>Offsite</p>") },
        // Mail forwarded as an attachment: what a reader of it is shown.
        {
          filename: "forwarded.eml",
          contentType: "message/rfc822",
          bytes: text([
            "From: Lab <lab@example.com>", "To: ada@example.com", "Subject: Zebrafish results", "MIME-Version: 1.0",
            "Content-Type: multipart/mixed; boundary=x", "", "--x", "Content-Type: text/plain", "", "The zebrafish grew.", "--x",
            "Content-Type: image/png", "Content-Disposition: attachment; filename=fish.png", "Content-Transfer-Encoding: base64", "", "iVBORw==",
            "--x--", ""
          ].join("\r\n"))
        }
      ])
      const two = yield* withAttachments(mailbox, [{ filename: null, contentType: "application/pdf", bytes: text("%PDF-1.4 broken") }])
      const found = yield* texts.ofEmails([one.emailId, two.emailId])
      expect(Object.fromEntries(found)).toEqual({
        [one.emailId]: [
          "Plain notes",
          "Quarterly report: zeolite yields",
          "AGENDA\n\nOffsite",
          "From: Lab <lab@example.com>\nTo: ada@example.com\nSubject: Zebrafish results\nAttachments: fish.png\n\nThe zebrafish grew."
        ]
      })
    }))
})

const stubReader = (deadline: Duration.DurationInput) =>
  DocumentReaderLive.layerWith({ script: new URL("../fixtures/document-reader-stub.mjs", import.meta.url), deadline })

// The real clock: the deadline is the reader's own.
layer(stubReader("3 seconds"), { timeout: 60_000, excludeTestServices: true })("the reader's process", (it) => {
  it.effect("fails a document past its deadline or its memory as too_complex, then reads the next in a new process", () =>
    Effect.gen(function*() {
      const reader = yield* DocumentReader
      const started = Date.now()
      const slow = yield* Effect.flip(reader.read("pdf", text("%PDF- HANG")))
      expect(slow.reason).toBe("too_complex")
      expect(Date.now() - started).toBeLessThan(8_000)
      expect(yield* reader.read("pdf", text("%PDF- fine"))).toEqual({ text: "read 10 bytes", pages: 1, truncated: false })
      const hungry = yield* Effect.flip(reader.read("pdf", text("%PDF- OOM")))
      expect([hungry.reason, hungry.message]).toEqual(["too_complex", expect.stringMatching(/memory/i)])
      expect(yield* reader.read("pdf", text("%PDF- again"))).toEqual({ text: "read 11 bytes", pages: 1, truncated: false })
    }))
})
