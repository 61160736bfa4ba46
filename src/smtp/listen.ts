/**
 * An SMTP listener's life (the MX's and submission's): listening on host:port while its layer lives,
 * and on shutdown draining without losing mail: `beginDraining` makes the listener answer new
 * connections 421, the DATA in flight are finished and answered (each bounded by the data time-out),
 * then every connection is closed, idle ones with 421.
 */
import { Effect, Option } from "effect"
import { readFileSync } from "node:fs"
import { randomBytes } from "node:crypto"
import type { SMTPServer } from "smtp-server"
import { expectsProxyHeader, PROXY_HEADER_TIMEOUT_MS, readProxyHeader } from "../proxy-protocol.ts"
import type { AppConfigShape } from "../config.ts"
import { listenFailure } from "../listen-failure.ts"

/** Once the DATA in flight are answered, how long idle sessions get to say QUIT before their 421. */
const IDLE_CLOSE_MS = 200

/** What a draining listener answers: a new connection, a session's next command, an idle session at the end. */
export const SHUTTING_DOWN = "4.3.2 Service shutting down, try again later"

export const listenUntilDrained = (
  server: SMTPServer,
  options: {
    /** How the logs name it: "SMTP", "Submission". */
    readonly name: string
    readonly host: string
    readonly port: number
    /** The variables that set host and port, named when it cannot listen there. */
    readonly hostVariable: string
    readonly portVariable: string
    readonly beginDraining: () => void
    readonly dataInFlight: () => number
    /** How long a DATA may take to answer: a client stalled mid-DATA is not waited for past it. */
    readonly dataTimeoutMs: number
  }
) => {
  const { host, name, port } = options
  const drain = Effect.gen(function*() {
    options.beginDraining()
    yield* Effect.logInfo(`${name} draining: ${server.connections.size} connection(s) open, ${options.dataInFlight()} message(s) in DATA`)
    const giveUp = Date.now() + options.dataTimeoutMs
    while (options.dataInFlight() > 0 && Date.now() < giveUp) yield* Effect.sleep(20)
    // The sessions still open are told in Mailroom's words (smtp-server's own 421 has no enhanced code).
    if (server.connections.size > 0) yield* Effect.sleep(IDLE_CLOSE_MS)
    for (const connection of server.connections) connection.send(421, SHUTTING_DOWN)
    server.options.closeTimeout = IDLE_CLOSE_MS
    yield* Effect.async<void>((resume) => {
      server.close(() => resume(Effect.void))
    })
    yield* Effect.logInfo(`${name} stopped`)
  })
  return Effect.acquireRelease(
    Effect.async<void, Error>((resume) => {
      const onError = (error: Error) => resume(Effect.fail(error))
      server.server.once("error", onError)
      server.listen(port, host, () => {
        server.server.off("error", onError)
        resume(Effect.void)
      })
    }),
    () => drain
  ).pipe(Effect.mapError((error) => listenFailure(options, error)))
}

/** The certificate and key STARTTLS offers (SMTP_TLS_CERT, SMTP_TLS_KEY), read once; none without them. */
export const tlsFiles = (config: Pick<AppConfigShape, "smtpTlsCert" | "smtpTlsKey">) => {
  const files = Option.all({ cert: config.smtpTlsCert, key: config.smtpTlsKey })
  return Option.isNone(files) ? Effect.succeed(undefined) : Effect.try({
    try: () => ({ cert: readFileSync(files.value.cert), key: readFileSync(files.value.key) }),
    catch: (error) => new Error(`SMTP_TLS_CERT / SMTP_TLS_KEY could not be read: ${String(error)}`)
  })
}

/**
 * The PROXY header on an SMTP listener (`PROXY_PROTOCOL`), read by src/proxy-protocol.ts as IMAP's is,
 * in place of smtp-server's own reader, which takes malformed headers (a missing port, a TCP4 line
 * naming an IPv6 address; an empty field even left the balancer's address as the client's), refuses a
 * `PROXY UNKNOWN` line that carries addresses, answers a bad header in IMAP's words, and waits for a
 * header as long as its bytes keep dripping in. smtp-server still decides which peers must send one
 * (`useProxy`, set from the same list) and guards their sockets until the session starts. A bad or
 * missing header closes the connection without a word.
 */
export const readingProxyHeaders = (server: SMTPServer, peers: ReadonlyArray<string>): SMTPServer => {
  if (peers.length === 0) return server
  const direct = server._handleProxy.bind(server)
  server._handleProxy = (socket, callback) => {
    if (!expectsProxyHeader(peers, socket.remoteAddress)) return direct(socket, callback)
    readProxyHeader(socket, PROXY_HEADER_TIMEOUT_MS).then(
      (client) => callback(null, { id: randomBytes(8).toString("hex"), ...(client === undefined ? {} : { remoteAddress: client }) }),
      (error: Error) => {
        socket.on("error", () => {})
        socket.destroy()
        callback(error)
      }
    )
  }
  return server
}
