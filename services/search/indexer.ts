/**
 * The index actor (indexer role): makes each received email searchable by meaning, then announces
 * it (`email.processed`). Its words are usually indexed already, at ingest's pace, by the words
 * stage (word-indexer.ts): mail is found by its words while it waits here for the embedder.
 *
 * For every `email.received` it embeds the email's text (subject, body and readable attachments:
 * text, HTML, PDF, Word; mail/attachment-texts.ts), in chunks, stores the vectors in the vector index,
 * then names the model on the email's document (`search_documents`), storing the document with its
 * full-text postings and their lexicon counts if the words stage has not (stored-documents.ts). Only
 * then is the bus message acknowledged, so a worker that dies part-way leaves the event to be
 * handled again.
 *
 * Idempotent: vectors are keyed by (email, chunk), the document and its postings by email, and the
 * announcement's event id is the email's; an email already indexed with the current model is only
 * announced again. */
import { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Cause, Context, Data, Duration, Effect, Layer, Option, Ref, Schedule, Schema } from "effect"
import { Bus, type BusError, type BusMessage, decodeJson, defaultRetryDelay, encodeJson, subjects } from "../bus/bus.ts"
import { measured } from "../bus/metrics.ts"
import { AttachmentTexts } from "../mail/attachment-texts.ts"
import { senderKeys } from "../mail/narrowing.ts"
import { EmailFields, EmailReceived } from "../mail/schemas.ts"
import { OutboundJob } from "../outbound/schemas.ts"
import { type Backpressure, BackpressureTypeId, classify, DependencyHealth } from "../health/dependency-health.ts"
import { EventCompletion } from "../events/completion.ts"
import { Lifecycle } from "../lifecycle.ts"
import { fromNameOf } from "../mail/records.ts"
import { indexedWords, SENDER_WORDS_FROM, senderText, WORDS_VERSION } from "./documents.ts"
import { capInput, type EmbedderError } from "./embedder.ts"
import type { VectorIndexError } from "./vector-index.ts"
import { StageLimits } from "../stage-limits.ts"
import { groupCommitIsolated } from "../batching.ts"
import { backgroundTurn } from "../pipeline/priority.ts"
import { sentMailConsumers, StageActivity, stageConsumers } from "../pipeline/stages.ts"
import { documentOf, type DocumentRow, loadEmails, storeDocuments as storedDocuments } from "./stored-documents.ts"
import { Vectors } from "./vectors.ts"
import { abandonedIndexing, abandonedIndexingFromZero, queuedForEmbedding } from "./metrics.ts"

/** Emails one step of a sweep over the vector index takes: the vectors of deleted mailboxes purged, old vectors described. */
const SWEEP_BATCH = 500
/** Emails whose words are read again in one transaction by the start's pass over older mail (their attachments read first). */
const REWORD_BATCH = 50

/**
 * Emails whose chunks go to the embedder in one call: the emails being indexed at once share a
 * call (one OpenAI request, full jobs for the local model's threads) instead of one each.
 */
const EMBED_BATCH_EMAILS = 16
/** Emails indexed together: one statement each for loading, vectors and documents (group commit). */
const INDEX_BATCH = 32
/** Embedder calls in flight at once (the local model has one or two threads on this machine). */
const EMBED_CALLS_IN_FLIGHT = 2
/** How often deleted mailboxes' search data is looked for. */
const PURGE_EVERY = "10 minutes"
/** Emails whose first failure a process remembers (one retried elsewhere is forgotten, oldest first). */
const FIRST_FAILURES_KEPT = 10_000

/**
 * How the index actor retries an email whose indexing failed: the bus offers it again after
 * `retryDelay`; after `giveUpAfter` deliveries that failed while other mail was indexed, the email is
 * given up on (see IndexerLive). Once the process begins to stop, an email still being indexed
 * `stopGrace` later is left for the next start (IndexingStopped). Tests shorten them.
 */
export class IndexRetries extends Context.Reference<IndexRetries>()("mailroom/IndexRetries", {
  defaultValue: () => ({ retryDelay: defaultRetryDelay, giveUpAfter: 10, stopGrace: Duration.seconds(5) as Duration.Duration })
}) {}

/**
 * An email still being indexed a while after the process began to stop: left unacknowledged, so the
 * bus offers it again to the next worker that starts. Embedding is the slow part, and it runs at a
 * low priority: on a busy machine loading the model alone took 30 s, all of SHUTDOWN_TIMEOUT, and the
 * stop waited for it and was cut off (exit 1). Flow control, not a fault.
 */
export class IndexingStopped extends Data.TaggedError("IndexingStopped")<{ readonly emailId: string }> implements Backpressure {
  readonly [BackpressureTypeId] = true as const
  override get message() {
    return `indexing email ${this.emailId} left for the next start: the process is shutting down`
  }
}

export const emailProcessedEventId = (emailId: string) => `email.processed:${emailId}`

/**
 * Take these emails' share out of the word lexicon's counts, and drop the lexemes no email has any
 * more, before their documents and postings go: in the caller's transaction (`Indexer.forget`,
 * mail/deletion.ts).
 */
