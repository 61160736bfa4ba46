/**
 * An account's filters (the rules are filter-rules.ts): kept, changed and listed for the API; read by
 * ingest for every received email; applied on request to mail already received.
 *
 * - Ingest reads an account's filters from a cache in each process (bus/told-cache.ts), so filtering
 *   costs a received email no round trip of its own: a change is applied here before the caller's
 *   answer, and on every other node within a second. A filter applies to mail stored after that.
 * - How often each filter applied is noted in memory and written every few seconds (write-behind.ts):
 *   a count a person reads to see that a filter works, which a crash may leave a few emails short.
 * - `apply` runs a filter over the newest APPLY_LIMIT emails already received in its reach, changing
 *   their labels as the API's label changes do (labels.ts: `email.labels_changed` for each), or, as a
 *   dry run, only counts them. It reads APPLY_PAGE emails a statement, in the order of an index
 *   (received_at, id), and changes those to change in transactions of up to CHANGE_BATCH, gathered
 *   across pages: each a few statements whatever its size (the emails locked and read, one UPDATE per
 *   resulting label set, the announcements staged in one INSERT, published together once it commits).
 *   What costs is the rows written (an email's labels are in several indexes, and each change is
 *   announced); a transaction is sized to take about CHANGE_TIME, so other requests have turns on the
 *   embedded database's one connection between them.
 * - A mailbox's filters go when the mailbox is deleted (mailboxes.ts); a mailbox that is not the
 *   caller's is 404, a filter that is not the caller's too.
 */
import { SqlClient, type SqlError, SqlSchema } from "@effect/sql"
import { Cause, Duration, Effect, Option, Schedule, Schema } from "effect"
import { newId } from "../accounts/tokens.ts"
import { groupCommit } from "../batching.ts"
import { makeToldCache } from "../bus/told-cache.ts"
import { FilterQuotaReached, NotFound, ValidationError } from "../errors.ts"
import { DependencyHealth } from "../health/dependency-health.ts"
import type { Page, Sort } from "../listing.ts"
import { ownMailbox } from "../mailboxes/owned.ts"
import { writeBehind } from "../write-behind.ts"
import {
  actionsProblem,
  APPLY_LIMIT,
  applyFilters,
  type CompiledFilter,
  compileFilter,
  conditionsProblem,
  type Filter,
  type FilterActions,
  FilterConditions,
  type FilterInput,
  filterSortFields,
  type FilterSortField,
  type FilterUpdate,
  type MailFacts,
  MAX_FILTERS,
  normaliseConditions,
  overlapProblem
} from "./filter-rules.ts"
import { applyChange, checkChange, type LabelChange, MAX_LABELS } from "./label-rules.ts"
import { Labels } from "./labels.ts"
import { fromAuthors } from "./parse.ts"
import { ccColumns, ccOf } from "./records.ts"
import { Headers } from "./schemas.ts"

/** Emails read at a time while applying. */
const APPLY_PAGE = 500
/**
 * Emails changed in one transaction while applying, gathered across pages (a filter that matches one
 * email in ten changes more than the 50 a page holds at a time): sized, transaction by transaction,
 * for each to take about CHANGE_TIME, within CHANGE_BATCH. A transaction's statements are as many for
 * 1,000 emails as for 100; its rows are what it costs (an email's labels are in several indexes, and
 * each change is announced), and it holds the embedded database's one connection while it writes
 * them: other requests wait no longer than that.
 */
const CHANGE_BATCH = { first: 200, least: 50, most: 1_000 }
const CHANGE_TIME = Duration.millis(150)
const FLUSH_EVERY = Duration.seconds(5)

/**
 * A filter as its table holds it, decoded as it is read (SqlSchema): a row that does not read so is a
 * bug here or in a migration, a defect rather than a failure of the request.
 */
