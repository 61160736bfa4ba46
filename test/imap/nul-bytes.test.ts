/**
 * A message whose sender wrote NUL bytes (in a header, in the body) is kept as received and served so
 * by the API's raw download; IMAP, whose literals may hold no NUL (RFC 3501 §4.3, §9), serves each as
 * a space, a byte for a byte, so RFC822.SIZE and partial fetches count the bytes of the stored message
 * (src/imap/protocol.ts). Before, BODY[] and HEADER.FIELDS literals carried the NULs.
 */
import { describe, expect, it } from "vitest"
import { withApiKey } from "../support/accounts.ts"
import { upgrade } from "../support/billing.ts"
import { useImapsServer } from "../support/imaps-server.ts"
import { fresh, newBox } from "../support/mailboxes.ts"
import type { SuiteServer } from "../support/server.ts"
import { connectSmtp, envelope } from "../support/smtp-client.ts"
import { withKey } from "../support/typed-client.ts"
import { until } from "../support/wait.ts"

let suite: SuiteServer
const imaps = useImapsServer("imap-nul-bytes", (s) => {
  suite = s
})

describe("NUL bytes", () => {
  it("keeps them in the raw download and serves each as a space over IMAP, sizes unchanged", async () => {
    const user = await withApiKey(suite.url)
    // Past the free plan's 20 requests a minute: the polls for the mail, the sign-ins.
    await upgrade(suite.url, user.apiKey, "pro")
    const box = await newBox(suite.url, { user })
    const tag = fresh("nul")
    const sent = `From: sender@example.com\r\nTo: ${box.address}\r\nSubject: nul\u0000bytes ${tag}\r\nMessage-ID: <${tag}@example.com>\r\n` +
      "Content-Type: text/plain; charset=utf-8\r\n\r\nbefore\u0000after\r\n"
    const smtp = await connectSmtp(suite.server.smtpPort)
    try {
      expect((await envelope(smtp, "sender@example.com", [box.address])).replies.map((reply) => reply.code)).toEqual([250])
      expect((await smtp.data(sent)).code).toBe(250)
    } finally {
      await smtp.close()
    }
    const email = await until(`"${tag}" listed`, async () => {
      const { data } = await withKey(suite.url, box.user).GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId: box.mailboxId } } })
      return data?.data.find((email) => email.subject === `nulbytes ${tag}`)
    }, 30_000, 100, 500)

    // The raw download is the message as received, its NULs in it.
    const raw = await fetch(`${suite.url}/v1/api/emails/${email.email_id}/raw`, { headers: { "X-API-Key": box.user.apiKey } })
    expect(raw.status).toBe(200)
    expect(Buffer.from(await raw.arrayBuffer()).toString("latin1")).toBe(sent)

    const served = sent.replaceAll("\u0000", " ")
    const { close, send } = await imaps.bareOverTls()
    try {
      expect(await send(`a1 LOGIN ${box.address} ${box.user.apiKey}\r\n`, "a1")).toMatch(/a1 OK/)
      expect(await send("a2 SELECT INBOX\r\n", "a2")).toMatch(/a2 OK/)
      expect(await send("a3 FETCH 1 (RFC822.SIZE BODY.PEEK[])\r\n", "a3")).toBe(
        `* 1 FETCH (RFC822.SIZE ${sent.length} BODY[] {${sent.length}}\r\n${served})\r\na3 OK FETCH completed\r\n`
      )
      const subject = `Subject: nul bytes ${tag}\r\n\r\n`
      expect(await send("a4 FETCH 1 BODY.PEEK[HEADER.FIELDS (SUBJECT)]\r\n", "a4")).toContain(`{${subject.length}}\r\n${subject})`)
      expect(await send("a5 FETCH 1 BODY.PEEK[TEXT]<0.12>\r\n", "a5")).toContain("BODY[TEXT]<0> {12}\r\nbefore after)")
    } finally {
      close()
    }
  })
})
