/**
 * IMAP's wire format and a message's MIME tree as IMAP reads it, as pure functions: command parsing
 * and framing (literals, sections, limits), sequence sets, modified UTF-7 folder names, the
 * BODYSTRUCTURE, ENVELOPE and BODY[section] of messages with nested parts, and filing as labelling.
 */
import { Either } from "effect"
import { describe, expect, it } from "vitest"
import { filing, type Folder, folderNamed, foldersOf, systemFolders } from "../../services/imap/folders.ts"
import { bodyStructure, envelope, parseMessage, sectionBytes } from "../../services/imap/mime.ts"
import {
  CommandReader,
  decodeMailboxName,
  encodeMailboxName,
  formatSequenceSet,
  inSequenceSet,
  Literal,
  parseCommand as parseEither,
  tagOf,
  parseSearchDate,
  parseSequenceSet,
  Raw,
  serialize
} from "../../src/imap/protocol.ts"

const bytes = (text: string) => Buffer.from(text, "latin1")

/** A command the parser takes; its refusal, for one it does not, is `mistakeIn`'s. */
const parseCommand = (input: string) => Either.getOrThrowWith(parseEither(input), (bad) => new Error(`refused: ${bad.message}`))
/** The client's mistake the parser names, as the BadCommand it fails with (answered BAD). */
const mistakeIn = (input: string) =>
  Either.match(parseEither(input), { onLeft: (bad) => `${bad._tag}: ${bad.message}`, onRight: () => "taken" })

