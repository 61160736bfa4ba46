/**
 * The SMTP node: smtp-server on SMTP_HOST:SMTP_PORT, its hooks bridged to the Inbound service.
 *
 * - A client address holds at most SMTP_MAX_CONNECTIONS_PER_IP connections at once (default 20);
 *   one more is answered 421 4.7.0 and closed, so one flooding host cannot lock out the others.
 * - RCPT TO is answered per recipient (550 5.1.1, 550 5.7.1 when the mailbox's allow or block lists
 *   refuse MAIL FROM, 452 4.2.2, 552 5.2.2, 552 5.3.4). A message takes
 *   at most 100 recipients (452 4.5.3 for the 101st); a session that names 20 unknown recipients is
 *   answered 421 4.7.0 and closed (address harvesting).
 * - SIZE announces the largest plan's limit; each message is held to the smallest limit among its
 *   recipients' plans while it streams in. Anything over it is answered 552 5.3.4 and neither stored
 *   nor counted, whether or not the sender declared a SIZE.
 * - DATA is answered 250 only once Inbound.accept has stored the message and the bus has taken it;
 *   any failure, or a store that takes longer than the data time-out, is 451 4.3.0. Nothing else in
 *   this file answers 250 to DATA.
 * - A message's SPF, DKIM, DMARC and ARC are checked (Authenticator; not at all with
 *   VERIFY_INBOUND=false) where the answer needs them. With DMARC_ENFORCE=true, before DATA is
 *   answered (at most 10 s, inside the data time-out): a message failing DMARC under its From domain's
 *   p=reject is answered 550 5.7.1 and not stored. Otherwise a verdict never refuses mail
 *   (services/mail/authentication.ts), so the 250 does not wait for it: the message travels with what
 *   only this node knows of its connection (client address, HELO) and ingest checks it, off the
 *   accepting node's CPU (a millisecond or more of it a message: issue 18). Either way the verdicts
 *   are stored with the email.
 * - With RSPAMD_URL, rspamd scores the message at the same time (services/mail/spam.ts); with
 *   SPAM_REJECT=true its `reject` is answered 550 5.7.1. rspamd down never refuses mail.
 * - STARTTLS is offered when SMTP_TLS_CERT and SMTP_TLS_KEY are set; AUTH is never offered (this
 *   is an inbound MX, not a submission server).
 * - On shutdown (SIGTERM) the node drains: a new connection is answered 421 4.3.2, a DATA in
 *   progress is finished and answered, then every connection is closed (idle ones with 421).
 * - One log line per transaction (its DATA reply code, the email ids, the size; never an address
 *   at `info`); refusals are expected, so they are `info`/`debug`, never errors.
 */
import { Cause, Effect, Either, Exit, Layer, Option, Runtime } from "effect"
import { SMTPServer, type SMTPServerAddress, type SMTPServerDataStream, type SMTPServerSession } from "smtp-server"
import { DependencyHealth } from "../../services/health/dependency-health.ts"
import { Authenticator, dmarcRejects } from "../../services/mail/authentication.ts"
import { Inbound, type Recipient } from "../../services/mail/inbound.ts"
import { SpamFilter, spamRejects } from "../../services/mail/spam.ts"
import {
  DmarcRejected,
  MAX_RECIPIENTS_PER_MESSAGE,
  MAX_UNKNOWN_RECIPIENTS_PER_SESSION,
  type MessageRefusal,
  MessageTooBig,
  SizeLimitDiffers,
  type SmtpReply,
  SpamRejected,
  TemporaryFailure,
  TooManyConnections,
  TooManyRecipients,
  TooManyUnknownRecipients
} from "../../services/mail/refusals.ts"
import { limits } from "../../services/plans/plans.ts"
import { AppConfig, inboundChecksRole } from "../config.ts"
import { connectionCounter } from "./connections.ts"
import { listenUntilDrained, readingProxyHeaders, SHUTTING_DOWN, tlsFiles } from "./listen.ts"
import { SmtpMetrics, type SmtpPhase } from "./metrics.ts"
import { StageActivity } from "../../services/pipeline/stages.ts"
import { withCrlf } from "../../services/mail/line-ends.ts"

