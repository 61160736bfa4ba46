/**
 * What a key limited to some mailboxes (`Principal.mailboxes`) may touch: the mail of those mailboxes
 * only. Whatever lies outside is answered as the routes answer what does not exist (404 with the same
 * message and details), so that such a key sees an account holding its mailboxes only, and learns
 * nothing of the rest. A principal without a limit reaches everything here at no cost.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Option } from "effect"
import { NotFound, ValidationError } from "../errors.ts"
import { emailNotFound, threadsNotFound } from "../mail/emails.ts"
import { mailboxNotFound } from "../mailboxes/owned.ts"
import type { Principal } from "./principal.ts"

/** Who asks: the account, and the mailboxes its key is limited to, if it is. */
type Caller = Pick<Principal, "userId" | "mailboxes">

/**
 * Nothing to check for a principal without a limit; for a limited key, `check` of the mailboxes it
 * reaches: the query that decides, and the refusal when it finds anything outside them.
 */
const whenLimited = <E>(principal: Caller, check: (reached: ReadonlyArray<string>) => Effect.Effect<void, E>) =>
  Option.match(principal.mailboxes, { onNone: () => Effect.void, onSome: check })

/** Nothing when `principal` reaches `mailboxId` (any, without a limit); else the mailbox's 404, as for one that does not exist. */
export const reachesMailbox = (principal: Caller, mailboxId: string) =>
  whenLimited(principal, (reached) => reached.includes(mailboxId) ? Effect.void : Effect.fail(mailboxNotFound(mailboxId)))

export class MailboxReach extends Effect.Service<MailboxReach>()("mailroom/MailboxReach", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const mailbox = reachesMailbox

    /**
     * Nothing when every one of `emailIds` lies in a mailbox `principal` reaches; else the emails' 404,
     * naming the others. An id of another mailbox and one of no email are told alike, and here, before
     * the route reads its body: were unknown ids left to the route, a bad body would answer 400 for them
     * and 404 for another mailbox's, telling the key which ids exist.
     */
    const emails = (principal: Caller, emailIds: ReadonlyArray<string>) =>
      whenLimited(principal, (reached) =>
        Effect.flatMap(
          sql<{ id: string }>`
            SELECT id FROM emails
            WHERE id = ANY(${[...emailIds]}::text[]) AND user_id = ${principal.userId} AND mailbox_id = ANY(${[...reached]}::text[])`,
          (inside) => {
            const found = new Set(inside.map((row) => row.id))
            const others = [...new Set(emailIds)].filter((id) => !found.has(id))
            return others.length === 0 ? Effect.void : Effect.fail(emailNotFound(others))
          }
        ))

    /** Nothing when each of `threadIds` lies in a mailbox `principal` reaches; else the threads' 404, naming the others (as `emails`). */
    const threads = (principal: Caller, threadIds: ReadonlyArray<string>) =>
      whenLimited(principal, (reached) =>
        Effect.flatMap(
          sql<{ threadId: string }>`
            SELECT DISTINCT thread_id FROM emails
            WHERE thread_id = ANY(${[...new Set(threadIds)]}::text[]) AND user_id = ${principal.userId}
              AND mailbox_id = ANY(${[...reached]}::text[])`,
          (inside) => {
            const found = new Set(inside.map((row) => row.threadId))
            const others = [...new Set(threadIds)].filter((id) => !found.has(id)).sort()
            return others.length === 0 ? Effect.void : Effect.fail(threadsNotFound(others))
          }
        ))

    /** Nothing when the account's thread `threadId`, if it holds one, is of a mailbox `principal` reaches; else its 404. */
    const thread = (principal: Caller, threadId: string) => threads(principal, [threadId])

    /**
     * Nothing when the account's webhook `webhookId`, if it holds one, listens to mailboxes `principal`
     * reaches only (a webhook of the whole account reaches the rest); else its 404.
     */
    const webhook = (principal: Caller, webhookId: string) =>
      whenLimited(principal, (reached) =>
        Effect.flatMap(
          sql`
            SELECT 1 FROM webhooks
            WHERE id = ${webhookId} AND user_id = ${principal.userId}
              AND (mailbox_ids IS NULL OR NOT (mailbox_ids <@ ${[...reached]}::text[]))`,
          (outside) =>
            outside.length === 0 ? Effect.void : Effect.fail(new NotFound({ message: "Webhook not found", details: { webhook_id: webhookId } }))
        ))

    /** Nothing when the account's meeting `meetingId`, if it holds one, is organized by a mailbox `principal` reaches; else its 404. */
    const meeting = (principal: Caller, meetingId: string) =>
      whenLimited(principal, (reached) =>
        Effect.flatMap(
          sql`
            SELECT 1 FROM meetings
            WHERE id = ${meetingId} AND user_id = ${principal.userId} AND NOT (mailbox_id = ANY(${[...reached]}::text[]))`,
          (outside) =>
            outside.length === 0 ? Effect.void : Effect.fail(new NotFound({ message: "Meeting not found", details: { meeting_id: meetingId } }))
        ))

    /**
     * The mailboxes a webhook `principal` makes or changes listens to (`field`, as asked: left out,
     * null for every mailbox, or some): as asked for a principal without a limit; for a limited key,
     * its own mailboxes when left out, and never null or a mailbox outside them (refused as an unknown
     * one is).
     */
    const listening = (principal: Caller, asked: ReadonlyArray<string> | null | undefined, field: string, whenLeftOut: "all" | "unchanged") =>
      Option.match(principal.mailboxes, {
        onNone: () => Effect.succeed(asked),
        onSome: (reached) => {
          if (asked === undefined) return Effect.succeed(whenLeftOut === "all" ? reached : undefined)
          if (asked === null) {
            return Effect.fail(ValidationError.field(field, "must name some of this key's mailboxes: a key limited to mailboxes listens to those only"))
          }
          const outside = asked.filter((id) => !reached.includes(id))
          return outside.length === 0
            ? Effect.succeed(asked)
            : Effect.fail(ValidationError.field(field, `not a mailbox of this account: ${Array.from(new Set(outside)).join(", ")}`))
        }
      })

    return { mailbox, emails, thread, threads, webhook, meeting, listening } as const
  })
}) {}
