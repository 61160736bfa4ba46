/**
 * Filters in process, over the suite's migrated database: what a filter's conditions match and how
 * filters compose (filter-rules.ts, pure), keeping them (the checks, the cap, 404 across accounts),
 * ingest labelling mail by them (and counting), and applying one to mail already received. The routes
 * and their error envelopes are test/api/filters.test.ts's subject.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as Mailauth from "../../layers/mailauth.ts"
import * as MemoryBus from "../../layers/memory-bus.ts"
import { DependencyHealth } from "../../services/health/dependency-health.ts"
import { applyFilters, type CompiledFilter, compileFilter, type MailFacts, MAX_FILTERS } from "../../services/mail/filter-rules.ts"
import { Filters } from "../../services/mail/filters.ts"
import { Labels } from "../../services/mail/labels.ts"
import { Ingest } from "../../services/mail/ingest.ts"
import { emailReceivedEventId } from "../../services/mail/received.ts"
import { MAX_LABELS } from "../../services/mail/label-rules.ts"
import { BounceReports } from "../../services/outbound/bounces.ts"
import { testDatabase } from "../support/database.ts"
import { inboundMessage, insertEmail, insertMailbox, type Mailbox, storeBlob } from "../support/seed-mail.ts"
import { uniqueName } from "../support/services.ts"
import { insertUser } from "../support/users.ts"

const services = Ingest.Default.pipe(
  Layer.provideMerge(Filters.Default),
  Layer.provide(BounceReports.Default),
  Layer.provide(Mailauth.none),
  Layer.provideMerge(MemoryBus.layer),
  Layer.provideMerge(DependencyHealth.Default),
  Layer.provideMerge(testDatabase)
)

const facts = (over: Partial<MailFacts> = {}): MailFacts => ({
  from: ["Billing@Mail.Acme.test"],
  recipients: ["box@agents.localhost", "team@corp.test"],
  subject: "Your INVOICE for March",
  body: "Please pay by Friday.",
  hasAttachments: true,
  ...over
})

let counter = 0
const filter = (conditions: Parameters<typeof compileFilter>[0]["conditions"], add: Array<string>, remove: Array<string> = [], more: Partial<CompiledFilter> = {}) => ({
  ...compileFilter({ id: `flt_${counter++}`, mailboxId: null, enabled: true, conditions, change: { add, remove } }),
  ...more
})

const page = { limit: 100, offset: 0 }

const inbound = (mailbox: Mailbox, headers: string, body = "Hello") =>
  Effect.gen(function*() {
    const emailId = uniqueName("eml")
    const raw = new TextEncoder().encode(`${headers}\r\nMessage-ID: <${emailId}@t>\r\n\r\n${body}`)
    yield* (yield* Ingest).ingest(yield* inboundMessage(mailbox, raw, { email_id: emailId, mail_from: "bounces@sender.test" }), true)
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ labels: ReadonlyArray<string> }>`SELECT labels FROM emails WHERE id = ${emailId}`
    return { emailId, labels: rows[0]!.labels }
  })

layer(services, { timeout: "120 seconds" })("Filters", (it) => {
  it("conditions: every one given holds, each by any of its terms; senders and recipients by address, domain or *.domain", () => {
    const labelled = (f: CompiledFilter, over: Partial<MailFacts> = {}) => applyFilters([f], "mbx_a", facts(over), ["inbound", "unread"]).labels
    const billing = ["inbound", "unread", "billing"]
    expect(labelled(filter({ from: ["billing@mail.acme.test"] }, ["billing"]))).toEqual(billing)
    expect(labelled(filter({ from: ["mail.acme.test"] }, ["billing"]))).toEqual(billing)
    expect(labelled(filter({ from: ["*.acme.test"] }, ["billing"]))).toEqual(billing)
    // A domain entry is that domain exactly, *.domain its subdomains only.
    expect(labelled(filter({ from: ["acme.test"] }, ["billing"]))).toEqual(["inbound", "unread"])
    expect(labelled(filter({ from: ["*.mail.acme.test"] }, ["billing"]))).toEqual(["inbound", "unread"])
    expect(labelled(filter({ from: ["x@y.test", "*.acme.test"] }, ["billing"]))).toEqual(billing)
    expect(labelled(filter({ from: ["*.acme.test"] }, ["billing"]), { from: [] })).toEqual(["inbound", "unread"])
    // To: the mailbox address, To and Cc alike.
    expect(labelled(filter({ to: ["corp.test"] }, ["team"]))).toEqual(["inbound", "unread", "team"])
    expect(labelled(filter({ to: ["box@agents.localhost"] }, ["team"]))).toEqual(["inbound", "unread", "team"])
    expect(labelled(filter({ to: ["other@agents.localhost"] }, ["team"]))).toEqual(["inbound", "unread"])
    // Phrases in any case; any of them.
    expect(labelled(filter({ subject_contains: ["nothing", "invoice for"] }, ["billing"]))).toEqual(billing)
    expect(labelled(filter({ body_contains: ["PAY BY"] }, ["billing"]))).toEqual(billing)
    expect(labelled(filter({ body_contains: ["invoice"] }, ["billing"]))).toEqual(["inbound", "unread"])
    // White space matches white space: a phrase across a hard-wrapped body's line break, or a folded subject's.
    expect(labelled(filter({ body_contains: ["secret  phrase"] }, ["found"]), { body: "the Secret\r\nphrase here" })).toEqual(["inbound", "unread", "found"])
    expect(labelled(filter({ subject_contains: ["for october"] }, ["found"]), { subject: "Invoice for\r\n October" })).toEqual(["inbound", "unread", "found"])
    expect(labelled(filter({ has_attachments: true }, ["files"]))).toEqual(["inbound", "unread", "files"])
    expect(labelled(filter({ has_attachments: false }, ["files"]))).toEqual(["inbound", "unread"])
    expect(labelled(filter({ has_attachments: false }, ["files"]), { hasAttachments: false })).toEqual(["inbound", "unread", "files"])
    // All conditions must hold.
    expect(labelled(filter({ from: ["*.acme.test"], subject_contains: ["receipt"] }, ["billing"]))).toEqual(["inbound", "unread"])
    expect(labelled(filter({ from: ["*.acme.test"], subject_contains: ["invoice"], has_attachments: true }, ["billing"]))).toEqual(billing)
    // None given (none is stored): nothing matches.
    expect(labelled(filter({}, ["everything"]))).toEqual(["inbound", "unread"])
  })

  it("filters apply in order to what the ones before left; disabled ones and other mailboxes' are skipped; labels stop at the limit", () => {
    const first = filter({ from: ["*.acme.test"] }, ["billing", "spam"], ["unread"])
    const second = filter({ subject_contains: ["invoice"] }, ["invoices"], ["spam"])
    const disabled = filter({ subject_contains: ["invoice"] }, ["never"], [], { enabled: false })
    const elsewhere = filter({ subject_contains: ["invoice"] }, ["other-box"], [], { mailboxId: "mbx_b" })
    const here = filter({ subject_contains: ["invoice"] }, ["this-box"], [], { mailboxId: "mbx_a" })
    const result = applyFilters([first, second, disabled, elsewhere, here], "mbx_a", facts(), ["inbound", "unread"])
    expect(result).toEqual({ labels: ["inbound", "billing", "invoices", "this-box"], applied: [first.id, second.id, here.id] })
    expect(applyFilters([first], "mbx_a", facts({ from: ["someone@else.test"] }), ["inbound", "unread"])).toEqual({
      labels: ["inbound", "unread"],
      applied: []
    })
    const full = ["inbound", ...Array.from({ length: MAX_LABELS - 2 }, (_, i) => `l${i}`)]
    const many = filter({ has_attachments: true }, ["a", "b", "c"])
    expect(applyFilters([many], "mbx_a", facts(), full).labels).toEqual([...full, "a"])
  })

  it.effect("kept: normalised, checked, at most MAX_FILTERS an account, another account's mailbox or filter 404", () =>
    Effect.gen(function*() {
      const filters = yield* Filters
      const mailbox = yield* insertMailbox(yield* insertUser())
      const userId = mailbox.owner.userId
      const created = yield* filters.create(userId, {
        name: "  Billing  ",
        conditions: { from: ["Billing@ACME.test", "billing@acme.test", "*.Acme.TEST"], subject_contains: [" invoice "] },
        actions: { add_labels: ["billing", "billing"], remove_labels: ["unread"] }
      })
      expect(created).toEqual({
        filter_id: expect.stringMatching(/^flt_/),
        name: "Billing",
        mailbox_id: null,
        enabled: true,
        conditions: { from: ["billing@acme.test", "*.acme.test"], subject_contains: ["invoice"] },
        actions: { add_labels: ["billing"], remove_labels: ["unread"] },
        matched_count: 0,
        last_matched_at: null,
        created_at: expect.any(String),
        updated_at: expect.any(String)
      })
      expect(yield* filters.get(userId, created.filter_id)).toEqual(created)

      const refusal = (input: Parameters<typeof filters.create>[1]) =>
        Effect.map(Effect.flip(filters.create(userId, input)), (e) => ({ tag: e._tag, details: "details" in e ? e.details : undefined }))
      expect(yield* refusal({ conditions: {}, actions: { add_labels: ["x"] } })).toEqual({
        tag: "ValidationError",
        details: { conditions: expect.stringMatching(/^must give at least one of from/) }
      })
      expect(yield* refusal({ conditions: { has_attachments: true }, actions: {} })).toEqual({
        tag: "ValidationError",
        details: { actions: "must add or remove at least one label" }
      })
      expect(yield* refusal({ conditions: { has_attachments: true }, actions: { add_labels: ["sent"] } })).toEqual({
        tag: "FactLabel",
        details: { labels: ["sent"] }
      })
      expect(yield* refusal({ conditions: { has_attachments: true }, actions: { add_labels: ["x"], remove_labels: ["x"] } })).toEqual({
        tag: "ValidationError",
        details: { "actions.remove_labels": "x is in actions.add_labels too: a filter adds a label or removes it, not both" }
      })
      expect(yield* refusal({ conditions: { has_attachments: true }, actions: { remove_labels: ["blocked"] } })).toEqual({
        tag: "ValidationError",
        details: { "actions.remove_labels": expect.stringMatching(/^blocked is the block lists' verdict/) }
      })
      const stranger = yield* insertMailbox(yield* insertUser())
      expect(yield* refusal({ mailbox_id: stranger.mailboxId, conditions: { has_attachments: true }, actions: { add_labels: ["x"] } }))
        .toEqual({ tag: "NotFound", details: { mailbox_id: stranger.mailboxId } })
      const theirs = yield* Effect.flip(filters.get(stranger.owner.userId, created.filter_id))
      expect(theirs).toMatchObject({ _tag: "NotFound", details: { filter_id: created.filter_id } })
      expect((yield* Effect.flip(filters.remove(stranger.owner.userId, created.filter_id)))._tag).toBe("NotFound")

      // A partial change keeps the rest; conditions and actions are replaced whole.
      const changed = yield* filters.update(userId, created.filter_id, { enabled: false, mailbox_id: mailbox.mailboxId, actions: { add_labels: ["money"] } })
      expect(changed).toMatchObject({
        name: "Billing",
        enabled: false,
        mailbox_id: mailbox.mailboxId,
        conditions: created.conditions,
        actions: { add_labels: ["money"], remove_labels: [] }
      })
      expect((yield* filters.list(userId, mailbox.mailboxId, page)).total).toBe(1)
      expect((yield* filters.update(userId, created.filter_id, { name: null, mailbox_id: null })).mailbox_id).toBeNull()
      expect((yield* filters.list(userId, mailbox.mailboxId, page)).total).toBe(0)

      for (let i = 1; i < MAX_FILTERS; i++) {
        yield* filters.create(userId, { conditions: { subject_contains: [`n${i}`] }, actions: { add_labels: [`l${i}`] } })
      }
      const listed = yield* filters.list(userId, undefined, { limit: 2, offset: 0 })
      expect(listed.total).toBe(MAX_FILTERS)
      expect(listed.data.map((f) => f.filter_id)[0]).toBe(created.filter_id)
      expect(yield* refusal({ conditions: { has_attachments: true }, actions: { add_labels: ["x"] } })).toEqual({
        tag: "FilterQuotaReached",
        details: { limit: MAX_FILTERS }
      })
      expect(yield* filters.remove(userId, created.filter_id)).toEqual({ filter_id: created.filter_id, deleted: true })
      expect((yield* Effect.flip(filters.get(userId, created.filter_id)))._tag).toBe("NotFound")
    }))

  it.effect("ingest labels received mail by the account's filters as it stores it, and counts what each applied to", () =>
    Effect.gen(function*() {
      const filters = yield* Filters
      const sql = yield* SqlClient.SqlClient
      const mailbox = yield* insertMailbox(yield* insertUser())
      const other = yield* insertMailbox(mailbox.owner)
      const userId = mailbox.owner.userId
      const news = yield* filters.create(userId, {
        conditions: { from: ["news.test"] },
        actions: { add_labels: ["newsletters"], remove_labels: ["unread"] }
      })
      const mine = yield* filters.create(userId, {
        mailbox_id: mailbox.mailboxId,
        conditions: { body_contains: ["unsubscribe"] },
        actions: { add_labels: ["lists"] }
      })
      const first = yield* inbound(mailbox, "From: News <daily@news.test>\r\nSubject: Today", "Read more. Unsubscribe here.")
      expect(first.labels).toEqual(["inbound", "newsletters", "lists"])
      // The mailbox's filter is that mailbox's only.
      expect((yield* inbound(other, "From: daily@news.test\r\nSubject: Today", "Unsubscribe")).labels).toEqual(["inbound", "newsletters"])
      expect((yield* inbound(mailbox, "From: friend@elsewhere.test\r\nSubject: Hi")).labels).toEqual(["inbound", "unread"])

      // The announcement carries the filtered labels.
      const event = yield* sql<{ payload: string }>`
        SELECT convert_from(data, 'UTF8') AS payload FROM bus_messages WHERE msg_id = ${emailReceivedEventId(first.emailId)}`
      expect(JSON.parse(event[0]!.payload).data.labels).toEqual(["inbound", "newsletters", "lists"])

      // A change is seen by the next email; counts are written behind.
      yield* filters.update(userId, news.filter_id, { enabled: false })
      expect((yield* inbound(mailbox, "From: daily@news.test\r\nSubject: Tomorrow")).labels).toEqual(["inbound", "unread"])
      expect(yield* filters.get(userId, news.filter_id)).toMatchObject({ matched_count: 2, last_matched_at: expect.any(String) })
      yield* filters.flush
      const stored = yield* sql<{ matchedCount: number }>`SELECT matched_count::float8 AS matched_count FROM mail_filters WHERE id = ${mine.filter_id}`
      expect(stored[0]!.matchedCount).toBe(1)
      expect(yield* filters.get(userId, mine.filter_id)).toMatchObject({ matched_count: 1 })
    }))

  it.effect("apply: runs a filter over mail already received (dry run counts only), announcing each change", () =>
    Effect.gen(function*() {
      const filters = yield* Filters
      const sql = yield* SqlClient.SqlClient
      const mailbox = yield* insertMailbox(yield* insertUser())
      const userId = mailbox.owner.userId
      const invoice = yield* insertEmail(mailbox, { subject: "Invoice 7", receivedMinutesAgo: 5, from: "billing@acme.test" })
      const done = yield* insertEmail(mailbox, { subject: "Invoice 6", receivedMinutesAgo: 9, from: "billing@acme.test", labels: ["inbound", "paid"] })
      yield* insertEmail(mailbox, { subject: "Lunch", receivedMinutesAgo: 7, from: "friend@else.test" })
      // Blocked mail is announced nowhere: a filter run neither changes nor counts it.
      yield* insertEmail(mailbox, { subject: "Invoice 8", receivedMinutesAgo: 6, from: "billing@acme.test", labels: ["inbound", "blocked"] })
      const created = yield* filters.create(userId, {
        enabled: false,
        conditions: { from: ["acme.test"] },
        actions: { add_labels: ["paid"], remove_labels: ["unread"] }
      })
      const dry = yield* filters.apply(userId, created.filter_id, true)
      expect(dry).toEqual({ filter_id: created.filter_id, dry_run: true, scanned: 3, matched: 2, changed: 1 })
      const labelsOf = (id: string) => Effect.map(sql<{ labels: ReadonlyArray<string> }>`SELECT labels FROM emails WHERE id = ${id}`, (r) => r[0]!.labels)
      expect(yield* labelsOf(invoice.id)).toEqual(["inbound", "unread"])
      const applied = yield* filters.apply(userId, created.filter_id, false)
      expect(applied).toEqual({ filter_id: created.filter_id, dry_run: false, scanned: 3, matched: 2, changed: 1 })
      expect(yield* labelsOf(invoice.id)).toEqual(["inbound", "paid"])
      expect(yield* labelsOf(done.id)).toEqual(["inbound", "paid"])
      const events = yield* sql<{ n: number }>`
        SELECT count(*)::int AS n FROM bus_messages WHERE msg_id LIKE 'email.labels_changed:%' AND convert_from(data, 'UTF8') LIKE ${`%${invoice.id}%`}`
      expect(events[0]!.n).toBe(1)
      // Again: nothing left to change.
      expect((yield* filters.apply(userId, created.filter_id, false)).changed).toBe(0)
      const missing = yield* Effect.flip(filters.apply(userId, "flt_nothing", false))
      expect(missing).toMatchObject({ _tag: "NotFound", details: { filter_id: "flt_nothing" } })
    }))

  it.effect("from holds for any author the From names, as ingest and a run over stored mail read them; to reads an older email's stored Cc", () =>
    Effect.gen(function*() {
      const filters = yield* Filters
      const mailbox = yield* insertMailbox(yield* insertUser())
      const userId = mailbox.owner.userId
      const bob = yield* filters.create(userId, { conditions: { from: ["Bob@Sub.example"] }, actions: { add_labels: ["bob"] } })
      const received = yield* inbound(mailbox, "From: Alice <alice@x.example>, Bob <bob@sub.example>\r\nSubject: Both")
      expect(received.labels).toEqual(["inbound", "unread", "bob"])
      // Stored before the filter: from_address holds the first author, the stored From header every one.
      const listed = yield* insertEmail(mailbox, {
        subject: "Both, earlier",
        receivedMinutesAgo: 5,
        from: "alice@x.example",
        headers: { from: "Alice <alice@x.example>, Bob <bob@sub.example>" }
      })
      const twoFields = yield* insertEmail(mailbox, {
        subject: "Two From fields",
        receivedMinutesAgo: 6,
        from: "alice@x.example",
        headers: { from: ["Alice <alice@x.example>", "bob@sub.example"] }
      })
      yield* insertEmail(mailbox, { subject: "Alice alone", receivedMinutesAgo: 7, from: "alice@x.example", headers: { from: "Alice <alice@x.example>" } })
      expect(yield* filters.apply(userId, bob.filter_id, false)).toEqual({ filter_id: bob.filter_id, dry_run: false, scanned: 4, matched: 3, changed: 2 })
      const sql = yield* SqlClient.SqlClient
      const labelled = yield* sql<{ id: string }>`SELECT id FROM emails WHERE mailbox_id = ${mailbox.mailboxId} AND 'bob' = ANY(labels) ORDER BY id`
      expect(labelled.map((row) => row.id).sort()).toEqual([received.emailId, listed.id, twoFields.id].sort())

      // An email stored before its Cc was kept (cc_addresses NULL) is sent to its stored Cc too.
      const team = yield* filters.create(userId, { conditions: { to: ["team@corp.test"] }, actions: { add_labels: ["team"] } })
      yield* insertEmail(mailbox, { subject: "Copied", receivedMinutesAgo: 8, headers: { cc: "Team <team@corp.test>" } })
      expect(yield* filters.apply(userId, team.filter_id, true)).toMatchObject({ matched: 1, changed: 1 })
    }))

  it.effect("apply reads mail a page at a time, newest first, missing none where a page ends inside a millisecond", () =>
    Effect.gen(function*() {
      const filters = yield* Filters
      const sql = yield* SqlClient.SqlClient
      const mailbox = yield* insertMailbox(yield* insertUser())
      const sha = yield* storeBlob(new TextEncoder().encode("Subject: bulk\r\n\r\n"))
      // 1,200 emails a microsecond apart (a page boundary falls inside one millisecond), every third from acme.test.
      yield* sql`
        INSERT INTO emails (id, mailbox_id, user_id, message_id, thread_id, subject, from_address, to_addresses, sent_at,
                            received_at, mail_from, rcpt_to, headers, text_body, has_attachments, raw_sha256, size, labels)
        SELECT ${mailbox.mailboxId} || '_' || g, ${mailbox.mailboxId}, ${mailbox.owner.userId}, '<bulk' || g || '@t>', 'thr_' || g || ${mailbox.mailboxId},
               'Bulk ' || g, CASE WHEN g % 3 = 0 THEN 'billing@acme.test' ELSE 'friend@else.test' END, ARRAY[${mailbox.address}], now(),
               timestamptz '2026-01-01 00:00:00' + g * interval '1 microsecond', 'b@t', ${mailbox.address}, '{}'::jsonb, '', false, ${sha}, 10,
               ARRAY['inbound', 'unread']
        FROM generate_series(1, 1200) g`
      const created = yield* filters.create(mailbox.owner.userId, { conditions: { from: ["acme.test"] }, actions: { remove_labels: ["unread"] } })
      expect(yield* filters.apply(mailbox.owner.userId, created.filter_id, true)).toMatchObject({ scanned: 1200, matched: 400, changed: 400 })
      expect(yield* filters.apply(mailbox.owner.userId, created.filter_id, false)).toMatchObject({ scanned: 1200, matched: 400, changed: 400 })
      const unread = yield* sql<{ n: number }>`
        SELECT count(*)::int AS n FROM emails WHERE mailbox_id = ${mailbox.mailboxId} AND from_address = 'billing@acme.test' AND 'unread' = ANY(labels)`
      expect(unread[0]!.n).toBe(0)
    }))
})

/** An email to delete as the next batch of a filter run is changed: gone between the run's read and its change. */
let doomed: string | undefined
/** The batches of emails a filter run changed (Labels.update calls), each one transaction. */
const batches: Array<number> = []
const deletingLabels = Layer.effect(
  Labels,
  Effect.gen(function*() {
    const inner = yield* Labels
    const sql = yield* SqlClient.SqlClient
    return Labels.make({
      ...inner,
      update: (userId, emailIds, change) =>
        Effect.suspend(() => {
          batches.push(emailIds.length)
          const gone = doomed
          doomed = undefined
          return gone === undefined ? Effect.void : Effect.orDie(sql`DELETE FROM emails WHERE id = ${gone}`)
        }).pipe(Effect.zipRight(inner.update(userId, emailIds, change)))
    })
  })
).pipe(Layer.provide(Labels.Default))

