/**
 * The ingest actor (worker role): turns each accepted message on the bus into a stored email, then
 * announces it (`email.received`).
 *
 * An email whose header From is on the account's or the mailbox's block list is stored labelled
 * `blocked` and never announced: no webhook, event, search indexing or waiting reader hears of it
 * (sender-list-rules.ts). It stays readable in its mailbox, where the label says why it was kept quiet.
 *
 * Each email is labelled, before it is stored, as the account's filters say (filters.ts), from a
 * cache of them in this process: filtering costs no round trip of its own.
 *
 * Messages handled at once share their round trips: their raw bytes are read by one statement and
 * their emails stored by another (store.ts `storeEmails`), so a busy worker pays a round trip and a
 * commit per batch rather than per email.
 *
 * Copies for the mailbox's forwarding addresses are queued in the email's own statement (store.ts)
 * and handed to the mta before the message is acknowledged.
 *
 * Idempotent: the email's id was chosen when the message was accepted, so a redelivered message
 * (a worker that died before acknowledging, a publish retried) finds its email already stored and
 * only announces it again, under the same event id, and hands over again the copies not yet tried.
 */
import { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Duration, Effect, Layer, Schema } from "effect"
import { Bus, type BusError, type BusMessage, decodeJson } from "../bus/bus.ts"
import { measured } from "../bus/metrics.ts"
import { type Authentication, Authenticator, isUnauthenticated, UNAUTHENTICATED } from "./authentication.ts"
import { inboundLabels } from "./label-rules.ts"
import { isSpam, SPAM } from "./spam.ts"
import { BLOCKED, senderForms } from "./sender-list-rules.ts"
import { fromAuthors, type ParsedEmail, parseMessage } from "./parse.ts"
import { emailBodyColumnList, type EmailBodyRow, type EmailRow, extractedOf } from "./records.ts"
import { announceReceived } from "./received.ts"
import { type Extracted, extract } from "./extract.ts"
import { firstHeader, InboundMessage } from "./schemas.ts"
import { StageLimits } from "../stage-limits.ts"
import { backgroundTurn } from "../pipeline/priority.ts"
import { StageActivity, stageConsumers } from "../pipeline/stages.ts"
import { BounceReports } from "../outbound/bounces.ts"
import { publishForwards } from "../outbound/forwards.ts"
import { groupCommit, groupCommitIsolated } from "../batching.ts"
import { type NewEmail, storeEmails } from "./store.ts"
import { Filters } from "./filters.ts"
import { forwardedBy, ForwardingKey } from "./forward-rules.ts"

/** Messages whose raw bytes are read, or whose emails are stored, in one statement at most. */
const MAX_BATCH = 64

/** A message's verdicts as stored (authentication.ts `Verdict`; a message on the bus may lack the summary line). */
interface Checked {
  readonly authentication: Authentication
  readonly results: string | undefined
}

/** A provider's feedback report (ARF, RFC 5965): what BounceReports.recordReceived applies. */
const isFeedbackReport = (parsed: ParsedEmail) => {
  const type = firstHeader(parsed.headers, "content-type") ?? ""
  return /^\s*multipart\/report\b/i.test(type) && /\breport-type\s*=\s*"?feedback-report\b/i.test(type)
}

/** An email as ingest stored it: the domains its forwarded copies were queued for, unknown when an earlier delivery stored it. */
interface Stored {
  readonly row: EmailRow
  readonly extracted: Extracted | null
  readonly forwardDomains: ReadonlyArray<string> | undefined
}

/**
 * The sender-list forms of every author the From names (parse.ts `fromAuthors`): a blocked one among
 * others is still blocked.
 */
const authorForms = (authors: ReadonlyArray<string>): ReadonlyArray<string> => [...new Set(authors.flatMap(senderForms))]

