/**
 * What a reply and a forward of received mail write in their header and parts, as a receiving server
 * reads them (outbound-world.ts's MX, which also fails the suite on any header line over 998 octets):
 * a subject or message id the original made too long for a line, the display names of the people
 * answered, the names of the parts a forward carries.
 */
import { simpleParser } from "mailparser"
import { describe, expect, it } from "vitest"
import { createClient, type MailroomFetchClient } from "../../packages/client/src/fetch-client.ts"
import { withApiKey } from "../support/accounts.ts"
import { arrivedIn, type Box, fresh, newBox } from "../support/mailboxes.ts"
import { overlongHeaderLines } from "../support/mx-server.ts"
import { useOutboundWorld } from "../support/outbound-world.ts"
import { sendMail } from "../support/send-mail.ts"
import { type SuiteServer, useSuiteServer } from "../support/server.ts"
import { until } from "../support/wait.ts"

let suite: SuiteServer
const world = useOutboundWorld()
useSuiteServer((s) => {
  suite = s
}, world.env({ OUTBOUND_RETRY_DELAYS: "300ms,600ms" }))

const mailbox = async (): Promise<{ box: Box; mailroom: MailroomFetchClient }> => {
  const box = await newBox(suite.url, { user: await withApiKey(suite.url) })
  return { box, mailroom: createClient({ baseUrl: suite.url, apiKey: box.user.apiKey }) }
}

/** `header` and `body` (lines) received by `box` as written, CRLF line ends. */
const receive = (box: Box, header: ReadonlyArray<string>, body: ReadonlyArray<string>) =>
  sendMail(suite.server.smtpPort, {
    envelope: { from: "tester@partner.test", to: [box.address] },
    raw: [`To: ${box.address}`, ...header, "", ...body, ""].join("\r\n")
  })

/** The message the MX took with this Message-ID. */
const arrived = (messageId: string) =>
  until(`${messageId} at the MX`, async () => world.mx.delivered().find((m) => m.raw.includes(`Message-ID: ${messageId}`)))

const headerOf = (raw: Buffer) => raw.subarray(0, raw.indexOf("\r\n\r\n")).toString("latin1")

/** A legal subject of one 1,140-character URL, written (as the reviewer's sender did) in 29 encoded words. */
const url = `https://example.com/track?id=${"a1b2c3d4".repeat(139)}`.slice(0, 1140)
const encodedSubject = (() => {
  const words = (`Link ${url}`.match(/.{1,40}/g) ?? []).map((chunk) => `=?UTF-8?B?${Buffer.from(chunk).toString("base64")}?=`)
  return `Subject: ${words.join("\r\n ")}`
})()

