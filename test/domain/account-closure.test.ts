/**
 * Deleting an account in process, over the suite's migrated database (services/accounts/closure.ts):
 * every row it holds goes, and its vectors, and its custom domain's DKIM key, while another account's
 * stay; its addresses are held for 30 days; the payment provider is told first, and when it cannot be
 * reached nothing is deleted; mail accepted for it before and stored after is dropped. The route and
 * what a person sees are test/api/account-deletion.test.ts's subject.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import * as MemoryBus from "../../layers/memory-bus.ts"
import { AccountClosure } from "../../services/accounts/closure.ts"
import { Principals } from "../../services/accounts/principals.ts"
import { PaymentError, PaymentProvider } from "../../services/billing/payments.ts"
import { DependencyHealth } from "../../services/health/dependency-health.ts"
import { RecipientDirectory } from "../../services/mail/directory.ts"
import { storeEmails } from "../../services/mail/store.ts"
import { Indexer } from "../../services/search/indexer.ts"
import { Vectors } from "../../services/search/vectors.ts"
import { testDatabase } from "../support/database.ts"
import { indexerWith, testVectorIndex } from "../support/search-services.ts"
import { insertEmail, insertMailbox, type Mailbox, newInbound } from "../support/seed-mail.ts"
import { uniqueName } from "../support/services.ts"
import { insertUser } from "../support/users.ts"

/** The payment provider as the closure meets it: the accounts it was told to close, or down. */
const provider = { closed: [] as Array<string>, down: false }
const payments = Layer.succeed(PaymentProvider, {
  checkout: () => Effect.die("not used"),
  portal: () => Effect.die("not used"),
  emailChanged: () => Effect.die("not used"),
  close: (userId) =>
    Effect.suspend(() =>
      provider.down ? Effect.fail(new PaymentError({ message: "connection refused" })) : Effect.sync(() => void provider.closed.push(userId))
    ),
  webhook: Option.none()
})

const services = AccountClosure.Default.pipe(
  Layer.provideMerge(Layer.mergeAll(indexerWith(), testVectorIndex, payments)),
  Layer.provideMerge(Layer.mergeAll(Principals.Default, RecipientDirectory.Default)),
  Layer.provide(MemoryBus.layer),
  Layer.provide(DependencyHealth.Default),
  Layer.provideMerge(testDatabase)
)

/** A mailbox with an email of it indexed for search (so it has vectors). */
const mailboxWithMail = (userId: string, subject: string) =>
  Effect.gen(function*() {
    const mailbox = yield* insertMailbox({ userId, plan: "free" })
    const email = yield* insertEmail(mailbox, { subject, text: `All about ${subject}`, receivedMinutesAgo: 1 })
    yield* (yield* Indexer).index(email.id)
    return mailbox
  })

/** Rows of `userId` left in the tables that hold an account's data. */
const rowsOf = (userId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ table: string; n: string }>`
      SELECT 'users' AS table, count(*) AS n FROM users WHERE id = ${userId}
      UNION ALL SELECT 'mailboxes', count(*) FROM mailboxes WHERE user_id = ${userId}
      UNION ALL SELECT 'emails', count(*) FROM emails WHERE user_id = ${userId}
      UNION ALL SELECT 'search_documents', count(*) FROM search_documents WHERE user_id = ${userId}
      UNION ALL SELECT 'api_keys', count(*) FROM api_keys WHERE user_id = ${userId}
      UNION ALL SELECT 'domains', count(*) FROM domains WHERE user_id = ${userId}
      UNION ALL SELECT 'event_log', count(*) FROM event_log WHERE user_id = ${userId}
      UNION ALL SELECT 'event_streams', count(*) FROM event_streams WHERE user_id = ${userId}
      UNION ALL SELECT 'subscriptions', count(*) FROM subscriptions WHERE user_id = ${userId}`
    return Object.fromEntries(rows.map((row) => [row.table, Number(row.n)]))
  })

const vectorsOf = (userId: string) => Effect.flatMap(Effect.flatMap(Vectors, (v) => v.collection), (c) => c.count(userId))

/** An account with a bit of everything: a key, a custom domain with its DKIM key, events, a stream. */
const fullAccount = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const user = yield* insertUser("pro")
  const mailbox = yield* mailboxWithMail(user.userId, "Quarterly invoices")
  yield* sql`INSERT INTO api_keys (id, user_id, name, key_hash, key_prefix)
             VALUES (${uniqueName("key")}, ${user.userId}, 'agent', ${uniqueName("hash")}, 'mr_live_x')`
  const domainId = uniqueName("dom")
  yield* sql`INSERT INTO domains (id, user_id, name, verification_token, verified)
             VALUES (${domainId}, ${user.userId}, ${`${domainId.replace(/_/g, "-")}.example`}, 'mailroom-verify=x', true)`
  yield* sql`INSERT INTO dkim_keys (owner, selector, private_key) VALUES (${domainId}, 'mailroom1', 'not a key')`
  yield* sql`INSERT INTO event_log (event_id, user_id, kind, payload) VALUES (${uniqueName("evt")}, ${user.userId}, 'email.received', '{}')`
  yield* sql`INSERT INTO event_streams (id, user_id) VALUES (${uniqueName("str")}, ${user.userId})`
  return { user, mailbox, domainId }
})

