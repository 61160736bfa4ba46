/**
 * What the IMAP server reads and changes (RFC 3501): who signs in, what a session may change (flags
 * as labels, EXPUNGE as deletion), and the folders' numbering (views.ts).
 *
 * Who. A session signs in with the mailbox's address as its user name and an API key as its password:
 * a key of the mailbox's account that reaches the mailbox (a key limited to other mailboxes does not).
 * A read-only key reads and changes no flag. The key is asked again before every command (`recheck`),
 * so a revoked key's sessions stop at their next command. Signing in counts as one request of the
 * key's rate limit; commands after it do not (a mail program issues many).
 */
import { SqlClient } from "@effect/sql"
import { Effect, Option } from "effect"
import { Authenticator } from "../accounts/authenticator.ts"
import { Bus, subjects } from "../bus/bus.ts"
import { deliver, type Publication } from "../bus/outbox.ts"
import type { Principal } from "../accounts/principal.ts"
import { Deletions } from "../mail/deletion.ts"
import type { LabelChange } from "../mail/label-rules.ts"
import { Labels } from "../mail/labels.ts"
import { ImapRefused, outage } from "./refusals.ts"
import { FolderViews, type KeptFlagChange } from "./views.ts"

export interface SignedIn {
  readonly principal: Principal
  readonly mailboxId: string
  readonly address: string
}

