/**
 * IMAP as a mail program meets it: imapflow (a real IMAP client, the one nodemailer's author keeps)
 * signs in to a started server's IMAP port with a mailbox's address and an API key, over STARTTLS with
 * a certificate the test makes; mail arrives over SMTP and is changed through the HTTP API, and what
 * the client sees is checked against what the API says. Protocol details a library hides (literals,
 * refusals by response code, LOGINDISABLED before TLS) are checked with a bare socket.
 */
import net from "node:net"
import tls from "node:tls"
import { ImapFlow } from "imapflow"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { maxMessageBytes } from "../../src/smtp/server.ts"
import { withApiKey } from "../support/accounts.ts"
import { useCertificate } from "../support/certificate.ts"
import { bareImap, bareImapOverTls } from "../support/imap-wire.ts"
import { type Box, fresh, newBox } from "../support/mailboxes.ts"
import { scrape } from "../support/metrics.ts"
import { sendMail } from "../support/send-mail.ts"
import { freePort, type SuiteServer, useSuiteServer } from "../support/server.ts"
import { withKey, withToken } from "../support/typed-client.ts"
import { until } from "../support/wait.ts"

const certificate = useCertificate("imap-tls")
let imapPort: number
let imapsPort: number
let suite: SuiteServer

beforeAll(async () => {
  imapPort = await freePort()
  imapsPort = await freePort()
})
useSuiteServer((s) => {
  suite = s
}, {
  ...certificate.env,
  get IMAP_PORT() {
    return String(imapPort)
  },
  get IMAPS_PORT() {
    return String(imapsPort)
  },
  // A TCP load balancer at this address opens each connection with a PROXY header (the last describe).
  PROXY_PROTOCOL: "127.0.0.6"
} as Record<string, string>)

const clients: Array<ImapFlow> = []
afterAll(async () => {
  await Promise.allSettled(clients.map((client) => client.logout()))
})

/** A mail program's account: the mailbox's address and an API key, STARTTLS on IMAP_PORT (or TLS on IMAPS_PORT). */
const connect = async (address: string, apiKey: string, options: { readonly implicit?: boolean } = {}) => {
  const client = new ImapFlow({
    host: "127.0.0.1",
    port: options.implicit ? imapsPort : imapPort,
    secure: options.implicit ?? false,
    doSTARTTLS: options.implicit ? undefined : true,
    tls: { rejectUnauthorized: false },
    auth: { user: address, pass: apiKey },
    logger: process.env.IMAP_DEBUG ? { debug: console.log, info: console.log, warn: console.log, error: console.log } : false,
    disableAutoIdle: true
  })
  clients.push(client)
  await client.connect()
  return client
}

const arrived = async (box: Box, subject: string) =>
  until(`"${subject}" in ${box.address}`, async () => {
    const { data } = await withKey(suite.url, box.user).GET("/v1/api/mailboxes/{mailboxId}/emails", {
      params: { path: { mailboxId: box.mailboxId } }
    })
    return data?.data.find((email) => email.subject === subject)
  }, 30_000, 100, 500)

const labelsOf = async (box: Box, emailId: string) =>
  (await withKey(suite.url, box.user).GET("/v1/api/emails/{emailId}", { params: { path: { emailId } } })).data!.data.labels

