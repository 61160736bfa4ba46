/**
 * A mailbox's automatic reply answers each sender once per interval (services/outbound/auto-replies.ts
 * `answerOnce`), in process over the suite's database: claimed before the answer goes, kept when the
 * answer is sent or refused for good, given back when the database or the bus could not take it. The
 * responder's wiring (events, rules, the reply) is test/outbound/auto-reply.test.ts's.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Data, Effect, Exit, Option } from "effect"
import { answerOnce } from "../../services/outbound/auto-replies.ts"
import { testDatabase } from "../support/database.ts"
import { uniqueName } from "../support/services.ts"
import { insertUser } from "../support/users.ts"

class SqlError extends Data.TaggedError("SqlError")<{ readonly message: string }> {}
class RecipientSuppressed extends Data.TaggedError("RecipientSuppressed")<{ readonly message: string }> {}

layer(testDatabase, { timeout: "120 seconds" })("automatic replies: once per sender", (it) => {
  const mailbox = Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const owner = yield* insertUser()
    const id = uniqueName("mbx")
    yield* sql`INSERT INTO mailboxes (id, user_id, local_part, domain, address_normalized)
               VALUES (${id}, ${owner.userId}, ${id}, 'agents.localhost', ${`${id}@agents.localhost`})`
    return id
  })

  it.effect("answers a sender once per interval; another sender is answered on their own", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const mailboxId = yield* mailbox
      let sends = 0
      const send = Effect.sync(() => ++sends)
      expect(yield* answerOnce(sql, mailboxId, "ada@partner.test", 7, send)).toEqual(Option.some(1))
      expect(yield* answerOnce(sql, mailboxId, "ada@partner.test", 7, send)).toEqual(Option.none())
      expect(yield* answerOnce(sql, mailboxId, "grace@partner.test", 7, send)).toEqual(Option.some(2))
      // Once the interval has passed, the sender is answered again.
      yield* sql`UPDATE auto_replies_sent SET sent_at = now() - interval '8 days' WHERE mailbox_id = ${mailboxId} AND sender = 'ada@partner.test'`
      expect(yield* answerOnce(sql, mailboxId, "ada@partner.test", 7, send)).toEqual(Option.some(3))
      // Two answers to one sender at the same moment are one.
      const both = yield* Effect.all([answerOnce(sql, mailboxId, "linus@partner.test", 7, send), answerOnce(sql, mailboxId, "linus@partner.test", 7, send)], {
        concurrency: 2
      })
      expect(both.filter(Option.isSome)).toHaveLength(1)
      expect(sends).toBe(4)
    }))

  it.effect("gives the claim back when the answer failed for a passing reason, and keeps it when it was refused for good", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const mailboxId = yield* mailbox
      const failed = yield* Effect.exit(answerOnce(sql, mailboxId, "ada@partner.test", 7, Effect.fail(new SqlError({ message: "connection lost" }))))
      expect(Exit.isFailure(failed)).toBe(true)
      // Tried again (the event is redelivered): answered.
      expect(yield* answerOnce(sql, mailboxId, "ada@partner.test", 7, Effect.succeed("sent"))).toEqual(Option.some("sent"))

      const refused = answerOnce(sql, mailboxId, "gone@partner.test", 7, Effect.fail(new RecipientSuppressed({ message: "suppressed" })))
      expect(yield* refused).toEqual(Option.none())
      expect(yield* answerOnce(sql, mailboxId, "gone@partner.test", 7, Effect.succeed("sent"))).toEqual(Option.none())
    }))
})
