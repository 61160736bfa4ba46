/**
 * The words stage (worker role, issue 18): makes each received email searchable by its words at
 * ingest's pace, whatever the embedder's backlog.
 *
 * For every `email.received` it reads the email's words (subject, body, sender and readable
 * attachments, as the index stage reads them) and stores its document without a model, with its
 * postings and their lexicon counts (stored-documents.ts). The index stage, on its own consumer of
 * the same events, later adds the vectors and names the model; `email.processed` still means both.
 * Sent mail likewise: its first delivery job (`mail.outbound.<email_id>`, the index stage's
 * `index-sent` hears the same jobs) stores its words, so what an agent sent is found by its words at
 * once, however far behind the embedder is.
 *
 * Emails whose words are indexed at once share a statement (group commit). Idempotent: an email
 * with a document already (either stage was there) is passed over, as is one gone or in a deleted
 * mailbox. An email whose words keep failing on their own is left to the index stage, which stores
 * them with its vectors: logged and acknowledged after `giveUpAfter` deliveries.
 */
import { SqlClient } from "@effect/sql"
import { Context, Duration, Effect, Layer, Schema } from "effect"
import { groupCommitIsolated } from "../batching.ts"
import { Bus, type BusMessage, decodeJson, defaultRetryDelay, subjects } from "../bus/bus.ts"
import { measured } from "../bus/metrics.ts"
import { classify } from "../health/dependency-health.ts"
import { AttachmentTexts } from "../mail/attachment-texts.ts"
import { OutboundJob } from "../outbound/schemas.ts"
import { backgroundTurn } from "../pipeline/priority.ts"
import { sentMailConsumers, StageActivity, stageConsumers } from "../pipeline/stages.ts"
import { StageLimits } from "../stage-limits.ts"
import { documentOf, loadEmails, storeDocuments } from "./stored-documents.ts"

/** Emails whose words are stored in one statement. */
const WORDS_BATCH = 64

/** How the words stage retries: the bus's delay between deliveries, and the delivery after which a fault is left to the index stage. */
export class WordRetries extends Context.Reference<WordRetries>()("mailroom/WordRetries", {
  defaultValue: () => ({ retryDelay: defaultRetryDelay, giveUpAfter: 5 })
}) {}

/** Only the id is read: the email itself is loaded, so that one deleted meanwhile is passed over. */
const ReceivedEvent = Schema.Struct({
  event: Schema.Literal("email.received"),
  data: Schema.Struct({ email_id: Schema.String })
})

export class WordIndexer extends Effect.Service<WordIndexer>()("mailroom/WordIndexer", {
  dependencies: [AttachmentTexts.Default],
  scoped: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const attachmentTexts = yield* AttachmentTexts

    /**
     * Store the words of a batch of emails: loaded, their attachments read, their documents,
     * postings and lexicon counts written in one statement. Answers, per id, whether its words were
     * stored here (false: it has a document already, or is gone).
     */
    const storeBatch = (emailIds: ReadonlyArray<string>) =>
      Effect.gen(function*() {
        const emails = yield* loadEmails(sql, [...new Set(emailIds)])
        const due = [...emails.keys()].filter((id) => {
          const email = emails.get(id)!
          return email.active && !email.documented
        })
        if (due.length > 0) {
          const attachments = yield* attachmentTexts.ofEmails(due)
          yield* storeDocuments(
            sql,
            due.map((emailId) => ({
              document: documentOf(emailId, emails.get(emailId)!, attachments.get(emailId) ?? []),
              model: null,
              chunks: 0,
              processingMs: 0
            }))
          )
        }
        const stored = new Set(due)
        return emailIds.map((id) => stored.has(id))
      })

    /**
     * Index an email's words, batched with the others being indexed at the same moment: one batch
     * at a time (on the embedded database's one connection, one statement in its line). A batch the
     * database refuses is tried again an email at a time, so an email that cannot be indexed fails alone.
     */
    const index = yield* groupCommitIsolated({ maxBatch: WORDS_BATCH, parallel: 1, run: storeBatch })

    return { index } as const
  })
}) {}

/** The words actor: consumes `events.email.received`, and sent mail's delivery jobs, while the worker runs (see above). */
export const WordIndexerLive = Layer.scopedDiscard(
  Effect.gen(function*() {
    const bus = yield* Bus
    const { index } = yield* WordIndexer
    const { words: concurrency } = yield* StageLimits
    const retries = yield* WordRetries
    // Behind the SMTP node's accepting when both run here (priority.ts), as ingest is.
    const turn = backgroundTurn("words")

    /** Index the words of the email `message` names (read by `emailIdOf`); a message that names none is logged and dropped. */
    const handle = (message: BusMessage, what: string, emailIdOf: (json: unknown) => Effect.Effect<string, unknown>) =>
      Effect.try(() => decodeJson(message.data)).pipe(
        Effect.flatMap(emailIdOf),
        Effect.matchEffect({
          onFailure: (error) =>
            Effect.logError(`Dropping a malformed ${what}: its words are stored when it is indexed, or by \`npm run reindex\``, {
              subject: message.subject,
              error
            }),
          onSuccess: (emailId) =>
            index(emailId).pipe(
              Effect.asVoid,
              // An outage is everyone's: the bus offers the email again once it is over, however long.
              Effect.catchAllCause((cause) =>
                message.deliveryCount < retries.giveUpAfter || classify(cause)._tag !== "Fault"
                  ? Effect.failCause(cause)
                  : Effect.logWarning(
                    `Left the words of email ${emailId} to the index stage after ${message.deliveryCount} failed attempts: ` +
                      "it is found by its words once it is embedded",
                    cause
                  )
              )
            )
        }),
        (handled) => turn.pipe(Effect.zipRight(handled), Effect.tap(() => StageActivity.handled("words")))
      )

    const consumed = { concurrency, ackWait: Duration.seconds(20), retryDelay: retries.retryDelay } as const
    yield* bus.consume(measured({
      ...stageConsumers.words,
      ...consumed,
      handler: (message) =>
        handle(message, "email.received event", (json) => Effect.map(Schema.decodeUnknown(ReceivedEvent)(json), (event) => event.data.email_id))
    }))
    // An outbound email has a job per recipient domain: the first stores its words, the others find
    // them stored. Mailroom's own mail to a person and forwarded copies of received mail (indexed as
    // received) travel on the same subjects: passed over.
    yield* bus.consume(measured({
      ...sentMailConsumers.words,
      ...consumed,
      handler: (message) =>
        subjects.isSentMail(message.subject)
          ? handle(message, "outbound job", (json) => Effect.map(Schema.decodeUnknown(OutboundJob)(json), (job) => job.email_id))
          : Effect.void
    }))
  })
).pipe(Layer.provide(WordIndexer.Default))