describe("IMAP", () => {
  it("shows a mailbox's mail as it was received: folders, envelope, structure, parts and the raw message", async () => {
    const box = await newBox(suite.url, { user: await withApiKey(suite.url) })
    const subject = `Quarterly report ${fresh("q")}`
    await sendMail(suite.server.smtpPort, {
      from: { name: "Ada Lovelace", address: "ada@example.com" },
      to: box.address,
      cc: "grace@example.com",
      subject,
      text: "Figures attached.\nSee you Monday.\n",
      html: "<p>Figures attached.</p>",
      attachments: [{ filename: "figures.csv", content: "quarter,revenue\nQ3,42\n", contentType: "text/csv" }]
    })
    const email = await arrived(box, subject)
    const raw = await (await fetch(`${suite.url}/v1/api/emails/${email.email_id}/raw`, {
      headers: { authorization: `Bearer ${box.user.apiKey}` }
    })).text()

    const client = await connect(box.address, box.user.apiKey)
    expect(client.secureConnection || (client as unknown as { _socket?: tls.TLSSocket })._socket instanceof tls.TLSSocket).toBeTruthy()
    const folders = await client.list()
    expect(folders.map((folder) => folder.path)).toEqual(["INBOX", "Sent", "Junk", "Trash"])
    expect(folders.find((folder) => folder.path === "Sent")?.specialUse).toBe("\\Sent")
    expect(folders.find((folder) => folder.path === "Junk")?.specialUse).toBe("\\Junk")
    expect(folders.find((folder) => folder.path === "Trash")?.specialUse).toBe("\\Trash")

    const status = await client.status("INBOX", { messages: true, unseen: true, uidNext: true })
    expect(status).toMatchObject({ messages: 1, unseen: 1, uidNext: 2 })

    const lock = await client.getMailboxLock("INBOX")
    try {
      expect(client.mailbox && client.mailbox.exists).toBe(1)
      const message = await client.fetchOne("1", { uid: true, flags: true, envelope: true, bodyStructure: true, size: true, source: true, internalDate: true })
      if (message === false) throw new Error("no message 1")
      expect(message.uid).toBe(1)
      expect([...message.flags ?? []]).toEqual([])
      expect(message.size).toBe(Buffer.byteLength(raw))
      expect(message.source?.toString()).toBe(raw)
      // INTERNALDATE: when it arrived, to the second.
      expect(new Date(message.internalDate!).toISOString()).toBe(new Date(Math.floor(Date.parse(email.received_at) / 1000) * 1000).toISOString())
      expect(message.envelope).toMatchObject({
        subject,
        from: [{ name: "Ada Lovelace", address: "ada@example.com" }],
        to: [{ address: box.address }],
        cc: [{ address: "grace@example.com" }]
      })
      expect(message.envelope?.messageId).toMatch(/^<msg\w+@example\.com>$/)
      expect(message.bodyStructure).toMatchObject({
        type: "multipart/mixed",
        childNodes: [
          { type: "multipart/alternative", childNodes: [{ part: "1.1", type: "text/plain" }, { part: "1.2", type: "text/html" }] },
          { part: "2", type: "text/csv", disposition: "attachment", dispositionParameters: { filename: "figures.csv" } }
        ]
      })
      const attachment = await client.download("1", "2")
      const chunks: Array<Buffer> = []
      for await (const chunk of attachment.content!) chunks.push(chunk as Buffer)
      expect(Buffer.concat(chunks).toString()).toBe("quarter,revenue\nQ3,42\n")
      // Fetched with BODY.PEEK: still unread.
      expect(await labelsOf(box, email.email_id)).toContain("unread")
    } finally {
      lock.release()
    }
  })

  it("keeps \\Seen and \\Flagged as the email's labels both ways", async () => {
    const box = await newBox(suite.url, { user: await withApiKey(suite.url) })
    const subject = `Flags ${fresh("f")}`
    await sendMail(suite.server.smtpPort, { to: box.address, subject, text: "Mark me." })
    const email = await arrived(box, subject)
    const client = await connect(box.address, box.user.apiKey)
    const lock = await client.getMailboxLock("INBOX")
    try {
      expect(await client.messageFlagsAdd("1", ["\\Flagged"], { uid: true })).toBe(true)
      expect(await labelsOf(box, email.email_id)).toEqual(expect.arrayContaining(["flagged", "unread"]))
      expect(await client.messageFlagsAdd("1", ["\\Seen"], { uid: true })).toBe(true)
      const read = await client.fetchOne("1", { flags: true }, { uid: true })
      if (read === false) throw new Error("no message")
      expect([...read.flags ?? []].sort()).toEqual(["\\Flagged", "\\Seen"])
      expect(await labelsOf(box, email.email_id)).not.toContain("unread")

      // Changed through the API: the client hears of it at its next NOOP.
      await withKey(suite.url, box.user).PATCH("/v1/api/emails/{emailId}", {
        params: { path: { emailId: email.email_id } },
        body: { add_labels: ["unread"], remove_labels: ["flagged"] }
      })
      const changed = new Promise<{ flags: Set<string> }>((resolve) => client.once("flags", resolve))
      await client.noop()
      expect([...(await changed).flags]).toEqual([])

      expect(await client.messageFlagsAdd("1", ["\\Seen"], { uid: true })).toBe(true)
      expect(await labelsOf(box, email.email_id)).not.toContain("unread")
      expect(await client.messageFlagsRemove("1", ["\\Seen"], { uid: true })).toBe(true)
      expect(await labelsOf(box, email.email_id)).toContain("unread")
    } finally {
      lock.release()
    }
  })

  it("keeps \\Answered, \\Deleted, \\Draft and keywords for the email across sessions; mail the mailbox replied to or forwarded shows it", async () => {
    const box = await newBox(suite.url, { user: await withApiKey(suite.url) })
    const subjects = [`Question ${fresh("q")}`, `Offer ${fresh("o")}`]
    const received = []
    for (const subject of subjects) {
      await sendMail(suite.server.smtpPort, { from: "ada@example.com", to: box.address, subject, text: "Well?" })
      received.push(await arrived(box, subject))
    }
    const [question, offer] = [received[0]!, received[1]!]
    const replied = await withKey(suite.url, box.user).POST("/v1/api/emails/{emailId}/reply", {
      params: { path: { emailId: question.email_id } },
      body: { text: "Yes." }
    })
    expect(replied.response.status).toBe(202)
    const forwarded = await withKey(suite.url, box.user).POST("/v1/api/emails/{emailId}/forward", {
      params: { path: { emailId: offer.email_id } },
      body: { to: ["grace@example.com"], text: "FYI" }
    })
    expect(forwarded.response.status).toBe(202)
    const flagsIn = async (client: ImapFlow) => {
      const found: Record<string, Array<string>> = {}
      for await (const message of client.fetch("1:*", { uid: true, flags: true })) found[message.uid] = [...message.flags ?? []].sort()
      return found
    }

    const first = await connect(box.address, box.user.apiKey)
    const lock = await first.getMailboxLock("INBOX")
    try {
      expect([...first.mailbox && first.mailbox.permanentFlags || []].sort())
        .toEqual(["\\*", "\\Answered", "\\Deleted", "\\Draft", "\\Flagged", "\\Seen"])
      // Replied to and forwarded through the API: as a mail program shows it.
      expect(await flagsIn(first)).toEqual({ 1: ["\\Answered"], 2: ["$Forwarded"] })
      expect(first.mailbox && [...first.mailbox.flags]).toContain("$Forwarded")
      expect(await first.messageFlagsAdd("2", ["\\Draft", "\\Deleted", "\\Answered"], { uid: true })).toBe(true)
      // A reply's \Answered is the email's history: taking it away leaves it.
      expect(await first.messageFlagsRemove("1", ["\\Answered"], { uid: true })).toBe(true)
      // A keyword of the mail program's own (Thunderbird's tags): kept, and the folder's FLAGS name it.
      expect(await first.messageFlagsAdd("1", ["$label1"], { uid: true })).toBe(true)
      expect(await flagsIn(first)).toEqual({ 1: ["$label1", "\\Answered"], 2: ["$Forwarded", "\\Answered", "\\Deleted", "\\Draft"] })
    } finally {
      lock.release()
    }
    await first.logout()

    // Another session, later: the flags were kept.
    const second = await connect(box.address, box.user.apiKey)
    const third = await connect(box.address, box.user.apiKey)
    const secondLock = await second.getMailboxLock("INBOX")
    const thirdLock = await third.getMailboxLock("INBOX")
    try {
      expect(await flagsIn(second)).toEqual({ 1: ["$label1", "\\Answered"], 2: ["$Forwarded", "\\Answered", "\\Deleted", "\\Draft"] })
      expect(second.mailbox && [...second.mailbox.flags]).toEqual(expect.arrayContaining(["$Forwarded", "$label1"]))
      // One session changes them: another idling on the folder (another device) is told at once, not at
      // its next poll (15 s).
      const heard = new Promise<{ uid: number; flags: Set<string> }>((resolve) => third.once("flags", resolve))
      const idling = third.idle()
      await new Promise((resolve) => setTimeout(resolve, 300))
      const changedAt = Date.now()
      expect(await second.messageFlagsSet("2", ["\\Deleted"], { uid: true })).toBe(true)
      expect(await heard).toMatchObject({ uid: 2, flags: new Set(["\\Deleted", "$Forwarded"]) })
      expect(Date.now() - changedAt).toBeLessThan(10_000)
      // \Deleted set by one session is expunged by another's CLOSE: the email is deleted, the other kept.
      thirdLock.release()
      await third.mailboxClose()
      await idling
      const gone = await withKey(suite.url, box.user).GET("/v1/api/emails/{emailId}", { params: { path: { emailId: offer.email_id } } })
      expect(gone.response.status).toBe(404)
      const kept = await withKey(suite.url, box.user).GET("/v1/api/emails/{emailId}", { params: { path: { emailId: question.email_id } } })
      expect(kept.response.status).toBe(200)
    } finally {
      secondLock.release()
    }
  })

  it("searches by sender, subject, body, read state and UID", async () => {
    const box = await newBox(suite.url, { user: await withApiKey(suite.url) })
    const tag = fresh("s")
    // Written late on 30 November in California (1 December in UTC), and early on 2 December in Tokyo (1 December in UTC).
    await sendMail(suite.server.smtpPort, {
      from: "billing@vendor.test",
      to: box.address,
      subject: `Invoice ${tag}`,
      text: "Amount due: 120 EUR",
      date: "Mon, 30 Nov 2026 23:30:00 -0800",
      attachments: [{ filename: "statement-q3.csv", content: "due,120\n" }]
    })
    await arrived(box, `Invoice ${tag}`)
    await sendMail(suite.server.smtpPort, {
      from: "ops@example.com",
      to: box.address,
      subject: `Disk alert ${tag}`,
      text: "The volume is 95% full",
      html: "<p>The volume is 95% full: <i>rotate the logs</i></p>",
      date: "Wed, 02 Dec 2026 01:30:00 +0900"
    })
    const alert = await arrived(box, `Disk alert ${tag}`)
    await withKey(suite.url, box.user).PATCH("/v1/api/emails/{emailId}", {
      params: { path: { emailId: alert.email_id } },
      body: { remove_labels: ["unread"] }
    })
    const client = await connect(box.address, box.user.apiKey)
    const lock = await client.getMailboxLock("INBOX")
    try {
      expect(await client.search({ from: "vendor.test" }, { uid: true })).toEqual([1])
      expect(await client.search({ subject: "disk ALERT" })).toEqual([2])
      expect(await client.search({ body: "95% full" })).toEqual([2])
      // BODY reads the HTML part too; TEXT the header fields' values (a quote as written) and the parts' file names.
      expect(await client.search({ body: "rotate the logs" })).toEqual([2])
      expect(await client.search({ text: "statement-q3" })).toEqual([1])
      expect(await client.search({ text: `"ops@example.com"` })).toEqual([])
      expect(await client.search({ text: "ops@example.com" })).toEqual([2])
      expect(await client.search({ seen: false })).toEqual([1])
      expect(await client.search({ seen: true })).toEqual([2])
      expect(await client.search({ uid: "2:*" }, { uid: true })).toEqual([2])
      expect(await client.search({ or: [{ from: "ops@" }, { body: "amount" }] })).toEqual([1, 2])
      expect(await client.search({ not: { from: "ops@" } })).toEqual([1])
      expect(await client.search({ since: new Date(Date.now() - 86_400_000) })).toEqual([1, 2])
      expect(await client.search({ before: new Date(Date.now() - 86_400_000) })).toEqual([])
      expect(await client.search({ larger: 10_000_000 })).toEqual([])
      // SENT*: the day the Date header names, its zone disregarded (RFC 3501), not the UTC day.
      expect(await client.search({ sentOn: new Date("2026-11-30T00:00:00Z") })).toEqual([1])
      expect(await client.search({ sentOn: new Date("2026-12-02T00:00:00Z") })).toEqual([2])
      expect(await client.search({ sentOn: new Date("2026-12-01T00:00:00Z") })).toEqual([])
      expect(await client.search({ sentBefore: new Date("2026-12-01T00:00:00Z") })).toEqual([1])
      expect(await client.search({ sentSince: new Date("2026-12-01T00:00:00Z") })).toEqual([2])
    } finally {
      lock.release()
    }
  })

  it("tells an idling client of new mail, and a label made through the API becomes a folder", async () => {
    const box = await newBox(suite.url, { user: await withApiKey(suite.url) })
    const client = await connect(box.address, box.user.apiKey)
    const lock = await client.getMailboxLock("INBOX")
    try {
      expect(client.mailbox && client.mailbox.exists).toBe(0)
      const exists = new Promise<{ count: number }>((resolve) => client.once("exists", resolve))
      const idling = client.idle()
      const subject = `While idling ${fresh("i")}`
      await sendMail(suite.server.smtpPort, { to: box.address, subject, text: "Ping." })
      expect((await exists).count).toBe(1)
      await client.noop()
      await idling

      const email = await arrived(box, subject)
      await withKey(suite.url, box.user).PATCH("/v1/api/emails/{emailId}", {
        params: { path: { emailId: email.email_id } },
        body: { add_labels: ["Clients/Acme", "Sent"] }
      })
      const paths = (await client.list()).map((folder) => folder.path)
      expect(paths).toEqual(["INBOX", "Sent", "Junk", "Trash", "Clients", "Clients/Acme", "Labels", "Labels/Sent"])
      const acme = (await client.list()).find((folder) => folder.path === "Clients/Acme")
      expect(acme?.flags.has("\\HasNoChildren")).toBe(true)
      expect((await client.list()).find((folder) => folder.path === "Clients")?.flags.has("\\Noselect")).toBe(true)
      expect(await client.status("Clients/Acme", { messages: true })).toMatchObject({ messages: 1 })
    } finally {
      lock.release()
    }
  })

  it("deletes what a client expunges or moves to Trash, as DELETE /emails does; mail sent from the mailbox is in Sent, seen", async () => {
    const box = await newBox(suite.url, { user: await withApiKey(suite.url) })
    const subject = `To delete ${fresh("d")}`
    await sendMail(suite.server.smtpPort, { to: box.address, subject, text: "Bye." })
    const email = await arrived(box, subject)
    const trashed = `To trash ${fresh("t")}`
    await sendMail(suite.server.smtpPort, { to: box.address, subject: trashed, text: "Bye too." })
    const trashedEmail = await arrived(box, trashed)
    const sent = await withKey(suite.url, box.user).POST("/v1/api/mailboxes/{mailboxId}/send", {
      params: { path: { mailboxId: box.mailboxId } },
      body: { to: ["someone@example.com"], subject: `Note ${fresh("n")}`, text: "Kept in Sent." }
    })
    expect(sent.response.status).toBe(202)

    const client = await connect(box.address, box.user.apiKey)
    const sentFolder = await client.getMailboxLock("Sent")
    try {
      const message = await client.fetchOne("*", { flags: true, envelope: true })
      if (message === false) throw new Error("nothing in Sent")
      expect(message.envelope?.subject).toMatch(/^Note /)
      expect([...message.flags ?? []]).toEqual(["\\Seen"])
    } finally {
      sentFolder.release()
    }
    const lock = await client.getMailboxLock("INBOX")
    try {
      const expunged = new Promise<{ seq: number }>((resolve) => client.once("expunge", resolve))
      expect(await client.messageDelete("1", { uid: true })).toBe(true)
      expect((await expunged).seq).toBe(1)
      const gone = await withKey(suite.url, box.user).GET("/v1/api/emails/{emailId}", { params: { path: { emailId: email.email_id } } })
      expect(gone.response.status).toBe(404)

      // A mail program's Delete: MOVE to Trash, which keeps nothing.
      expect(await client.messageCopy("2", "Trash", { uid: true })).toBe(false)
      expect(await client.messageMove("2", "Trash", { uid: true })).toMatchObject({ destination: "Trash" })
      const alsoGone = await withKey(suite.url, box.user).GET("/v1/api/emails/{emailId}", {
        params: { path: { emailId: trashedEmail.email_id } }
      })
      expect(alsoGone.response.status).toBe(404)
      expect(await client.status("INBOX", { messages: true })).toMatchObject({ messages: 0 })
      expect(await client.status("Trash", { messages: true })).toMatchObject({ messages: 0 })
    } finally {
      lock.release()
    }
  })

  it("a message moved out and straight back gets a new UID, never the one the session was told was expunged", async () => {
    const box = await newBox(suite.url, { user: await withApiKey(suite.url) })
    const subject = `Back and forth ${fresh("m")}`
    await sendMail(suite.server.smtpPort, { to: box.address, subject, text: "Round trip" })
    await arrived(box, subject)
    const client = await connect(box.address, box.user.apiKey)
    const inbox = await client.getMailboxLock("INBOX")
    try {
      expect(await client.messageMove("1", "Junk", { uid: true })).toMatchObject({ uidMap: new Map([[1, 1]]) })
    } finally {
      inbox.release()
    }
    // Nothing looks at INBOX in between: the move itself must have let go of UID 1 there.
    const junk = await client.getMailboxLock("Junk")
    try {
      expect(await client.messageMove("1", "INBOX", { uid: true })).toMatchObject({ uidMap: new Map([[1, 2]]) })
    } finally {
      junk.release()
    }
    expect(await client.status("INBOX", { messages: true, uidNext: true })).toMatchObject({ messages: 1, uidNext: 3 })
  })

  it("files mail by labelling it: MOVE to Junk and back, COPY to a label, MOVE between labels, each with COPYUID", async () => {
    const box = await newBox(suite.url, { user: await withApiKey(suite.url) })
    const subject = `File me ${fresh("m")}`
    await sendMail(suite.server.smtpPort, { to: box.address, subject, text: "Where do I go?" })
    const email = await arrived(box, subject)
    await withKey(suite.url, box.user).PATCH("/v1/api/emails/{emailId}", {
      params: { path: { emailId: email.email_id } },
      body: { add_labels: ["Later"] }
    })
    const client = await connect(box.address, box.user.apiKey)
    const inbox = await client.getMailboxLock("INBOX")
    try {
      const junked = await client.messageMove("1", "Junk", { uid: true })
      expect(junked).toMatchObject({ destination: "Junk", uidMap: new Map([[1, 1]]) })
      expect(await labelsOf(box, email.email_id)).toContain("spam")
      // A person's verdict: the mail left INBOX.
      expect(await client.status("INBOX", { messages: true })).toMatchObject({ messages: 0 })
      // Refusals name what cannot be done.
      await expect(client.messageCopy("1:*", "Junk")).resolves.toBe(false)
    } finally {
      inbox.release()
    }
    const junk = await client.getMailboxLock("Junk")
    try {
      expect(await client.messageCopy("1", "Sent", { uid: true })).toBe(false)
      expect(await client.messageMove("1", "INBOX", { uid: true })).toMatchObject({ destination: "INBOX", uidMap: new Map([[1, 2]]) })
      expect(await labelsOf(box, email.email_id)).not.toContain("spam")
    } finally {
      junk.release()
    }
    const back = await client.getMailboxLock("INBOX")
    try {
      expect(await client.messageCopy("2", "Clients", { uid: true })).toBe(false)
      await withKey(suite.url, box.user).PATCH("/v1/api/emails/{emailId}", {
        params: { path: { emailId: email.email_id } },
        body: { add_labels: ["Clients"] }
      })
      await client.messageCopy("2", "Later", { uid: true })
      expect(await client.messageMove("2", "Later", { uid: true })).toBe(false)
    } finally {
      back.release()
    }
    const later = await client.getMailboxLock("Later")
    try {
      expect(await client.messageMove("1", "Clients", { uid: true })).toMatchObject({ destination: "Clients", uidMap: new Map([[1, 1]]) })
      const labels = await labelsOf(box, email.email_id)
      expect(labels).toContain("Clients")
      expect(labels).not.toContain("Later")
    } finally {
      later.release()
    }
  })

  it("takes a mail program's copy of what it sent into Sent as the sent mail it is, and nothing else", async () => {
    const box = await newBox(suite.url, { user: await withApiKey(suite.url) })
    const sent = await withKey(suite.url, box.user).POST("/v1/api/mailboxes/{mailboxId}/send", {
      params: { path: { mailboxId: box.mailboxId } },
      body: { to: ["someone@example.com"], subject: `Copy kept ${fresh("c")}`, text: "Sent once." }
    })
    const raw = await (await fetch(`${suite.url}/v1/api/emails/${sent.data!.data.email_id}/raw`, {
      headers: { authorization: `Bearer ${box.user.apiKey}` }
    })).text()
    const client = await connect(box.address, box.user.apiKey)
    expect(await client.append("Sent", raw, ["\\Seen"])).toMatchObject({ destination: "Sent", uid: 1 })
    expect(await client.status("Sent", { messages: true })).toMatchObject({ messages: 1 })
    const stranger = "From: someone@example.com\r\nSubject: Not sent here\r\nMessage-ID: <elsewhere@example.com>\r\n\r\nHi\r\n"
    await expect(client.append("Sent", stranger)).rejects.toMatchObject({ responseText: expect.stringMatching(/not sent from it/) })
    await expect(client.append("INBOX", stranger)).rejects.toMatchObject({ responseText: expect.stringMatching(/^Mail is added by receiving or sending it/) })
  })

  it("refuses a wrong key, a mailbox the key does not reach, and changes by a read-only key; a revoked key's session ends", async () => {
    const box = await newBox(suite.url, { user: await withApiKey(suite.url) })
    const other = await newBox(suite.url, { user: await withApiKey(suite.url) })
    await expect(connect(box.address, "mr_live_not_a_key")).rejects.toMatchObject({ authenticationFailed: true })
    await expect(connect(other.address, box.user.apiKey)).rejects.toMatchObject({ authenticationFailed: true })

    const subject = `Read only ${fresh("r")}`
    await sendMail(suite.server.smtpPort, { to: box.address, subject, text: "Look, don't touch." })
    await arrived(box, subject)
    const created = await withToken(suite.url, box.user).POST("/v1/api-keys", { body: { name: "reader", permission: "read_only" } })
    const reader = created.data!.data
    const client = await connect(box.address, reader.apiKey)
    const lock = await client.getMailboxLock("INBOX")
    try {
      expect(client.mailbox && client.mailbox.readOnly).toBe(true)
      expect(await client.messageFlagsAdd("1", ["\\Flagged"])).toBe(false)
      const read = await client.fetchOne("1", { source: true, flags: true })
      if (read === false) throw new Error("no message")
      // Reading with a read-only key leaves the email unread.
      expect([...read.flags ?? []]).toEqual([])
    } finally {
      lock.release()
    }

    // Idling, the client sends no command: the session ends all the same once the key is revoked, at
    // the next thing it would hear (new mail here), not half an hour of updates later.
    const closed = new Promise<void>((resolve) => client.once("close", () => resolve()))
    const idling = client.idle().catch(() => undefined)
    const revoked = await withToken(suite.url, box.user).DELETE("/v1/api-keys/{id}", { params: { path: { id: reader.keyId } } })
    expect(revoked.response.status).toBe(200)
    await sendMail(suite.server.smtpPort, { to: box.address, subject: `After the revocation ${fresh("r")}`, text: "Not for that key." })
    await closed
    await idling
  })

  it("takes TLS from the first byte on IMAPS_PORT", async () => {
    const box = await newBox(suite.url, { user: await withApiKey(suite.url) })
    const client = await connect(box.address, box.user.apiKey, { implicit: true })
    expect(client.secureConnection).toBe(true)
    expect((await client.list()).map((folder) => folder.path)).toContain("INBOX")
    expect((await scrape(`${suite.url}/metrics`)).value("mailroom_imap_commands_total", { command: "LIST", status: "OK" })).toBeGreaterThan(0)
  })
})

