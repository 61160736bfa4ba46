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

describe("composed header lines", () => {
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
