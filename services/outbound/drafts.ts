/**
 * Drafts (issue 16): the human-approval path. An agent drafts (possibly a reply or a forward), a
 * person reviews and sends it, now or at `send_at`; until it is sent it can be edited or deleted,
 * which is how a scheduled send is cancelled.
 *
 * Sending is idempotent per draft: it claims the draft (`draft` → `sending`), sends with the
 * Idempotency-Key `draft:<id>`, and records the email (`sent`). A sender that dies half-way leaves
 * the draft `sending`; the scheduler takes such drafts again after a minute, and the key makes the
 * second attempt answer the first one's email instead of sending twice.
 *
 * What a person approves is what is sent: an edit or a send may name the version it was decided on
 * (`if_updated_at`, the draft's `updated_at` as last read), checked with the draft locked against the
 * claim or the change, so a draft its agent changed meanwhile is refused (409 with `updated_at` now)
 * rather than sent or edited unseen. Without one (an agent sending its own draft) nothing is checked.
 */
import { SqlClient, type Statement } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Data, Duration, Effect, Layer, Option, Queue, Schema } from "effect"
import { newId } from "../accounts/tokens.ts"
import { Bus, subjects } from "../bus/bus.ts"
import { Conflict, NotFound, PayloadTooLarge, ServiceUnavailable, ValidationError } from "../errors.ts"
import { DependencyHealth } from "../health/dependency-health.ts"
import type { Page, Sort } from "../listing.ts"
import { amongMailboxes, ownMailbox } from "../mailboxes/owned.ts"
import { limits, type Plan } from "../plans/plans.ts"
import { checkForwardedAttachments, type DraftStart, Replies } from "./replies.ts"
import { type AddressInput, Draft, DraftContent, type DraftInput, type DraftSortField, type DraftStatus, MAX_RECIPIENTS } from "./schemas.ts"
import { claim, earlierAnswer, hashed, type Idempotency } from "./idempotency.ts"
import { fromSendInput, Outbound, storageQuotaReached } from "./send.ts"

/**
 * The scheduler sleeps until the next draft is due, woken sooner when a draft is scheduled anywhere
 * (a broadcast); it looks at least this often, for a wake-up lost with the bus.
 */
const LOOK_AT_LEAST_EVERY = Duration.seconds(10)
/** After a round that failed (the database unreachable), the next one. */
const AFTER_FAILURE = Duration.seconds(1)
/** A draft left `sending` this long ago was abandoned by a sender that died: send it again. */
const ABANDONED_AFTER_SECONDS = 60
/** A scheduled draft that could not be queued (an outage, not a refusal) is tried again after this. */
const RETRY_AFTER_SECONDS = 5
const DUE_BATCH = 20

const DraftRow = Schema.Struct({
  id: Schema.String,
  mailboxId: Schema.String,
  status: Schema.Literal("draft", "sending", "sent"),
  content: Schema.parseJson(DraftContent),
  inReplyTo: Schema.NullOr(Schema.String),
  replyAll: Schema.Boolean,
  /** Made since drafts hold their recipients and subject (migrations/0061): sent exactly as it stands. */
  filled: Schema.Boolean,
  forwardOf: Schema.NullOr(Schema.String),
  sendAt: Schema.NullOr(Schema.DateFromSelf),
  emailId: Schema.NullOr(Schema.String),
  lastError: Schema.NullOr(Schema.String),
  createdAt: Schema.DateFromSelf,
  updatedAt: Schema.DateFromSelf
})
type DraftRow = typeof DraftRow.Type

const COLUMNS = "id, mailbox_id, status, content::text AS content, in_reply_to, reply_all, filled, forward_of, send_at, email_id, last_error, created_at, updated_at"

