/**
 * Custom domains (SPEC "Domains"; DESIGN.md §4): register, verify ownership through DNS, move
 * mailboxes between domains, delete.
 *
 * - A hostname is verified by one account. Until then any account may claim it (registering it
 *   does not prove anything, so a claim must not keep the name's owner out): the first to verify
 *   holds it, and registering or verifying it elsewhere afterwards is 409 CONFLICT, as is a name the
 *   account has already or a shared one. The plan caps how many an account registers (free
 *   FREE_MAX_CUSTOM_DOMAINS, pro 10, enterprise unlimited); creates of one user are serialised on
 *   the user's row.
 * - Verification reads the apex's TXT records for `<VERIFY_PREFIX>=<token>` (a record split into
 *   several strings counts as one value) and its MX records: `mx_configured` is true when the most
 *   preferred MX names MX_HOST. Ownership decides `verified`; an MX not yet pointing is reported, not
 *   fatal. A verified domain stays verified.
 * - Migration moves every active mailbox of the domain to another allowed domain in one
 *   transaction, keeping mailbox ids and mail. A taken address gets `.` and 6 hex characters derived
 *   from the mailbox id, so a dry run previews exactly what applying does (unless the address is
 *   taken in between).
 */
import { SqlClient, SqlSchema } from "@effect/sql"
import { Context, Effect, Either, Option, Schema } from "effect"
import { createHash, randomBytes } from "node:crypto"
import { newId } from "../accounts/tokens.ts"
import { Dns, type DnsError } from "../dns/dns.ts"
import {
  Conflict,
  DomainHasMailboxes,
  DomainNotAllowed,
  DomainQuotaReached,
  EmailTaken,
  NotFound,
  ServiceUnavailable,
  ValidationError,
  VerificationFailed
} from "../errors.ts"
import type { Direction, Page } from "../listing.ts"
import { RecipientDirectory } from "../mail/directory.ts"
import { Mailboxes, MailboxSettings } from "../mailboxes/mailboxes.ts"
import { isUniqueViolation } from "../unique-violation.ts"
import { MAX_LOCAL_LENGTH, normalizeAddress, withSuffix } from "../mailboxes/rules.ts"
import { customDomainLimit, type Plan, receivesOnCustomDomains, reportLimit } from "../plans/plans.ts"
import { CUSTOM_DOMAIN_SELECTOR, DkimKeys } from "../outbound/dkim.ts"
import { parseDomainName } from "./names.ts"
import { spfConfigured } from "./spf.ts"
import type { DnsRecord, Domain, DomainListMeta, Migration, MigrationEntry } from "./schemas.ts"

/** What the domains feature needs from the operator's configuration. */
export class DomainSettings extends Context.Tag("mailroom/DomainSettings")<DomainSettings, {
  readonly verifyPrefix: string
  /** MX_HOST, lower-cased, without a trailing dot. */
  readonly mxHost: string
  readonly freeMaxCustomDomains: number
  /** SPF_RECORD: what a custom domain publishes so that the hosts Mailroom's mail leaves from may send for it. */
  readonly spfRecord: string
}>() {}

export interface Owner {
  readonly userId: string
  readonly plan: Plan
}

/**
 * A domain as its table holds it, with its active mailboxes counted, decoded as it is read (SqlSchema):
 * a row that does not read so is a bug here or in a migration, a defect rather than a failure of the request.
 */
const DomainRow = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  verificationToken: Schema.String,
  verified: Schema.Boolean,
  mxConfigured: Schema.Boolean,
  dkimConfigured: Schema.Boolean,
  spfConfigured: Schema.Boolean,
  dmarcConfigured: Schema.Boolean,
  createdAt: Schema.DateFromSelf,
  /** A count(*), a bigint: the client reads it as a string. */
  mailboxCount: Schema.NumberFromString,
  catchAllMailboxId: Schema.NullOr(Schema.String)
})
type DomainRow = typeof DomainRow.Type

/** A count(*) as `n`: a bigint, which the client reads as a string. */
const CountRow = Schema.Struct({ n: Schema.NumberFromString })

const toDomain = (row: DomainRow, receives: boolean, dnsRecords: ReadonlyArray<DnsRecord>): Domain => ({
  domain_id: row.id,
  domain_name: row.name,
  verification_token: row.verificationToken,
  verified: row.verified,
  receives_mail: row.verified && receives,
  mx_configured: row.mxConfigured,
  dkim_configured: row.dkimConfigured,
  spf_configured: row.spfConfigured,
  dmarc_configured: row.dmarcConfigured,
  created_at: row.createdAt.toISOString(),
  mailbox_count: row.mailboxCount,
  catch_all_mailbox_id: row.catchAllMailboxId,
  dns_records: dnsRecords
})