describe("a reply's and a forward's header fields", () => {
  it("a subject the original made of one long URL is sent in encoded words that fold; it reads as it was, behind Re: and Fwd:", async () => {
    const { box, mailroom } = await mailbox()
    expect(url).toHaveLength(1140)
    await receive(box, ["From: Tester <tester@partner.test>", encodedSubject, `Message-ID: <${fresh("long")}@example.com>`], ["x"])
    const received = await arrivedIn(suite.url, box, `Link ${url}`)
    for (const [path, body, prefix] of [
      ["/v1/api/emails/{emailId}/reply", { text: "Thanks" }, "Re"],
      ["/v1/api/emails/{emailId}/forward", { to: [`${fresh("fwd")}@partner.test`], text: "FYI" }, "Fwd"]
    ] as const) {
      const sent = await mailroom.POST(path, { params: { path: { emailId: received.email_id } }, body: body as never })
      expect(sent.response.status).toBe(202)
      const { raw } = await arrived(sent.data!.data.message_id)
      expect(headerOf(raw).split("\r\n").filter((line) => line.length > 78)).toEqual([])
      expect((await simpleParser(raw)).subject).toBe(`${prefix}: Link ${url}`)
    }
  })

  it("an original's Message-ID too long for a line is left out of In-Reply-To and References; the others stay", async () => {
    const { box, mailroom } = await mailbox()
    const long = `<${"m".repeat(1090)}@example.com>`
    const root = `<${fresh("root")}@example.com>`
    await receive(box, ["From: tester@partner.test", "Subject: long msgid", `Message-ID: ${long}`, `References: ${root}`], ["x"])
    const received = await arrivedIn(suite.url, box, "long msgid")
    const sent = await mailroom.POST("/v1/api/emails/{emailId}/reply", { params: { path: { emailId: received.email_id } }, body: { text: "Thanks" } })
    expect(sent.response.status).toBe(202)
    const { raw } = await arrived(sent.data!.data.message_id)
    expect(overlongHeaderLines(raw)).toEqual([])
    const parsed = await simpleParser(raw)
    expect([parsed.inReplyTo, parsed.references]).toEqual([undefined, root])
  })

  it("reply-all keeps each display name as it was written: a comma and quotes inside an encoded word stay in the name", async () => {
    const { box, mailroom } = await mailbox()
    await receive(box, [
      "From: =?UTF-8?Q?M=C3=BCller=2C_Hans?= <hans@partner.test>",
      `Cc: =?ISO-8859-1?Q?Dupr=E9=2C_=22Le_Chef=22?= <chef@partner.test>, =?UTF-8?B?5bGx55SwLCDlpKrpg44=?= <taro@partner.test>, "Doe, \\"JD\\" Jane" <jane@partner.test>`,
      "Subject: commas in names",
      `Message-ID: <${fresh("commas")}@example.de>`
    ], ["x"])
    const received = await arrivedIn(suite.url, box, "commas in names")
    const sent = await mailroom.POST("/v1/api/emails/{emailId}/reply-all", { params: { path: { emailId: received.email_id } }, body: { text: "Noted" } })
    expect(sent.response.status).toBe(202)
    const parsed = await simpleParser((await arrived(sent.data!.data.message_id)).raw)
    const names = (field: typeof parsed.to) => (Array.isArray(field) ? field : field === undefined ? [] : [field]).flatMap((f) => f.value.map((a) => [a.name, a.address]))
    expect(names(parsed.to)).toEqual([["Müller, Hans", "hans@partner.test"]])
    expect(names(parsed.cc)).toEqual([
      ["Dupré, \"Le Chef\"", "chef@partner.test"],
      ["山田, 太郎", "taro@partner.test"],
      ["Doe, \"JD\" Jane", "jane@partner.test"]
    ])
  })

  it("a reply-all to people named by one long word, and a forward of a file named so, send lines that fold; names read as they were", async () => {
    const { box, mailroom } = await mailbox()
    const name = "a".repeat(1_100)
    const cc = `Team-${"b".repeat(300)}`
    const file = `${"f".repeat(1_100)}.pdf`
    const words = (text: string) => (text.match(/.{1,40}/g) ?? []).map((chunk) => `=?UTF-8?Q?${chunk}?=`).join("\r\n ")
    const continued = (text: string) => (text.match(/.{1,60}/g) ?? []).map((chunk, i) => `;\r\n filename*${i}="${chunk}"`).join("")
    await receive(box, [
      `From: ${words(name)} <tester@partner.test>`,
      `Cc: ${words(cc)} <team@partner.test>`,
      "Subject: long names",
      `Message-ID: <${fresh("names")}@example.com>`,
      "MIME-Version: 1.0",
      "Content-Type: multipart/mixed; boundary=b1"
    ], [
      "--b1",
      "Content-Type: text/plain",
      "",
      "See the file.",
      "--b1",
      "Content-Type: application/pdf",
      `Content-Disposition: attachment${continued(file)}`,
      "Content-Transfer-Encoding: base64",
      "",
      Buffer.from("%PDF-1.4 nothing much").toString("base64"),
      "--b1--"
    ])
    const received = await arrivedIn(suite.url, box, "long names")
    const replied = await mailroom.POST("/v1/api/emails/{emailId}/reply-all", { params: { path: { emailId: received.email_id } }, body: { text: "Noted" } })
    const forwarded = await mailroom.POST("/v1/api/emails/{emailId}/forward", {
      params: { path: { emailId: received.email_id } },
      body: { to: [{ name: `Fwd-${"c".repeat(150)}`, address: `${fresh("fwd")}@partner.test` }], text: "FYI" }
    })
    expect([replied.response.status, forwarded.response.status]).toEqual([202, 202])
    for (const sent of [replied, forwarded]) {
      const { raw } = await arrived(sent.data!.data.message_id)
      // Every line but base64's, the parts' header lines too (the MX looks at the message's own).
      expect(raw.toString("latin1").split("\r\n").filter((line) => line.length > 78 && !/^[A-Za-z0-9+/=]*$/.test(line))).toEqual([])
    }
    const reply = await simpleParser((await arrived(replied.data!.data.message_id)).raw)
    const names = (field: typeof reply.to) => (Array.isArray(field) ? field : field === undefined ? [] : [field]).flatMap((f) => f.value.map((a) => [a.name, a.address]))
    expect([names(reply.to), names(reply.cc)]).toEqual([[[name, "tester@partner.test"]], [[cc, "team@partner.test"]]])
    const forward = await simpleParser((await arrived(forwarded.data!.data.message_id)).raw)
    expect(names(forward.to)).toEqual([[`Fwd-${"c".repeat(150)}`, expect.stringMatching(/@partner\.test$/)]])
    expect(forward.attachments.map((a) => [a.filename, (a.headers.get("content-type") as { params: Record<string, string> }).params["name"]])).toEqual([[file, file]])
  })

  it("a forward names the parts that came without a name: an email <its subject>.eml, another by its type's extension", async () => {
    const { box, mailroom } = await mailbox()
    const attached = [
      "From: someone@example.org",
      "Subject: =?UTF-8?Q?Q3/Q4_figures:_=22final=22?=",
      "",
      "As it was.",
      ""
    ].join("\r\n")
    await receive(box, [
      "From: tester@partner.test",
      "Subject: unnamed parts",
      `Message-ID: <${fresh("unnamed")}@example.com>`,
      "MIME-Version: 1.0",
      "Content-Type: multipart/mixed; boundary=b1"
    ], [
      "--b1",
      "Content-Type: text/plain",
      "",
      "See the parts.",
      "--b1",
      "Content-Type: message/rfc822",
      "",
      attached,
      "--b1",
      "Content-Type: application/pdf",
      "Content-Transfer-Encoding: base64",
      "",
      Buffer.from("%PDF-1.4 nothing much").toString("base64"),
      "--b1",
      "Content-Type: message/rfc822",
      "",
      "From: someone@example.org",
      "",
      "No subject at all.",
      "--b1--"
    ])
    const received = await arrivedIn(suite.url, box, "unnamed parts")
    const sent = await mailroom.POST("/v1/api/emails/{emailId}/forward", {
      params: { path: { emailId: received.email_id } },
      body: { to: [`${fresh("fwd")}@partner.test`], text: "FYI" }
    })
    expect(sent.response.status).toBe(202)
    const parsed = await simpleParser((await arrived(sent.data!.data.message_id)).raw)
    expect(parsed.attachments.map((a) => [a.filename, a.contentType])).toEqual([
      ["Q3 Q4 figures final.eml", "message/rfc822"],
      ["attachment-2.pdf", "application/pdf"],
      ["message.eml", "message/rfc822"]
    ])
  })
})