export const uncountWords = (sql: SqlClient.SqlClient, emailIds: ReadonlyArray<string>) =>
  sql<{ userId: string; lexeme: string }>`
    WITH counted AS (
      UPDATE search_lexicon l SET documents = l.documents - g.n
      FROM (SELECT user_id, lexeme, count(*)::int AS n FROM search_terms
            WHERE email_id = ANY(${emailIds}::text[]) GROUP BY user_id, lexeme) g
      WHERE l.user_id = g.user_id AND l.lexeme = g.lexeme
      RETURNING l.user_id, l.lexeme, l.documents
    )
    SELECT user_id, lexeme FROM counted WHERE documents <= 0`.pipe(
    Effect.flatMap((gone) =>
      gone.length === 0 ? Effect.void : sql`
        DELETE FROM search_lexicon l
        USING unnest(${gone.map((g) => g.userId)}::text[], ${gone.map((g) => g.lexeme)}::text[]) AS g (user_id, lexeme)
        WHERE l.user_id = g.user_id AND l.lexeme = g.lexeme AND l.documents <= 0`
    ),
    Effect.asVoid
  )

const ReceivedEvent = Schema.Struct({
  event: Schema.Literal("email.received"),
  namespace: Schema.String,
  // An email.received published before labels existed carries none: it reads as an empty list.
  // One published before the inbound checks existed carries no verdicts: they read as null.
  // One published before names were kept (round one, ae6f099) carries no from_name: it stays absent
  // here, and email.processed is told with the email's own name where it is passed on (events/completion.ts).
  data: Schema.Struct({
    ...EmailFields.fields,
    from_name: Schema.optional(EmailFields.fields.from_name),
    labels: Schema.optionalWith(EmailFields.fields.labels, { default: () => [] }),
    authentication: Schema.optionalWith(EmailFields.fields.authentication, { default: () => null }),
    authentication_results: Schema.optionalWith(EmailFields.fields.authentication_results, { default: () => null }),
    spam: Schema.optionalWith(EmailFields.fields.spam, { default: () => null }),
    // One published before extraction existed carries none; email.processed then says null.
    extracted: Schema.optionalWith(EmailReceived.fields.extracted, { default: () => null })
  })
})

/** One email to index (nothing is done when it is indexed with the current model already). */
interface IndexRequest {
  readonly emailId: string
}

type IndexOutcome =
  | { readonly outcome: "gone" }
  | { readonly outcome: "already-indexed" | "indexed"; readonly processingMs: number }

/** What a search narrows an email's vectors by (vector-index.ts `VectorPoint`): its sender's keys and arrival. */
const pointNarrowing = (email: { readonly fromAddress: string; readonly receivedAt: Date }) => ({
  senderKeys: senderKeys(email.fromAddress),
  receivedAt: email.receivedAt
})