/** What a custom domain's DKIM key's name adds to the domain's. */
const DKIM_NAME_PREFIX = `${CUSTOM_DOMAIN_SELECTOR}._domainkey.`

/** A DKIM key record's tags (RFC 6376 §3.2), whitespace dropped (a key may be folded); none when a tag repeats or is malformed. */
const dkimTags = (record: string) => {
  const tags = new Map<string, string>()
  for (const part of record.split(";")) {
    const tag = part.replace(/\s+/g, "")
    if (tag === "") continue
    const equals = tag.indexOf("=")
    if (equals <= 0 || tags.has(tag.slice(0, equals))) return Option.none()
    tags.set(tag.slice(0, equals), tag.slice(equals + 1))
  }
  return Option.some(tags)
}

/**
 * Whether a TXT record at the DKIM key's name publishes the key of `expected` (the record the domain
 * was asked for): the same `p=`, as an RSA key. RFC 6376 §3.6.1 makes `v=` recommended (when present,
 * DKIM1) and `k=` default to rsa, so a record of `p=` alone is one verifiers accept.
 */
export const dkimKeyPublished = (published: string, expected: string) =>
  Option.match(Option.all([dkimTags(published), dkimTags(expected)]), {
    onNone: () => false,
    onSome: ([tags, asked]) =>
      (tags.get("v") ?? "DKIM1") === "DKIM1" && (tags.get("k") ?? "rsa") === "rsa" && asked.get("p") !== undefined &&
      tags.get("p") === asked.get("p")
  })

/**
 * The SPF record a custom domain is asked to publish (`SPF_RECORD`): by default its MX hosts
 * (Mailroom's) send its mail; behind a relay (SMTP_RELAY_URL), the relay's mechanism instead.
 */
export const DEFAULT_SPF_RECORD = "v=spf1 mx ~all"

/**
 * The DMARC record a custom domain is asked to publish (`_dmarc`, RFC 7489): a policy of none, so that
 * receivers that ask for one (Gmail and Yahoo of bulk senders) find it and nothing is refused for it.
 * Mail from the domain passes DMARC by its DKIM signature, which is the domain's own (aligned).
 */
export const DMARC_RECORD = "v=DMARC1; p=none"

/** Whether `_dmarc`'s TXT records hold exactly one DMARC record (RFC 7489 §6.6.3: several are none), whatever its policy. */
const dmarcConfigured = (txt: ReadonlyArray<string>) => txt.filter((value) => /^v\s*=\s*DMARC1\s*(;|$)/.test(value.trim())).length === 1

const notFound = (domainId: string) => new NotFound({ message: "Domain not found", details: { domain_id: domainId } })

const dnsUnavailable = (error: DnsError) =>
  ServiceUnavailable.of(`DNS could not be asked right now (${error.message}); try again shortly`)

/** Answers "no such records" as none; any other DNS failure is the caller's to report. */
const orNone = <A>(effect: Effect.Effect<ReadonlyArray<A>, DnsError>) =>
  Effect.catchIf(effect, (error) => error.reason === "NotFound", () => Effect.succeed([] as ReadonlyArray<A>))

/** The suffix a colliding mailbox gets: stable for the mailbox and target, so a dry run shows what applying does. */
const suffixFor = (mailboxId: string, target: string, attempt: number) =>
  attempt < 4
    ? createHash("sha256").update(`${mailboxId}:${target}:${attempt}`).digest("hex").slice(0, 6)
    : randomBytes(3).toString("hex")