export class ImapStore extends Effect.Service<ImapStore>()("mailroom/ImapStore", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const authenticator = yield* Authenticator
    const labels = yield* Labels
    const deletions = yield* Deletions
    const views = yield* FolderViews
    const bus = yield* Bus

    const mailboxOf = (principal: Principal, address: string) =>
      Effect.gen(function*() {
        const rows = yield* sql<{ id: string; address: string }>`
          SELECT id, local_part || '@' || domain AS address FROM mailboxes
          WHERE user_id = ${principal.userId} AND address_normalized = ${address.trim().toLowerCase()} AND status = 'active'`
        const row = rows[0]
        const reached = row !== undefined &&
          Option.match(principal.mailboxes, { onNone: () => true, onSome: (ids) => ids.includes(row.id) })
        return reached ? row : undefined
      })

    /** LOGIN / AUTHENTICATE: the mailbox `address` names, for the API key given as the password. */
    const signIn = Effect.fn("ImapStore.signIn")(
      function*(address: string, apiKey: string) {
        const { decision, principal } = yield* authenticator.authenticate({ kind: "apiKey", secret: apiKey })
        if (!decision.allowed) {
          return yield* new ImapRefused({
            code: "LIMIT",
            text: `Rate limit of ${decision.limit} requests a ${decision.window} reached; try again in ${decision.retryAfter} s`
          })
        }
        const mailbox = yield* mailboxOf(principal, address)
        if (mailbox === undefined) {
          return yield* new ImapRefused({
            code: "AUTHENTICATIONFAILED",
            text: "The user name must be the address of a mailbox this API key reaches"
          })
        }
        return { principal, mailboxId: mailbox.id, address: mailbox.address } satisfies SignedIn
      },
      Effect.catchTags({
        Unauthorized: () =>
          Effect.fail(new ImapRefused({ code: "AUTHENTICATIONFAILED", text: "Authentication failed: the password must be a valid API key" })),
        SqlError: outage
      })
    )

    /** Before each command: the key still valid, the mailbox still there and reached. */
    const recheck = Effect.fn("ImapStore.recheck")(
      function*(apiKey: string, mailboxId: string) {
        const principal = yield* authenticator.identify({ kind: "apiKey", secret: apiKey })
        const rows = yield* sql`SELECT 1 FROM mailboxes WHERE id = ${mailboxId} AND user_id = ${principal.userId} AND status = 'active'`
        if (rows.length === 0) return yield* new ImapRefused({ code: "NONEXISTENT", text: "The mailbox no longer exists" })
        // Narrowed (PATCH /v1/api-keys/{id}) to other mailboxes: the mailbox is there, the key no longer reaches it.
        if (!Option.match(principal.mailboxes, { onNone: () => true, onSome: (ids) => ids.includes(mailboxId) })) {
          return yield* new ImapRefused({ code: "NONEXISTENT", text: "This API key no longer reaches the mailbox: sign in with one that does" })
        }
        return principal
      },
      Effect.catchTags({
        Unauthorized: () => Effect.fail(new ImapRefused({ code: "AUTHENTICATIONFAILED", text: "The API key is no longer valid" })),
        SqlError: outage
      })
    )

    const readOnly = new ImapRefused({ code: "NOPERM", text: "This API key is read-only: it changes nothing" })
    const expungeIssued = new ImapRefused({ code: "EXPUNGEISSUED", text: "Some of these messages were deleted meanwhile; NOOP to see" })

    /** A label change on the emails (a FETCH that reads them: \\Seen; COPY to a label): their labels now, by email id. */
    const changeLabels = Effect.fn("ImapStore.changeLabels")(function*(principal: Principal, emailIds: ReadonlyArray<string>, change: LabelChange) {
      if (principal.readOnly) return yield* readOnly
      const rows = yield* labels.update(principal.userId, emailIds, change).pipe(
        Effect.catchAll((error) =>
          error._tag === "NotFound"
            ? Effect.fail(expungeIssued)
            : error._tag === "ValidationError" || error._tag === "FactLabel"
            ? Effect.fail(new ImapRefused({ code: "CANNOT", text: error.message }))
            : outage(error)
        )
      )
      return new Map(rows.map((row) => [row.id, row.labels]))
    })

    /**
     * STORE: the label changes (one a permanent flag, each on the emails it changes) and the kept flags
     * (\Answered, \Deleted, \Draft, keywords) of `emailIds`, all or none (RFC 3501 §6.4.6: a NO changes
     * nothing). One email of them deleted meanwhile refuses the whole STORE, [EXPUNGEISSUED] (RFC 2180
     * §4.2.1), whatever the flags: the emails are locked first, so none goes between the check and the change.
     * Answers each email's labels as changed and, with `kept`, the flags each now keeps (one left out keeps none).
     */
    const storeFlags = Effect.fn("ImapStore.storeFlags")(
      function*(
        principal: Principal,
        mailboxId: string,
        emailIds: ReadonlyArray<string>,
        labelChanges: ReadonlyArray<{ readonly emailIds: ReadonlyArray<string>; readonly change: LabelChange }>,
        kept: KeptFlagChange | undefined
      ) {
        if (principal.readOnly) return yield* readOnly
        const ids = [...new Set(emailIds)]
        const done = yield* sql.withTransaction(Effect.gen(function*() {
          const there = yield* sql<{ id: string }>`
            SELECT id FROM emails WHERE mailbox_id = ${mailboxId} AND id = ANY(${ids}::text[]) ORDER BY id FOR UPDATE`
          if (there.length < ids.length) return yield* expungeIssued
          const labelsNow = new Map<string, ReadonlyArray<string>>()
          const owed: Array<Publication> = []
          for (const step of labelChanges) {
            const changed = yield* labels.updateWithin(principal.userId, step.emailIds, step.change)
            for (const row of changed.updated) labelsNow.set(row.id, row.labels)
            owed.push(...changed.owed)
          }
          const keptNow = kept === undefined ? undefined : yield* views.keepFlags(mailboxId, ids, kept)
          return { labels: labelsNow, kept: keptNow, owed }
        })).pipe(
          Effect.catchTags({
            NotFound: () => Effect.fail(expungeIssued),
            ValidationError: (error) => Effect.fail(new ImapRefused({ code: "CANNOT", text: error.message })),
            FactLabel: (error) => Effect.fail(new ImapRefused({ code: "CANNOT", text: error.message })),
            SqlError: outage
          })
        )
        // Announced once the change is committed.
        yield* deliver(sql, bus, done.owed)
        // The account's other sessions (other devices) idling on the folder look again now, not at their next poll.
        if (done.kept !== undefined) yield* bus.broadcast(subjects.imapFlagsKept(principal.userId), new Uint8Array(0))
        return { labels: done.labels, kept: done.kept }
      }
    )

    /** EXPUNGE: the emails deleted, as DELETE /emails does (sent mail still being delivered is kept: CANNOT). */
    const deleteEmails = Effect.fn("ImapStore.deleteEmails")(function*(principal: Principal, emailIds: ReadonlyArray<string>) {
      if (principal.readOnly) return yield* readOnly
      yield* deletions.emails(principal.userId, emailIds).pipe(
        Effect.catchAll((error) =>
          error._tag === "NotFound"
            ? Effect.fail(expungeIssued)
            : error._tag === "Conflict"
            ? Effect.fail(new ImapRefused({ code: "CANNOT", text: error.message }))
            : outage(error)
        )
      )
    })

    const { carrying, folders, raw, resolve, search, sentCopy, status, sync, version } = views
    return { folders, resolve, sync, version, status, raw, search, sentCopy, carrying, signIn, recheck, changeLabels, storeFlags, deleteEmails } as const
  })
}) {}
