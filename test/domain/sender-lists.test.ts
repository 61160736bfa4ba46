/**
 * Allow and block lists in process, over the suite's migrated database (issue 20, item 3): what an
 * entry is (address, domain, `*.domain`, case, normalisation), whom it names, how the account's and
 * a mailbox's lists combine at RCPT (through the SMTP node's own recipient lookup, Inbound.recipient),
 * the null sender, the cap, 404 across accounts, and the header From check of ingest.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as Mailauth from "../../layers/mailauth.ts"
import * as MemoryBus from "../../layers/memory-bus.ts"
import { DependencyHealth } from "../../services/health/dependency-health.ts"
import { Inbound } from "../../services/mail/inbound.ts"
import { Ingest } from "../../services/mail/ingest.ts"
import { emailReceivedEventId } from "../../services/mail/received.ts"
import { Labels } from "../../services/mail/labels.ts"
import { BLOCKED, MAX_ENTRIES_PER_LIST, parseEntry, senderForms } from "../../services/mail/sender-list-rules.ts"
import { RecipientDirectory } from "../../services/mail/directory.ts"
import { SenderLists } from "../../services/mail/sender-lists.ts"
import { MailboxSettings } from "../../services/mailboxes/mailboxes.ts"
import { BounceReports } from "../../services/outbound/bounces.ts"
import { testDatabase } from "../support/database.ts"
import { DOMAIN, inboundMessage, insertMailbox, type Mailbox } from "../support/seed-mail.ts"
import { uniqueName } from "../support/services.ts"
import { insertUser } from "../support/users.ts"

const services = Layer.mergeAll(SenderLists.Default, Inbound.Default, Ingest.Default, Labels.Default).pipe(
  Layer.provide(BounceReports.Default),
  // Its messages carry no connection: nothing asks the checks.
  Layer.provide(Mailauth.none),
  Layer.provideMerge(RecipientDirectory.Default),
  Layer.provide(Layer.succeed(MailboxSettings, { sharedDomains: [DOMAIN], disallowedNames: [] })),
  Layer.provideMerge(MemoryBus.layer),
  Layer.provideMerge(DependencyHealth.Default),
  Layer.provideMerge(testDatabase)
)

const page = { limit: 100, offset: 0 }

/** How RCPT answers `sender` for `mailbox`: accepted, or the refusal's tag. */
const rcpt = (mailbox: Mailbox, sender: string) =>
  Effect.flatMap(Inbound, (inbound) =>
    inbound.recipient(mailbox.address.toUpperCase(), undefined, sender).pipe(
      Effect.match({ onSuccess: () => "accepted", onFailure: (refusal) => refusal._tag })
    ))

const account = (mailbox: Mailbox) => ({ userId: mailbox.owner.userId, mailboxId: null })
const ofMailbox = (mailbox: Mailbox) => ({ userId: mailbox.owner.userId, mailboxId: mailbox.mailboxId })

