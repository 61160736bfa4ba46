/**
 * Mailboxes (SPEC "Mailbox", "Mailboxes"; DESIGN.md §4): create, read, list, check, rename and delete the
 * addresses agents receive mail at.
 *
 * - Uniqueness is case-insensitive and across all users. The partial unique index on
 *   `address_normalized` of active mailboxes decides every race: a unique violation is EMAIL_TAKEN.
 * - A deleted mailbox keeps its row (`status = 'deleted'`, `deleted_at`): its address is free again
 *   for its former owner at once and for everyone else after 30 days, when housekeeping removes the
 *   row and its mail for good (maintenance/housekeeping.ts).
 * - The plan's mailbox quota counts active mailboxes; creates of one user are serialised on the
 *   user's row so that two concurrent creates cannot both take the last slot.
 */
import { SqlClient, SqlSchema } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Context, Effect, Option, Schema } from "effect"
import { newId } from "../accounts/tokens.ts"
import { RecipientDirectory } from "../mail/directory.ts"
import {
  type BadRequest,
  DomainNotAllowed,
  EmailTaken,
  MailboxQuotaReached,
  type MissingFields,
  ValidationError
} from "../errors.ts"
import type { Direction, Page } from "../listing.ts"
import { escapeLike } from "../like.ts"
import { isUniqueViolation } from "../unique-violation.ts"
import { limits, type Plan, receivesOnCustomDomains } from "../plans/plans.ts"
import {
  type Address,
  type AddressRequest,
  asksForAddress,
  domainOf,
  type MailboxRequest,
  normalizeAddress,
  parseAddress,
  parseDisplayName,
  type RuleFailure
} from "./rules.ts"
import type { EmailCheck, Mailbox, RenamedMailbox } from "./schemas.ts"
import { amongMailboxes, mailboxNotFound } from "./owned.ts"

/** What the mailboxes domain needs from the operator's configuration. */
export class MailboxSettings extends Context.Tag("mailroom/MailboxSettings")<MailboxSettings, {
  /** SHARED_DOMAINS, lower-cased: the pool every plan may use. */
  readonly sharedDomains: ReadonlyArray<string>
  /** DISALLOWED_EMAIL_NAME, lower-cased: reserved local parts, refused on every domain. */
  readonly disallowedNames: ReadonlyArray<string>
  /**
   * POSTMASTER_MAILBOX, lower-cased: the address of the mailbox that receives mail to postmaster@ and
   * abuse@ every shared domain (services/mail/inbound.ts `operatorRoute`); undefined, none does.
   */
  readonly postmasterMailbox?: string | undefined
  /**
   * FREE_MAX_CUSTOM_DOMAINS: custom domains the free plan may add. Above 0, the free plan's mailboxes
   * may be on them too (and receive there); 0 (the default, and when left out), the shared pool only.
   */
  readonly freeMaxCustomDomains?: number | undefined
}>() {}

/** Whose mailboxes: the caller, with their current plan. */
export interface Owner {
  readonly userId: string
  readonly plan: Plan
}

/** The failures of SPEC's address rules: 400 (MISSING_FIELDS, BAD_REQUEST), 422, 409 EMAIL_TAKEN. */
export type AddressError = RuleFailure | DomainNotAllowed | EmailTaken

/**
 * A mailbox as its table holds it, decoded as it is read (SqlSchema): a row that does not read so is a bug
 * here or in a migration, a defect rather than a failure of the request.
 */
const MailboxRow = Schema.Struct({
  id: Schema.String,
  userId: Schema.String,
  localPart: Schema.String,
  domain: Schema.String,
  createdAt: Schema.DateFromSelf,
  displayName: Schema.NullOr(Schema.String)
})
type MailboxRow = typeof MailboxRow.Type

/** The columns of a `MailboxRow`. */
const mailboxColumns = "id, user_id, local_part, domain, created_at, display_name"

const emailAddressOf = (row: MailboxRow) => `${row.localPart}@${row.domain}`

const toMailbox = (row: MailboxRow): Mailbox => ({
  mailbox_id: row.id,
  email_address: emailAddressOf(row),
  domain: row.domain,
  status: "active",
  namespace: row.userId,
  created_at: row.createdAt.toISOString(),
  display_name: row.displayName
})

/** The mailbox as a rename answers it. */
const renamedOf = (row: MailboxRow): RenamedMailbox["mailbox"] => ({
  mailbox_id: row.id,
  email_address: emailAddressOf(row),
  domain: row.domain,
  status: "active",
  display_name: row.displayName
})