export class Ingest extends Effect.Service<Ingest>()("mailroom/Ingest", {
  dependencies: [Filters.Default],
  scoped: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const bus = yield* Bus
    const bounces = yield* BounceReports
    const authenticator = yield* Authenticator
    const filters = yield* Filters
    const { key: forwardingKey } = yield* ForwardingKey

    /** An email stored by an earlier delivery, with what was extracted from it. */
    const findEmail = (emailId: string) =>
      sql<EmailBodyRow>`SELECT ${sql.literal(emailBodyColumnList)} FROM emails e WHERE e.id = ${emailId}`.pipe(
        Effect.map((rows) => (rows[0] ? { row: rows[0] as EmailRow, extracted: extractedOf(rows[0]) } : undefined))
      )

    /** The domains of the email's forwarded copies not yet tried (a redelivery hands them over again). */
    const untriedForwards = (emailId: string) =>
      Effect.map(
        sql<{ domain: string }>`SELECT DISTINCT domain FROM forward_deliveries WHERE email_id = ${emailId} AND status = 'queued'`,
        (rows) => rows.map((r) => r.domain)
      )

    /** Announce the email as received, unless its header From is blocked. */
    const announce = ({ extracted, row }: { readonly row: EmailRow; readonly extracted: Extracted | null }) =>
      row.labels.includes(BLOCKED) ? Effect.void : announceReceived(bus, row, extracted)

    /**
     * The raw bytes of accepted messages: the messages being ingested at once are read together, one
     * statement for the lot (batching.ts).
     */
    const readRaw = yield* groupCommit({
      maxBatch: MAX_BATCH,
      parallel: 1,
      run: (hashes: ReadonlyArray<string>) =>
        sql<{ sha256: string; content: Uint8Array }>`SELECT sha256, content FROM blobs WHERE sha256 = ANY(${[...new Set(hashes)]}::text[])`.pipe(
          Effect.map((rows) => {
            const content = new Map(rows.map((row) => [row.sha256, row.content]))
            return hashes.map((hash) => content.get(hash))
          })
        )
    })

    /**
     * Emails stored together: those parsed while a batch is in flight go in the next one (store.ts
     * `storeEmails`); one email the database refuses fails alone (batching.ts).
     */
    const storeBatched = yield* groupCommitIsolated({
      maxBatch: MAX_BATCH,
      parallel: 1,
      run: (emails: ReadonlyArray<NewEmail>) => storeEmails(sql, emails)
    })

    /**
     * The message's verdicts: the SMTP node's when it checked before answering, else checked here
     * from the connection it passed on (smtp/server.ts), else none (VERIFY_INBOUND=false).
     */
    const verdictOf = (message: InboundMessage, raw: Uint8Array): Effect.Effect<Checked | undefined> =>
      message.authentication !== undefined
        ? Effect.succeed({ authentication: message.authentication, results: message.authentication_results })
        : message.connection === undefined
        ? Effect.succeed(undefined)
        : authenticator.verify({
          clientIp: message.connection.client_ip,
          helo: message.connection.helo,
          mailFrom: message.mail_from,
          raw
        })

    /**
     * Store the email (store.ts), labelled as the account's filters say (filters.ts); returns the
     * stored row with the domains of the copies queued for forwarding, or the row a previous delivery
     * stored.
     */
    const store = Effect.fnUntraced(function*(
      message: InboundMessage,
      verdict: Checked | undefined,
      parsed: ParsedEmail,
      messageId: string,
      extracted: Extracted
    ) {
      const authors = fromAuthors(parsed.from, parsed.headers["from"])
      const filtered = yield* filters.filterReceived(message.user_id, message.mailbox_id, {
        from: authors,
        recipients: [message.rcpt_to, ...parsed.to, ...parsed.cc],
        subject: parsed.subject,
        body: parsed.text,
        hasAttachments: parsed.attachments.length > 0
      }, [
        ...inboundLabels,
        ...(verdict !== undefined && isUnauthenticated(verdict.authentication) ? [UNAUTHENTICATED] : []),
        ...(message.spam !== undefined && isSpam(message.spam) ? [SPAM] : [])
      ])
      const inserted = yield* storeBatched({
        emailId: message.email_id,
        mailboxId: message.mailbox_id,
        userId: message.user_id,
        direction: "inbound",
        labels: filtered.labels,
        rawSha256: message.raw_sha256,
        size: message.size,
        mailFrom: message.mail_from,
        rcptTo: message.rcpt_to,
        receivedAt: new Date(message.received_at),
        messageId,
        parsed,
        authentication: verdict?.authentication,
        authenticationResults: verdict?.results,
        spam: message.spam,
        extracted,
        headerFromForms: authorForms(authors),
        // Only the forwarded-by fields Mailroom wrote: a stranger's would switch forwarding off.
        forwardedBy: forwardedBy(forwardingKey, parsed.headers)
      })
      if (inserted) {
        yield* filters.noteApplied(filtered.applied)
        return { row: inserted, extracted, forwardDomains: inserted.forwardDomains } satisfies Stored
      }
      const found = yield* findEmail(message.email_id)
      return found && ({ ...found, forwardDomains: undefined } satisfies Stored)
    })

    /**
     * Store `message` as an email (once) and announce it. Untraced: it runs for every message, and
     * a traced Effect.fn captures a stack trace per call.
     */
    const ingest = Effect.fnUntraced(function*(message: InboundMessage, firstDelivery: boolean) {
      // A redelivery usually finds its email stored: announce it again without parsing anything.
      if (!firstDelivery) {
        const existing = yield* findEmail(message.email_id)
        if (existing) {
          yield* publishForwards(bus, message.email_id, yield* untriedForwards(message.email_id))
          return yield* announce(existing)
        }
      }
      const raw = yield* readRaw(message.raw_sha256)
      if (raw === undefined) {
        // Cannot happen while blobs outlive the bus's retention; nothing could be done about it.
        return yield* Effect.logError("An accepted message's raw bytes are missing; it cannot be ingested", {
          emailId: message.email_id,
          sha256: message.raw_sha256
        })
      }
      // A report about a sent email, to its bounce address: applied to that email, not stored as mail.
      if (message.bounce_of !== undefined) {
        const scope = message.bounce_recipient !== undefined
          ? { recipient: message.bounce_recipient }
          : message.bounce_domain !== undefined
          ? { domain: message.bounce_domain }
          : undefined
        return yield* Effect.asVoid(bounces.record(message.bounce_of, raw, scope))
      }
      // The checks (on their own thread, waiting on DNS) go on while the message is parsed.
      const [verdict, parsed] = yield* Effect.all([verdictOf(message, raw), parseMessage(raw)], { concurrency: 2 })
      const messageId = parsed.messageId ?? `<${message.email_id}@mailroom.invalid>`
      const extracted = yield* Effect.sync(() => extract(parsed)).pipe(Effect.withSpan("extractContent"))
      // A provider's complaint about mail the account sent, come to the address its feedback loop was
      // given: applied before the report is stored, so that a failure is retried with the message.
      if (isFeedbackReport(parsed)) {
        const authenticated = verdict !== undefined && !isUnauthenticated(verdict.authentication)
        yield* bounces.recordReceived(message.user_id, raw, authenticated ? verdict.authentication.dmarc.domain?.toLowerCase() : undefined)
      }
      const stored = yield* store(message, verdict, parsed, messageId, extracted)
      if (!stored) {
        return yield* Effect.logInfo("Email not stored: its mailbox holds the message already (a copy come again), or it or its account was deleted since it was accepted").pipe(
          Effect.annotateLogs({ email_id: message.email_id, mailbox_id: message.mailbox_id })
        )
      }
      yield* publishForwards(bus, message.email_id, stored.forwardDomains ?? (yield* untriedForwards(message.email_id)))
      yield* announce(stored)
      yield* Effect.logInfo("Email delivered to its mailbox").pipe(Effect.annotateLogs({
        email_id: message.email_id,
        mailbox_id: message.mailbox_id,
        size: message.size,
        attachments: parsed.attachments.length
      }))
    })

    /** The bus handler: a payload that is not an inbound message is logged and dropped, never retried. */
    const handle = (message: BusMessage): Effect.Effect<void, SqlError | BusError> =>
      Effect.try(() => decodeJson(message.data)).pipe(
        Effect.flatMap(Schema.decodeUnknown(InboundMessage)),
        Effect.matchEffect({
          onFailure: (error) => Effect.logError("Dropping a malformed inbound message", { subject: message.subject, error }),
          onSuccess: (inbound) => ingest(inbound, message.deliveryCount === 1)
        })
      )

    return { ingest, handle } as const
  })
}) {}

/** The ingest actor (the pipeline's ingest stage): consumes `mail.inbound.>` while the worker runs. */
export const IngestLive = Layer.scopedDiscard(
  Effect.gen(function*() {
    const bus = yield* Bus
    const { handle } = yield* Ingest
    // Messages parsed at once: parsing is CPU, storing waits on the database (stage-limits.ts).
    const { ingest: concurrency } = yield* StageLimits
    // Behind the SMTP node's accepting when both run here (priority.ts).
    const turn = backgroundTurn("ingest")
    yield* bus.consume(measured({
      ...stageConsumers.ingest,
      concurrency,
      // A crashed worker's messages come back after this; a long parse keeps its message with progress signals.
      ackWait: Duration.seconds(20),
      handler: (message) => turn.pipe(Effect.zipRight(handle(message)), Effect.tap(() => StageActivity.handled("ingest")))
    }))
  })
).pipe(Layer.provide(Ingest.Default), Layer.provide(BounceReports.Default))