describe("IMAP on the wire", () => {
  it("offers STARTTLS and takes no password before it; answers mistakes BAD with the tag", async () => {
    const session = await bareImap(imapPort)
    const greeting = await session.waitFor(/\r\n/)
    expect(greeting).toMatch(/^\* OK \[CAPABILITY [^\]]*STARTTLS[^\]]*LOGINDISABLED[^\]]*\] Mailroom IMAP ready/)
    expect(await session.send("a1 LOGIN someone@agents.localhost secret\r\n", /a1 .*\r\n/)).toMatch(/a1 NO \[PRIVACYREQUIRED\]/)
    expect(await session.send("a2 FROB\r\n", /a2 .*\r\n/)).toMatch(/a2 BAD Unknown command FROB/)
    expect(await session.send("a3 SELECT INBOX\r\n", /a3 .*\r\n/)).toMatch(/a3 BAD Sign in first/)
    expect(await session.send("a4 LOGIN \"unterminated\r\n", /a4 .*\r\n/)).toMatch(/a4 BAD Unterminated quoted string/)
    // Lists nested past any command's need (20,000 deep, within the line limit) are BAD, and the connection goes on.
    const nested = `${"(".repeat(20_000)}${")".repeat(20_000)}`
    expect(await session.send(`a4a LOGIN ${nested}\r\n`, /a4a .*\r\n/)).toMatch(/^a4a BAD Lists nested more than 100 deep\r\n$/)
    expect(await session.send("a4b NOOP\r\n", /a4b .*\r\n/)).toMatch(/^a4b OK/)
    // A synchronising literal is invited; one past the command limit is refused before its bytes.
    expect(await session.send("a5 ID (\"name\" {4}\r\n", /\+ .*\r\n/)).toMatch(/^\+ Ready/)
    expect(await session.send("mutt)\r\n", /a5 .*\r\n/)).toMatch(/\* ID \("name" "Mailroom"\)\r\na5 OK/)
    expect(await session.send("a6 ID {9999999}\r\n", /a6 .*\r\n/)).toMatch(/a6 BAD Command too long/)
    expect(await session.send("a7 NOOP\r\n", /a7 .*\r\n/)).toMatch(/a7 OK/)
    // "+" is no tag: its BAD is untagged, not a continuation request.
    expect(await session.send("+ NOOP\r\n", /\* BAD .*\r\n/)).toMatch(/^\* BAD Expected a tag/)
    expect(await session.send("a8 LOGOUT\r\n", /a8 .*\r\n/)).toMatch(/\* BYE .*\r\na8 OK/)
    session.close()
  })

  it("answers a client that signed in over TLS: literals, sequence numbers past the end, unknown sections", async () => {
    const box = await newBox(suite.url, { user: await withApiKey(suite.url) })
    const subject = `Wire ${fresh("w")}`
    await sendMail(suite.server.smtpPort, { to: box.address, subject, text: "Over the wire." })
    const email = await arrived(box, subject)
    const { send, close } = await bareImapOverTls(imapsPort)
    // PLAIN naming another user to act as (an authorization identity) is refused: there is no proxying.
    const asAnother = Buffer.from(`someone-else@agents.localhost\u0000${box.address}\u0000${box.user.apiKey}`).toString("base64")
    expect(await send(`b0 AUTHENTICATE PLAIN ${asAnother}\r\n`, "b0")).toMatch(/b0 NO \[AUTHORIZATIONFAILED\]/)
    // LITERAL+: the password as a non-synchronising literal.
    expect(await send(`b1 LOGIN ${box.address} {${box.user.apiKey.length}+}\r\n${box.user.apiKey}\r\n`, "b1")).toMatch(/b1 OK \[CAPABILITY /)
    expect(await send("b2 SELECT INBOX\r\n", "b2")).toMatch(/\* 1 EXISTS\r\n[\s\S]*b2 OK \[READ-WRITE\]/)
    expect(await send("b3 FETCH 2 FLAGS\r\n", "b3")).toMatch(/b3 BAD No such message/)
    expect(await send("b4 FETCH 1 BODY.PEEK[9]\r\n", "b4")).toMatch(/\* 1 FETCH \(BODY\[9\] \{0\}\r\n\)\r\nb4 OK/)
    expect(await send("b5 FETCH 1 BODY.PEEK[HEADER.FIELDS (SUBJECT)]\r\n", "b5")).toContain(`Subject: ${subject}\r\n\r\n`)
    // A field name is an astring: as a literal too.
    expect(await send("b5a FETCH 1 BODY.PEEK[HEADER.FIELDS ({7+}\r\nSubject)]\r\n", "b5a")).toContain(`Subject: ${subject}\r\n\r\n`)
    // A mistake quoted back stays on one line, and never ends as a literal's announcement would.
    expect(await send("b5b FETCH 1 BODY.PEEK[HEADER.FOO ({3+}\r\nabc)]\r\n", "b5b")).toMatch(/\r\nb5b BAD Unknown section [^\r\n]*\r\n$|^b5b BAD Unknown section [^\r\n]*\r\n$/)
    expect(await send("b6 FETCH 1 (BODY.PEEK[TEXT]<0.4>)\r\n", "b6")).toMatch(/BODY\[TEXT\]<0> \{4\}\r\nOver\)/)
    expect(await send("b7 SEARCH CHARSET KOI8-R ALL\r\n", "b7")).toMatch(/b7 NO \[BADCHARSET/)
    // Keys nested past any mail program's use are a mistake of the command, not of the server.
    expect(await send(`b7a SEARCH ${"NOT ".repeat(5_000)}ALL\r\n`, "b7a")).toMatch(/b7a BAD Search keys nested more than 100 deep/)
    expect(await send(`b7b SEARCH ${"(".repeat(2_000)}ALL${")".repeat(2_000)}\r\n`, "b7b")).toMatch(/b7b BAD /)
    expect(await send(`b7c SEARCH ${"NOT (".repeat(20)}ALL${")".repeat(20)}\r\n`, "b7c")).toMatch(/\* SEARCH 1\r\nb7c OK/)
    expect(await send(`b7d FETCH 1 ${"(".repeat(20_000)}FLAGS${")".repeat(20_000)}\r\n`, "b7d")).toMatch(/^b7d BAD Lists nested more than 100 deep\r\n$/)
    expect(await send("b7e NOOP\r\n", "b7e")).toMatch(/b7e OK/)
    // BODY[] without PEEK reads the message: \Seen comes with it, and the email is no longer unread.
    expect(await send("b8 FETCH 1 BODY[TEXT]\r\n", "b8")).toMatch(/BODY\[TEXT\] \{\d+\}\r\nOver the wire\.\r\n FLAGS \(\\Seen\)\)\r\nb8 OK/)
    expect(await labelsOf(box, email.email_id)).not.toContain("unread")
    expect(await send("b9 CREATE Projects\r\n", "b9")).toMatch(/b9 NO \[CANNOT\]/)
    expect(await send("b10 SELECT Nowhere\r\n", "b10")).toMatch(/b10 NO \[NONEXISTENT\]/)
    // A SELECT that fails leaves no folder selected (RFC 3501 §6.3.1).
    expect(await send("b11 FETCH 1 FLAGS\r\n", "b11")).toMatch(/b11 BAD Select a folder first/)
    // LOGOUT's OK reaches the client before the connection closes, over TLS too.
    expect(await send("b12 LOGOUT\r\n", "b12")).toMatch(/\* BYE [^\r]*\r\nb12 OK/)
    close()
  })

  it("EXPUNGE deletes what may go and keeps the rest, still marked; a key narrowed away from the mailbox is told so", async () => {
    const box = await newBox(suite.url, { user: await withApiKey(suite.url) })
    const subjects = [`Kept ${fresh("k")}`, `Gone ${fresh("g")}`]
    const received = []
    for (const subject of subjects) {
      await sendMail(suite.server.smtpPort, { to: box.address, subject, text: "Expunge me." })
      received.push(await arrived(box, subject))
    }
    const [answered] = received
    // An unsent draft answers the first: it may not be deleted yet.
    const account = withKey(suite.url, box.user)
    const draft = await account.POST("/v1/api/mailboxes/{mailboxId}/drafts", {
      params: { path: { mailboxId: box.mailboxId } },
      body: { in_reply_to: answered!.email_id, text: "Thanks." }
    })
    expect(draft.response.status).toBe(201)
    const other = await newBox(suite.url, { user: box.user })
    const agent = (await withToken(suite.url, box.user).POST("/v1/api-keys", { body: { name: "mail program", mailboxIds: [box.mailboxId] } })).data!.data

    const { answer, close, send, write } = await bareImapOverTls(imapsPort)
    try {
      expect(await send(`d1 LOGIN ${box.address} ${agent.apiKey}\r\n`, "d1")).toMatch(/d1 OK/)
      const selected = await send("d2 SELECT INBOX\r\n", "d2")
      expect(selected).toContain("* OK [PERMANENTFLAGS (\\Seen \\Flagged \\Answered \\Deleted \\Draft \\*)] Flags kept\r\n")
      // A keyword new to the folder: FLAGS names it before the message is told it.
      expect(await send("d2a STORE 1 +FLAGS ($Urgent)\r\n", "d2a")).toMatch(
        /^\* FLAGS \(\\Seen \\Flagged \\Answered \\Deleted \\Draft \$Urgent\)\r\n\* 1 FETCH \(FLAGS \([^)]*\$Urgent\)\)\r\nd2a OK/
      )
      // Any case is the same keyword, kept as first written.
      expect(await send("d2b STORE 1 +FLAGS ($URGENT Later later)\r\n", "d2b")).toMatch(/\* 1 FETCH \(FLAGS \([^)]*\$Urgent Later\)\)\r\nd2b OK/)
      expect(await send("d2c SEARCH KEYWORD $URGENT\r\n", "d2c")).toBe("* SEARCH 1\r\nd2c OK SEARCH completed\r\n")
      expect(await send("d2d SEARCH UNKEYWORD $urgent\r\n", "d2d")).toBe("* SEARCH 2\r\nd2d OK SEARCH completed\r\n")
      const many = Array.from({ length: 33 }, (_, n) => `k${n}`).join(" ")
      expect(await send(`d2e STORE 1 +FLAGS (${many})\r\n`, "d2e")).toBe("d2e NO [LIMIT] A message keeps at most 32 keywords\r\n")
      expect(await send(`d2f STORE 1 +FLAGS (${"k".repeat(65)})\r\n`, "d2f")).toMatch(/^d2f BAD Not a keyword: k{65}\r\n/)
      expect(await send("d3 STORE 1:2 +FLAGS.SILENT (\\Deleted)\r\n", "d3")).toMatch(/d3 OK/)
      expect(await send("d4 EXPUNGE\r\n", "d4")).toBe(
        "* 2 EXPUNGE\r\nd4 OK EXPUNGE completed; 1 kept: An unsent draft replies to or forwards this mail: delete or change the draft first\r\n"
      )
      // The one kept is still marked \Deleted (kept with the email).
      expect(await send("d5 FETCH 1 FLAGS\r\n", "d5")).toMatch(/^\* 1 FETCH \(FLAGS \([^)]*\\Deleted[^)]*\)\)\r\nd5 OK/)
      expect((await account.GET("/v1/api/mailboxes/{mailboxId}/emails", { params: { path: { mailboxId: box.mailboxId } } })).data?.data.map((e) => e.subject))
        .toEqual([subjects[0]])

      // A message past the largest one taken is too big, not a bad command; its literal was never invited.
      expect(await send("d5a APPEND INBOX {999999999}\r\n", "d5a")).toBe(`d5a NO [TOOBIG] The message is too big: at most ${maxMessageBytes} bytes\r\n`)
      // The same limit is announced beforehand (RFC 7889).
      expect(await send("d5b CAPABILITY\r\n", "d5b")).toMatch(new RegExp(`^\\* CAPABILITY [^\\r]* APPENDLIMIT=${maxMessageBytes}( |\\r\\n)`))

      // The key narrowed to another mailbox: the session ends, saying why.
      await withToken(suite.url, box.user).PATCH("/v1/api-keys/{id}", { params: { path: { id: agent.keyId } }, body: { mailboxIds: [other.mailboxId] } })
      write("d6 NOOP\r\n")
      expect(await answer(/\* BYE [^\r]*\r\n/)).toMatch(/^\* BYE This API key no longer reaches the mailbox: sign in with one that does\r\n/)
    } finally {
      close()
    }
  })

  it("runs nothing a client sent in the clear behind STARTTLS (what a man in the middle could slip in)", async () => {
    const plain = net.connect(imapPort, "127.0.0.1")
    let clear = ""
    plain.setEncoding("latin1")
    const onClear = (chunk: string) => {
      clear += chunk
    }
    plain.on("data", onClear)
    await until("greeting", async () => (clear.includes("\r\n") ? true : undefined), 10_000, 10, 10)
    // One packet: STARTTLS and a command behind it.
    plain.write("a STARTTLS\r\nb CAPABILITY\r\n")
    await until("STARTTLS's OK", async () => (/a OK[^\r]*\r\n/.test(clear) ? true : undefined), 10_000, 10, 10)
    plain.off("data", onClear)
    plain.setEncoding("binary" as BufferEncoding)
    const secured = tls.connect({ socket: plain, rejectUnauthorized: false })
    let inside = ""
    secured.setEncoding("latin1")
    secured.on("data", (chunk: string) => {
      inside += chunk
    })
    await new Promise((resolve) => secured.once("secureConnect", resolve))
    secured.write("c NOOP\r\n")
    await until("NOOP's OK", async () => (/c OK[^\r]*\r\n/.test(inside) ? true : undefined), 10_000, 10, 10)
    expect(inside).not.toMatch(/(^|\n)b /)
    expect(clear).not.toMatch(/(^|\n)b /)
    secured.destroy()
  })
})

