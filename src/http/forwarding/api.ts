/**
 * Forwarding a mailbox's received mail (services/mail/forwarding.ts), for API keys under /v1/api and
 * for dashboard sessions under /api:
 *
 *   /mailboxes/{mailbox_id}/forwarding             the mailbox's forwarding addresses
 *   /mailboxes/{mailbox_id}/forwarding/{address}
 *
 * An address is its own identity, so it is removed by naming it (as `/suppressions/{address}` is).
 * Adding one mails it a link to confirm (201, `pending`); a mailbox of the same account is `active` at
 * once. Adding it again answers 200 with it as it is (and mails a new link while it is pending).
 */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { ForwardingListFull, NotFound, RateLimited, ValidationError } from "../../../services/errors.ts"
import { ForwardingAddress, ForwardingInput, MAX_FORWARDS, RemovedForwarding } from "../../../services/mail/forward-rules.ts"
import { Ok } from "../envelope.ts"
import { envelope } from "../errors.ts"
import { ApiAuthentication, SessionAuthentication } from "../security.ts"

const MailboxPath = Schema.Struct({ mailboxId: Schema.String })
const AddressPath = Schema.Struct({ mailboxId: Schema.String, address: Schema.String })

const WHAT = "Received mail (not what is labelled spam or blocked) is copied, unchanged, to each active address, " +
  "and each copy's delivery shows on the email as `forwarded`"

const forwardingEndpoints = <const Name extends string>(name: Name) =>
  HttpApiGroup.make(name)
    .add(
      HttpApiEndpoint.get("list", "/mailboxes/:mailboxId/forwarding")
        .setPath(MailboxPath)
        .addSuccess(Ok(Schema.Array(ForwardingAddress)))
        .addError(envelope(NotFound))
        .annotateContext(OpenApi.annotations({
          summary: "List a mailbox's forwarding addresses",
          description: `Oldest first, each \`pending\` or \`active\`. ${WHAT}`
        }))
    )
    .add(
      HttpApiEndpoint.post("add", "/mailboxes/:mailboxId/forwarding")
        .setPath(MailboxPath)
        .setPayload(ForwardingInput)
        .addSuccess(Ok(ForwardingAddress), { status: 201 })
        .addSuccess(Ok(ForwardingAddress), { status: 200 })
        .addError(envelope(ValidationError))
        .addError(envelope(NotFound))
        .addError(envelope(ForwardingListFull))
        .addError(envelope(RateLimited))
        .annotateContext(OpenApi.annotations({
          summary: "Forward a mailbox's mail to an address",
          description: "201 `pending`: a link is mailed to the address, and its owner's confirming makes it `active` " +
            "(nothing is forwarded before); a mailbox of the same account is `active` at once. 200 when the mailbox " +
            "forwards to it already (a pending one gets a new link). Links mailed: 5 an hour per account (429). " +
            `At most ${MAX_FORWARDS} addresses per mailbox (403 FORWARDING_LIST_FULL). ${WHAT}`
        }))
    )
    .add(
      HttpApiEndpoint.del("remove", "/mailboxes/:mailboxId/forwarding/:address")
        .setPath(AddressPath)
        .addSuccess(Ok(RemovedForwarding))
        .addError(envelope(NotFound))
        .annotateContext(OpenApi.annotations({
          summary: "Stop forwarding to an address",
          description: "The address in any case (URL-encoded); 404 when the mailbox does not forward to it. Copies already queued are still delivered"
        }))
    )

export class ForwardingGroup extends forwardingEndpoints("forwarding")
  .middleware(ApiAuthentication)
  .prefix("/v1/api")
  .annotate(OpenApi.Title, "Forwarding")
  .annotate(OpenApi.Description, "Copies of a mailbox's received mail to people's addresses, each confirmed by its owner")
{}

export class DashboardForwardingGroup extends forwardingEndpoints("dashboardForwarding")
  .middleware(SessionAuthentication)
  .prefix("/api")
  .annotate(OpenApi.Title, "Forwarding (dashboard)")
  .annotate(OpenApi.Description, "The forwarding routes for dashboard sessions")
{}