export class Domains extends Effect.Service<Domains>()("mailroom/Domains", {
  dependencies: [Mailboxes.Default],
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const directory = yield* RecipientDirectory
    const dns = yield* Dns
    const settings = yield* DomainSettings
    const { sharedDomains } = yield* MailboxSettings
    const mailboxes = yield* Mailboxes
    const dkim = yield* DkimKeys

    /** A domain row `d` as DomainRow, with its active mailboxes counted. */
    const columns = sql.literal(`
      d.id, d.name, d.verification_token, d.verified, d.mx_configured, d.dkim_configured, d.spf_configured, d.dmarc_configured, d.created_at, d.catch_all_mailbox_id,
      (SELECT count(*) FROM mailboxes m WHERE m.domain = d.name AND m.user_id = d.user_id AND m.status = 'active') AS mailbox_count`)
    const select = sql`SELECT ${columns} FROM domains d`

    const findRow = SqlSchema.findOne({
      Request: Schema.Struct({ userId: Schema.String, domainId: Schema.String }),
      Result: DomainRow,
      execute: ({ domainId, userId }) => sql`${select} WHERE d.id = ${domainId} AND d.user_id = ${userId}`
    })

    const find = (owner: Owner, domainId: string) =>
      findRow({ userId: owner.userId, domainId }).pipe(
        Effect.catchTag("ParseError", Effect.die),
        Effect.flatMap(Option.match({ onNone: () => Effect.fail(notFound(domainId)), onSome: Effect.succeed }))
      )

    const selectRows = SqlSchema.findAll({
      Request: Schema.Struct({
        userId: Schema.String,
        ascending: Schema.Boolean,
        page: Schema.optional(Schema.Struct({ limit: Schema.Number, offset: Schema.Number }))
      }),
      Result: DomainRow,
      execute: ({ ascending, page, userId }) => {
        const order = sql.literal(ascending ? "ASC" : "DESC")
        return sql`
          ${select} WHERE d.user_id = ${userId}
          ORDER BY d.created_at ${order}, d.id ${order}
          ${page === undefined ? sql`` : sql`LIMIT ${page.limit} OFFSET ${page.offset}`}`
      }
    })

    const countRow = SqlSchema.single({
      Request: Schema.String,
      Result: CountRow,
      execute: (userId) => sql`SELECT count(*) AS n FROM domains WHERE user_id = ${userId}`
    })

    /** How many domains `userId` has registered. */
    const domainCount = (userId: string) =>
      countRow(userId).pipe(
        Effect.catchTags({ ParseError: Effect.die, NoSuchElementException: Effect.die }),
        Effect.map((row) => row.n)
      )

    /**
     * What to publish: ownership (TXT), where mail goes (MX), and what makes mail sent from the domain
     * trusted: SPF (its MX hosts send), the DKIM key outbound mail is signed with (made now, kept) and
     * a DMARC record.
     */
    const records = (row: { readonly id: string; readonly name: string; readonly verificationToken: string }) =>
      Effect.map(dkim.record(row.name, row.id), (key): Array<DnsRecord> => [
        { type: "TXT", name: "@", value: row.verificationToken },
        { type: "MX", name: "@", value: settings.mxHost, priority: 10 },
        { type: "TXT", name: "@", value: settings.spfRecord },
        { type: "TXT", name: key.name.slice(0, -(row.name.length + 1)), value: key.value },
        { type: "TXT", name: "_dmarc", value: DMARC_RECORD }
      ])

    /** A domain row of `owner` as the API shows it, with its records. */
    const present = (owner: Owner) => (row: DomainRow) => Effect.map(records(row), (dnsRecords) => toDomain(row, receivesOnCustomDomains(owner.plan, settings.freeMaxCustomDomains), dnsRecords))

    const instructions = (name: string, token: string) =>
      `Add a TXT record at ${name} with the value "${token}" and an MX record at ${name} with priority 10 pointing at ` +
      `${settings.mxHost}, then verify again. DNS changes can take a while to be seen. Publish the SPF and DKIM records ` +
      "of the domain's dns_records too, so that mail sent from it is trusted."

    const limitOf = (owner: Owner) => customDomainLimit(owner.plan, settings.freeMaxCustomDomains)

    const listMetaOf = (owner: Owner, count: number): DomainListMeta => {
      const limit = limitOf(owner)
      return { plan: owner.plan, domain_limit: reportLimit(limit), domain_count: count, can_add_domain: limit === null || count < limit }
    }

    /** The owner's domains (with a page, that page), newest first unless asked otherwise; meta's domain_count counts them all. */
    const list = Effect.fn("Domains.list")(function*(owner: Owner, page?: Page, direction: Direction = "desc") {
      const rows = yield* selectRows({ userId: owner.userId, ascending: direction === "asc", page }).pipe(
        Effect.catchTag("ParseError", Effect.die)
      )
      const total = page === undefined ? rows.length : yield* domainCount(owner.userId)
      return {
        domains: yield* Effect.forEach(rows, present(owner)),
        meta: listMetaOf(owner, total)
      }
    })

    const alreadyOnAccount = (name: string) =>
      new Conflict({ message: `The domain ${name} is already on this account`, details: { domain: name } })
    const verifiedElsewhere = (name: string) =>
      new Conflict({ message: `The domain ${name} is verified by another account`, details: { domain: name } })

    /** None when the name is verified by an account already, or is this account's already. */
    const insertRow = SqlSchema.findOne({
      Request: Schema.Struct({ id: Schema.String, userId: Schema.String, name: Schema.String, verificationToken: Schema.String }),
      Result: DomainRow,
      execute: ({ id, name, userId, verificationToken }) =>
        sql`
          WITH d AS (
            INSERT INTO domains (id, user_id, name, verification_token)
            SELECT ${id}, ${userId}, ${name}, ${verificationToken}
            WHERE NOT EXISTS (SELECT 1 FROM domains WHERE name = ${name} AND verified)
            ON CONFLICT (user_id, name) DO NOTHING
            RETURNING *
          )
          SELECT ${columns} FROM d`
    })

    const create = Effect.fn("Domains.create")(function*(owner: Owner, input: string) {
      const name = yield* Either.mapLeft(parseDomainName(input), (problem) => ValidationError.field("domain", problem))
      // The DKIM key's name must fit DNS's 253 characters too, or mail from the domain could never be trusted.
      if (DKIM_NAME_PREFIX.length + name.length > 253) {
        return yield* ValidationError.field(
          "domain",
          `must be at most ${253 - DKIM_NAME_PREFIX.length} characters, so that its DKIM key's name (${DKIM_NAME_PREFIX}<domain>) fits in DNS`
        )
      }
      if (sharedDomains.includes(name)) {
        return yield* new Conflict({ message: `${name} is a shared domain; every account may use it already`, details: { domain: name } })
      }
      const row = yield* Effect.gen(function*() {
        yield* sql`SELECT id FROM users WHERE id = ${owner.userId} FOR NO KEY UPDATE`
        const limit = limitOf(owner)
        if (limit !== null) {
          const count = yield* domainCount(owner.userId)
          if (count >= limit) {
            return yield* new DomainQuotaReached({
              message: limit === 0
                ? `The ${owner.plan} plan does not include custom domains`
                : `The ${owner.plan} plan allows ${limit} custom domain${limit === 1 ? "" : "s"}`,
              details: { count, limit, plan: owner.plan }
            })
          }
        }
        // Not over a verified claim; an account's second claim of the name is its unique key's to refuse.
        const inserted = yield* insertRow({
          id: newId("dom"),
          userId: owner.userId,
          name,
          verificationToken: `${settings.verifyPrefix}=${randomBytes(16).toString("hex")}`
        }).pipe(Effect.catchTag("ParseError", Effect.die))
        if (Option.isNone(inserted)) {
          const own = yield* sql`SELECT 1 FROM domains WHERE user_id = ${owner.userId} AND name = ${name}`
          return yield* (own.length > 0 ? alreadyOnAccount(name) : verifiedElsewhere(name))
        }
        return inserted.value
      }).pipe(sql.withTransaction)
      return yield* present(owner)(row)
    })

    const get = Effect.fn("Domains.get")(function*(owner: Owner, domainId: string) {
      return yield* present(owner)(yield* find(owner, domainId))
    })

    /** What a verification found, kept; `owned` verifies the domain for good. */
    const recordFindings = SqlSchema.findOne({
      Request: Schema.Struct({
        id: Schema.String,
        owned: Schema.Boolean,
        mxConfigured: Schema.Boolean,
        dkimConfigured: Schema.Boolean,
        spfConfigured: Schema.Boolean,
        dmarcConfigured: Schema.Boolean
      }),
      Result: DomainRow,
      execute: ({ dkimConfigured, dmarcConfigured, id, mxConfigured, owned, spfConfigured }) =>
        sql`
          WITH d AS (
            UPDATE domains SET
              verified = verified OR ${owned},
              verified_at = CASE WHEN NOT verified AND ${owned} THEN now() ELSE verified_at END,
              mx_configured = ${mxConfigured},
              dkim_configured = ${dkimConfigured},
              spf_configured = ${spfConfigured},
              dmarc_configured = ${dmarcConfigured}
            WHERE id = ${id}
            RETURNING *
          )
          SELECT ${columns} FROM d`
    })

    const verify = Effect.fn("Domains.verify")(function*(owner: Owner, domainId: string) {
      const row = yield* find(owner, domainId)
      // Held by an account that verified it first: no record this claim publishes can change that.
      if (!row.verified && (yield* sql`SELECT 1 FROM domains WHERE name = ${row.name} AND verified`).length > 0) {
        return yield* verifiedElsewhere(row.name)
      }
      const key = yield* dkim.record(row.name, row.id)
      // Ownership and the MX decide; the DKIM key, the DMARC record and what the SPF record includes are
      // only reported, so a failure to look one up keeps what was found before.
      const [txt, mx, published, dmarc] = yield* Effect.all([
        orNone(dns.txt(row.name)),
        orNone(dns.mx(row.name)),
        Effect.option(orNone(dns.txt(key.name))),
        Effect.option(orNone(dns.txt(`_dmarc.${row.name}`)))
      ], { concurrency: 4 }).pipe(Effect.mapError(dnsUnavailable))
      const owned = txt.some((value) => value.trim() === row.verificationToken)
      const preferred = Math.min(...mx.map((record) => record.priority))
      const mxConfigured = mx.some((record) => record.priority === preferred && record.exchange === settings.mxHost)
      const dkimConfigured = Option.match(published, {
        onNone: () => row.dkimConfigured,
        onSome: (values) => values.some((value) => dkimKeyPublished(value, key.value))
      })
      // SPF is only reported too: an include or redirect that cannot be looked up keeps the last finding.
      const spf = yield* spfConfigured(row.name, txt, settings.spfRecord, dns.txt)
      // The first claim to verify holds the name: another's verification is refused by the unique key.
      const updated = yield* recordFindings({
        id: row.id,
        owned,
        mxConfigured,
        dkimConfigured,
        spfConfigured: Option.getOrElse(spf, () => row.spfConfigured),
        dmarcConfigured: Option.match(dmarc, { onNone: () => row.dmarcConfigured, onSome: dmarcConfigured })
      }).pipe(
        Effect.catchTag("ParseError", Effect.die),
        Effect.catchIf(isUniqueViolation, () => Effect.fail(verifiedElsewhere(row.name)))
      )
      const domain = Option.getOrElse(updated, () => row)
      if (!domain.verified) {
        return yield* new VerificationFailed({
          message: `The TXT record ${row.verificationToken} was not found at ${row.name}`,
          details: { expected_txt_record: row.verificationToken, instructions: instructions(row.name, row.verificationToken) }
        })
      }
      return yield* present(owner)(domain)
    })

    /** The active mailboxes of `domain`, locked for the move. */
    const mailboxesToMove = SqlSchema.findAll({
      Request: Schema.Struct({ userId: Schema.String, domain: Schema.String }),
      Result: Schema.Struct({ id: Schema.String, localPart: Schema.String }),
      execute: ({ domain, userId }) =>
        sql`
          SELECT id, local_part FROM mailboxes
          WHERE user_id = ${userId} AND domain = ${domain} AND status = 'active'
          ORDER BY created_at, id
          FOR UPDATE`
    })

    const plan = (owner: Owner, source: string, target: string) =>
      Effect.gen(function*() {
        const moving = yield* mailboxesToMove({ userId: owner.userId, domain: source }).pipe(Effect.catchTag("ParseError", Effect.die))
        const busy = yield* mailboxes.taken(owner, moving.map((m) => normalizeAddress(m.localPart, target)))
        const claimed = new Set<string>()
        const entries: Array<MigrationEntry & { readonly localPart: string; readonly normalized: string }> = []
        for (const mailbox of moving) {
          let localPart = mailbox.localPart
          let normalized = normalizeAddress(localPart, target)
          for (let attempt = 0; busy.has(normalized) || claimed.has(normalized); attempt++) {
            if (attempt >= 10) return yield* new Conflict({ message: "No free address could be found for a mailbox; try again", details: { mailbox_id: mailbox.id } })
            localPart = withSuffix(mailbox.localPart.slice(0, MAX_LOCAL_LENGTH - 7), suffixFor(mailbox.id, target, attempt))
            normalized = normalizeAddress(localPart, target)
            if (!claimed.has(normalized) && (yield* mailboxes.taken(owner, [normalized])).size > 0) busy.add(normalized)
          }
          claimed.add(normalized)
          entries.push({
            mailbox_id: mailbox.id,
            from_email: `${mailbox.localPart}@${source}`,
            to_email: `${localPart}@${target}`,
            renamed: localPart !== mailbox.localPart,
            localPart,
            normalized
          })
        }
        return entries
      })

    const migrate = Effect.fn("Domains.migrate")(function*(owner: Owner, domainId: string, targetInput: string, dryRun: boolean) {
      const source = yield* find(owner, domainId)
      const target = yield* Either.mapLeft(parseDomainName(targetInput), (problem) => ValidationError.field("target_domain", problem))
      if (target === source.name) return yield* ValidationError.field("target_domain", "must differ from the domain being migrated")
      if (!(yield* mailboxes.allowedDomains(owner.userId, owner.plan)).includes(target)) {
        return yield* new DomainNotAllowed({
          message: `The domain ${target} is not available to this account`,
          details: { domain: target, plan: owner.plan }
        })
      }
      const entries = yield* Effect.gen(function*() {
        // Serialise with this user's mailbox creates, which count and check addresses under the same lock.
        yield* sql`SELECT id FROM users WHERE id = ${owner.userId} FOR NO KEY UPDATE`
        const planned = yield* plan(owner, source.name, target)
        if (!dryRun && planned.length > 0) {
          yield* sql`
            UPDATE mailboxes m SET domain = ${target}, local_part = moved.local_part, address_normalized = moved.normalized
            FROM unnest(${planned.map((e) => e.mailbox_id)}::text[], ${planned.map((e) => e.localPart)}::text[],
                        ${planned.map((e) => e.normalized)}::text[]) AS moved(id, local_part, normalized)
            WHERE m.id = moved.id`
          // The addresses left on the source domain are held from other accounts (mailboxes.ts `taken`).
          yield* mailboxes.release(owner, planned.map((e) => e.from_email.toLowerCase()))
        }
        return planned
      }).pipe(
        sql.withTransaction,
        // Another account took a target address between the check and the update: nothing moved.
        Effect.catchIf(isUniqueViolation, () =>
          Effect.fail(new EmailTaken({ message: "A target address was taken during the migration; nothing was moved, try again" })))
      )
      // The old addresses must stop receiving on every node's next RCPT (told once committed).
      if (!dryRun && entries.length > 0) yield* directory.changed(owner.userId)
      return {
        dry_run: dryRun,
        migrated_count: entries.length,
        renamed_count: entries.filter((e) => e.renamed).length,
        migrations: entries.map(({ localPart: _, normalized: __, ...entry }) => entry)
      } satisfies Migration
    })

    /**
     * The domain's catch-all: mail to an address of it that no active mailbox has goes to `mailboxId`,
     * an active mailbox of the account (on any of its domains); null refuses such mail again (550 5.1.1).
     * Applies once the domain is verified, on a plan that receives on it, from every node's next RCPT.
     */
    const setCatchAll = Effect.fn("Domains.setCatchAll")(function*(owner: Owner, domainId: string, mailboxId: string | null) {
      yield* find(owner, domainId)
      if (mailboxId !== null) {
        const own = yield* sql`SELECT 1 FROM mailboxes WHERE id = ${mailboxId} AND user_id = ${owner.userId} AND status = 'active'`
        if (own.length === 0) return yield* ValidationError.field("catch_all_mailbox_id", `is not an active mailbox of this account: ${mailboxId}`)
      }
      yield* sql`UPDATE domains SET catch_all_mailbox_id = ${mailboxId} WHERE id = ${domainId} AND user_id = ${owner.userId}`
      // Addresses of the domain kept on any node may now go elsewhere (or nowhere).
      yield* directory.changed(owner.userId)
      return yield* present(owner)(yield* find(owner, domainId))
    })

    const remove = Effect.fn("Domains.remove")(function*(owner: Owner, domainId: string) {
      const row = yield* find(owner, domainId)
      const count = row.mailboxCount
      if (count > 0) {
        return yield* new DomainHasMailboxes({
          message: `${count} active mailbox${count === 1 ? "" : "es"} still use${count === 1 ? "s" : ""} ${row.name}; migrate or delete them first`,
          details: { mailbox_count: count, domain_name: row.name }
        })
      }
      yield* sql`DELETE FROM domains WHERE id = ${row.id} AND user_id = ${owner.userId}`
      // Its DKIM key (outbound/dkim.ts, kept under the domain's id) signs nothing any more.
      yield* sql`DELETE FROM dkim_keys WHERE owner = ${row.id}`
      return { deleted: true as const }
    })

    return { list, get, create, verify, migrate, setCatchAll, remove } as const
  })
}) {}
