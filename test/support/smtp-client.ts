/**
 * A bare SMTP client over a socket, for tests that must see every reply exactly (one per RCPT,
 * codes on garbage input) or send bytes no well-behaved client would. nodemailer is for the rest.
 */
import * as net from "node:net"

export interface SmtpReply {
  readonly code: number
  /** The reply's lines without their codes, joined with "\n". */
  readonly text: string
}

export interface SmtpSession {
  /** The greeting (220), read on connect. */
  readonly greeting: SmtpReply
  /** Send one command line (CRLF added) and read its reply. */
  readonly command: (line: string) => Promise<SmtpReply>
  /** Write raw bytes as they are (no CRLF added); read nothing. */
  readonly write: (bytes: string | Uint8Array) => Promise<void>
  /** Read the next reply. */
  readonly reply: (timeoutMs?: number) => Promise<SmtpReply>
  /** DATA, then `message` dot-stuffed and terminated; resolves with the reply to the data. */
  readonly data: (message: string | Uint8Array) => Promise<SmtpReply>
  /** Whether the server has closed the connection. */
  readonly closed: () => boolean
  readonly close: () => Promise<void>
}

const parseReplies = (buffer: string): { replies: Array<SmtpReply>; rest: string } => {
  const replies: Array<SmtpReply> = []
  let lines: Array<string> = []
  let rest = buffer
  for (;;) {
    const end = rest.indexOf("\r\n")
    if (end === -1) break
    const line = rest.slice(0, end)
    rest = rest.slice(end + 2)
    lines.push(line.slice(4))
    // "250-..." continues a multi-line reply; "250 ..." (or a bare code) ends it.
    if (line[3] !== "-") {
      replies.push({ code: Number(line.slice(0, 3)), text: lines.join("\n") })
      lines = []
    }
  }
  // A half-read multi-line reply stays in the buffer until its last line arrives.
  return { replies, rest: lines.length > 0 ? lines.map((l) => `000-${l}\r\n`).join("") + rest : rest }
}

/** Dot-stuff a message and end it with CRLF.CRLF, as DATA requires. */
export const dataPayload = (message: string | Uint8Array): Buffer => {
  const text = Buffer.from(message).toString("latin1")
  const normalized = text.endsWith("\r\n") ? text : `${text}\r\n`
  const stuffed = normalized.replace(/^\./gm, "..")
  return Buffer.from(`${stuffed}.\r\n`, "latin1")
}

export const connectSmtp = async (port: number, host = "127.0.0.1"): Promise<SmtpSession> => {
  const socket = net.connect({ port, host })
  let buffer = ""
  let isClosed = false
  const queue: Array<SmtpReply> = []
  const waiters: Array<(reply: SmtpReply | undefined) => void> = []

  socket.setEncoding("latin1")
  socket.on("data", (chunk: string) => {
    buffer += chunk
    const { replies, rest } = parseReplies(buffer)
    buffer = rest
    for (const reply of replies) {
      const waiter = waiters.shift()
      if (waiter) waiter(reply)
      else queue.push(reply)
    }
  })
  const onClose = () => {
    isClosed = true
    for (const waiter of waiters.splice(0)) waiter(undefined)
  }
  socket.on("close", onClose)
  socket.on("error", onClose)

  const reply = (timeoutMs = 30_000) =>
    new Promise<SmtpReply>((resolve, reject) => {
      const queued = queue.shift()
      if (queued) return resolve(queued)
      if (isClosed) return reject(new Error("connection closed"))
      const timer = setTimeout(() => {
        const index = waiters.indexOf(deliver)
        if (index !== -1) waiters.splice(index, 1)
        reject(new Error(`no SMTP reply within ${timeoutMs} ms`))
      }, timeoutMs)
      const deliver = (value: SmtpReply | undefined) => {
        clearTimeout(timer)
        if (value) resolve(value)
        else reject(new Error("connection closed"))
      }
      waiters.push(deliver)
    })

  const write = (bytes: string | Uint8Array) =>
    new Promise<void>((resolve, reject) => socket.write(bytes, (error) => (error ? reject(error) : resolve())))

  await new Promise<void>((resolve, reject) => {
    socket.once("connect", () => resolve())
    socket.once("error", reject)
  })
  const greeting = await reply()

  return {
    greeting,
    reply,
    write,
    command: async (line) => {
      await write(`${line}\r\n`)
      return reply()
    },
    data: async (message) => {
      await write("DATA\r\n")
      const ready = await reply()
      if (ready.code !== 354) return ready
      await write(dataPayload(message))
      return reply()
    },
    closed: () => isClosed,
    close: async () => {
      if (isClosed) return
      socket.end("QUIT\r\n")
      await new Promise<void>((resolve) => {
        socket.once("close", () => resolve())
        setTimeout(() => {
          socket.destroy()
          resolve()
        }, 2000)
      })
    }
  }
}

/** Whether an SMTP node is up: it takes a connection and greets with 220 (for a node that serves no HTTP). */
export const greets = async (port: number): Promise<boolean> => {
  try {
    const session = await connectSmtp(port)
    await session.close()
    return session.greeting.code === 220
  } catch {
    return false
  }
}

/** EHLO, MAIL FROM and one RCPT TO per recipient; returns the reply to each RCPT. */
export const envelope = async (session: SmtpSession, from: string, recipients: ReadonlyArray<string>) => {
  const ehlo = await session.command("EHLO client.test")
  if (ehlo.code !== 250) throw new Error(`EHLO refused: ${ehlo.code} ${ehlo.text}`)
  const mail = await session.command(`MAIL FROM:<${from}>`)
  if (mail.code !== 250) throw new Error(`MAIL FROM refused: ${mail.code} ${mail.text}`)
  const replies: Array<SmtpReply> = []
  for (const recipient of recipients) replies.push(await session.command(`RCPT TO:<${recipient}>`))
  return { ehlo, replies }
}