const toDraft = (row: DraftRow): Draft => ({
  draft_id: row.id,
  mailbox_id: row.mailboxId,
  status: row.status,
  to: row.content.to ?? null,
  cc: row.content.cc ?? null,
  bcc: row.content.bcc ?? null,
  subject: row.content.subject ?? null,
  reply_to: row.content.reply_to ?? null,
  text: row.content.text ?? null,
  html: row.content.html ?? null,
  headers: row.content.headers ?? null,
  list_unsubscribe: row.content.list_unsubscribe ?? null,
  attachments: (row.content.attachments ?? []).map((a) => ({
    filename: a.filename,
    content_type: a.content_type ?? null,
    size: Buffer.from(a.content, "base64").byteLength
  })),
  in_reply_to: row.inReplyTo,
  reply_all: row.replyAll,
  forward_of: row.forwardOf,
  send_at: row.sendAt?.toISOString() ?? null,
  email_id: row.emailId,
  last_error: row.lastError,
  created_at: row.createdAt.toISOString(),
  updated_at: row.updatedAt.toISOString()
})

/** A field of a kept answer that an answer kept before every field was answered (null when none) may lack. */
const keptField = <S extends Schema.Schema.Any>(schema: S) => Schema.optionalWith(schema, { default: () => null as Schema.Schema.Type<S> })

/** A draft create's answer, as an Idempotency-Key keeps it (one kept by an earlier version reads as it would be answered now). */
const DraftAnswer = Schema.parseJson(Schema.Struct({
  ...Draft.fields,
  to: keptField(Draft.fields.to),
  cc: keptField(Draft.fields.cc),
  bcc: keptField(Draft.fields.bcc),
  subject: keptField(Draft.fields.subject),
  reply_to: keptField(Draft.fields.reply_to),
  text: keptField(Draft.fields.text),
  html: keptField(Draft.fields.html),
  headers: keptField(Draft.fields.headers),
  list_unsubscribe: keptField(Draft.fields.list_unsubscribe)
}))

/** The key's row appeared while this create ran: answer what the first one answered. */
class KeyTaken extends Data.TaggedError("KeyTaken") {}

const draftNotFound = (draftId: string) => new NotFound({ message: "Draft not found", details: { draft_id: draftId } })

/**
 * Whether `row` is no longer the version `ifUpdatedAt` names. Compared as the row's own `updated_at`
 * is answered (to the millisecond, as decoded), never as the database's microseconds.
 */
const changedSince = (row: DraftRow, ifUpdatedAt: string | undefined) =>
  ifUpdatedAt !== undefined && row.updatedAt.getTime() !== new Date(ifUpdatedAt).getTime()

const changedMeanwhile = (row: DraftRow, ifUpdatedAt: string, doing: "sent" | "changed") =>
  new Conflict({
    message: `The draft was changed after it was read (its updated_at is now ${row.updatedAt.toISOString()}, not ${ifUpdatedAt}); ` +
      `nothing was ${doing}: read it again, review it, and retry with its updated_at`,
    details: { draft_id: row.id, status: row.status, updated_at: row.updatedAt.toISOString(), if_updated_at: ifUpdatedAt }
  })

/**
 * A draft's content (what `content` stores: the send-request part) once `input` is applied to
 * `current`: a field given replaces the draft's own, a field given as null is removed, the rest stay.
 * A new draft's is applied to nothing.
 */
const applied = (current: DraftContent, input: DraftInput): DraftContent => {
  const { forward_of: _f, in_reply_to: _i, reply_all: _r, send_at: _s, ...given } = input
  const content: Record<string, unknown> = { ...current }
  for (const [name, value] of Object.entries(given)) {
    if (value === null) delete content[name]
    else if (value !== undefined) content[name] = value
  }
  return content as DraftContent
}

/** An address of a draft's lists, as it is compared: lower case. */
const keyOf = (address: AddressInput) => (typeof address === "string" ? address : address.address).toLowerCase()

/** How far in the past a `send_at` may be written (a client's clock a little behind): it then leaves at once. */
const SEND_AT_SLACK_MS = 5 * 60_000

/**
 * What a draft is refused at once rather than when it is sent: more recipients than a message may
 * have (a person would approve what cannot go), and a schedule well in the past (a mistyped year
 * would send it now, unreviewed).
 */