layer(services, { timeout: "120 seconds" })("AccountClosure", (it) => {
  it.effect("deletes everything the account holds, its vectors and DKIM key included, and leaves another account as it was", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const closure = yield* AccountClosure
      const { user, mailbox, domainId } = yield* fullAccount
      const other = yield* insertUser()
      yield* mailboxWithMail(other.userId, "Team offsite")
      const otherBefore = yield* rowsOf(other.userId)
      expect(yield* vectorsOf(user.userId)).toBeGreaterThan(0)

      const answer = yield* closure.close(user.userId)

      expect(answer).toEqual({ deleted: true, email: `${user.userId}@example.com`, mailboxes: 1, emails: 1 })
      expect(provider.closed).toContain(user.userId)
      expect(yield* rowsOf(user.userId)).toEqual({
        users: 0,
        mailboxes: 0,
        emails: 0,
        search_documents: 0,
        api_keys: 0,
        domains: 0,
        event_log: 0,
        event_streams: 0,
        subscriptions: 0
      })
      expect(yield* vectorsOf(user.userId)).toBe(0)
      expect(yield* sql`SELECT 1 FROM dkim_keys WHERE owner = ${domainId}`).toEqual([])
      // The address is held from others: its row outlives the account.
      const held = yield* sql<{ userId: string }>`SELECT user_id FROM released_addresses WHERE address_normalized = ${mailbox.address}`
      expect(held).toEqual([{ userId: user.userId }])

      expect(yield* rowsOf(other.userId)).toEqual(otherBefore)
      expect(yield* vectorsOf(other.userId)).toBe(1)
    }))

  it.effect("holds the addresses its deleted mailboxes and renames still hold, from when they were let go; not older ones", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const user = yield* insertUser()
      const recent = yield* insertMailbox(user)
      const old = yield* insertMailbox(user)
      yield* sql`UPDATE mailboxes SET status = 'deleted', deleted_at = now() - interval '5 days' WHERE id = ${recent.mailboxId}`
      yield* sql`UPDATE mailboxes SET status = 'deleted', deleted_at = now() - interval '40 days' WHERE id = ${old.mailboxId}`
      yield* sql`INSERT INTO released_addresses (address_normalized, user_id, released_at)
                 VALUES ('renamed@agents.localhost', ${user.userId}, now() - interval '2 days')`

      const answer = yield* (yield* AccountClosure).close(user.userId)

      expect(answer.mailboxes).toBe(0)
      const held = yield* sql<{ address: string; days: number }>`
        SELECT address_normalized AS address, round(extract(epoch FROM now() - released_at) / 86400)::int AS days
        FROM released_addresses WHERE user_id = ${user.userId} ORDER BY 1`
      expect(held).toEqual([
        { address: recent.address, days: 5 },
        { address: "renamed@agents.localhost", days: 2 }
      ].sort((a, b) => a.address.localeCompare(b.address)))
    }))

  it.effect("refuses with 503 and deletes nothing while the payment provider cannot be reached", () =>
    Effect.gen(function*() {
      const { user } = yield* fullAccount
      const before = yield* rowsOf(user.userId)
      provider.down = true
      const refused = yield* Effect.flip((yield* AccountClosure).close(user.userId)).pipe(
        Effect.ensuring(Effect.sync(() => void (provider.down = false)))
      )
      expect(refused._tag).toBe("ServiceUnavailable")
      expect(refused.message).toMatch(/payment provider/)
      expect(yield* rowsOf(user.userId)).toEqual(before)
      expect(yield* vectorsOf(user.userId)).toBeGreaterThan(0)
    }))

  it.effect("an unknown account is 404", () =>
    Effect.gen(function*() {
      const refused = yield* Effect.flip((yield* AccountClosure).close("usr_nobody"))
      expect(refused).toMatchObject({ _tag: "NotFound", details: { userId: "usr_nobody" } })
    }))

  it.effect("mail accepted for the account before and stored after is dropped, not retried for ever", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const user = yield* insertUser()
      const mailbox: Mailbox = yield* insertMailbox(user)
      const raw = new TextEncoder().encode("From: a@example.test\r\nSubject: Late\r\nMessage-ID: <late@test>\r\n\r\nHello")
      const accepted = yield* newInbound(mailbox, raw, "<late@test>")
      yield* (yield* AccountClosure).close(user.userId)

      expect(yield* storeEmails(sql, [accepted])).toEqual([undefined])
      expect(yield* sql`SELECT 1 FROM emails WHERE id = ${accepted.emailId}`).toEqual([])
    }))
})
