/**
 * A sender narrowed by in the vector index (its keys, `senderKeys` / `senderKey`) is the sender the
 * lists and word search narrow by in SQL (`senderIs`): for every pairing of stored senders and
 * entries below, the key is among the sender's keys exactly when the database says `senderIs`. And
 * `senderIs` is a condition an index of the emails holds, for an address, a domain and its subdomains.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { senderIs, senderKey, senderKeys } from "../../services/mail/narrowing.ts"
import type { Entry } from "../../services/mail/sender-list-rules.ts"
import { testDatabase } from "../support/database.ts"
import { uniqueName } from "../support/services.ts"
import { insertUser } from "../support/users.ts"

/** As From addresses are stored: any case, Unicode domains, tags, subdomains at any depth. */
const senders = [
  "nora@example.org",
  "Nora@Example.ORG",
  "nora+reports@example.org",
  "nora+a+b@example.org",
  "nora.k@example.org",
  "noraa@example.org",
  "ann@eu.example.org",
  "ann@x.eu.example.org",
  "bob@example.org.evil.test",
  "bob@notexample.org",
  "müller@bücher.example",
  "info@shop.bücher.example",
  "x@example.net",
  "",
  "not-an-address"
]

/** As the sender lists normalise them: lower case, ASCII domains. */
const entries: ReadonlyArray<Entry> = [
  { entry: "nora@example.org", type: "address" },
  { entry: "nora+a@example.org", type: "address" },
  { entry: "nora+reports@example.org", type: "address" },
  { entry: "ann@eu.example.org", type: "address" },
  { entry: "müller@xn--bcher-kva.example", type: "address" },
  { entry: "example.org", type: "domain" },
  { entry: "eu.example.org", type: "domain" },
  { entry: "xn--bcher-kva.example", type: "domain" },
  { entry: "*.example.org", type: "subdomains" },
  { entry: "*.eu.example.org", type: "subdomains" },
  { entry: "*.xn--bcher-kva.example", type: "subdomains" },
  { entry: "*.org", type: "subdomains" }
]

layer(testDatabase, { timeout: "60 seconds" })("sender keys", (it) => {
  it.effect("a sender has an entry's key exactly when senderIs holds in the database", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      let matched = 0
      for (const entry of entries) {
        const rows = yield* sql<{ address: string; is: boolean }>`
          SELECT e.from_address AS address, ${senderIs(sql, entry)} AS is
          FROM unnest(${senders}::text[]) AS e (from_address)`
        for (const row of rows) {
          expect({ sender: row.address, entry, is: senderKeys(row.address).includes(senderKey(entry)) })
            .toEqual({ sender: row.address, entry, is: row.is })
          if (row.is) matched++
        }
      }
      // Not a comparison of two ways of saying no: many pairings match.
      expect(matched).toBeGreaterThan(20)
    }))

  it.effect("each sender's condition is one an index of the account's emails holds, not a read of them all", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      // An account of 4,000 emails from 40 senders of 20 domains (and the senders above), its statistics
      // taken: a sender's mail is a small part of it, as in a mailbox of any size.
      const owner = yield* insertUser()
      const mailboxId = uniqueName("mbx")
      yield* sql`INSERT INTO mailboxes (id, user_id, local_part, domain, address_normalized)
                 VALUES (${mailboxId}, ${owner.userId}, ${mailboxId}, 'agents.localhost', ${`${mailboxId}@agents.localhost`})`
      const sha = "0".repeat(64)
      yield* sql`INSERT INTO blobs (sha256, size, content) VALUES (${sha}, 0, '') ON CONFLICT DO NOTHING`
      yield* sql`
        INSERT INTO emails (id, mailbox_id, user_id, message_id, thread_id, subject, from_address, to_addresses,
          sent_at, received_at, mail_from, rcpt_to, headers, text_body, has_attachments, raw_sha256, size)
        SELECT ${mailboxId} || '_' || g, ${mailboxId}, ${owner.userId}, '<' || g || '@planned>', 'th_' || g, '', 
          coalesce((${senders}::text[])[g % 60], 'user' || (g % 40) || '@sub' || (g % 20) || '.example.com'), '{}',
          now(), now() - g * interval '1 minute', '', '', '{}', '', false, ${sha}, 0
        FROM generate_series(1, 4000) g`
      yield* sql`ANALYZE emails`
      for (const entry of entries) {
        const plan = (yield* sql<{ "QUERY PLAN": string }>`
          EXPLAIN SELECT count(*) FROM emails e WHERE e.user_id = ${owner.userId} AND ${senderIs(sql, entry)}`)
          .map((row) => row["QUERY PLAN"]).join("\n")
        const index = entry.type === "address" ? "emails_from_prefix_idx" : "emails_from_domain_idx"
        // The index found, and read by the sender (its condition names the address), not all the account's.
        expect(plan, `${entry.entry}:\n${plan}`).toMatch(new RegExp(`Index Scan (on|using) ${index}`))
        expect(plan, `${entry.entry}:\n${plan}`).toMatch(/Index Cond: .*user_id = .* AND .*lower\(from_address\)/)
        expect(plan, `${entry.entry}:\n${plan}`).not.toContain("Seq Scan")
      }
    }))
})
