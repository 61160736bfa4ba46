/**
 * A sender narrowed by in the vector index (its keys, `senderKeys` / `senderKey`) is the sender the
 * lists and word search narrow by in SQL (`senderIs`): for every pairing of stored senders and
 * entries below, the key is among the sender's keys exactly when the database says `senderIs`.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { senderIs, senderKey, senderKeys } from "../../services/mail/narrowing.ts"
import type { Entry } from "../../services/mail/sender-list-rules.ts"
import { testDatabase } from "../support/database.ts"

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
})