const racing = Filters.DefaultWithoutDependencies.pipe(
  Layer.provide(deletingLabels),
  Layer.provideMerge(MemoryBus.layer),
  Layer.provideMerge(DependencyHealth.Default),
  Layer.provideMerge(testDatabase)
)

layer(racing, { timeout: "60 seconds" })("A filter run meeting mail deleted meanwhile", (it) => {
  it.effect("changes the rest of the batch and counts only the emails it changed", () =>
    Effect.gen(function*() {
      const filters = yield* Filters
      const mailbox = yield* insertMailbox(yield* insertUser())
      const emails = yield* Effect.forEach([1, 2, 3], (n) => insertEmail(mailbox, { subject: `Invoice ${n}`, receivedMinutesAgo: n, from: "billing@acme.test" }))
      const created = yield* filters.create(mailbox.owner.userId, { conditions: { from: ["acme.test"] }, actions: { add_labels: ["paid"] } })
      doomed = emails[1]!.id
      expect(yield* filters.apply(mailbox.owner.userId, created.filter_id, false)).toMatchObject({ scanned: 3, matched: 3, changed: 2 })
      const sql = yield* SqlClient.SqlClient
      const paid = yield* sql<{ id: string }>`SELECT id FROM emails WHERE mailbox_id = ${mailbox.mailboxId} AND 'paid' = ANY(labels) ORDER BY id`
      expect(paid.map((row) => row.id)).toEqual([emails[0]!.id, emails[2]!.id].sort())
    }))

  it.effect("fails with the database's failure instead of answering as if the mail were changed", () =>
    Effect.gen(function*() {
      const filters = yield* Filters
      const sql = yield* SqlClient.SqlClient
      const mailbox = yield* insertMailbox(yield* insertUser())
      const emails = yield* Effect.forEach([1, 2], (n) => insertEmail(mailbox, { subject: `Invoice ${n}`, receivedMinutesAgo: n, from: "billing@acme.test" }))
      const created = yield* filters.create(mailbox.owner.userId, { conditions: { from: ["acme.test"] }, actions: { add_labels: ["paid"] } })
      // One email gone sends the batch one email at a time; the other's change then fails in the database.
      yield* sql`CREATE FUNCTION refuse_paid() RETURNS trigger LANGUAGE plpgsql AS $$
                 BEGIN IF 'paid' = ANY(NEW.labels) THEN RAISE EXCEPTION 'disk full'; END IF; RETURN NEW; END $$`
      yield* sql`CREATE TRIGGER refuse_paid BEFORE UPDATE ON emails FOR EACH ROW EXECUTE FUNCTION refuse_paid()`
      doomed = emails[0]!.id
      const failed = yield* Effect.flip(filters.apply(mailbox.owner.userId, created.filter_id, false)).pipe(
        Effect.ensuring(Effect.orDie(sql`DROP TRIGGER refuse_paid ON emails`.pipe(Effect.zipRight(sql`DROP FUNCTION refuse_paid()`))))
      )
      expect(failed._tag).toBe("SqlError")
    }))

  it.effect("over thousands of emails: every page read, each email matched and changed once, a few transactions, one deleted meanwhile left out", () =>
    Effect.gen(function*() {
      const filters = yield* Filters
      const sql = yield* SqlClient.SqlClient
      const mailbox = yield* insertMailbox(yield* insertUser())
      const other = yield* insertMailbox(yield* insertUser())
      const sha = yield* storeBlob(new TextEncoder().encode("Subject: bulk\r\n\r\n"))
      const EMAILS = 2_600
      // Every third from acme.test; of every 13th blocked (neither read nor changed), of every 35th at 50 labels
      // (no room for paid: matched, left as it is), of every 49th paid already (matched, nothing to change).
      const labelsOf = (g: number) =>
        g % 13 === 0
          ? ["inbound", "blocked"]
          : g % 35 === 0
          ? ["inbound", ...Array.from({ length: MAX_LABELS - 1 }, (_, i) => `l${i}`)]
          : g % 49 === 0
          ? ["inbound", "paid"]
          : ["inbound", "unread"]
      const seed = (box: Mailbox) =>
        sql`
          INSERT INTO emails (id, mailbox_id, user_id, message_id, thread_id, subject, from_address, to_addresses, sent_at,
                              received_at, mail_from, rcpt_to, headers, text_body, has_attachments, raw_sha256, size, labels)
          SELECT ${box.mailboxId} || '_' || g, ${box.mailboxId}, ${box.owner.userId}, '<bulk' || g || '@t>', 'thr_' || g || ${box.mailboxId},
                 'Bulk ' || g, CASE WHEN g % 3 = 0 THEN 'billing@acme.test' ELSE 'friend@else.test' END, ARRAY[${box.address}], now(),
                 timestamptz '2026-01-01 00:00:00' + g * interval '1 millisecond', 'b@t', ${box.address}, '{}'::jsonb, '', false, ${sha}, 10,
                 CASE WHEN g % 13 = 0 THEN ARRAY['inbound', 'blocked']
                      WHEN g % 35 = 0 THEN ARRAY['inbound'] || array(SELECT 'l' || i FROM generate_series(0, ${MAX_LABELS - 2}) i)
                      WHEN g % 49 = 0 THEN ARRAY['inbound', 'paid'] ELSE ARRAY['inbound', 'unread'] END
          FROM generate_series(1, ${EMAILS}) g`
      yield* seed(mailbox)
      yield* seed(other)
      const all = Array.from({ length: EMAILS }, (_, i) => i + 1).filter((g) => g % 13 !== 0)
      const matching = all.filter((g) => g % 3 === 0)
      const changing = matching.filter((g) => g % 35 !== 0 && g % 49 !== 0)
      // One of the first batch to change (newest first), deleted as it is changed: after the run read it, before it changes it.
      const gone = changing[changing.length - 100]!
      const created = yield* filters.create(mailbox.owner.userId, { conditions: { from: ["acme.test"] }, actions: { add_labels: ["paid"], remove_labels: ["unread"] } })
      expect(yield* filters.apply(mailbox.owner.userId, created.filter_id, true)).toEqual({
        filter_id: created.filter_id, dry_run: true, scanned: all.length, matched: matching.length, changed: changing.length
      })
      batches.length = 0
      doomed = `${mailbox.mailboxId}_${gone}`
      expect(yield* filters.apply(mailbox.owner.userId, created.filter_id, false)).toEqual({
        filter_id: created.filter_id, dry_run: false, scanned: all.length, matched: matching.length, changed: changing.length - 1
      })
      // Changed in a few transactions (it took one for every 100 emails, and one for each email of a batch one was deleted from).
      expect(batches.length).toBeLessThanOrEqual(5)
      const rows = yield* sql<{ id: string; labels: ReadonlyArray<string> }>`SELECT id, labels FROM emails WHERE mailbox_id = ${mailbox.mailboxId}`
      const expected = new Map(Array.from({ length: EMAILS }, (_, i) => i + 1).filter((g) => g !== gone).map((g) => [
        `${mailbox.mailboxId}_${g}`,
        changing.includes(g) ? ["inbound", "paid"] : labelsOf(g)
      ]))
      expect(new Map(rows.map((row) => [row.id, row.labels]))).toEqual(expected)
      const untouched = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM emails WHERE mailbox_id = ${other.mailboxId} AND 'paid' = ANY(labels) AND 'unread' = ANY(labels)`
      expect(untouched[0]!.n).toBe(0)
      const events = yield* sql<{ data: Uint8Array }>`
        SELECT data FROM bus_messages WHERE msg_id LIKE 'email.labels_changed:%' AND convert_from(data, 'UTF8') LIKE ${`%${mailbox.mailboxId}%`}`
      const announced = events.map((event) => JSON.parse(new TextDecoder().decode(event.data)).data as { email_id: string; added: Array<string>; removed: Array<string> })
      expect(announced.map((e) => e.email_id).sort()).toEqual(changing.filter((g) => g !== gone).map((g) => `${mailbox.mailboxId}_${g}`).sort())
      expect(announced.every((e) => e.added.join() === "paid" && e.removed.join() === "unread")).toBe(true)
      expect(yield* filters.apply(mailbox.owner.userId, created.filter_id, false)).toMatchObject({ matched: matching.length - 1, changed: 0 })
    }))
})
