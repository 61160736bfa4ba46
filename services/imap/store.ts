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

    /** STORE of a permanent flag: the label change on the emails; their labels now, by email id. */
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
     * STORE of kept flags (\Answered, \Deleted, \Draft) and keywords: the flags each email now has, by
     * email id (one left out has none kept).
     */
    const keepFlags = Effect.fn("ImapStore.keepFlags")(
      function*(principal: Principal, mailboxId: string, emailIds: ReadonlyArray<string>, change: KeptFlagChange) {
        if (principal.readOnly) return yield* readOnly
        const now = yield* views.keepFlags(mailboxId, emailIds, change)
        // The account's other sessions (other devices) idling on the folder look again now, not at their next poll.
        yield* bus.broadcast(subjects.imapFlagsKept(principal.userId), new Uint8Array(0))
        // Flags added reach every email still there: one missing was deleted meanwhile.
        if (change.add.length > 0 && now.size < new Set(emailIds).size) return yield* expungeIssued
        return now
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
    return { folders, resolve, sync, version, status, raw, search, sentCopy, carrying, signIn, recheck, changeLabels, keepFlags, deleteEmails } as const
  })
}) {}
