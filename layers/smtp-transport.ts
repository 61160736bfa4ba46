/**
 * The SMTP client port over nodemailer's SMTPConnection: connect (TLS or opportunistic STARTTLS),
 * EHLO with our name, AUTH when the target has credentials, MAIL FROM, one RCPT per recipient, DATA.
 * One connection per call, closed afterwards.
 */
import { Duration, Effect, Layer } from "effect"
import SMTPConnection from "nodemailer/lib/smtp-connection"
import { OutboundSettings } from "../services/outbound/settings.ts"
import { type RecipientOutcome, SmtpFailure, SmtpTransport, type SmtpTarget } from "../services/outbound/transport.ts"

export interface Timeouts {
  readonly connect: Duration.Duration
  readonly command: Duration.Duration
}

interface NodemailerError extends Error {
  readonly code?: string | undefined
  readonly response?: string | undefined
  readonly responseCode?: number | undefined
  readonly recipient?: string | undefined
  readonly rejectedErrors?: ReadonlyArray<NodemailerError> | undefined
}

/** Failures before the server answered anything: another MX host may be reachable. */
const UNREACHABLE = new Set(["ECONNECTION", "ETIMEDOUT", "ESOCKET", "EDNS", "ECONNREFUSED", "ECONNRESET", "EHOSTUNREACH"])

const failure = (error: NodemailerError) =>
  new SmtpFailure({
    code: error.responseCode,
    response: (error.response ?? error.message).trim(),
    unreachable: error.responseCode === undefined && UNREACHABLE.has(error.code ?? "")
  })

const send = (timeouts: Timeouts) => (target: SmtpTarget, message: Parameters<SmtpTransport["Type"]["send"]>[1]) =>
  Effect.async<ReadonlyArray<RecipientOutcome>, SmtpFailure>((resume) => {
    const connection = new SMTPConnection({
      host: target.host,
      port: target.port,
      secure: target.secure,
      ...(target.serverName === undefined ? {} : { servername: target.serverName }),
      name: message.heloName,
      opportunisticTLS: !target.secure,
      tls: { rejectUnauthorized: target.verifyTls },
      connectionTimeout: Duration.toMillis(timeouts.connect),
      greetingTimeout: Duration.toMillis(timeouts.command),
      socketTimeout: Duration.toMillis(timeouts.command),
      logger: false
    })
    let settled = false
    const finish = (result: { ok: ReadonlyArray<RecipientOutcome> } | { error: SmtpFailure }) => {
      if (settled) return
      settled = true
      if ("ok" in result) connection.quit()
      else connection.close()
      resume("ok" in result ? Effect.succeed(result.ok) : Effect.fail(result.error))
    }
    connection.once("error", (error: NodemailerError) => finish({ error: failure(error) }))
    connection.connect(() => {
      const deliver = () =>
        connection.send({ from: message.from, to: [...message.to] }, Buffer.from(message.raw), (error, info) => {
          const rejected: ReadonlyArray<NodemailerError> = (error as NodemailerError | null)?.rejectedErrors ?? info?.rejectedErrors ?? []
          const refusals: Array<RecipientOutcome> = rejected.map((e: NodemailerError) => ({
            recipient: e.recipient ?? "",
            code: e.responseCode ?? 451,
            response: (e.response ?? e.message).trim()
          }))
          if (error) {
            // Every recipient refused at RCPT: their own answers say it all.
            if (refusals.length === message.to.length) return finish({ ok: refusals })
            return finish({ error: failure(error as NodemailerError) })
          }
          const response = info.response.trim()
          const code = Number(/^\d{3}/.exec(response)?.[0] ?? 250)
          finish({ ok: [...info.accepted.map((recipient) => ({ recipient, code, response })), ...refusals] })
        })
      if (target.auth === undefined) return deliver()
      connection.login({ user: target.auth.user, pass: target.auth.pass }, (error) => {
        if (error) {
          const refused = failure(error as NodemailerError)
          return finish({ error: new SmtpFailure({ ...refused, loginRefused: true }) })
        }
        deliver()
      })
    })
    return Effect.sync(() => {
      settled = true
      connection.close()
    })
  })

/** Connections time out as the operator's outbound settings say. */
export const layer = Layer.effect(SmtpTransport, Effect.map(OutboundSettings, (settings) => ({ send: send(settings.timeouts) })))