const FilterRow = Schema.Struct({
  id: Schema.String,
  userId: Schema.String,
  mailboxId: Schema.NullOr(Schema.String),
  name: Schema.NullOr(Schema.String),
  enabled: Schema.Boolean,
  conditions: Schema.parseJson(FilterConditions),
  addLabels: Schema.Array(Schema.String),
  removeLabels: Schema.Array(Schema.String),
  matchedCount: Schema.Number,
  lastMatchedAt: Schema.NullOr(Schema.DateFromSelf),
  createdAt: Schema.DateFromSelf,
  updatedAt: Schema.DateFromSelf
})
type FilterRow = typeof FilterRow.Type

/** A count(*) as `total`: a bigint, which the client reads as a string. */
const CountRow = Schema.Struct({ total: Schema.NumberFromString })

/** A filter's columns as a statement writes them: the conditions as JSON text, checked and normalised. */
const FilterWrite = Schema.Struct({
  userId: Schema.String,
  mailboxId: Schema.NullOr(Schema.String),
  name: Schema.NullOr(Schema.String),
  enabled: Schema.Boolean,
  conditions: Schema.String,
  addLabels: Schema.Array(Schema.String),
  removeLabels: Schema.Array(Schema.String)
})

// The count as a float8, which reads as a number (a bigint reads as a string).
// The conditions as text: the client would rename their snake_case keys as it does column names.
const COLUMNS = "id, user_id, mailbox_id, name, enabled, conditions::text AS conditions, add_labels, remove_labels, " +
  "matched_count::float8 AS matched_count, last_matched_at, created_at, updated_at"

/** Matches of one filter not written yet. */
interface Matches {
  readonly count: number
  readonly at: Date
}

/** An account's filters, ready for ingest. */
interface FilterSet {
  readonly userId: string
  readonly filters: ReadonlyArray<CompiledFilter>
}

const changeOf = (row: FilterRow): LabelChange => ({ add: row.addLabels, remove: row.removeLabels })

/** A received email as a filter's run over past mail reads it. */
const ReceivedRow = Schema.Struct({
  id: Schema.String,
  mailboxId: Schema.String,
  fromAddress: Schema.String,
  /** The stored From header (every From field): null when the filter has no `from` condition. */
  fromHeader: Schema.NullOr(Headers.value),
  toAddresses: Schema.Array(Schema.String),
  ccAddresses: Schema.NullOr(Schema.Array(Schema.String)),
  /** The stored Cc header, for an email stored before its Cc was kept (records.ts `ccOf`). */
  ccHeader: Schema.NullOr(Headers.value),
  rcptTo: Schema.String,
  subject: Schema.String,
  body: Schema.String,
  hasAttachments: Schema.Boolean,
  labels: Schema.Array(Schema.String),
  /** As text, which keeps the microseconds a Date drops. */
  receivedAt: Schema.String
})
type ReceivedRow = typeof ReceivedRow.Type

/** The facts ingest gave the filters when the email arrived (ingest.ts), as its stored row holds them. */
const factsOf = (email: ReceivedRow): MailFacts => ({
  from: fromAuthors(email.fromAddress, email.fromHeader),
  recipients: [email.rcptTo, ...email.toAddresses, ...ccOf(email)],
  subject: email.subject,
  body: email.body,
  hasAttachments: email.hasAttachments
})

/** Whether `change` changes these labels, and leaves no more than MAX_LABELS. */
const changes = (labels: ReadonlyArray<string>, change: LabelChange) => {
  const next = applyChange(labels, change)
  return (next.length !== labels.length || next.some((label) => !labels.includes(label))) && next.length <= MAX_LABELS
}

const filterNotFound = (filterId: string) => new NotFound({ message: "Filter not found", details: { filter_id: filterId } })

