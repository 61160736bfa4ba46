/**
 * The charset of outgoing text attachments (services/outbound/attachment-types.ts) in process, over the
 * suite's migrated database: a forward (and a draft forwarding) sends each attachment with the charset
 * it came in, and the sent copy keeps it; a sender may name one (`text/plain; charset=iso-8859-1`) and
 * nothing else in content_type, refused by field otherwise; text named without one is labelled utf-8
 * when its bytes are UTF-8 beyond ASCII, and left as it is otherwise. Checked on the message's bytes as
 * composed and stored (what every recipient gets) and on the sent copy's stored attachments.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { simpleParser } from "mailparser"
import { decodeBody } from "../../src/http/surface.ts"
import { Drafts } from "../../services/outbound/drafts.ts"
import { Replies } from "../../services/outbound/replies.ts"
import { DraftInput, ForwardInput, ReplyInput, SendInput } from "../../services/outbound/schemas.ts"
import { fromSendInput, Outbound } from "../../services/outbound/send.ts"
import { testDatabase } from "../support/database.ts"
import { inProcessOutbound } from "../support/outbound-services.ts"
import { insertEmail, insertMailbox } from "../support/seed-mail.ts"
import { insertUser } from "../support/users.ts"

const latin1 = Buffer.from("Caf\xe9 cr\xe8me, 12 \xa4", "latin1")
const utf8 = Buffer.from("Numéro 8812 – 99 €")
const ascii = Buffer.from("quarter,revenue\nQ3,42\n")

/** The sent email `emailId` as stored: each attachment part's Content-Type and bytes as sent, and each stored attachment's charset. */
const sent = (emailId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [raw] = yield* sql<{ content: Uint8Array }>`SELECT b.content FROM emails e JOIN blobs b ON b.sha256 = e.raw_sha256 WHERE e.id = ${emailId}`
    const parsed = yield* Effect.promise(() => simpleParser(Buffer.from(raw!.content)))
    const stored = yield* sql<{ filename: string; contentType: string; charset: string | null }>`
      SELECT filename, content_type, charset FROM attachments WHERE email_id = ${emailId} ORDER BY position`
    return {
      parts: parsed.attachments.map((a) => ({
        filename: a.filename,
        contentType: (a.headers.get("content-type") as { value: string; params: Record<string, string> }).value,
        charset: (a.headers.get("content-type") as { params: Record<string, string> }).params.charset,
        content: a.content
      })),
      // As the download serves them (src/http/emails/http.ts): the type with the stored charset.
      stored: stored.map((a) => [a.filename, a.contentType, a.charset])
    }
  })

const withReplies = Replies.Default.pipe(Layer.provideMerge(inProcessOutbound))

