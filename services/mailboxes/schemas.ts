/**
 * Mailbox wire shapes (SPEC "Mailbox", "Mailboxes"). SPEC's snake_case field names are kept as is.
 *
 * Request bodies are lenient on purpose: every field is an optional string, so a missing or short
 * local part is answered by the rules (MISSING_FIELDS, LOCAL_TOO_SHORT, ...) rather than by a
 * generic schema error. A body of the wrong shape (not a JSON object, a field that is not a string)
 * is answered per surface by the handlers (BAD_REQUEST on /v1/api, VALIDATION_ERROR with
 * `details.field_errors` on the dashboard's /api), which is why the endpoints accept any JSON and
 * decode it with the schemas below themselves (see src/http/mailboxes.ts).
 */
import { JSONSchema, Schema } from "effect"
import { ListParams } from "../listing.ts"
import { MAX_DISPLAY_NAME_LENGTH } from "./rules.ts"

/** A JSON `null` counts as absent, as a form would send it. */
const OptionalString = Schema.optionalWith(Schema.String, { nullable: true })

export const AddressInput = Schema.Struct({
  domain: OptionalString.annotations({ description: "Hostname; must be allowed for the account" }),
  local_part: OptionalString.annotations({ description: "Name left of the @ (recommended)" }),
  email_address: OptionalString.annotations({
    description: "A bare local part (combined with domain) or a full local@host whose host equals domain"
  }),
  display_name: Schema.optional(Schema.NullOr(Schema.String.annotations({ jsonSchema: { maxLength: MAX_DISPLAY_NAME_LENGTH } }))).annotations({
    description: "The name the mailbox's sent mail shows in its From (\"Support Agent <agent@example.com>\"), " +
      `at most ${MAX_DISPLAY_NAME_LENGTH} characters, no line breaks; null or "" for none. A change that sends only display_name keeps the address`
  })
}).annotations({ parseOptions: { errors: "all" } })
export type AddressInput = typeof AddressInput.Type

export const DeleteInput = Schema.Struct({
  confirm_email_address: OptionalString.annotations({ description: "Must equal the mailbox's full address exactly" })
}).annotations({ parseOptions: { errors: "all" } })
export type DeleteInput = typeof DeleteInput.Type

/**
 * The endpoint payload for `schema`: any JSON value on the wire (so that the handler, not the
 * generic decoder, decides how a wrong shape is reported), documented in OpenAPI as `schema`.
 */
export const JsonBody = <A, I>(schema: Schema.Schema<A, I>, identifier: string) => {
  // The shape itself, not a `$ref` to a `$defs` entry the document would not carry (a top-level
  // identifier on `schema` is the one this annotation gives). Flat bodies only: anything nested
  // with an identifier would land in `definitions`, which nothing publishes.
  const definitions = {}
  const shape = JSONSchema.fromAST(schema.ast, { definitions, target: "openApi3.1", topLevelReferenceStrategy: "skip" })
  if (Object.keys(definitions).length > 0) throw new Error(`JsonBody(${identifier}): nested identified schemas are not published`)
  return Schema.Unknown.annotations({ identifier, jsonSchema: shape })
}

export const AddressBody = JsonBody(AddressInput, "MailboxAddressInput")
export const DeleteBody = JsonBody(DeleteInput, "DeleteMailboxInput")

/** The list's query: SPEC's common list parameters, sorted by creation time. */
export const MailboxListParams = ListParams(["created_at"] as const, { createdAt: "created_at" })

export const CheckEmailParams = Schema.Struct({
  local_part: Schema.optional(Schema.String),
  domain: Schema.optional(Schema.String.annotations({ description: "Required; missing gives 400 MISSING_FIELDS" })),
  email_address: Schema.optional(Schema.String),
  exclude_mailbox_id: Schema.optional(
    Schema.String.annotations({ description: "Treat this mailbox's current address as available (rename flow)" })
  )
})

export const MailboxStatus = Schema.Literal("active").annotations({ description: "`active` is the only value shown" })

export const Mailbox = Schema.Struct({
  mailbox_id: Schema.String.annotations({ description: "Stays the same across rename and domain migration" }),
  email_address: Schema.String.annotations({ description: "local@domain; globally unique across all users" }),
  domain: Schema.String,
  status: MailboxStatus,
  namespace: Schema.String.annotations({ description: "The owning user's namespace (their user id)" }),
  created_at: Schema.String,
  display_name: Schema.NullOr(Schema.String).annotations({
    description: "The name its sent mail shows in its From; null when it has none (the From is the bare address)"
  })
}).annotations({ identifier: "Mailbox" })
export type Mailbox = typeof Mailbox.Type

export const RenamedMailbox = Schema.Struct({
  previous_email_address: Schema.String,
  mailbox: Mailbox.pipe(Schema.pick("mailbox_id", "email_address", "domain", "status", "display_name"))
}).annotations({ identifier: "RenamedMailbox" })
export type RenamedMailbox = typeof RenamedMailbox.Type

export const DeletedMailbox = Schema.Struct({ deleted: Schema.Literal(true) }).annotations({ identifier: "DeletedMailbox" })

/** check-email's answer: a rule failure is a 200 with `valid: false`, not an error. */
export type EmailCheck =
  | { readonly valid: true; readonly email_address: string }
  | { readonly valid: false; readonly code: string; readonly message: string; readonly details: Record<string, unknown> }