const checkDraft = (content: DraftContent, sendAt: string | null | undefined, startedToAll: boolean, now = Date.now()) => {
  const recipients = new Set([...(content.to ?? []), ...(content.cc ?? []), ...(content.bcc ?? [])].map(keyOf))
  if (recipients.size > MAX_RECIPIENTS) {
    // Filled in from a reply to all just now: the original's recipients are too many, not the caller's.
    return Effect.fail(
      startedToAll
        ? ValidationError.field(
          "reply_all",
          `makes ${recipients.size} recipients (the email's and the draft's), more than the ${MAX_RECIPIENTS} a message may have: ` +
            "leave reply_all out and name whom to answer in to and cc"
        )
        : ValidationError.field("to", `must list at most ${MAX_RECIPIENTS} recipients (to, cc and bcc together)`)
    )
  }
  if (sendAt != null && new Date(sendAt).getTime() < now - SEND_AT_SLACK_MS) {
    return Effect.fail(ValidationError.field("send_at", "is in the past: give a time to come, or send the draft now"))
  }
  return Effect.void
}

/**
 * `content` with what the original gives a reply or forward (`start`) where the draft has none of
 * its own: the recipients (the caller's `to` wins; a reply to all adds the others to `cc`, each
 * address once) and the subject. From then on they are the draft's, to read and edit: what a
 * person approving it sees is what is sent.
 */
const started = (content: DraftContent, start: DraftStart): DraftContent => {
  const to = content.to ?? (start.to !== undefined && start.to.length > 0 ? start.to : undefined)
  const seen = new Set((to ?? []).map(keyOf))
  const cc = [...(content.cc ?? []), ...(start.cc ?? [])].filter((a) => !seen.has(keyOf(a)) && (seen.add(keyOf(a)), true))
  return {
    ...content,
    ...(to !== undefined ? { to } : {}),
    ...(content.cc !== undefined || cc.length > 0 ? { cc } : {}),
    ...(content.subject !== undefined ? {} : start.subject !== undefined ? { subject: start.subject } : {})
  }
}

/** `content` without the fields that are still as `start` gave them (and `input` does not set). */
const unstarted = (content: DraftContent, start: DraftStart, input: DraftInput): DraftContent => {
  const kept: Record<string, unknown> = { ...content }
  for (const field of ["to", "cc", "subject"] as const) {
    if (input[field] === undefined && start[field] !== undefined && JSON.stringify(content[field]) === JSON.stringify(start[field])) delete kept[field]
  }
  return kept as DraftContent
}

