/**
 * The composer's header lines (services/outbound/compose.ts) against RFC 5322 §2.1.1: none over 998
 * octets whatever a caller may send (a subject or an X- field of one word as long as they may be, an
 * answered message's id), and none over 78 where the field can be folded.
 */
import { Effect } from "effect"
import libmime from "libmime"
import { simpleParser } from "mailparser"
import { generateKeyPairSync } from "node:crypto"
import { describe, expect, it } from "vitest"
import { compose, type Composition } from "../../services/outbound/compose.ts"
import { overlongHeaderLines } from "../support/mx-server.ts"

const pair = generateKeyPairSync("rsa", { modulusLength: 2048 })

const message = (fields: Partial<Composition>): Composition => ({
  from: { address: "ann@agents.test" },
  to: [{ address: "bob@partner.test" }],
  cc: [],
  subject: "Hello",
  text: "Hi",
  attachments: [],
  headers: {},
  messageId: "<m1@agents.test>",
  references: [],
  date: new Date("2026-12-07T09:00:00Z"),
  dkim: { domainName: "agents.test", keySelector: "sel1", privateKey: pair.privateKey },
  ...fields
})

const composed = async (fields: Partial<Composition>) => {
  const raw = Buffer.from(await Effect.runPromise(compose(message(fields))))
  return { raw, lines: raw.subarray(0, raw.indexOf("\r\n\r\n")).toString("latin1").split("\r\n"), parsed: await simpleParser(raw) }
}

/** The header lines of `raw` and of each of its parts (the lines from a boundary line to the next empty one). */
const allHeaderLines = (raw: Buffer): Array<string> => {
  const lines = raw.toString("latin1").split("\r\n")
  const head: Array<string> = []
  let inHead = true
  for (const line of lines) {
    if (line === "") inHead = false
    else if (/^--\S/.test(line)) inHead = true
    else if (inHead) head.push(line)
  }
  return head
}

describe("composed header lines", () => {
  it("a display name of one long word in From, To, Cc or Reply-To goes in encoded words that fold, and reads as given", async () => {
    const long = "a".repeat(1_100)
    const names = {
      from: "F".repeat(200),
      to: [long, `Dr. ${"x".repeat(300)} Smith`, "Short Name"],
      cc: [`"Q" ${"q".repeat(120)}\\`],
      replyTo: `reply-${"r".repeat(990)}`
    }
    const { raw, lines, parsed } = await composed({
      from: { name: names.from, address: "ann@agents.test" },
      to: names.to.map((name, i) => ({ name, address: `to${i}@partner.test` })),
      cc: names.cc.map((name) => ({ name, address: "cc@partner.test" })),
      replyTo: { name: names.replyTo, address: "replies@agents.test" }
    })
    expect(overlongHeaderLines(raw)).toEqual([])
    expect(lines.filter((line) => line.length > 78 && !line.startsWith("DKIM-Signature"))).toEqual([])
    const read = (field: typeof parsed.to) => (Array.isArray(field) ? field : field === undefined ? [] : [field]).flatMap((f) => f.value.map((a) => [a.name, a.address]))
    expect(read(parsed.from)).toEqual([[names.from, "ann@agents.test"]])
    expect(read(parsed.to)).toEqual(names.to.map((name, i) => [name, `to${i}@partner.test`]))
    expect(read(parsed.cc)).toEqual([[names.cc[0], "cc@partner.test"]])
    expect(read(parsed.replyTo)).toEqual([[names.replyTo, "replies@agents.test"]])
    // A name that folds is written as it was given.
    expect(lines.join("\r\n").replace(/\r\n(?=[ \t])/g, "")).toContain(", Short Name <to2@partner.test>")
  })

  it("an attachment's file name of one long word goes in continuations that fold, in both parameters, and reads as given", async () => {
    const pdf = `${"f".repeat(1_200)}.pdf`
    const quoted = `q"uo\\te;=${"g".repeat(300)}.txt`
    const image = `${"i".repeat(100)}.png`
    const { raw, parsed } = await composed({
      html: "<img src=\"cid:logo@x\">",
      attachments: [
        { filename: pdf, content: "AAAA", content_type: "application/pdf" },
        { filename: quoted, content: Buffer.from("Caf\xe9", "latin1").toString("base64"), content_type: "text/plain; charset=iso-8859-1" },
        { filename: image, content: "AAAA", content_id: "logo@x" },
        { filename: "short.pdf", content: "AAAA", content_id: `${"c".repeat(990)}@x` }
      ]
    })
    expect(allHeaderLines(raw).filter((line) => line.length > 78 && !line.startsWith("DKIM-Signature"))).toEqual([])
    // The inline image, in the html's multipart/related, is read first.
    expect(parsed.attachments.map((a) => [a.filename, (a.headers.get("content-type") as { params: Record<string, string> }).params["name"], a.contentDisposition, a.cid])).toEqual([
      [image, image, "inline", "logo@x"],
      [pdf, pdf, "attachment", undefined],
      [quoted, quoted, "attachment", undefined],
      // A content id no line can hold is left out.
      ["short.pdf", "short.pdf", "attachment", undefined]
    ])
    expect(parsed.attachments[2]?.contentType).toBe("text/plain")
    expect(parsed.attachments[2]?.content.toString("latin1")).toBe("Caf\xe9")
  })


  it("a subject or an X- field of one word as long as a send takes goes in encoded words, and reads as given", async () => {
    const subject = `https://example.com/?q=${"x".repeat(998 - 23)}`
    const ticket = "T".repeat(998)
    const { lines, parsed, raw } = await composed({ subject, headers: { "X-Ticket": ticket, "X-Short": "kept as written" } })
    expect(subject).toHaveLength(998)
    expect(overlongHeaderLines(raw)).toEqual([])
    expect(lines.filter((line) => line.length > 78 && !line.startsWith("DKIM-Signature"))).toEqual([])
    // mailparser leaves an X- field's encoded words as they are: a reader decodes them as RFC 2047 says.
    expect([parsed.subject, libmime.decodeWords(String(parsed.headers.get("x-ticket")))]).toEqual([subject, ticket])
    expect(lines).toContain("X-Short: kept as written")
  })

  it("an X- field's long word that a line can hold is sent as written, for a receiver's automation", async () => {
    const ticket = "T".repeat(900)
    const { lines } = await composed({ headers: { "X-Ticket": ticket } })
    expect(lines).toContain(` ${ticket}`)
  })

  it("leaves out of In-Reply-To and References an id no line can hold, and keeps one that just fits", async () => {
    const fits = `<${"a".repeat(995)}>`
    const over = `<${"b".repeat(996)}>`
    const root = "<root@partner.test>"
    expect([fits.length, over.length]).toEqual([997, 998])
    const kept = await composed({ inReplyTo: fits, references: [root, fits] })
    expect(overlongHeaderLines(kept.raw)).toEqual([])
    expect([kept.parsed.inReplyTo, kept.parsed.references]).toEqual([fits, [root, fits]])
    const dropped = await composed({ inReplyTo: over, references: [root, over] })
    expect(overlongHeaderLines(dropped.raw)).toEqual([])
    expect([dropped.parsed.inReplyTo, dropped.parsed.references]).toEqual([undefined, root])
    const none = await composed({ inReplyTo: over, references: [over] })
    expect([none.parsed.inReplyTo, none.parsed.references, none.lines.some((line) => /^References:/i.test(line))]).toEqual([undefined, undefined, false])
  })
})