describe("behind a load balancer (PROXY_PROTOCOL)", () => {
  const BALANCER = "127.0.0.6"
  const opened: Array<net.Socket> = []
  afterAll(() => {
    for (const socket of opened) socket.destroy()
  })

  /** A connection from the balancer for `client` (none: without a PROXY header); what the server says first, up to its first line. */
  const throughBalancer = async (port: number, client: string | undefined, options: { readonly implicit?: boolean; readonly first?: string } = {}) => {
    const raw = net.connect({ port, host: "127.0.0.1", localAddress: BALANCER })
    opened.push(raw)
    await new Promise((resolve) => raw.once("connect", resolve))
    raw.write(client === undefined ? options.first ?? "" : `PROXY TCP4 ${client} 127.0.0.1 40000 ${port}\r\n`)
    const socket = options.implicit ? tls.connect({ socket: raw, rejectUnauthorized: false }) : raw
    return new Promise<string>((resolve) => {
      let heard = ""
      socket.setEncoding("latin1")
      socket.on("data", (chunk: string) => {
        heard += chunk
        if (heard.includes("\r\n")) resolve(heard)
      })
      socket.once("close", () => resolve(heard))
      socket.on("error", () => resolve(heard))
    })
  }

  it("serves the client a PROXY header names, on IMAP and on IMAPS (the header before TLS), its connections counted as its own", async () => {
    // IMAP_MAX_CONNECTIONS_PER_IP (20) is the client's, not the balancer's.
    const first = await Promise.all(Array.from({ length: 20 }, () => throughBalancer(imapPort, "203.0.113.9")))
    expect(first.filter((greeting) => greeting.startsWith("* OK"))).toHaveLength(20)
    expect(await throughBalancer(imapPort, "203.0.113.9")).toMatch(/^\* BYE Too many connections/)
    expect(await throughBalancer(imapPort, "203.0.113.10")).toMatch(/^\* OK/)
    expect(await throughBalancer(imapsPort, "203.0.113.10", { implicit: true })).toMatch(/^\* OK/)
  })

  it("closes a connection from the balancer that does not begin with a PROXY header, having said nothing", async () => {
    expect(await throughBalancer(imapPort, undefined, { first: "a1 CAPABILITY\r\n" })).toBe("")
  })
})
