/**
 * The IMAP server (RFC 3501): a mail program (Thunderbird, Apple Mail, Outlook, an IMAP library) reads
 * a mailbox with its address as the user name and an API key as the password. Its conversation is
 * session.ts's; this file is the connection around it.
 *
 * - IMAP_PORT offers STARTTLS when SMTP_TLS_CERT and SMTP_TLS_KEY are set (the mail certificate), and
 *   then takes no password before it (LOGINDISABLED); IMAPS_PORT takes TLS from the first byte (993 by
 *   convention; a config error without the files). Without TLS a password is taken on a loopback
 *   listener only, so an API key never crosses a network in the clear.
 * - A client address holds at most IMAP_MAX_CONNECTIONS_PER_IP connections (mail programs open a few
 *   each), and the server MAX_CLIENTS; past either the client is told BYE at once.
 * - A connection idle past 30 minutes (RFC 3501's autologout floor) is told BYE. IDLE wakes when the
 *   account's events are logged (new mail, labels changed, mail deleted), when another session keeps
 *   flags, and every IDLE_POLL anyway.
 * - A command is at most MAX_COMMAND_BYTES (literals included), an APPEND the largest plan's message:
 *   past it, BAD, and its bytes are skipped.
 * - On shutdown every connection is told BYE and closed; nothing is lost (the server keeps no state of
 *   its own beyond the session's view).
 */
import { Duration, Effect, Either, Layer, Option, PubSub, Queue, Runtime } from "effect"
import net from "node:net"
import tls from "node:tls"
import { Bus, subjects } from "../../services/bus/bus.ts"
import { ImapStore } from "../../services/imap/store.ts"
import { isLoopbackHost } from "../../services/dns/addresses.ts"
import { AppConfig } from "../config.ts"
import { tlsFiles } from "../smtp/listen.ts"
import { maxMessageBytes } from "../smtp/server.ts"
import { ImapMetrics } from "./metrics.ts"
import { answerText, CommandReader, type Framed, parseCommand, tagOf } from "./protocol.ts"
import { makeSession, type Next } from "./session.ts"
import { listenFailure } from "../listen-failure.ts"
import { expectsProxyHeader, PROXY_HEADER_TIMEOUT_MS, readProxyHeader } from "../proxy-protocol.ts"

const MAX_COMMAND_BYTES = 64 * 1024
/** An APPEND's message (a mail program's copy of what it sent): at most the largest plan's message, and a little. */
const MAX_APPEND_BYTES = maxMessageBytes + MAX_COMMAND_BYTES
const MAX_CLIENTS = 2_000
const AUTOLOGOUT_MS = 30 * 60 * 1000
/** How long a closing TLS session waits for its last answer to reach the client before the socket is cut. */
const CLOSE_GRACE_MS = 2_000
/** Without a signal, an idling client is told of changes at least this often. */
const IDLE_POLL = Duration.seconds(15)

/** What the connection hears: a framed line, its end, or (while IDLE) the session's end it was told of. */
type Incoming = Framed | { readonly kind: "closed" } | { readonly kind: "bye" }

const signalPrefix = subjects.eventsLogged("")
const flagsPrefix = subjects.imapFlagsKept("")

