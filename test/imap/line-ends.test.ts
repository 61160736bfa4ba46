/**
 * Mail a sender wrote with bare LF line ends, taken by the MX, is served over IMAP with CRLF
 * throughout (RFC 3501 §4.3), and RFC822.SIZE and partial fetches count the bytes served: the MX
 * stores it with CRLFs (services/mail/line-ends.ts). Before, BODY[] came LF-only and a
 * HEADER.FIELDS answer mixed both (`Subject: …\n\r\n`).
 */
import { describe, expect, it } from "vitest"
import { withCrlf } from "../../services/mail/line-ends.ts"
import { withApiKey } from "../support/accounts.ts"
import { upgrade } from "../support/billing.ts"
import { useImapsServer } from "../support/imaps-server.ts"
import { fresh, newBox } from "../support/mailboxes.ts"
import type { SuiteServer } from "../support/server.ts"
import { connectSmtp, envelope } from "../support/smtp-client.ts"
import { withKey } from "../support/typed-client.ts"
import { until } from "../support/wait.ts"

let suite: SuiteServer
const imaps = useImapsServer("imap-line-ends", (s) => {
  suite = s
})

describe("line ends", () => {
  it("makes each bare LF CRLF, and leaves CRLF and other bytes as they are", () => {
    const same = Buffer.from("a\r\nb\r\n")
    expect(withCrlf(same)).toBe(same)
    expect(withCrlf(Buffer.from("\na\nb\r\nc\rd\n\n")).toString("latin1")).toBe("\r\na\r\nb\r\nc\rd\r\n\r\n")
  })

  it("serves mail the MX took with bare LFs over IMAP in CRLF, its sizes those of the bytes served", async () => {
    const user = await withApiKey(suite.url)
    // Past the free plan's 20 requests a minute: the polls for the mail, the sign-ins.
    await upgrade(suite.url, user.apiKey, "pro")
    const box = await newBox(suite.url, { user })
    const subject = `Bare LF ${fresh("lf")}`
    const sent = `From: sender@example.com\nTo: ${box.address}\nSubject: ${subject}\nMessage-ID: <${fresh("lf")}@example.com>\n\nline one\nline two`
    const smtp = await connectSmtp(suite.server.smtpPort)
    try {
      expect((await envelope(smtp, "sender@example.com", [box.address])).replies.map((reply) => reply.code)).toEqual([250])
      expect((await smtp.data(sent)).code).toBe(250)
    } finally {
      await smtp.close()
    }
    // DATA ends the message with CRLF (smtp-client.ts dataPayload).
    const crlf = `${sent.replace(/\n/g, "\r\n")}\r\n`
    await until(`"${subject}" listed`, async () => {
      const { data } = await withKey(suite.url, box.user).GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId: box.mailboxId } } })
      return data?.data.find((email) => email.subject === subject)
    }, 30_000, 100, 500)

    const { close, send } = await imaps.bareOverTls()
    try {
      expect(await send(`a1 LOGIN ${box.address} ${box.user.apiKey}\r\n`, "a1")).toMatch(/a1 OK/)
      expect(await send("a2 SELECT INBOX\r\n", "a2")).toMatch(/a2 OK/)
      expect(await send("a3 FETCH 1 (RFC822.SIZE BODY.PEEK[])\r\n", "a3")).toBe(
        `* 1 FETCH (RFC822.SIZE ${crlf.length} BODY[] {${crlf.length}}\r\n${crlf})\r\na3 OK FETCH completed\r\n`
      )
      expect(await send("a4 FETCH 1 BODY.PEEK[HEADER.FIELDS (SUBJECT)]\r\n", "a4")).toContain(`{${subject.length + 13}}\r\nSubject: ${subject}\r\n\r\n)`)
      // A partial fetch counts the bytes served: the body's second line starts at its CRLF-counted offset.
      expect(await send("a5 FETCH 1 BODY.PEEK[TEXT]<10.10>\r\n", "a5")).toContain("BODY[TEXT]<10> {10}\r\nline two\r\n)")
      expect(await send("a6 STATUS INBOX (SIZE)\r\n", "a6")).toContain(`(SIZE ${crlf.length})`)
    } finally {
      close()
    }
  })
})
