/**
 * The SMTP client port over nodemailer's SMTPConnection: connect (TLS or opportunistic STARTTLS),
 * EHLO with our name, AUTH when the target has credentials (over TLS only, unless the host is loopback),
 * MAIL FROM, one RCPT per recipient, DATA.
 *
 * Connections are cached, as Postfix's smtp client caches them: after a transaction the connection
 * is reset (RSET) and kept for the next transaction to the same host, port, credentials and HELO name,
 * for up to `IDLE_MS` and `MAX_USES` messages. Opening a connection costs a TCP (and TLS) handshake,
 * the greeting (smtp-server alone waits 100 ms before it) and EHLO: most of a small message's time.
 * A cached connection the server has dropped meanwhile is replaced by a new one for that message.
 */
import { Duration, Effect, Layer } from "effect"
import SMTPConnection from "nodemailer/lib/smtp-connection"
import { isLoopbackHost } from "../services/dns/addresses.ts"
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
  /** The command the server answered with this error ("MAIL FROM", "DATA", ...). */
  readonly command?: string | undefined
}

/** Failures before the server answered anything: another MX host may be reachable. */
const UNREACHABLE = new Set(["ECONNECTION", "ETIMEDOUT", "ESOCKET", "EDNS", "ECONNREFUSED", "ECONNRESET", "EHOSTUNREACH"])

const failure = (error: NodemailerError) =>
  new SmtpFailure({
    code: error.responseCode,
    response: (error.response ?? error.message).trim(),
    unreachable: error.responseCode === undefined && UNREACHABLE.has(error.code ?? ""),
    command: error.command
  })

/**
 * Nagle's algorithm off on a connection's socket. nodemailer writes a message's end ("\r\n.\r\n")
 * apart from its body; with Nagle on, that small last write waits until the server acknowledges the
 * body, and a server that answers only at the end delays that acknowledgement (delayed ACK, 40 ms on
 * Linux): every message took 40 ms more. Measured with 10 connections against a local sink (smtp-server
 * or Postfix's smtp-sink alike): ~214 msgs/s with Nagle on, 1,000-2,400 with it off. nodemailer has
 * no setting for it, so the socket is reached through the connection's own field.
 */
const withoutDelay = (connection: SMTPConnection) =>
  (connection as unknown as { readonly _socket?: { readonly setNoDelay?: (noDelay: boolean) => unknown } })._socket?.setNoDelay?.(true)

/** What each message's bytes were found to ask (below), kept while the message is. */
const eightBitOf = new WeakMap<Uint8Array, { readonly eightBitMime: boolean; readonly smtpUtf8: boolean }>()

/**
 * What a message's bytes ask of MAIL FROM: `BODY=8BITMIME` for any byte above 127 (RFC 6152), and
 * `SMTPUTF8` for one in its header (UTF-8 headers, RFC 6531/6532: a mail program's message sent on
 * through submission as written). nodemailer adds SMTPUTF8 only for a non-ASCII address.
 */
const eightBit = (raw: Uint8Array) => {
  // Each recipient's transaction hands over the same bytes: a large message is read once, not once a recipient.
  const known = eightBitOf.get(raw)
  if (known !== undefined) return known
  // The header ends at the first empty line (LF LF or LF CR LF).
  let headerEnd = raw.length
  for (let i = 0; i < raw.length - 1; i++) {
    if (raw[i] === 10 && (raw[i + 1] === 10 || (raw[i + 1] === 13 && raw[i + 2] === 10))) {
      headerEnd = i
      break
    }
  }
  const above127 = (from: number, to: number) => {
    for (let i = from; i < to; i++) if (raw[i]! > 127) return true
    return false
  }
  const smtpUtf8 = above127(0, headerEnd)
  const found = { eightBitMime: smtpUtf8 || above127(headerEnd, raw.length), smtpUtf8 }
  eightBitOf.set(raw, found)
  return found
}

/**
 * The extensions the server offered in its EHLO answer ("8BITMIME", "SMTPUTF8", ...; none after HELO).
 * nodemailer keeps them in a field of its own with no accessor: this is the one place that reads it.
 */
const offeredBy = (connection: SMTPConnection): ReadonlyArray<string> =>
  (connection as unknown as { readonly _supportedExtensions?: ReadonlyArray<string> })._supportedExtensions ?? []