export class Indexer extends Effect.Service<Indexer>()("mailroom/Indexer", {
  dependencies: [AttachmentTexts.Default],
  scoped: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const vectors = yield* Vectors
    const { embedder } = vectors
    const attachmentTexts = yield* AttachmentTexts

    /**
     * Embed one email's chunks, batched with the other emails being indexed at the same moment
     * (group commit, services/batching.ts): a lone email goes at once, a burst shares calls. A call
     * the embedder refuses is made again an email at a time, so an email it cannot embed fails alone.
     */
    const embedChunks = yield* groupCommitIsolated({
      maxBatch: EMBED_BATCH_EMAILS,
      parallel: EMBED_CALLS_IN_FLIGHT,
      run: (emails: ReadonlyArray<ReadonlyArray<string>>) =>
        embedder.embed(emails.flat()).pipe(Effect.map((vectors) => {
          let offset = 0
          return emails.map((chunks) => vectors.slice(offset, (offset += chunks.length)))
        }))
    })

    const load = (emailIds: ReadonlyArray<string>) => loadEmails(sql, emailIds)
    const storeDocuments = (rows: ReadonlyArray<DocumentRow>) => storedDocuments(sql, rows)

    /**
     * Embed and store a batch of emails with the current model: loaded,
     * their attachments read, their vectors stored and their documents written a statement each
     * for the whole batch. Answers, per request, how long indexing took (the batch's time), that
     * the email was indexed already, or that there was nothing to index (the email is gone, or its
     * mailbox deleted). An email asked for twice is indexed once.
     */
    const indexBatch = (requests: ReadonlyArray<IndexRequest>) =>
      Effect.gen(function*() {
        const ids = [...new Set(requests.map((r) => r.emailId))]
        const emails = yield* load(ids)
        const due = ids.filter((id) => {
          const email = emails.get(id)
          return email !== undefined && email.active && email.model !== embedder.model
        })
        const started = Date.now()
        if (due.length > 0) {
          const attachments = yield* attachmentTexts.ofEmails(due)
          const documents = due.map((emailId) => documentOf(emailId, emails.get(emailId)!, attachments.get(emailId) ?? []))
          // Each email's chunks join the embedder calls being gathered (embedChunks): a batch, or
          // emails of several batches, share calls. A chunk the model takes no meaning from (an empty
          // email's, one all Japanese for the offline model: embedder.ts `reads`) gets no vector: it
          // would be one and the same vector, near every query. Its words are indexed all the same.
          const embedded = yield* Effect.forEach(
            documents,
            (document) => {
              const chunks = document.chunks.flatMap((chunk, index) => {
                const text = capInput(chunk, embedder.maxInputChars)
                return chunk.trim() !== "" && embedder.reads(text) ? [{ index, text }] : []
              })
              return chunks.length === 0
                ? Effect.succeed([])
                : queuedForEmbedding(embedChunks(chunks.map((chunk) => chunk.text))).pipe(
                  Effect.map((vectors) => vectors.map((vector, i) => ({ chunk: chunks[i]!.index, vector })))
                )
            },
            { concurrency: "unbounded" }
          )
          const collection = yield* vectors.collection
          yield* collection.upsert(documents.flatMap(({ email, emailId }, i) =>
            embedded[i]!.map(({ chunk, vector }) => ({
              emailId,
              chunk,
              namespace: email.userId,
              mailboxId: email.mailboxId,
              domain: email.domain,
              date: email.sentAt,
              ...pointNarrowing(email),
              vector
            }))
          ))
          const took = Date.now() - started
          yield* storeDocuments(documents.map((document) => ({ document, model: embedder.model, chunks: document.chunks.length, processingMs: took })))
        }
        // An email deleted while it was being indexed (mail/deletion.ts) may have left vectors stored
        // after the deletion removed its own: its document then failed, and asked again it is gone.
        const deleted = ids.filter((id) => !emails.has(id))
        if (deleted.length > 0) yield* Effect.flatMap(vectors.collection, (collection) => collection.remove(deleted))
        const processingMs = Date.now() - started
        const indexed = new Set(due)
        return requests.map((request): IndexOutcome => {
          const email = emails.get(request.emailId)
          if (email === undefined || !email.active) return { outcome: "gone" }
          if (indexed.has(request.emailId)) return { outcome: "indexed", processingMs }
          return { outcome: "already-indexed", processingMs: email.processingMs ?? 0 }
        })
      })

    /**
     * Emails being indexed at once go together (group commit, services/batching.ts): their reads,
     * vectors and documents cost a statement each per batch, not per email. A batch the database
     * refuses is tried again an email at a time, so one email that cannot be indexed fails alone.
     */
    const indexTogether = yield* groupCommitIsolated({ maxBatch: INDEX_BATCH, parallel: 2, run: indexBatch })

    /**
     * Embed and store one email with the current model, batched with the
     * others being indexed at the same moment. Answers how long that took, or that there was
     * nothing to index (the email is gone, or its mailbox deleted).
     */
    const index = Effect.fn("Indexer.index")(function*(emailId: string) {
      return yield* indexTogether({ emailId })
    })

    /**
     * Emails of active mailboxes not searchable with the current model: indexed with another model,
     * or received before search existed. `mailroom reindex` embeds them.
     */
    const stale = (options?: { readonly all?: boolean; readonly olderThan?: Date }) =>
      sql<{ id: string }>`
        SELECT e.id FROM emails e
        JOIN mailboxes m ON m.id = e.mailbox_id AND m.status = 'active'
        LEFT JOIN search_documents d ON d.email_id = e.id
        WHERE ${options?.all ? sql`true` : sql`d.model IS DISTINCT FROM ${embedder.model}`}
          ${options?.olderThan ? sql`AND e.received_at < ${options.olderThan}` : sql``}
        ORDER BY e.received_at, e.id`.pipe(Effect.map((rows) => rows.map((row) => row.id)))

    /**
     * How many emails of active mailboxes received before `before` are not searchable with the current
     * model: indexed with another (`otherModel`), or not embedded at all (`unindexed`; the words stage
     * may have indexed their words).
     */
    const unsearchable = (before: Date) =>
      Effect.map(
        sql<{ otherModel: number; unindexed: number }>`
          SELECT count(*) FILTER (WHERE d.model IS NOT NULL)::int AS other_model,
                 count(*) FILTER (WHERE d.model IS NULL)::int AS unindexed
          FROM emails e
          JOIN mailboxes m ON m.id = e.mailbox_id AND m.status = 'active'
          LEFT JOIN search_documents d ON d.email_id = e.id
          WHERE d.model IS DISTINCT FROM ${embedder.model} AND e.received_at < ${before}`,
        (rows) => rows[0] ?? { otherModel: 0, unindexed: 0 }
      )

    /**
     * Forget the search data of these emails: vectors, postings, documents, and their share of the
     * lexicon's counts, in one transaction (the vectors first: an index outage leaves the words as
     * they were). An email indexed afterwards is counted afresh.
     */
    const forget = (emailIds: ReadonlyArray<string>) =>
      Effect.gen(function*() {
        if (emailIds.length === 0) return
        const collection = yield* vectors.collection
        yield* collection.remove(emailIds)
        yield* Effect.zipRight(
          uncountWords(sql, emailIds),
          // Its postings go with it (ON DELETE CASCADE).
          sql`DELETE FROM search_documents WHERE email_id = ANY(${emailIds}::text[])`
        ).pipe(sql.withTransaction)
      })

    /**
     * Forget the search data of deleted mailboxes' mail (SPEC: deleting a mailbox deletes its data).
     * Search already hides that mail; this gives back the space and keeps word weights true. In
     * batches; answers how many emails it forgot.
     */
    const purgeDeleted = Effect.fn("Indexer.purgeDeleted")(function*() {
      let purged = 0
      for (;;) {
        const batch = yield* sql<{ emailId: string }>`
          SELECT d.email_id FROM search_documents d JOIN mailboxes m ON m.id = d.mailbox_id
          WHERE m.status = 'deleted' LIMIT ${SWEEP_BATCH}`
        if (batch.length === 0) return purged
        yield* forget(batch.map((row) => row.emailId))
        purged += batch.length
      }
    })

    /**
     * Index an email afresh, vectors and words: its search data forgotten, then indexed as new mail
     * is (`mailroom reindex --all`). What a re-embedding alone keeps, its words, is read again: an
     * attachment an earlier version could not read becomes searchable by its words too.
     */
    const refresh = Effect.fn("Indexer.refresh")(function*(emailId: string) {
      yield* forget([emailId])
      return yield* index(emailId)
    })

    /**
     * The accounts whose vectors the index holds fewer of than their emails' documents say were
     * written with the current model: the index lost them (Qdrant on a fresh volume, a collection
     * deleted by hand, which the next write creates again, empty). Their mail is found by its words
     * only until `mailroom reindex` embeds it again. One count of the whole collection first; each
     * account's only when that falls short.
     */
    const lostVectors = Effect.gen(function*() {
      const collection = yield* vectors.collection
      const [written] = yield* sql<{ points: number }>`
        SELECT COALESCE(SUM(chunks), 0)::float8 AS points FROM search_documents WHERE model = ${embedder.model}`
      const held = yield* collection.count()
      if (held >= (written?.points ?? 0)) return []
      const accounts = yield* sql<{ userId: string; points: number; emails: number }>`
        SELECT user_id, SUM(chunks)::float8 AS points, count(*)::float8 AS emails FROM search_documents
        WHERE model = ${embedder.model} AND chunks > 0 GROUP BY user_id ORDER BY user_id`
      return yield* Effect.filter(accounts, (account) => Effect.map(collection.count(account.userId), (points) => points < account.points), {
        concurrency: 4
      })
    })

    /** The emails of these accounts indexed with the current model (and so meant to have vectors). */
    const embeddedOf = (userIds: ReadonlyArray<string>) =>
      sql<{ emailId: string }>`
        SELECT d.email_id FROM search_documents d JOIN mailboxes m ON m.id = d.mailbox_id AND m.status = 'active'
        WHERE d.user_id = ANY(${userIds}::text[]) AND d.model = ${embedder.model} AND d.chunks > 0
        ORDER BY d.email_id`.pipe(Effect.map((rows) => rows.map((row) => row.emailId)))

    /**
     * Emails of active mailboxes whose words an earlier version read (WORDS_VERSION) differently from
     * this one beyond their sender's (which `addSenderWords` adds in place): found by fewer words than
     * mail indexed now. `reword` reads them again.
     */
    const staleWords = sql<{ emailId: string }>`
      SELECT d.email_id FROM search_documents d JOIN mailboxes m ON m.id = d.mailbox_id AND m.status = 'active'
      WHERE d.words_version < ${SENDER_WORDS_FROM} ORDER BY d.email_id`.pipe(Effect.map((rows) => rows.map((row) => row.emailId)))

    /** How many emails `staleWords` would find. */
    const staleWordsCount = sql<{ count: number }>`
      SELECT count(*)::int AS count FROM search_documents d JOIN mailboxes m ON m.id = d.mailbox_id AND m.status = 'active'
      WHERE d.words_version < ${SENDER_WORDS_FROM}`.pipe(Effect.map((rows) => rows[0]?.count ?? 0))

    /**
     * Read these emails' words again with this version (`mailroom reindex`), keeping their vectors:
     * their postings and lexicon counts replaced in one transaction. Each document is stored anew,
     * under a new number, so that every process's postings held in memory (postings.ts) notice that
     * the email's words changed. Answers how many it read (an email gone, or never indexed, is not).
     */
    const reword = Effect.fn("Indexer.reword")(function*(emailIds: ReadonlyArray<string>) {
      const emails = yield* load(emailIds)
      const due = emailIds.filter((id) => {
        const email = emails.get(id)
        return email !== undefined && email.active && email.documented
      })
      if (due.length === 0) return 0
      const attachments = yield* attachmentTexts.ofEmails(due)
      const rows = due.map((emailId): DocumentRow => {
        const email = emails.get(emailId)!
        const document = documentOf(emailId, email, attachments.get(emailId) ?? [])
        return { document, model: email.model, chunks: email.chunks ?? 0, processingMs: email.processingMs ?? 0 }
      })
      yield* uncountWords(sql, due).pipe(
        // Its postings go with it (ON DELETE CASCADE).
        Effect.zipRight(sql`DELETE FROM search_documents WHERE email_id = ANY(${due}::text[])`),
        Effect.zipRight(storeDocuments(rows)),
        sql.withTransaction
      )
      return due.length
    })

    /**
     * Read again, a page at a time, the words of every email `staleWords` finds: what the index actor
     * does by itself once a start (an upgrade from a version that read fewer words: attachments, runs
     * of Chinese, Japanese or Korean), and `mailroom reindex` does at once. Answers how many it read.
     */
    const rewordStale = Effect.fn("Indexer.rewordStale")(function*() {
      let read = 0
      let from = ""
      for (;;) {
        const page = yield* sql<{ emailId: string }>`
          SELECT d.email_id FROM search_documents d JOIN mailboxes m ON m.id = d.mailbox_id AND m.status = 'active'
          WHERE d.words_version < ${SENDER_WORDS_FROM} AND d.email_id > ${from}
          ORDER BY d.email_id LIMIT ${REWORD_BATCH}`
        if (page.length === 0) return read
        from = page[page.length - 1]!.emailId
        read += yield* reword(page.map((row) => row.emailId))
      }
    })

    /**
     * Give mail whose words version SENDER_WORDS_FROM read (all but its sender's) its sender's words
     * in place (documents.ts WORDS_VERSION 3), a page at a time: its postings of the sender's lexemes
     * added (to a lexeme the email holds already, its occurrences added), the lexicon counting the
     * new ones, its version raised. The document keeps its number and length: what it held is
     * unchanged but for those postings, and a process holding a lexeme's postings in memory
     * (postings.ts) reads them all again when its count changes. Answers how many emails it gave them.
     */
    const addSenderWords = Effect.fn("Indexer.addSenderWords")(function*() {
      let added = 0
      let from = ""
      for (;;) {
        const page = yield* sql<{ emailId: string }>`
          SELECT email_id FROM search_documents WHERE words_version = ${SENDER_WORDS_FROM} AND email_id > ${from}
          ORDER BY email_id LIMIT ${SWEEP_BATCH}`
        if (page.length === 0) return added
        from = page[page.length - 1]!.emailId
        const emails = yield* load(page.map((row) => row.emailId))
        const found = [...emails.entries()]
        if (found.length === 0) continue
        const senders = found.map(([, email]) => indexedWords("", "", senderText(fromNameOf(email), email.fromAddress)).sender)
        // Only the documents still at that version: one indexed again since holds its sender's words.
        const [row] = yield* sql<{ emails: number }>`
          WITH input AS (
            SELECT * FROM unnest(${found.map(([id]) => id)}::text[], ${senders}::text[]) AS i (email_id, sender)
          ),
          raised AS (
            UPDATE search_documents d SET words_version = ${WORDS_VERSION}
            FROM input i WHERE d.email_id = i.email_id AND d.words_version = ${SENDER_WORDS_FROM}
            RETURNING d.email_id, d.doc, d.user_id, d.mailbox_id, d.length, i.sender
          ),
          lexemes AS (
            SELECT r.user_id, u.lexeme, r.email_id, r.doc, r.mailbox_id, cardinality(u.positions)::real AS frequency, r.length
            FROM raised r CROSS JOIN LATERAL unnest(to_tsvector('english', r.sender)) AS u (lexeme, positions, weights)
          ),
          postings AS (
            INSERT INTO search_terms AS p (user_id, lexeme, email_id, doc, mailbox_id, frequency, length)
            SELECT * FROM lexemes ORDER BY user_id, lexeme, email_id
            ON CONFLICT (user_id, lexeme, email_id) DO UPDATE SET frequency = p.frequency + EXCLUDED.frequency
            RETURNING p.user_id, p.lexeme, (xmax = 0) AS fresh
          ),
          counted AS (
            INSERT INTO search_lexicon AS l (user_id, lexeme, documents)
            SELECT user_id, lexeme, count(*) FROM postings WHERE fresh GROUP BY user_id, lexeme ORDER BY user_id, lexeme
            ON CONFLICT (user_id, lexeme) DO UPDATE SET documents = l.documents + EXCLUDED.documents
          )
          SELECT count(*)::int AS emails FROM raised`
        added += row?.emails ?? 0
      }
    })

    /**
     * Give the vectors stored before their sender and arrival were kept (2026-12) their email's, so
     * that a search narrowed to a sender or a time finds that mail by meaning too (until then it is
     * let through the index's narrowing and judged by the emails: search.ts). One walk through the
     * index, a page at a time; the vectors of an email gone since are removed. Answers how many
     * emails it described.
     */
    const describeVectors = Effect.fn("Indexer.describeVectors")(function*() {
      const collection = yield* vectors.collection
      let described = 0
      let from: string | undefined
      do {
        const page = yield* collection.undescribed(from, SWEEP_BATCH)
        if (page.emailIds.length > 0) {
          const found = yield* sql<{ id: string; fromAddress: string; receivedAt: Date }>`
            SELECT id, from_address, received_at FROM emails WHERE id = ANY(${page.emailIds}::text[])`
          yield* collection.describe(found.map((row) => ({ emailId: row.id, ...pointNarrowing(row) })))
          const kept = new Set(found.map((row) => row.id))
          yield* collection.remove(page.emailIds.filter((id) => !kept.has(id)))
          described += found.length
        }
        from = page.next
      } while (from !== undefined)
      return described
    })

    return {
      model: embedder.model,
      index,
      refresh,
      stale,
      unsearchable,
      lostVectors,
      embeddedOf,
      staleWords,
      staleWordsCount,
      reword,
      rewordStale,
      addSenderWords,
      forget,
      purgeDeleted,
      describeVectors
    } as const
  })
}) {}

