/**
 * A mail program's "mark all" on a large folder (STORE 1:* over 2,000 messages), in process over the
 * suite's migrated database with the real store (services/imap/store.ts) and the embedded bus: every
 * message answered with its flags, every email's label changed and announced as its own
 * `email.labels_changed` (none left in the outbox), another session told at its NOOP, and a STORE
 * naming a message deleted meanwhile still refused whole, changing none of the 1,999 others. The
 * time it takes is bench/imap-store.ts's.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import * as MemoryBus from "../../layers/memory-bus.ts"
import { Authenticator } from "../../services/accounts/authenticator.ts"
import type { Principal } from "../../services/accounts/principal.ts"
import { DependencyHealth } from "../../services/health/dependency-health.ts"
import { ImapStore } from "../../services/imap/store.ts"
import { FolderViews } from "../../services/imap/views.ts"
import { Deletions } from "../../services/mail/deletion.ts"
import { Labels } from "../../services/mail/labels.ts"
import { parseCommand } from "../../src/imap/protocol.ts"
import { makeSession } from "../../src/imap/session.ts"
import { testDatabase } from "../support/database.ts"
import { insertMailbox, type Mailbox, storeBlob } from "../support/seed-mail.ts"
import { insertUser } from "../support/users.ts"

const MESSAGES = 2_000

// Sign-in and EXPUNGE are not this suite's: the store's other services are never reached.
const services = ImapStore.Default.pipe(
  Layer.provide(Layer.succeed(Authenticator, {} as unknown as Authenticator)),
  Layer.provide(Layer.succeed(Deletions, {} as unknown as Deletions)),
  Layer.provideMerge(Layer.mergeAll(Labels.Default, FolderViews.Default)),
  Layer.provideMerge(MemoryBus.layer),
  Layer.provideMerge(DependencyHealth.Default),
  Layer.provideMerge(testDatabase)
)

/** `MESSAGES` received emails of the mailbox, unread, in one statement. */
const seed = (mailbox: Mailbox) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const raw = yield* storeBlob(new TextEncoder().encode("Subject: Many\r\n\r\nFlag me.\r\n"))
    yield* sql`
      INSERT INTO emails (id, mailbox_id, user_id, message_id, thread_id, subject, from_address, to_addresses, sent_at, received_at,
        mail_from, rcpt_to, headers, text_body, has_attachments, raw_sha256, size, labels)
      SELECT ${mailbox.mailboxId} || '_' || i, ${mailbox.mailboxId}, ${mailbox.owner.userId}, '<' || i || '@many.test>', 'thr_' || ${mailbox.mailboxId} || i,
        'Many ' || i, 'sender@example.com', ARRAY[${mailbox.address}], now() - make_interval(secs => ${MESSAGES} - i),
        now() - make_interval(secs => ${MESSAGES} - i), 'bounce@example.com', ${mailbox.address}, '{}'::jsonb, 'Flag me.', false, ${raw}, 100,
        ARRAY['inbound', 'unread']
      FROM generate_series(1, ${MESSAGES}::int) AS i`
  })

/** A session signed in to `mailbox` (sign-in stood in for), answering a command at a time with what it wrote. */
const sessionOf = (store: ImapStore, mailbox: Mailbox) => {
  const principal: Principal = {
    userId: mailbox.owner.userId,
    plan: "free",
    via: "apiKey",
    keyId: Option.none(),
    sessionId: Option.none(),
    mailboxes: Option.none(),
    readOnly: false
  }
  const signedIn = { principal, mailboxId: mailbox.mailboxId, address: mailbox.address }
  let sent = ""
  const session = makeSession(
    { ...store, signIn: () => Effect.succeed(signedIn), recheck: () => Effect.succeed(principal) } as ImapStore,
    { secure: () => true, canStartTls: () => false, clearTextAllowed: true },
    (text) => Effect.sync(() => void (sent += text))
  )
  return (line: string) =>
    Effect.gen(function*() {
      sent = ""
      yield* session.handle(yield* parseCommand(`${line}\r\n`))
      return sent
    })
}

layer(services, { timeout: 60_000 })("IMAP STORE over a large folder", (it) => {
  it.effect("flags 2,000 messages at once: every FETCH answer, every label, one labels_changed each, the other session told; still all or none", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const store = yield* ImapStore
      const mailbox = yield* insertMailbox(yield* insertUser())
      yield* seed(mailbox)
      const [a, b] = [sessionOf(store, mailbox), sessionOf(store, mailbox)]
      for (const session of [a, b]) {
        expect(yield* session(`t1 LOGIN ${mailbox.address} key`)).toMatch(/t1 OK/)
        expect(yield* session("t2 SELECT INBOX")).toMatch(new RegExp(`\\* ${MESSAGES} EXISTS\\r\\n[\\s\\S]*t2 OK`))
      }
      const eventsBefore = yield* sql<{ n: string }>`SELECT count(*) AS n FROM bus_messages WHERE subject = 'events.email.labels_changed'`

      const answer = yield* a("s1 STORE 1:* +FLAGS (\\Flagged)")
      const fetches = answer.match(/^\* \d+ FETCH \(FLAGS \(\\Flagged\)\)\r$/gm) ?? []
      expect(fetches).toHaveLength(MESSAGES)
      expect(fetches[0]).toBe("* 1 FETCH (FLAGS (\\Flagged))\r")
      expect(fetches.at(-1)).toBe(`* ${MESSAGES} FETCH (FLAGS (\\Flagged))\r`)
      expect(answer.endsWith("s1 OK STORE completed\r\n")).toBe(true)

      const flagged = yield* sql<{ n: string }>`
        SELECT count(*) AS n FROM emails WHERE mailbox_id = ${mailbox.mailboxId} AND labels = ARRAY['inbound', 'unread', 'flagged']`
      expect(Number(flagged[0]!.n)).toBe(MESSAGES)
      // Announced per email, each its own event with its own id; nothing owed is left behind.
      const events = yield* sql<{ msgId: string; data: Uint8Array }>`
        SELECT msg_id, data FROM bus_messages WHERE subject = 'events.email.labels_changed' ORDER BY seq OFFSET ${Number(eventsBefore[0]!.n)}`
      expect(events).toHaveLength(MESSAGES)
      expect(new Set(events.map((event) => event.msgId)).size).toBe(MESSAGES)
      const payloads = events.map((event) => JSON.parse(new TextDecoder().decode(event.data)))
      expect(new Set(payloads.map((payload) => payload.data.email_id)).size).toBe(MESSAGES)
      expect(payloads.every((payload) => payload.event === "email.labels_changed" && payload.data.added.join() === "flagged")).toBe(true)
      expect(yield* sql`SELECT 1 FROM outbox`).toHaveLength(0)

      // The other session hears of each at its next look.
      const told = yield* b("n1 NOOP")
      expect(told.match(/^\* \d+ FETCH \(UID \d+ FLAGS \(\\Flagged\)\)\r$/gm)).toHaveLength(MESSAGES)

      // One deleted meanwhile: a STORE naming it is refused and changes none of the others.
      yield* sql`DELETE FROM emails WHERE id = ${`${mailbox.mailboxId}_1000`}`
      expect(yield* a("s2 STORE 1:* -FLAGS (\\Flagged)")).toMatch(/^s2 NO \[EXPUNGEISSUED\]/)
      const still = yield* sql<{ n: string }>`
        SELECT count(*) AS n FROM emails WHERE mailbox_id = ${mailbox.mailboxId} AND 'flagged' = ANY(labels)`
      expect(Number(still[0]!.n)).toBe(MESSAGES - 1)
    }))
})
