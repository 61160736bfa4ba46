/**
 * A message submitted over SMTP made ready to send (services/outbound/submitted.ts): the header rules
 * on the shapes mail programs write that the black-box suite (test/outbound/submission.test.ts) does
 * not send: folded fields, display names, case, groups, repeated and malformed fields.
 */
import { simpleParser } from "mailparser"
import { describe, expect, it } from "vitest"
import { prepareSubmitted } from "../../services/outbound/submitted.ts"

const MAILBOX = "Desk@agents.localhost"
const options = { mailboxAddress: MAILBOX, messageId: "<eml_1@agents.localhost>", date: new Date("2026-11-30T09:30:00Z") }
const prepare = (message: string) => prepareSubmitted(Buffer.from(message, "latin1"), options)
const ready = (message: string) => {
  const prepared = prepare(message)
  if (!("ok" in prepared)) throw new Error(`refused: ${prepared.refused.message}`)
  return { raw: prepared.ok.raw.toString("latin1"), messageId: prepared.ok.messageId }
}

describe("prepareSubmitted", () => {
  it("keeps the client's fields as written, folds included, and its Message-ID", () => {
    const message = "From: \"Desk, the agent\"\r\n <desk@AGENTS.localhost>\r\nSubject: a long\r\n\tsubject\r\nMessage-ID: <abc@client.example>\r\n" +
      "Date: Mon, 30 Nov 2026 09:00:00 +0100\r\n\r\nBody\r\n"
    expect(ready(message)).toEqual({ raw: message, messageId: "<abc@client.example>" })
  })

  it("takes out Bcc and Resent-Bcc (folded too, any case) and Return-Path, and adds what is missing", () => {
    const { messageId, raw } = ready(
      "Return-Path: <x@y>\nFrom: desk@agents.localhost\nBcc: a@x.example,\n b@x.example\nRESENT-BCC: r@x.example\nTo: c@x.example\n\nHi\n"
    )
    expect(messageId).toBe("<eml_1@agents.localhost>")
    expect(raw).toBe(
      "Message-ID: <eml_1@agents.localhost>\r\nDate: Mon, 30 Nov 2026 09:30:00 +0000\r\nFrom: desk@agents.localhost\r\nTo: c@x.example\r\n\r\nHi\r\n"
    )
  })

  it("replaces a malformed or repeated Message-ID with Mailroom's", () => {
    for (const ids of ["Message-ID: not-an-id\r\n", "Message-ID: <a@b>\r\nMessage-ID: <c@d>\r\n"]) {
      const { messageId, raw } = ready(`From: desk@agents.localhost\r\n${ids}Date: x\r\n\r\nHi\r\n`)
      expect(messageId).toBe("<eml_1@agents.localhost>")
      expect(raw.match(/^Message-ID:.*$/gim)).toEqual(["Message-ID: <eml_1@agents.localhost>"])
    }
  })

  it("a header alone (no body) gets its blank line", () => {
    expect(ready("From: desk@agents.localhost\r\nDate: x\r\nMessage-ID: <a@b>").raw).toBe(
      "From: desk@agents.localhost\r\nDate: x\r\nMessage-ID: <a@b>\r\n\r\n"
    )
  })

  it("refuses any From but the mailbox's, alone, and a header line that is no field", () => {
    const from = { field: "from", message: `From must be the sending mailbox's address, ${MAILBOX}, alone` }
    expect(prepare("From: ceo@agents.localhost\r\n\r\nx")).toEqual({ refused: from })
    expect(prepare("From: desk@agents.localhost, ceo@agents.localhost\r\n\r\nx")).toEqual({ refused: from })
    expect(prepare("From: team: desk@agents.localhost, ceo@agents.localhost;\r\n\r\nx")).toEqual({ refused: from })
    // An address at another domain whose quoted local part reads like the mailbox's (a spoofed From signed by Mailroom).
    expect(prepare("From: <\"<desk@agents.localhost>\"@evil.example>\r\n\r\nx")).toEqual({ refused: from })
    expect(prepare("To: a@b\r\n\r\nx")).toEqual({ refused: { field: "from", message: "the message has no From field" } })
    expect(prepare("From: desk@agents.localhost\r\nFrom: desk@agents.localhost\r\n\r\nx")).toEqual({
      refused: { field: "from", message: "the message has more than one From field" }
    })
    // Nor a Sender (or a resender) but the mailbox: "ceo@bank.example on behalf of" it would be a lie.
    expect(prepare("From: desk@agents.localhost\r\nSender: ceo@bank.example\r\n\r\nx")).toEqual({
      refused: { field: "from", message: `Sender must be the sending mailbox's address, ${MAILBOX}, alone, or left out` }
    })
    expect(prepare("From: desk@agents.localhost\r\nResent-From: ceo@bank.example\r\n\r\nx")).toEqual({
      refused: { field: "from", message: `Resent-From must be the sending mailbox's address, ${MAILBOX}, alone, or left out` }
    })
    expect(ready("From: desk@agents.localhost\r\nSender: Desk <DESK@agents.localhost>\r\n\r\nx").raw).toContain("Sender: Desk <DESK@agents.localhost>")
    expect(prepare(" folded: nothing\r\nFrom: desk@agents.localhost\r\n\r\nx")).toEqual({
      refused: { field: "message", message: "the message's header has a line that is not a field (Name: value)" }
    })
    // What receiving servers refuse or cut: a header line past 998 characters, a NUL anywhere.
    expect(prepare(`From: desk@agents.localhost\r\nX-Long: ${"a".repeat(991)}\r\n\r\nx`)).toEqual({
      refused: { field: "message", message: "the message's header has a line longer than 998 characters: fold it" }
    })
    expect(prepare("From: desk@agents.localhost\r\n\r\nnul\u0000here")).toEqual({
      refused: { field: "message", message: "the message holds a NUL character, which mail may not carry" }
    })
  })

  it("makes 8-bit text 7-bit without changing what it says: bodies quoted-printable or base64, header text encoded words", async () => {
    const utf8 = (text: string) => Buffer.from(text, "utf8")
    const eightBit = (raw: Buffer) => raw.some((byte) => byte > 127)
    const readyBytes = (message: Buffer) => {
      const prepared = prepareSubmitted(message, options)
      if (!("ok" in prepared)) throw new Error(`refused: ${prepared.refused.message}`)
      return prepared.ok.raw
    }
    const plain = utf8(
      "From: Jürgen Groß <desk@agents.localhost>\r\nTo: \"Zoë, Ops\" <zoe@x.example>, team: ann@x.example;\r\nSubject: Grüße aus Köln — 10 €\r\n" +
        "Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\nDie Bücher sind da. \r\nZweite Zeile: ½ Preis\r\n"
    )
    const converted = readyBytes(plain)
    expect(eightBit(converted)).toBe(false)
    expect(converted.toString("latin1")).toMatch(/^Content-Transfer-Encoding: quoted-printable$/m)
    const parsed = await simpleParser(converted)
    expect(parsed.subject).toBe("Grüße aus Köln — 10 €")
    expect(parsed.from?.value).toEqual([{ name: "Jürgen Groß", address: "desk@agents.localhost" }])
    expect(parsed.to).toMatchObject({ value: [{ name: "Zoë, Ops", address: "zoe@x.example" }, { name: "team", group: [{ address: "ann@x.example" }] }] })
    expect(parsed.text).toBe("Die Bücher sind da. \nZweite Zeile: ½ Preis\n")

    // A multipart: each 8-bit part re-encoded (an attachment in base64), its file name as RFC 2231 says.
    const file = Buffer.from([0x01, 0xff, 0xfe, 0x80, 0x41])
    const multipart = Buffer.concat([
      utf8(
        "From: desk@agents.localhost\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"b1\"\r\nContent-Transfer-Encoding: 8bit\r\n\r\n" +
          "--b1\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<p>Café</p>\r\n--b1\r\nContent-Type: application/octet-stream; name=\"résumé.bin\"\r\n" +
          "Content-Disposition: attachment; filename=\"résumé.bin\"\r\nContent-Transfer-Encoding: binary\r\n\r\n"
      ),
      file,
      utf8("\r\n--b1--\r\n")
    ])
    const parts = readyBytes(multipart)
    expect(eightBit(parts)).toBe(false)
    const read = await simpleParser(parts)
    expect(read.html).toBe("<p>Café</p>")
    expect(read.attachments.map((a) => [a.filename, a.content])).toEqual([["résumé.bin", file]])

    // An address with a non-ASCII mailbox name has no 7-bit form: left as written (it needs SMTPUTF8).
    const international = readyBytes(utf8("From: desk@agents.localhost\r\nTo: jürgen@x.example\r\n\r\nHi\r\n"))
    expect(international.toString("utf8")).toContain("To: jürgen@x.example\r\n")
    // 7-bit mail is not touched.
    const ascii = "From: desk@agents.localhost\r\nDate: x\r\nMessage-ID: <a@b>\r\nSubject: Plain\r\n\r\nHello\r\n"
    expect(ready(ascii).raw).toBe(ascii)
  })

  it("labels 8-bit text that declared no charset with its own once encoded: utf-8, or unknown-8bit; a declared one is kept", async () => {
    // Quoted-printable text without a charset reads as US-ASCII (RFC 2045 §5.2): `body =C3=BC` shown as garbage.
    const utf8 = (text: string) => Buffer.from(text, "utf8")
    const readyBytes = (message: Buffer) => {
      const prepared = prepareSubmitted(message, options)
      if (!("ok" in prepared)) throw new Error(`refused: ${prepared.refused.message}`)
      return prepared.ok.raw
    }
    const header = (raw: Buffer) => raw.toString("latin1").split("\r\n\r\n")[0]!
    const bare = readyBytes(utf8("From: desk@agents.localhost\r\nTo: x@example.com\r\nSubject: Ünïcödé raw\r\nMessage-ID: <raw8@test.local>\r\n\r\nbody ü\r\n"))
    expect(header(bare)).toMatch(/^Content-Type: text\/plain; charset=utf-8$/m)
    expect(header(bare)).toMatch(/^MIME-Version: 1\.0$/m)
    expect((await simpleParser(bare)).text).toBe("body ü\n")
    const flowed = readyBytes(utf8("From: desk@agents.localhost\r\nContent-Type: Text/Plain; format=flowed\r\n\r\nbody ü\r\n"))
    expect(header(flowed).match(/^Content-Type:.*$/gm)).toEqual(["Content-Type: text/plain; format=flowed; charset=utf-8"])
    const latin1 = readyBytes(Buffer.from("From: desk@agents.localhost\r\nContent-Type: text/plain\r\n\r\nbody \xfc\r\n", "latin1"))
    expect(header(latin1).match(/^Content-Type:.*$/gm)).toEqual(["Content-Type: text/plain; charset=unknown-8bit"])
    const declared = readyBytes(utf8("From: desk@agents.localhost\r\nContent-Type: text/plain; charset=iso-8859-1\r\n\r\nbody ü\r\n"))
    expect(header(declared).match(/^Content-Type:.*$/gm)).toEqual(["Content-Type: text/plain; charset=iso-8859-1"])
    // Only text has a charset: an 8-bit attachment is base64 and labelled as it was.
    const binary = readyBytes(Buffer.concat([utf8("From: desk@agents.localhost\r\nMIME-Version: 1.0\r\nContent-Type: application/octet-stream\r\n\r\n"), Buffer.from([0x01, 0xff, 0xfe])]))
    expect(header(binary).match(/^Content-Type:.*$/gm)).toEqual(["Content-Type: application/octet-stream"])
    // A part of a multipart, too.
    const inPart = readyBytes(utf8("From: desk@agents.localhost\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=b2\r\n\r\n--b2\r\n\r\nTeil ü\r\n--b2--\r\n"))
    expect(inPart.toString("latin1")).toContain("--b2\r\nContent-Transfer-Encoding: quoted-printable\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nTeil =C3=BC")
  })
})
