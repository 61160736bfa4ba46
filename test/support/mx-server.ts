/**
 * A receiving SMTP server for outbound tests: a real smtp-server on a loopback port that records
 * every message it takes (envelope and raw bytes) and answers RCPT TO as the test scripts it, per
 * recipient: a reply code in turn, the last repeating. With `auth`, it takes mail only from a client
 * that logged in with those credentials (a relay).
 *
 * Every message it takes is held to RFC 5322 §2.1.1: no header line over 998 octets (a strict receiver
 * refuses such mail). It takes one all the same, so the test goes on, and `close` (the suite's afterAll)
 * fails naming it: every outbound suite asserts it of everything Mailroom sends, at the cost of a scan of
 * each message's header.
 */
import { simpleParser } from "mailparser"
import type { AddressInfo } from "node:net"
import { SMTPServer, type SMTPServerAddress } from "smtp-server"
import { until } from "./wait.ts"

export interface Delivered {
  readonly mailFrom: string
  /** MAIL FROM's parameters as the client wrote them (`BODY: "8BITMIME"`, `SMTPUTF8: true`, ...). */
  readonly mailFromArgs: Readonly<Record<string, string | boolean>>
  readonly rcptTo: ReadonlyArray<string>
  readonly raw: Buffer
  /** The user that logged in, for a relay. */
  readonly user: string | undefined
  /** performance.now() of this process when DATA ended. */
  readonly at: number
  /** The SMTP session (connection) it came on: messages on one connection share it. */
  readonly sessionId: string
}

export interface MxServer {
  readonly port: number
  readonly delivered: () => ReadonlyArray<Delivered>
  /** RCPT TO answers for `recipient` (lower case), used in turn; the last repeats. Default 250. */
  readonly script: (recipient: string, codes: ReadonlyArray<number>) => void
  /** RCPT TO attempts per recipient so far, with their times (performance.now). */
  readonly attempts: (recipient: string) => ReadonlyArray<number>
  readonly waitFor: (count: number, timeoutMs?: number) => Promise<ReadonlyArray<Delivered>>
  /** While held, DATA is read but never answered (a receiver that hangs mid-delivery); nothing is recorded. */
  readonly hold: (held: boolean) => void
  /** Messages read while held, never answered. */
  readonly held: () => number
  /** The credentials a relay takes from now on. */
  readonly requireAuth: (auth: { readonly user: string; readonly pass: string }) => void
  /** Refuse every MAIL FROM, or every message at the end of DATA, with this reply from now on (undefined: take them again). */
  readonly refuse: (command: "MAIL FROM" | "DATA", reply: { readonly code: number; readonly text: string } | undefined) => void
  /** Hang up on every open connection, as a server ending idle sessions does. */
  readonly dropConnections: () => void
  /** Fails, once closed, when it took a message with a header line over 998 octets (see above). */
  readonly close: () => Promise<void>
}

/** The longest line a message may hold, without its CRLF (RFC 5322 §2.1.1). */
const MAX_LINE = 998

/** The lines of `raw`'s header (top-level, up to the first empty line) longer than 998 octets, with their lengths. */
export const overlongHeaderLines = (raw: Buffer): Array<{ readonly length: number; readonly start: string }> => {
  const end = raw.indexOf("\r\n\r\n")
  const head = raw.subarray(0, end < 0 ? raw.length : end)
  const lines: Array<{ readonly length: number; readonly start: string }> = []
  let from = 0
  while (from <= head.length) {
    const next = head.indexOf("\r\n", from)
    const to = next < 0 ? head.length : next
    if (to - from > MAX_LINE) lines.push({ length: to - from, start: head.subarray(from, from + 40).toString("latin1") })
    if (next < 0) break
    from = next + 2
  }
  return lines
}

const replyText: Record<number, string> = {
  421: "4.7.0 Try again later",
  450: "4.2.1 Mailbox busy, try again later",
  451: "4.3.0 Temporary failure, try again later",
  550: "5.1.1 No such user here",
  552: "5.2.2 Mailbox full"
}

