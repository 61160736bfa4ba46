/**
 * Changing labels (the rules are label-rules.ts): one change applied to emails of the caller (listed,
 * or a whole thread), all or none, then announced as `email.labels_changed`. And the labels the
 * account's mail carries, counted.
 */
import { SqlClient, type Statement } from "@effect/sql"
import { Effect } from "effect"
import { newId } from "../accounts/tokens.ts"
import { Bus, encodeJson, subjects } from "../bus/bus.ts"
import { deliver, type Publication, stage } from "../bus/outbox.ts"
import { NotFound, ValidationError } from "../errors.ts"
import { emailNotFound, missingThreads, threadsNotFound } from "./emails.ts"
import type { Page, Sort } from "../listing.ts"
import { mailboxScope } from "../mailboxes/owned.ts"
import { applyChange, checkChange, type LabelChange, MAX_LABELS, UNREAD } from "./label-rules.ts"
import { emailBodyColumnList, type EmailBodyRow, emailColumnList, extractedOf, type EmailRow, toFields } from "./records.ts"
import { emailReceivedEventId, receivedPublication, releasedEventId } from "./received.ts"
import { BLOCKED } from "./sender-list-rules.ts"
import type { EmailFields, Headers, LabelCount, LabelSortField } from "./schemas.ts"
import { SPAM } from "./spam.ts"
import { queueForwards } from "./store.ts"
import { forwardedBy, ForwardingKey } from "./forward-rules.ts"
import { forwardPublications } from "../outbound/forwards.ts"

/** The `email.labels_changed` payload: the email's fields with its labels now, and what changed. */
export interface LabelsChanged extends EmailFields {
  readonly added: ReadonlyArray<string>
  readonly removed: ReadonlyArray<string>
}

/** Whether a change that left received mail with `row.labels` (from `before`) let it through: the last of spam and blocked gone. */
const isRelease = (row: EmailRow, before: ReadonlyArray<string>) =>
  row.direction === "inbound" && before.some((label) => label === SPAM || label === BLOCKED) &&
  !row.labels.some((label) => label === SPAM || label === BLOCKED)

/** The domains of each email's forwarded copies, in the order the emails first come. */
const domainsByEmail = (forwards: ReadonlyArray<{ readonly emailId: string; readonly domain: string }>) => {
  const byEmail = new Map<string, Array<string>>()
  for (const { domain, emailId } of forwards) {
    const domains = byEmail.get(emailId) ?? []
    domains.push(domain)
    byEmail.set(emailId, domains)
  }
  return byEmail
}