/** The IMAP server on `port`: STARTTLS's (when configured) or, with `tls`, TLS from the first byte. */
export const ImapServerLive = (port: number, mode: "starttls" | "tls") => Layer.scopedDiscard(
  Effect.gen(function*() {
    const config = yield* AppConfig
    const store = yield* ImapStore
    const bus = yield* Bus
    const host = Option.getOrElse(config.imapHost, () => config.smtpHost)
    const runtime = yield* Effect.runtime<never>()
    const scope = yield* Effect.scope
    const files = yield* tlsFiles(config)
    const context = files === undefined ? undefined : tls.createSecureContext(files)
    const implicit = mode === "tls" && context !== undefined
    const clearTextAllowed = context === undefined && isLoopbackHost(host)
    if (context === undefined && !clearTextAllowed) {
      yield* Effect.logWarning(
        `IMAP on ${host}:${port} has no TLS (SMTP_TLS_CERT, SMTP_TLS_KEY): it refuses every sign-in, since an API key must not cross a network in the clear`
      )
    }

    // Which accounts' events were just logged, or flags kept by a mail program: an idling session of theirs looks again.
    const heard = yield* Effect.acquireRelease(PubSub.sliding<string>(1024), PubSub.shutdown)
    yield* bus.listen(subjects.allEventsLogged, (message) => PubSub.publish(heard, message.subject.slice(signalPrefix.length)).pipe(Effect.asVoid))
    yield* bus.listen(subjects.allImapFlagsKept, (message) => PubSub.publish(heard, message.subject.slice(flagsPrefix.length)).pipe(Effect.asVoid))

    const byAddress = new Map<string, number>()
    const open = new Set<{ readonly bye: () => void }>()

    /** Wait until `raw` closes, for at most `ms`. */
    const closedWithin = (raw: net.Socket, ms: number) =>
      Effect.async<void>((resume) => {
        if (raw.destroyed) return resume(Effect.void)
        const timer = setTimeout(() => resume(Effect.void), ms)
        raw.once("close", () => {
          clearTimeout(timer)
          resume(Effect.void)
        })
      })

    const serve = (raw: net.Socket) =>
      Effect.gen(function*() {
        let socket: net.Socket = raw
        let secure = implicit
        const queue = yield* Queue.unbounded<Incoming>()
        let reader = new CommandReader(MAX_COMMAND_BYTES, MAX_APPEND_BYTES)
        const onData = (chunk: Buffer) => {
          for (const framed of reader.push(chunk)) Queue.unsafeOffer(queue, framed)
        }
        const listen = (target: net.Socket) => {
          target.on("data", onData)
          target.once("close", () => Queue.unsafeOffer(queue, { kind: "closed" }))
          target.on("error", () => target.destroy())
          target.setTimeout(AUTOLOGOUT_MS, () => {
            target.end("* BYE Autologout: idle too long\r\n")
          })
        }
        /** Written in order; a client reading slowly holds the session back (the socket's buffer drains first). */
        const send = (text: string) =>
          Effect.async<void>((resume) => {
            const target = socket
            if (target.destroyed || target.write(Buffer.from(text, "latin1"))) return resume(Effect.void)
            const done = () => {
              target.off("drain", done)
              target.off("close", done)
              resume(Effect.void)
            }
            target.on("drain", done)
            target.on("close", done)
          })
        const session = makeSession(store, {
          secure: () => secure,
          canStartTls: () => context !== undefined && !secure,
          clearTextAllowed
        }, send)
        const connection = {
          bye: () => {
            socket.end("* BYE Server shutting down\r\n")
            // A client that does not close its end is not waited for.
            setTimeout(() => socket.destroy(), 1000).unref()
          }
        }
        open.add(connection)
        listen(socket)
        yield* send(session.greeting())

        /**
         * While IDLE: the client told at once of what changed, then on each signal for its account and
         * each IDLE_POLL, until its next line (DONE).
         */
        const idle = Effect.gen(function*() {
          const signals = yield* PubSub.subscribe(heard)
          const userId = Option.getOrUndefined(session.userId())
          const signalled = Effect.gen(function*() {
            while ((yield* Queue.take(signals)) !== userId) {
              // another account's
            }
          }).pipe(
            Effect.timeout(IDLE_POLL),
            // No signal within IDLE_POLL: a wake-up all the same (a signal is best effort).
            Effect.ignore
          )
          if ((yield* session.idleTick) === "close") return { kind: "bye" } as const
          while (true) {
            // A take interrupted by the signal loses nothing: the line stays queued.
            const next = yield* Effect.raceFirst(
              Queue.take(queue).pipe(Effect.map(Option.some)),
              signalled.pipe(Effect.as(Option.none<Incoming>()))
            )
            if (Option.isSome(next)) return next.value
            if ((yield* session.idleTick) === "close") return { kind: "bye" } as const
          }
        }).pipe(Effect.scoped)

        /**
         * The session's end: over TLS its last answer (LOGOUT's OK, a BYE) is still being encrypted and
         * written, so the raw socket is destroyed (below) once the client has it and closes, or after a moment.
         */
        const closing = Effect.suspend(() => {
          socket.end()
          return secure ? closedWithin(raw, CLOSE_GRACE_MS) : Effect.void
        })

        let next: Next = "continue"
        while (true) {
          const item: Incoming = next === "idle" ? yield* idle : yield* Queue.take(queue)
          if (item.kind === "closed") break
          if (item.kind === "bye") {
            yield* closing
            break
          }
          if (item.kind === "continue") {
            yield* send("+ Ready for literal data\r\n")
            continue
          }
          if (item.kind === "tooLong") {
            // An APPEND's literal is a message: past the largest one taken it is too big (RFC 4469's TOOBIG), not a bad command.
            ImapMetrics.command(item.append ? "APPEND" : "TOO_LONG", item.append ? "NO" : "BAD")
            yield* send(
              item.append
                ? `${item.tag} NO [TOOBIG] The message is too big: at most ${maxMessageBytes} bytes\r\n`
                : `${item.tag} BAD Command too long: at most ${item.limit} bytes\r\n`
            )
            next = "continue"
            continue
          }
          if (next === "authenticate" || next === "idle") {
            next = yield* session.continuation(item.bytes)
          } else {
            const command = parseCommand(item.bytes)
            if (Either.isLeft(command)) {
              ImapMetrics.command("UNPARSED", "BAD")
              yield* send(`${tagOf(item.bytes)} BAD ${answerText(command.left.message)}\r\n`)
              continue
            }
            next = yield* session.handle(command.right)
          }
          if (next === "close") {
            yield* closing
            break
          }
          if (next === "startTls") {
            socket.removeListener("data", onData)
            // What came in the clear after STARTTLS is dropped, not run once TLS is up: a command a
            // man in the middle slipped in behind it would otherwise run in the secure session (the
            // STARTTLS injection of CVE-2011-0411). Submission and the MX drop it the same way.
            const early = yield* Queue.takeAll(queue)
            if ([...early].some((item) => item.kind === "closed")) break
            reader = new CommandReader(MAX_COMMAND_BYTES, MAX_APPEND_BYTES)
            const upgraded = new tls.TLSSocket(socket, { isServer: true, secureContext: context! })
            socket = upgraded
            secure = true
            listen(upgraded)
            next = "continue"
          }
        }
        open.delete(connection)
      }).pipe(
        Effect.ensuring(Effect.sync(() => raw.destroy())),
        Effect.catchAllCause((cause) => Effect.logWarning("IMAP connection ended with an error", cause))
      )

    /** Behind a balancer on IMAPS the PROXY header comes before TLS: the listener is plain, and TLS begins after it. */
    const proxied = config.proxyProtocol.length > 0
    const secured = (socket: net.Socket): net.Socket => {
      if (!(implicit && proxied)) return socket
      const upgraded = new tls.TLSSocket(socket, { isServer: true, secureContext: context! })
      upgraded.on("error", () => upgraded.destroy())
      return upgraded
    }

    const onConnection = (socket: net.Socket) => {
      ImapMetrics.connection()
      const peer = socket.remoteAddress ?? "unknown"
      if (!expectsProxyHeader(config.proxyProtocol, peer)) return admit(secured(socket), peer)
      socket.on("error", () => socket.destroy())
      readProxyHeader(socket, PROXY_HEADER_TIMEOUT_MS).then(
        (client) => admit(secured(socket), client ?? peer),
        () => socket.destroy()
      )
    }

    /** Serve `socket` for `address` (the client's), within the limits of connections. */
    const admit = (socket: net.Socket, address: string) => {
      const held = byAddress.get(address) ?? 0
      if ((config.imapMaxConnectionsPerIp > 0 && held >= config.imapMaxConnectionsPerIp) || open.size >= MAX_CLIENTS) {
        socket.end("* BYE Too many connections; try again later\r\n")
        return
      }
      byAddress.set(address, held + 1)
      socket.once("close", () => {
        const now = (byAddress.get(address) ?? 1) - 1
        if (now > 0) byAddress.set(address, now)
        else byAddress.delete(address)
      })
      Runtime.runFork(runtime)(Effect.forkIn(serve(socket), scope))
    }

    const server = implicit && !proxied && files !== undefined ? tls.createServer(files, onConnection) : net.createServer(onConnection)
    yield* Effect.acquireRelease(
      Effect.async<void, Error>((resume) => {
        const onError = (error: Error) => resume(Effect.fail(error))
        server.once("error", onError)
        server.listen(port, host, () => {
          server.off("error", onError)
          resume(Effect.void)
        })
      }).pipe(Effect.mapError((error) =>
        listenFailure({
          name: "IMAP",
          host,
          port,
          hostVariable: Option.isSome(config.imapHost) ? "IMAP_HOST" : "SMTP_HOST",
          portVariable: mode === "tls" ? "IMAPS_PORT" : "IMAP_PORT"
        }, error)
      )),
      () =>
        Effect.gen(function*() {
          for (const connection of open) connection.bye()
          yield* Effect.async<void>((resume) => {
            server.close(() => resume(Effect.void))
          })
          yield* Effect.logInfo("IMAP stopped")
        })
    )
    yield* Effect.logInfo(`IMAP listening on ${host}:${port}${implicit ? " (TLS)" : context ? " (STARTTLS)" : ""}`)
  })
)
