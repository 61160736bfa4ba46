import { Schema } from "effect"
import { maxCharacters, minCharacters, oneLine, trimmed } from "../characters.ts"
import { Plan } from "../plans/plans.ts"

/** The most mailboxes one key is limited to. */
export const MAX_KEY_MAILBOXES = 100

const MailboxIds = Schema.Array(Schema.String).pipe(
  Schema.minItems(1, { message: () => "must list at least one mailbox id (left out: the whole account)" }),
  Schema.maxItems(MAX_KEY_MAILBOXES, { message: () => `must list at most ${MAX_KEY_MAILBOXES} mailbox ids` })
)

/** What a key may do: everything its owner may (within its mailboxes), or read only. */
export const KeyPermission = Schema.Literal("full_access", "read_only").annotations({
  description: "full_access (the default): everything the account may do, within the key's mailboxes. read_only: reading " +
    "mail, conversations, drafts, lists, webhooks, stats and events, and searching; every change (sending, labels, " +
    "deletions, keys, webhooks, mailboxes, domains, billing) is 403 FORBIDDEN, and its MCP tools are the reading ones"
})
export type KeyPermission = typeof KeyPermission.Type

export const CreateKeyInput = Schema.Struct({
  name: trimmed({ minLength: 1, maxLength: 100 }).pipe(minCharacters(1, "must be 1-100 characters"), maxCharacters(100, "must be 1-100 characters"), oneLine),
  expirationDays: Schema.optional(
    Schema.Number.pipe(
      Schema.int({ message: () => "must be a whole number of days from 1 to 365" }),
      Schema.between(1, 365, { message: () => "must be a whole number of days from 1 to 365" })
    )
  ),
  mailboxIds: Schema.optional(Schema.NullOr(MailboxIds).annotations({
    description: "Limit the key to these mailboxes of the account: it reads, sends and manages their mail only, " +
      "sees no other mailbox, and is refused account-wide routes (keys, domains, billing, account lists). " +
      "Left out or null (as a key answers it): the whole account"
  })),
  permission: Schema.optional(KeyPermission)
}).annotations({ identifier: "CreateApiKeyInput", parseOptions: { errors: "all", onExcessProperty: "error" } })
export type CreateKeyInput = typeof CreateKeyInput.Type

export const UpdateKeyInput = Schema.Struct({
  name: Schema.optional(CreateKeyInput.fields.name),
  mailboxIds: Schema.optional(Schema.NullOr(MailboxIds).annotations({
    description: "Limit the key to these mailboxes instead (it applies at once, on every node); null: the whole account"
  })),
  permission: Schema.optional(KeyPermission.annotations({ description: "What the key may do from now on (at once, on every node)" }))
}).annotations({ identifier: "UpdateApiKeyInput", parseOptions: { errors: "all", onExcessProperty: "error" } })
export type UpdateKeyInput = typeof UpdateKeyInput.Type

const common = {
  keyId: Schema.String,
  name: Schema.String,
  keyPrefix: Schema.String.annotations({ description: "Masked start of the key" }),
  plan: Plan,
  rateLimit: Schema.Number.annotations({ description: "Requests per minute allowed for the key" }),
  createdAt: Schema.String,
  expirationTs: Schema.NullOr(Schema.String),
  mailboxIds: Schema.NullOr(Schema.Array(Schema.String)).annotations({
    description: "The mailboxes the key is limited to; null: the whole account"
  }),
  permission: KeyPermission
}

export const ApiKey = Schema.Struct({
  ...common,
  lastUsed: Schema.NullOr(Schema.String)
}).annotations({ identifier: "ApiKey" })
export type ApiKey = typeof ApiKey.Type

export const CreatedApiKey = Schema.Struct({
  ...common,
  apiKey: Schema.String.annotations({ description: "The full key. Shown only once: store it now." })
}).annotations({ identifier: "CreatedApiKey" })
export type CreatedApiKey = typeof CreatedApiKey.Type

export const RevokedApiKey = Schema.Struct({
  keyId: Schema.String,
  revoked: Schema.Literal(true)
}).annotations({ identifier: "RevokedApiKey" })

/** What the key list sorts by. */
export const keySortFields = ["createdAt", "name", "lastUsed", "expirationTs"] as const
export type KeySortField = (typeof keySortFields)[number]
/** The snake_case every other list sorts by, taken for the key's own camelCase fields. */
export const keySortAliases = { created_at: "createdAt", last_used: "lastUsed", expiration_ts: "expirationTs" } as const