describe("IMAP commands", () => {
  it("parses atoms, quoted strings with escapes, literals, lists and FETCH sections as one atom", () => {
    expect(parseCommand("a1 login \"ann@x.test\" \"p\\\"w\\\\d\"\r\n")).toEqual({
      tag: "a1",
      name: "LOGIN",
      args: [{ kind: "string", text: "ann@x.test" }, { kind: "string", text: "p\"w\\d" }]
    })
    expect(parseCommand("a2 LOGIN {3}\r\nann {4+}\r\nsecr\r\n").args).toEqual([
      { kind: "string", text: "ann" },
      { kind: "string", text: "secr" }
    ])
    expect(parseCommand("a3 UID FETCH 1:* (UID BODY.PEEK[HEADER.FIELDS (From To)]<0.100>)\r\n").args).toEqual([
      { kind: "atom", text: "FETCH" },
      { kind: "atom", text: "1:*" },
      { kind: "list", items: [{ kind: "atom", text: "UID" }, { kind: "atom", text: "BODY.PEEK[HEADER.FIELDS (From To)]<0.100>" }] }
    ])
    expect(mistakeIn("a4 LOGIN \"open\r\n")).toBe("BadCommand: Unterminated quoted string")
    expect(mistakeIn("a5 FETCH (1\r\n")).toBe("BadCommand: Unterminated list")
    expect(mistakeIn("* NOOP\r\n")).toBe("BadCommand: Expected a tag and a command")
    // NUL is in no command (RFC 3501 §9): BAD, not a store's failure told as "try again later"; an APPEND's message is kept as sent.
    for (const command of ["n1 SELECT \"IN\u0000BOX\"\r\n", "n2 SEARCH BODY {4}\r\nfo\u0000o\r\n", "n3 LOGIN a\u0000b key\r\n"]) {
      expect(mistakeIn(command), command).toBe("BadCommand: A command holds no NUL character")
    }
    expect(parseCommand("n4 APPEND Sent {5}\r\nA\u0000BCD\r\n").args[1]).toEqual({ kind: "string", text: "A\u0000BCD" })
    // Lists nest 100 deep at most: deeper is BAD, not a stack overflow (20,000 parentheses fit in a line).
    const nested = (depth: number) => `${"(".repeat(depth)}x${")".repeat(depth)}`
    expect(mistakeIn(`d1 LOGIN ${nested(20_000)}\r\n`)).toBe("BadCommand: Lists nested more than 100 deep")
    expect(mistakeIn(`d2 SEARCH ${nested(101)}\r\n`)).toBe("BadCommand: Lists nested more than 100 deep")
    expect(mistakeIn(`d3 SEARCH ${nested(100)}\r\n`)).toBe("taken")
    // A tag of bytes no tag has is not sent back: the refusal is untagged.
    expect([tagOf("\ufffd\ufffd\u0000garbage\r\n"), tagOf("a1 NOOP\r\n")]).toEqual(["*", "a1"])
  })

  it("frames commands across chunks, invites synchronising literals once, and skips one past the limit", () => {
    const reader = new CommandReader(100)
    expect(reader.push(bytes("a1 NO"))).toEqual([])
    expect(reader.push(bytes("OP\r\na2 LOGIN {5}\r\n"))).toEqual([{ kind: "command", bytes: "a1 NOOP\r\n" }, { kind: "continue" }])
    // The literal holds a line end: it is the literal's, not the command's end.
    expect(reader.push(bytes("an\r\nn"))).toEqual([])
    expect(reader.push(bytes(" pw\r\n"))).toEqual([{ kind: "command", bytes: "a2 LOGIN {5}\r\nan\r\nn pw\r\n" }])
    // LITERAL+ is not invited; past the limit, refused as announced and its bytes skipped.
    expect(reader.push(bytes("a3 APPEND INBOX {200+}\r\n"))).toEqual([{ kind: "tooLong", tag: "a3", append: true, limit: 100 }])
    expect(reader.push(bytes("x".repeat(200) + "\r\na4 NOOP\r\n"))).toEqual([{ kind: "command", bytes: "a4 NOOP\r\n" }])
    // A synchronising literal past the limit is never invited, so its bytes never come.
    expect(reader.push(bytes("a5 APPEND INBOX {200}\r\na6 NOOP\r\n"))).toEqual([
      { kind: "tooLong", tag: "a5", append: true, limit: 100 },
      { kind: "command", bytes: "a6 NOOP\r\n" }
    ])
    expect(reader.push(bytes(`a7 ${"y".repeat(120)}`))).toEqual([{ kind: "tooLong", tag: "a7", append: false, limit: 100 }])
  })

  it("takes an APPEND's message up to its own, larger limit", () => {
    const reader = new CommandReader(100, 1000)
    expect(reader.push(bytes("a1 APPEND Sent {500}\r\n"))).toEqual([{ kind: "continue" }])
    expect(reader.push(bytes("m".repeat(500) + "\r\n"))).toEqual([{ kind: "command", bytes: `a1 APPEND Sent {500}\r\n${"m".repeat(500)}\r\n` }])
    // Past it, the message is too big (the server answers NO [TOOBIG]); another command's limit is the command's.
    expect(reader.push(bytes("a2 APPEND Sent {2000}\r\n"))).toEqual([{ kind: "tooLong", tag: "a2", append: true, limit: 1000 }])
    expect(reader.push(bytes("a3 ID {500}\r\n"))).toEqual([{ kind: "tooLong", tag: "a3", append: false, limit: 100 }])
  })

  it("writes strings quoted when it can and as literals when it must", () => {
    expect(serialize(["a \"b\"", null, 7, new Raw("\\Seen"), "line\r\nbreak", new Literal("x")])).toBe(
      "(\"a \\\"b\\\"\" NIL 7 \\Seen {11}\r\nline\r\nbreak {1}\r\nx)"
    )
    expect(serialize("caf\u00e9")).toBe("{4}\r\ncaf\u00e9")
  })

  it("sequence sets: ranges either way round, * as the largest, joined back into runs", () => {
    const set = parseSequenceSet("1:3,7,9:*")!
    expect([1, 2, 3, 4, 7, 8, 9, 12].filter((n) => inSequenceSet(set, n, 12))).toEqual([1, 2, 3, 7, 9, 12])
    expect(inSequenceSet(parseSequenceSet("5:2")!, 3, 10)).toBe(true)
    // n:* past the largest still names the largest.
    expect(inSequenceSet(parseSequenceSet("20:*")!, 12, 12)).toBe(true)
    expect(parseSequenceSet("0:3")).toBeUndefined()
    expect(parseSequenceSet("1,,2")).toBeUndefined()
    expect(formatSequenceSet([5, 1, 2, 3, 9])).toBe("1:3,5,9")
  })

  it("folder names in modified UTF-7, both ways", () => {
    expect(encodeMailboxName("Entwürfe")).toBe("Entw&APw-rfe")
    expect(encodeMailboxName("R&D")).toBe("R&-D")
    expect(encodeMailboxName("日本語")).toBe("&ZeVnLIqe-")
    for (const name of ["Entwürfe", "R&D", "日本語", "Clients/Ünïcode & co"]) expect(decodeMailboxName(encodeMailboxName(name))).toBe(name)
  })

  it("SEARCH dates: the day as written in any year; a day its month does not have is no date", () => {
    const read = (text: string) => parseSearchDate(text)?.toISOString()
    expect(read("1-Feb-2026")).toBe("2026-02-01T00:00:00.000Z")
    expect(read("29-feb-2024")).toBe("2024-02-29T00:00:00.000Z")
    // Years below 100 as written (Date.UTC would read 0050 as 1950); 0000 is a leap year, 1900 not.
    expect(read("1-Jan-0050")).toBe("0050-01-01T00:00:00.000Z")
    expect(read("29-Feb-0000")).toBe("0000-02-29T00:00:00.000Z")
    for (const text of ["29-Feb-1900", "31-Apr-2026", "0-Jan-2026", "1-Foo-2026", "1-Jan-26"]) expect(read(text)).toBeUndefined()
  })
})

