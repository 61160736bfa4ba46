/**
 * Baseline for `bench:smtp`: bare smtp-server that accepts any envelope, reads each message to the
 * end, throws it away and answers 250. Options as Mailroom's SMTP node sets them (src/smtp/server.ts)
 * where they bear on the work done: no AUTH or STARTTLS, no logger, no reverse DNS lookup per
 * connection, the same announced SIZE, idle and close time-outs and client cap.
 * Listens on `SMTP_PORT` (127.0.0.1).
 */
import { SMTPServer } from "smtp-server"

const port = Number(process.env.SMTP_PORT ?? 0)

const server = new SMTPServer({
  name: "mx.agents.localhost",
  banner: "bare smtp-server",
  size: 52_428_800,
  authOptional: true,
  disabledCommands: ["AUTH", "STARTTLS"],
  hideSTARTTLS: true,
  logger: false,
  disableReverseLookup: true,
  socketTimeout: 60_000,
  closeTimeout: 10_000,
  maxClients: 2_000,
  onData(stream, _session, callback) {
    stream.on("data", () => {})
    stream.once("error", (error) => callback(error))
    stream.once("end", () => callback(null, "2.0.0 Ok: discarded"))
  }
})
server.on("error", () => {})

server.listen(port, "127.0.0.1")

for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => server.close(() => process.exit(0)))
}
