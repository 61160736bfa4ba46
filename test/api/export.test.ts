/**
 * `GET /v1/api/mailboxes/{mailbox_id}/export` over real HTTP, with mail sent over real SMTP: the
 * mailbox's mail as one mbox file (mboxrd), oldest first, each message its raw bytes as stored with
 * LF line ends, lines that read `From ` quoted so that a reader gets every message back whole; and
 * the refusals. The entry format itself (dates, the null sender) is checked in services' terms below.
 */
import { describe, expect, it } from "vitest"
import { asctime, mboxEntry } from "../../services/mail/export.ts"
import { withApiKey } from "../support/accounts.ts"
import { newBox } from "../support/mailboxes.ts"
import { type SuiteServer, useSuiteServer } from "../support/server.ts"
import { connectSmtp, envelope } from "../support/smtp-client.ts"
import { withKey } from "../support/typed-client.ts"
import { until } from "../support/wait.ts"

let suite: SuiteServer

useSuiteServer((s) => {
  suite = s
})

/** Sends `raw` over SMTP from `from` to `to`, as a mail server would. */
const deliver = async (from: string, to: string, raw: string) => {
  const session = await connectSmtp(suite.server.smtpPort)
  try {
    await envelope(session, from, [to])
    const reply = await session.data(raw)
    expect(reply.code).toBe(250)
  } finally {
    await session.close()
  }
}

/** An mbox file's messages as a reader takes them (mboxrd): split at `From ` lines, one `>` taken off quoted lines. */
const readMbox = (text: string) =>
  text.split(/^(?=From )/m).filter((part) => part.length > 0).map((part) => {
    const [separator, ...rest] = part.split("\n")
    // Each entry ends with an empty line after its message's last line.
    expect(rest.slice(-2)).toEqual(["", ""])
    const lines = rest.slice(0, -2).map((line) => line.replace(/^>(>*From )/, "$1"))
    return { separator: separator!, message: `${lines.join("\n")}\n` }
  })

describe("GET /v1/api/mailboxes/{mailbox_id}/export", () => {
  it("answers every email, oldest first, as mbox: each message its raw bytes back once unquoted", async () => {
    const user = await withApiKey(suite.url)
    const box = await newBox(suite.url, { user })
    const keyed = withKey(suite.url, user)
    const messages = [
      `From: Ada <ada@example.test>\r\nTo: ${box.address}\r\nSubject: First\r\nMessage-ID: <first@example.test>\r\n\r\nHello there.\r\n`,
      // Lines an mbox reader would take for a new message, or for quoting, if they were not quoted.
      `From: Ada <ada@example.test>\r\nTo: ${box.address}\r\nSubject: Second\r\nMessage-ID: <second@example.test>\r\n\r\n` +
      `From the desk of Ada:\r\n>From an earlier reply\r\n>>From further back\r\nFrom\r\n\r\nFrom \r\n`,
      `From: Bob <bob@example.test>\r\nTo: ${box.address}\r\nSubject: =?UTF-8?Q?Caf=C3=A9?=\r\nMessage-ID: <third@example.test>\r\n` +
      `Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\nUn café, s'il vous plaît.\r\n`
    ]
    for (const [i, raw] of messages.entries()) {
      await deliver(i === 2 ? "bob@example.test" : "ada@example.test", box.address, raw)
      // Apart in time, so that oldest first is an order to check.
      await until(`email ${i + 1} listed`, async () => {
        const { data } = await keyed.GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId: box.mailboxId } } })
        return data && data.data.length === i + 1 ? true : undefined
      }, 30_000, 50, 200)
    }

    const response = await fetch(`${suite.url}/v1/api/mailboxes/${box.mailboxId}/export`, { headers: { "x-api-key": user.apiKey } })
    expect(response.status).toBe(200)
    expect(response.headers.get("content-type")).toBe("application/mbox")
    expect(response.headers.get("x-content-type-options")).toBe("nosniff")
    expect(response.headers.get("content-disposition")).toBe(`attachment; filename="${box.address}.mbox"; filename*=UTF-8''${encodeURIComponent(`${box.address}.mbox`)}`)
    const text = Buffer.from(await response.arrayBuffer()).toString("latin1")
    const read = readMbox(text)
    expect(read.map((entry) => entry.message)).toEqual(
      messages.map((raw) => Buffer.from(raw.replace(/\r\n/g, "\n"), "utf8").toString("latin1"))
    )
    for (const [i, entry] of read.entries()) {
      expect(entry.separator).toMatch(new RegExp(`^From ${i === 2 ? "bob" : "ada"}@example\\.test [A-Z][a-z]{2} [A-Z][a-z]{2} [ \\d]\\d \\d\\d:\\d\\d:\\d\\d \\d{4}$`))
    }
    // The quoting is there in the file: no line of a message reads `From ` unquoted.
    expect(text.match(/^From /gm)).toHaveLength(3)
    expect(text).toContain("\n>From the desk of Ada:\n>>From an earlier reply\n>>>From further back\nFrom\n\n>From \n")
  })

  it("an empty mailbox is an empty file; another account's mailbox, or none, is 404 NOT_FOUND", async () => {
    const user = await withApiKey(suite.url)
    const box = await newBox(suite.url, { user })
    const empty = await fetch(`${suite.url}/v1/api/mailboxes/${box.mailboxId}/export`, { headers: { "x-api-key": user.apiKey } })
    expect(empty.status).toBe(200)
    expect(await empty.text()).toBe("")

    const stranger = await withApiKey(suite.url)
    for (const mailboxId of [box.mailboxId, "mbx_unknown"]) {
      const refused = await fetch(`${suite.url}/v1/api/mailboxes/${mailboxId}/export`, { headers: { "x-api-key": stranger.apiKey } })
      expect(refused.status).toBe(404)
      expect(await refused.json()).toEqual({
        success: false,
        error: { code: "NOT_FOUND", message: "Mailbox not found", details: { mailbox_id: mailboxId } }
      })
    }
  })
})

describe("an mbox entry", () => {
  it("names the null sender MAILER-DAEMON, dates in asctime form (UTC), and ends a message without a final line end", () => {
    expect(asctime(new Date("2026-03-05T07:08:09Z"))).toBe("Thu Mar  5 07:08:09 2026")
    const entry = mboxEntry(Buffer.from("Subject: Bounce\r\n\r\nNo line end at the end"), "", new Date("2026-11-29T16:13:20Z"))
    expect(entry.toString("latin1")).toBe("From MAILER-DAEMON Sun Nov 29 16:13:20 2026\nSubject: Bounce\n\nNo line end at the end\n\n")
  })
})