export class Drafts extends Effect.Service<Drafts>()("mailroom/Drafts", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const outbound = yield* Outbound
    const replies = yield* Replies
    const bus = yield* Bus

    /** Wake every node's scheduler (`DraftSchedulerLive`) when `draft` has a time to leave at. */
    const scheduled = <A extends { readonly send_at: string | null }>(draft: A) =>
      draft.send_at === null ? Effect.void : bus.broadcast(subjects.draftScheduled, new Uint8Array())

    const decodeRows = (rows: ReadonlyArray<unknown>) => Effect.orDie(Schema.decodeUnknown(Schema.Array(DraftRow))(rows))

    /** A draft; `locked`, in a transaction, held against a change or a claim until it ends. */
    const find = (userId: string, mailboxId: string, draftId: string, locked = false) =>
      Effect.gen(function*() {
        const rows = yield* sql`SELECT ${sql.literal(COLUMNS)} FROM drafts
                                WHERE id = ${draftId} AND mailbox_id = ${mailboxId} AND user_id = ${userId}
                                ${sql.literal(locked ? "FOR UPDATE" : "")}`.pipe(Effect.flatMap(decodeRows))
        return rows[0] ?? (yield* draftNotFound(draftId))
      })

    /**
     * A draft that could never be sent is not kept: its content (the text, the html and the
     * attachments in base64, as a message carries them) must fit the plan's message size (413 with
     * `size` and `limit`, as the send answers). And it is stored mail (migrations/0027: it counts
     * toward the account's storage until it is sent or deleted): it must fit the plan's storage,
     * less what the draft it replaces (`replacing`) holds now (403 STORAGE_QUOTA, as a send answers).
     */
    const checkSize = (userId: string, content: DraftContent, replacing?: string) =>
      Effect.gen(function*() {
        const size = Buffer.byteLength(JSON.stringify(content))
        const rows = yield* sql<{ plan: Plan; used: string; replaced: string }>`
          SELECT s.plan, coalesce(u.bytes, 0) AS used,
                 coalesce((SELECT mailroom_draft_bytes(d.status, d.content) FROM drafts d WHERE d.id = ${replacing ?? null}), 0) AS replaced
          FROM subscriptions s LEFT JOIN storage_usage u ON u.user_id = s.user_id
          WHERE s.user_id = ${userId}`
        const plan = rows[0]?.plan ?? "free"
        const limit = limits[plan].maxEmailBytes
        if (size > limit) {
          return yield* new PayloadTooLarge({
            message: `The draft is ${size} bytes; the ${plan} plan sends messages of at most ${limit}`,
            details: { size, limit }
          })
        }
        const storage = limits[plan].storageBytes
        const used = Number(rows[0]?.used ?? 0) - Number(rows[0]?.replaced ?? 0)
        if (storage !== null && used + size > storage) return yield* storageQuotaReached(plan, used, size, "draft")
      })

    /** A reply or forward must answer an email of the draft's own mailbox (it is sent from there). */
    const checkOriginal = (userId: string, mailboxId: string, field: "in_reply_to" | "forward_of", emailId: string | null | undefined) =>
      emailId === null || emailId === undefined ? Effect.void : replies.mailboxOf(userId, emailId).pipe(
        Effect.catchTag("NotFound", () => Effect.succeed(undefined)),
        Effect.flatMap((holder) => holder === mailboxId ? Effect.void : Effect.fail(ValidationError.field(field, "must be the id of an email of this mailbox")))
      )

    const checkLinks = (
      userId: string,
      mailboxId: string,
      inReplyTo: string | null | undefined,
      replyAll: boolean | undefined,
      forwardOf: string | null | undefined
    ) =>
      Effect.gen(function*() {
        if (inReplyTo && forwardOf) return yield* ValidationError.field("forward_of", "a draft replies or forwards, not both")
        if (replyAll === true && !inReplyTo) return yield* ValidationError.field("reply_all", "is for a reply: give in_reply_to, the email it answers")
        yield* checkOriginal(userId, mailboxId, "in_reply_to", inReplyTo)
        yield* checkOriginal(userId, mailboxId, "forward_of", forwardOf)
      })

    /** A forward's attachments and those of the email it forwards, together at most a message's: told when made or edited, not when approved. */
    const checkForward = (forwardOf: string | null, content: DraftContent) =>
      forwardOf === null
        ? Effect.void
        : Effect.flatMap(replies.attachmentsOf(forwardOf), (carried) => checkForwardedAttachments(carried, content.attachments?.length ?? 0))

    /** What the email a draft now answers or forwards gives it (nothing for a new message). */
    const startOf = (userId: string, inReplyTo: string | null, replyAll: boolean, forwardOf: string | null): Effect.Effect<DraftStart, NotFound | SqlError> =>
      inReplyTo !== null
        ? replies.draftStart(userId, inReplyTo, replyAll ? "reply_all" : "reply")
        : forwardOf !== null
        ? replies.draftStart(userId, forwardOf, "forward")
        : Effect.succeed({})

    /**
     * Make a draft. With an Idempotency-Key (`idempotency`), a repeat of the request answers the draft
     * as it was first answered and makes none; another request under the key is 409 (idempotency.ts).
     */
    const create = Effect.fn("Drafts.create")(function*(userId: string, mailboxId: string, input: DraftInput, idempotency?: Idempotency) {
      const key = idempotency === undefined ? undefined : hashed(idempotency)
      if (key !== undefined) {
        const earlier = yield* earlierAnswer(sql, userId, key, DraftAnswer)
        if (earlier !== undefined) return earlier
      }
      yield* ownMailbox(sql, userId, mailboxId)
      yield* checkLinks(userId, mailboxId, input.in_reply_to, input.reply_all, input.forward_of)
      const [inReplyTo, replyAll, forwardOf] = [input.in_reply_to ?? null, input.reply_all ?? false, input.forward_of ?? null]
      const content = started(applied({}, input), yield* startOf(userId, inReplyTo, replyAll, forwardOf))
      yield* checkDraft(content, input.send_at, replyAll)
      yield* checkForward(forwardOf, content)
      yield* checkSize(userId, content)
      const insert = sql`
        INSERT INTO drafts (id, user_id, mailbox_id, content, in_reply_to, reply_all, forward_of, send_at, filled)
        VALUES (${newId("drf")}, ${userId}, ${mailboxId}, ${JSON.stringify(content)}, ${inReplyTo},
                ${replyAll}, ${forwardOf}, ${input.send_at ? new Date(input.send_at) : null}, true)
        RETURNING ${sql.literal(COLUMNS)}`.pipe(Effect.flatMap(decodeRows), Effect.map((rows) => toDraft(rows[0]!)))
      if (key === undefined) return yield* Effect.tap(insert, scheduled)
      // A request with the same key at the same moment waits on the key's row, then rolls its draft back.
      return yield* sql.withTransaction(Effect.gen(function*() {
        const draft = yield* insert
        if (!(yield* claim(sql, userId, key, draft))) return yield* new KeyTaken()
        return draft
      })).pipe(
        Effect.catchTag("KeyTaken", () =>
          Effect.flatMap(earlierAnswer(sql, userId, key, DraftAnswer), (earlier) =>
            earlier === undefined
              ? Effect.fail(ServiceUnavailable.of("The same Idempotency-Key is being used right now; retry", 1))
              : Effect.succeed(earlier))),
        Effect.tap(scheduled)
      )
    })

    /** The drafts `scope` picks (in `status`, when given), a page of them in `sort`'s order, and how many there are. */
    const listWhere = (scope: Statement.Fragment, page: Page, sort: Sort<DraftSortField>, status: DraftStatus | undefined) =>
      Effect.gen(function*() {
        const which = status === undefined ? scope : sql`${scope} AND status = ${status}`
        // Drafts not scheduled (send_at null) come last either way.
        const direction = sort.direction === "asc" ? "ASC" : "DESC"
        const order = sql.literal(`${sort.field} ${direction} NULLS LAST, id ${direction}`)
        const rows = yield* sql`SELECT ${sql.literal(COLUMNS)} FROM drafts WHERE ${which}
                                ORDER BY ${order} LIMIT ${page.limit} OFFSET ${page.offset}`.pipe(Effect.flatMap(decodeRows))
        const counted = yield* sql<{ total: string }>`SELECT count(*) AS total FROM drafts WHERE ${which}`
        return { data: rows.map(toDraft), total: Number(counted[0]?.total ?? 0) }
      })

    const list = Effect.fn("Drafts.list")(function*(
      userId: string,
      mailboxId: string,
      page: Page,
      sort: Sort<DraftSortField>,
      status?: DraftStatus
    ) {
      yield* ownMailbox(sql, userId, mailboxId)
      return yield* listWhere(sql`mailbox_id = ${mailboxId} AND user_id = ${userId}`, page, sort, status)
    })

    /** The drafts of every active mailbox of the account (of `only`, when given: a key limited to them). */
    const listAll = Effect.fn("Drafts.listAll")(function*(
      userId: string,
      page: Page,
      sort: Sort<DraftSortField>,
      status?: DraftStatus,
      only?: ReadonlyArray<string>
    ) {
      return yield* listWhere(
        sql`user_id = ${userId} AND mailbox_id IN (SELECT id FROM mailboxes WHERE user_id = ${userId} AND status = 'active'
            ${amongMailboxes(sql, "id", only)})`,
        page,
        sort,
        status
      )
    })

    const get = Effect.fn("Drafts.get")(function*(userId: string, mailboxId: string, draftId: string) {
      return toDraft(yield* find(userId, mailboxId, draftId))
    })

    /**
     * Change what the input names; the rest stays. A draft being sent or sent is 409; so is one changed
     * since `ifUpdatedAt`, when given (read, checked and changed in one transaction, the draft locked).
     */
    const update = Effect.fn("Drafts.update")(function*(userId: string, mailboxId: string, draftId: string, input: DraftInput, ifUpdatedAt?: string) {
      const current = yield* find(userId, mailboxId, draftId, ifUpdatedAt !== undefined)
      if (current.status !== "draft") {
        return yield* new Conflict({ message: `The draft is ${current.status === "sent" ? "sent" : "being sent"}`, details: { draft_id: draftId, status: current.status } })
      }
      if (changedSince(current, ifUpdatedAt)) return yield* changedMeanwhile(current, ifUpdatedAt!, "changed")
      const inReplyTo = input.in_reply_to !== undefined ? input.in_reply_to : current.inReplyTo
      const forwardOf = input.forward_of !== undefined ? input.forward_of : current.forwardOf
      // A draft that is no reply any more is no reply to all either.
      const replyAll = input.reply_all ?? (inReplyTo === null ? false : current.replyAll)
      yield* checkLinks(userId, mailboxId, inReplyTo, input.reply_all, forwardOf)
      const edited = applied(current.content, input)
      // Made a reply (to all) or a forward of another email: the fields the old link gave that nobody
      // has edited since go, and what the new one gives fills what the draft then lacks.
      const linked = inReplyTo !== current.inReplyTo || forwardOf !== current.forwardOf || replyAll !== current.replyAll
      // Made a plain draft (in_reply_to or forward_of null), it keeps what it shows: a person who drops
      // the threading keeps the recipients and subject they were shown.
      const content = linked && (inReplyTo !== null || forwardOf !== null)
        ? started(
          unstarted(edited, yield* startOf(userId, current.inReplyTo, current.replyAll, current.forwardOf).pipe(
            // The email it answered may be gone: then nothing it gave is known.
            Effect.catchTag("NotFound", () => Effect.succeed({}))
          ), input),
          yield* startOf(userId, inReplyTo, replyAll, forwardOf)
        )
        : edited
      yield* checkDraft(content, input.send_at, linked && replyAll)
      yield* checkForward(forwardOf, content)
      yield* checkSize(userId, content, draftId)
      const sendAt = input.send_at === undefined ? current.sendAt : input.send_at === null ? null : new Date(input.send_at)
      const rows = yield* sql`
        UPDATE drafts SET content = ${JSON.stringify(content)}, in_reply_to = ${inReplyTo}, forward_of = ${forwardOf},
                          reply_all = ${replyAll}, filled = filled OR ${linked}, send_at = ${sendAt}, last_error = NULL, updated_at = now()
        WHERE id = ${draftId} AND status = 'draft'
        RETURNING ${sql.literal(COLUMNS)}`.pipe(Effect.flatMap(decodeRows))
      if (rows[0] === undefined) return yield* new Conflict({ message: "The draft is being sent", details: { draft_id: draftId } })
      return toDraft(rows[0])
    },
      // A version to check: read, checked and changed in one transaction, the draft locked meanwhile.
      (edit, _userId, _mailboxId, _draftId, _input, ifUpdatedAt) => ifUpdatedAt === undefined ? edit : sql.withTransaction(edit),
      (edit) => Effect.tap(edit, scheduled)
    )

    /**
     * Delete a draft: before it is sent, that cancels it; once sent, only the draft goes (the email it
     * became stays, and the answer names it). One being sent cannot be called back: 409.
     */
    const remove = Effect.fn("Drafts.remove")(function*(userId: string, mailboxId: string, draftId: string) {
      const deleted = yield* sql<{ emailId: string | null }>`
        DELETE FROM drafts WHERE id = ${draftId} AND mailbox_id = ${mailboxId} AND user_id = ${userId} AND status <> 'sending'
        RETURNING email_id`
      if (deleted.length === 0) {
        const current = yield* find(userId, mailboxId, draftId)
        return yield* new Conflict({ message: "The draft is being sent: it can no longer be cancelled", details: { draft_id: draftId, status: current.status } })
      }
      return { draft_id: draftId, deleted: true as const, email_id: deleted[0]!.emailId }
    })

    /**
     * Send a claimed draft as what it is: a reply, a forward, or a new message. Its key's fingerprint
     * is the draft itself, so the key can never be reused for another request.
     */
    const dispatch = (userId: string, row: DraftRow) => {
      const idempotency: Idempotency = { key: `draft:${row.id}`, fingerprint: ["draft", row.id] }
      const c = row.content
      // A filled draft holds its recipients and subject: sent exactly as they stand, what a person
      // removed staying removed. One made before drafts were filled names none of its own and is
      // answered as the reply and forward routes answer (migrations/0061).
      const exact = row.filled ? { to: c.to ?? [], subject: c.subject ?? "" } : {}
      const sending = row.inReplyTo !== null
        ? replies.reply(userId, row.inReplyTo, { ...c, ...exact }, row.replyAll && !row.filled, idempotency)
        : row.forwardOf !== null
        ? replies.forward(userId, row.forwardOf, { ...c, ...exact, to: c.to ?? [] }, idempotency)
        : outbound.submit(userId, row.mailboxId, fromSendInput(c), idempotency)
      return Effect.catchTag(sending, "IdempotencyKeyReused", (error) => Effect.die(error))
    }

    /** Send the claimed `row` and record the email it became; on a refusal, hand the draft back. */
    const sendClaimed = (userId: string, row: DraftRow) =>
      dispatch(userId, row).pipe(
        Effect.tap((accepted) => sql`UPDATE drafts SET status = 'sent', email_id = ${accepted.email_id}, last_error = NULL, updated_at = now()
                                     WHERE id = ${row.id}`),
        Effect.tapError(() => sql`UPDATE drafts SET status = 'draft', updated_at = now() WHERE id = ${row.id} AND status = 'sending'`)
      )

    /**
     * `POST …/drafts/{id}/send`: 202's answer; a draft sent already answers its email again (whatever
     * `ifUpdatedAt` says: this request sends nothing). One awaiting approval that changed since
     * `ifUpdatedAt`, when given, is 409 and stays as it is: checked and claimed with the draft locked.
     */
    const send = Effect.fn("Drafts.send")(function*(userId: string, mailboxId: string, draftId: string, ifUpdatedAt?: string) {
      const claim = sql`
        UPDATE drafts SET status = 'sending', updated_at = now()
        WHERE id = ${draftId} AND mailbox_id = ${mailboxId} AND user_id = ${userId} AND status = 'draft'
        RETURNING ${sql.literal(COLUMNS)}`.pipe(Effect.flatMap(decodeRows))
      const claimed = yield* (ifUpdatedAt === undefined ? claim : sql.withTransaction(Effect.gen(function*() {
        const current = yield* find(userId, mailboxId, draftId, true)
        if (current.status === "draft" && changedSince(current, ifUpdatedAt)) return yield* changedMeanwhile(current, ifUpdatedAt, "sent")
        return yield* claim
      })))
      if (claimed[0]) return yield* sendClaimed(userId, claimed[0])
      const current = yield* find(userId, mailboxId, draftId)
      if (current.status === "sent") return yield* dispatch(userId, current)
      return yield* new Conflict({ message: "The draft is being sent", details: { draft_id: draftId, status: current.status } })
    })

    /**
     * The scheduler's round: claim the drafts that are due, and those a dead sender abandoned while
     * sending (scheduled, or sent by hand: a person asked for it, and the draft's own Idempotency-Key
     * sends what the dead sender stored, if it stored it, rather than a second copy); send each. A
     * refused one is unscheduled with the reason, for a person to fix; one that could not be queued
     * for now (the database or the bus unreachable) stays as it was, and is tried again next round.
     */
    const sendDue = Effect.gen(function*() {
      const due = yield* sql`
        UPDATE drafts SET status = 'sending', updated_at = now()
        WHERE id IN (
          SELECT id FROM drafts
          WHERE (status = 'draft' AND send_at IS NOT NULL AND send_at <= now()
                 AND (last_error IS NULL OR updated_at < now() - make_interval(secs => ${RETRY_AFTER_SECONDS})))
             OR (status = 'sending' AND updated_at < now() - make_interval(secs => ${ABANDONED_AFTER_SECONDS}))
          ORDER BY coalesce(send_at, updated_at) LIMIT ${DUE_BATCH}
          FOR UPDATE SKIP LOCKED)
        RETURNING user_id, ${sql.literal(COLUMNS)}`
      const rows = yield* decodeRows(due)
      const owners = due.map((row) => (row as { userId: string }).userId)
      const postponed: Array<ServiceUnavailable | SqlError> = []
      yield* Effect.forEach(rows, (row, i) =>
        sendClaimed(owners[i]!, row).pipe(
          Effect.tap((accepted) => Effect.logInfo("Scheduled draft sent").pipe(Effect.annotateLogs({ draft_id: row.id, email_id: accepted.email_id }))),
          Effect.catchAll((error) => {
            const reason = (error as { message?: string }).message ?? String(error)
            if (error._tag === "ServiceUnavailable" || error._tag === "SqlError") {
              // Not the draft's fault: it stays scheduled, saying why it has not left, and is tried
              // again after a pause; the round fails with it, so the outage is logged (once).
              postponed.push(error)
              return sql`UPDATE drafts SET last_error = ${reason}, updated_at = now() WHERE id = ${row.id} AND status = 'draft'`.pipe(Effect.ignore)
            }
            return sql`UPDATE drafts SET send_at = NULL, last_error = ${reason}, updated_at = now() WHERE id = ${row.id} AND status = 'draft'`.pipe(
              Effect.zipRight(Effect.logWarning("A scheduled draft was refused and unscheduled").pipe(
                Effect.annotateLogs({ draft_id: row.id, reason })
              ))
            )
          })
        ), { concurrency: 4, discard: true })
      if (postponed.length > 0) return yield* Effect.fail(postponed[0]!)
    })

    /**
     * How long until a round has something to do, by the database's clock: a scheduled draft's time,
     * the retry of one an outage held back, or a dead sender's draft taken again; none while no draft
     * waits for any of these.
     */
    const untilDue = sql<{ seconds: number | null }>`
      SELECT extract(epoch FROM least(
               min(send_at) FILTER (WHERE status = 'draft' AND last_error IS NULL),
               min(greatest(send_at, updated_at + make_interval(secs => ${RETRY_AFTER_SECONDS}))) FILTER (WHERE status = 'draft' AND last_error IS NOT NULL),
               min(updated_at + make_interval(secs => ${ABANDONED_AFTER_SECONDS})) FILTER (WHERE status = 'sending')
             ) - now())::float8 AS seconds
      FROM drafts WHERE (status = 'draft' AND send_at IS NOT NULL) OR status = 'sending'`.pipe(
      Effect.map((rows) => {
        const seconds = rows[0]?.seconds
        return seconds === null || seconds === undefined ? Option.none() : Option.some(Duration.millis(Math.max(0, seconds * 1000)))
      })
    )

    return { create, list, listAll, get, update, remove, send, sendDue, untilDue } as const
  })
}) {}

