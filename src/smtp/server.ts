/**
 * The SMTP node: smtp-server on SMTP_HOST:SMTP_PORT, its hooks bridged to the Inbound service.
 *
 * - RCPT TO is answered per recipient (550 5.1.1, 452 4.2.2, 552 5.2.2, 552 5.3.4).
 * - SIZE announces the largest plan's limit; each message is held to the smallest limit among its
 *   recipients' plans while it streams in (552 5.3.4), and to the announced one by smtp-server.
 * - DATA is answered 250 only once Inbound.accept has stored the message and the bus has taken it;
 *   any failure, or a store that takes longer than the data time-out, is 451 4.3.0.
 * - STARTTLS is offered when SMTP_TLS_CERT and SMTP_TLS_KEY are set; AUTH is never offered (this
 *   is an inbound MX, not a submission server).
 */
import { readFileSync } from "node:fs"
import { Cause, Effect, Exit, Layer, Option, Runtime } from "effect"
import { SMTPServer, type SMTPServerAddress, type SMTPServerDataStream, type SMTPServerSession } from "smtp-server"
import { DependencyHealth } from "../../services/health/dependency-health.ts"
import { Inbound, type Recipient } from "../../services/mail/inbound.ts"
import { type SmtpReply, TemporaryFailure } from "../../services/mail/refusals.ts"
import { limits } from "../../services/plans/plans.ts"
import { AppConfig } from "../config.ts"

/** How long storing and publishing an accepted message may take before the sender is told to retry. */
const DATA_TIMEOUT_MS = 30_000
/** An idle connection (including one stalled mid-DATA) is closed after this. */
const SOCKET_TIMEOUT_MS = 60_000
/** On shutdown, sessions get this long to finish before they are cut. */
const CLOSE_TIMEOUT_MS = 10_000
/** Connections beyond this are told 421 to come back later, instead of exhausting the process. */
const MAX_CLIENTS = 2_000

/** The largest message any plan accepts: what SIZE announces. */
export const maxMessageBytes = Math.max(...Object.values(limits).map((plan) => plan.maxEmailBytes))

const smtpError = (reply: SmtpReply) => Object.assign(new Error(reply.text), { responseCode: reply.code })

const temporaryFailure = new TemporaryFailure({ reason: "unexpected" })

/** The SMTP reply for a failed hook: the refusal's own, or 451 for anything unforeseen. */
const replyFor = <E extends { readonly reply: SmtpReply }>(cause: Cause.Cause<E>) =>
  Option.match(Cause.failureOption(cause), {
    onSome: (refusal) => refusal.reply,
    onNone: () => temporaryFailure.reply
  })

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
    const health = yield* DependencyHealth
    const runtime = yield* Effect.runtime<never>()
    // Hooks read the outcome as an Exit; the fiber itself succeeds with it, so that a refusal is not
    // also logged as an "unhandled error" (with a stack trace) by the runtime.
    const runPromise = Runtime.runPromise(runtime)
    const run = <A, E>(effect: Effect.Effect<A, E>) => runPromise(Effect.exit(effect))
    const fork = Runtime.runFork(runtime)
    // The accepted recipients of each session's current transaction, by the address smtp-server keeps.
    const recipients = new WeakMap<SMTPServerAddress, Recipient>()

    const tlsFiles = Option.all({ cert: config.smtpTlsCert, key: config.smtpTlsKey })
    const tls = Option.isSome(tlsFiles)
      ? yield* Effect.try({
        try: () => ({ cert: readFileSync(tlsFiles.value.cert), key: readFileSync(tlsFiles.value.key) }),
        catch: (error) => new Error(`SMTP_TLS_CERT / SMTP_TLS_KEY could not be read: ${String(error)}`)
      })
      : undefined

    const onRcptTo = (address: SMTPServerAddress, session: SMTPServerSession, callback: (error?: Error | null) => void) => {
      void run(inbound.recipient(address.address, declaredSize(session))).then((exit) => {
        if (Exit.isSuccess(exit)) {
          recipients.set(address, exit.value)
          return callback()
        }
        const reply = replyFor(exit.cause)
        // An unreachable database or bus is counted towards its outage (logged once); anything else is logged.
        if (reply.code === 451) void run(health.report("RCPT answered 451", exit.cause))
        callback(smtpError(reply))
      })
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
      const answer = (error: Error | null, message?: string) => {
        if (answered) return
        answered = true
        callback(error, message)
      }
      stream.on("data", (chunk: Buffer) => {
        bytes += chunk.length
        // Past the limit the rest is read and dropped, so the reply can still be given.
        if (bytes <= limit) chunks.push(chunk)
      })
      stream.once("error", (error) => {
        void run(Effect.logWarning("SMTP data stream failed", error))
        answer(smtpError(temporaryFailure.reply))
      })
      stream.once("end", () => {
        // smtp-server answers an oversized message itself (552) whatever we say.
        if (stream.sizeExceeded) return answer(null)
        if (bytes > limit) return answer(smtpError({ code: 552, text: `5.3.4 Message too big: the limit for this recipient is ${limit} bytes` }))
        const raw = Buffer.concat(chunks, bytes)
        const mailFrom = session.envelope.mailFrom ? session.envelope.mailFrom.address : ""
        const accepting = fork(Effect.exit(inbound.accept({ mailFrom, recipients: accepted, raw, receivedAt: new Date() })))
        // A plain timer rather than Effect.timeout, which would race a second fiber for every message.
        const deadline = setTimeout(() => {
          void run(Effect.logWarning("DATA answered 451: storing and publishing the message took too long"))
          answer(smtpError(temporaryFailure.reply))
          accepting.unsafeInterruptAsFork(accepting.id())
        }, DATA_TIMEOUT_MS)
        accepting.addObserver((done) => {
          clearTimeout(deadline)
          const exit = Exit.flatten(done)
          if (Exit.isSuccess(exit)) return answer(null, `2.0.0 Ok: queued as ${exit.value.join(",")}`)
          const reply = replyFor(exit.cause)
          if (reply.code === 451 && !answered) void run(health.report("DATA answered 451", exit.cause))
          answer(smtpError(reply))
        })
      })
    }

    const server = new SMTPServer({
      name: config.mxHost,
      banner: "Mailroom ESMTP",
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
      onRcptTo,
      onData
    })
    // Client-side failures (resets, TLS handshakes gone wrong) end that session only.
    server.on("error", (error) => void run(Effect.logDebug("SMTP session error", error)))

    yield* Effect.acquireRelease(
      Effect.async<void, Error>((resume) => {
        const onError = (error: Error) => resume(Effect.fail(error))
        server.server.once("error", onError)
        server.listen(config.smtpPort, config.smtpHost, () => {
          server.server.off("error", onError)
          resume(Effect.void)
        })
      }),
      () => Effect.async<void>((resume) => server.close(() => resume(Effect.void)))
    ).pipe(Effect.mapError((error) => new Error(`SMTP could not listen on ${config.smtpHost}:${config.smtpPort}: ${error.message}`)))
    yield* Effect.logInfo(`SMTP listening on ${config.smtpHost}:${config.smtpPort}${tls ? " (STARTTLS)" : ""}`)
  })
).pipe(Layer.provide(Inbound.Default))
