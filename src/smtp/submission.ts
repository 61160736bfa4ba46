/**
 * The submission server (RFC 6409): smtp-server on SUBMISSION_HOST:SUBMISSION_PORT, for mail programs
 * and SMTP libraries sending from a mailbox with an API key as the password. Its rules are the
 * Submission service's (services/outbound/submission.ts); this file is the protocol around them.
 *
 * - SUBMISSIONS_PORT takes TLS from the first byte (RFC 8314, what clients call SSL/TLS, 465 by
 *   convention), beside or instead of SUBMISSION_PORT's STARTTLS (587).
 * - A client address holds at most SMTP_MAX_CONNECTIONS_PER_IP connections at once, as at the MX (421).
 * - AUTH PLAIN or LOGIN before MAIL FROM (530 5.7.0 without). With SMTP_TLS_CERT and SMTP_TLS_KEY,
 *   STARTTLS is offered and AUTH needs it (538); without them AUTH is taken in the clear only on a
 *   loopback host, and refused elsewhere (538: a key must not cross a network unencrypted). Three
 *   failed AUTHs end the session (421).
 * - At most MAX_RECIPIENTS recipients a message (452 4.5.3 for one more); a recipient the API would
 *   refuse as no email address (no domain, one label, an address literal) is refused alone (553 5.1.3), one
 *   with a non-ASCII mailbox name (jürgen@…, which Mailroom does not send to) with 553 5.6.7. SIZE announces the largest
 *   plan's message; the sender's plan holds it at the end of DATA (552 5.3.4).
 * - DATA is answered 250 (`2.0.0 Ok: queued as <email id>`) only once the message is stored as sent
 *   mail and queued for the mta; 451 4.3.0 when that fails or takes longer than the data time-out.
 * - On shutdown the server drains as the MX does: a DATA in progress is finished and answered.
 */
import { Cause, Effect, Exit, Layer, Option, Runtime } from "effect"
import { SMTPServer, type SMTPServerAuthentication, type SMTPServerDataStream, type SMTPServerSession } from "smtp-server"
import { hasInternationalMailboxName, INTERNATIONAL_MAILBOX, isAddress, MAX_RECIPIENTS, withAsciiDomain } from "../../services/outbound/schemas.ts"
import { TooManyConnections } from "../../services/mail/refusals.ts"
import { Submission, type SubmissionRefused, temporaryFailure } from "../../services/outbound/submission.ts"
import { isLoopbackHost } from "../../services/dns/addresses.ts"
import { AppConfig } from "../config.ts"
import { connectionCounter } from "./connections.ts"
import { listenUntilDrained, readingProxyHeaders, SHUTTING_DOWN, tlsFiles } from "./listen.ts"
import { SubmissionMetrics, type SubmissionPhase } from "./metrics.ts"
import { maxMessageBytes } from "./server.ts"

/** How long storing and queueing a submitted message may take before the client is told to retry. */
const DATA_TIMEOUT_MS = 30_000
const SOCKET_TIMEOUT_MS = 60_000
const CLOSE_TIMEOUT_MS = 10_000
/** Connections beyond this are told 421 to come back later, as the MX does. */
const MAX_CLIENTS = 2_000
/** Failed AUTHs a session may make before it is closed. */
const MAX_FAILED_AUTH = 3

/** The error smtp-server answers with (`code text`), counted by the command answered and its code. */
const replyError = (phase: SubmissionPhase, code: number, text: string) => {
  SubmissionMetrics.reply(phase, code)
  return Object.assign(new Error(text), { responseCode: code })
}
const smtpError = (phase: SubmissionPhase, refusal: SubmissionRefused) => replyError(phase, refusal.reply.code, refusal.reply.text)

/** What a session established: the key given at AUTH (asked again at MAIL FROM and at the end of DATA), and the mailbox its MAIL FROM named. */
interface SessionState {
  readonly apiKey: string
  mailboxId?: string | undefined
}

/**
 * The submission server on `port`: SUBMISSION_PORT, where TLS is STARTTLS's (when configured), or
 * SUBMISSIONS_PORT, TLS from the first byte (`implicit`, RFC 8314; config.ts requires the files).
 */