/**
 * MAIL FROM with SMTPUTF8 when the server offers it, for a message whose header is UTF-8. nodemailer
 * decides SMTPUTF8 by the envelope's addresses alone and has no setting for it, so its command is
 * amended on the way out, for this transaction only.
 */
const withSmtpUtf8 = (connection: SMTPConnection) => {
  const reached = connection as unknown as {
    _sendCommand: (command: string, ...rest: Array<unknown>) => unknown
  }
  const original = reached._sendCommand
  if (typeof original !== "function" || !offeredBy(connection).includes("SMTPUTF8")) return () => {}
  reached._sendCommand = function(command: string, ...rest: Array<unknown>) {
    const amended = /^MAIL FROM:/i.test(command) && !/ SMTPUTF8\b/i.test(command) ? `${command} SMTPUTF8` : command
    return original.call(this, amended, ...rest)
  }
  return () => {
    reached._sendCommand = original
  }
}

/**
 * Why a message cannot go to this server as it is, as the permanent answer its recipients get: a
 * message needing SMTPUTF8 (a UTF-8 header, a non-ASCII address: what submission could not make 7-bit,
 * services/outbound/seven-bit.ts) to a server that does not offer it (RFC 6531 §3.2), 8-bit content
 * to one that offers no 8BITMIME (RFC 6152 §3). Sent anyway, such mail reaches its readers garbled
 * or is lost in a server that could not handle it. A message that comes with a 7-bit form the server
 * takes (a forwarded copy, services/outbound/forwards.ts) goes in that form instead.
 */
const beyondServer = (connection: SMTPConnection, message: Message, bits: { readonly eightBitMime: boolean; readonly smtpUtf8: boolean }) => {
  const offered = offeredBy(connection)
  const international = bits.smtpUtf8 || [message.from, ...message.to].some((address) => /[^\x00-\x7f]/.test(address))
  if (international && !offered.includes("SMTPUTF8")) {
    return {
      code: 553,
      response:
        "553 5.6.7 The receiving server does not take internationalized addresses (it offers no SMTPUTF8): this message's UTF-8 address or header cannot be sent to it"
    }
  }
  if (bits.eightBitMime && !offered.includes("8BITMIME")) {
    return {
      code: 554,
      response: "554 5.6.3 The receiving server does not take 8-bit mail (it offers no 8BITMIME), and this message's 8-bit content was not converted"
    }
  }
  return undefined
}

/** How long an idle connection is kept (Postfix: smtp_connection_cache_time_limit, 2 s). */
const IDLE_MS = 2_000
/** Messages one connection carries before it is closed and replaced. */
const MAX_USES = 100
/** Idle connections kept per destination. */
const MAX_IDLE = 8
/** The longest a transaction's answer waits for its connection's RSET. */
const RESET_WAIT_MS = 1_000

/** Per recipient (`broken`: the connection is not to carry another message), or the transaction's failure. */
type Outcome =
  | { readonly ok: ReadonlyArray<RecipientOutcome>; readonly broken?: boolean }
  | { readonly error: SmtpFailure; readonly broken: boolean }

/** One connection: open or being used by one transaction, or idle in the cache. */
interface Pooled {
  readonly connection: SMTPConnection
  uses: number
  /** The transaction using it; an error or close while idle just drops it. */
  current: ((outcome: Outcome) => void) | undefined
  idleTimer: ReturnType<typeof setTimeout> | undefined
  closed: boolean
}

type Message = Parameters<SmtpTransport["Type"]["send"]>[1]

const destination = (target: SmtpTarget, heloName: string) =>
  JSON.stringify([target.host, target.port, target.secure, target.serverName ?? "", target.auth?.user ?? "", target.auth?.pass ?? "", heloName])

