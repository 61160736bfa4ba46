/**
 * The SMTP client (layers/smtp-transport.ts) against real smtp-server receivers: what it will not
 * hand a server (8-bit mail without 8BITMIME, UTF-8 without SMTPUTF8) and where it will not send a
 * relay's password (in the clear, to a host that is not loopback).
 */
import { Effect, Either, Layer } from "effect"
import type { AddressInfo } from "node:net"
import { networkInterfaces } from "node:os"
import { SMTPServer } from "smtp-server"
import { afterEach, describe, expect, it } from "vitest"
import { layer as transportLayer } from "../../layers/smtp-transport.ts"
import { type SmtpTarget, SmtpTransport } from "../../services/outbound/transport.ts"
import { outboundSettings } from "../support/outbound-settings.ts"

const settings = outboundSettings()

interface Seen {
  readonly commands: Array<string>
  readonly messages: Array<{ readonly mailFromArgs: unknown; readonly raw: Buffer }>
}

const servers: Array<SMTPServer> = []
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => new Promise<void>((resolve) => server.close(() => resolve()))))
})

/** A receiver on `host` that offers what `options` leave it, and records what it was told. */
const receiver = async (host: string, options: { readonly plain?: boolean; readonly auth?: boolean }) => {
  const seen: Seen = { commands: [], messages: [] }
  const server = new SMTPServer({
    secure: false,
    logger: false,
    disabledCommands: options.auth ? ["STARTTLS"] : ["STARTTLS", "AUTH"],
    authOptional: !options.auth,
    allowInsecureAuth: true,
    hide8BITMIME: options.plain === true,
    hideSMTPUTF8: options.plain === true,
    onAuth: (auth, _session, callback) => {
      seen.commands.push(`AUTH ${auth.method} ${auth.username}:${auth.password}`)
      callback(null, { user: auth.username })
    },
    onData: (stream, session, callback) => {
      const chunks: Array<Buffer> = []
      stream.on("data", (chunk: Buffer) => chunks.push(chunk))
      stream.on("end", () => {
        seen.messages.push({ mailFromArgs: session.envelope.mailFrom && session.envelope.mailFrom.args, raw: Buffer.concat(chunks) })
        callback()
      })
    }
  })
  servers.push(server)
  await new Promise<void>((resolve) => server.listen(0, host, () => resolve()))
  return { port: (server.server.address() as AddressInfo).port, seen }
}

const send = (target: SmtpTarget, raw: string, to = ["ann@x.example"]) =>
  Effect.runPromise(
    Effect.flatMap(SmtpTransport, (transport) =>
      Effect.either(transport.send(target, { from: "bounces@agents.localhost", to, raw: Buffer.from(raw, "utf8"), heloName: "mx.test" }))).pipe(
        Effect.provide(transportLayer.pipe(Layer.provide(settings)))
      )
  )

describe("SmtpTransport", () => {
  it("gives a server that offers neither 8BITMIME nor SMTPUTF8 7-bit mail only: 8-bit content and UTF-8 headers are refused for good, not sent", async () => {
    const { port, seen } = await receiver("127.0.0.1", { plain: true })
    const target: SmtpTarget = { host: "127.0.0.1", port, secure: false, verifyTls: false }
    const eightBitBody = await send(target, "From: a@agents.localhost\r\nSubject: Hi\r\nContent-Transfer-Encoding: 8bit\r\n\r\nGrüße\r\n")
    expect(eightBitBody).toEqual(Either.right([{
      recipient: "ann@x.example",
      code: 554,
      response: expect.stringMatching(/^554 5\.6\.3 The receiving server does not take 8-bit mail \(it offers no 8BITMIME\)/),
      stage: "data"
    }]))
    const utf8Header = await send(target, "From: a@agents.localhost\r\nTo: jürgen@x.example\r\n\r\nHi\r\n")
    expect(utf8Header).toEqual(Either.right([{
      recipient: "ann@x.example",
      code: 553,
      response: expect.stringMatching(/^553 5\.6\.7 The receiving server does not take internationalized addresses/),
      stage: "data"
    }]))
    expect(seen.messages).toEqual([])
    // 7-bit mail goes as before.
    const ascii = await send(target, "From: a@agents.localhost\r\nSubject: =?UTF-8?Q?Gr=C3=BC=C3=9Fe?=\r\n\r\nGr=C3=BC=C3=9Fe\r\n")
    expect(ascii).toMatchObject(Either.right([{ recipient: "ann@x.example", code: 250 }]))
    expect(seen.messages).toHaveLength(1)
  })

  it("sends 8-bit and UTF-8 mail with BODY=8BITMIME and SMTPUTF8 to a server that offers them", async () => {
    const { port, seen } = await receiver("127.0.0.1", {})
    const target: SmtpTarget = { host: "127.0.0.1", port, secure: false, verifyTls: false }
    const sent = await send(target, "From: a@agents.localhost\r\nTo: jürgen@x.example\r\n\r\nGrüße\r\n")
    expect(sent).toMatchObject(Either.right([{ code: 250 }]))
    expect(seen.messages.map((m) => m.mailFromArgs)).toEqual([{ BODY: "8BITMIME", SMTPUTF8: true }])
  })

  it("sends a relay's password only encrypted or to a loopback host: a relay elsewhere without STARTTLS is not logged in to, and nothing is sent", async () => {
    const address = Object.values(networkInterfaces()).flat().find((a) => a?.family === "IPv4" && !a.internal)?.address
    expect(address, "a non-loopback IPv4 address on this machine").toBeDefined()
    const remote = await receiver(address!, { auth: true })
    const auth = { user: "mailroom", pass: "s3cret" }
    const refused = await send({ host: address!, port: remote.port, secure: false, verifyTls: true, auth }, "Subject: x\r\n\r\nx\r\n")
    expect(Either.isLeft(refused) && refused.left).toMatchObject({
      code: undefined,
      encryptionMissing: true,
      response: `${address} does not offer STARTTLS, and the password is not sent in the clear`
    })
    expect(remote.seen).toEqual({ commands: [], messages: [] })
    // On loopback the password stays on this machine: logged in and sent.
    const local = await receiver("127.0.0.1", { auth: true })
    const sent = await send({ host: "127.0.0.1", port: local.port, secure: false, verifyTls: true, auth }, "Subject: x\r\n\r\nx\r\n")
    expect(sent).toMatchObject(Either.right([{ code: 250 }]))
    expect(local.seen.commands).toEqual(["AUTH PLAIN mailroom:s3cret"])
  })
})
