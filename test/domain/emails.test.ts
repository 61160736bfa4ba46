/**
 * Reading mail in process, over the suite's migrated database with emails seeded by SQL (DESIGN.md §4
 * "reading mail"): a mailbox's list (order, sort, pages, snippet), one email with its bodies, headers
 * and attachments, the raw message, an attachment's bytes and a thread. Only the owner of an active
 * mailbox reads its mail: anyone else, or anything of a deleted mailbox, is 404 NOT_FOUND.
 * How mail gets there (SMTP, parsing, threading) is test/smtp's subject.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { createHash } from "node:crypto"
import { Emails } from "../../services/mail/emails.ts"
import type { ValidationError } from "../../services/errors.ts"
import { type Entry, parseEntry } from "../../services/mail/sender-list-rules.ts"
import { testDatabase } from "../support/database.ts"
import { DOMAIN, insertEmail, insertMailbox, type Mailbox } from "../support/seed-mail.ts"
import { uniqueName } from "../support/services.ts"
import { insertUser } from "../support/users.ts"

const services = Emails.Default.pipe(Layer.provideMerge(testDatabase))

const newest = { field: "received_at", direction: "desc" } as const
const firstPage = { limit: 20, offset: 0 }
const lastActive = { field: "last_received_at", direction: "desc" } as const

const deleteMailbox = (mailbox: Mailbox) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql`UPDATE mailboxes SET status = 'deleted', deleted_at = now() WHERE id = ${mailbox.mailboxId}`)

const notFound = { code: "NOT_FOUND", status: 404 }

layer(services, { timeout: "120 seconds" })("Emails", (it) => {
  it.effect("a mailbox's list: newest first, with the email.received fields, received_at, size and a 200-character snippet", () =>
    Effect.gen(function*() {
      const emails = yield* Emails
      const mailbox = yield* insertMailbox(yield* insertUser())
      const older = yield* insertEmail(mailbox, { subject: "Older", receivedMinutesAgo: 30, text: "short body" })
      const newer = yield* insertEmail(mailbox, { subject: "Newer", receivedMinutesAgo: 5, text: "x".repeat(150) + "y".repeat(100) })

      const listed = yield* emails.list(mailbox.owner.userId, mailbox.mailboxId, firstPage, newest)
      expect(listed.total).toBe(2)
      expect(listed.emails.map((e) => e.email_id)).toEqual([newer.id, older.id])
      expect(listed.emails[0]).toEqual({
        email_id: newer.id,
        direction: "inbound",
        message_id: `<${newer.id}@test>`,
        subject: "Newer",
        from: "sender@example.com",
        from_name: null,
        to: [mailbox.address],
        cc: [],
        reply_to: [],
        date: expect.any(String),
        mailbox_id: mailbox.mailboxId,
        domain: DOMAIN,
        has_attachments: false,
        thread_id: `thr_${newer.id}`,
        labels: ["inbound", "unread"],
        // Seeded straight into the database: no SMTP node checked it.
        authentication: null,
        authentication_results: null,
        spam: null,
        received_at: expect.any(String),
        size: newer.raw.length,
        snippet: "x".repeat(150) + "y".repeat(50)
      })
      expect(listed.emails[1]!.snippet).toBe("short body")
    }))

  it.effect("the list sorts by received_at, date or subject and pages; total counts the whole mailbox", () =>
    Effect.gen(function*() {
      const emails = yield* Emails
      const mailbox = yield* insertMailbox(yield* insertUser())
      // Sent in one order, received in another.
      yield* insertEmail(mailbox, { subject: "bravo", receivedMinutesAgo: 10, sentMinutesAgo: 100 })
      yield* insertEmail(mailbox, { subject: "charlie", receivedMinutesAgo: 20, sentMinutesAgo: 50 })
      yield* insertEmail(mailbox, { subject: "alpha", receivedMinutesAgo: 30, sentMinutesAgo: 70 })
      const subjects = (
        page: { limit: number; offset: number },
        sort: { field: "received_at" | "date" | "subject"; direction: "asc" | "desc" }
      ) => emails.list(mailbox.owner.userId, mailbox.mailboxId, page, sort).pipe(Effect.map((r) => [r.emails.map((e) => e.subject), r.total]))

      expect(yield* subjects(firstPage, newest)).toEqual([["bravo", "charlie", "alpha"], 3])
      expect(yield* subjects(firstPage, { field: "received_at", direction: "asc" })).toEqual([["alpha", "charlie", "bravo"], 3])
      expect(yield* subjects(firstPage, { field: "date", direction: "desc" })).toEqual([["charlie", "alpha", "bravo"], 3])
      expect(yield* subjects(firstPage, { field: "subject", direction: "asc" })).toEqual([["alpha", "bravo", "charlie"], 3])
      expect(yield* subjects({ limit: 2, offset: 1 }, newest)).toEqual([["charlie", "alpha"], 3])
      expect(yield* subjects({ limit: 2, offset: 5 }, newest)).toEqual([[], 3])
    }))

  it.effect("from: a sender as the sender lists name one (address and its subaddresses, domain, *.subdomains), case-insensitive", () =>
    Effect.gen(function*() {
      const emails = yield* Emails
      const mailbox = yield* insertMailbox(yield* insertUser())
      const senders = [
        "Ada@Example.com", "ada+news@example.com", "adam@example.com", "bob@example.com", "ada@mail.example.com", "a_b@example.org", "axb@example.org",
        // An internationalized domain is stored in Unicode (as mailparser gives it): named in either form.
        "ada@bücher.example"
      ]
      for (const [i, from] of senders.entries()) yield* insertEmail(mailbox, { subject: from, receivedMinutesAgo: 60 - i, from })
      const fromOf = (raw: string) =>
        Effect.map(
          emails.list(mailbox.owner.userId, mailbox.mailboxId, firstPage, { field: "received_at", direction: "asc" }, { from: parseEntry(raw) as Entry }),
          (listed) => listed.emails.map((email) => email.subject)
        )
      expect(yield* fromOf("ada@example.com")).toEqual(["Ada@Example.com", "ada+news@example.com"])
      expect(yield* fromOf("ADA+NEWS@example.com")).toEqual(["ada+news@example.com"])
      expect(yield* fromOf("example.com")).toEqual(["Ada@Example.com", "ada+news@example.com", "adam@example.com", "bob@example.com"])
      expect(yield* fromOf("*.example.com")).toEqual(["ada@mail.example.com"])
      // LIKE's wildcards in an address are letters: a_b is not axb.
      expect(yield* fromOf("a_b@example.org")).toEqual(["a_b@example.org"])
      expect(yield* fromOf("ada@xn--bcher-kva.example")).toEqual(["ada@bücher.example"])
      expect(yield* fromOf("bücher.example")).toEqual(["ada@bücher.example"])
      expect((yield* emails.list(mailbox.owner.userId, mailbox.mailboxId, firstPage, newest, { from: parseEntry("example.net") as Entry })).total).toBe(0)
    }))

  it.effect("received: at or after its start, before its end; every mailbox's list too; a span holding no moment is refused", () =>
    Effect.gen(function*() {
      const emails = yield* Emails
      const mailbox = yield* insertMailbox(yield* insertUser())
      for (const [subject, minutes] of [["Oldest", 30], ["Middle", 20], ["Newest", 10]] as const) {
        yield* insertEmail(mailbox, { subject, receivedMinutesAgo: minutes })
      }
      const listed = yield* emails.list(mailbox.owner.userId, mailbox.mailboxId, firstPage, newest)
      const at = (subject: string) => new Date(listed.emails.find((email) => email.subject === subject)!.received_at)
      const within = (after: Date | undefined, before: Date | undefined) =>
        Effect.map(
          emails.list(mailbox.owner.userId, mailbox.mailboxId, firstPage, newest, { received: { after, before } }),
          (page) => [page.total, page.emails.map((email) => email.subject)]
        )
      expect(yield* within(at("Middle"), undefined)).toEqual([2, ["Newest", "Middle"]])
      expect(yield* within(undefined, at("Middle"))).toEqual([1, ["Oldest"]])
      expect(yield* within(at("Oldest"), at("Newest"))).toEqual([2, ["Middle", "Oldest"]])
      expect(yield* within(new Date(at("Newest").getTime() + 1), undefined)).toEqual([0, []])
      const everyMailbox = yield* emails.listAll(mailbox.owner.userId, firstPage, newest, { received: { after: at("Middle"), before: at("Newest") } })
      expect(everyMailbox.emails.map((email) => email.subject)).toEqual(["Middle"])

      const empty = yield* Effect.flip(within(at("Middle"), at("Middle")))
      expect(empty).toMatchObject({ code: "VALIDATION_ERROR", status: 400, details: { received_before: "must be later than received_after" } })
    }))

  it.effect("another user's mailbox, a deleted mailbox and an unknown one are 404 to list", () =>
    Effect.gen(function*() {
      const emails = yield* Emails
      const owner = yield* insertUser()
      const stranger = yield* insertUser()
      const mailbox = yield* insertMailbox(owner)
      yield* insertEmail(mailbox, { subject: "Private", receivedMinutesAgo: 1 })
      expect(yield* Effect.flip(emails.list(stranger.userId, mailbox.mailboxId, firstPage, newest))).toMatchObject(notFound)
      expect(yield* Effect.flip(emails.list(owner.userId, "mbx_missing", firstPage, newest))).toMatchObject(notFound)
      yield* deleteMailbox(mailbox)
      expect(yield* Effect.flip(emails.list(owner.userId, mailbox.mailboxId, firstPage, newest))).toMatchObject(notFound)
    }))

  it.effect("every mailbox's mail in one list: newest first across mailboxes, filtered and paged; not another account's, nor a deleted mailbox's", () =>
    Effect.gen(function*() {
      const emails = yield* Emails
      const owner = yield* insertUser()
      const first = yield* insertMailbox(owner)
      const second = yield* insertMailbox(owner)
      const gone = yield* insertMailbox(owner)
      const oldest = yield* insertEmail(first, { subject: "Oldest", receivedMinutesAgo: 30 })
      const middle = yield* insertEmail(second, { subject: "Middle", receivedMinutesAgo: 20, labels: ["inbound"] })
      const newest_ = yield* insertEmail(first, { subject: "Newest", receivedMinutesAgo: 10 })
      const ofGone = yield* insertEmail(gone, { subject: "Of a deleted mailbox", receivedMinutesAgo: 5 })
      yield* deleteMailbox(gone)
      const stranger = yield* insertMailbox(yield* insertUser())
      const theirs = yield* insertEmail(stranger, { subject: "Someone else's", receivedMinutesAgo: 1 })

      const all = yield* emails.listAll(owner.userId, firstPage, newest)
      expect(all.total).toBe(3)
      expect(all.emails.map((e) => [e.email_id, e.mailbox_id])).toEqual([
        [newest_.id, first.mailboxId],
        [middle.id, second.mailboxId],
        [oldest.id, first.mailboxId]
      ])
      const unread = yield* emails.listAll(owner.userId, firstPage, newest, { unread: true })
      expect(unread.emails.map((e) => e.email_id)).toEqual([newest_.id, oldest.id])
      const paged = yield* emails.listAll(owner.userId, { limit: 1, offset: 1 }, { field: "subject", direction: "asc" })
      expect([paged.total, paged.emails.map((e) => e.subject)]).toEqual([3, ["Newest"]])
      const since = yield* emails.listAll(owner.userId, firstPage, newest, { after: oldest.id })
      expect(since.emails.map((e) => e.email_id)).toEqual([newest_.id, middle.id])
      // The cursor must be one of the account's own emails, in a mailbox it still has.
      for (const cursor of [theirs.id, ofGone.id]) {
        expect(yield* Effect.flip(emails.listAll(owner.userId, firstPage, newest, { after: cursor }))).toMatchObject({
          code: "VALIDATION_ERROR",
          details: { after: "must be the id of one of your emails" }
        })
      }
      // Subjects in a reader's order, whatever their case: "apple" before "Middle", not after "Oldest".
      yield* insertEmail(second, { subject: "apple pie", receivedMinutesAgo: 15 })
      const bySubject = yield* emails.listAll(owner.userId, firstPage, { field: "subject", direction: "asc" })
      expect(bySubject.emails.map((e) => e.subject)).toEqual(["apple pie", "Middle", "Newest", "Oldest"])
    }))

  it.effect("verdicts stored before the ARC domain was kept read with the domain null", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const emails = yield* Emails
      const mailbox = yield* insertMailbox(yield* insertUser())
      const email = yield* insertEmail(mailbox, { subject: "Checked long ago", receivedMinutesAgo: 1 })
      const older = {
        spf: { result: "pass", domain: "example.com", aligned: true },
        dkim: [],
        dmarc: { result: "pass", domain: "example.com", policy: "none" },
        arc: { result: "none" }
      }
      yield* sql`UPDATE emails SET authentication = ${JSON.stringify(older)}::jsonb WHERE id = ${email.id}`
      const read = yield* emails.get(mailbox.owner.userId, email.id)
      expect(read.authentication?.arc).toEqual({ result: "none", domain: null })
      const listed = yield* emails.list(mailbox.owner.userId, mailbox.mailboxId, firstPage, newest)
      expect(listed.emails[0]!.authentication?.arc).toEqual({ result: "none", domain: null })
    }))

  it.effect("get answers the email with text, html, headers and its attachments' metadata in order", () =>
    Effect.gen(function*() {
      const emails = yield* Emails
      const mailbox = yield* insertMailbox(yield* insertUser())
      const pdf = new Uint8Array([37, 80, 68, 70, 1, 2, 3])
      const seeded = yield* insertEmail(mailbox, {
        subject: "With files",
        receivedMinutesAgo: 1,
        text: "See attached.",
        html: "<p>See attached.</p>",
        attachments: [
          { filename: "report.pdf", contentType: "application/pdf", bytes: pdf },
          { filename: "notes.txt", contentType: "text/plain", bytes: new TextEncoder().encode("notes") }
        ]
      })
      const email = yield* emails.get(mailbox.owner.userId, seeded.id)
      expect(email).toMatchObject({
        email_id: seeded.id,
        subject: "With files",
        has_attachments: true,
        text: "See attached.",
        html: "<p>See attached.</p>",
        headers: { subject: "With files", received: ["from a", "from b"] }
      })
      expect(email.attachments).toEqual([
        {
          attachment_id: seeded.attachmentIds[0],
          filename: "report.pdf",
          content_type: "application/pdf",
          size: pdf.length,
          checksum: createHash("sha256").update(pdf).digest("hex"),
          content_id: null
        },
        expect.objectContaining({ attachment_id: seeded.attachmentIds[1], filename: "notes.txt", size: 5 })
      ])
    }))

  it.effect("cc and reply_to: as stored; read from the stored headers for mail stored before they were kept", () =>
    Effect.gen(function*() {
      const emails = yield* Emails
      const sql = yield* SqlClient.SqlClient
      const mailbox = yield* insertMailbox(yield* insertUser())
      // Seeded without the two columns, as every email stored before them: its headers hold them,
      // decoded (a name whose comma was encoded lost its quotes), a header given twice as an array.
      const older = yield* insertEmail(mailbox, {
        subject: "Before",
        receivedMinutesAgo: 2,
        headers: {
          cc: ["Team: one@example.com, Two <two@xn--bcher-kva.example>;", "Müller, Jürgen <jm@example.com>"],
          "reply-to": "\"Desk, Billing\" <desk@example.com>"
        }
      })
      const plain = yield* insertEmail(mailbox, { subject: "No Cc", receivedMinutesAgo: 3 })
      const newer = yield* insertEmail(mailbox, { subject: "After", receivedMinutesAgo: 1, headers: { cc: "stale@example.com" } })
      yield* sql`UPDATE emails SET cc_addresses = ${["kept@example.com"]}, reply_to_addresses = '{}' WHERE id = ${newer.id}`

      const read = (id: string) => emails.get(mailbox.owner.userId, id).pipe(Effect.map(({ cc, reply_to }) => ({ cc, reply_to })))
      expect(yield* read(older.id)).toEqual({
        cc: ["one@example.com", "two@bücher.example", "jm@example.com"],
        reply_to: ["desk@example.com"]
      })
      expect(yield* read(plain.id)).toEqual({ cc: [], reply_to: [] })
      expect(yield* read(newer.id)).toEqual({ cc: ["kept@example.com"], reply_to: [] })
      // The list reads them the same way.
      const listed = yield* emails.list(mailbox.owner.userId, mailbox.mailboxId, firstPage, newest)
      expect(listed.emails.map(({ subject, cc }) => ({ subject, cc }))).toEqual([
        { subject: "After", cc: ["kept@example.com"] },
        { subject: "Before", cc: ["one@example.com", "two@bücher.example", "jm@example.com"] },
        { subject: "No Cc", cc: [] }
      ])
    }))

  it.effect("from_name: as stored ('' is none); read from the stored From for mail stored before names were kept", () =>
    Effect.gen(function*() {
      const emails = yield* Emails
      const sql = yield* SqlClient.SqlClient
      const mailbox = yield* insertMailbox(yield* insertUser())
      // Seeded without the column, as every email stored before it: its stored From holds the name.
      const older = yield* insertEmail(mailbox, { subject: "Before", receivedMinutesAgo: 3, headers: { from: "Ann Smith <sender@example.com>" } })
      const bare = yield* insertEmail(mailbox, { subject: "Bare", receivedMinutesAgo: 2, headers: { from: "sender@example.com" } })
      const named = yield* insertEmail(mailbox, { subject: "Named", receivedMinutesAgo: 1, headers: { from: "Stale <sender@example.com>" } })
      const nameless = yield* insertEmail(mailbox, { subject: "Nameless", receivedMinutesAgo: 1, headers: { from: "Stale <sender@example.com>" } })
      yield* sql`UPDATE emails SET from_name = 'Ann Müller' WHERE id = ${named.id}`
      yield* sql`UPDATE emails SET from_name = '' WHERE id = ${nameless.id}`

      const nameOf = (id: string) => emails.get(mailbox.owner.userId, id).pipe(Effect.map((email) => email.from_name))
      expect(yield* nameOf(older.id)).toBe("Ann Smith")
      expect(yield* nameOf(bare.id)).toBeNull()
      expect(yield* nameOf(named.id)).toBe("Ann Müller")
      expect(yield* nameOf(nameless.id)).toBeNull()
      const listed = yield* emails.list(mailbox.owner.userId, mailbox.mailboxId, firstPage, { field: "subject", direction: "asc" })
      expect(listed.emails.map(({ from_name, subject }) => [subject, from_name])).toEqual([
        ["Bare", null],
        ["Before", "Ann Smith"],
        ["Named", "Ann Müller"],
        ["Nameless", null]
      ])
    }))

  it.effect("extracted: as stored (its keys as written); read from the bodies for mail stored before extraction existed; none for sent mail", () =>
    Effect.gen(function*() {
      const emails = yield* Emails
      const sql = yield* SqlClient.SqlClient
      const mailbox = yield* insertMailbox(yield* insertUser())
      const older = yield* insertEmail(mailbox, {
        subject: "Your code",
        receivedMinutesAgo: 3,
        text: "Your verification code is 482913.\nhttps://acme.example/verify?token=abc"
      })
      expect((yield* emails.get(mailbox.owner.userId, older.id)).extracted).toEqual({
        reply_text: "Your verification code is 482913.\nhttps://acme.example/verify?token=abc",
        codes: [{ value: "482913", context: "Your verification code is 482913." }],
        links: [{ url: "https://acme.example/verify?token=abc", text: null, kind: "confirmation" }]
      })

      const stored = yield* insertEmail(mailbox, { subject: "Stored", receivedMinutesAgo: 2, text: "Body 111111" })
      const extraction = { reply_text: "as stored", codes: [{ value: "G-551234", context: "code G-551234" }], links: [] }
      yield* sql`UPDATE emails SET extracted = ${JSON.stringify(extraction)}::jsonb WHERE id = ${stored.id}`
      expect((yield* emails.get(mailbox.owner.userId, stored.id)).extracted).toEqual(extraction)

      const sent = yield* insertEmail(mailbox, { subject: "Sent", receivedMinutesAgo: 1, text: "Your code is 482913", labels: ["sent"] })
      yield* sql`UPDATE emails SET direction = 'outbound' WHERE id = ${sent.id}`
      expect((yield* emails.get(mailbox.owner.userId, sent.id)).extracted).toBeNull()
    }))

  it.effect("raw answers the message as received; an attachment its decoded bytes; both only for the owner", () =>
    Effect.gen(function*() {
      const emails = yield* Emails
      const owner = yield* insertUser()
      const stranger = yield* insertUser()
      const mailbox = yield* insertMailbox(owner)
      const bytes = new Uint8Array([0, 255, 1, 254])
      const seeded = yield* insertEmail(mailbox, {
        subject: "Binary",
        receivedMinutesAgo: 1,
        attachments: [{ filename: "blob.bin", contentType: "application/octet-stream", bytes }]
      })
      const other = yield* insertEmail(mailbox, { subject: "Other", receivedMinutesAgo: 2 })

      expect(Buffer.from(yield* emails.raw(owner.userId, seeded.id))).toEqual(Buffer.from(seeded.raw))
      const attachment = yield* emails.attachment(owner.userId, seeded.id, seeded.attachmentIds[0]!)
      expect(attachment).toMatchObject({ filename: "blob.bin", contentType: "application/octet-stream" })
      expect(Buffer.from(attachment.content)).toEqual(Buffer.from(bytes))

      expect(yield* Effect.flip(emails.raw(stranger.userId, seeded.id))).toMatchObject(notFound)
      expect(yield* Effect.flip(emails.attachment(stranger.userId, seeded.id, seeded.attachmentIds[0]!))).toMatchObject(notFound)
      // An attachment is reached only through the email it belongs to.
      expect(yield* Effect.flip(emails.attachment(owner.userId, other.id, seeded.attachmentIds[0]!))).toMatchObject(notFound)
    }))

  it.effect("another user's email is 404 to get, and so is the mail of a deleted mailbox, to its owner too", () =>
    Effect.gen(function*() {
      const emails = yield* Emails
      const owner = yield* insertUser()
      const stranger = yield* insertUser()
      const mailbox = yield* insertMailbox(owner)
      yield* insertMailbox(stranger)
      const seeded = yield* insertEmail(mailbox, { subject: "Mine", receivedMinutesAgo: 1, attachments: [{ filename: "a.txt", contentType: "text/plain", bytes: new Uint8Array([97]) }] })

      expect(yield* Effect.flip(emails.get(stranger.userId, seeded.id))).toMatchObject({ ...notFound, details: { email_id: seeded.id } })
      expect(yield* Effect.flip(emails.get(owner.userId, "eml_missing"))).toMatchObject(notFound)
      expect((yield* emails.get(owner.userId, seeded.id)).email_id).toBe(seeded.id)

      yield* deleteMailbox(mailbox)
      expect(yield* Effect.flip(emails.get(owner.userId, seeded.id))).toMatchObject(notFound)
      expect(yield* Effect.flip(emails.raw(owner.userId, seeded.id))).toMatchObject(notFound)
      expect(yield* Effect.flip(emails.attachment(owner.userId, seeded.id, seeded.attachmentIds[0]!))).toMatchObject(notFound)
    }))

  it.effect("a thread lists its emails oldest first with its subject and count; to anyone else, or once the mailbox is deleted, it is 404", () =>
    Effect.gen(function*() {
      const emails = yield* Emails
      const owner = yield* insertUser()
      const stranger = yield* insertUser()
      const mailbox = yield* insertMailbox(owner)
      const threadId = uniqueName("thr")
      const reply = yield* insertEmail(mailbox, {
        subject: "Re: Plans",
        receivedMinutesAgo: 5,
        threadId,
        from: "BOB@example.com",
        text: "Sounds good.\n\nOn Monday Ann wrote:\n> Dinner at eight?",
        labels: ["inbound", "unread", "urgent"]
      })
      const first = yield* insertEmail(mailbox, { subject: "Plans", receivedMinutesAgo: 50, threadId, from: "bob@example.com", text: "Dinner at eight?", labels: ["inbound"] })
      yield* insertEmail(mailbox, { subject: "Unrelated", receivedMinutesAgo: 20 })
      // The reply's new text, as extraction reads it (extract.ts): without the quoted question.
      const sql = yield* SqlClient.SqlClient
      yield* sql`UPDATE emails SET extracted = ${JSON.stringify({ reply_text: "Sounds good.", codes: [], links: [] })}::jsonb WHERE id = ${reply.id}`

      const thread = yield* emails.thread(owner.userId, threadId)
      // What its entry in the thread list says, and each email's new text: the conversation in order, once.
      expect(thread).toMatchObject({
        thread_id: threadId,
        mailbox_id: mailbox.mailboxId,
        subject: "Plans",
        message_count: 2,
        unread_count: 1,
        has_attachments: false,
        labels: ["inbound", "unread", "urgent"],
        senders: ["bob@example.com"]
      })
      expect(thread.emails.map((e) => [e.email_id, e.reply_text])).toEqual([[first.id, "Dinner at eight?"], [reply.id, "Sounds good."]])
      const listed = yield* emails.threads(owner.userId, mailbox.mailboxId, firstPage, lastActive)
      const { latest: _latest, ...entry } = listed.threads.find((t) => t.thread_id === threadId)!
      const { emails: _emails, ...whole } = thread
      expect(whole).toEqual(entry)

      expect(yield* Effect.flip(emails.thread(stranger.userId, threadId))).toMatchObject({ ...notFound, details: { thread_id: threadId } })
      expect(yield* Effect.flip(emails.thread(owner.userId, "thr_missing"))).toMatchObject(notFound)
      yield* deleteMailbox(mailbox)
      expect(yield* Effect.flip(emails.thread(owner.userId, threadId))).toMatchObject(notFound)
    }))

  it.effect("a mailbox's threads: the most recently active first, each with its first subject, counts, labels, senders and newest email", () =>
    Effect.gen(function*() {
      const emails = yield* Emails
      const owner = yield* insertUser()
      const mailbox = yield* insertMailbox(owner)
      const plans = uniqueName("thr")
      const question = yield* insertEmail(mailbox, { subject: "Plans", receivedMinutesAgo: 50, threadId: plans, from: "ann@example.com", labels: ["inbound"] })
      yield* insertEmail(mailbox, { subject: "Re: Plans", receivedMinutesAgo: 40, threadId: plans, from: "bob@example.com", labels: ["inbound", "unread", "urgent"] })
      const latest = yield* insertEmail(mailbox, {
        subject: "Re: Plans",
        receivedMinutesAgo: 10,
        threadId: plans,
        // Ann again, in capitals: one sender, as she first wrote.
        from: "ANN@Example.com",
        text: "See you then.",
        attachments: [{ filename: "map.pdf", contentType: "application/pdf", bytes: new Uint8Array([1, 2, 3]) }]
      })
      const lone = yield* insertEmail(mailbox, { subject: "Invoice", receivedMinutesAgo: 30, labels: ["inbound"] })

      const listed = yield* emails.threads(owner.userId, mailbox.mailboxId, firstPage, lastActive)
      expect(listed.total).toBe(2)
      expect(listed.threads).toEqual([
        {
          thread_id: plans,
          mailbox_id: mailbox.mailboxId,
          subject: "Plans",
          message_count: 3,
          unread_count: 2,
          has_attachments: true,
          labels: ["inbound", "unread", "urgent"],
          senders: ["ann@example.com", "bob@example.com"],
          first_received_at: expect.any(String),
          last_received_at: expect.any(String),
          latest: expect.objectContaining({ email_id: latest.id, subject: "Re: Plans", snippet: "See you then.", has_attachments: true })
        },
        expect.objectContaining({ thread_id: `thr_${lone.id}`, subject: "Invoice", message_count: 1, unread_count: 0, senders: ["sender@example.com"] })
      ])
      const [first] = listed.threads
      const whole = yield* emails.thread(owner.userId, plans)
      expect(whole.emails[0]!.email_id).toBe(question.id)
      expect(first!.first_received_at).toBe(whole.emails[0]!.received_at)
      expect(first!.last_received_at).toBe(whole.emails[2]!.received_at)
      // The list's newest email is the summary the whole thread gives it (less its new text).
      const { reply_text: _text, ...newest } = whole.emails[2]!
      expect(first!.latest).toEqual(newest)
    }))

  it.effect("threads sort by last or first activity, page with the whole count, and filter over all of a thread's emails", () =>
    Effect.gen(function*() {
      const emails = yield* Emails
      const owner = yield* insertUser()
      const mailbox = yield* insertMailbox(owner)
      const thread = (name: string, ...emailsOf: ReadonlyArray<{ readonly ago: number; readonly labels: ReadonlyArray<string>; readonly from?: string }>) =>
        Effect.gen(function*() {
          const threadId = uniqueName(`thr_${name}`)
          for (const email of emailsOf) {
            yield* insertEmail(mailbox, { subject: name, receivedMinutesAgo: email.ago, threadId, labels: email.labels, ...(email.from ? { from: email.from } : {}) })
          }
          return threadId
        })
      // started first, active last: unread only in its older email; one email labelled spam
      const long = yield* thread("long", { ago: 90, labels: ["inbound", "unread"] }, { ago: 5, labels: ["inbound", "spam"], from: "Bob@Example.org" })
      const middle = yield* thread("middle", { ago: 60, labels: ["inbound"] }, { ago: 20, labels: ["inbound", "sent"] })
      const recent = yield* thread("recent", { ago: 30, labels: ["inbound", "unread", "work"] })
      const names = (
        page: { limit: number; offset: number },
        sort: { field: "last_received_at" | "first_received_at"; direction: "asc" | "desc" },
        filter: Parameters<typeof emails.threads>[4] = {}
      ) => emails.threads(owner.userId, mailbox.mailboxId, page, sort, filter).pipe(Effect.map((r) => [r.threads.map((t) => t.thread_id), r.total]))

      expect(yield* names(firstPage, lastActive)).toEqual([[long, middle, recent], 3])
      expect(yield* names(firstPage, { field: "last_received_at", direction: "asc" })).toEqual([[recent, middle, long], 3])
      expect(yield* names(firstPage, { field: "first_received_at", direction: "desc" })).toEqual([[recent, middle, long], 3])
      expect(yield* names({ limit: 2, offset: 1 }, lastActive)).toEqual([[middle, recent], 3])
      expect(yield* names({ limit: 2, offset: 3 }, lastActive)).toEqual([[], 3])
      // Some email of the thread carries the label; each listed label, not necessarily on one email.
      expect(yield* names(firstPage, lastActive, { unread: true })).toEqual([[long, recent], 2])
      expect(yield* names(firstPage, lastActive, { unread: false })).toEqual([[middle], 1])
      expect(yield* names(firstPage, lastActive, { labels: ["sent"] })).toEqual([[middle], 1])
      expect(yield* names(firstPage, lastActive, { labels: ["unread", "spam"] })).toEqual([[long], 1])
      expect(yield* names(firstPage, lastActive, { labels: ["work", "spam"] })).toEqual([[], 0])
      // None of its emails carries any of them.
      expect(yield* names(firstPage, lastActive, { excludeLabels: ["spam"] })).toEqual([[middle, recent], 2])
      expect(yield* names(firstPage, lastActive, { excludeLabels: ["spam", "work"], unread: false })).toEqual([[middle], 1])
      // Some email of the thread is from the sender (as an email list's from=).
      expect(yield* names(firstPage, lastActive, { from: parseEntry("bob@example.org") as Entry })).toEqual([[long], 1])
      expect(yield* names(firstPage, lastActive, { from: parseEntry("example.org") as Entry, unread: false })).toEqual([[], 0])
      // Some email of the thread arrived within the span: long's first (90 minutes ago), recent's one (30).
      const minutesAgo = (minutes: number) => new Date(Date.now() - minutes * 60_000)
      expect(yield* names(firstPage, lastActive, { received: { before: minutesAgo(70) } })).toEqual([[long], 1])
      expect(yield* names(firstPage, lastActive, { received: { after: minutesAgo(50), before: minutesAgo(25) } })).toEqual([[recent], 1])
      expect(yield* names(firstPage, lastActive, { received: { after: minutesAgo(10) } })).toEqual([[long], 1])
      const empty = yield* Effect.flip(emails.threads(owner.userId, mailbox.mailboxId, firstPage, lastActive, { received: { after: minutesAgo(10), before: minutesAgo(20) } }))
      expect([empty._tag, (empty as ValidationError).details]).toEqual(["ValidationError", { received_before: "must be later than received_after" }])
    }))

  it.effect("a thread filter many emails meet keeps the threads one few emails meet would: both ways of finding them, and the two together", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const emails = yield* Emails
      const owner = yield* insertUser()
      const mailbox = yield* insertMailbox(owner)
      // 1,200 emails of a newsletter, three to each of 400 threads: more than are found first (1,000).
      const bulk = yield* insertEmail(mailbox, { subject: "Issue", receivedMinutesAgo: 1, from: "news@bulk.example" })
      yield* sql`
        INSERT INTO emails (id, mailbox_id, user_id, message_id, thread_id, subject, from_address, to_addresses, sent_at,
                            received_at, mail_from, rcpt_to, headers, text_body, has_attachments, raw_sha256, size, labels)
        SELECT ${mailbox.mailboxId} || '_' || g, mailbox_id, user_id, '<' || g || '@bulk>', 'thr_bulk_' || ${mailbox.mailboxId} || '_' || (g % 400),
               subject, from_address, to_addresses, sent_at, received_at - g * interval '1 minute', mail_from, rcpt_to, headers, text_body,
               has_attachments, raw_sha256, size, ARRAY['inbound']
        FROM emails, generate_series(1, 1199) g WHERE id = ${bulk.id}`
      yield* sql`ANALYZE emails`
      // Two threads where one of the newsletter's readers answered, one of them starred by hand.
      const answered = "thr_bulk_" + mailbox.mailboxId + "_7"
      yield* insertEmail(mailbox, { subject: "Re: Issue", receivedMinutesAgo: 2, threadId: answered, from: "ann@reader.example", labels: ["inbound"] })
      const starred = "thr_bulk_" + mailbox.mailboxId + "_8"
      yield* insertEmail(mailbox, { subject: "Re: Issue", receivedMinutesAgo: 3, threadId: starred, from: "ann@reader.example", labels: ["inbound", "starred"] })
      const lone = yield* insertEmail(mailbox, { subject: "Hello", receivedMinutesAgo: 4, from: "ann@reader.example", labels: ["inbound"] })
      const found = (filter: Parameters<typeof emails.threads>[4]) =>
        emails.threads(owner.userId, mailbox.mailboxId, { limit: 100, offset: 0 }, lastActive, filter).pipe(
          Effect.map((r) => ({ total: r.total, threads: new Set(r.threads.map((t) => t.thread_id)) }))
        )
      const bulkFrom = parseEntry("bulk.example") as Entry
      const readerFrom = parseEntry("ann@reader.example") as Entry
      // Many: all the newsletter's threads, by grouping the mailbox.
      expect((yield* found({ from: bulkFrom })).total).toBe(401)
      // Few: the reader's three threads, found first.
      expect(yield* found({ from: readerFrom })).toEqual({ total: 3, threads: new Set([answered, starred, `thr_${lone.id}`]) })
      // Together, on different emails of a thread: the reader's answers to the newsletter only.
      expect(yield* found({ from: bulkFrom, labels: ["starred"] })).toEqual({ total: 1, threads: new Set([starred]) })
      expect((yield* found({ labels: ["inbound"] })).total).toBe(402)
      expect(yield* found({ labels: ["inbound", "starred"], from: readerFrom })).toEqual({ total: 1, threads: new Set([starred]) })
    }))

  it.effect("every mailbox's threads in one list, not another account's nor a deleted mailbox's; another user's mailbox is 404", () =>
    Effect.gen(function*() {
      const emails = yield* Emails
      const owner = yield* insertUser()
      const stranger = yield* insertUser()
      const [work, home, gone] = [yield* insertMailbox(owner), yield* insertMailbox(owner), yield* insertMailbox(owner)]
      const atWork = yield* insertEmail(work, { subject: "Standup", receivedMinutesAgo: 30 })
      const atHome = yield* insertEmail(home, { subject: "Dinner", receivedMinutesAgo: 10 })
      yield* insertEmail(gone, { subject: "Old", receivedMinutesAgo: 5 })
      yield* insertEmail(yield* insertMailbox(stranger), { subject: "Theirs", receivedMinutesAgo: 1 })
      yield* deleteMailbox(gone)

      const all = yield* emails.threadsAll(owner.userId, firstPage, lastActive)
      expect(all.threads.map((t) => [t.thread_id, t.mailbox_id])).toEqual([[`thr_${atHome.id}`, home.mailboxId], [`thr_${atWork.id}`, work.mailboxId]])
      expect(all.total).toBe(2)

      expect(yield* Effect.flip(emails.threads(stranger.userId, work.mailboxId, firstPage, lastActive)))
        .toMatchObject({ ...notFound, details: { mailbox_id: work.mailboxId } })
      expect(yield* Effect.flip(emails.threads(owner.userId, gone.mailboxId, firstPage, lastActive))).toMatchObject(notFound)
      expect(yield* emails.threads(owner.userId, (yield* insertMailbox(owner)).mailboxId, firstPage, lastActive)).toEqual({ threads: [], total: 0 })
    }))
})