/** How long an address a mailbox left stays held from other users. */
export const ADDRESS_HOLD = "30 days"

const emailTaken = (emailAddress: string) =>
  new EmailTaken({ message: `The address ${emailAddress} is already taken`, details: { email_address: emailAddress } })


/** A write that lost the race for an address to another write: EMAIL_TAKEN. */
const takenOnUniqueViolation = (address: Address) => <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.catchIf(effect, isUniqueViolation, () => Effect.fail(emailTaken(address.emailAddress)))

export class Mailboxes extends Effect.Service<Mailboxes>()("mailroom/Mailboxes", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const directory = yield* RecipientDirectory
    const settings = yield* MailboxSettings

    /**
     * Rule 6: the domains `userId` may create mailboxes on: the shared pool on every plan, and on
     * paid plans the account's verified custom domains.
     */
    const allowedDomains = (userId: string, plan: Plan): Effect.Effect<ReadonlyArray<string>, SqlError> =>
      !receivesOnCustomDomains(plan, settings.freeMaxCustomDomains ?? 0)
        ? Effect.succeed(settings.sharedDomains)
        : sql<{ name: string }>`SELECT name FROM domains WHERE user_id = ${userId} AND verified ORDER BY name`.pipe(
          Effect.map((rows) => [...settings.sharedDomains, ...rows.map((row) => row.name)])
        )

    /**
     * Rule 5, for each of `addresses` (normalized): those not free for `owner`. An address is taken
     * while an active mailbox (anyone's) has it, and held for 30 days from other users once their
     * mailbox left it (deleted, renamed, or moved to another domain), so that nobody takes over mail
     * still sent there; its former owner may take it back at once, and so may the account that now
     * owns (has verified) its domain, which receives all of that domain's mail anyway. `exclude` is
     * one of the owner's mailboxes whose address counts as free (a rename's own).
     */
    const taken = (owner: Owner, addresses: ReadonlyArray<string>, exclude?: string) => {
      /** Left (at `since`) by another user within the hold, on a domain `owner` has not verified. */
      const held = (since: string) =>
        sql`${sql(since)} > now() - ${ADDRESS_HOLD}::interval AND user_id <> ${owner.userId}
            AND NOT EXISTS (SELECT 1 FROM domains d
                            WHERE d.user_id = ${owner.userId} AND d.verified AND d.name = split_part(address_normalized, '@', 2))`
      return sql<{ addressNormalized: string }>`
        SELECT address_normalized FROM mailboxes
        WHERE address_normalized = ANY(${addresses}::text[])
          AND (status = 'active' OR (${held("deleted_at")}))
          AND NOT (id = ${exclude ?? ""} AND user_id = ${owner.userId})
        UNION
        SELECT address_normalized FROM released_addresses
        WHERE address_normalized = ANY(${addresses}::text[]) AND ${held("released_at")}`.pipe(
        Effect.map((rows) => new Set(rows.map((row) => row.addressNormalized)))
      )
    }

    const isTaken = (owner: Owner, address: Address, exclude: string | undefined) =>
      Effect.map(taken(owner, [address.normalized], exclude), (found) => found.size > 0)

    /** Addresses `owner`'s mailboxes left (renamed, moved), held from others for 30 days (`taken`). */
    const release = (owner: Owner, addresses: ReadonlyArray<string>) =>
      addresses.length === 0 ? Effect.void : sql`
        INSERT INTO released_addresses (address_normalized, user_id)
        SELECT DISTINCT unnest(${addresses}::text[]), ${owner.userId}
        ON CONFLICT (address_normalized, user_id) DO UPDATE SET released_at = now()`

    /**
     * Forwarding to `address` (normalized), or to a subaddress of it, from any account's mailbox, is
     * suspended with `reason`: the mailbox that took the copies no longer has the address, and after
     * its 30 days' hold anyone may take it. Added again, such an address is confirmed anew.
     */
    const suspendForwardsTo = (address: string, reason: string) =>
      sql`
        UPDATE mailbox_forwards SET suspended_at = now(), suspended_reason = ${reason}
        WHERE domain = ${domainOf(address)} AND suspended_at IS NULL
          AND regexp_replace(address, '[+][^@]*@', '@') = ${address}`

    /** Rules 1-6 (not the quota): the address the request names, if it may be used. */
    const validate = (owner: Owner, request: AddressRequest, exclude: string | undefined) =>
      Effect.gen(function*() {
        const address = yield* parseAddress(request, settings.disallowedNames)
        const allowed = yield* allowedDomains(owner.userId, owner.plan)
        if (!allowed.includes(address.domain)) {
          return yield* new DomainNotAllowed({
            message: `The domain ${address.domain} is not available to this account`,
            details: { domain: address.domain, plan: owner.plan }
          })
        }
        if (yield* isTaken(owner, address, exclude)) return yield* emailTaken(address.emailAddress)
        return address
      })

    const findActiveRow = SqlSchema.findOne({
      Request: Schema.Struct({ userId: Schema.String, mailboxId: Schema.String, lock: Schema.Boolean }),
      Result: MailboxRow,
      execute: ({ lock, mailboxId, userId }) =>
        sql`
          SELECT ${sql.literal(mailboxColumns)} FROM mailboxes
          WHERE id = ${mailboxId} AND user_id = ${userId} AND status = 'active'
          ${sql.literal(lock ? "FOR UPDATE" : "")}`
    })

    const findActive = (owner: Owner, mailboxId: string, lock: boolean) =>
      findActiveRow({ userId: owner.userId, mailboxId, lock }).pipe(
        Effect.catchTag("ParseError", Effect.die),
        Effect.flatMap(Option.match({ onNone: () => Effect.fail(mailboxNotFound(mailboxId)), onSome: Effect.succeed }))
      )

    const insertRow = SqlSchema.single({
      Request: Schema.Struct({
        id: Schema.String,
        userId: Schema.String,
        localPart: Schema.String,
        domain: Schema.String,
        addressNormalized: Schema.String,
        displayName: Schema.NullOr(Schema.String)
      }),
      Result: MailboxRow,
      execute: (row) => sql`INSERT INTO mailboxes ${sql.insert(row)} RETURNING ${sql.literal(mailboxColumns)}`
    })

    const activeCount = (userId: string, only?: ReadonlyArray<string>) =>
      sql<{ n: string }>`SELECT count(*) AS n FROM mailboxes WHERE user_id = ${userId} AND status = 'active' ${amongMailboxes(sql, "id", only)}`.pipe(
        Effect.map((rows) => Number(rows[0]?.n ?? 0))
      )

    /**
     * An address that now has a mailbox here is no longer suppressed by any account. A suppression
     * is a bounce, and a bounce from an address of ours said that it had no mailbox (or that the one
     * it had refused the sender): the mailbox now there is a new recipient, and mail to it or to its
     * subaddresses (`local+tag@domain`, suppressed as written) must reach it.
     */
    const forgetBounces = (address: Address) => {
      const local = address.normalized.slice(0, address.normalized.lastIndexOf("@"))
      return sql`
        DELETE FROM suppressions
        WHERE address = ${address.normalized} OR address LIKE ${`${escapeLike(local)}+%@${escapeLike(address.domain)}`} ESCAPE '\\'`
    }

    const insert = (owner: Owner, address: Address, displayName: string | null) =>
      Effect.gen(function*() {
        // Serialise this user's creates: the count below then holds until the insert commits.
        // (NO KEY: inserts elsewhere that reference the user, such as a login's session, need not wait.)
        yield* sql`SELECT id FROM users WHERE id = ${owner.userId} FOR NO KEY UPDATE`
        const limit = limits[owner.plan].mailboxes
        if (limit !== null) {
          const count = yield* activeCount(owner.userId)
          if (count >= limit) {
            return yield* new MailboxQuotaReached({
              message: `The ${owner.plan} plan allows ${limit} mailboxes`,
              details: { count, limit, plan: owner.plan }
            })
          }
        }
        const row = yield* insertRow({
          id: newId("mbx"),
          userId: owner.userId,
          localPart: address.localPart,
          domain: address.domain,
          addressNormalized: address.normalized,
          displayName
        }).pipe(Effect.catchTags({ ParseError: Effect.die, NoSuchElementException: Effect.die }))
        yield* forgetBounces(address)
        return toMailbox(row)
      })

    const create = Effect.fn("Mailboxes.create")(function*(owner: Owner, request: MailboxRequest) {
      const displayName = yield* parseDisplayName(request.display_name)
      const address = yield* validate(owner, request, undefined)
      const created = yield* insert(owner, address, displayName ?? null).pipe(sql.withTransaction, takenOnUniqueViolation(address))
      // The address may have gone to its domain's catch-all mailbox until now, on any node.
      yield* directory.changed(owner.userId)
      return created
    })

    const selectRows = SqlSchema.findAll({
      Request: Schema.Struct({
        userId: Schema.String,
        ascending: Schema.Boolean,
        page: Schema.optional(Schema.Struct({ limit: Schema.Number, offset: Schema.Number })),
        only: Schema.optional(Schema.Array(Schema.String))
      }),
      Result: MailboxRow,
      execute: ({ ascending, only, page, userId }) => {
        const order = sql.literal(ascending ? "ASC" : "DESC")
        return sql`
          SELECT ${sql.literal(mailboxColumns)} FROM mailboxes
          WHERE user_id = ${userId} AND status = 'active' ${amongMailboxes(sql, "id", only)}
          ORDER BY created_at ${order}, id ${order}
          ${page === undefined ? sql`` : sql`LIMIT ${page.limit} OFFSET ${page.offset}`}`
      }
    })

    const select = (owner: Owner, page: Page | undefined, direction: Direction, only?: ReadonlyArray<string>) =>
      selectRows({ userId: owner.userId, ascending: direction === "asc", page, only }).pipe(
        Effect.catchTag("ParseError", Effect.die),
        Effect.map((rows) => rows.map(toMailbox))
      )

    /** The owner's active mailboxes (of `only`, when given), newest first. */
    const list = Effect.fn("Mailboxes.list")(function*(owner: Owner, only?: ReadonlyArray<string>) {
      return yield* select(owner, undefined, "desc", only)
    })

    /** One page of them (newest first unless asked otherwise), with how many there are in all. */
    const listPage = Effect.fn("Mailboxes.listPage")(function*(owner: Owner, page: Page, direction: Direction = "desc", only?: ReadonlyArray<string>) {
      const mailboxes = yield* select(owner, page, direction, only)
      return { mailboxes, total: yield* activeCount(owner.userId, only) }
    })

    /** One of the owner's active mailboxes; 404 when it is not theirs, or deleted. */
    const get = Effect.fn("Mailboxes.get")(function*(owner: Owner, mailboxId: string) {
      return toMailbox(yield* findActive(owner, mailboxId, false))
    })

    /** check-email: a rule failure (422, 409) is an answer (`valid: false`); malformed or missing input (400) stays an error. */
    const check = Effect.fn("Mailboxes.check")(function*(owner: Owner, request: AddressRequest, exclude: string | undefined) {
      const invalid = (error: Exclude<AddressError, BadRequest | MissingFields>) =>
        Effect.succeed<EmailCheck>({ valid: false, code: error.code, message: error.message, details: error.details ?? {} })
      return yield* validate(owner, request, exclude).pipe(
        Effect.map((address): EmailCheck => ({ valid: true, email_address: address.emailAddress })),
        Effect.catchTags({
          LocalTooShort: invalid,
          InvalidLocal: invalid,
          DisallowedLocal: invalid,
          DomainMismatch: invalid,
          DomainNotAllowed: invalid,
          EmailTaken: invalid
        })
      )
    })

    /** A new display name alone (null: none); the address stays. */
    const renameDisplayRow = SqlSchema.findOne({
      Request: Schema.Struct({ userId: Schema.String, mailboxId: Schema.String, displayName: Schema.NullOr(Schema.String) }),
      Result: MailboxRow,
      execute: ({ displayName, mailboxId, userId }) =>
        sql`
          UPDATE mailboxes SET display_name = ${displayName}
          WHERE id = ${mailboxId} AND user_id = ${userId} AND status = 'active'
          RETURNING ${sql.literal(mailboxColumns)}`
    })

    const renameDisplay = (owner: Owner, mailboxId: string, displayName: string | null) =>
      renameDisplayRow({ userId: owner.userId, mailboxId, displayName }).pipe(
        Effect.catchTag("ParseError", Effect.die),
        Effect.flatMap(Option.match({ onNone: () => Effect.fail(mailboxNotFound(mailboxId)), onSome: Effect.succeed }))
      )

    /** The row `rename` locked (`findActive`) takes its new address. */
    const moveRow = SqlSchema.single({
      Request: Schema.Struct({
        mailboxId: Schema.String,
        localPart: Schema.String,
        domain: Schema.String,
        addressNormalized: Schema.String,
        displayName: Schema.NullOr(Schema.String)
      }),
      Result: MailboxRow,
      execute: ({ addressNormalized, displayName, domain, localPart, mailboxId }) =>
        sql`
          UPDATE mailboxes
          SET local_part = ${localPart}, domain = ${domain}, address_normalized = ${addressNormalized}, display_name = ${displayName}
          WHERE id = ${mailboxId}
          RETURNING ${sql.literal(mailboxColumns)}`
    })

    /**
     * A new address for a mailbox, by the same rules; its mailbox_id (and mail) stay, its old address is
     * held. `display_name` changes with it when sent; a request with nothing but `display_name` changes
     * only the name (and answers the address as both the previous and the current one).
     */
    const rename = Effect.fn("Mailboxes.rename")(function*(owner: Owner, mailboxId: string, request: MailboxRequest) {
      const displayName = yield* parseDisplayName(request.display_name)
      if (displayName !== undefined && !asksForAddress(request)) {
        const row = yield* renameDisplay(owner, mailboxId, displayName)
        return { previous_email_address: emailAddressOf(row), mailbox: renamedOf(row) } satisfies RenamedMailbox
      }
      // Not the caller's: 404 before anything is said about the address asked for.
      yield* findActive(owner, mailboxId, false)
      const address = yield* validate(owner, request, mailboxId)
      const { before, after } = yield* Effect.gen(function*() {
        const before = yield* findActive(owner, mailboxId, true)
        const after = yield* moveRow({
          mailboxId,
          localPart: address.localPart,
          domain: address.domain,
          addressNormalized: address.normalized,
          displayName: displayName === undefined ? before.displayName : displayName
        }).pipe(Effect.catchTags({ ParseError: Effect.die, NoSuchElementException: Effect.die }))
        const previous = normalizeAddress(before.localPart, before.domain)
        if (previous !== address.normalized) {
          yield* Effect.zipRight(release(owner, [previous]), forgetBounces(address))
          yield* suspendForwardsTo(previous, `Not forwarded: ${previous} was renamed to ${address.normalized}`)
        }
        return { before, after }
      }).pipe(sql.withTransaction, takenOnUniqueViolation(address))
      // The old address must stop receiving on every node's next RCPT.
      yield* directory.changed(owner.userId)
      return { previous_email_address: emailAddressOf(before), mailbox: renamedOf(after) } satisfies RenamedMailbox
    })

    /** Soft delete, confirmed by the full address typed exactly. */
    const remove = Effect.fn("Mailboxes.remove")(function*(owner: Owner, mailboxId: string, confirmEmailAddress: string | undefined) {
      if (confirmEmailAddress === undefined || confirmEmailAddress === "") {
        return yield* ValidationError.field("confirm_email_address", "is required")
      }
      yield* Effect.gen(function*() {
        const row = yield* findActive(owner, mailboxId, true)
        if (emailAddressOf(row) !== confirmEmailAddress) {
          return yield* ValidationError.field("confirm_email_address", "must equal the mailbox's full address exactly")
        }
        // The mailbox's emails will be hidden through it: every read joins an active mailbox.
        yield* sql`UPDATE mailboxes SET status = 'deleted', deleted_at = now() WHERE id = ${mailboxId}`
        // Its drafts could never be sent from it again: they go (and stop counting as storage).
        yield* sql`DELETE FROM drafts WHERE mailbox_id = ${mailboxId}`
        // Nor does what it sent, or forwarded, and is still waiting to go: deleting a misbehaving agent's
        // mailbox stops its mail (the mta finds nothing waiting; an attempt under way is its last).
        for (const deliveries of [sql("outbound_deliveries"), sql("forward_deliveries")]) {
          yield* sql`
            UPDATE ${deliveries} SET status = 'failed', last_response = 'Not sent: its mailbox was deleted', next_attempt_at = NULL,
              updated_at = now()
            WHERE status IN ('queued', 'deferred') AND email_id IN (SELECT id FROM emails WHERE mailbox_id = ${mailboxId})`
        }
        // Its filters could never apply again (an ingest that cached them finds no mail for it).
        yield* sql`DELETE FROM mail_filters WHERE mailbox_id = ${mailboxId}`
        // Forwarding to its address stops, in every account (another may take the address in 30 days).
        yield* suspendForwardsTo(normalizeAddress(row.localPart, row.domain), `Not forwarded: the mailbox ${emailAddressOf(row)} was deleted`)
        // A domain whose catch-all it was refuses such mail again.
        yield* sql`UPDATE domains SET catch_all_mailbox_id = NULL WHERE catch_all_mailbox_id = ${mailboxId}`
        // And they no longer count against the account's storage (the plan's limit, mail/inbound.ts).
        yield* sql`
          UPDATE storage_usage SET bytes = greatest(0, bytes - (SELECT coalesce(sum(size), 0) FROM emails WHERE mailbox_id = ${mailboxId}))
          WHERE user_id = ${owner.userId}`
      }).pipe(sql.withTransaction)
      // Told once the delete is committed: a node that looks the address up again must not find it.
      yield* directory.changed(owner.userId)
      return { deleted: true as const }
    })

    return { allowedDomains, create, get, list, listPage, check, rename, remove, taken, release } as const
  })
}) {}
