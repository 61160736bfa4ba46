/**
 * IMAP's numbering of a mailbox's folders in process, over the suite's migrated database (PGlite, or
 * PostgreSQL with DATABASE_URL): which mail each folder shows, UIDs that only grow and are shared by
 * every session, mail that leaves a folder and comes back under a new UID, two sessions numbering at
 * once, the flags kept for IMAP and the mail the mailbox answered, and SEARCH's keys as conditions.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { flagsOf, type Folder, folderNamed, foldersOf, impliedParents, systemFolders } from "../../services/imap/folders.ts"
import { FolderViews } from "../../services/imap/views.ts"
import { testDatabase } from "../support/database.ts"
import { insertEmail, insertMailbox } from "../support/seed-mail.ts"
import { insertUser } from "../support/users.ts"

const services = FolderViews.Default.pipe(Layer.provideMerge(testDatabase))

const [inbox, sent, junk, trash] = systemFolders as [Folder, Folder, Folder, Folder]
const label = (name: string) => foldersOf([name]).find((folder) => folder.label === name)!

const setLabels = (id: string, labels: ReadonlyArray<string>) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => sql`UPDATE emails SET labels = ${[...labels]}::text[] WHERE id = ${id}`)

layer(services, { timeout: "120 seconds" })("IMAP folder views", (it) => {
  it.effect("INBOX, Sent, Junk and label folders show the mail they should, numbered in arrival order", () =>
    Effect.gen(function*() {
      const views = yield* FolderViews
      const sql = yield* SqlClient.SqlClient
      const mailbox = yield* insertMailbox(yield* insertUser())
      const first = yield* insertEmail(mailbox, { subject: "First", receivedMinutesAgo: 30 })
      const second = yield* insertEmail(mailbox, { subject: "Second", receivedMinutesAgo: 20, labels: ["inbound", "Clients/Acme"] })
      const spam = yield* insertEmail(mailbox, { subject: "Spam", receivedMinutesAgo: 10, labels: ["inbound", "unread", "spam"] })
      const outbound = yield* insertEmail(mailbox, { subject: "Sent", receivedMinutesAgo: 5, labels: ["sent"] })
      yield* sql`UPDATE emails SET direction = 'outbound' WHERE id = ${outbound.id}`

      const state = yield* views.sync(mailbox.mailboxId, inbox)
      expect(state.messages.map((m) => [m.uid, m.emailId])).toEqual([[1, first.id], [2, second.id]])
      expect(state.uidNext).toBe(3)
      expect(state.uidValidity).toBeGreaterThan(0)
      expect((yield* views.sync(mailbox.mailboxId, sent)).messages.map((m) => m.emailId)).toEqual([outbound.id])
      expect((yield* views.sync(mailbox.mailboxId, junk)).messages.map((m) => m.emailId)).toEqual([spam.id])
      expect((yield* views.sync(mailbox.mailboxId, label("Clients/Acme"))).messages.map((m) => m.emailId)).toEqual([second.id])
      expect((yield* views.sync(mailbox.mailboxId, trash)).messages).toEqual([])
      expect((yield* views.folders(mailbox.mailboxId)).map((folder) => folder.name)).toEqual(["INBOX", "Sent", "Junk", "Trash", "Clients/Acme"])

      // Looked at again: the same numbers, the same UIDVALIDITY.
      const again = yield* views.sync(mailbox.mailboxId, inbox)
      expect(again.messages.map((m) => m.uid)).toEqual([1, 2])
      expect(again.uidValidity).toBe(state.uidValidity)
    }))

  it.effect("a label stored with an empty level (/lead, trail/, a//b) is no folder: no empty-named parent, nothing to open", () =>
    Effect.gen(function*() {
      const views = yield* FolderViews
      const mailbox = yield* insertMailbox(yield* insertUser())
      yield* insertEmail(mailbox, { subject: "Odd labels", receivedMinutesAgo: 1, labels: ["inbound", "/lead", "trail/", "a//b", "Sent/", "a/b"] })
      const folders = yield* views.folders(mailbox.mailboxId)
      expect(folders.map((folder) => folder.name)).toEqual(["INBOX", "Sent", "Junk", "Trash", "a/b"])
      expect(impliedParents(folders)).toEqual(["a"])
      for (const name of ["/lead", "trail/", "a//b", "a/", "", "Labels/Sent/"]) expect(folderNamed(name)).toBeUndefined()
      expect(folderNamed("a/b")?.label).toBe("a/b")
      // The mail is still where it is received.
      expect((yield* views.sync(mailbox.mailboxId, inbox)).messages).toHaveLength(1)
    }))

  it.effect("mail that leaves a folder loses its UID; coming back, and new mail, get UIDs above every one given", () =>
    Effect.gen(function*() {
      const views = yield* FolderViews
      const mailbox = yield* insertMailbox(yield* insertUser())
      const a = yield* insertEmail(mailbox, { subject: "A", receivedMinutesAgo: 30 })
      const b = yield* insertEmail(mailbox, { subject: "B", receivedMinutesAgo: 20 })
      expect((yield* views.sync(mailbox.mailboxId, inbox)).messages.map((m) => m.uid)).toEqual([1, 2])

      yield* setLabels(a.id, ["inbound", "spam"])
      const moved = yield* views.sync(mailbox.mailboxId, inbox)
      expect(moved.messages.map((m) => [m.uid, m.emailId])).toEqual([[2, b.id]])

      yield* setLabels(a.id, ["inbound"])
      const c = yield* insertEmail(mailbox, { subject: "C", receivedMinutesAgo: 1 })
      const back = yield* views.sync(mailbox.mailboxId, inbox)
      // A came back before C arrived; both are new to the folder, numbered in arrival order (A arrived first).
      expect(back.messages.map((m) => [m.uid, m.emailId])).toEqual([[2, b.id], [3, a.id], [4, c.id]])
      expect(back.uidNext).toBe(5)
    }))

  it.effect("STATUS counts a folder as its numbering shows it: new mail numbered, unseen and sizes from the emails", () =>
    Effect.gen(function*() {
      const views = yield* FolderViews
      const sql = yield* SqlClient.SqlClient
      const mailbox = yield* insertMailbox(yield* insertUser())
      const read = yield* insertEmail(mailbox, { subject: "Read", receivedMinutesAgo: 30, labels: ["inbound"] })
      yield* insertEmail(mailbox, { subject: "Unread", receivedMinutesAgo: 20, labels: ["inbound", "unread"] })
      const outbound = yield* insertEmail(mailbox, { subject: "Sent", receivedMinutesAgo: 10, labels: ["sent", "unread"] })
      yield* sql`UPDATE emails SET direction = 'outbound' WHERE id = ${outbound.id}`

      const before = yield* views.status(mailbox.mailboxId, inbox)
      const state = yield* views.sync(mailbox.mailboxId, inbox)
      expect(before).toEqual({
        uidValidity: state.uidValidity,
        uidNext: 3,
        messages: 2,
        unseen: state.messages.filter((m) => !flagsOf(m).includes("\\Seen")).length,
        size: state.messages.reduce((sum, m) => sum + m.size, 0)
      })
      expect(before.unseen).toBe(1)
      // Sent mail is seen, whatever its labels say.
      expect(yield* views.status(mailbox.mailboxId, sent)).toMatchObject({ messages: 1, unseen: 0, uidNext: 2 })

      // Mail arriving after is numbered by STATUS itself: the UID it announced is the one a session gets.
      const late = yield* insertEmail(mailbox, { subject: "Late", receivedMinutesAgo: 1, labels: ["inbound", "unread"] })
      expect(yield* views.status(mailbox.mailboxId, inbox)).toMatchObject({ messages: 3, unseen: 2, uidNext: 4 })
      expect((yield* views.sync(mailbox.mailboxId, inbox)).messages.find((m) => m.emailId === late.id)?.uid).toBe(3)

      // Numbered already: counted as the mail is now (read since), nothing numbered anew.
      yield* setLabels(late.id, ["inbound"])
      expect(yield* views.status(mailbox.mailboxId, inbox)).toMatchObject({ messages: 3, unseen: 1, uidNext: 4 })
      // One email gone (to Junk) and one new: as many as numbered, but not the same ones: the new one numbered.
      yield* setLabels(read.id, ["inbound", "spam"])
      const swapped = yield* insertEmail(mailbox, { subject: "Swapped in", receivedMinutesAgo: 0, labels: ["inbound", "unread"] })
      expect(yield* views.status(mailbox.mailboxId, inbox)).toMatchObject({ messages: 3, unseen: 2, uidNext: 5 })
      expect((yield* views.sync(mailbox.mailboxId, inbox)).messages.map((m) => m.uid)).toEqual([2, 3, 4])
      expect((yield* views.sync(mailbox.mailboxId, inbox)).messages.at(-1)?.emailId).toBe(swapped.id)
    }))

  it.effect("a folder's version stays while nothing a session sees of it changes, and moves with each thing that does", () =>
    Effect.gen(function*() {
      const views = yield* FolderViews
      const sql = yield* SqlClient.SqlClient
      const mailbox = yield* insertMailbox(yield* insertUser())
      const question = yield* insertEmail(mailbox, { subject: "Question", receivedMinutesAgo: 30, labels: ["inbound", "unread"] })
      yield* insertEmail(yield* insertMailbox(yield* insertUser()), { subject: "Another mailbox's", receivedMinutesAgo: 1 })
      const looked = yield* views.sync(mailbox.mailboxId, inbox)
      const version = () => views.version(mailbox.mailboxId, inbox)
      // Each change: the version moves, and a session reading the folder again has the new one.
      const moves = (change: Effect.Effect<unknown, unknown, SqlClient.SqlClient>) =>
        Effect.gen(function*() {
          const before = yield* version()
          yield* change
          const after = yield* version()
          expect(after).not.toBe(before)
          expect((yield* views.sync(mailbox.mailboxId, inbox)).version).toBe(yield* version())
        })

      expect(yield* version()).toBe(looked.version)
      // Another mailbox's mail, and mail in Sent answering nothing, are not this folder's.
      yield* insertEmail(yield* insertMailbox(yield* insertUser()), { subject: "Elsewhere", receivedMinutesAgo: 1 })
      const note = yield* insertEmail(mailbox, { subject: "Note", receivedMinutesAgo: 2, labels: ["sent"] })
      yield* sql`UPDATE emails SET direction = 'outbound' WHERE id = ${note.id}`
      expect(yield* version()).toBe(looked.version)

      // New mail; read (a label); a kept flag; a reply sent (\Answered); deleted.
      yield* moves(insertEmail(mailbox, { subject: "New", receivedMinutesAgo: 1 }))
      yield* moves(setLabels(question.id, ["inbound"]))
      yield* moves(views.keepFlags(mailbox.mailboxId, [question.id], { add: ["$Work"], remove: [], replace: false }))
      yield* moves(sql`UPDATE emails SET headers = headers || ${JSON.stringify({ "in-reply-to": `<${question.id}@test>` })}::jsonb WHERE id = ${note.id}`)
      yield* moves(sql`DELETE FROM emails WHERE id = ${question.id}`)
      // Left and back between two looks of this session: the same mail, but renumbered by another's look.
      const [kept] = (yield* views.sync(mailbox.mailboxId, inbox)).messages
      yield* moves(Effect.gen(function*() {
        yield* setLabels(kept!.emailId, ["inbound", "spam"])
        yield* views.sync(mailbox.mailboxId, inbox)
        yield* setLabels(kept!.emailId, ["inbound"])
      }))
      // A label's folder: the mail labelled, then the label changed to one differently quoted.
      const folder = label("Odd label")
      yield* setLabels(kept!.emailId, ["inbound", "Odd label"])
      const labelled = yield* views.sync(mailbox.mailboxId, folder)
      expect(labelled.messages.map((m) => m.emailId)).toEqual([kept!.emailId])
      yield* setLabels(kept!.emailId, ["inbound", "Odd label", "unread"])
      expect(yield* views.version(mailbox.mailboxId, folder)).not.toBe(labelled.version)
    }))

  it.effect("two sessions numbering a folder at once give every email one UID", () =>
    Effect.gen(function*() {
      const views = yield* FolderViews
      const mailbox = yield* insertMailbox(yield* insertUser())
      yield* Effect.forEach([1, 2, 3, 4, 5], (n) => insertEmail(mailbox, { subject: `M${n}`, receivedMinutesAgo: 10 - n }), { discard: true })
      const [one, two] = yield* Effect.all([views.sync(mailbox.mailboxId, inbox), views.sync(mailbox.mailboxId, inbox)], { concurrency: 2 })
      expect(one.messages.map((m) => [m.uid, m.emailId])).toEqual(two.messages.map((m) => [m.uid, m.emailId]))
      expect(one.messages.map((m) => m.uid)).toEqual([1, 2, 3, 4, 5])
    }))

  it.effect("SEARCH keys: flags, words in headers and body, dates, sizes, UIDs, NOT and OR", () =>
    Effect.gen(function*() {
      const views = yield* FolderViews
      const sql = yield* SqlClient.SqlClient
      const mailbox = yield* insertMailbox(yield* insertUser())
      yield* insertEmail(mailbox, {
        subject: "Invoice 42",
        receivedMinutesAgo: 3 * 24 * 60,
        text: "Amount due: 120 EUR (50% now)",
        from: "billing@vendor.test",
        headers: { from: "Billing <billing@vendor.test>", "x-ticket": "T-7" }
      })
      const alert = yield* insertEmail(mailbox, { subject: "Disk alert", receivedMinutesAgo: 5, text: "The volume is full", labels: ["inbound", "flagged"] })
      yield* views.sync(mailbox.mailboxId, inbox)
      const search = (key: Parameters<typeof views.search>[2]) => views.search(mailbox.mailboxId, inbox, key)
      // The day the recent mail was stored on, as the database's clock had it (just after midnight UTC,
      // five minutes ago is yesterday).
      const [stored] = yield* sql<{ day: string }>`SELECT to_char(received_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day FROM emails WHERE id = ${alert.id}`
      const today = new Date(stored!.day)

      expect(yield* search({ kind: "all" })).toEqual([1, 2])
      expect(yield* search({ kind: "flag", flag: "seen", set: false })).toEqual([1])
      expect(yield* search({ kind: "flag", flag: "seen", set: true })).toEqual([2])
      expect(yield* search({ kind: "flag", flag: "flagged", set: true })).toEqual([2])
      expect(yield* search({ kind: "text", field: "from", value: "VENDOR" })).toEqual([1])
      expect(yield* search({ kind: "text", field: "subject", value: "alert" })).toEqual([2])
      // LIKE's wildcards in the words are matched as themselves.
      expect(yield* search({ kind: "text", field: "body", value: "50% now" })).toEqual([1])
      expect(yield* search({ kind: "text", field: "body", value: "5_%" })).toEqual([])
      expect(yield* search({ kind: "text", field: "text", value: "T-7" })).toEqual([1])
      expect(yield* search({ kind: "header", name: "X-Ticket", value: "" })).toEqual([1])
      expect(yield* search({ kind: "header", name: "X-Ticket", value: "t-7" })).toEqual([1])
      expect(yield* search({ kind: "date", field: "internal", op: "since", day: today })).toEqual([2])
      expect(yield* search({ kind: "date", field: "internal", op: "before", day: today })).toEqual([1])
      expect(yield* search({ kind: "size", op: "larger", bytes: 1_000_000 })).toEqual([])
      expect(yield* search({ kind: "uids", ranges: [[2, 9]] })).toEqual([2])
      expect(yield* search({ kind: "not", key: { kind: "uids", ranges: [[2, 2]] } })).toEqual([1])
      expect(yield* search({
        kind: "or",
        left: { kind: "text", field: "subject", value: "invoice" },
        right: { kind: "flag", flag: "flagged", set: true }
      })).toEqual([1, 2])
      expect(yield* search({ kind: "and", keys: [{ kind: "all" }, { kind: "none" }] })).toEqual([])
    }))

  it.effect("SEARCH BCC in Sent finds the recipients To and Cc do not name (sent mail carries no Bcc field)", () =>
    Effect.gen(function*() {
      const views = yield* FolderViews
      const sql = yield* SqlClient.SqlClient
      const mailbox = yield* insertMailbox(yield* insertUser())
      const note = yield* insertEmail(mailbox, {
        subject: "Board notes",
        receivedMinutesAgo: 5,
        labels: ["sent"],
        headers: { to: "Ann <ann@partner.test>", cc: "bob@partner.test" }
      })
      yield* sql`UPDATE emails SET direction = 'outbound' WHERE id = ${note.id}`
      for (const recipient of ["ann@partner.test", "bob@partner.test", "auditor@watch.test"]) {
        yield* sql`INSERT INTO outbound_deliveries (email_id, recipient, domain, status) VALUES (${note.id}, ${recipient}, ${recipient.split("@")[1]!}, 'sent')`
      }
      yield* views.sync(mailbox.mailboxId, sent)
      const bcc = (value: string) => views.search(mailbox.mailboxId, sent, { kind: "text", field: "bcc", value })
      expect(yield* bcc("AUDITOR")).toEqual([1])
      expect(yield* bcc("watch.test")).toEqual([1])
      expect(yield* bcc("ann@")).toEqual([])
      expect(yield* bcc("bob")).toEqual([])
    }))

  it.effect("SEARCH BCC in Sent finds a blind recipient whose address is part of one To names (bob@ in jimbob@)", () =>
    Effect.gen(function*() {
      const views = yield* FolderViews
      const sql = yield* SqlClient.SqlClient
      const mailbox = yield* insertMailbox(yield* insertUser())
      const note = yield* insertEmail(mailbox, {
        subject: "Offer",
        receivedMinutesAgo: 5,
        labels: ["sent"],
        headers: { to: "Jim <jimbob@partner.test>" }
      })
      yield* sql`UPDATE emails SET direction = 'outbound' WHERE id = ${note.id}`
      for (const recipient of ["jimbob@partner.test", "bob@partner.test"]) {
        yield* sql`INSERT INTO outbound_deliveries (email_id, recipient, domain, status) VALUES (${note.id}, ${recipient}, 'partner.test', 'sent')`
      }
      yield* views.sync(mailbox.mailboxId, sent)
      const bcc = (value: string) => views.search(mailbox.mailboxId, sent, { kind: "text", field: "bcc", value })
      expect(yield* bcc("bob@partner.test")).toEqual([1])
      expect(yield* bcc("jim")).toEqual([])
    }))

  it.effect("flags no label holds are the email's in every folder, changed where kept; mail the mailbox replied to is answered", () =>
    Effect.gen(function*() {
      const views = yield* FolderViews
      const sql = yield* SqlClient.SqlClient
      const mailbox = yield* insertMailbox(yield* insertUser())
      const question = yield* insertEmail(mailbox, { subject: "Question", receivedMinutesAgo: 30, labels: ["inbound", "Clients"] })
      const offer = yield* insertEmail(mailbox, { subject: "Offer", receivedMinutesAgo: 20, labels: ["inbound"] })
      const other = yield* insertEmail(mailbox, { subject: "Other", receivedMinutesAgo: 10, labels: ["inbound", "unread"] })
      // Sent mail: a reply to the question (In-Reply-To) and a forward of the offer (References only).
      const reply = yield* insertEmail(mailbox, {
        subject: "Re: Question",
        receivedMinutesAgo: 5,
        labels: ["sent"],
        headers: { "in-reply-to": `<${question.id}@test>`, references: `<${question.id}@test>` }
      })
      const forward = yield* insertEmail(mailbox, { subject: "Fwd: Offer", receivedMinutesAgo: 4, labels: ["sent"], headers: { references: `<${offer.id}@test>` } })
      yield* sql`UPDATE emails SET direction = 'outbound' WHERE id IN (${reply.id}, ${forward.id})`
      yield* sql`UPDATE emails SET referenced = ARRAY[${`<${question.id}@test>`}] WHERE id = ${reply.id}`
      yield* sql`UPDATE emails SET referenced = ARRAY[${`<${offer.id}@test>`}] WHERE id = ${forward.id}`
      const flags = (state: { messages: ReadonlyArray<Parameters<typeof flagsOf>[0] & { emailId: string }> }) =>
        Object.fromEntries(state.messages.map((m) => [m.emailId, flagsOf(m)]))

      expect(flags(yield* views.sync(mailbox.mailboxId, inbox))).toEqual({
        [question.id]: ["\\Seen", "\\Answered"],
        [offer.id]: ["\\Seen", "$Forwarded"],
        [other.id]: []
      })
      // The sent reply is not itself answered.
      expect(flags(yield* views.sync(mailbox.mailboxId, sent))).toEqual({ [reply.id]: ["\\Seen"], [forward.id]: ["\\Seen"] })

      // Added: every email named, kept flags in one order; an email of another mailbox is not touched.
      const stranger = yield* insertEmail(yield* insertMailbox(yield* insertUser()), { subject: "Not yours", receivedMinutesAgo: 1 })
      const added = yield* views.keepFlags(mailbox.mailboxId, [offer.id, question.id, stranger.id], { add: ["\\Draft", "\\Deleted"], remove: [], replace: false })
      expect(Object.fromEntries(added)).toEqual({ [offer.id]: ["\\Deleted", "\\Draft"], [question.id]: ["\\Deleted", "\\Draft"] })
      expect(yield* views.carrying(mailbox.mailboxId, "\\Deleted")).toEqual(new Set([offer.id, question.id]))
      // The same email in a label's folder carries them too.
      expect(flags(yield* views.sync(mailbox.mailboxId, label("Clients")))).toEqual({ [question.id]: ["\\Seen", "\\Answered", "\\Deleted", "\\Draft"] })

      // Taken away: only where kept; a kept \\Answered goes, a reply's stays.
      yield* views.keepFlags(mailbox.mailboxId, [question.id], { add: ["\\Answered"], remove: [], replace: false })
      const removed = yield* views.keepFlags(mailbox.mailboxId, [offer.id, question.id, other.id], { add: [], remove: ["\\Deleted", "\\Answered"], replace: false })
      expect(Object.fromEntries(removed)).toEqual({ [offer.id]: ["\\Draft"], [question.id]: ["\\Draft"] })
      expect(flags(yield* views.sync(mailbox.mailboxId, inbox))).toEqual({
        [question.id]: ["\\Seen", "\\Answered", "\\Draft"],
        [offer.id]: ["\\Seen", "\\Draft", "$Forwarded"],
        [other.id]: []
      })
      expect(yield* views.carrying(mailbox.mailboxId, "\\Deleted")).toEqual(new Set())

      // Keywords: kept as first written, the same in any case; replaced, nothing else is kept.
      yield* views.keepFlags(mailbox.mailboxId, [offer.id], { add: ["NonJunk", "$label1"], remove: [], replace: false })
      yield* views.keepFlags(mailbox.mailboxId, [offer.id], { add: ["nonjunk", "$Forwarded"], remove: ["$LABEL1"], replace: false })
      expect(flags(yield* views.sync(mailbox.mailboxId, inbox))[offer.id]).toEqual(["\\Seen", "\\Draft", "NonJunk", "$Forwarded"])
      const replaced = yield* views.keepFlags(mailbox.mailboxId, [offer.id, question.id], { add: ["Work"], remove: [], replace: true })
      expect(Object.fromEntries(replaced)).toEqual({ [offer.id]: ["Work"], [question.id]: ["Work"] })
      // Replaced by none: nothing kept where anything was, and nothing written where nothing was.
      expect(Object.fromEntries(yield* views.keepFlags(mailbox.mailboxId, [offer.id, other.id], { add: [], remove: [], replace: true })))
        .toEqual({ [offer.id]: [] })

      // Two sessions adding at once: both flags kept.
      yield* Effect.all([
        views.keepFlags(mailbox.mailboxId, [other.id], { add: ["\\Answered"], remove: [], replace: false }),
        views.keepFlags(mailbox.mailboxId, [other.id], { add: ["\\Deleted"], remove: [], replace: false })
      ], { concurrency: 2 })
      expect(flags(yield* views.sync(mailbox.mailboxId, inbox))[other.id]).toEqual(["\\Answered", "\\Deleted"])

      // The email deleted: its flags go with it.
      yield* sql`DELETE FROM emails WHERE id = ${other.id}`
      expect(yield* sql`SELECT 1 FROM imap_flags WHERE email_id = ${other.id}`).toEqual([])
    }))
})