const makeTransport = (timeouts: Timeouts) => {
  const idle = new Map<string, Array<Pooled>>()

  const discard = (key: string, pooled: Pooled) => {
    clearTimeout(pooled.idleTimer)
    const list = idle.get(key)
    const at = list?.indexOf(pooled) ?? -1
    if (at >= 0) list!.splice(at, 1)
    if (list?.length === 0) idle.delete(key)
    if (!pooled.closed) {
      pooled.closed = true
      pooled.connection.close()
    }
  }

  const park = (key: string, pooled: Pooled) => {
    const list = idle.get(key) ?? []
    if (pooled.closed || pooled.uses >= MAX_USES || list.length >= MAX_IDLE) {
      pooled.closed = true
      return pooled.connection.quit()
    }
    pooled.idleTimer = setTimeout(() => {
      discard(key, pooled)
    }, IDLE_MS)
    // An idle connection must not keep the process alive.
    pooled.idleTimer.unref()
    list.push(pooled)
    idle.set(key, list)
  }

  const takeIdle = (key: string): Pooled | undefined => {
    const list = idle.get(key)
    const pooled = list?.pop()
    if (list?.length === 0) idle.delete(key)
    if (pooled) clearTimeout(pooled.idleTimer)
    return pooled
  }

  /** A new connection, greeted (and logged in): `ready` gets it, or the failure. */
  const open = (target: SmtpTarget, heloName: string, ready: (result: Pooled | Outcome) => void) => {
    const connection = new SMTPConnection({
      host: target.host,
      port: target.port,
      secure: target.secure,
      ...(target.serverName === undefined ? {} : { servername: target.serverName }),
      name: heloName,
      opportunisticTLS: !target.secure,
      tls: { rejectUnauthorized: target.verifyTls },
      connectionTimeout: Duration.toMillis(timeouts.connect),
      greetingTimeout: Duration.toMillis(timeouts.command),
      socketTimeout: Duration.toMillis(timeouts.command),
      logger: false
    })
    const pooled: Pooled = { connection, uses: 0, current: ready as (outcome: Outcome) => void, idleTimer: undefined, closed: false }
    const key = destination(target, heloName)
    connection.on("error", (error: NodemailerError) => {
      const current = pooled.current
      pooled.current = undefined
      discard(key, pooled)
      current?.({ error: failure(error), broken: true })
    })
    connection.on("end", () => {
      pooled.closed = true
      discard(key, pooled)
    })
    connection.connect((error?: Error) => {
      // A server that hangs up before its greeting is told here rather than as an 'error'.
      if (error) return finishWith(pooled, { error: failure(error as NodemailerError), broken: true })
      withoutDelay(connection)
      if (target.auth === undefined) return handOver()
      // A password crosses a network encrypted only: over smtps, or after STARTTLS (opportunistic above,
      // so a server that offers none leaves the session in the clear). On a loopback host it stays on
      // this machine, as submission's own AUTH in the clear does (src/smtp/submission.ts).
      if (!target.secure && !connection.secure && !isLoopbackHost(target.host)) {
        return finishWith(pooled, {
          error: new SmtpFailure({
            code: undefined,
            response: `${target.serverName ?? target.host} does not offer STARTTLS, and the password is not sent in the clear`,
            unreachable: false,
            encryptionMissing: true
          }),
          broken: true
        })
      }
      connection.login({ user: target.auth.user, pass: target.auth.pass }, (error) => {
        if (!error) return handOver()
        const refused = failure(error as NodemailerError)
        finishWith(pooled, { error: new SmtpFailure({ ...refused, loginRefused: true }), broken: true })
      })
    })
    const handOver = () => {
      pooled.current = undefined
      ready(pooled)
    }
    return pooled
  }

  const finishWith = (pooled: Pooled, outcome: Outcome) => {
    const current = pooled.current
    pooled.current = undefined
    current?.(outcome)
  }

  /** One transaction on `pooled`; the outcome says whether the connection can carry another. */
  const transact = (pooled: Pooled, message: Message, done: (outcome: Outcome) => void) => {
    pooled.current = done
    const asIs = eightBit(message.raw)
    // A message the server cannot be given as it is goes in its 7-bit form, when it has one the server takes.
    const sevenBit = message.sevenBit
    const converted = sevenBit !== undefined && beyondServer(pooled.connection, message, asIs) !== undefined &&
      beyondServer(pooled.connection, message, eightBit(sevenBit)) === undefined
    const raw = converted ? sevenBit : message.raw
    const bits = converted ? eightBit(sevenBit) : asIs
    // What the server cannot be given is not sent to it: nothing goes over the connection, which stays sound.
    const unsendable = beyondServer(pooled.connection, message, bits)
    if (unsendable !== undefined) {
      return finishWith(pooled, { ok: message.to.map((recipient) => ({ recipient, ...unsendable, stage: "data" as const })) })
    }
    pooled.uses++
    // MAIL FROM is written within send(), before it returns: the amendment is undone right after.
    const restore = bits.smtpUtf8 ? withSmtpUtf8(pooled.connection) : () => {}
    const envelope = { from: message.from, to: [...message.to], use8BitMime: bits.eightBitMime }
    pooled.connection.send(envelope, Buffer.from(raw), (error, info) => {
      // A message refused at DATA comes back without the RCPT refusals before it: the connection's
      // envelope of this transaction (untyped) still holds them.
      const envelope = (pooled.connection as unknown as { readonly _envelope?: { readonly rejectedErrors?: ReadonlyArray<NodemailerError> } })._envelope
      const rejected: ReadonlyArray<NodemailerError> = (error as NodemailerError | null)?.rejectedErrors ?? info?.rejectedErrors ??
        (error ? envelope?.rejectedErrors : undefined) ?? []
      const refusals: Array<RecipientOutcome> = rejected.map((e: NodemailerError) => ({
        recipient: e.recipient ?? "",
        code: e.responseCode ?? 451,
        response: (e.response ?? e.message).trim(),
        stage: "rcpt" as const
      }))
      if (error) {
        // Every recipient refused at RCPT: their own answers say it all, and the session is sound.
        if (refusals.length === message.to.length) return finishWith(pooled, { ok: refusals })
        const failed = failure(error as NodemailerError)
        // Some refused at RCPT, the others' message then failed: each keeps its own answer (a refusal
        // at RCPT is not to be overwritten by what DATA said of the message).
        if (refusals.length > 0 && failed.code !== undefined) {
          const refused = new Set(refusals.map((r) => r.recipient.toLowerCase()))
          const others = message.to.filter((recipient) => !refused.has(recipient.toLowerCase()))
          return finishWith(pooled, {
            ok: [...refusals, ...others.map((recipient) => ({ recipient, code: failed.code!, response: failed.response, stage: "data" as const }))],
            broken: true
          })
        }
        return finishWith(pooled, { error: failed, broken: true })
      }
      const response = info.response.trim()
      const code = Number(/^\d{3}/.exec(response)?.[0] ?? 250)
      finishWith(pooled, { ok: [...info.accepted.map((recipient) => ({ recipient, code, response, stage: "data" as const })), ...refusals] })
    })
    restore()
  }

  const send = (target: SmtpTarget, message: Message) =>
    Effect.async<ReadonlyArray<RecipientOutcome>, SmtpFailure>((resume) => {
      const key = destination(target, message.heloName)
      let inUse: Pooled | undefined
      let settled = false
      const settle = (outcome: Outcome) => {
        if (settled) return
        settled = true
        const pooled = inUse
        inUse = undefined
        if ("ok" in outcome && outcome.broken !== true && pooled && !pooled.closed) {
          // Sound: reset for the next message and cached, before answering, so that the next
          // transaction to the host (the next recipient of the message, each its own) finds it idle
          // rather than opening another. A server slow to answer RSET delays the answer RESET_WAIT_MS at most.
          const ok = outcome.ok
          let answered = false
          const answer = () => {
            if (answered) return
            answered = true
            clearTimeout(timer)
            resume(Effect.succeed(ok))
          }
          const timer = setTimeout(answer, RESET_WAIT_MS)
          pooled.connection.reset((error) => {
            if (error) discard(key, pooled)
            else park(key, pooled)
            answer()
          })
          return
        }
        if (pooled) discard(key, pooled)
        resume("ok" in outcome ? Effect.succeed(outcome.ok) : Effect.fail(outcome.error))
      }
      const fresh = () => {
        inUse = open(target, message.heloName, (result) => {
          if ("connection" in result) transact(result, message, settle)
          else settle(result)
        })
      }
      const cached = takeIdle(key)
      if (cached === undefined) {
        fresh()
      } else {
        inUse = cached
        transact(cached, message, (outcome) => {
          // The server dropped the cached connection before answering this message: a new one gets it.
          if ("error" in outcome && (outcome.error.unreachable || outcome.error.code === 421)) {
            discard(key, cached)
            return fresh()
          }
          settle(outcome)
        })
      }
      return Effect.sync(() => {
        settled = true
        if (inUse) discard(key, inUse)
      })
    })

  const closeAll = Effect.sync(() => {
    for (const [key, list] of [...idle]) for (const pooled of [...list]) discard(key, pooled)
  })

  return { send, closeAll }
}

/** Connections time out as the operator's outbound settings say; cached ones close with the layer. */
export const layer = Layer.scoped(
  SmtpTransport,
  Effect.gen(function*() {
    const settings = yield* OutboundSettings
    const transport = makeTransport(settings.timeouts)
    yield* Effect.addFinalizer(() => transport.closeAll)
    return { send: transport.send }
  })
)
