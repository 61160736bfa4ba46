/**
 * Allow and block lists (issue 20, item 3; the rules are services/mail/sender-list-rules.ts), for
 * API keys under /v1/api and for dashboard sessions under /api:
 *
 *   /lists/{list}                                  the account's list: every mailbox of it
 *   /lists/{list}/{entry}
 *   /mailboxes/{mailbox_id}/lists/{list}           one mailbox's list
 *   /mailboxes/{mailbox_id}/lists/{list}/{entry}
 *
 * `{list}` is `allow` or `block`: two resources, each a set of entries, so the name is a path
 * segment and each list pages on its own. An entry is its own identity (the normalised address or
 * domain), so it is removed by naming it, as `/suppressions/{address}` is; it needs no id.
 * Adding an entry already on the list answers 200 with the entry as it was (201 when added): a
 * retried add is safe.
 */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { NotFound, SenderListFull, ValidationError } from "../../../services/errors.ts"
import { ListMeta, ListParams } from "../../../services/listing.ts"
import { EntryInput, entrySortFields, ListName, MAX_ENTRIES_PER_LIST, SenderListEntry } from "../../../services/mail/sender-list-rules.ts"
import { Ok, OkWithMeta } from "../envelope.ts"
import { envelope } from "../errors.ts"
import { ApiAuthentication, SessionAuthentication } from "../security.ts"

const AccountListPath = Schema.Struct({ list: ListName })
const AccountEntryPath = Schema.Struct({ list: ListName, entry: Schema.String })
const MailboxListPath = Schema.Struct({ mailboxId: Schema.String, list: ListName })
const MailboxEntryPath = Schema.Struct({ mailboxId: Schema.String, list: ListName, entry: Schema.String })
export const EntryListParams = ListParams(entrySortFields)

export const RemovedEntry = Schema.Struct({
  entry: Schema.String,
  list: ListName,
  mailbox_id: Schema.NullOr(Schema.String),
  deleted: Schema.Literal(true)
}).annotations({ identifier: "RemovedSenderListEntry" })

const RULES = "Block wins over allow; every allow list with entries (the account's, the mailbox's) must name the sender. " +
  "MAIL FROM is judged at RCPT (550 5.7.1); a blocked header From is kept, labelled `blocked`, and not announced"

const listEndpoints = <const Name extends string>(name: Name) =>
  HttpApiGroup.make(name)
    .add(
      HttpApiEndpoint.get("listAccount", "/lists/:list")
        .setPath(AccountListPath)
        .setUrlParams(EntryListParams)
        .addSuccess(OkWithMeta(Schema.Array(SenderListEntry), ListMeta))
        .addError(envelope(ValidationError))
        .addError(envelope(NotFound))
        .annotateContext(OpenApi.annotations({
          summary: "List the account's allow or block list",
          description: `Entries that apply to every mailbox of the account, newest first (limit 1-100, default 20; offset). ${RULES}`
        }))
    )
    .add(
      HttpApiEndpoint.post("addAccount", "/lists/:list")
        .setPath(AccountListPath)
        .setPayload(EntryInput)
        .addSuccess(Ok(SenderListEntry), { status: 201 })
        .addSuccess(Ok(SenderListEntry), { status: 200 })
        .addError(envelope(ValidationError))
        .addError(envelope(NotFound))
        .addError(envelope(SenderListFull))
        .annotateContext(OpenApi.annotations({
          summary: "Add to the account's allow or block list",
          description: `An address, a domain or *.domain, case-insensitive; 201 when added, 200 when it was on the list already. ` +
            `At most ${MAX_ENTRIES_PER_LIST} entries per list (403 SENDER_LIST_FULL)`
        }))
    )
    .add(
      HttpApiEndpoint.del("removeAccount", "/lists/:list/:entry")
        .setPath(AccountEntryPath)
        .addSuccess(Ok(RemovedEntry))
        .addError(envelope(ValidationError))
        .addError(envelope(NotFound))
        .annotateContext(OpenApi.annotations({
          summary: "Remove from the account's allow or block list",
          description: "The entry as it was added, in any case (URL-encoded); 404 when it is not on the list"
        }))
    )
    .add(
      HttpApiEndpoint.get("listMailbox", "/mailboxes/:mailboxId/lists/:list")
        .setPath(MailboxListPath)
        .setUrlParams(EntryListParams)
        .addSuccess(OkWithMeta(Schema.Array(SenderListEntry), ListMeta))
        .addError(envelope(ValidationError))
        .addError(envelope(NotFound))
        .annotateContext(OpenApi.annotations({
          summary: "List a mailbox's allow or block list",
          description: `Entries that apply to this mailbox only, newest first. ${RULES}`
        }))
    )
    .add(
      HttpApiEndpoint.post("addMailbox", "/mailboxes/:mailboxId/lists/:list")
        .setPath(MailboxListPath)
        .setPayload(EntryInput)
        .addSuccess(Ok(SenderListEntry), { status: 201 })
        .addSuccess(Ok(SenderListEntry), { status: 200 })
        .addError(envelope(ValidationError))
        .addError(envelope(NotFound))
        .addError(envelope(SenderListFull))
        .annotateContext(OpenApi.annotations({
          summary: "Add to a mailbox's allow or block list",
          description: "As for the account's list; 404 for a mailbox that is not the caller's"
        }))
    )
    .add(
      HttpApiEndpoint.del("removeMailbox", "/mailboxes/:mailboxId/lists/:list/:entry")
        .setPath(MailboxEntryPath)
        .addSuccess(Ok(RemovedEntry))
        .addError(envelope(ValidationError))
        .addError(envelope(NotFound))
        .annotateContext(OpenApi.annotations({
          summary: "Remove from a mailbox's allow or block list",
          description: "404 when the entry is not on the list, or the mailbox is not the caller's"
        }))
    )

export class SenderListsGroup extends listEndpoints("senderLists")
  .middleware(ApiAuthentication)
  .prefix("/v1/api")
  .annotate(OpenApi.Title, "Allow and block lists")
  .annotate(OpenApi.Description, "Which senders the account and each mailbox accept mail from")
{}

export class DashboardSenderListsGroup extends listEndpoints("dashboardSenderLists")
  .middleware(SessionAuthentication)
  .prefix("/api")
  .annotate(OpenApi.Title, "Allow and block lists (dashboard)")
  .annotate(OpenApi.Description, "The allow and block list routes for dashboard sessions")
{}