/**
 * What start says of mail not searchable by meaning (received before `IndexerLive` looked less than
 * 10 minutes ago excepted): mail indexed with another model (`otherModel`) needs `reindex`; mail not
 * indexed at all (`unindexed`) may be waiting in the index stage (`waiting`: its consumer's pending
 * and in-flight messages), which works through it by itself (info). Only what is more than the stage
 * holds was forgotten (received before search existed, or given up on after failing): `reindex`.
 */
export const unsearchableReport = (found: {
  readonly model: string
  readonly otherModel: number
  readonly unindexed: number
  readonly waiting: number
}): ReadonlyArray<{ readonly level: "warning" | "info"; readonly message: string }> => {
  const { model, otherModel, unindexed, waiting } = found
  const forgotten = Math.max(0, unindexed - waiting)
  return [
    ...(otherModel > 0
      ? [{
        level: "warning" as const,
        message: `${otherModel} emails were indexed with another embedding model than ${model}: they are not searchable by meaning ` +
          "until `npm run reindex` (mailroom reindex) embeds them again"
      }]
      : []),
    ...(forgotten > 0
      ? [{
        level: "warning" as const,
        message: `${forgotten} emails are not indexed and nothing waits to index them (received before search existed, or given up on ` +
          "after failing): run `npm run reindex` (mailroom reindex) to index them"
      }]
      : []),
    ...(unindexed > 0 && waiting > 0
      ? [{
        level: "info" as const,
        message: `${Math.min(unindexed, waiting)} emails wait in the index stage (${waiting} messages pending there): they become ` +
          "searchable as it works through them, no reindex needed"
      }]
      : [])
  ]
}