/**
 * Scheduled send (in the mta role; any number of nodes): the due drafts go out, then the scheduler
 * sleeps until the next one is due, or until a draft is scheduled on any node, or at most
 * LOOK_AT_LEAST_EVERY. An idle deployment asks the database once in that while, not several times a
 * second, and a draft leaves at its time rather than within a polling period of it.
 */
export const DraftSchedulerLive = Layer.scopedDiscard(
  Effect.gen(function*() {
    const drafts = yield* Drafts
    const health = yield* DependencyHealth
    const bus = yield* Bus
    // One wake-up kept while a round runs: a draft scheduled meanwhile is looked at right after it.
    const woken = yield* Queue.sliding<void>(1)
    yield* bus.listen(subjects.draftScheduled, () => Queue.offer(woken, undefined).pipe(Effect.asVoid))
    const round = drafts.sendDue.pipe(
      Effect.zipRight(drafts.untilDue),
      Effect.map(Option.match({
        onNone: () => LOOK_AT_LEAST_EVERY,
        onSome: (until) => Duration.min(until, LOOK_AT_LEAST_EVERY)
      })),
      Effect.catchAllCause((cause) => Effect.as(health.report("Sending due drafts failed; will retry", cause), AFTER_FAILURE))
    )
    yield* round.pipe(
      Effect.flatMap((pause) => Effect.race(Effect.sleep(pause), Queue.take(woken))),
      Effect.forever,
      Effect.forkScoped
    )
  })
)
