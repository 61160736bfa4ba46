/**
 * Mail stored with html and no text (an html body beside attachments, before parsing derived its
 * text): `repairText` (run by `mailroom reindex`) gives it the text parsing now derives, extracts a
 * received email's codes again, and indexes its words afresh, counted once; mail with text, mail of
 * a deleted mailbox and html with no text in it (white space) are left as they are. Received mail
 * whose 8-bit text was stored as U+FFFD, and mail in HZ or ISO-2022-KR stored as its bytes (before
 * charsets.ts read them), is read again from its raw message.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import iconv from "iconv-lite"
import { createHash } from "node:crypto"
import { repairText } from "../../services/maintenance/text-repair.ts"
import { parseMessage } from "../../services/mail/parse.ts"
import { Indexer } from "../../services/search/indexer.ts"
import { testDatabase } from "../support/database.ts"
import { indexerWith } from "../support/search-services.ts"

const fixtures = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`INSERT INTO users (id, email, email_normalized, name, password_hash) VALUES ('usr_r', 'r@example.com', 'r@example.com', 'R', 'x')`
  yield* sql`INSERT INTO mailboxes (id, user_id, local_part, domain, address_normalized, status)
             VALUES ('mbx_r', 'usr_r', 'repair', 'agents.localhost', 'repair@agents.localhost', 'active'),
                    ('mbx_old', 'usr_r', 'old', 'agents.localhost', 'old@agents.localhost', 'active')`
  yield* sql`INSERT INTO blobs (sha256, size, content) VALUES (${"3".repeat(64)}, 1, ${new Uint8Array([1])})`
  const email = (id: string, mailbox: string, direction: string, subject: string, text: string, html: string | null) =>
    sql`INSERT INTO emails (id, mailbox_id, user_id, message_id, thread_id, subject, from_address, to_addresses, sent_at,
                            received_at, mail_from, rcpt_to, headers, text_body, html_body, has_attachments, raw_sha256, size,
                            direction, extracted)
        VALUES (${id}, ${mailbox}, 'usr_r', ${`<${id}@test>`}, ${id}, ${subject}, 'x@example.com', ${["y@example.com"]}, now(),
                now(), 'x@example.com', 'y@example.com', '{}', ${text}, ${html}, true, ${"3".repeat(64)}, 1, ${direction},
                ${direction === "inbound" ? JSON.stringify({ reply_text: text, codes: [], links: [] }) : null})`
  yield* email("eml_r1", "mbx_r", "inbound", "Your sign-in", "", "<p>Your <b>verification</b> code is 482913.</p><p>Harbour office</p>")
  yield* email("eml_r2", "mbx_r", "outbound", "Quote", "", "<div>The harbour quote is attached.</div>")
  yield* email("eml_r3", "mbx_r", "inbound", "Plain", "Harbour text already here.", "<p>Harbour html</p>")
  yield* email("eml_r4", "mbx_r", "inbound", "Blank", "", "<div> </div>")
  yield* email("eml_r5", "mbx_old", "inbound", "Gone", "", "<p>Harbour of a deleted mailbox</p>")
  yield* sql`UPDATE mailboxes SET status = 'deleted', deleted_at = now() WHERE id = 'mbx_old'`
})

layer(testDatabase, { timeout: "60 seconds" })("repairText", (it) => {
  it.effect("derives the text of mail stored with html only, extracts it again, and indexes its words once", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* fixtures
      const harbour = sql<{ documents: number }>`SELECT documents FROM search_lexicon WHERE user_id = 'usr_r' AND lexeme = 'harbour'`.pipe(
        Effect.map((rows) => rows[0]?.documents ?? 0)
      )
      const postings = (id: string) =>
        sql<{ lexeme: string }>`SELECT lexeme FROM search_terms WHERE email_id = ${id} ORDER BY lexeme`.pipe(
          Effect.map((rows) => rows.map((row) => row.lexeme))
        )
      yield* Effect.provide(
        Effect.gen(function*() {
          const indexer = yield* Indexer
          // Indexed as they were stored: the html-only emails by their subjects alone.
          for (const id of ["eml_r1", "eml_r2", "eml_r3", "eml_r4"]) yield* indexer.index(id)
          // The sender's words beside them (x@example.com: its address and domain).
          expect(yield* postings("eml_r1")).toEqual(["example.com", "sign", "sign-in", "x@example.com"])
          expect(yield* harbour).toBe(1)

          expect(yield* repairText).toEqual({ derived: 2, reread: 0, sevenBit: 0 })
          const rows = yield* sql<{ id: string; textBody: string; extracted: string | null }>`
            SELECT id, text_body, extracted::text AS extracted FROM emails ORDER BY id`
          const byId = new Map(rows.map((row) => [row.id, row]))
          expect(byId.get("eml_r1")!.textBody).toContain("Your verification code is 482913.")
          expect(byId.get("eml_r1")!.textBody).toContain("Harbour office")
          expect(JSON.parse(byId.get("eml_r1")!.extracted!).codes).toEqual([expect.objectContaining({ value: "482913" })])
          expect(byId.get("eml_r2")!.textBody).toBe("The harbour quote is attached.")
          expect(byId.get("eml_r2")!.extracted).toBeNull()
          // Text kept, no text to derive, a deleted mailbox's: unchanged.
          expect(byId.get("eml_r3")!.textBody).toBe("Harbour text already here.")
          expect(byId.get("eml_r4")!.textBody).toBe("")
          expect(byId.get("eml_r5")!.textBody).toBe("")

          // Their words are found, each counted once however the email was indexed before.
          expect(yield* postings("eml_r1")).toEqual(expect.arrayContaining(["482913", "code", "harbour", "offic", "sign", "verif"]))
          expect(yield* postings("eml_r2")).toEqual(["attach", "example.com", "harbour", "quot", "x@example.com"])
          expect(yield* harbour).toBe(3)
          const documents = yield* sql<{ n: string }>`SELECT count(*) AS n FROM search_documents WHERE user_id = 'usr_r'`
          expect(Number(documents[0]!.n)).toBe(4)

          // Run again: nothing left to derive, nothing counted twice.
          expect(yield* repairText).toEqual({ derived: 0, reread: 0, sevenBit: 0 })
          expect(yield* harbour).toBe(3)
        }),
        indexerWith()
      )
    }))
})

layer(testDatabase, { timeout: "60 seconds" })("repairText, characters lost", (it) => {
  it.effect("reads received 8-bit text stored as U+FFFD again from its raw message, and indexes its words; a message's own U+FFFD stays", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`INSERT INTO users (id, email, email_normalized, name, password_hash) VALUES ('usr_l', 'l@example.com', 'l@example.com', 'L', 'x')`
      yield* sql`INSERT INTO mailboxes (id, user_id, local_part, domain, address_normalized, status)
                 VALUES ('mbx_l', 'usr_l', 'latin', 'agents.localhost', 'latin@agents.localhost', 'active')`
      const message = (id: string, direction: string, raw: Buffer, stored: string) =>
        Effect.gen(function*() {
          const sha = createHash("sha256").update(raw).digest("hex")
          yield* sql`INSERT INTO blobs (sha256, size, content) VALUES (${sha}, ${raw.byteLength}, ${new Uint8Array(raw)})`
          yield* sql`INSERT INTO emails (id, mailbox_id, user_id, message_id, thread_id, subject, from_address, to_addresses, sent_at,
                                         received_at, mail_from, rcpt_to, headers, text_body, html_body, has_attachments, raw_sha256, size,
                                         direction, extracted)
                     VALUES (${id}, 'mbx_l', 'usr_l', ${`<${id}@test>`}, ${id}, 'Dessert', 'x@example.com', ${["y@example.com"]}, now(),
                             now(), 'x@example.com', 'y@example.com', '{}', ${stored}, null, false, ${sha}, ${raw.byteLength}, ${direction},
                             ${JSON.stringify({ reply_text: stored, codes: [], links: [] })})`
        })
      const head = "From: x@example.com\r\nTo: latin@agents.localhost\r\nSubject: Dessert\r\n"
      // As an earlier version stored it: each Latin-1 byte of the body as U+FFFD.
      yield* message("eml_l1", "inbound", Buffer.concat([Buffer.from(`${head}\r\n`), Buffer.from("Caf\xe9 cr\xe8me br\xfbl\xe9e\r\n", "latin1")]), "Caf\ufffd cr\ufffdme br\ufffdl\ufffde\n")
      // U+FFFD the sender wrote, in UTF-8 that said so: the message's own.
      yield* message("eml_l2", "inbound", Buffer.from(`${head}Content-Type: text/plain; charset=utf-8\r\n\r\nA lost \ufffd sign\r\n`, "utf8"), "A lost \ufffd sign\n")
      // Sent mail is built here in UTF-8: not read again.
      yield* message("eml_l3", "outbound", Buffer.concat([Buffer.from(`${head}\r\n`), Buffer.from("cr\xe8me\r\n", "latin1")]), "cr\ufffdme\n")
      yield* Effect.provide(
        Effect.gen(function*() {
          const indexer = yield* Indexer
          for (const id of ["eml_l1", "eml_l2", "eml_l3"]) yield* indexer.index(id)
          expect(yield* repairText).toEqual({ derived: 0, reread: 1, sevenBit: 0 })
          const rows = yield* sql<{ id: string; textBody: string; extracted: string }>`
            SELECT id, text_body, extracted::text AS extracted FROM emails WHERE user_id = 'usr_l' ORDER BY id`
          expect(rows.map((row) => [row.id, row.textBody.trim()])).toEqual([
            ["eml_l1", "Café crème brûlée"],
            ["eml_l2", "A lost \ufffd sign"],
            ["eml_l3", "cr\ufffdme"]
          ])
          expect(JSON.parse(rows[0]!.extracted).reply_text).toContain("Café crème brûlée")
          const lexemes = yield* sql<{ lexeme: string }>`SELECT lexeme FROM search_terms WHERE email_id = 'eml_l1' ORDER BY lexeme`
          expect(lexemes.map((row) => row.lexeme)).toEqual(expect.arrayContaining(["cafe", "creme"]))
          // Looked at again, the message's own U+FFFD changes nothing.
          expect(yield* repairText).toEqual({ derived: 0, reread: 0, sevenBit: 0 })
        }),
        indexerWith()
      )
    }))
})

layer(testDatabase, { timeout: "60 seconds" })("repairText, HZ and ISO-2022-KR", (it) => {
  it.effect("reads received mail in HZ or ISO-2022-KR stored as its bytes again: subject, sender's name, text, attachment's name, words; other mail with a ~{ stays", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`INSERT INTO users (id, email, email_normalized, name, password_hash) VALUES ('usr_s', 's@example.com', 's@example.com', 'S', 'x')`
      yield* sql`INSERT INTO mailboxes (id, user_id, local_part, domain, address_normalized, status)
                 VALUES ('mbx_s', 'usr_s', 'seven', 'agents.localhost', 'seven@agents.localhost', 'active')`
      const sevenBit = (text: string, charset: string) => Buffer.from(iconv.encode(text, charset).map((byte) => byte & 0x7f)).toString("latin1")
      const hz = (text: string) => `~{${sevenBit(text, "gb2312")}~}`
      const kr = (text: string) => `\x1b$)C\x0e${sevenBit(text, "euc-kr")}\x0f`
      const word = (charset: string, bytes: string) => `=?${charset}?B?${Buffer.from(bytes, "latin1").toString("base64")}?=`
      const raw = (charset: string, subject: string, body: string, filename: string) =>
        Buffer.from(
          `From: ${subject} <x@example.com>\r\nTo: seven@agents.localhost\r\nSubject: ${subject}\r\nMIME-Version: 1.0\r\n` +
            `Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain; charset=${charset}\r\n\r\n${body}\r\n` +
            `--b\r\nContent-Type: text/plain; charset=${charset}\r\nContent-Disposition: attachment; filename*=${charset}''${filename}\r\n\r\n` +
            `${body}\r\n--b--\r\n`,
          "latin1"
        )
      // As an earlier version stored it: the bytes as they came (the subject and name without ESC, SO and SI).
      const message = (id: string, bytes: Buffer, stored: { subject: string; text: string; filename: string }) =>
        Effect.gen(function*() {
          const sha = createHash("sha256").update(bytes).digest("hex")
          yield* sql`INSERT INTO blobs (sha256, size, content) VALUES (${sha}, ${bytes.byteLength}, ${new Uint8Array(bytes)})`
          yield* sql`INSERT INTO emails (id, mailbox_id, user_id, message_id, thread_id, subject, from_address, from_name, to_addresses, sent_at,
                                         received_at, mail_from, rcpt_to, headers, text_body, html_body, has_attachments, raw_sha256, size,
                                         direction, extracted)
                     VALUES (${id}, 'mbx_s', 'usr_s', ${`<${id}@test>`}, ${id}, ${stored.subject}, 'x@example.com', ${stored.subject},
                             ${["seven@agents.localhost"]}, now(), now(), 'x@example.com', 'seven@agents.localhost',
                             ${JSON.stringify({ subject: stored.subject })}, ${stored.text}, null, true, ${sha}, ${bytes.byteLength}, 'inbound',
                             ${JSON.stringify({ reply_text: stored.text, codes: [], links: [] })})`
          const [attachment] = (yield* parseMessage(bytes)).attachments
          yield* sql`INSERT INTO blobs (sha256, size, content) VALUES (${attachment!.checksum}, ${attachment!.size}, ${attachment!.content})
                     ON CONFLICT (sha256) DO NOTHING`
          yield* sql`INSERT INTO attachments (id, email_id, position, filename, content_type, size, checksum, content_id, charset)
                     VALUES (${`att_${id}`}, ${id}, 0, ${stored.filename}, 'text/plain', ${attachment!.size}, ${attachment!.checksum}, null,
                             ${attachment!.charset})`
        })
      const hzBody = `${hz("会议改到明天")} at 10`
      yield* message("eml_s1", raw("hz-gb-2312", word("hz-gb-2312", hz("季度报告")), hzBody, encodeURIComponent(hz("报告"))), {
        subject: "~{<>6H1(8f~}",
        text: "~{;aRi8D5=CwLl~} at 10\n",
        filename: "~{1(8f~}"
      })
      const krBody = `${kr("회의는 내일로")} at 10`
      yield* message("eml_s2", raw("ISO-2022-KR", word("ISO-2022-KR", kr("분기 보고서")), krBody, encodeURIComponent(kr("보고서"))), {
        subject: "$)C:P1b :80m<-",
        text: `${krBody}\n`,
        filename: "\x1b$)C\x0e:80m<-\x0f"
      })
      // ASCII mail whose text holds a ~{ of its own: named no such charset, left as it is.
      const ascii = raw("us-ascii", "Shell", "echo ~{a,b}", "notes.txt")
      yield* message("eml_s3", ascii, { subject: "Shell", text: "echo ~{a,b}\n", filename: "notes.txt" })
      yield* Effect.provide(
        Effect.gen(function*() {
          const indexer = yield* Indexer
          for (const id of ["eml_s1", "eml_s2", "eml_s3"]) yield* indexer.index(id)
          expect(yield* repairText).toEqual({ derived: 0, reread: 0, sevenBit: 2 })
          const rows = yield* sql<{ id: string; subject: string; fromName: string; textBody: string; headers: string; extracted: string; filename: string }>`
            SELECT e.id, e.subject, e.from_name, e.text_body, e.headers::text AS headers, e.extracted::text AS extracted, a.filename
            FROM emails e JOIN attachments a ON a.email_id = e.id WHERE e.user_id = 'usr_s' ORDER BY e.id`
          expect(rows.map((row) => [row.id, row.subject, row.fromName, row.textBody.trim(), row.filename, JSON.parse(row.headers).subject])).toEqual([
            ["eml_s1", "季度报告", "季度报告", "会议改到明天 at 10", "报告", "季度报告"],
            ["eml_s2", "분기 보고서", "분기 보고서", "회의는 내일로 at 10", "보고서", "분기 보고서"],
            ["eml_s3", "Shell", "Shell", "echo ~{a,b}", "notes.txt", "Shell"]
          ])
          expect(JSON.parse(rows[0]!.extracted).reply_text).toContain("会议改到明天")
          // Found by their words now (CJK words are indexed in pairs of characters).
          const found = (id: string) => sql<{ lexeme: string }>`SELECT lexeme FROM search_terms WHERE email_id = ${id}`.pipe(Effect.map((r) => r.map((x) => x.lexeme)))
          expect((yield* found("eml_s1")).some((lexeme) => lexeme.includes("会议"))).toBe(true)
          expect((yield* found("eml_s2")).some((lexeme) => lexeme.includes("회의"))).toBe(true)
          // Run again: read right now, nothing changes.
          expect(yield* repairText).toEqual({ derived: 0, reread: 0, sevenBit: 0 })
        }),
        indexerWith()
      )
    }))
})