/**
 * The index actor: consumes `events.email.received` while the indexer runs. At start it says how
 * much mail is not searchable with the current model (a changed EMBEDDING_MODEL or embedder, mail
 * from before search, or mail it gave up on), which `mailroom reindex` fixes, and reads again in the
 * background the words of mail an earlier version read differently (WORDS_VERSION).
 *
 * An email whose indexing fails is offered again by the bus, backing off, for as long as the failure
 * is everyone's (an outage: nothing is indexed meanwhile). One that keeps failing on its own (its
 * `giveUpAfter`th delivery failed, the failure a fault rather than an unreachable dependency, and
 * other mail was indexed since its first failure) is given up on: logged with the reason, counted
 * (`mailroom_index_abandoned_total`) and acknowledged. It stays stored and readable, only not
 * searchable, and is not announced as processed; `mailroom reindex` tries it again.
 */
export const IndexerLive = Layer.scopedDiscard(
  Effect.gen(function*() {
    const bus = yield* Bus
    const health = yield* DependencyHealth
    const completion = yield* EventCompletion
    const { addSenderWords, describeVectors, index, lostVectors, model, purgeDeleted, rewordStale, staleWordsCount, unsearchable } = yield* Indexer
    // Emails indexed at once; the embedder's threads do the heavy part (stage-limits.ts).
    const { index: concurrency } = yield* StageLimits
    // Behind the SMTP node's accepting when both run here, unless the index stage is behind: while any
    // DATA is in flight, loaded loop or not, since embedding takes the other core (priority.ts).
    const turn = backgroundTurn("index", StageActivity.accepting)
    const retries = yield* IndexRetries
    const lifecycle = yield* Lifecycle
    yield* abandonedIndexingFromZero
    /** When this process last indexed an email (or found it indexed): the indexer works then. */
    const lastIndexed = yield* Ref.make(0)

    /** When each email this process is retrying first failed here, oldest first (at most FIRST_FAILURES_KEPT). */
    const firstFailures = new Map<string, number>()
    const failedNow = (emailId: string) => {
      if (firstFailures.has(emailId)) return
      if (firstFailures.size >= FIRST_FAILURES_KEPT) firstFailures.delete(firstFailures.keys().next().value!)
      firstFailures.set(emailId, Date.now())
    }

    /**
     * When the email of a message on its `deliveries`th delivery first failed: as this process saw it,
     * else (another process did, or it was forgotten) at latest the waits between deliveries ago. The
     * waits alone are not enough: each delivery's own work comes on top, so mail indexed just after
     * the first failure would be missed and the email given up on a delivery later than it should.
     */
    const firstFailure = (emailId: string, deliveries: number) => {
      let millis = 0
      for (let n = 1; n < deliveries; n++) millis += Duration.toMillis(retries.retryDelay(n))
      return Math.min(firstFailures.get(emailId) ?? Infinity, Date.now() - millis)
    }

    /** Index an email; one that keeps failing on its own is given up on (above), any other failure is the bus's to retry. */
    const indexOrGiveUp = (emailId: string, message: BusMessage) =>
      index(emailId).pipe(
        Effect.raceFirst(lifecycle.stopping.pipe(Effect.zipRight(Effect.sleep(retries.stopGrace)), Effect.zipRight(new IndexingStopped({ emailId })))),
        Effect.tap(() => Effect.zipRight(Effect.sync(() => firstFailures.delete(emailId)), Ref.set(lastIndexed, Date.now()))),
        Effect.catchAllCause((cause) =>
          Effect.flatMap(Ref.get(lastIndexed), (last) =>
            message.deliveryCount < retries.giveUpAfter || classify(cause)._tag !== "Fault" ||
              last < firstFailure(emailId, message.deliveryCount)
              ? Effect.zipRight(Effect.sync(() => failedNow(emailId)), Effect.failCause(cause))
              : Effect.all([
                Effect.sync(() => firstFailures.delete(emailId)),
                abandonedIndexing,
                Effect.logError(
                  `Gave up indexing email ${emailId} after ${message.deliveryCount} failed attempts while other mail was indexed; ` +
                    "it is stored but not searchable until `mailroom reindex` embeds it",
                  cause
                )
              ]).pipe(Effect.as(undefined))
          )
        )
      )

    // An email.received an earlier version wrote lacks fields added since: email.processed is told
    // whole all the same, those fields read from the email (events/completion.ts).
    const announce = (event: typeof ReceivedEvent.Type, processingMs: number) =>
      completion.complete({
        event: "email.processed",
        timestamp: new Date().toISOString(),
        namespace: event.namespace,
        data: { ...event.data, embedding_model: model, processing_ms: processingMs }
      }).pipe(
        Effect.flatMap((told) => bus.publish(subjects.event("email.processed"), encodeJson(told), { msgId: emailProcessedEventId(event.data.email_id) }))
      )

    /** The bus handler: index, then announce; an event that is not an email.received is dropped. */
    const handle = (message: BusMessage): Effect.Effect<void, SqlError | BusError | EmbedderError | VectorIndexError | IndexingStopped> =>
      Effect.try(() => decodeJson(message.data)).pipe(
        Effect.flatMap(Schema.decodeUnknown(ReceivedEvent)),
        Effect.matchEffect({
          onFailure: (error) =>
            Effect.logError("Dropping a malformed email.received event: its email is not searchable until `npm run reindex` (mailroom reindex) indexes it", {
              subject: message.subject,
              error
            }),
          onSuccess: (event) =>
            Effect.flatMap(indexOrGiveUp(event.data.email_id, message), (result) =>
              result === undefined || result.outcome === "gone" ? Effect.void : announce(event, result.processingMs))
        })
      )

    // What start finds not searchable by meaning (unsearchableReport), beside what the index stage
    // holds; mail younger than the ack wait is on its way.
    yield* unsearchable(new Date(Date.now() - 10 * 60_000)).pipe(
      Effect.flatMap(({ otherModel, unindexed }) =>
        Effect.gen(function*() {
          const lag = yield* bus.lag(stageConsumers.index).pipe(Effect.orElseSucceed(() => Option.none()))
          const waiting = Option.match(lag, { onNone: () => 0, onSome: (l) => l.pending + l.inFlight })
          yield* Effect.forEach(unsearchableReport({ model, otherModel, unindexed, waiting }), ({ level, message }) =>
            level === "warning" ? Effect.logWarning(message) : Effect.logInfo(message))
        })
      ),
      Effect.catchAll((error) => health.report("Could not check the search index against the embedding model", Cause.fail(error))),
      Effect.forkScoped
    )
    // Once a start: the words of mail an earlier version read differently (none after the first), read
    // again in the background; nothing is embedded again.
    yield* staleWordsCount.pipe(
      Effect.flatMap((count) =>
        count === 0 ? Effect.void : Effect.logInfo(
          `Reading again the words of ${count === 1 ? "1 email" : `${count} emails`} indexed by an earlier version of Mailroom, in the background ` +
            "(nothing is embedded again): until then words of their attachments (PDF, Word) and within runs of Chinese, Japanese or Korean may not find them"
        ).pipe(
          Effect.zipRight(rewordStale()),
          Effect.tap((read) => Effect.logInfo(`Read again the words of ${read === 1 ? "1 email" : `${read} emails`} indexed by an earlier version of Mailroom`))
        )
      ),
      // Each page is its own transaction: a deadlock with mail being indexed loses one page, tried again.
      Effect.retry(Schedule.intersect(Schedule.recurs(5), Schedule.spaced("10 seconds"))),
      Effect.catchAllCause((cause) =>
        health.report("Could not read again the words of mail indexed by an earlier version; `npm run reindex` does it, or the next start tries again", cause)
      ),
      Effect.forkScoped
    )
    // Once a start: what earlier versions stored without sender and arrival (none after the first).
    yield* describeVectors().pipe(
      Effect.tap((described) =>
        described === 0 ? Effect.void : Effect.logInfo(
          `Gave the vectors of ${described === 1 ? "1 email" : `${described} emails`} stored by an earlier version their sender and arrival: ` +
            "a search by meaning narrowed to a sender or a time now finds them in the index itself"
        )
      ),
      Effect.catchAllCause((cause) => health.report("Could not give the vector index's older vectors their sender and arrival; the next start tries again", cause)),
      Effect.forkScoped
    )
    // Once a start: the sender's words of mail indexed before they were (none after the first).
    yield* addSenderWords().pipe(
      Effect.tap((added) =>
        added === 0 ? Effect.void : Effect.logInfo(
          `Indexed the sender's name and address of ${added === 1 ? "1 email" : `${added} emails`} indexed by an earlier version: ` +
            "a search by words now finds mail by who sent it"
        )
      ),
      // Each page is its own statement: a deadlock with mail being indexed loses one page, tried again.
      Effect.retry(Schedule.intersect(Schedule.recurs(5), Schedule.spaced("10 seconds"))),
      Effect.catchAllCause((cause) => health.report("Could not index the senders of mail indexed by an earlier version; the next start tries again", cause)),
      Effect.forkScoped
    )
    // Vectors the index lost: said at start and every PURGE_EVERY after, until reindexing embeds them again.
    yield* lostVectors.pipe(
      Effect.flatMap((accounts) => {
        if (accounts.length === 0) return Effect.void
        const emails = accounts.reduce((sum, account) => sum + account.emails, 0)
        return Effect.logWarning(
          `The vector index holds fewer vectors than were written for the mail of ${accounts.length === 1 ? "1 account" : `${accounts.length} accounts`} ` +
            `(${emails === 1 ? "1 email" : `${emails} emails`}, model ${model}): it lost them (Qdrant on a fresh volume, a collection deleted by hand). ` +
            "That mail is found by its words only until `npm run reindex` (mailroom reindex) embeds it again"
        )
      }),
      Effect.catchAll((error) => health.report("Could not compare the vector index with the emails indexed", Cause.fail(error))),
      Effect.repeat(Schedule.spaced(PURGE_EVERY)),
      Effect.forkScoped
    )
    yield* purgeDeleted().pipe(
      Effect.tap((purged) => (purged > 0 ? Effect.logInfo(`Forgot the search data of ${purged} emails of deleted mailboxes`) : Effect.void)),
      // A deadlock with concurrent indexing or an index outage: the next round tries again.
      Effect.catchAllCause((cause) => health.report("Purging deleted mailboxes' search data failed; will retry", cause)),
      Effect.repeat(Schedule.spaced(PURGE_EVERY)),
      Effect.forkScoped
    )
    // Sent mail is searchable too. An outbound email is announced by its delivery jobs (one per
    // recipient domain, `mail.outbound.<email_id>`); its first job indexes it, a second finds it indexed.
    // Mailroom's own mail to a person (`mail.outbound.system.<id>`) and forwarded copies of received mail
    // (`mail.outbound.forward.<email_id>`, indexed as received) travel there too: passed over.
    yield* bus.consume(measured({
      ...sentMailConsumers.index,
      concurrency,
      ackWait: Duration.seconds(20),
      retryDelay: retries.retryDelay,
      handler: (message) =>
        !subjects.isSentMail(message.subject) ? Effect.void : Effect.try(() => decodeJson(message.data)).pipe(
          Effect.flatMap(Schema.decodeUnknown(OutboundJob)),
          Effect.matchEffect({
            onFailure: (error) => Effect.logError("Dropping a malformed outbound job", { subject: message.subject, error }),
            onSuccess: (job) => Effect.asVoid(indexOrGiveUp(job.email_id, message)).pipe(Effect.tap(() => StageActivity.handled("index")))
          })
        )
    }))
    yield* bus.consume(measured({
      ...stageConsumers.index,
      concurrency,
      // A crashed worker's events come back after this; a long embedding keeps its event with progress signals.
      ackWait: Duration.seconds(20),
      retryDelay: retries.retryDelay,
      // A failure is logged (or, in an outage, counted) once, by the bus at the message boundary.
      handler: (message) => turn.pipe(Effect.zipRight(handle(message)), Effect.tap(() => StageActivity.handled("index")))
    }))
  })
).pipe(Layer.provide(Indexer.Default), Layer.provide(EventCompletion.Default))
