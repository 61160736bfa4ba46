/**
 * Forwarding: a mailbox's received mail copied to a person's address (the agent's owner reading along,
 * a shared inbox), as a mail provider's auto-forwarding does.
 *
 * - An address forwards only once its owner agreed: adding one mails it a link (`{APP_URL}/forwarding/
 *   {token}`) whose page confirms; until then it is `pending` and nothing is sent to it. Nobody can
 *   make Mailroom pour a mailbox's mail into someone else's inbox. A mailbox of the same account is
 *   `active` at once (the account owns both).
 * - The same link later stops the forwarding, from the person's side; the account removes an address
 *   through the API. Adding a pending address again mails a new link (the old one stops working).
 * - Links mailed are limited per account (`mailedLinkWindows`: 429 past it), and a mailbox forwards to at
 *   most MAX_FORWARDS addresses (403 FORWARDING_LIST_FULL): a mailbox's mail is not multiplied without end.
 *
 * What is forwarded, and how, is decided where mail is stored (store.ts: the copies are queued in the
 * email's own statement) and delivered by the mta (outbound/forwards.ts).
 */
import { SqlClient, SqlSchema } from "@effect/sql"
import { Effect, Option, Schema } from "effect"
import { opaqueToken, sha256 } from "../accounts/tokens.ts"
import { ForwardingListFull, NotFound, RateLimited, ValidationError } from "../errors.ts"
import { type ForwardingAddress, MAX_FORWARDS } from "./forward-rules.ts"
import { routingForm } from "./inbound.ts"
import { mailboxNotFound, ownMailbox } from "../mailboxes/owned.ts"
import { domainOf } from "../mailboxes/rules.ts"
import { letter, SystemMail } from "../outbound/system-mail.ts"
import { OutboundSettings } from "../outbound/settings.ts"
import { mailedLinkWindows, RateLimiter } from "../ratelimit/rate-limiter.ts"

/** How long the mta tries to deliver a confirmation link (a new one can be asked for at any time). */
const LINK_DELIVERY_HOURS = 24

/** A forwarding as its link finds it: the address, its mailbox's, and whether its owner agreed. */
const LinkRow = Schema.Struct({
  mailboxId: Schema.String,
  address: Schema.String,
  confirmedAt: Schema.NullOr(Schema.DateFromSelf),
  mailbox: Schema.String
})

/** One forwarding address of a mailbox. */
const ForwardKey = Schema.Struct({ mailboxId: Schema.String, address: Schema.String })

/** What a link's page shows. */
export interface ForwardingLink {
  /** The mailbox whose mail is forwarded. */
  readonly mailbox: string
  readonly address: string
  readonly active: boolean
}

/**
 * A forwarding address as its table holds it, decoded as it is read (SqlSchema): a row that does not
 * read so is a bug here or in a migration, a defect rather than a failure of the request.
 */
const ForwardRow = Schema.Struct({
  mailboxId: Schema.String,
  address: Schema.String,
  createdAt: Schema.DateFromSelf,
  confirmedAt: Schema.NullOr(Schema.DateFromSelf),
  suspendedAt: Schema.NullOr(Schema.DateFromSelf),
  suspendedReason: Schema.NullOr(Schema.String)
})
type ForwardRow = typeof ForwardRow.Type

const FORWARD_COLUMNS = "mailbox_id, address, created_at, confirmed_at, suspended_at, suspended_reason"

const toForwarding = (row: ForwardRow): ForwardingAddress => ({
  address: row.address,
  mailbox_id: row.mailboxId,
  status: row.confirmedAt === null ? "pending" : row.suspendedAt !== null ? "suspended" : "active",
  created_at: row.createdAt.toISOString(),
  confirmed_at: row.confirmedAt?.toISOString() ?? null,
  suspended_reason: row.suspendedAt === null ? null : row.suspendedReason
})

const forwardingUrl = (appUrl: string, token: string) => `${appUrl.replace(/\/+$/, "")}/forwarding/${token}`

const TOKEN_PREFIX = "mrf_"