/** How long storing and publishing an accepted message may take before the sender is told to retry. */
const DATA_TIMEOUT_MS = 30_000
/** An idle connection (including one stalled mid-DATA) is closed after this. */
const SOCKET_TIMEOUT_MS = 60_000
/** On shutdown, sessions get this long to finish before they are cut. */
const CLOSE_TIMEOUT_MS = 10_000
/** Connections beyond this are told 421 to come back later, instead of exhausting the process. */
const MAX_CLIENTS = 2_000

const shuttingDown: SmtpReply = { code: 421, text: SHUTTING_DOWN }

/** The largest message any plan accepts: what SIZE announces. */
export const maxMessageBytes = Math.max(...Object.values(limits).map((plan) => plan.maxEmailBytes))

/** Every refusal this node sends goes through here, so that each is counted once by its command and code. */
const smtpError = (phase: SmtpPhase, reply: SmtpReply) => {
  SmtpMetrics.reply(phase, reply.code)
  return Object.assign(new Error(reply.text), { responseCode: reply.code })
}

const temporaryFailure = new TemporaryFailure({ reason: "unexpected" })

/** The SMTP reply for a failed hook: the refusal's own, or 451 for anything unforeseen. */
const replyFor = <E extends { readonly reply: SmtpReply }>(cause: Cause.Cause<E>) =>
  Option.match(Cause.failureOption(cause), {
    onSome: (refusal) => refusal.reply,
    onNone: () => temporaryFailure.reply
  })

/** Why a RCPT TO is refused (each refusal carries its reply). */
type RecipientRefusal = Effect.Effect.Error<ReturnType<Inbound["recipient"]>>

/** The MAIL FROM SIZE= parameter, if the sender declared one. */
const declaredSize = (session: SMTPServerSession): number | undefined => {
  const mailFrom = session.envelope.mailFrom
  const size = mailFrom && typeof mailFrom.args === "object" ? Number(mailFrom.args.SIZE) : Number.NaN
  return Number.isFinite(size) && size > 0 ? size : undefined
}

