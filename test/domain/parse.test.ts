/**
 * Reading a received message (services/mail/parse.ts): the text body every reader, snippet and
 * search uses, whatever MIME shape the sender chose.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import iconv from "iconv-lite"
import MailComposer from "nodemailer/lib/mail-composer"
import { decodeHz, decodeIso2022Kr, decodeText, htmlMetaCharset, legacyBytesAsUtf8 } from "../../services/mail/charsets.ts"
import { dateHeaderMoment } from "../../services/mail/date-header.ts"
import { displayName, parseMessage } from "../../services/mail/parse.ts"

const compose = (mail: ConstructorParameters<typeof MailComposer>[0]) =>
  Effect.promise(() => new MailComposer({ from: "ada@example.com", to: "bot@agents.localhost", subject: "Hi", ...mail }).compile().build())

const HTML = "<p>Meet the <b>narwhal</b> team tomorrow</p><p>Bring the slides.</p>"
const attachment = { filename: "a.bin", content: Buffer.from([0, 1, 2, 3]) }

describe("parseMessage", () => {
  it.effect("an html body beside attachments has the text mailparser derives for the same body alone", () =>
    Effect.gen(function*() {
      const alone = yield* parseMessage(yield* compose({ html: HTML }))
      expect(alone.text).toMatch(/^Meet the narwhal team tomorrow\s+Bring the slides\.$/)
      for (const attachments of [[attachment], [{ filename: "logo.png", content: Buffer.from("png"), cid: "logo@x" }]]) {
        const mixed = yield* parseMessage(yield* compose({ html: HTML, attachments }))
        expect(mixed.html).toBe(HTML)
        expect(mixed.text).toBe(alone.text)
        expect(mixed.attachments).toHaveLength(1)
      }
      // A text alternative of white space alone says nothing: the html is read.
      const blank = yield* parseMessage(yield* compose({ text: "\n", html: HTML }))
      expect(blank.text).toBe(alone.text)
      expect((yield* parseMessage(yield* compose({ text: "Short text", html: HTML }))).text).toBe("Short text")
    }))

  it.effect("a text part is the text, beside attachments as alone; html-only markup too deep to render loses only its tags", () =>
    Effect.gen(function*() {
      const both = yield* parseMessage(yield* compose({ text: "The text part.", html: HTML, attachments: [attachment] }))
      expect(both.text).toBe("The text part.")
      const deep = `${"<div>".repeat(5_000)}deep words${"</div>".repeat(5_000)}`
      const nested = yield* parseMessage(yield* compose({ html: deep, attachments: [attachment] }))
      expect(nested.text.trim()).toBe("deep words")
    }))

  it("displayName: the first address's name, encoded words decoded, quotes and groups read; empty without one", () => {
    expect(displayName("Ann Smith <ann@example.com>")).toBe("Ann Smith")
    expect(displayName("\"Smith, Ann\" <ann@example.com>, Bob <bob@example.com>")).toBe("Smith, Ann")
    expect(displayName("=?UTF-8?Q?J=C3=BCrgen_M=C3=BCller?= <jm@example.com>")).toBe("Jürgen Müller")
    expect(displayName("Team: Ada <ada@example.com>, bob@example.com;")).toBe("Ada")
    expect(displayName("ann@example.com")).toBe("")
    expect(displayName("")).toBe("")
    expect(displayName(undefined)).toBe("")
  })

  it.effect("parsing reads the From's name (decoded) and gives none for a bare address", () =>
    Effect.gen(function*() {
      expect((yield* parseMessage(yield* compose({ from: "Jürgen Müller <jm@example.com>", text: "x" }))).fromName).toBe("Jürgen Müller")
      expect((yield* parseMessage(yield* compose({ text: "x" }))).fromName).toBe("")
    }))

  it.effect("keeps a header written in raw UTF-8 (RFC 6532, SMTPUTF8 mail) as its sender wrote it; bytes that are no UTF-8 read as Windows-1252", () =>
    Effect.gen(function*() {
      const raw = Buffer.concat([
        Buffer.from("From: Zoë Ünal <zoe@example.de>\r\nTo: bot@agents.localhost\r\nSubject: Grüße\r\nX-Old: caf", "utf8"),
        Buffer.from([0xe9]),
        Buffer.from("\r\n\r\nHi\r\n")
      ])
      const parsed = yield* parseMessage(raw)
      expect([parsed.headers["from"], parsed.headers["subject"], parsed.headers["x-old"]]).toEqual(["Zoë Ünal <zoe@example.de>", "Grüße", "café"])
    }))

  it.effect("a Subject in raw 8-bit bytes without a charset reads as Windows-1252, as its header does and as body text does (not U+FFFD for each byte, nor Latin-1's control characters)", () =>
    Effect.gen(function*() {
      const raw = Buffer.concat([
        Buffer.from("From: ada@example.com\r\nSubject: "),
        iconv.encode("“Smart” Grüße aus Köln, 5 €", "windows-1252"),
        Buffer.from("\r\n\r\nHi\r\n")
      ])
      const parsed = yield* parseMessage(raw)
      expect([parsed.subject, parsed.headers["subject"]]).toEqual(["“Smart” Grüße aus Köln, 5 €", "“Smart” Grüße aus Köln, 5 €"])
    }))

  it.effect("8-bit body text sent without a charset, or labelled UTF-8 wrongly, reads as Windows-1252 (not U+FFFD for each byte); UTF-8 beside it stays UTF-8", () =>
    Effect.gen(function*() {
      const cp1252 = (text: string) => iconv.encode(text, "windows-1252")
      const message = (head: string, ...body: Array<Buffer>) =>
        Buffer.concat([Buffer.from(`From: ada@example.com\r\nTo: bot@agents.localhost\r\nSubject: Hi\r\n${head}\r\n`), ...body, Buffer.from("\r\n")])
      const undeclared = yield* parseMessage(message("Content-Transfer-Encoding: 8bit\r\n", cp1252("Grüße aus Köln – 5 € „bitte“")))
      expect(undeclared.text).toBe("Grüße aus Köln – 5 € „bitte“\n")
      const mislabelled = yield* parseMessage(message("Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n", cp1252("Café crème")))
      expect(mislabelled.text).toBe("Café crème\n")
      const mixed = yield* parseMessage(message("", Buffer.from("Zoë wrote: "), cp1252("déjà vu")))
      expect(mixed.text).toBe("Zoë wrote: déjà vu\n")
    }))

  it.effect("text sent quoted-printable or base64 without a charset reads as Windows-1252 too, the message's Content-Type missing or naming text without one", () =>
    Effect.gen(function*() {
      const head = "From: ada@example.com\r\nTo: bot@agents.localhost\r\nSubject: Hi\r\n"
      const qp = yield* parseMessage(Buffer.from(`${head}Content-Type: text/plain\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\nTr=E8s cr=E9atif r=E9sultat =80 quinoa.\r\n`))
      expect(qp.text).toBe("Très créatif résultat € quinoa.\n")
      const base64 = iconv.encode("Niño pequeño – boletín", "windows-1252").toString("base64")
      const bare = yield* parseMessage(Buffer.from(`${head}Content-Transfer-Encoding: base64\r\n\r\n${base64}\r\n`))
      expect(bare.text).toBe("Niño pequeño – boletín")
      const html = yield* parseMessage(Buffer.from(`${head}Content-Type: text/html;\r\n\tformat=flowed\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n<p>Cr=E8me fra=EEche =93p=E2tisserie=94</p>\r\n`))
      expect([html.html, html.text.trim()]).toEqual(["<p>Crème fraîche “pâtisserie”</p>", "Crème fraîche “pâtisserie”"])
      // Labelled UTF-8 wrongly, the same; UTF-8 so labelled stays UTF-8.
      const wrongly = yield* parseMessage(Buffer.from(`${head}Content-Type: text/plain; charset="UTF-8"\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\nTr=E8s bon, 5=80\r\n`))
      expect(wrongly.text).toBe("Très bon, 5€\n")
      const wrongBase64 = yield* parseMessage(Buffer.from(`${head}Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: base64\r\n\r\n${base64}\r\n`))
      expect(wrongBase64.text).toBe("Niño pequeño – boletín")
      const right = yield* parseMessage(Buffer.from(`${head}Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\nCaf=C3=A9 =E2=82=AC\r\n`))
      expect(right.text).toBe("Café €\n")
      // UTF-8 sent the same way without a charset was read right, and stays so.
      const utf8 = yield* parseMessage(Buffer.from(`${head}Content-Type: text/plain\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\nCaf=C3=A9 =E2=82=AC\r\n`))
      expect(utf8.text).toBe("Café €\n")
    }))

  it.effect("an encoded word that says UTF-8 wrongly reads as Windows-1252; UTF-8 split between two words stays UTF-8", () =>
    Effect.gen(function*() {
      const parsed = yield* parseMessage(Buffer.from([
        "From: =?utf-8?Q?Ren=E9?= <rene@example.com>",
        "To: bot@agents.localhost",
        // "Zoë café": ë's two bytes in two words; then a word that is no UTF-8.
        "Subject: =?UTF-8?Q?Zo=C3?= =?UTF-8?Q?=AB?= =?utf-8?B?Y2Fm6Q==?= =?utf-8?Q?cr=E8me_=80?=",
        "",
        "Hi.",
        ""
      ].join("\r\n")))
      expect([parsed.fromName, parsed.subject]).toEqual(["René", "Zoëcafécrème €"])
    }))

  it.effect("of the parts, only those read wrongly are read again: a part that named its charset keeps its reading, attachments stay whole", () =>
    Effect.gen(function*() {
      const boundary = "b1"
      const part = (head: string, body: Buffer) => Buffer.concat([Buffer.from(`--${boundary}\r\n${head}\r\n\r\n`), body, Buffer.from("\r\n")])
      const raw = Buffer.concat([
        Buffer.from(`From: ada@example.com\r\nTo: bot@agents.localhost\r\nSubject: Hi\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=${boundary}\r\n\r\n`),
        part("Content-Type: multipart/alternative; boundary=b2", Buffer.concat([
          Buffer.from("--b2\r\nContent-Type: text/plain; charset=iso-8859-1\r\nContent-Transfer-Encoding: 8bit\r\n\r\n"),
          iconv.encode("Très bien", "latin1"),
          Buffer.from("\r\n--b2\r\nContent-Type: text/html\r\nContent-Transfer-Encoding: 8bit\r\n\r\n<p>"),
          iconv.encode("Très bien", "windows-1252"),
          Buffer.from("</p>\r\n--b2--")
        ])),
        part("Content-Type: application/octet-stream; name=a.bin\r\nContent-Disposition: attachment; filename=a.bin\r\nContent-Transfer-Encoding: base64", Buffer.from(Buffer.from([0xe9, 0, 0xff]).toString("base64"))),
        Buffer.from(`--${boundary}--\r\n`)
      ])
      const parsed = yield* parseMessage(raw)
      expect([parsed.text, parsed.html]).toEqual(["Très bien", "<p>Très bien</p>"])
      expect(parsed.attachments.map((a) => [a.filename, [...a.content]])).toEqual([["a.bin", [0xe9, 0, 0xff]]])
    }))

  it.effect("reads a message of 1,500 parts whole (the parser's own limit is 1,000): its text and every attachment", () =>
    Effect.gen(function*() {
      const files = Array.from({ length: 1_500 }, (_, i) =>
        `--b\r\nContent-Type: text/plain\r\nContent-Disposition: attachment; filename="f${i}.txt"\r\n\r\nfile ${i}\r\n`)
      const parsed = yield* parseMessage(Buffer.from(
        `From: ada@example.com\r\nTo: bot@agents.localhost\r\nSubject: Many\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary="b"\r\n\r\n` +
          `--b\r\nContent-Type: text/plain\r\n\r\nThe files.\r\n${files.join("")}--b--\r\n`
      ))
      expect([parsed.text.trim(), parsed.attachments.length, parsed.attachments.at(-1)?.filename]).toEqual(["The files.", 1_500, "f1499.txt"])
    }))

  it.effect("of several From or Subject fields, the first is the message's, as mail programs show it", () =>
    Effect.gen(function*() {
      const raw = Buffer.from([
        "From: =?UTF-8?Q?M=C3=BCller=2C_J=C3=BCrgen?= <first@example.com>",
        "From: Second <second@example.org>",
        "Subject: First subject",
        "Subject: Second subject",
        "",
        "Hi",
        ""
      ].join("\r\n"))
      const parsed = yield* parseMessage(raw)
      expect([parsed.from, parsed.fromName, parsed.subject]).toEqual(["first@example.com", "Müller, Jürgen", "First subject"])
    }))

  it.effect("a From that names no address has none (the envelope sender stands for it) and is shown by what it says", () =>
    Effect.gen(function*() {
      const fromOf = (from: string) =>
        Effect.map(parseMessage(Buffer.from(`From: ${from}\r\nSubject: x\r\n\r\nHi\r\n`)), (parsed) => [parsed.from, parsed.fromName])
      expect(yield* fromOf("Just A Name")).toEqual([undefined, "Just A Name"])
      expect(yield* fromOf("<<not an address>>")).toEqual([undefined, "<<not an address>>"])
      expect(yield* fromOf("=?UTF-8?Q?J=C3=BCrgen?= <jm>")).toEqual([undefined, "Jürgen <jm>"])
      // The null sender's empty address is no name: the name beside it, if any, unquoted.
      expect(yield* fromOf("<>")).toEqual([undefined, ""])
      expect(yield* fromOf("\"Mail Delivery System\" <>")).toEqual([undefined, "Mail Delivery System"])
      // An address and a name as ever, however odd the address.
      expect(yield* fromOf("Ada <ada@example.com>")).toEqual(["ada@example.com", "Ada"])
      expect(yield* fromOf("a@b@example.net")).toEqual(["a@b@example.net", ""])
    }))

  it.effect("an address whose quoted local part holds angle brackets is read whole, at its own domain, in every address field", () =>
    Effect.gen(function*() {
      const spoof = "\"<ceo@bank.example>\"@evil.example"
      const raw = Buffer.from([
        `From: <${spoof}>`,
        `To: Desk <"a>b"@evil.example>, bot@agents.localhost`,
        `Cc: Team: <${spoof}>;`,
        `Reply-To: "<ceo@bank.example>" <${spoof}>`,
        "Subject: Wire",
        "",
        "Hi",
        ""
      ].join("\r\n"))
      const parsed = yield* parseMessage(raw)
      expect({ from: parsed.from, fromName: parsed.fromName, to: parsed.to, cc: parsed.cc, replyTo: parsed.replyTo }).toEqual({
        from: spoof,
        fromName: "",
        to: ["\"a>b\"@evil.example", "bot@agents.localhost"],
        cc: [spoof],
        replyTo: [spoof]
      })
      expect(displayName(`"<ceo@bank.example>" <${spoof}>`)).toBe("<ceo@bank.example>")
    }))

  it.effect("a subject or name shows no control characters; a Date no timestamp can show (year 10000) is none", () =>
    Effect.gen(function*() {
      const raw = Buffer.from("From: \"Ada\x07 L\" <ada@example.com>\r\nSubject: Ring\x07 the\tbell\x01\r\nDate: Sat, 1 Jan 10000 00:00:00 +0000\r\n\r\nHi\r\n")
      const parsed = yield* parseMessage(raw)
      expect([parsed.subject, parsed.fromName, parsed.date]).toEqual(["Ring the bell", "Ada L", undefined])
    }))

  it.effect("a Date is read as RFC 5322 writes it: years below 1000, two- and three-digit years, zone names, comments", () =>
    Effect.gen(function*() {
      const read = (value: string) => dateHeaderMoment(value)?.toISOString()
      expect(read("Mon, 5 Dec 2026 10:04:05 +0100")).toBe("2026-12-05T09:04:05.000Z")
      expect(read("5 Dec 2026 10:04 -0130 (a comment (nested))")).toBe("2026-12-05T11:34:00.000Z")
      // V8 reads these as 2049, 0149 and (by its heuristics) 2049.
      expect(read("Sun, 5 Dec 0049 10:00:00 +0000")).toBe("0049-12-05T10:00:00.000Z")
      expect(read("5 Dec 149 10:00:00 +0000")).toBe("2049-12-05T10:00:00.000Z")
      expect(read("5 Dec 49 10:00:00 GMT")).toBe("2049-12-05T10:00:00.000Z")
      expect(read("5 Dec 99 10:00:00 EST")).toBe("1999-12-05T15:00:00.000Z")
      // A military letter is an offset not known: UTC. A leap second is the minute's last.
      expect(read("5 Dec 2026 10:00:60 Z")).toBe("2026-12-05T10:00:59.000Z")
      expect(read("29 Feb 2024 09:00:00 PDT")).toBe("2024-02-29T16:00:00.000Z")
      // Year 0 is a leap year (Date.UTC would read it as 1900, which is not).
      expect(read("29 Feb 0000 09:00:00 +0000")).toBe("0000-02-29T09:00:00.000Z")
      // Not a date RFC 5322 writes: left to mailparser's reading.
      for (const value of ["29 Feb 2026 09:00:00 +0000", "5 Dec 2026 24:00:00 +0000", "5 Dec 2026 10:00 CET", "2026-12-05T10:00:00Z", ""]) {
        expect(read(value)).toBeUndefined()
      }
      const raw = (date: string) => Buffer.from(`From: ada@example.com\r\nDate: ${date}\r\nSubject: Old\r\n\r\nHi\r\n`)
      expect((yield* parseMessage(raw("Sun, 5 Dec 0049 10:00:00 +0000"))).date?.toISOString()).toBe("0049-12-05T10:00:00.000Z")
      // A form V8 reads and RFC 5322 does not write: as mailparser reads it.
      expect((yield* parseMessage(raw("2026-12-05T10:00:00Z"))).date?.toISOString()).toBe("2026-12-05T10:00:00.000Z")
    }))

  it.effect("message ids written without white space between them are each an id (RFC 5322 allows it)", () =>
    Effect.gen(function*() {
      const raw = Buffer.from("From: ada@example.com\r\nIn-Reply-To: <b@y>\r\nReferences: <a@x><b@y>\r\n <c@z>\r\n\r\nHi\r\n")
      const parsed = yield* parseMessage(raw)
      expect([parsed.inReplyTo, parsed.references]).toEqual(["<b@y>", ["<a@x>", "<b@y>", "<c@z>"]])
    }))

  it.effect("a body that follows the headers without an empty line is the body; a header-like first line stays a header", () =>
    Effect.gen(function*() {
      const crlf = yield* parseMessage(Buffer.from("From: ada@example.com\r\nSubject: Hi\r\n folded\r\nHello, this is the body.\r\nSecond line.\r\n"))
      expect([crlf.subject, crlf.text.trim()]).toEqual(["Hi folded", "Hello, this is the body.\nSecond line."])
      const lf = yield* parseMessage(Buffer.from("From Ada Mon Jan  1 00:00:00 2026\nFrom: ada@example.com\nSubject: Hi\nbody here\n"))
      expect([lf.from, lf.subject, lf.text.trim()]).toEqual(["ada@example.com", "Hi", "body here"])
      const headerLike = yield* parseMessage(Buffer.from("From: ada@example.com\r\nNote: looks like a header\r\n\r\nbody\r\n"))
      expect([headerLike.headers["note"], headerLike.text.trim()]).toEqual(["looks like a header", "body"])
    }))

  it.effect("html whose Content-Type names no charset is read in the charset its meta tag names, 8-bit, quoted-printable or base64; a charset the Content-Type names wins", () =>
    Effect.gen(function*() {
      const head = "From: ada@example.com\r\nTo: bot@agents.localhost\r\nSubject: Hi\r\nMIME-Version: 1.0\r\n"
      const sjis = iconv.encode("お世話になっております。", "shift_jis")
      const equiv = Buffer.from("<html><head><meta http-equiv=\"Content-Type\" content=\"text/html; charset=Shift_JIS\"></head><body><p>")
      const document = Buffer.concat([equiv, sjis, Buffer.from("</p></body></html>")])
      const eightBit = yield* parseMessage(Buffer.concat([Buffer.from(`${head}Content-Type: text/html\r\nContent-Transfer-Encoding: 8bit\r\n\r\n`), document, Buffer.from("\r\n")]))
      expect(eightBit.html).toContain("<p>お世話になっております。</p>")
      expect(eightBit.text).toBe("お世話になっております。")
      const base64 = yield* parseMessage(Buffer.from(`${head}Content-Type: text/html\r\nContent-Transfer-Encoding: base64\r\n\r\n${document.toString("base64").replace(/(.{76})/g, "$1\r\n")}\r\n`))
      expect(base64.text).toBe("お世話になっております。")
      const cyrillic = Buffer.concat([Buffer.from("<meta charset=\"windows-1251\"><p>"), iconv.encode("Привет, мир", "windows-1251"), Buffer.from("</p>")])
      const qp = [...cyrillic].map((byte) => byte >= 0x80 || byte === 0x3d ? `=${byte.toString(16).toUpperCase().padStart(2, "0")}` : String.fromCharCode(byte)).join("")
      const quoted = yield* parseMessage(Buffer.from(`${head}Content-Type: multipart/alternative; boundary=b\r\n\r\n--b\r\nContent-Type: text/html\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n${qp}\r\n--b--\r\n`))
      expect(quoted.text).toBe("Привет, мир")
      // The MIME header wins: UTF-8 said so is UTF-8, whatever the meta tag says.
      const utf8 = Buffer.from("<meta charset=\"iso-8859-1\"><p>Grüße — 日本語</p>")
      const labelled = yield* parseMessage(Buffer.concat([Buffer.from(`${head}Content-Type: text/html; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n`), utf8, Buffer.from("\r\n")]))
      expect(labelled.text).toBe("Grüße — 日本語")
    }))

  it.effect("a header or attachment name in raw 8-bit bytes reads as UTF-8, else in the charset the message's text names, else Windows-1252: never with C1 control characters", () =>
    Effect.gen(function*() {
      const message = (charset: string, name: Buffer) =>
        Buffer.concat([
          Buffer.from("From: ada@example.com\r\nTo: bot@agents.localhost\r\nSubject: "),
          name,
          Buffer.from(`\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=X\r\n\r\n--X\r\nContent-Type: text/plain; charset=${charset}\r\n\r\nx\r\n--X\r\n`),
          Buffer.from("Content-Type: application/vnd.ms-excel; name=\""),
          name,
          Buffer.from(".xls\"\r\nContent-Disposition: attachment; filename=\""),
          name,
          Buffer.from(".xls\"\r\nContent-Transfer-Encoding: base64\r\n\r\nAAAA\r\n--X--\r\n")
        ])
      const sjis = yield* parseMessage(message("Shift_JIS", iconv.encode("見積書", "shift_jis")))
      expect([sjis.subject, sjis.attachments[0]?.filename]).toEqual(["見積書", "見積書.xls"])
      // Text in UTF-8 beside it: Windows-1252 (0x8F, 0x90 mean nothing there and are no C1 control characters).
      const utf8 = yield* parseMessage(message("utf-8", iconv.encode("見積書", "shift_jis")))
      expect(utf8.attachments[0]?.filename).not.toMatch(/[\u0080-\u009f]/)
      expect(utf8.attachments[0]?.filename).toMatch(/^Œ©.*\.xls$/)
      // Latin-1 named, Windows-1252 bytes: read as Windows-1252 (Latin-1 would give C1 controls).
      const latin = yield* parseMessage(message("iso-8859-1", iconv.encode("“Angebot” 5 €", "windows-1252")))
      expect([latin.subject, latin.attachments[0]?.filename]).toEqual(["“Angebot” 5 €", "“Angebot” 5 €.xls"])
      const raw = yield* parseMessage(message("Shift_JIS", Buffer.from("Grüße", "utf8")))
      expect([raw.subject, raw.attachments[0]?.filename]).toEqual(["Grüße", "Grüße.xls"])
    }))

  it.effect("a header written in raw ISO-2022-JP (its escape sequences, no encoded word) reads as ISO-2022-JP", () =>
    Effect.gen(function*() {
      const raw = Buffer.from(
        "From: ada@example.com\r\nTo: bot@agents.localhost\r\nSubject: \x1b$B$40FFb\x1b(B raw jis\r\nMIME-Version: 1.0\r\n" +
          "Content-Type: multipart/mixed; boundary=X\r\n\r\n--X\r\nContent-Type: text/plain; charset=iso-2022-jp\r\n\r\nx\r\n--X\r\n" +
          "Content-Type: application/pdf\r\nContent-Disposition: attachment; filename=\"\x1b$B8+@Q=q\x1b(B.pdf\"\r\nContent-Transfer-Encoding: base64\r\n\r\nAAAA\r\n--X--\r\n",
        "latin1"
      )
      const parsed = yield* parseMessage(raw)
      expect([parsed.subject, parsed.headers["subject"], parsed.attachments[0]?.filename]).toEqual(["ご案内 raw jis", "ご案内 raw jis", "見積書.pdf"])
    }))

  describe("the 7-bit charsets HZ (RFC 1843) and ISO-2022-KR (RFC 1557)", () => {
    // Each character's GB2312 or KS C 5601 bytes without their high bits, as the two charsets carry them.
    const sevenBit = (text: string, charset: string) => Buffer.from(iconv.encode(text, charset).map((byte) => byte & 0x7f)).toString("latin1")
    const hz = (text: string) => `~{${sevenBit(text, "gb2312")}~}`
    const kr = (text: string) => `\x0e${sevenBit(text, "euc-kr")}\x0f`
    const qp = (bytes: string) => bytes.replace(/[=\x00-\x1f\x7f]/g, (c) => (c === "\n" ? "\r\n" : `=${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, "0")}`))
    const message = (subject: string, charset: string, encoding: string, body: string) =>
      Buffer.from(
        `From: ada@example.com\r\nTo: bot@agents.localhost\r\nSubject: ${subject}\r\nMIME-Version: 1.0\r\n` +
          `Content-Type: text/plain; charset=${charset}\r\nContent-Transfer-Encoding: ${encoding}\r\n\r\n${body}\r\n`,
        "latin1"
      )
    const hzBody = `${hz("会议改到明天")} at 10, room ~~3.\n${hz("请带上")}slides, one line ~\ncontinued.`
    const krBody = `\x1b$)C\n${kr("회의는 내일로")} at 10, room ~3.\n${kr("슬라이드를")} bring.`

    it.effect("the RFC's own examples read as their characters", () =>
      Effect.sync(() => {
        expect(decodeText(Buffer.from("In GB.~{<:Ky2;S{#,NpJ)l6HK!#~}Bye.", "latin1"), "HZ-GB-2312")).toBe("In GB.己所不欲，勿施於人。Bye.")
        expect(decodeText(Buffer.from("\x1b$)C\x0eGQ1[\x0f ok", "latin1"), "ISO-2022-KR")).toBe("한글 ok")
        expect(decodeText(Buffer.from("a~~b~\nc ~{", "latin1"), "hz")).toBe("a~bc ")
      }))

    describe("the decoders", () => {
      const bytes = (text: string) => Buffer.from(text, "latin1")
      const hzRead = (text: string) => decodeHz(bytes(text))
      const krRead = (text: string) => decodeIso2022Kr(bytes(text))

      it("HZ: ~~ is a tilde, ~ and a line end (LF or CRLF) nothing, ~{ and ~} switch, GB2312 in pairs between", () => {
        expect(hzRead(`a ~~ b~\nc~\r\nd`)).toBe("a ~ bcd")
        expect(hzRead(`${hz("你好")}, ${hz("世界")}!`)).toBe("你好, 世界!")
        // Read across the whole text: the switch into GB mode holds for every pair until ~}.
        expect(hzRead(`~{${sevenBit("一二三四五", "gb2312")}~}`)).toBe("一二三四五")
        expect(hzRead("")).toBe("")
      })

      it("HZ: a malformed escape or byte is U+FFFD, and the text after it reads as it is", () => {
        // A ~ before anything RFC 1843 defines, and one at the very end.
        expect(hzRead("cost ~5, path ~/x ~")).toBe("cost \ufffd5, path \ufffd/x \ufffd")
        // Bytes with their high bit set: HZ has none (each one alone, the ASCII after it kept).
        expect(hzRead("a\xc1Ab\xff")).toBe("a\ufffdAb\ufffd")
        // A GB byte without its pair before ~}: that ~} still ends GB mode.
        expect(hzRead(`~{<:K~}after`)).toBe("己\ufffdafter")
        // A code of no GB2312 character (row 10), and a pair in rows GB2312 leaves empty (88 to 94).
        expect(hzRead("~{*!x!~}ok")).toBe("\ufffd\ufffdok")
        // A stray ~} in ASCII mode changes nothing; a redundant ~{ in GB mode is no pair of its own.
        expect(hzRead("x~}y")).toBe("xy")
        // An unclosed ~{ at the end: nothing lost before it.
        expect(hzRead("tail ~{")).toBe("tail ")
      })

      it("HZ: a line end in GB mode goes back to ASCII, so a writer that left ~{ open costs one line", () => {
        expect(hzRead(`~{<:\nplain line\r\nmore ~{<:~}`)).toBe("己\nplain line\r\nmore 己")
        // A space or tab in GB mode stands for itself.
        expect(hzRead(`~{<: <:\t<:~}`)).toBe("己 己\t己")
      })

      it("ISO-2022-KR: ESC $ ) C designates KS C 5601, SO and SI shift, KS C 5601 in pairs between, a space a space", () => {
        expect(krRead(`\x1b$)C\r\n${kr("안녕하세요")} hello ${kr("세계")}\r\n`)).toBe("\r\n안녕하세요 hello 세계\r\n")
        expect(krRead(`\x1b$)C\x0eGQ1[ GQ1[\x0f.`)).toBe("한글 한글.")
        expect(krRead("")).toBe("")
      })

      it("ISO-2022-KR: a lone SO without the designation still shifts into KS C 5601 (the one set it has); an SO left open ends with its line", () => {
        expect(krRead("\x0eGQ1[\x0f ok")).toBe("한글 ok")
        expect(krRead("a\x0e")).toBe("a")
        expect(krRead("a\x0e\x0fb")).toBe("ab")
        // Line ends go back to ASCII (RFC 1557 closes each line's shifts): the next line is ASCII again.
        expect(krRead("\x0eGQ\nGQ ok")).toBe("한\nGQ ok")
        expect(krRead("\x1b$)C\x0eGQ\r\nGQ\x0eGQ\x0f")).toBe("한\r\nGQ한")
      })

      it("ISO-2022-KR: a malformed escape or byte is U+FFFD, and the text after it reads as it is", () => {
        // Another escape sequence (its intermediates and final byte with it), a lone ESC, a broken designation.
        expect(krRead("a\x1b(Bb\x1b")).toBe("a\ufffdb\ufffd")
        expect(krRead("\x1b$)Xok")).toBe("\ufffdok")
        // Bytes with their high bit set (ISO-2022-KR has none), in ASCII and shifted alike.
        expect(krRead("a\xb0\xa1b\x0e\xb0GQ\x0f")).toBe("a\ufffd\ufffdb\ufffd한")
        // A shifted byte without its pair, and a code of no character (row 94).
        expect(krRead("\x0eG\x0fok")).toBe("\ufffdok")
        expect(krRead("\x0e~!\x0fok")).toBe("\ufffdok")
      })

      it("never throws, and keeps every line end, on arbitrary bytes", () => {
        let seed = 7
        const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) % 256
        for (let round = 0; round < 200; round++) {
          const noise = Buffer.from(Array.from({ length: 300 }, () => [0x7e, 0x7b, 0x7d, 0x0e, 0x0f, 0x1b, 0x0a][random() % 7]!))
          const mixed = Buffer.from(Array.from({ length: 300 }, (_, i) => (i % 3 === 0 ? noise[i]! : random())))
          for (const input of [noise, mixed]) {
            const lines = input.filter((byte) => byte === 0x0a).length
            // HZ's ~ and a line end is a line continued, RFC 1843's only way to drop one.
            const continued = input.toString("latin1").match(/(?<!~)(?:~~)*~\n/g)?.length ?? 0
            expect(decodeIso2022Kr(input).split("\n").length - 1).toBe(lines)
            expect(decodeHz(input).split("\n").length - 1).toBeGreaterThanOrEqual(lines - continued)
          }
        }
      })
    })

    it.effect("a text/plain body reads as its characters, sent 7bit, quoted-printable or base64", () =>
      Effect.gen(function*() {
        for (const [charset, body, text] of [
          ["hz-gb-2312", hzBody, "会议改到明天 at 10, room ~3.\n请带上slides, one line continued."],
          ["HZ-GB-2312", hzBody, "会议改到明天 at 10, room ~3.\n请带上slides, one line continued."],
          ["iso-2022-kr", krBody, "\n회의는 내일로 at 10, room ~3.\n슬라이드를 bring."],
          ["\"ISO-2022-KR\"", krBody, "\n회의는 내일로 at 10, room ~3.\n슬라이드를 bring."]
        ] as const) {
          for (const [encoding, sent] of [
            ["7bit", body.replace(/\n/g, "\r\n")],
            ["quoted-printable", qp(body)],
            ["base64", Buffer.from(body, "latin1").toString("base64")]
          ] as const) {
            const parsed = yield* parseMessage(message("Hi", charset, encoding, sent))
            expect(parsed.text.trimEnd(), `${charset} ${encoding}`).toBe(text)
          }
        }
      }))

    it.effect("a subject, and a sender's name, in encoded words (B or Q) read as their characters", () =>
      Effect.gen(function*() {
        const b = (charset: string, bytes: string) => `=?${charset}?B?${Buffer.from(bytes, "latin1").toString("base64")}?=`
        // Q as a phrase may hold it (RFC 2047 §5): letters, digits and !*+-/ as they are, the rest as =XX.
        const q = (charset: string, bytes: string) => `=?${charset}?Q?${bytes.replace(/[^A-Za-z0-9!*+/-]/g, (c) => `=${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, "0")}`)}?=`
        const cases = [
          [b("HZ-GB-2312", `${hz("季度报告")} Q3`), "季度报告 Q3"],
          [q("hz-gb-2312", `Re: ${hz("季度报告")}`), "Re: 季度报告"],
          [b("ISO-2022-KR", `\x1b$)C${kr("분기 보고서")} Q3`), "분기 보고서 Q3"],
          [q("iso-2022-kr", `Re: \x1b$)C${kr("분기 보고서")}`), "Re: 분기 보고서"]
        ] as const
        for (const [words, subject] of cases) {
          const raw = Buffer.from(message(words, "us-ascii", "7bit", "x").toString("latin1").replace("From: ada@example.com", `From: ${words} <ada@example.com>`), "latin1")
          const parsed = yield* parseMessage(raw)
          expect([parsed.subject, parsed.headers["subject"], parsed.fromName, parsed.from], words).toEqual([subject, subject, subject, "ada@example.com"])
        }
      }))

    it.effect("raw header text in ISO-2022-KR reads as ISO-2022-KR; in HZ, when the message's text is HZ; a ~{ in other mail stays as written", () =>
      Effect.gen(function*() {
        const korean = yield* parseMessage(message(`\x1b$)C${kr("회의 안내")} raw`, "iso-2022-kr", "7bit", krBody.replace(/\n/g, "\r\n")))
        expect([korean.subject, korean.headers["subject"]]).toEqual(["회의 안내 raw", "회의 안내 raw"])
        const shifted = yield* parseMessage(message(`${kr("회의 안내")} raw`, "us-ascii", "7bit", "x"))
        expect(shifted.subject).toBe("회의 안내 raw")
        const chinese = yield* parseMessage(message(`${hz("会议通知")} raw`, "hz-gb-2312", "7bit", hzBody.replace(/\n/g, "\r\n")))
        expect([chinese.subject, chinese.headers["subject"]]).toEqual(["会议通知 raw", "会议通知 raw"])
        const ascii = yield* parseMessage(message("a ~{ b ~} c", "us-ascii", "7bit", "x"))
        expect(ascii.subject).toBe("a ~{ b ~} c")
      }))
  })

  it.effect("UTF-8 text with a character's bytes cut by a line break reads alike sent 8-bit, quoted-printable or base64: its UTF-8 as UTF-8, only the stray bytes as Windows-1252", () =>
    Effect.gen(function*() {
      const head = (encoding: string) =>
        `From: ada@example.com\r\nTo: bot@agents.localhost\r\nSubject: Hi\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: ${encoding}\r\n\r\n`
      const quoted = yield* parseMessage(Buffer.from(`${head("quoted-printable")}Gr=C3=BC=C3=9Fe aus K=C3=B6ln, bad =C3\r\n=A4 end\r\n`))
      const eightBit = yield* parseMessage(Buffer.concat([Buffer.from(head("8bit")), Buffer.from("Grüße aus Köln, bad "), Buffer.from([0xc3, 0x0d, 0x0a, 0xa4]), Buffer.from(" end\r\n")]))
      const bytes = Buffer.concat([Buffer.from("Grüße aus Köln, bad "), Buffer.from([0xc3, 0x0a, 0xa4]), Buffer.from(" end\n")])
      const base64 = yield* parseMessage(Buffer.from(`${head("base64")}${bytes.toString("base64")}\r\n`))
      expect(quoted.text).toBe("Grüße aus Köln, bad Ã\n¤ end\n")
      expect([eightBit.text, base64.text]).toEqual([quoted.text, quoted.text])
    }))

  it.effect("an attachment keeps the charset its type named, lower-cased; none when it named none", () =>
    Effect.gen(function*() {
      const parsed = yield* parseMessage(yield* compose({
        text: "x",
        attachments: [
          { filename: "export.csv", content: Buffer.from("\ufeffQuarterly", "utf16le"), contentType: "text/csv; charset=UTF-16" },
          { filename: "note.txt", content: Buffer.from("Caf\xe9", "latin1"), contentType: "text/plain; charset=\"ISO-8859-1\"" },
          attachment
        ]
      }))
      expect(parsed.attachments.map((a) => [a.contentType, a.charset])).toEqual([
        ["text/csv", "utf-16"],
        ["text/plain", "iso-8859-1"],
        ["application/octet-stream", null]
      ])
      expect(parsed.attachments.slice(0, 2).map((a) => decodeText(a.content, a.charset))).toEqual(["Quarterly", "Café"])
    }))
})

describe("decodeText", () => {
  const bytes = (text: string, encoding: BufferEncoding) => new Uint8Array(Buffer.from(text, encoding))
  it("reads the charset named; a byte-order mark outranks it; undeclared, UTF-8 when the bytes are, else Windows-1252; never a NUL", () => {
    expect(decodeText(Uint8Array.of(0x82, 0xb1, 0x82, 0xf1), "shift_jis")).toBe("こん")
    expect(decodeText(Uint8Array.of(0xc1, 0xc2), "koi8-r")).toBe("аб")
    expect(decodeText(bytes("\ufeffZürich", "utf16le"), "iso-8859-1")).toBe("Zürich")
    expect(decodeText(Uint8Array.of(0xfe, 0xff, 0x00, 0x5a), null)).toBe("Z")
    expect(decodeText(bytes("Zürich – 5 €", "utf8"), null)).toBe("Zürich – 5 €")
    expect(decodeText(Uint8Array.of(0x5a, 0xfc, 0x72, 0x69, 0x63, 0x68, 0x20, 0x80), null)).toBe("Zürich €")
    expect(decodeText(bytes("plain", "utf8"), "no-such-charset")).toBe("plain")
    expect(decodeText(bytes("Quarterly", "utf16le"), "utf-8")).toBe("Quarterly")
    expect(decodeText(bytes("abc\u0000def", "utf8"), "utf-8")).toBe("abcdef")
  })
  it("reads ISO-2022-JP by any of its names (an attachment's text, a calendar) as its characters, not its escapes", () => {
    const jis = Buffer.from("\x1b$B$3$s$K$A$O\x1b(B world\r\n\x1b$B$\"\x1b(B", "latin1")
    for (const name of ["ISO-2022-JP", "iso-2022-jp-2", "csISO2022JP", "JIS"]) expect(decodeText(jis, name)).toBe("こんにちは world\r\nあ")
    // An html part whose meta tag names it is labelled with it (withHtmlMetaCharsets), as with any charset read here.
    expect(htmlMetaCharset(`<html><head><meta charset="ISO-2022-JP"></head>`)).toBe("iso-2022-jp")
  })
})

describe("legacyBytesAsUtf8", () => {
  it("keeps every UTF-8 character and reads each other byte as Windows-1252: overlong forms, surrogates, cut characters included", () => {
    const valid = Buffer.from("Zoë 😀 日本 \u{10ffff}")
    expect(legacyBytesAsUtf8(valid)).toBe(valid)
    const read = (...octets: Array<number>) => legacyBytesAsUtf8(Buffer.from(octets)).toString("utf8")
    expect(read(0xc0, 0xaf)).toBe("À¯") // an overlong "/"
    expect(read(0xed, 0xa0, 0x80)).toBe("í\u00a0€") // a UTF-16 surrogate
    expect(read(0xf4, 0x90, 0x80, 0x80)).toBe("ô\ufffd€€") // past U+10FFFF (0x90 means nothing in Windows-1252)
    expect(read(0x41, 0xe2, 0x82)).toBe("Aâ‚") // cut at the end
    expect(read(0x93, 0x68, 0x69, 0x94, 0x20, 0xc3, 0xa9)).toBe("“hi” é")
  })
})