export class Labels extends Effect.Service<Labels>()("mailroom/Labels", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const bus = yield* Bus
    const { key: forwardingKey } = yield* ForwardingKey

    /**
     * Queue the forwarded copies of released emails (`releases`), as ingest queues a received email's
     * (store.ts `queueForwards`: the same addresses and loop rules), in the change's transaction. Once
     * an email: one that has copies already (forwarded on arrival, or released before) gets none, so
     * labels taken off and put back do not forward it again. Answers the domains to hand to the mta:
     * the new copies' and those still untried (handed over again: the bus drops a job it has).
     */
    const queueReleased = (emailIds: ReadonlyArray<string>) =>
      Effect.gen(function*() {
        const heads = yield* sql<{ id: string; headers: Headers }>`SELECT id, headers FROM emails WHERE id = ANY(${emailIds}::text[])`
        const hops = heads.flatMap((email) => {
          const by = forwardedBy(forwardingKey, email.headers)
          return by.length > 0 ? [{ id: email.id, by }] : []
        })
        return yield* sql<{ emailId: string; domain: string }>`
          WITH email AS (SELECT id, mailbox_id, direction, labels FROM emails WHERE id = ANY(${emailIds}::text[])),
          queued AS (${queueForwards(sql, hops, sql`AND NOT EXISTS (SELECT 1 FROM forward_deliveries d WHERE d.email_id = email.id)`)})
          SELECT email_id, domain FROM queued
          UNION SELECT email_id, domain FROM forward_deliveries WHERE email_id = ANY(${emailIds}::text[]) AND status = 'queued'`
      })

    /**
     * The announcements of released emails (`eventIds`, by email) as any received email's, with the
     * labels the change left them: under its first announcement's id for mail never announced (it
     * arrived blocked), else its release's (it was announced as spam), so that the bus does not drop it
     * as a repeat, and webhooks and the event log, which keep one delivery an id, tell a release once
     * however often it is made.
     */
    const announcements = (eventIds: ReadonlyMap<string, string>) =>
      eventIds.size === 0 ? Effect.succeed([]) : Effect.map(
        sql<EmailBodyRow>`SELECT ${sql.literal(emailBodyColumnList)} FROM emails e WHERE e.id = ANY(${[...eventIds.keys()]}::text[]) ORDER BY e.id`,
        (rows) => rows.map((row) => receivedPublication(row, extractedOf(row), eventIds.get(row.id)))
      )

    /**
     * Apply one change to the emails `which` picks (`emails e` of the caller's active mailboxes), all
     * or none: `missing` says what to refuse when some asked for are not found. Each email's row is
     * locked while its new labels are computed, so concurrent changes compose instead of overwriting.
     * Runs in the caller's transaction; what it owes the bus is staged there, for the caller to deliver
     * once that transaction commits (never before: a change rolled back must not have been announced).
     */
    const applyWithin = (
      userId: string,
      which: Statement.Fragment,
      requested: LabelChange,
      missing: (found: ReadonlyArray<EmailRow>) => NotFound | undefined
    ) =>
      Effect.gen(function*() {
        const change = yield* checkChange(requested)
        if (change.add.includes(BLOCKED)) {
          // Hidden by hand, the mail would leave search and the Junk count unexplained, and letting it
          // through again would announce it as received a second time.
          return yield* ValidationError.field("add_labels", "blocked is the block lists' verdict: add the sender to a block list " +
            "(removing blocked lets a blocked email through)")
        }
        return yield* Effect.gen(function*() {
          const rows = yield* sql<EmailRow>`
            SELECT ${sql.literal(emailColumnList)}
            FROM emails e JOIN mailboxes m ON m.id = e.mailbox_id AND m.status = 'active'
            WHERE ${which} AND e.user_id = ${userId}
            ORDER BY e.id
            FOR UPDATE OF e`
          const refusal = missing(rows)
          if (refusal) return yield* refusal
          const changed: Array<{ row: EmailRow; added: Array<string>; removed: Array<string> }> = []
          const updated: Array<EmailRow> = []
          for (const row of rows) {
            const labels = applyChange(row.labels, change)
            if (labels.length > MAX_LABELS) {
              return yield* new ValidationError({
                message: `An email carries at most ${MAX_LABELS} labels`,
                details: { email_id: row.id, add_labels: `would give the email ${labels.length} labels` }
              })
            }
            const added = labels.filter((label) => !row.labels.includes(label))
            const removed = row.labels.filter((label) => !labels.includes(label))
            const next = { ...row, labels }
            updated.push(next)
            if (added.length > 0 || removed.length > 0) changed.push({ row: next, added, removed })
          }
          // Received mail that loses the last of spam and blocked is let through: forwarded as if it had just arrived.
          const before = new Map(rows.map((row) => [row.id, row.labels]))
          const releases = changed.filter(({ row }) => isRelease(row, before.get(row.id)!))
          // One statement per resulting label set: a batch given one change mostly ends in a few sets.
          const bySet = new Map<string, { labels: ReadonlyArray<string>; ids: Array<string> }>()
          for (const { row } of changed) {
            const key = JSON.stringify(row.labels)
            const group = bySet.get(key) ?? { labels: row.labels, ids: [] }
            group.ids.push(row.id)
            bySet.set(key, group)
          }
          yield* Effect.forEach(bySet.values(), ({ ids, labels }) =>
            sql`UPDATE emails SET labels = ${[...labels]}::text[] WHERE id = ANY(${ids}::text[])`, { discard: true })
          // Each email changed is announced as `email.labels_changed`. Mail a person lets through (the
          // last of `spam` and `blocked` removed from received mail) is received now: its copies handed to the mta, and announced as received mail is, so search
          // indexes it, the automatic reply answers it, and webhooks, streams and waiting readers hear
          // of it. Blocked mail, never announced, is announced once `blocked` is off (still spam, as
          // spam is on arrival); spam mail, announced on arrival with its label, again once let through.
          // Staged with the change (outbox.ts), so a bus that refuses them, or a process that dies before
          // publishing, loses none of it.
          const forwards = releases.length === 0 ? [] : yield* queueReleased(releases.map(({ row }) => row.id))
          const eventIds = new Map([
            ...changed.filter(({ removed, row }) => row.direction === "inbound" && removed.includes(BLOCKED))
              .map(({ row }) => [row.id, emailReceivedEventId(row.id)] as const),
            ...releases.filter(({ removed }) => !removed.includes(BLOCKED)).map(({ row }) => [row.id, releasedEventId(row.id)] as const)
          ])
          const timestamp = new Date().toISOString()
          const owed: ReadonlyArray<Publication> = [
            ...changed.map(({ added, removed, row }) => ({
              subject: subjects.event("email.labels_changed"),
              data: encodeJson({
                event: "email.labels_changed",
                timestamp,
                namespace: userId,
                data: { ...toFields(row), added, removed } satisfies LabelsChanged
              }),
              msgId: `email.labels_changed:${newId("lbl")}`
            })),
            ...[...domainsByEmail(forwards)].flatMap(([emailId, domains]) => forwardPublications(emailId, domains)),
            ...(yield* announcements(eventIds))
          ]
          yield* stage(sql, owed)
          return { updated, owed }
        })
      })

    /** `applyWithin` in a transaction of its own, announced once it commits. */
    const apply = (...args: Parameters<typeof applyWithin>) =>
      Effect.gen(function*() {
        const result = yield* sql.withTransaction(applyWithin(...args))
        yield* deliver(sql, bus, result.owed)
        return result.updated
      })

    const byEmailIds = (emailIds: ReadonlyArray<string>) => {
      const ids = [...new Set(emailIds)]
      return [sql`e.id = ANY(${ids}::text[])`, (rows: ReadonlyArray<EmailRow>) => {
        const found = new Set(rows.map((row) => row.id))
        const missing = ids.filter((id) => !found.has(id))
        return missing.length > 0 ? emailNotFound(missing) : undefined
      }] as const
    }

    /**
     * Apply one change to emails of the caller's active mailboxes, all or none: an email that is not
     * the caller's (or is gone) fails the whole change with 404 naming it.
     */
    const update = Effect.fn("Labels.update")(function*(userId: string, emailIds: ReadonlyArray<string>, requested: LabelChange) {
      const [which, missing] = byEmailIds(emailIds)
      return yield* apply(userId, which, requested, missing)
    })

    /**
     * `update` as one step of the caller's transaction (an IMAP STORE that changes several flags, all
     * or none): the emails changed, and what the caller delivers (outbox.ts `deliver`) once it commits.
     */
    const updateWithin = Effect.fn("Labels.updateWithin")(function*(userId: string, emailIds: ReadonlyArray<string>, requested: LabelChange) {
      const [which, missing] = byEmailIds(emailIds)
      return yield* applyWithin(userId, which, requested, missing)
    })

    /**
     * Apply one change to every email of some of the caller's threads (mark conversations handled):
     * those they have as the change is made, all or none. 404 naming the threads of no active mailbox
     * of the caller's.
     */
    const updateThreads = Effect.fn("Labels.updateThreads")(function*(userId: string, threadIds: ReadonlyArray<string>, requested: LabelChange) {
      const ids = [...new Set(threadIds)]
      return yield* apply(userId, sql`e.thread_id = ANY(${ids}::text[])`, requested, (rows) => {
        const missing = missingThreads(ids, rows)
        return missing.length > 0 ? threadsNotFound(missing) : undefined
      })
    })

    /** `updateThreads` of one thread: 404 `details.thread_id` when it is not the caller's. */
    const updateThread = (userId: string, threadId: string, requested: LabelChange) => updateThreads(userId, [threadId], requested)

    /**
     * The labels the account's mail carries (of one mailbox with `mailboxId`; of a limited key's
     * mailboxes only, with `only`), by name, each with how many emails carry it and how many of those
     * are unread: the account's labels are whatever its mail carries, so there is nothing else to list.
     */
    const list = Effect.fn("Labels.list")(function*(
      userId: string,
      page: Page,
      options: {
        readonly mailboxId?: string | undefined
        readonly only?: ReadonlyArray<string> | undefined
        readonly sort?: Sort<LabelSortField> | undefined
      } = {}
    ) {
      const { direction, field } = options.sort ?? { field: "label", direction: "asc" }
      // Ties (as many emails) by name; names in code point order, as the list has always been.
      const order = sql.literal(
        `${{ label: `label COLLATE "C"`, email_count: "emails", unread_count: "unread" }[field]} ${direction === "asc" ? "ASC" : "DESC"}, label COLLATE "C"`
      )
      const mailboxes = yield* mailboxScope(sql, userId, options)
      // The page and the count in one statement, as the email list's: a single row of nulls carries the count when the page is empty.
      const rows = yield* sql<{ label: string | null; emails: string | null; unread: string | null; total: string }>`
        WITH counted AS (
          SELECT l.label, count(*) AS emails, count(*) FILTER (WHERE ${UNREAD} = ANY(e.labels)) AS unread
          FROM emails e CROSS JOIN LATERAL unnest(e.labels) AS l(label)
          WHERE e.user_id = ${userId} AND ${mailboxes("e.mailbox_id")}
          GROUP BY l.label
        )
        SELECT page.label, page.emails, page.unread, counted.total
        FROM (SELECT count(*) AS total FROM counted) counted
        LEFT JOIN LATERAL (
          SELECT *, row_number() OVER (ORDER BY ${order}) AS position FROM counted ORDER BY ${order} LIMIT ${page.limit} OFFSET ${page.offset}
        ) page ON true
        ORDER BY page.position`
      const labels: Array<LabelCount> = rows.flatMap((row) =>
        row.label === null ? [] : [{ label: row.label, email_count: Number(row.emails), unread_count: Number(row.unread) }]
      )
      return { labels, total: Number(rows[0]?.total ?? 0) }
    })

    return { update, updateWithin, updateThreads, updateThread, list } as const
  })
}) {}