export const SmtpServerLive = Layer.scopedDiscard(
  Effect.gen(function*() {
    const config = yield* AppConfig
    const inbound = yield* Inbound
    const authenticator = yield* Authenticator
    // Only DMARC_ENFORCE makes a verdict refuse mail: otherwise ingest checks, after the 250.
    const checker = inboundChecksRole(config)
    const checkBeforeAnswer = checker === "smtp"
    const checkAfterAnswer = checker === "worker"
    const spamFilter = yield* SpamFilter
    const health = yield* DependencyHealth
    const runtime = yield* Effect.runtime<never>()
    // Hooks read the outcome as an Exit; the fiber itself succeeds with it, so that a refusal is not
    // also logged as an "unhandled error" (with a stack trace) by the runtime.
    const runPromise = Runtime.runPromise(runtime)
    const run = <A, E>(effect: Effect.Effect<A, E>) => runPromise(Effect.exit(effect))
    const fork = Runtime.runFork(runtime)
    // The accepted recipients of each session's current transaction, by the address smtp-server keeps.
    const recipients = new WeakMap<SMTPServerAddress, Recipient>()
    // Unknown recipients each session has named so far, over all its transactions.
    const unknownRecipients = new WeakMap<SMTPServerSession, number>()
    const connections = connectionCounter(config.smtpMaxConnectionsPerIp)
    // Draining: set when the layer's scope closes; DATA commands between their end and their reply.
    let draining = false
    let dataInFlight = 0
    SmtpMetrics.fromZero()

    const onConnect = (session: SMTPServerSession, callback: (error?: Error | null) => void) => {
      SmtpMetrics.connection()
      if (draining) return callback(smtpError("connect", shuttingDown))
      if (!connections.admit(session)) {
        return callback(smtpError("connect", new TooManyConnections({ limit: config.smtpMaxConnectionsPerIp }).reply))
      }
      callback()
    }

    const tls = yield* tlsFiles(config)

    /**
     * Whether `recipient` may share the transaction's message with the recipients accepted so far:
     * their size limits are one (a message smaller than both, by its declared SIZE, fits either way).
     * Otherwise the smallest would decide for all, and a message the larger allows would be lost to it.
     */
    const fitsWithOthers = (session: SMTPServerSession, recipient: Recipient) => {
      const size = declaredSize(session)
      return session.envelope.rcptTo.every((address) => {
        const other = recipients.get(address)
        return other === undefined || other.maxEmailBytes === recipient.maxEmailBytes ||
          (size !== undefined && size <= Math.min(other.maxEmailBytes, recipient.maxEmailBytes))
      })
    }

    /** Draining, a session whose message is done starts no other: 421, and the session ends. */
    const onMailFrom = (_address: SMTPServerAddress, _session: SMTPServerSession, callback: (error?: Error | null) => void) =>
      callback(draining ? smtpError("mail", shuttingDown) : null)

    const onRcptTo = (address: SMTPServerAddress, session: SMTPServerSession, callback: (error?: Error | null) => void) => {
      const repeated = session.envelope.rcptTo.some((r) => r.address.toLowerCase() === address.address.toLowerCase())
      if (!repeated && session.envelope.rcptTo.length >= MAX_RECIPIENTS_PER_MESSAGE) {
        return callback(smtpError("rcpt", new TooManyRecipients({ limit: MAX_RECIPIENTS_PER_MESSAGE }).reply))
      }
      const answer = (exit: Exit.Exit<Recipient, RecipientRefusal>) => {
        if (Exit.isSuccess(exit)) {
          if (!fitsWithOthers(session, exit.value)) {
            return callback(smtpError("rcpt", new SizeLimitDiffers({ address: address.address }).reply))
          }
          recipients.set(address, exit.value)
          SmtpMetrics.reply("rcpt", 250)
          return callback()
        }
        const failure = Cause.failureOption(exit.cause)
        if (Option.isSome(failure) && failure.value._tag === "UnknownRecipient") {
          const unknown = (unknownRecipients.get(session) ?? 0) + 1
          unknownRecipients.set(session, unknown)
          if (unknown >= MAX_UNKNOWN_RECIPIENTS_PER_SESSION) {
            return callback(smtpError("rcpt", new TooManyUnknownRecipients({ limit: MAX_UNKNOWN_RECIPIENTS_PER_SESSION }).reply))
          }
        }
        const reply = replyFor(exit.cause)
        // An unreachable database or bus is counted towards its outage (logged once); anything else is logged.
        if (reply.code === 451) void run(health.report("RCPT answered 451", exit.cause))
        else void run(Effect.logDebug(`RCPT TO refused ${reply.code}`).pipe(Effect.annotateLogs({ session: session.id })))
        callback(smtpError("rcpt", reply))
      }
      // The recipients accepted so far: the message is an email for each, so they count with this one.
      const accepted = session.envelope.rcptTo.flatMap((r) => {
        const recipient = recipients.get(r)
        return recipient === undefined ? [] : [recipient]
      })
      // Under load most answers come from the recipient directory, at once: no fiber, no promise.
      const kept = inbound.keptRecipient(address.address, declaredSize(session), accepted)
      if (kept !== undefined) return answer(Either.isRight(kept) ? Exit.succeed(kept.right) : Exit.fail(kept.left))
      const mailFrom = session.envelope.mailFrom ? session.envelope.mailFrom.address : ""
      void run(inbound.recipient(address.address, declaredSize(session), mailFrom, accepted)).then(answer)
    }

    const onData = (stream: SMTPServerDataStream, session: SMTPServerSession, callback: (error?: Error | null, message?: string) => void) => {
      const accepted = session.envelope.rcptTo.flatMap((address) => {
        const recipient = recipients.get(address)
        return recipient ? [recipient] : []
      })
      const limit = Math.min(maxMessageBytes, ...accepted.map((r) => r.maxEmailBytes))
      const chunks: Array<Buffer> = []
      let bytes = 0
      let answered = false
      let ended: number | undefined
      dataInFlight++
      StageActivity.acceptStarted()
      /** The transaction is over, answered or not: once only. */
      const settle = () => {
        if (answered) return false
        answered = true
        dataInFlight--
        StageActivity.acceptEnded()
        return true
      }
      /** The transaction's one log line. */
      const logAnswer = (code: number, emailIds: ReadonlyArray<string>) =>
        Effect.logInfo(`SMTP transaction answered ${code}`).pipe(Effect.annotateLogs({
          session: session.id,
          code,
          size: bytes,
          recipients: session.envelope.rcptTo.length,
          ...(emailIds.length > 0 ? { email_ids: emailIds.join(",") } : {})
        }))
      /** Answer DATA; its log line too, unless the fiber that stored the message wrote it (`logged`). */
      const answer = (error: Error | null, message?: string, emailIds: ReadonlyArray<string> = [], logged = false) => {
        if (!settle()) return
        const code = error === null ? 250 : (error as Error & { responseCode?: number }).responseCode ?? 451
        if (error === null) {
          SmtpMetrics.reply("data", 250)
          StageActivity.handled("accept")
          if (ended !== undefined) SmtpMetrics.accepted((performance.now() - ended) / 1000)
        }
        if (!logged) void run(logAnswer(code, emailIds))
        callback(error, message)
      }
      stream.on("data", (chunk: Buffer) => {
        bytes += chunk.length
        // Past the limit the rest is read and dropped, so the reply can still be given.
        if (bytes <= limit) chunks.push(chunk)
      })
      stream.once("error", (error: Error & { readonly code?: string }) => {
        // The client went away in the middle of the message (smtp-server's ECONNECTION): nothing is
        // stored, and no reply can reach it, so none is counted (a 451 would read as an outage).
        if (error.code === "ECONNECTION") {
          if (!settle()) return
          void run(Effect.logInfo("SMTP client left during DATA; nothing stored").pipe(
            Effect.annotateLogs({ session: session.id, size: bytes, recipients: session.envelope.rcptTo.length })
          ))
          return callback(error)
        }
        void run(Effect.logWarning("SMTP data stream failed", error))
        answer(smtpError("data", temporaryFailure.reply))
      })
      stream.once("end", () => {
        ended = performance.now()
        SmtpMetrics.data(bytes)
        // smtp-server only flags a message over the announced SIZE (it answers 250 to whatever we
        // say unless told otherwise), so every oversized message is refused here, by our own count.
        if (stream.sizeExceeded || bytes > limit) return answer(smtpError("data", new MessageTooBig({ limit }).reply))
        // Every recipient smtp-server kept was accepted at RCPT; a message with none would be
        // answered 250 with nothing stored, so it never is.
        if (accepted.length === 0 || accepted.length !== session.envelope.rcptTo.length) {
          void run(Effect.logWarning("DATA answered 451: a recipient of the message was never accepted"))
          return answer(smtpError("data", temporaryFailure.reply))
        }
        // Bare LFs made CRLF before anything reads the message: stored, sized and served as mail is (line-ends.ts).
        const raw = withCrlf(Buffer.concat(chunks, bytes))
        const mailFrom = session.envelope.mailFrom ? session.envelope.mailFrom.address : ""
        const receivedAt = new Date()
        const envelope = { clientIp: session.remoteAddress, helo: session.hostNameAppearsAs, mailFrom, raw }
        const checkedAndStored = Effect.flatMap(
          // Both checks at once when both run (each waits mostly on the network: DNS, rspamd); by
          // default neither does here, and two fibers forked for nothing would cost every message.
          Effect.all([
            checkBeforeAnswer ? authenticator.verify(envelope) : Effect.succeed(undefined),
            spamFilter.check({ ...envelope, recipients: accepted.map((r) => r.address) })
          ], { concurrency: checkBeforeAnswer ? 2 : undefined }),
          ([verdict, spam]): Effect.Effect<ReadonlyArray<string>, MessageRefusal | DmarcRejected | SpamRejected> =>
            config.dmarcEnforce && verdict !== undefined && dmarcRejects(verdict.authentication)
              ? Effect.fail(new DmarcRejected({ domain: verdict.authentication.dmarc.domain }))
              : config.spamReject && spam !== undefined && spamRejects(spam)
              ? Effect.fail(new SpamRejected())
              : inbound.accept({
                mailFrom,
                recipients: accepted,
                raw,
                receivedAt,
                verdict,
                spam,
                connection: checkAfterAnswer ? { clientIp: envelope.clientIp, helo: envelope.helo } : undefined
              })
        ).pipe(
          // The root of the message's trace: ingest, indexing and webhooks continue it over the bus.
          Effect.withSpan("smtp.accept", {
            kind: "server",
            captureStackTrace: false,
            attributes: { "mailroom.recipients": accepted.length, "mailroom.size": raw.byteLength }
          })
        )
        // The log line of the answer the observer below gives at once, written by this fiber rather than
        // one more forked for it; none once the deadline has answered.
        let logged = false
        const accepting = fork(Effect.exit(checkedAndStored).pipe(
          Effect.tap((exit) =>
            Effect.suspend(() => {
              if (answered) return Effect.void
              logged = true
              return Exit.isSuccess(exit) ? logAnswer(250, exit.value) : logAnswer(replyFor(exit.cause).code, [])
            })
          )
        ))
        // A plain timer rather than Effect.timeout, which would race a second fiber for every message.
        const deadline = setTimeout(() => {
          void run(Effect.logWarning("DATA answered 451: storing and publishing the message took too long"))
          answer(smtpError("data", temporaryFailure.reply))
          accepting.unsafeInterruptAsFork(accepting.id())
        }, DATA_TIMEOUT_MS)
        accepting.addObserver((done) => {
          clearTimeout(deadline)
          const exit = Exit.flatten(done)
          if (Exit.isSuccess(exit)) {
            const queued = exit.value.length > 0 ? `queued as ${exit.value.join(",")}` : "delivery report received"
            return answer(null, `2.0.0 Ok: ${queued}`, exit.value, logged)
          }
          const reply = replyFor(exit.cause)
          if (reply.code === 451 && !answered) void run(health.report("DATA answered 451", exit.cause))
          answer(smtpError("data", reply), undefined, [], logged)
        })
      })
    }

    const server = readingProxyHeaders(new SMTPServer({
      name: config.mxHost,
      // smtp-server writes "<name> ESMTP <banner>".
      banner: "Mailroom",
      size: maxMessageBytes,
      authOptional: true,
      disabledCommands: tls ? ["AUTH"] : ["AUTH", "STARTTLS"],
      hideSTARTTLS: !tls,
      ...(tls ?? {}),
      logger: false,
      // The client's reverse DNS name is only shown in a greeting; not worth a lookup per connection.
      disableReverseLookup: true,
      socketTimeout: SOCKET_TIMEOUT_MS,
      closeTimeout: CLOSE_TIMEOUT_MS,
      maxClients: MAX_CLIENTS,
      // Connections from these peers begin with a PROXY header, whose client address the session takes.
      ...(config.proxyProtocol.length > 0 ? { useProxy: [...config.proxyProtocol] } : {}),
      onConnect,
      onClose: connections.closed,
      onMailFrom,
      onRcptTo,
      onData
    }), config.proxyProtocol)
    // Client-side failures (resets, TLS handshakes gone wrong) end that session only.
    server.on("error", (error) => void run(Effect.logDebug("SMTP session error", error)))

    yield* listenUntilDrained(server, {
      name: "SMTP",
      host: config.smtpHost,
      port: config.smtpPort,
      hostVariable: "SMTP_HOST",
      portVariable: "SMTP_PORT",
      beginDraining: () => {
        draining = true
      },
      dataInFlight: () => dataInFlight,
      dataTimeoutMs: DATA_TIMEOUT_MS
    })
    yield* Effect.logInfo(`SMTP listening on ${config.smtpHost}:${config.smtpPort}${tls ? " (STARTTLS)" : ""}`)
  })
).pipe(Layer.provide(Inbound.Default))
