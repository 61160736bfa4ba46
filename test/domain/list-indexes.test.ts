/**
 * The lists' narrowing conditions (services/mail/narrowing.ts) are ones an index of the emails holds, so
 * that one sender's mail or a mailbox's unread mail is found without reading the whole mailbox: the
 * planner, given an account of thousands of emails and its statistics, reads them through the index
 * (migrations 0082 and 0083, and 0009's address prefix); so are the labels IMAP lists as folders (0084).
 */
import { SqlClient, type Statement } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SYSTEM_LABELS } from "../../services/imap/folders.ts"
import { CARRIES_OWN_LABELS } from "../../services/imap/views.ts"
import { senderIs, unread } from "../../services/mail/narrowing.ts"
import type { Entry } from "../../services/mail/sender-list-rules.ts"
import { testDatabase } from "../support/database.ts"
import { insertMailbox, storeBlob } from "../support/seed-mail.ts"
import { insertUser } from "../support/users.ts"

layer(testDatabase, { timeout: "60 seconds" })("the lists' indexes", (it) => {
  /**
   * An account of 4,000 emails from 40 senders of 20 domains (and a few others), a handful unread and a
   * handful labelled by the account, its statistics taken: a sender's mail, or the unread, is a small
   * part of it, as in a mailbox of any size.
   */
  const account = Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const owner = yield* insertUser()
    const { mailboxId } = yield* insertMailbox(owner)
    const sha = yield* storeBlob(new Uint8Array())
    const others = ["nora+reports@example.org", "ann@x.eu.example.org", "müller@bücher.example"]
    yield* sql`
      INSERT INTO emails (id, mailbox_id, user_id, message_id, thread_id, subject, from_address, to_addresses,
        sent_at, received_at, mail_from, rcpt_to, headers, text_body, has_attachments, raw_sha256, size, labels)
      SELECT ${mailboxId} || '_' || g, ${mailboxId}, ${owner.userId}, '<' || g || '@planned>', 'th_' || g, '',
        coalesce((${others}::text[])[g % 100], 'user' || (g % 40) || '@sub' || (g % 20) || '.example.com'), '{}',
        now(), now() - g * interval '1 minute', '', '', '{}', '', false, ${sha}, 0,
        CASE WHEN g % 500 = 0 THEN ARRAY['inbound', 'unread'] WHEN g % 700 = 0 THEN ARRAY['inbound', 'invoices'] ELSE ARRAY['inbound'] END
      FROM generate_series(1, 4000) g`
    yield* sql`ANALYZE emails`
    return { userId: owner.userId, mailboxId }
  })

  const plan = (condition: Statement.Fragment) =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const rows = yield* sql<{ "QUERY PLAN": string }>`EXPLAIN SELECT count(*) FROM emails e WHERE ${condition}`
      return rows.map((row) => row["QUERY PLAN"]).join("\n")
    })

  it.effect("a sender's mail, by an address, a domain or its subdomains, is read through the sender's index", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const { userId } = yield* account
      const entries: ReadonlyArray<Entry> = [
        { entry: "nora@example.org", type: "address" },
        { entry: "user7@sub7.example.com", type: "address" },
        { entry: "müller@xn--bcher-kva.example", type: "address" },
        { entry: "example.org", type: "domain" },
        { entry: "sub3.example.com", type: "domain" },
        { entry: "*.example.org", type: "subdomains" },
        { entry: "*.xn--bcher-kva.example", type: "subdomains" }
      ]
      for (const entry of entries) {
        const planned = yield* plan(sql`e.user_id = ${userId} AND ${senderIs(sql, entry)}`)
        const index = entry.type === "address" ? "emails_from_prefix_idx" : "emails_from_domain_idx"
        // The index found, and read by the sender (its condition names the address), not all the account's.
        expect(planned, `${entry.entry}:\n${planned}`).toMatch(new RegExp(`Index Scan (on|using) ${index}`))
        expect(planned, `${entry.entry}:\n${planned}`).toMatch(/Index Cond: .*user_id = .* AND .*lower\(from_address\)/)
        expect(planned, `${entry.entry}:\n${planned}`).not.toContain("Seq Scan")
      }
    }))

  it.effect("a mailbox's unread mail is read through the index of unread mail", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const { mailboxId } = yield* account
      const planned = yield* plan(sql`e.mailbox_id = ${mailboxId} AND ${unread(sql)}`)
      expect(planned).toMatch(/Index (Only )?Scan (on|using) emails_unread_idx/)
      expect(planned).not.toContain("Seq Scan")
    }))

  it.effect("the labels of a mailbox's own that IMAP lists as folders are read from the mail carrying any", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const { mailboxId } = yield* account
      const planned = yield* plan(sql`e.mailbox_id = ${mailboxId} AND ${sql.literal(CARRIES_OWN_LABELS)}`)
      expect(planned).toMatch(/Index (Only )?Scan (on|using) emails_own_labels_idx/)
      expect(planned).not.toContain("Seq Scan")
      // What it finds: the account's label, and none of the system ones.
      const labels = yield* sql<{ label: string }>`
        SELECT DISTINCT l.label FROM emails e, unnest(e.labels) AS l(label)
        WHERE e.mailbox_id = ${mailboxId} AND ${sql.literal(CARRIES_OWN_LABELS)}`
      expect(labels.map((row) => row.label).filter((label) => !SYSTEM_LABELS.has(label))).toEqual(["invoices"])
    }))
})