layer(services, { timeout: "120 seconds" })("Sender lists", (it) => {
  it("entries: an address, a domain or *.domain, normalised to lower case and ASCII", () => {
    expect(parseEntry("  Ada@Example.COM ")).toEqual({ entry: "ada@example.com", type: "address" })
    expect(parseEntry("Example.com.")).toEqual({ entry: "example.com", type: "domain" })
    expect(parseEntry("*.Example.com")).toEqual({ entry: "*.example.com", type: "subdomains" })
    expect(parseEntry("bücher.example")).toEqual({ entry: "xn--bcher-kva.example", type: "domain" })
    expect(parseEntry("ops+alerts@Bücher.example")).toEqual({ entry: "ops+alerts@xn--bcher-kva.example", type: "address" })
    // Quoted without need, the local part is the same mailbox's: stored unquoted, as its senders are read.
    expect(parseEntry('"Ada"@Example.com')).toEqual({ entry: "ada@example.com", type: "address" })
    expect(parseEntry('"ada.x"@example.com')).toEqual({ entry: "ada.x@example.com", type: "address" })
    expect(parseEntry("")).toMatch(/^must not be empty/)
    expect(parseEntry("@example.com")).toMatch(/^has nothing before the @/)
    expect(parseEntry("*@example.com")).toMatch(/^cannot have a wildcard before the @/)
    expect(parseEntry("a@b@example.com")).toMatch(/^must contain at most one @/)
    expect(parseEntry("ada@")).toMatch(/^has no valid domain after the @/)
    expect(parseEntry("ada@exa_mple.com")).toMatch(/^has no valid domain after the @/)
    expect(parseEntry("*.")).toMatch(/^must name a valid domain after \*\./)
    expect(parseEntry("mail.*.example.com")).toMatch(/^may use \* only as the first label/)
    expect(parseEntry("-bad-.example")).toMatch(/^is not a valid domain/)
    for (const ip of ["1.2.3.4", "[10.0.0.1]", "2001:db8::1"]) expect(parseEntry(ip), ip).toMatch(/^is an IP address/)
    expect(parseEntry("Ada <ada@example.com>")).toMatch(/^must not contain spaces/)
    expect(parseEntry(`${"a".repeat(65)}@example.com`)).toMatch(/local part over 64/)
    expect(parseEntry("x".repeat(321))).toBe("must be at most 320 characters")
    // What ends a URL's host, or escapes in one, is no part of a domain: not read as the domain before it.
    for (const raw of ["a/b", "a/b.example", "spam.example?x", "*.spam.example#x", "spam.example\\x", "x%63.example", "ada@a/b.example"]) {
      expect(parseEntry(raw), raw).toMatch(/^(is not a valid domain|must name a valid domain after \*\.|has no valid domain after the @)/)
    }
    // A local part may hold a / (RFC 5322 atext): the address is kept whole.
    expect(parseEntry("a/b@Example.com")).toEqual({ entry: "a/b@example.com", type: "address" })
  })

  it("a sender is named by its address, its domain and *. every domain above it, in any case", () => {
    expect(senderForms("Ada@Mail.Example.COM")).toEqual(["ada@mail.example.com", "mail.example.com", "*.example.com", "*.com"])
    expect(senderForms("ada@example.com")).toEqual(["ada@example.com", "example.com", "*.com"])
    // A subaddress is its mailbox's too, and a needlessly quoted local part the same mailbox.
    expect(senderForms("Bad+Tag@example.com")).toEqual(["bad+tag@example.com", "bad@example.com", "example.com", "*.com"])
    expect(senderForms('"bad"@example.com')).toEqual(["bad@example.com", "example.com", "*.com"])
    expect(senderForms('"b d"@example.com')).toEqual(['"b d"@example.com', "example.com", "*.com"])
    // The null sender and a sender without a domain are named by nothing.
    expect(senderForms("")).toEqual([])
    expect(senderForms("postmaster")).toEqual([])
    // A line break cannot reach the lookup, whose forms travel one a line.
    expect(senderForms("evil\nexample.com@example.com")).toEqual([])
    // A domain that is no host name names nothing, not the host name before its /.
    expect(senderForms("ada@partner.example/evil.test")).toEqual([])
  })

  it.effect("block lists: an address, a domain (exactly) and *.domain (its subdomains only), per account and per mailbox", () =>
    Effect.gen(function*() {
      const lists = yield* SenderLists
      const mailbox = yield* insertMailbox(yield* insertUser())
      const sibling = yield* insertMailbox(mailbox.owner)
      yield* lists.add(account(mailbox), "block", "Spammer@Example.com")
      yield* lists.add(ofMailbox(mailbox), "block", "*.ads.test")
      yield* lists.add(ofMailbox(mailbox), "block", "junk.test")

      expect(yield* rcpt(mailbox, "SPAMMER@example.COM")).toBe("SenderRefused")
      expect(yield* rcpt(mailbox, "friend@example.com")).toBe("accepted")
      expect(yield* rcpt(mailbox, "x@deep.sub.ads.test")).toBe("SenderRefused")
      expect(yield* rcpt(mailbox, "x@ads.test")).toBe("accepted")
      expect(yield* rcpt(mailbox, "x@JUNK.test")).toBe("SenderRefused")
      expect(yield* rcpt(mailbox, "x@sub.junk.test")).toBe("accepted")
      // The account's entry holds for every mailbox; a mailbox's only for itself.
      expect(yield* rcpt(sibling, "spammer@example.com")).toBe("SenderRefused")
      expect(yield* rcpt(sibling, "x@deep.sub.ads.test")).toBe("accepted")
      // The null sender is named by no entry.
      expect(yield* rcpt(mailbox, "")).toBe("accepted")
    }))

  it.effect("allow lists: each one with entries must name the sender; a mailbox's narrows the account's; block wins", () =>
    Effect.gen(function*() {
      const lists = yield* SenderLists
      const mailbox = yield* insertMailbox(yield* insertUser())
      const sibling = yield* insertMailbox(mailbox.owner)
      yield* lists.add(account(mailbox), "allow", "partner.test")
      yield* lists.add(account(mailbox), "allow", "*.partner.test")
      expect(yield* rcpt(mailbox, "anyone@partner.test")).toBe("accepted")
      expect(yield* rcpt(mailbox, "anyone@eu.partner.test")).toBe("accepted")
      expect(yield* rcpt(mailbox, "stranger@elsewhere.test")).toBe("SenderRefused")
      // The null sender cannot be named by an allow list, so one refuses it.
      expect(yield* rcpt(mailbox, "")).toBe("SenderRefused")

      // The mailbox's allow list narrows: the sender must be on both.
      yield* lists.add(ofMailbox(mailbox), "allow", "boss@partner.test")
      yield* lists.add(ofMailbox(mailbox), "allow", "friend@elsewhere.test")
      expect(yield* rcpt(mailbox, "boss@partner.test")).toBe("accepted")
      expect(yield* rcpt(mailbox, "anyone@partner.test")).toBe("SenderRefused")
      expect(yield* rcpt(mailbox, "friend@elsewhere.test")).toBe("SenderRefused")
      expect(yield* rcpt(sibling, "anyone@partner.test")).toBe("accepted")

      // Block wins over allow, whichever list holds either.
      yield* lists.add(ofMailbox(sibling), "block", "anyone@partner.test")
      expect(yield* rcpt(sibling, "anyone@partner.test")).toBe("SenderRefused")
      expect(yield* rcpt(sibling, "other@partner.test")).toBe("accepted")

      // Emptied lists say nothing again.
      yield* lists.remove(account(mailbox), "allow", "partner.test")
      yield* lists.remove(account(mailbox), "allow", "*.partner.test")
      yield* lists.remove(ofMailbox(mailbox), "allow", "BOSS@partner.test")
      yield* lists.remove(ofMailbox(mailbox), "allow", "friend@elsewhere.test")
      expect(yield* rcpt(mailbox, "stranger@elsewhere.test")).toBe("accepted")
      expect(yield* rcpt(mailbox, "")).toBe("accepted")
    }))

  it.effect("another account's lists and mailboxes are not the caller's: 404, and its entries judge only its mail", () =>
    Effect.gen(function*() {
      const lists = yield* SenderLists
      const mine = yield* insertMailbox(yield* insertUser())
      const theirs = yield* insertMailbox(yield* insertUser())
      yield* lists.add(account(theirs), "block", "someone@example.com")
      expect(yield* rcpt(mine, "someone@example.com")).toBe("accepted")
      const intruder = { userId: mine.owner.userId, mailboxId: theirs.mailboxId }
      const attempts = [
        Effect.asVoid(lists.list(intruder, "block", page)),
        Effect.asVoid(lists.add(intruder, "block", "x.test")),
        Effect.asVoid(lists.remove(intruder, "block", "x.test"))
      ]
      for (const attempt of attempts) {
        const error = yield* Effect.flip(attempt)
        expect(error).toMatchObject({ _tag: "NotFound", status: 404, details: { mailbox_id: theirs.mailboxId } })
      }
      // The account's own list does not hold the other account's entry.
      const removed = yield* Effect.flip(lists.remove(account(mine), "block", "someone@example.com"))
      expect(removed).toMatchObject({ _tag: "NotFound", details: { entry: "someone@example.com", list: "block" } })
    }))

  it.effect("adding twice is idempotent; listing is newest first with the list's total; the cap is a named error", () =>
    Effect.gen(function*() {
      const lists = yield* SenderLists
      const sql = yield* SqlClient.SqlClient
      const mailbox = yield* insertMailbox(yield* insertUser())
      const first = yield* lists.add(ofMailbox(mailbox), "allow", "A@Example.com")
      expect(first).toMatchObject({ created: true, entry: { entry: "a@example.com", type: "address", list: "allow", mailbox_id: mailbox.mailboxId } })
      const again = yield* lists.add(ofMailbox(mailbox), "allow", "a@EXAMPLE.com")
      expect(again).toEqual({ created: false, entry: first.entry })
      yield* lists.add(ofMailbox(mailbox), "allow", "*.example.org")
      const listed = yield* lists.list(ofMailbox(mailbox), "allow", page)
      expect(listed.total).toBe(2)
      expect(listed.data.map((e) => e.entry)).toEqual(["*.example.org", "a@example.com"])
      expect((yield* lists.list(account(mailbox), "allow", page)).total).toBe(0)

      // Fill the account's block list to its cap (in SQL: a thousand adds would only test the loop).
      yield* sql`INSERT INTO sender_list_entries (user_id, mailbox_id, list, entry)
                 SELECT ${mailbox.owner.userId}, NULL, 'block', 'filler' || n || '.test' FROM generate_series(1, ${MAX_ENTRIES_PER_LIST}) n`
      const full = yield* Effect.flip(lists.add(account(mailbox), "block", "one-more.test"))
      expect(full).toMatchObject({
        _tag: "SenderListFull",
        status: 403,
        code: "SENDER_LIST_FULL",
        details: { list: "block", limit: MAX_ENTRIES_PER_LIST, mailbox_id: null }
      })
      // An entry already on a full list is still answered as it is.
      expect((yield* lists.add(account(mailbox), "block", "FILLER7.test")).created).toBe(false)
      const bad = yield* Effect.flip(lists.add(account(mailbox), "block", "not a domain"))
      expect(bad).toMatchObject({ _tag: "ValidationError", details: { entry: expect.stringMatching(/^must not contain spaces/) } })
    }))

  it.effect("a header From on a block list: stored labelled blocked, and no email.received", () =>
    Effect.gen(function*() {
      const lists = yield* SenderLists
      const ingest = yield* Ingest
      const sql = yield* SqlClient.SqlClient
      /** The email.received events published for `emailIds` (the in-process bus keeps every publish as a row). */
      const announced = (emailIds: ReadonlyArray<string>) =>
        Effect.map(
          sql<{ msgId: string }>`SELECT msg_id FROM bus_messages WHERE msg_id = ANY(${emailIds.map(emailReceivedEventId)}::text[])`,
          (rows) => rows.map((row) => row.msgId)
        )
      const mailbox = yield* insertMailbox(yield* insertUser())
      yield* lists.add(ofMailbox(mailbox), "block", "*.phish.test")

      const deliver = (from: string, header = `Bank <${from}>`) =>
        Effect.gen(function*() {
          const emailId = uniqueName("eml")
          const raw = new TextEncoder().encode(`From: ${header}\r\nSubject: ${emailId}\r\nMessage-ID: <${emailId}@t>\r\n\r\nHello`)
          // The envelope sender is not what the header From check reads.
          yield* ingest.ingest(yield* inboundMessage(mailbox, raw, { email_id: emailId, mail_from: "bounces@innocent.test" }), true)
          const rows = yield* sql<{ labels: ReadonlyArray<string> }>`SELECT labels FROM emails WHERE id = ${emailId}`
          return { emailId, labels: rows[0]!.labels }
        })

      const blocked = yield* deliver("Security@Login.PHISH.test")
      expect(blocked.labels).toEqual(["inbound", "unread", "blocked"])
      const kept = yield* deliver("support@bank.test")
      expect(kept.labels).toEqual(["inbound", "unread"])
      // A blocked author behind another one is still blocked.
      expect((yield* deliver("", "ok@bank.test, Security@login.phish.test")).labels).toEqual(["inbound", "unread", "blocked"])
      // So is one in a second From field, whichever comes first.
      expect((yield* deliver("", "ok@bank.test\r\nFrom: Security@login.phish.test")).labels).toEqual(["inbound", "unread", "blocked"])
      expect((yield* deliver("", "Security@login.phish.test\r\nFrom: ok@bank.test")).labels).toEqual(["inbound", "unread", "blocked"])
      expect(yield* announced([blocked.emailId, kept.emailId])).toEqual([emailReceivedEventId(kept.emailId)])
      // A redelivery of the blocked one stays quiet too.
      yield* ingest.ingest({
        email_id: blocked.emailId,
        mailbox_id: mailbox.mailboxId,
        user_id: mailbox.owner.userId,
        raw_sha256: "unused",
        size: 1,
        mail_from: "",
        rcpt_to: mailbox.address,
        received_at: new Date().toISOString()
      }, false)
      expect(yield* announced([blocked.emailId])).toEqual([])
      // A person lets it through: received now, so announced (search indexes it, webhooks hear of it).
      yield* (yield* Labels).update(mailbox.owner.userId, [blocked.emailId], { add: [], remove: [BLOCKED] })
      expect(yield* announced([blocked.emailId])).toEqual([emailReceivedEventId(blocked.emailId)])
    }))
})