const message = [
  "From: \"Ada L.\" <ada@example.com>",
  "To: team: bob@example.com, carol@example.com;, dan@example.com",
  "Subject: =?UTF-8?Q?R=C3=A9sum=C3=A9?=",
  "Message-ID: <m1@example.com>",
  "Content-Type: multipart/mixed; boundary=\"outer\"",
  "",
  "preamble",
  "--outer",
  "Content-Type: text/plain; charset=utf-8",
  "",
  "Hello",
  "world",
  "--outer",
  "Content-Type: message/rfc822",
  "Content-Disposition: attachment; filename=\"fwd.eml\"",
  "",
  "From: bob@example.com",
  "Subject: Inner",
  "Content-Type: multipart/alternative; boundary=inner",
  "",
  "--inner",
  "Content-Type: text/plain",
  "",
  "inner text",
  "--inner",
  "Content-Type: text/html",
  "Content-Transfer-Encoding: quoted-printable",
  "",
  "<p>inner</p>",
  "--inner--",
  "--outer--",
  ""
].join("\r\n")

describe("a message as IMAP reads it", () => {
  const { root, text } = parseMessage(bytes(message))

  it("BODYSTRUCTURE: parts, parameters, sizes, lines, and a forwarded message's envelope and structure", () => {
    const structure = bodyStructure(text, root, true)
    expect(structure[0]).toEqual(["text", "plain", ["charset", "utf-8"], null, null, "7bit", 12, 2, null, null, null, null])
    const forwarded = structure[1] as ReadonlyArray<unknown>
    expect(forwarded.slice(0, 6)).toEqual(["message", "rfc822", null, null, null, "7bit"])
    expect((forwarded[7] as ReadonlyArray<unknown>)[1]).toBe("Inner")
    const inner = forwarded[8] as ReadonlyArray<unknown>
    expect((inner[1] as ReadonlyArray<unknown>).slice(0, 7)).toEqual(["text", "html", null, null, null, "quoted-printable", 12])
    expect(inner[2]).toBe("alternative")
    expect(forwarded[11]).toEqual(["attachment", ["filename", "fwd.eml"]])
    expect(structure.slice(2, 4)).toEqual(["mixed", ["boundary", "outer"]])
    // BODY: no extension data.
    expect(bodyStructure(text, root, false)).toHaveLength(3)
  })

  it("ENVELOPE: headers as written, addresses split, groups around their members, Sender and Reply-To from From", () => {
    const [date, subject, from, sender, replyTo, to, cc, bcc, inReplyTo, messageId] = envelope(root)
    expect([date, subject, cc, bcc, inReplyTo, messageId]).toEqual([null, "=?UTF-8?Q?R=C3=A9sum=C3=A9?=", null, null, null, "<m1@example.com>"])
    expect(from).toEqual([["Ada L.", null, "ada", "example.com"]])
    expect(sender).toEqual(from)
    expect(replyTo).toEqual(from)
    expect(to).toEqual([
      [null, null, "team", null],
      [null, null, "bob", "example.com"],
      [null, null, "carol", "example.com"],
      [null, null, null, null],
      [null, null, "dan", "example.com"]
    ])
  })

  it("BODY[section]: parts by number, inside a forwarded message too; HEADER, TEXT, MIME and header fields", () => {
    expect(sectionBytes(text, root, [1], { kind: "all" })).toBe("Hello\r\nworld")
    expect(sectionBytes(text, root, [1], { kind: "mime" })).toBe("Content-Type: text/plain; charset=utf-8\r\n\r\n")
    expect(sectionBytes(text, root, [2, 1], { kind: "all" })).toBe("inner text")
    expect(sectionBytes(text, root, [2, 2], { kind: "all" })).toBe("<p>inner</p>")
    expect(sectionBytes(text, root, [2], { kind: "header" })).toMatch(/^From: bob@example.com\r\nSubject: Inner\r\n[^]*\r\n\r\n$/)
    expect(sectionBytes(text, root, [2], { kind: "all" })).toMatch(/^From: bob@example.com[^]*--inner--$/)
    expect(sectionBytes(text, root, [], { kind: "fields", names: ["subject", "MESSAGE-ID"], not: false })).toBe(
      "Subject: =?UTF-8?Q?R=C3=A9sum=C3=A9?=\r\nMessage-ID: <m1@example.com>\r\n\r\n"
    )
    expect(sectionBytes(text, root, [], { kind: "fields", names: ["content-type", "to", "from"], not: true })).toBe(
      "Subject: =?UTF-8?Q?R=C3=A9sum=C3=A9?=\r\nMessage-ID: <m1@example.com>\r\n\r\n"
    )
    expect(sectionBytes(text, root, [], { kind: "all" })).toBe(message)
    expect(sectionBytes(text, root, [3], { kind: "all" })).toBeUndefined()
    expect(sectionBytes(text, root, [1, 1], { kind: "all" })).toBeUndefined()
  })

  it("a message that is not multipart is its own part 1; no Content-Type is text/plain in US-ASCII", () => {
    const single = parseMessage(bytes("Subject: Hi\r\n\r\nJust text\r\n"))
    expect(sectionBytes(single.text, single.root, [1], { kind: "all" })).toBe("Just text\r\n")
    expect(bodyStructure(single.text, single.root, false)).toEqual(["text", "plain", ["charset", "us-ascii"], null, null, "7bit", 11, 1])
  })
})

