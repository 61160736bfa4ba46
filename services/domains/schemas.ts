/**
 * Custom domains on the wire (SPEC "Domain", "Mailbox migration entry", "Domains"; DESIGN.md §4).
 */
import { Schema } from "effect"
import { ListMeta, ListParams } from "../listing.ts"

export const DnsRecord = Schema.Struct({
  type: Schema.Literal("TXT", "MX"),
  name: Schema.String.annotations({ description: "@ is the domain itself; other names are relative to it" }),
  value: Schema.String,
  priority: Schema.optional(Schema.Number)
}).annotations({ identifier: "DnsRecord" })
export type DnsRecord = typeof DnsRecord.Type

export const Domain = Schema.Struct({
  domain_id: Schema.String,
  domain_name: Schema.String,
  verification_token: Schema.String.annotations({ description: "The whole TXT value: <verify_prefix>=<token>" }),
  verified: Schema.Boolean,
  receives_mail: Schema.Boolean.annotations({
    description: "Whether mail to the domain's addresses is delivered now: it is verified and the account's plan includes custom domains. " +
      "An account back on the free plan keeps the domain's mailboxes and their mail, but new mail to them is refused for now " +
      "(450 4.2.1, so senders retry) until the plan includes custom domains again"
  }),
  mx_configured: Schema.Boolean,
  dkim_configured: Schema.Boolean.annotations({ description: "Verification found the DKIM key Mailroom signs the domain's mail with" }),
  spf_configured: Schema.Boolean.annotations({ description: "Verification found the domain's one SPF record, letting by the hosts Mailroom's mail leaves from: read left to right as receivers do, it passes every mechanism of the SPF record in dns_records, itself or through include: or redirect=; a record that passes every host (+all, a bare all, ip4:0.0.0.0/0) names no senders and does not count" }),
  dmarc_configured: Schema.Boolean.annotations({
    description: "Verification found one DMARC record at _dmarc (any policy: the domain's mail passes DMARC by its DKIM signature)"
  }),
  created_at: Schema.String,
  mailbox_count: Schema.Number.annotations({ description: "Active mailboxes using the domain" }),
  catch_all_mailbox_id: Schema.NullOr(Schema.String).annotations({
    description: "Mail to an address of the domain that no mailbox has goes to this mailbox of the account (once the domain is verified); null: refused, 550 5.1.1"
  }),
  dns_records: Schema.Array(DnsRecord).annotations({
    description: "What to publish at the domain: the ownership TXT, the MX, the SPF record and the DKIM key its mail is signed with"
  })
}).annotations({ identifier: "Domain" })
export type Domain = typeof Domain.Type

export const DomainListMeta = Schema.Struct({
  plan: Schema.String,
  domain_limit: Schema.Number.annotations({ description: "-1 when unlimited" }),
  domain_count: Schema.Number,
  can_add_domain: Schema.Boolean
}).annotations({ identifier: "DomainListMeta" })
export type DomainListMeta = typeof DomainListMeta.Type

/** The list's query: SPEC's common list parameters, sorted by creation time. */
export const DomainListParams = ListParams(["created_at"] as const, { createdAt: "created_at" })

/** A page of the list: the same, with the common list parameters' page fields (domain_count still counts them all). */
export const PagedDomainListMeta = Schema.Struct({ ...DomainListMeta.fields, ...ListMeta.fields }).annotations({
  identifier: "PagedDomainListMeta"
})

export const MigrationEntry = Schema.Struct({
  mailbox_id: Schema.String,
  from_email: Schema.String,
  to_email: Schema.String,
  renamed: Schema.Boolean
}).annotations({ identifier: "MailboxMigrationEntry" })
export type MigrationEntry = typeof MigrationEntry.Type

export const Migration = Schema.Struct({
  dry_run: Schema.Boolean,
  migrated_count: Schema.Number,
  renamed_count: Schema.Number,
  migrations: Schema.Array(MigrationEntry)
}).annotations({ identifier: "MailboxMigration" })
export type Migration = typeof Migration.Type

export const DeletedDomain = Schema.Struct({ deleted: Schema.Literal(true) }).annotations({ identifier: "DeletedDomain" })

/** Bodies: every field a string (or boolean), decoded by the handlers so each surface reports errors its way. */
export const CreateDomainInput = Schema.Struct({
  domain: Schema.String
}).annotations({ identifier: "CreateDomainInput", parseOptions: { errors: "all" } })
export type CreateDomainInput = typeof CreateDomainInput.Type

export const UpdateDomainInput = Schema.Struct({
  catch_all_mailbox_id: Schema.NullOr(Schema.String).annotations({
    description: "A mailbox of the account (on any of its domains) to take the domain's mail to addresses no mailbox has; null turns the catch-all off"
  })
}).annotations({ identifier: "UpdateDomainInput", parseOptions: { errors: "all" } })
export type UpdateDomainInput = typeof UpdateDomainInput.Type

export const MigrateInput = Schema.Struct({
  target_domain: Schema.String,
  dry_run: Schema.optional(Schema.Boolean).annotations({ description: "Default true: preview only" })
}).annotations({ identifier: "MigrateMailboxesInput", parseOptions: { errors: "all" } })
export type MigrateInput = typeof MigrateInput.Type
