/**
 * Mailboxes on `{app_url}`: the same routes for API keys under /v1/api and for dashboard sessions
 * under /api. Some answers carry `mailbox` / `mailboxes` next to `success` instead of `data`. Bodies
 * accept any JSON: the handlers decode them, so that SPEC's codes (MISSING_FIELDS, LOCAL_TOO_SHORT,
 * ...) come from the rules and a wrong shape is reported as each surface requires.
 */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import {
  BadRequest,
  Details,
  DisallowedLocal,
  DomainMismatch,
  DomainNotAllowed,
  EmailTaken,
  InvalidLocal,
  LocalTooShort,
  MailboxQuotaReached,
  MissingFields,
  NotFound,
  ValidationError
} from "../../../services/errors.ts"
import { ListMeta } from "../../../services/listing.ts"
import {
  AddressBody,
  CheckEmailParams,
  DeleteBody,
  DeletedMailbox,
  Mailbox,
  MailboxListParams,
  RenamedMailbox
} from "../../../services/mailboxes/schemas.ts"
import { Ok } from "../envelope.ts"
import { envelope } from "../errors.ts"
import { ApiAuthentication, SessionAuthentication } from "../security.ts"

const MailboxCreated = Schema.Struct({ success: Schema.Literal(true), mailbox: Mailbox }).annotations({ identifier: "MailboxCreated" })
const MailboxFound = Schema.Struct({ success: Schema.Literal(true), mailbox: Mailbox }).annotations({ identifier: "MailboxFound" })
const MailboxList = Schema.Struct({ success: Schema.Literal(true), mailboxes: Schema.Array(Mailbox), meta: ListMeta })
  .annotations({ identifier: "MailboxList" })

/** check-email: a rule failure (422 or 409 codes) is a 200 with `valid: false`. */
const EmailCheckResult = Schema.Union(
  Schema.Struct({ success: Schema.Literal(true), valid: Schema.Literal(true), email_address: Schema.String }),
  Schema.Struct({
    success: Schema.Literal(true),
    valid: Schema.Literal(false),
    code: Schema.String,
    message: Schema.String,
    details: Details
  })
).annotations({ identifier: "EmailCheckResult" })

const MailboxPath = Schema.Struct({ mailboxId: Schema.String })

/**
 * How create and rename refuse an address (SPEC "Mailbox error codes"): a body of the wrong shape
 * (BAD_REQUEST on /v1/api, VALIDATION_ERROR on /api), a missing field, a broken rule, a domain not
 * allowed, an address taken. check-email answers the 422s and the 409 as `valid: false` instead.
 */
const AddressRefusals = Schema.Union(
  envelope(BadRequest),
  envelope(MissingFields),
  envelope(ValidationError),
  envelope(EmailTaken),
  envelope(LocalTooShort),
  envelope(InvalidLocal),
  envelope(DisallowedLocal),
  envelope(DomainMismatch),
  envelope(DomainNotAllowed)
)

const mailboxEndpoints = <const Name extends string>(name: Name) =>
  HttpApiGroup.make(name)
    .add(
      HttpApiEndpoint.get("list", "/mailboxes")
        .setUrlParams(MailboxListParams)
        .addSuccess(MailboxList)
        .annotateContext(OpenApi.annotations({
          summary: "List mailboxes",
          description: "The caller's active mailboxes, newest first, under `mailboxes`, with the common list parameters " +
            "(limit 1-100, default 20; offset; sort createdAt:asc|desc); meta has total, limit, offset, hasMore"
        }))
    )
    .add(
      HttpApiEndpoint.post("create", "/mailboxes")
        .setPayload(AddressBody)
        .addSuccess(MailboxCreated, { status: 201 })
        .addError(AddressRefusals)
        .addError(envelope(MailboxQuotaReached))
        .annotate(OpenApi.Summary, "Create a mailbox")
        .annotate(
          OpenApi.Description,
          "A new address: local_part (or email_address) and domain, held to SPEC's rules (at least 5 characters, letters, digits, " +
            "'.', '_', '-', not reserved, unique across all users, on a domain the plan allows). Answers 201 with `mailbox`"
        )
    )
    .add(
      HttpApiEndpoint.get("checkEmail", "/mailboxes/check-email")
        .setUrlParams(CheckEmailParams)
        .addSuccess(EmailCheckResult)
        .addError(envelope(BadRequest))
        .addError(envelope(MissingFields))
        .annotate(OpenApi.Summary, "Check an address")
        .annotate(
          OpenApi.Description,
          "Applies the create rules without creating: a rule failure is 200 `valid: false` with its code (LOCAL_TOO_SHORT, EMAIL_TAKEN, ...); " +
            "exclude_mailbox_id counts that mailbox's own address as free (rename)"
        )
    )
    .add(
      HttpApiEndpoint.get("get", "/mailboxes/:mailboxId")
        .setPath(MailboxPath)
        .addSuccess(MailboxFound)
        .addError(envelope(NotFound))
        .annotateContext(OpenApi.annotations({
          summary: "Read a mailbox",
          description: "One of the caller's active mailboxes, under `mailbox`, as the list shows it; 404 NOT_FOUND when it is " +
            "another account's, deleted or unknown"
        }))
    )
    .add(
      HttpApiEndpoint.patch("rename", "/mailboxes/:mailboxId")
        .setPath(MailboxPath)
        .setPayload(AddressBody)
        .addSuccess(Ok(RenamedMailbox))
        .addError(AddressRefusals)
        .addError(envelope(NotFound))
        .annotateContext(OpenApi.annotations({
          summary: "Rename a mailbox",
          description: "A new address by the create rules; mailbox_id and stored mail stay"
        }))
    )
    .add(
      HttpApiEndpoint.del("remove", "/mailboxes/:mailboxId")
        .setPath(MailboxPath)
        .setPayload(DeleteBody)
        .addSuccess(Ok(DeletedMailbox))
        .addError(envelope(BadRequest))
        .addError(envelope(ValidationError))
        .addError(envelope(NotFound))
        .annotateContext(OpenApi.annotations({
          summary: "Delete a mailbox",
          description: "Soft-deletes the mailbox and hides its mail; confirm_email_address must equal its full address exactly"
        }))
    )

export class MailboxesGroup extends mailboxEndpoints("mailboxes")
  .middleware(ApiAuthentication)
  .prefix("/v1/api")
  .annotate(OpenApi.Title, "Mailboxes")
  .annotate(OpenApi.Description, "The addresses agents receive mail at (API keys, under /v1/api)")
{}

export class DashboardMailboxesGroup extends mailboxEndpoints("dashboardMailboxes")
  .middleware(SessionAuthentication)
  .prefix("/api")
  .annotate(OpenApi.Title, "Mailboxes (dashboard session)")
  .annotate(OpenApi.Description, "As /v1/api/mailboxes; a body of the wrong shape gives VALIDATION_ERROR with details.field_errors")
{}
