/**
 * A mailbox's automatic reply (services/outbound/auto-replies.ts), for API keys under /v1/api and for
 * dashboard sessions under /api:
 *
 *   /mailboxes/{mailbox_id}/auto-reply    read (null when off), set (PUT replaces it), turn off
 */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { NotFound, ValidationError } from "../../../services/errors.ts"
import { AutoReply, AutoReplyInput, RemovedAutoReply } from "../../../services/outbound/schemas.ts"
import { Ok } from "../envelope.ts"
import { envelope } from "../errors.ts"
import { ApiAuthentication, SessionAuthentication } from "../security.ts"

const MailboxPath = Schema.Struct({ mailboxId: Schema.String })

const WHAT = "Received mail is answered from the mailbox, as a reply (In-Reply-To and References set, counted as a send), " +
  "once per sender per `interval_days`, with `Auto-Submitted: auto-replied`. As RFC 3834 has it, never answered: " +
  "automatic mail (Auto-Submitted, Precedence bulk or list, X-Auto-Response-Suppress), list mail (List-Id and the " +
  "like), bounces, program senders (no-reply, mailer-daemon, postmaster, …), mail labelled spam or blocked, mail " +
  "that does not name the mailbox in To or Cc, and the mailbox itself"

const autoReplyEndpoints = <const Name extends string>(name: Name) =>
  HttpApiGroup.make(name)
    .add(
      HttpApiEndpoint.get("get", "/mailboxes/:mailboxId/auto-reply")
        .setPath(MailboxPath)
        .addSuccess(Ok(Schema.NullOr(AutoReply)))
        .addError(envelope(NotFound))
        .annotateContext(OpenApi.annotations({ summary: "Read a mailbox's automatic reply", description: `null when it has none. ${WHAT}` }))
    )
    .add(
      HttpApiEndpoint.put("set", "/mailboxes/:mailboxId/auto-reply")
        .setPath(MailboxPath)
        .setPayload(AutoReplyInput)
        .addSuccess(Ok(AutoReply))
        .addError(envelope(ValidationError))
        .addError(envelope(NotFound))
        .annotateContext(OpenApi.annotations({
          summary: "Set a mailbox's automatic reply",
          description: `Replaces the one it has. Mail received from now (or from \`starts_at\`) until \`ends_at\` is answered. ${WHAT}`
        }))
    )
    .add(
      HttpApiEndpoint.del("remove", "/mailboxes/:mailboxId/auto-reply")
        .setPath(MailboxPath)
        .addSuccess(Ok(RemovedAutoReply))
        .addError(envelope(NotFound))
        .annotateContext(OpenApi.annotations({
          summary: "Turn a mailbox's automatic reply off",
          description: "404 when the mailbox has none"
        }))
    )

export class AutoRepliesGroup extends autoReplyEndpoints("autoReplies")
  .middleware(ApiAuthentication)
  .prefix("/v1/api")
  .annotate(OpenApi.Title, "Automatic replies")
  .annotate(OpenApi.Description, "A mailbox's answer to the mail it receives while its agent or person is away")
{}

export class DashboardAutoRepliesGroup extends autoReplyEndpoints("dashboardAutoReplies")
  .middleware(SessionAuthentication)
  .prefix("/api")
  .annotate(OpenApi.Title, "Automatic replies (dashboard)")
  .annotate(OpenApi.Description, "The automatic reply routes for dashboard sessions")
{}