export const SubmissionServerLive = (port: number, tlsMode: "starttls" | "tls") => Layer.scopedDiscard(
  Effect.gen(function*() {
    const config = yield* AppConfig
    const host = Option.getOrElse(config.submissionHost, () => config.smtpHost)
    const submission = yield* Submission
    const runtime = yield* Effect.runtime<never>()
    const run = <A, E>(effect: Effect.Effect<A, E>) => Runtime.runPromise(runtime)(Effect.exit(effect))

    const tls = yield* tlsFiles(config)
    const implicit = tlsMode === "tls" && tls !== undefined
    // STARTTLS's port: AUTH is offered once the session is encrypted (RFC 4954 §4), so that a client never
    // sees it before and sends its key in the clear (AUTH PLAIN carries it on the command's own line).
    const authAfterStartTls = tls !== undefined && !implicit
    const clearAuth = tls === undefined && isLoopbackHost(host)
    if (tls === undefined && !clearAuth) {
      yield* Effect.logWarning(
        `Submission on ${host}:${port} has no TLS (SMTP_TLS_CERT, SMTP_TLS_KEY): it refuses every AUTH, since an API key must not cross a network in the clear`
      )
    }

    const sessions = new WeakMap<SMTPServerSession, SessionState>()
    const failedAuth = new WeakMap<SMTPServerSession, number>()
    const connections = connectionCounter(config.smtpMaxConnectionsPerIp)
    let draining = false
    let dataInFlight = 0

    /** A failed hook's refusal, or a temporary failure for anything unforeseen. */
    const refusalIn = (cause: Cause.Cause<SubmissionRefused>) => Option.getOrElse(Cause.failureOption(cause), () => temporaryFailure)

    const onAuth = (
      auth: SMTPServerAuthentication,
      session: SMTPServerSession,
      callback: (error: Error | null | undefined, response?: { user?: unknown }) => void
    ) => {
      if (tls === undefined && !clearAuth) {
        return callback(replyError("auth", 538, "5.7.11 Encryption required: this server takes API keys over TLS only"))
      }
      if (auth.method !== "PLAIN" && auth.method !== "LOGIN") {
        return callback(replyError("auth", 504, "5.7.4 Use AUTH PLAIN or LOGIN"))
      }
      const apiKey = auth.password ?? ""
      void run(submission.signIn(apiKey)).then(Exit.match({
        onSuccess: (principal) => {
          sessions.set(session, { apiKey })
          SubmissionMetrics.reply("auth", 235)
          callback(null, { user: principal.userId })
        },
        onFailure: (cause) => {
          const refusal = refusalIn(cause)
          const failed = (failedAuth.get(session) ?? 0) + 1
          failedAuth.set(session, failed)
          callback(
            failed >= MAX_FAILED_AUTH && refusal.reply.code === 535
              ? replyError("auth", 421, "4.7.0 Too many failed authentications")
              : smtpError("auth", refusal)
          )
        }
      }))
    }

    const onMailFrom = (address: { readonly address: string }, session: SMTPServerSession, callback: (error?: Error | null) => void) => {
      const state = sessions.get(session)
      if (state === undefined) {
        return callback(replyError("mail", 530, `5.7.0 Authentication required${authAfterStartTls && !session.secure ? ": STARTTLS, then AUTH" : ""}`))
      }
      state.mailboxId = undefined
      void run(submission.sender(state.apiKey, address.address)).then(Exit.match({
        onSuccess: ({ mailboxId }) => {
          state.mailboxId = mailboxId
          SubmissionMetrics.reply("mail", 250)
          callback()
        },
        onFailure: (cause) => callback(smtpError("mail", refusalIn(cause)))
      }))
    }

    const onRcptTo = (address: { readonly address: string }, session: SMTPServerSession, callback: (error?: Error | null) => void) => {
      const repeated = session.envelope.rcptTo.some((r) => r.address.toLowerCase() === address.address.toLowerCase())
      if (!repeated && session.envelope.rcptTo.length >= MAX_RECIPIENTS) {
        return callback(replyError("rcpt", 452, `4.5.3 Too many recipients: at most ${MAX_RECIPIENTS} a message`))
      }
      // An internationalized mailbox name: the API refuses it too, and says why (RFC 6531 §3.7.4.1's code).
      if (hasInternationalMailboxName(address.address)) {
        return callback(replyError("rcpt", 553, `5.6.7 <${address.address}> ${INTERNATIONAL_MAILBOX}`))
      }
      // One the API would refuse (no domain, a single label, an address literal): refused alone, so the rest still go.
      if (!isAddress(withAsciiDomain(address.address))) {
        return callback(replyError("rcpt", 553, `5.1.3 <${address.address}> is not an email address such as name@example.com`))
      }
      callback()
    }

    const onData = (stream: SMTPServerDataStream, session: SMTPServerSession, callback: (error?: Error | null, message?: string) => void) => {
      const state = sessions.get(session)
      const chunks: Array<Buffer> = []
      let bytes = 0
      let answered = false
      dataInFlight++
      const answer = (error: Error | null, message?: string) => {
        if (answered) return
        answered = true
        dataInFlight--
        callback(error, message)
      }
      stream.on("data", (chunk: Buffer) => {
        bytes += chunk.length
        // Past the largest plan's message the rest is read and dropped, so the reply can still be given.
        if (bytes <= maxMessageBytes) chunks.push(chunk)
      })
      stream.once("error", (error: Error) => answer(error))
      stream.once("end", () => {
        if (stream.sizeExceeded || bytes > maxMessageBytes) {
          return answer(replyError("data", 552, `5.3.4 Message too big: at most ${maxMessageBytes} bytes`))
        }
        if (state === undefined || state.mailboxId === undefined) return answer(smtpError("data", temporaryFailure))
        const recipients = session.envelope.rcptTo.map((r) => r.address)
        const sending = Runtime.runFork(runtime)(
          submission.send(state.apiKey, state.mailboxId, { raw: Buffer.concat(chunks, bytes), recipients }).pipe(
            Effect.withSpan("smtp.submission", { kind: "server", captureStackTrace: false, attributes: { "mailroom.recipients": recipients.length } })
          )
        )
        const deadline = setTimeout(() => {
          answer(smtpError("data", temporaryFailure))
          sending.unsafeInterruptAsFork(sending.id())
        }, DATA_TIMEOUT_MS)
        sending.addObserver((exit) => {
          clearTimeout(deadline)
          if (Exit.isSuccess(exit)) {
            SubmissionMetrics.reply("data", 250)
            return answer(null, `2.0.0 Ok: queued as ${exit.value}`)
          }
          if (Cause.isInterruptedOnly(exit.cause)) return
          if (Option.isNone(Cause.failureOption(exit.cause))) void run(Effect.logError("A submitted message failed", exit.cause))
          answer(smtpError("data", refusalIn(exit.cause)))
        })
      })
    }

    const server = readingProxyHeaders(new SMTPServer({
      name: config.mxHost,
      banner: "Mailroom submission",
      size: maxMessageBytes,
      authMethods: ["PLAIN", "LOGIN"],
      allowInsecureAuth: clearAuth,
      secure: implicit,
      disabledCommands: tls && !implicit ? [] : ["STARTTLS"],
      hideSTARTTLS: !tls || implicit,
      ...(tls ?? {}),
      logger: false,
      disableReverseLookup: true,
      socketTimeout: SOCKET_TIMEOUT_MS,
      closeTimeout: CLOSE_TIMEOUT_MS,
      authRequiredMessage: "5.7.0 Authentication required: AUTH with an API key as the password",
      onConnect: (session, callback) => {
        if (draining) return callback(replyError("connect", 421, SHUTTING_DOWN))
        if (!connections.admit(session)) return callback(replyError("connect", 421, new TooManyConnections({ limit: config.smtpMaxConnectionsPerIp }).reply.text))
        // Neither offered nor taken until the session is encrypted (onSecure).
        if (authAfterStartTls) session.disabledCommands = ["AUTH"]
        callback()
      },
      onSecure: (_socket, session, callback) => {
        session.disabledCommands = undefined
        callback()
      },
      onClose: connections.closed,
      maxClients: MAX_CLIENTS,
      // Connections from these peers begin with a PROXY header, whose client address the session takes.
      ...(config.proxyProtocol.length > 0 ? { useProxy: [...config.proxyProtocol] } : {}),
      onAuth,
      onMailFrom,
      onRcptTo,
      onData
    }), config.proxyProtocol)
    server.on("error", (error) => void run(Effect.logDebug("Submission session error", error)))

    yield* listenUntilDrained(server, {
      name: "Submission",
      host,
      port,
      hostVariable: Option.isSome(config.submissionHost) ? "SUBMISSION_HOST" : "SMTP_HOST",
      portVariable: tlsMode === "tls" ? "SUBMISSIONS_PORT" : "SUBMISSION_PORT",
      beginDraining: () => {
        draining = true
      },
      dataInFlight: () => dataInFlight,
      dataTimeoutMs: DATA_TIMEOUT_MS
    })
    yield* Effect.logInfo(`Submission listening on ${host}:${port}${implicit ? " (TLS)" : tls ? " (STARTTLS)" : ""}`)
  })
)