describe("filing mail between folders", () => {
  const [inbox, sent, junk, trash] = systemFolders as [Folder, Folder, Folder, Folder]
  const acme = foldersOf(["Acme"]).find((folder) => folder.label === "Acme")!
  const later = foldersOf(["Later"]).find((folder) => folder.label === "Later")!
  const received = ["inbound"]

  it("is labelling: COPY adds a label, MOVE swaps labels, Junk is the spam verdict given and taken back", () => {
    expect(filing(inbox, acme, false, received)).toEqual({ add: ["Acme"], remove: [] })
    expect(filing(later, acme, true, received)).toEqual({ add: ["Acme"], remove: ["Later"] })
    expect(filing(inbox, junk, true, received)).toEqual({ add: ["spam"], remove: [] })
    expect(filing(acme, junk, true, received)).toEqual({ add: ["spam"], remove: ["Acme"] })
    expect(filing(junk, inbox, true, received)).toEqual({ add: [], remove: ["spam", "blocked"] })
    expect(filing(junk, acme, true, received)).toEqual({ add: ["Acme"], remove: ["spam", "blocked"] })
    expect(filing(sent, acme, false, ["outbound"])).toEqual({ add: ["Acme"], remove: [] })
    // Mailroom keeps no deleted mail: Trash is where mail programs delete by moving.
    expect(filing(acme, trash, true, ["inbound", "outbound"])).toEqual({ deletes: true })
    expect(filing(inbox, trash, false, received)).toEqual({ refused: "MOVE mail to Trash to delete it" })
  })

  it("refuses what folders as views cannot show", () => {
    expect(filing(inbox, acme, true, received)).toEqual({ refused: "INBOX keeps its mail: COPY to label it instead" })
    expect(filing(inbox, sent, false, received)).toMatchObject({ refused: expect.stringContaining("Sent holds") })
    expect(filing(inbox, junk, false, received)).toMatchObject({ refused: expect.stringContaining("MOVE it between them") })
    expect(filing(acme, junk, true, ["inbound", "outbound"])).toEqual({ refused: "Only received mail goes to INBOX or Junk" })
    expect(filing(acme, acme, false, received)).toEqual({ refused: "The messages are in this folder already" })
    // A label named as a system folder is listed apart.
    expect(foldersOf(["Trash"]).map((folder) => folder.name)).toEqual(["INBOX", "Sent", "Junk", "Trash", "Labels/Trash"])
    // So is one whose name begins Labels/: no two labels share a folder.
    expect(foldersOf(["Sent", "Labels/Sent", "inbox", "Labels/inbox"]).map((folder) => folder.name).slice(4))
      .toEqual(["Labels/inbox", "Labels/Labels/inbox", "Labels/Labels/Sent", "Labels/Sent"])
  })

  it("a folder's name read back: INBOX in any case, system folders as listed, labels (under Labels/ when named as one)", () => {
    expect(folderNamed("inbox")?.kind).toBe("inbox")
    expect(folderNamed("Junk")?.kind).toBe("junk")
    expect(folderNamed("Clients/Acme")).toEqual({ name: "Clients/Acme", kind: "label", label: "Clients/Acme" })
    expect(folderNamed("Labels/Trash")?.label).toBe("Trash")
    expect(folderNamed("Labels/Labels/Trash")?.label).toBe("Labels/Trash")
    // Each label has one name: Clients/Acme is not Labels/Clients/Acme.
    expect(folderNamed("Labels/Clients/Acme")).toBeUndefined()
    // A system label is no folder; "sent" is not "Sent".
    expect(folderNamed("unread")).toBeUndefined()
    expect(folderNamed("sent")).toBeUndefined()
  })
})
