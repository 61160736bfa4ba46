/**
 * A mailbox's mbox export in process (services/mail/export.ts), over the suite's migrated database:
 * past its pages and its byte-bounded reads, every email comes once, in (received_at, id) order, even
 * when many share one microsecond; another mailbox's never. The format and the route are
 * test/api/export.test.ts's subject.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Chunk, Effect, Layer, Stream } from "effect"
import { MailExport } from "../../services/mail/export.ts"
import { testDatabase } from "../support/database.ts"
import { insertMailbox, storeBlob } from "../support/seed-mail.ts"
import { insertUser } from "../support/users.ts"

const services = MailExport.Default.pipe(Layer.provideMerge(testDatabase))

layer(services, { timeout: "60 seconds" })("MailExport", (it) => {
  it.effect("streams every email once, in order, across pages, ties on the time, and messages read apart for their size", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const user = yield* insertUser()
      const mailbox = yield* insertMailbox(user)
      const other = yield* insertMailbox(user)
      const sha = yield* storeBlob(new TextEncoder().encode("Subject: Same\r\n\r\nBody\r\n"))
      // 250 emails: 120 at one instant (a tie the id breaks, across a page's end), the rest a second
      // apart; every 50th says it is 9 MB, so it is read alone. And one of another mailbox.
      const insert = (mailboxId: string, from: number, to: number) =>
        sql`INSERT INTO emails (id, mailbox_id, user_id, message_id, thread_id, subject, from_address, to_addresses, sent_at,
                                received_at, mail_from, rcpt_to, headers, text_body, has_attachments, raw_sha256, size)
            SELECT 'eml_x' || lpad(n::text, 4, '0') || ${mailboxId}, ${mailboxId}, ${user.userId}, '<m' || n || '@x>', 'thr_' || n, 'Same',
                   'a@x', ${["b@x"]}, now(),
                   '2026-01-01T00:00:00.123456Z'::timestamptz + CASE WHEN n <= 120 THEN interval '0' ELSE (n - 120) * interval '1 second' END,
                   'sender' || n || '@example.test', 'b@x', '{}', 'Body', false, ${sha},
                   CASE WHEN n % 50 = 0 THEN 9 * 1024 * 1024 ELSE 20 END
            FROM generate_series(${from}::int, ${to}::int) AS n`
      yield* insert(mailbox.mailboxId, 1, 250)
      yield* insert(other.mailboxId, 1, 1)

      const { bytes } = yield* (yield* MailExport).mbox(user.userId, mailbox.mailboxId)
      const text = Buffer.concat(Chunk.toArray(yield* Stream.runCollect(bytes))).toString("latin1")
      const senders = [...text.matchAll(/^From (\S+) /gm)].map((match) => match[1])
      expect(senders).toEqual(Array.from({ length: 250 }, (_, i) => `sender${i + 1}@example.test`))
    }))
})