layer(testDatabase, { timeout: "120 seconds" })("outgoing attachment charsets", (it) => {
  it.layer(withReplies)("forwarding", (it) => {
    it.effect("a forward, and a draft forwarding, send each attachment with the charset it came in, and the sent copy keeps it", () =>
      Effect.gen(function*() {
        const replies = yield* Replies
        const drafts = yield* Drafts
        const sql = yield* SqlClient.SqlClient
        const owner = yield* insertUser("pro")
        const box = yield* insertMailbox(owner)
        const original = yield* insertEmail(box, {
          subject: "Notes",
          receivedMinutesAgo: 5,
          text: "See attached.",
          attachments: [
            { filename: "notes.txt", contentType: "text/plain", charset: "iso-8859-1", bytes: latin1 },
            { filename: "facture-été.txt", contentType: "text/plain", charset: "utf-8", bytes: utf8 },
            // Stored before charsets were kept, or named none: Latin-1 bytes stay unlabelled (no guess).
            { filename: "old.txt", contentType: "text/plain", bytes: latin1 },
            // A charset no well-formed name: left off, as the download leaves it off.
            { filename: "odd.txt", contentType: "text/plain", charset: "utf-8\"; name=evil.exe", bytes: ascii },
            { filename: "q3.csv", contentType: "text/csv", bytes: ascii }
          ]
        })
        const expected = [
          { filename: "notes.txt", contentType: "text/plain", charset: "iso-8859-1", content: latin1 },
          { filename: "facture-été.txt", contentType: "text/plain", charset: "utf-8", content: utf8 },
          { filename: "old.txt", contentType: "text/plain", charset: undefined, content: latin1 },
          { filename: "odd.txt", contentType: "text/plain", charset: undefined, content: ascii },
          { filename: "q3.csv", contentType: "text/csv", charset: undefined, content: ascii }
        ]
        const storedCopy = [
          ["notes.txt", "text/plain", "iso-8859-1"],
          ["facture-été.txt", "text/plain", "utf-8"],
          ["old.txt", "text/plain", null],
          ["odd.txt", "text/plain", null],
          ["q3.csv", "text/csv", null]
        ]

        const forwarded = yield* replies.forward(owner.userId, original.id, { to: ["accounting@customer.test"], text: "fyi" })
        expect(yield* sent(forwarded.email_id)).toEqual({ parts: expected, stored: storedCopy })

        const draft = yield* drafts.create(owner.userId, box.mailboxId, { forward_of: original.id, to: ["accounting@customer.test"], text: "fyi" })
        yield* drafts.send(owner.userId, box.mailboxId, draft.draft_id)
        const [row] = yield* sql<{ emailId: string }>`SELECT email_id FROM drafts WHERE id = ${draft.draft_id}`
        expect(yield* sent(row!.emailId)).toEqual({ parts: expected, stored: storedCopy })
      }))
  })

  it.layer(inProcessOutbound)("sending", (it) => {
    it.effect("content_type's charset is written as named (type and name in lower case); text without one is utf-8 when its bytes are UTF-8 beyond ASCII", () =>
      Effect.gen(function*() {
        const sending = yield* Outbound
        const owner = yield* insertUser("pro")
        const box = yield* insertMailbox(owner)
        const decode = decodeBody(SendInput, "api")
        const input = yield* decode({
          to: ["customer@customer.test"],
          subject: "Files",
          text: "Attached.",
          attachments: [
            { filename: "latin.txt", content_type: "text/plain; charset=iso-8859-1", content: latin1.toString("base64") },
            { filename: "quoted.txt", content_type: "Text/Plain ; Charset = \"UTF-8\"", content: utf8.toString("base64") },
            { filename: "guessed.txt", content_type: "text/plain", content: utf8.toString("base64") },
            { filename: "by-name.txt", content: utf8.toString("base64") },
            { filename: "plain.csv", content_type: "text/csv", content: ascii.toString("base64") },
            { filename: "unknown.txt", content_type: "text/plain", content: latin1.toString("base64") },
            { filename: "data.json", content_type: "application/json; charset=utf-8", content: utf8.toString("base64") },
            { filename: "blob.bin", content_type: "application/octet-stream", content: utf8.toString("base64") }
          ]
        })
        const accepted = yield* sending.submit(owner.userId, box.mailboxId, fromSendInput(input))
        const { parts, stored } = yield* sent(accepted.email_id)
        expect(parts.map((p) => [p.filename, p.contentType, p.charset])).toEqual([
          ["latin.txt", "text/plain", "iso-8859-1"],
          ["quoted.txt", "text/plain", "utf-8"],
          ["guessed.txt", "text/plain", "utf-8"],
          ["by-name.txt", "text/plain", "utf-8"],
          // ASCII is what text without a charset means (RFC 2046 §4.1.2); bytes of an unknown charset are not guessed at.
          ["plain.csv", "text/csv", undefined],
          ["unknown.txt", "text/plain", undefined],
          ["data.json", "application/json", "utf-8"],
          ["blob.bin", "application/octet-stream", undefined]
        ])
        expect(parts.map((p) => p.content)).toEqual([latin1, utf8, utf8, utf8, ascii, latin1, utf8, utf8])
        expect(stored.slice(0, 4)).toEqual([
          ["latin.txt", "text/plain", "iso-8859-1"],
          ["quoted.txt", "text/plain", "utf-8"],
          ["guessed.txt", "text/plain", "utf-8"],
          ["by-name.txt", "text/plain", "utf-8"]
        ])
      }))

    it.effect("content_type with anything but a media type and a charset is 400 VALIDATION_ERROR naming the attachment's field, on send, reply, forward and draft", () =>
      Effect.gen(function*() {
        const malformed = "must be a media type such as application/pdf, with a charset for text if you like: text/plain; charset=utf-8"
        const refused: ReadonlyArray<readonly [string, string]> = [
          ["text/plain; charset=utf-8\r\nBcc: victim@example.com", malformed],
          ["text/plain\n; charset=utf-8", malformed],
          ["text/plain; charset=utf-8\u0000", malformed],
          ["text/plain; charset=ütf-8", malformed],
          ["text/plain;", malformed],
          ["text/plain; charset", malformed],
          ["text/plain; charset=utf-8 x", "must name its charset as a name such as utf-8 or iso-8859-1 (letters, digits and - _ . +, at most 40)"],
          ["text/plain; charset=\"utf 8\"", "must name its charset as a name such as utf-8 or iso-8859-1 (letters, digits and - _ . +, at most 40)"],
          ["text/plain; charset=", "must name its charset as a name such as utf-8 or iso-8859-1 (letters, digits and - _ . +, at most 40)"],
          ["text/plain; charset=utf-8; charset=iso-8859-1", "must name one charset"],
          ["text/plain; name=evil.exe", "may carry a charset parameter only: \"name\" is not taken"],
          ["text/plain; charset=utf-8; format=flowed", "may carry a charset parameter only: \"format\" is not taken"],
          ["multipart/mixed; boundary=x", "may carry a charset parameter only: \"boundary\" is not taken"],
          ["text/plain; charset*=utf-8''x", "may carry a charset parameter only: \"charset*\" is not taken"],
          ["text", malformed],
          [`text/plain; charset=${"x".repeat(250)}`, "must be at most 255 characters"]
        ]
        const bodies = {
          send: [SendInput, { to: ["a@customer.test"], subject: "x", text: "x" }],
          reply: [ReplyInput, { text: "x" }],
          forward: [ForwardInput, { to: ["a@customer.test"] }],
          draft: [DraftInput, { to: ["a@customer.test"] }]
        } as const
        for (const [route, [schema, body]] of Object.entries(bodies)) {
          const decode = decodeBody(schema as typeof SendInput, "api")
          for (const [contentType, message] of refused) {
            const attachments = [{ filename: "a.txt", content: "aGk=" }, { filename: "b.txt", content_type: contentType, content: "aGk=" }]
            expect(yield* Effect.flip(decode({ ...body, attachments })), `${route} ${JSON.stringify(contentType)}`).toMatchObject({
              status: 400,
              code: "VALIDATION_ERROR",
              details: { "attachments.1.content_type": message }
            })
          }
          const taken = yield* decode({ ...body, attachments: [{ filename: "a.txt", content_type: "text/plain; charset=utf-8", content: "aGk=" }] })
          expect(taken.attachments, route).toEqual([{ filename: "a.txt", content_type: "text/plain; charset=utf-8", content: "aGk=" }])
        }
      }))
  })
})