/** The actions as they may be stored: no label both added and removed, label-rules.ts's checks, and no `blocked`. */
const checkActions = (actions: FilterActions) =>
  Effect.gen(function*() {
    const add = actions.add_labels ?? []
    const remove = actions.remove_labels ?? []
    if (add.length === 0 && remove.length === 0) return yield* ValidationError.field("actions", "must add or remove at least one label")
    const overlap = overlapProblem({ add, remove })
    if (overlap !== undefined) return yield* new ValidationError({ message: Object.values(overlap)[0]!, details: overlap })
    const change = yield* checkChange({ add, remove })
    const problem = actionsProblem(change)
    if (problem !== undefined) return yield* new ValidationError({ message: Object.values(problem)[0]!, details: problem })
    return change
  })

const checkConditions = (conditions: FilterConditions) => {
  const problem = conditionsProblem(conditions)
  return problem === undefined
    ? Effect.succeed(normaliseConditions(conditions))
    : Effect.fail(new ValidationError({ message: `conditions: ${Object.values(problem)[0]}`, details: problem }))
}

export class Filters extends Effect.Service<Filters>()("mailroom/Filters", {
  scoped: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const health = yield* DependencyHealth
    const labels = yield* Labels
    const cache = yield* makeToldCache<FilterSet>({ name: "filters", ownerOf: (set) => set.userId })
    const matches = writeBehind<Matches>((noted, newer) => ({ count: noted.count + newer.count, at: newer.at > noted.at ? newer.at : noted.at }))

    const toFilter = (row: FilterRow): Filter => {
      const pending = matches.unwrittenAt(row.id)
      const lastMatched = pending.reduce<Date | null>((latest, m) => (latest === null || m.at > latest ? m.at : latest), row.lastMatchedAt)
      return {
        filter_id: row.id,
        name: row.name,
        mailbox_id: row.mailboxId,
        enabled: row.enabled,
        conditions: row.conditions,
        actions: { add_labels: row.addLabels, remove_labels: row.removeLabels },
        matched_count: row.matchedCount + pending.reduce((sum, m) => sum + m.count, 0),
        last_matched_at: lastMatched?.toISOString() ?? null,
        created_at: row.createdAt.toISOString(),
        updated_at: row.updatedAt.toISOString()
      }
    }

    const filterRow = SqlSchema.findOne({
      Request: Schema.Struct({ userId: Schema.String, filterId: Schema.String }),
      Result: FilterRow,
      execute: ({ filterId, userId }) => sql`SELECT ${sql.literal(COLUMNS)} FROM mail_filters WHERE id = ${filterId} AND user_id = ${userId}`
    })

    const findRow = (userId: string, filterId: string) =>
      filterRow({ userId, filterId }).pipe(
        Effect.catchTag("ParseError", Effect.die),
        Effect.flatMap(Option.match({ onNone: () => Effect.fail(filterNotFound(filterId)), onSome: Effect.succeed }))
      )

    /** The filters of every one of `userIds`, in the order they apply. */
    const filterRowsOf = SqlSchema.findAll({
      Request: Schema.Array(Schema.String),
      Result: FilterRow,
      execute: (userIds) =>
        sql`SELECT ${sql.literal(COLUMNS)} FROM mail_filters WHERE user_id = ANY(${[...new Set(userIds)]}::text[]) ORDER BY created_at, id`
    })

    /** Each account's filters asked for at once, in one statement (a burst of mail to many accounts). */
    const lookup = yield* groupCommit({
      maxBatch: 64,
      parallel: 2,
      run: (userIds: ReadonlyArray<string>) =>
        filterRowsOf(userIds).pipe(
          Effect.catchTag("ParseError", Effect.die),
          Effect.map((rows) =>
            userIds.map((userId): FilterSet => ({
              userId,
              filters: rows.filter((row) => row.userId === userId).map((row) =>
                compileFilter({ id: row.id, mailboxId: row.mailboxId, enabled: row.enabled, conditions: row.conditions, change: changeOf(row) })
              )
            }))
          )
        )
    })

    /**
     * What the account's filters make of a received email's labels (ingest, before it stores the
     * email): the account's filters from this process's cache. `noteApplied` once it is stored.
     */
    const filterReceived = (userId: string, mailboxId: string, facts: MailFacts, received: ReadonlyArray<string>) =>
      Effect.map(cache.resolve(userId, Effect.map(lookup(userId), Option.some)), (found) => {
        const filters = Option.match(found, { onNone: () => [], onSome: (set) => set.filters })
        return filters.length === 0 ? { labels: received, applied: [] } : applyFilters(filters, mailboxId, facts, received)
      })

    /** Count the filters that applied to a stored email (written behind). */
    const noteApplied = (filterIds: ReadonlyArray<string>) =>
      Effect.sync(() => {
        const at = new Date()
        for (const id of filterIds) matches.note(id, { count: 1, at })
      })

    const flush = matches.flush(
      (batch) =>
        sql`
          UPDATE mail_filters f SET matched_count = f.matched_count + v.count,
            last_matched_at = greatest(f.last_matched_at, v.at)
          FROM unnest(${[...batch.keys()]}::text[], ${[...batch.values()].map((m) => m.count)}::bigint[],
                      ${[...batch.values()].map((m) => m.at)}::timestamptz[]) AS v(id, count, at)
          WHERE f.id = v.id`.pipe(Effect.asVoid),
      (error) => health.report("Could not record filter matches; will retry", Cause.fail(error))
    )
    // The last flush, as the service closes: after the periodic one has stopped (finalizers run last first).
    yield* Effect.addFinalizer(() => flush)
    yield* flush.pipe(Effect.repeat(Schedule.spaced(FLUSH_EVERY)), Effect.forkScoped)

    /** The account's filters, or those of one of its mailboxes. */
    const ofAccount = (userId: string, mailboxId: string | undefined) =>
      mailboxId === undefined ? sql`user_id = ${userId}` : sql`user_id = ${userId} AND mailbox_id = ${mailboxId}`

    const listRows = SqlSchema.findAll({
      Request: Schema.Struct({
        userId: Schema.String,
        mailboxId: Schema.optional(Schema.String),
        sort: Schema.Struct({ field: Schema.Literal(...filterSortFields), ascending: Schema.Boolean }),
        page: Schema.Struct({ limit: Schema.Number, offset: Schema.Number })
      }),
      Result: FilterRow,
      execute: ({ mailboxId, page, sort, userId }) => {
        const order = sql.literal(`${sort.field} ${sort.ascending ? "ASC" : "DESC"} NULLS LAST, created_at, id`)
        return sql`
          SELECT ${sql.literal(COLUMNS)} FROM mail_filters WHERE ${ofAccount(userId, mailboxId)}
          ORDER BY ${order} LIMIT ${page.limit} OFFSET ${page.offset}`
      }
    })

    const countRow = SqlSchema.single({
      Request: Schema.Struct({ userId: Schema.String, mailboxId: Schema.optional(Schema.String) }),
      Result: CountRow,
      execute: ({ mailboxId, userId }) => sql`SELECT count(*) AS total FROM mail_filters WHERE ${ofAccount(userId, mailboxId)}`
    })

    /**
     * The account's filters, by default in the order they apply (oldest first); those of one mailbox
     * when `mailboxId` is given. A filter never matched sorts last by last_matched_at either way.
     */
    const list = Effect.fn("Filters.list")(function*(
      userId: string,
      mailboxId: string | undefined,
      page: Page,
      sort: Sort<FilterSortField> = { field: "created_at", direction: "asc" }
    ) {
      if (mailboxId !== undefined) yield* ownMailbox(sql, userId, mailboxId)
      const rows = yield* listRows({ userId, mailboxId, sort: { field: sort.field, ascending: sort.direction === "asc" }, page }).pipe(
        Effect.catchTag("ParseError", Effect.die)
      )
      const counted = yield* countRow({ userId, mailboxId }).pipe(
        Effect.catchTags({ ParseError: Effect.die, NoSuchElementException: Effect.die })
      )
      return { data: rows.map(toFilter), total: counted.total }
    })

    const get = Effect.fn("Filters.get")(function*(userId: string, filterId: string) {
      return toFilter(yield* findRow(userId, filterId))
    })

    /** None when the account has MAX_FILTERS filters already. */
    const insertRow = SqlSchema.findOne({
      Request: Schema.Struct({ id: Schema.String, ...FilterWrite.fields }),
      Result: FilterRow,
      execute: (f) =>
        sql`
          INSERT INTO mail_filters (id, user_id, mailbox_id, name, enabled, conditions, add_labels, remove_labels)
          SELECT ${f.id}, ${f.userId}, ${f.mailboxId}::text, ${f.name}::text, ${f.enabled},
                 ${f.conditions}::jsonb, ${[...f.addLabels]}::text[], ${[...f.removeLabels]}::text[]
          WHERE (SELECT count(*) FROM mail_filters WHERE user_id = ${f.userId}) < ${MAX_FILTERS}
          RETURNING ${sql.literal(COLUMNS)}`
    })

    const create = Effect.fn("Filters.create")(function*(userId: string, input: FilterInput) {
      const conditions = yield* checkConditions(input.conditions)
      const change = yield* checkActions(input.actions)
      const mailboxId = input.mailbox_id ?? null
      if (mailboxId !== null) yield* ownMailbox(sql, userId, mailboxId)
      const inserted = yield* insertRow({
        id: newId("flt"),
        userId,
        mailboxId,
        name: input.name?.trim() ?? null,
        enabled: input.enabled ?? true,
        conditions: JSON.stringify(conditions),
        addLabels: change.add,
        removeLabels: change.remove
      }).pipe(Effect.catchTag("ParseError", Effect.die))
      if (Option.isNone(inserted)) {
        return yield* new FilterQuotaReached({
          message: `The account has ${MAX_FILTERS} filters already; delete one first`,
          details: { limit: MAX_FILTERS }
        })
      }
      yield* cache.changed(userId)
      return toFilter(inserted.value)
    })

    const updateRow = SqlSchema.findOne({
      Request: Schema.Struct({ filterId: Schema.String, ...FilterWrite.fields }),
      Result: FilterRow,
      execute: (f) =>
        sql`
          UPDATE mail_filters SET mailbox_id = ${f.mailboxId}::text, name = ${f.name}::text, enabled = ${f.enabled},
            conditions = ${f.conditions}::jsonb, add_labels = ${[...f.addLabels]}::text[],
            remove_labels = ${[...f.removeLabels]}::text[], updated_at = now()
          WHERE id = ${f.filterId} AND user_id = ${f.userId}
          RETURNING ${sql.literal(COLUMNS)}`
    })

    const update = Effect.fn("Filters.update")(function*(userId: string, filterId: string, input: FilterUpdate) {
      const before = yield* findRow(userId, filterId)
      const conditions = input.conditions === undefined ? before.conditions : yield* checkConditions(input.conditions)
      const change = input.actions === undefined ? changeOf(before) : yield* checkActions(input.actions)
      const mailboxId = input.mailbox_id === undefined ? before.mailboxId : input.mailbox_id
      if (mailboxId !== null && mailboxId !== before.mailboxId) yield* ownMailbox(sql, userId, mailboxId)
      const name = input.name === undefined ? before.name : input.name?.trim() ?? null
      const updated = yield* updateRow({
        filterId,
        userId,
        mailboxId,
        name,
        enabled: input.enabled ?? before.enabled,
        conditions: JSON.stringify(conditions),
        addLabels: change.add,
        removeLabels: change.remove
      }).pipe(Effect.catchTag("ParseError", Effect.die))
      if (Option.isNone(updated)) return yield* filterNotFound(filterId)
      yield* cache.changed(userId)
      return toFilter(updated.value)
    })

    const remove = Effect.fn("Filters.remove")(function*(userId: string, filterId: string) {
      const rows = yield* sql`DELETE FROM mail_filters WHERE id = ${filterId} AND user_id = ${userId} RETURNING 1`
      if (rows.length === 0) return yield* filterNotFound(filterId)
      yield* cache.changed(userId)
      return { filter_id: filterId, deleted: true as const }
    })

    /** One email's label change, in a run over mail already received: 1 when made, 0 when the email was left as it is. */
    const relabelOne = (userId: string, emailId: string, change: LabelChange) =>
      labels.update(userId, [emailId], change).pipe(
        Effect.as(1),
        // Deleted since it was read, or given labels meanwhile that leave no room for the change's.
        Effect.catchTags({ NotFound: () => Effect.succeed(0), ValidationError: () => Effect.succeed(0) }),
        Effect.catchTag("FactLabel", (error) => Effect.die(error))
      )

    /** Those of `emailIds` still in an active mailbox of the account's, with room for the change's labels. */
    const stillChangeable = (userId: string, emailIds: ReadonlyArray<string>, change: LabelChange) =>
      Effect.map(
        sql<{ id: string; labels: ReadonlyArray<string> }>`
          SELECT e.id, e.labels FROM emails e JOIN mailboxes m ON m.id = e.mailbox_id AND m.status = 'active'
          WHERE e.user_id = ${userId} AND e.id = ANY(${[...emailIds]}::text[])`,
        (rows) => rows.filter((row) => applyChange(row.labels, change).length <= MAX_LABELS).map((row) => row.id)
      )

    /**
     * Give `emailIds` (a CHANGE_BATCH) the label change in one transaction (Labels.update, all
     * or none, each email announced): how many emails it changed. When one of them was deleted since
     * it was read, or was given labels meanwhile that leave no room for the change's, the rest are
     * looked up again and changed without it; should that meet another such change, one email at a
     * time. Any other failure (the database's) is the run's.
     */
    const relabel = (userId: string, emailIds: ReadonlyArray<string>, change: LabelChange): Effect.Effect<number, SqlError.SqlError> => {
      const changeAll = (ids: ReadonlyArray<string>, orElse: (ids: ReadonlyArray<string>) => Effect.Effect<number, SqlError.SqlError>) =>
        ids.length === 0 ? Effect.succeed(0) : labels.update(userId, ids, change).pipe(
          Effect.map((updated) => updated.length),
          Effect.catchTags({ NotFound: () => orElse(ids), ValidationError: () => orElse(ids) }),
          // The stored change passed the same checks when the filter was saved.
          Effect.catchTag("FactLabel", (error) => Effect.die(error))
        )
      const oneByOne = (ids: ReadonlyArray<string>) =>
        Effect.reduce(ids, 0, (n, id) => Effect.map(relabelOne(userId, id, change), (one) => n + one))
      return changeAll(emailIds, (ids) => Effect.flatMap(stillChangeable(userId, ids, change), (rest) => changeAll(rest, oneByOne)))
    }

    /** A page of received emails a filter's run reads, newest first, from before `before` when given. */
    const receivedRows = SqlSchema.findAll({
      Request: Schema.Struct({
        userId: Schema.String,
        mailboxId: Schema.NullOr(Schema.String),
        withFrom: Schema.Boolean,
        withBody: Schema.Boolean,
        before: Schema.optional(Schema.Struct({ at: Schema.String, id: Schema.String })),
        limit: Schema.Number
      }),
      Result: ReceivedRow,
      execute: ({ before, limit, mailboxId, userId, withBody, withFrom }) =>
        sql`
          SELECT e.id, e.mailbox_id, e.from_address, ${withFrom ? sql`e.headers->'from'` : sql`NULL`} AS from_header,
                 e.to_addresses, ${sql.literal(ccColumns)}, e.rcpt_to, e.subject,
                 ${withBody ? sql`e.text_body` : sql`''`} AS body, e.has_attachments, e.labels, e.received_at::text AS received_at
          FROM emails e JOIN mailboxes m ON m.id = e.mailbox_id AND m.status = 'active'
          WHERE e.user_id = ${userId} AND e.direction = 'inbound'
            -- Blocked mail is announced nowhere: no filter run changes it (nor tells of it).
            AND NOT (e.labels @> ARRAY['blocked']::text[])
            ${mailboxId === null ? sql`` : sql`AND e.mailbox_id = ${mailboxId}`}
            ${before === undefined ? sql`` : sql`AND (e.received_at, e.id) < (${before.at}::timestamptz, ${before.id})`}
          ORDER BY e.received_at DESC, e.id DESC
          LIMIT ${limit}`
    })

    /**
     * Run the filter over the newest APPLY_LIMIT received emails of its mailbox (or of every active
     * mailbox of the account), whether or not it is enabled: those its conditions hold for are
     * `matched`; those whose labels it changes are `changed` (unless `dryRun`: those it would change).
     * Emails it would give more than MAX_LABELS labels are left as they are.
     */
    const apply = Effect.fn("Filters.apply")(function*(userId: string, filterId: string, dryRun: boolean) {
      const row = yield* findRow(userId, filterId)
      const change = changeOf(row)
      const filter = compileFilter({ id: row.id, mailboxId: row.mailboxId, enabled: true, conditions: row.conditions, change })
      const withBody = row.conditions.body_contains !== undefined
      // Every author of the From is in the stored headers; read only when a condition asks.
      const withFrom = row.conditions.from !== undefined
      let scanned = 0
      let matched = 0
      let changed = 0
      // Emails to change not changed yet: a batch at a time, the rest once every page is read.
      let toChange: Array<string> = []
      let batchSize = CHANGE_BATCH.first
      const changeSome = (all: boolean) =>
        Effect.gen(function*() {
          while (toChange.length >= (all ? 1 : batchSize)) {
            const batch = toChange.slice(0, batchSize)
            toChange = toChange.slice(batchSize)
            const [took, count] = yield* Effect.timed(relabel(userId, batch, change))
            changed += count
            // The next batch sized for CHANGE_TIME by this one's pace, at most twice this one.
            const paced = Math.round(batch.length * Duration.toMillis(CHANGE_TIME) / Math.max(1, Duration.toMillis(took)))
            batchSize = Math.min(CHANGE_BATCH.most, 2 * batchSize, Math.max(CHANGE_BATCH.least, paced))
          }
        })
      // Where the last page ended: its received_at as text, which keeps the microseconds a Date drops.
      let before: { readonly at: string; readonly id: string } | undefined
      while (scanned < APPLY_LIMIT) {
        const rows: ReadonlyArray<ReceivedRow> = yield* receivedRows({
          userId,
          mailboxId: row.mailboxId,
          withFrom,
          withBody,
          before,
          limit: Math.min(APPLY_PAGE, APPLY_LIMIT - scanned)
        }).pipe(Effect.catchTag("ParseError", Effect.die))
        if (rows.length === 0) break
        scanned += rows.length
        const last = rows[rows.length - 1]!
        before = { at: last.receivedAt, id: last.id }
        const matching = rows.filter((email) => applyFilters([filter], email.mailboxId, factsOf(email), email.labels).applied.length > 0)
        const changing = matching.filter((email) => changes(email.labels, change)).map((email) => email.id)
        matched += matching.length
        if (dryRun) changed += changing.length
        else {
          toChange.push(...changing)
          yield* changeSome(false)
        }
        if (rows.length < APPLY_PAGE) break
      }
      yield* changeSome(true)
      return { filter_id: filterId, dry_run: dryRun, scanned, matched, changed }
    })

    return { list, get, create, update, remove, apply, filterReceived, noteApplied, flush } as const
  }),
  dependencies: [Labels.Default]
}) {}
