/**
 * A STORE that names a message deleted since the session last looked (through the API, another
 * device) is answered NO [EXPUNGEISSUED] and changes nothing, whichever flags it names: labels
 * (\Seen, \Flagged), kept flags (\Deleted) and keywords alike (RFC 3501 §6.4.6, RFC 2180 §4.2.1).
 * Before, the kept flags were stored on the messages still there under the NO, so an EXPUNGE
 * deleted a message the client had been told was not marked. Over a bare TLS connection, as the
 * reviewer's imaplib session did.
 */
import { describe, expect, it } from "vitest"
import { withApiKey } from "../support/accounts.ts"
import { upgrade } from "../support/billing.ts"
import { useImapsServer } from "../support/imaps-server.ts"
import { fresh, newBox } from "../support/mailboxes.ts"
import { sendMail } from "../support/send-mail.ts"
import type { SuiteServer } from "../support/server.ts"
import { withKey } from "../support/typed-client.ts"
import { until } from "../support/wait.ts"

let suite: SuiteServer
const imaps = useImapsServer("imap-expunged", (s) => {
  suite = s
})

describe("IMAP STORE on a message deleted meanwhile", () => {
  it("is refused NO [EXPUNGEISSUED] and changes no flag, label or keyword of the others; EXPUNGE then deletes nothing", async () => {
    const user = await withApiKey(suite.url)
    // Past the free plan's 20 requests a minute: the polls for the mail, the sign-ins.
    await upgrade(suite.url, user.apiKey, "pro")
    const box = await newBox(suite.url, { user })
    const mail = withKey(suite.url, box.user)
    const subjects = ["One", "Two", "Three"].map((word) => `${word} ${fresh("x")}`)
    for (const subject of subjects) await sendMail(suite.server.smtpPort, { to: box.address, subject, text: "Flag me." })
    const listed = await until("three emails", async () => {
      const { data } = await mail.GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId: box.mailboxId } } })
      return data !== undefined && data.data.length === 3 ? data.data : undefined
    }, 30_000, 100, 500)
    const idOf = (subject: string) => listed.find((email) => email.subject === subject)!.email_id
    const labelsOf = async (subject: string) => (await mail.GET("/v1/api/emails/{emailId}", { params: { path: { emailId: idOf(subject) } } })).data!.data.labels

    const { close, send } = await imaps.bareOverTls()
    try {
      expect(await send(`a1 LOGIN ${box.address} ${box.user.apiKey}\r\n`, "a1")).toMatch(/a1 OK/)
      expect(await send("a2 SELECT INBOX\r\n", "a2")).toMatch(/\* 3 EXISTS\r\n[\s\S]*a2 OK \[READ-WRITE\]/)
      expect(await send("a3 FETCH 1:3 (UID)\r\n", "a3")).toBe("* 1 FETCH (UID 1)\r\n* 2 FETCH (UID 2)\r\n* 3 FETCH (UID 3)\r\na3 OK FETCH completed\r\n")
      // The second is read already: a \Seen change would leave it out of the emails it changes.
      expect(await send("a4 STORE 2 +FLAGS.SILENT (\\Seen)\r\n", "a4")).toMatch(/a4 OK/)
      expect((await mail.DELETE("/v1/api/emails/{emailId}", { params: { path: { emailId: idOf(subjects[1]!) } } })).response.status).toBe(200)

      // No NOOP: the session still shows 3 messages. Each STORE naming the deleted one is refused whole.
      const refused = /^b\d NO \[EXPUNGEISSUED\] [^\r]*\r\n$/
      expect(await send("b1 STORE 1:3 +FLAGS ($Partial)\r\n", "b1")).toMatch(refused)
      expect(await send("b2 UID STORE 1:3 +FLAGS (\\Deleted)\r\n", "b2")).toMatch(refused)
      expect(await send("b3 STORE 1:3 +FLAGS (\\Seen \\Flagged)\r\n", "b3")).toMatch(refused)
      expect(await send("b4 STORE 1:3 +FLAGS (\\Seen)\r\n", "b4")).toMatch(refused)
      expect(await send("b5 STORE 1:3 FLAGS (\\Deleted $Partial)\r\n", "b5")).toMatch(refused)
      expect(await send("b6 STORE 1:3 -FLAGS (\\Seen)\r\n", "b6")).toMatch(refused)

      // Told of the deletion, the others are as they were: no flag the NOs named, for this session and the next.
      expect(await send("c1 NOOP\r\n", "c1")).toMatch(/^\* 2 EXPUNGE\r\n[\s\S]*c1 OK/)
      expect(await send("c2 FETCH 1:2 (UID FLAGS)\r\n", "c2")).toBe("* 1 FETCH (UID 1 FLAGS ())\r\n* 2 FETCH (UID 3 FLAGS ())\r\nc2 OK FETCH completed\r\n")
      expect(await labelsOf(subjects[0]!)).toContain("unread")
      expect(await labelsOf(subjects[0]!)).not.toContain("flagged")
      expect(await send("c3 EXPUNGE\r\n", "c3")).toBe("c3 OK EXPUNGE completed\r\n")
      const { send: again, close: closeAgain } = await imaps.bareOverTls()
      try {
        expect(await again(`d1 LOGIN ${box.address} ${box.user.apiKey}\r\n`, "d1")).toMatch(/d1 OK/)
        expect(await again("d2 SELECT INBOX\r\n", "d2")).toMatch(/\* 2 EXISTS\r\n/)
        expect(await again("d3 FETCH 1:2 (UID FLAGS)\r\n", "d3")).toBe("* 1 FETCH (UID 1 FLAGS ())\r\n* 2 FETCH (UID 3 FLAGS ())\r\nd3 OK FETCH completed\r\n")
      } finally {
        closeAgain()
      }

      // What names only messages still there is stored as before.
      expect(await send("e1 STORE 1:2 +FLAGS ($Partial \\Flagged)\r\n", "e1")).toMatch(
        /\* 1 FETCH \(FLAGS \(\\Flagged \$Partial\)\)\r\n\* 2 FETCH \(FLAGS \(\\Flagged \$Partial\)\)\r\ne1 OK/
      )
    } finally {
      close()
    }
  })
})