export class Forwarding extends Effect.Service<Forwarding>()("mailroom/Forwarding", {
  dependencies: [RateLimiter.layer, SystemMail.Default],
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const mail = yield* SystemMail
    const limiter = yield* RateLimiter
    const { appUrl } = yield* OutboundSettings

    const ownAddressRow = SqlSchema.findOne({
      Request: Schema.Struct({ userId: Schema.String, mailboxId: Schema.String }),
      Result: Schema.Struct({ address: Schema.String }),
      execute: ({ mailboxId, userId }) =>
        sql`
          SELECT lower(local_part || '@' || domain) AS address FROM mailboxes WHERE id = ${mailboxId} AND user_id = ${userId} AND status = 'active'`
    })

    /** The address of `userId`'s active mailbox `mailboxId`; else its 404. */
    const ownAddress = (userId: string, mailboxId: string) =>
      ownAddressRow({ userId, mailboxId }).pipe(
        Effect.catchTag("ParseError", Effect.die),
        Effect.flatMap(Option.match({ onNone: () => Effect.fail(mailboxNotFound(mailboxId)), onSome: (row) => Effect.succeed(row.address) }))
      )

    const forwardRows = SqlSchema.findAll({
      Request: Schema.String,
      Result: ForwardRow,
      execute: (mailboxId) =>
        sql`
          SELECT ${sql.literal(FORWARD_COLUMNS)} FROM mailbox_forwards WHERE mailbox_id = ${mailboxId}
          ORDER BY created_at, address`
    })

    /** The mailbox's forwarding addresses, oldest first. */
    const list = Effect.fn("Forwarding.list")(function*(userId: string, mailboxId: string) {
      yield* ownMailbox(sql, userId, mailboxId)
      const rows = yield* forwardRows(mailboxId).pipe(Effect.catchTag("ParseError", Effect.die))
      return rows.map(toForwarding)
    })

    /** None when the address is the mailbox's already, or the mailbox forwards to MAX_FORWARDS addresses. */
    const insertRow = SqlSchema.findOne({
      Request: Schema.Struct({
        ...ForwardKey.fields,
        userId: Schema.String,
        domain: Schema.String,
        tokenSha256: Schema.String,
        confirmedAt: Schema.NullOr(Schema.DateFromSelf)
      }),
      Result: ForwardRow,
      execute: (f) =>
        sql`
          INSERT INTO mailbox_forwards (mailbox_id, user_id, address, domain, token_sha256, confirmed_at)
          SELECT ${f.mailboxId}, ${f.userId}, ${f.address}, ${f.domain}, ${f.tokenSha256}, ${f.confirmedAt}
          WHERE (SELECT count(*) FROM mailbox_forwards WHERE mailbox_id = ${f.mailboxId}) < ${MAX_FORWARDS}
          ON CONFLICT DO NOTHING
          RETURNING ${sql.literal(FORWARD_COLUMNS)}`
    })

    const forwardRow = SqlSchema.findOne({
      Request: ForwardKey,
      Result: ForwardRow,
      execute: ({ address, mailboxId }) =>
        sql`SELECT ${sql.literal(FORWARD_COLUMNS)} FROM mailbox_forwards WHERE mailbox_id = ${mailboxId} AND address = ${address}`
    })

    /** The address's suspension lifted; none when it is gone meanwhile. */
    const resumeRow = SqlSchema.findOne({
      Request: ForwardKey,
      Result: ForwardRow,
      execute: ({ address, mailboxId }) =>
        sql`
          UPDATE mailbox_forwards SET suspended_at = NULL, suspended_reason = NULL
          WHERE mailbox_id = ${mailboxId} AND address = ${address} RETURNING ${sql.literal(FORWARD_COLUMNS)}`
    })

    /** Mail `address` the link that confirms forwarding `mailbox`'s mail to it. */
    const mailLink = (userId: string, mailbox: string, address: string, token: string) =>
      Effect.gen(function*() {
        const allowance = yield* limiter.take(`forwarding_link:${userId}`, mailedLinkWindows)
        if (!allowance.allowed) {
          return yield* RateLimited.of({ ...allowance, message: "Too many forwarding confirmations mailed for this account; try again later" })
        }
        yield* mail.send({
          to: address,
          expiresAt: new Date(Date.now() + LINK_DELIVERY_HOURS * 3_600_000),
          subject: `Confirm forwarding from ${mailbox}`,
          ...letter([
            "Hello,",
            `Mail that arrives at ${mailbox}, a Mailroom mailbox, is to be forwarded to you at ${address}. Open this link to agree:`,
            { link: forwardingUrl(appUrl, token), label: `Forward ${mailbox}'s mail to me` },
            "Until you agree, nothing is forwarded. If you did not expect this, ignore this email. The same link stops the forwarding later."
          ])
        })
      })

    /**
     * Forward the mailbox's mail to `address` (lower-cased): pending with a link mailed to it, or active
     * at once for a mailbox of the account. Added again while pending, a new link is mailed; a suspended
     * one is active again; an active one is answered as it is (`created: false`).
     */
    const add = Effect.fn("Forwarding.add")(function*(userId: string, mailboxId: string, rawAddress: string) {
      const address = rawAddress.toLowerCase()
      const mailbox = yield* ownAddress(userId, mailboxId)
      // A subaddress (ada+news@) is its mailbox's address: forwarding there would store every email twice.
      const routed = routingForm(address)
      if (routed === routingForm(mailbox)) return yield* ValidationError.field("address", "is this mailbox's own address")
      const own = yield* sql`
        SELECT 1 FROM mailboxes WHERE user_id = ${userId} AND status = 'active' AND lower(local_part || '@' || domain) = ${routed}`
      const token = opaqueToken(TOKEN_PREFIX)
      const confirmedAt = own.length > 0 ? new Date() : null
      // Inserted only while the mailbox has room; an address already there is left to the code below.
      const inserted = yield* insertRow({
        mailboxId,
        userId,
        address,
        domain: domainOf(address),
        tokenSha256: sha256(token),
        confirmedAt
      }).pipe(Effect.catchTag("ParseError", Effect.die))
      if (Option.isSome(inserted)) {
        if (confirmedAt === null) {
          yield* mailLink(userId, mailbox, address, token).pipe(
            // Not mailed (over the allowance): not kept either, so that adding it later mails the link.
            Effect.tapError(() => sql`DELETE FROM mailbox_forwards WHERE mailbox_id = ${mailboxId} AND address = ${address}`)
          )
        }
        return { forwarding: toForwarding(inserted.value), created: true }
      }
      const found = yield* forwardRow({ mailboxId, address }).pipe(Effect.catchTag("ParseError", Effect.die))
      if (Option.isNone(found)) {
        return yield* new ForwardingListFull({
          message: `This mailbox forwards to ${MAX_FORWARDS} addresses already; remove one first`,
          details: { limit: MAX_FORWARDS, mailbox_id: mailboxId }
        })
      }
      const existing = found.value
      if (existing.suspendedAt !== null) {
        // Added again after its copies were refused: the account says the address works now.
        const resumed = yield* resumeRow({ mailboxId, address }).pipe(Effect.catchTag("ParseError", Effect.die))
        return { forwarding: toForwarding(Option.getOrElse(resumed, () => existing)), created: false }
      }
      if (existing.confirmedAt === null) {
        // Asked again: a new link (the earlier one stops working).
        yield* mailLink(userId, mailbox, address, token)
        yield* sql`UPDATE mailbox_forwards SET token_sha256 = ${sha256(token)} WHERE mailbox_id = ${mailboxId} AND address = ${address}`
      }
      return { forwarding: toForwarding(existing), created: false }
    })

    /** Stop forwarding to `address`; 404 when the mailbox does not forward to it. */
    const remove = Effect.fn("Forwarding.remove")(function*(userId: string, mailboxId: string, rawAddress: string) {
      const address = rawAddress.toLowerCase()
      yield* ownMailbox(sql, userId, mailboxId)
      const deleted = yield* sql`DELETE FROM mailbox_forwards WHERE mailbox_id = ${mailboxId} AND address = ${address} RETURNING 1`
      if (deleted.length === 0) {
        return yield* new NotFound({ message: `This mailbox does not forward to ${address}`, details: { address, mailbox_id: mailboxId } })
      }
      return { address, mailbox_id: mailboxId, deleted: true as const }
    })

    const linkRowOf = SqlSchema.findOne({
      Request: Schema.Struct({ tokenSha256: Schema.String }),
      Result: LinkRow,
      execute: ({ tokenSha256 }) =>
        sql`
          SELECT f.mailbox_id, f.address, f.confirmed_at, lower(m.local_part || '@' || m.domain) AS mailbox
          FROM mailbox_forwards f JOIN mailboxes m ON m.id = f.mailbox_id AND m.status = 'active'
          WHERE f.token_sha256 = ${tokenSha256}`
    })

    const linkRow = (token: string) => linkRowOf({ tokenSha256: sha256(token) }).pipe(Effect.catchTag("ParseError", Effect.die))

    const toLink = (row: { readonly mailbox: string; readonly address: string }, active: boolean): ForwardingLink => ({
      mailbox: row.mailbox,
      address: row.address,
      active
    })

    /** The link `token`, as its page shows it; none for a link that is not (or no longer) valid. */
    const find = Effect.fn("Forwarding.find")(function*(token: string) {
      return Option.map(yield* linkRow(token), (row) => toLink(row, row.confirmedAt !== null))
    })

    /** The address's owner agrees: the mailbox's mail is forwarded from now on. Again, nothing more. */
    const confirm = Effect.fn("Forwarding.confirm")(function*(token: string) {
      const found = yield* linkRow(token)
      if (Option.isNone(found)) return Option.none<ForwardingLink>()
      yield* sql`
        UPDATE mailbox_forwards SET confirmed_at = coalesce(confirmed_at, now()) WHERE token_sha256 = ${sha256(token)}`
      yield* Effect.logInfo("Forwarding confirmed").pipe(Effect.annotateLogs({ mailbox_id: found.value.mailboxId }))
      return Option.some(toLink(found.value, true))
    })

    /** The address's owner wants no more: the address is removed from the mailbox's forwarding. */
    const stop = Effect.fn("Forwarding.stop")(function*(token: string) {
      const found = yield* linkRow(token)
      if (Option.isNone(found)) return Option.none<ForwardingLink>()
      yield* sql`DELETE FROM mailbox_forwards WHERE token_sha256 = ${sha256(token)}`
      yield* Effect.logInfo("Forwarding stopped by its recipient").pipe(Effect.annotateLogs({ mailbox_id: found.value.mailboxId }))
      return Option.some(toLink(found.value, false))
    })

    return { list, add, remove, find, confirm, stop } as const
  })
}) {}