export const startMxServer = async (options: { readonly auth?: { readonly user: string; readonly pass: string } } = {}): Promise<MxServer> => {
  const delivered: Array<Delivered> = []
  /** What `close` fails with: each message taken with a header line over 998 octets. */
  const overlong: Array<string> = []
  const scripts = new Map<string, { codes: ReadonlyArray<number>; next: number }>()
  const tries = new Map<string, Array<number>>()
  const waiters: Array<() => void> = []
  let credentials = options.auth
  let holding = false
  let heldCount = 0
  const refusals = new Map<"MAIL FROM" | "DATA", { readonly code: number; readonly text: string }>()
  const refusal = (command: "MAIL FROM" | "DATA") => {
    const reply = refusals.get(command)
    return reply === undefined ? undefined : Object.assign(new Error(reply.text), { responseCode: reply.code })
  }

  const server = new SMTPServer({
    secure: false,
    disabledCommands: options.auth ? ["STARTTLS"] : ["STARTTLS", "AUTH"],
    authOptional: options.auth === undefined,
    allowInsecureAuth: true,
    logger: false,
    onAuth: (auth, _session, callback) => {
      if (credentials && auth.username === credentials.user && auth.password === credentials.pass) {
        return callback(null, { user: auth.username })
      }
      callback(Object.assign(new Error("5.7.8 Authentication failed"), { responseCode: 535 }))
    },
    onMailFrom: (_address, _session, callback) => callback(refusal("MAIL FROM") ?? null),
    onRcptTo: (address: SMTPServerAddress, _session, callback) => {
      const recipient = address.address.toLowerCase()
      tries.set(recipient, [...(tries.get(recipient) ?? []), performance.now()])
      const script = scripts.get(recipient)
      const code = script ? script.codes[Math.min(script.next++, script.codes.length - 1)]! : 250
      if (code < 400) return callback()
      callback(Object.assign(new Error(replyText[code] ?? `${code >= 500 ? "5" : "4"}.0.0 Refused`), { responseCode: code }))
    },
    onData: (stream, session, callback) => {
      const chunks: Array<Buffer> = []
      stream.on("data", (chunk: Buffer) => chunks.push(chunk))
      stream.on("end", () => {
        const refused = refusal("DATA")
        if (refused) return callback(refused)
        if (holding) {
          heldCount++
          return
        }
        const raw = Buffer.concat(chunks)
        for (const line of overlongHeaderLines(raw)) overlong.push(`a header line of ${line.length} octets: ${JSON.stringify(line.start)}…`)
        delivered.push({
          mailFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : "",
          mailFromArgs: { ...(session.envelope.mailFrom ? session.envelope.mailFrom.args || {} : {}) },
          // As the client wrote them: a local part's case is the sender's to keep (RFC 5321 §2.4).
          rcptTo: session.envelope.rcptTo.map((r) => r.address),
          raw,
          user: typeof session.user === "string" ? session.user : undefined,
          at: performance.now(),
          sessionId: session.id
        })
        for (const wake of waiters.splice(0)) wake()
        callback(null, "2.0.0 Queued as test")
      })
    }
  })
  // A sender that dies mid-session (the mta killed with -9) resets its connection: smtp-server
  // reports that as an 'error' event, which is part of what the tests provoke, not a failure.
  server.on("error", () => {})
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()))
  const port = (server.server.address() as AddressInfo).port

  const waitFor = async (count: number, timeoutMs = 20_000) => {
    const deadline = Date.now() + timeoutMs
    while (delivered.length < count) {
      const left = deadline - Date.now()
      if (left <= 0) throw new Error(`expected ${count} delivered messages, got ${delivered.length}`)
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left)
        waiters.push(() => {
          clearTimeout(timer)
          resolve()
        })
      })
    }
    return [...delivered]
  }

  return {
    port,
    delivered: () => [...delivered],
    script: (recipient, codes) => scripts.set(recipient.toLowerCase(), { codes, next: 0 }),
    attempts: (recipient) => [...(tries.get(recipient.toLowerCase()) ?? [])],
    waitFor,
    hold: (held) => {
      holding = held
    },
    held: () => heldCount,
    requireAuth: (auth) => {
      credentials = auth
    },
    refuse: (command, reply) => {
      if (reply === undefined) refusals.delete(command)
      else refusals.set(command, reply)
    },
    dropConnections: () => {
      // smtp-server keeps its open connections in a set it does not type.
      for (const connection of (server as unknown as { connections: Set<{ close: () => void }> }).connections) connection.close()
    },
    close: async () => {
      await new Promise<void>((resolve) => server.close(() => resolve()))
      if (overlong.length > 0) {
        throw new Error(`The test MX took mail over RFC 5322's 998-octet line limit, which a strict receiver refuses:\n${overlong.join("\n")}`)
      }
    }
  }
}

/** The message `mx` took whose subject is `subject`, parsed (waiting for it to arrive). */
/**
 * Everyone the messages with `subject` went to, sorted, once they number `count`: each recipient of a
 * sent email has a transaction of its own (its own bounce address).
 */
export const recipientsWithSubject = (mx: MxServer, subject: string, count: number) =>
  until(`"${subject}" at the MX for ${count} recipients`, async () => {
    const recipients: Array<string> = []
    for (const message of mx.delivered()) {
      if ((await simpleParser(message.raw)).subject === subject) recipients.push(...message.rcptTo)
    }
    return recipients.length >= count ? recipients.sort() : undefined
  })

export const deliveredWithSubject = (mx: MxServer, subject: string) =>
  until(`"${subject}" at the MX`, async () => {
    for (const message of mx.delivered()) {
      const parsed = await simpleParser(message.raw)
      if (parsed.subject === subject) return { message, parsed }
    }
    return undefined
  })
