/**
 * The mta (services/outbound/mta.ts) in process, over the suite's migrated database, delivering through
 * the real SMTP client (layers/smtp-transport.ts) to a real smtp-server this suite starts, the test
 * domain's MX resolved by a fake Dns. The receiver offers neither 8BITMIME nor SMTPUTF8 unless a test
 * asks it to, as some servers still do not.
 *
 * - Several envelopes for one domain (each recipient's own bounce address): a 4xx to one envelope's
 *   MAIL FROM is that envelope's answer, and the recipients after it, not tried, are charged nothing.
 * - A forwarded copy of 8-bit mail goes 7-bit, signed as such, to a server that takes no 8-bit mail,
 *   and as received (a sender's own signature intact) to one that does; a sent email's attached 8-bit
 *   email goes 7-bit (the send path converts what it composes).
 * - As production runs it (OUTBOUND_ALLOW_PRIVATE off), over a transport that only notes where it would
 *   connect: MX hosts whose addresses are loopback, private, link-local or other non-public ones are
 *   never connected to, whichever mail it is (a send, a forwarded copy, Mailroom's own).
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { simpleParser } from "mailparser"
import { dkimVerify } from "mailauth"
import type { AddressInfo } from "node:net"
import { SMTPServer } from "smtp-server"
import { layer as transportLayer } from "../../layers/smtp-transport.ts"
import { encodeJson, subjects } from "../../services/bus/bus.ts"
import { Lifecycle } from "../../services/lifecycle.ts"
import { RecipientDirectory } from "../../services/mail/directory.ts"
import { Inbound } from "../../services/mail/inbound.ts"
import { ArcSeal } from "../../services/outbound/arc-seal.ts"
import { DkimKeys } from "../../services/outbound/dkim.ts"
import { ForwardedCopies } from "../../services/outbound/forwards.ts"
import { Mta } from "../../services/outbound/mta.ts"
import { SmtpTransport } from "../../services/outbound/transport.ts"
import { fromSendInput, Outbound } from "../../services/outbound/send.ts"
import { testDatabase } from "../support/database.ts"
import { makeFakeDns } from "../support/fake-dns.ts"
import { inProcessOutboundOver } from "../support/outbound-services.ts"
import { outboundSettings } from "../support/outbound-settings.ts"
import { DOMAIN, insertEmail, insertMailbox } from "../support/seed-mail.ts"
import { insertUser } from "../support/users.ts"

interface Taken {
  readonly mailFrom: string
  readonly rcptTo: ReadonlyArray<string>
  readonly raw: Buffer
}

/** The receiving server: what it took, the MAIL FROMs it was given, and what it answers. */
interface ReceiverShape {
  readonly port: number
  readonly taken: Array<Taken>
  readonly mailFroms: Array<string>
  /** The next MAIL FROMs are answered these replies, in turn (then taken again). */
  readonly refuseMailFrom: Array<{ readonly code: number; readonly text: string }>
  /** Offer 8BITMIME and SMTPUTF8 from the next connection on (open ones are closed). */
  readonly offer8Bit: (offered: boolean) => void
}

class Receiver extends Context.Tag("test/Receiver")<Receiver, ReceiverShape>() {}

const receiver = Layer.scoped(
  Receiver,
  Effect.acquireRelease(
    Effect.promise(async () => {
      const taken: Array<Taken> = []
      const mailFroms: Array<string> = []
      const refuseMailFrom: Array<{ readonly code: number; readonly text: string }> = []
      const server = new SMTPServer({
        secure: false,
        logger: false,
        disabledCommands: ["STARTTLS", "AUTH"],
        authOptional: true,
        hide8BITMIME: true,
        hideSMTPUTF8: true,
        onMailFrom: (address, _session, callback) => {
          mailFroms.push(address.address)
          const refusal = refuseMailFrom.shift()
          callback(refusal === undefined ? null : Object.assign(new Error(refusal.text), { responseCode: refusal.code }))
        },
        onData: (stream, session, callback) => {
          const chunks: Array<Buffer> = []
          stream.on("data", (chunk: Buffer) => chunks.push(chunk))
          stream.on("end", () => {
            taken.push({
              mailFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : "",
              rcptTo: session.envelope.rcptTo.map((r) => r.address),
              raw: Buffer.concat(chunks)
            })
            callback()
          })
        }
      })
      server.on("error", () => {})
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()))
      const offer8Bit = (offered: boolean) => {
        // smtp-server reads these as it answers each EHLO.
        const options = server.options as { hide8BITMIME?: boolean; hideSMTPUTF8?: boolean }
        options.hide8BITMIME = !offered
        options.hideSMTPUTF8 = !offered
        // A connection the mta keeps was greeted as before: closed, the next is greeted anew.
        for (const connection of (server as unknown as { connections: Set<{ close: () => void }> }).connections) connection.close()
      }
      const shape: ReceiverShape = { port: (server.server.address() as AddressInfo).port, taken, mailFroms, refuseMailFrom, offer8Bit }
      return { shape, close: () => new Promise<void>((resolve) => server.close(() => resolve())) }
    }),
    ({ close }) => Effect.promise(close)
  ).pipe(Effect.map(({ shape }) => shape))
)

const dns = makeFakeDns()
dns.records.mx.set("partner.test", [{ priority: 10, exchange: "mx.partner.test" }])
dns.records.addresses.set("mx.partner.test", [{ address: "127.0.0.1", family: 4 }])
// Domains whose owners point their mail at our own network (and one partly at a public address).
dns.records.mx.set("ssrf.test", [{ priority: 10, exchange: "mx.ssrf.test" }])
dns.records.addresses.set("mx.ssrf.test", [{ address: "127.0.0.1", family: 4 }])
dns.records.mx.set("cloud.test", [{ priority: 10, exchange: "mx1.cloud.test" }, { priority: 20, exchange: "mx2.cloud.test" }])
dns.records.addresses.set("mx1.cloud.test", [{ address: "169.254.169.254", family: 4 }])
dns.records.addresses.set("mx2.cloud.test", [{ address: "::ffff:10.0.0.8", family: 6 }, { address: "fd00::25", family: 6 }])
dns.records.addresses.set("implicit.test", [{ address: "192.168.1.25", family: 4 }])
dns.records.mx.set("mixed.test", [{ priority: 10, exchange: "mx.mixed.test" }])
dns.records.addresses.set("mx.mixed.test", [{ address: "10.0.0.25", family: 4 }, { address: "93.184.215.14", family: 4 }])
dns.records.mx.set("flaky.test", [{ priority: 10, exchange: "mx1.flaky.test" }, { priority: 20, exchange: "mx2.flaky.test" }])
dns.records.addresses.set("mx1.flaky.test", [{ address: "127.0.0.1", family: 4 }])
dns.records.down.add("mx2.flaky.test")

/** The events the mta told: their kind and recipient, in order. */
const told: Array<{ readonly event: string; readonly recipient: string; readonly attempts: number }> = []
const outbound = inProcessOutboundOver((bus) => ({
  ...bus,
  publish: (subject, data, options) =>
    Effect.tap(bus.publish(subject, data, options), () =>
      Effect.sync(() => {
        if (!subject.startsWith("events.")) return
        const event = JSON.parse(new TextDecoder().decode(data)) as { data?: { recipient?: string; attempts?: number } }
        told.push({ event: subject.slice("events.".length), recipient: event.data?.recipient ?? "", attempts: event.data?.attempts ?? -1 })
      }))
}))

// Never called: the copies here were not checked on arrival, so none is sealed.
const noArc = Layer.succeed(ArcSeal, {} as ArcSeal["Type"])

const world = Mta.Default.pipe(
  Layer.provideMerge(Layer.mergeAll(
    Inbound.Default.pipe(Layer.provide(RecipientDirectory.Default)),
    // With the send path's DKIM key, so that a test can check the copy's signature against it.
    ForwardedCopies.DefaultWithoutDependencies.pipe(Layer.provide(noArc)),
    dns.layer,
    transportLayer,
    Lifecycle.forever
  )),
  Layer.provide(Layer.unwrapEffect(Effect.map(Receiver, (r) => outboundSettings({ mxPort: r.port })))),
  Layer.provideMerge(receiver),
  Layer.provideMerge(outbound)
)

/** Where the mta would have connected, and for whom: a transport that takes every message at once. */
const connections: Array<{ readonly host: string; readonly to: ReadonlyArray<string> }> = []
const notingTransport = Layer.succeed(SmtpTransport, {
  send: (target, message) =>
    Effect.sync(() => {
      connections.push({ host: target.host, to: message.to })
      return message.to.map((recipient) => ({ recipient, code: 250, response: "250 2.0.0 Ok: queued", stage: "data" as const }))
    })
})

/** As production runs: private MX hosts refused (OUTBOUND_ALLOW_PRIVATE unset). */
const productionWorld = Mta.Default.pipe(
  Layer.provideMerge(Layer.mergeAll(
    Inbound.Default.pipe(Layer.provide(RecipientDirectory.Default)),
    ForwardedCopies.DefaultWithoutDependencies.pipe(Layer.provide(noArc)),
    dns.layer,
    notingTransport,
    Lifecycle.forever
  )),
  Layer.provide(outboundSettings({ allowPrivate: false })),
  Layer.provideMerge(outbound)
)

const deliveries = (emailId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ recipient: string; status: string; attempts: number; lastResponse: string | null; scheduled: boolean; claim: string | null }>`
      SELECT recipient, status, attempts, last_response, next_attempt_at IS NOT NULL AS scheduled, claim
      FROM outbound_deliveries WHERE email_id = ${emailId} ORDER BY recipient`)

layer(testDatabase, { timeout: "120 seconds" })("the mta against a real receiving server", (it) => {
  it.layer(world)("several envelopes to one domain", (it) => {
    it.effect("a 451 to the first envelope's MAIL FROM defers its recipient alone: the others, not tried, keep their state, attempts and silence", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const sending = yield* Outbound
        const mta = yield* Mta
        const server = yield* Receiver
        const owner = yield* insertUser("pro")
        const box = yield* insertMailbox(owner)
        const [ann, bob, cyd] = ["ann@partner.test", "bob@partner.test", "cyd@partner.test"]
        const sent = yield* sending.submit(owner.userId, box.mailboxId, fromSendInput({ to: [ann, bob, cyd], subject: "Three", text: "Hello." }))
        const job = { email_id: sent.email_id, domain: "partner.test" }
        const rateLimited = "451 4.7.1 Sender rate limited, try again later"
        server.refuseMailFrom.push({ code: 451, text: "4.7.1 Sender rate limited, try again later" })
        told.length = 0

        const first = yield* Effect.flip(mta.deliver(job))
        expect(first).toMatchObject({ _tag: "DeliveryDeferred", emailId: sent.email_id, domain: "partner.test" })
        // One transaction tried (ann's, the first), none taken.
        expect(server.mailFroms).toHaveLength(1)
        expect(server.taken).toEqual([])
        expect(yield* deliveries(sent.email_id)).toEqual([
          { recipient: ann, status: "deferred", attempts: 1, lastResponse: rateLimited, scheduled: true, claim: null },
          { recipient: bob, status: "queued", attempts: 0, lastResponse: null, scheduled: true, claim: null },
          { recipient: cyd, status: "queued", attempts: 0, lastResponse: null, scheduled: true, claim: null }
        ])
        expect(told).toEqual([{ event: "email.delivery_delayed", recipient: ann, attempts: 1 }])

        // The job comes back: everyone is tried, and taken.
        yield* mta.deliver(job)
        expect(server.taken.map((t) => t.rcptTo)).toEqual([[ann], [bob], [cyd]])
        expect((yield* deliveries(sent.email_id)).map(({ recipient, status, attempts }) => ({ recipient, status, attempts }))).toEqual([
          { recipient: ann, status: "sent", attempts: 2 },
          { recipient: bob, status: "sent", attempts: 1 },
          { recipient: cyd, status: "sent", attempts: 1 }
        ])
        expect(told.slice(1).map((t) => `${t.event} ${t.recipient} ${t.attempts}`).sort()).toEqual([
          `email.sent ${ann} 2`,
          `email.sent ${bob} 1`,
          `email.sent ${cyd} 1`
        ])

        // Out of time (OUTBOUND_MAX_AGE, 48 h, passed before the next attempt): a recipient never tried fails too, saying so, with no attempt counted.
        const late = yield* sending.submit(owner.userId, box.mailboxId, fromSendInput({ to: [ann, bob], subject: "Late", text: "Too late." }))
        yield* sql`UPDATE emails SET created_at = now() - interval '48 hours' WHERE id = ${late.email_id}`
        server.refuseMailFrom.push({ code: 451, text: "4.7.1 Sender rate limited, try again later" })
        told.length = 0
        yield* mta.deliver({ email_id: late.email_id, domain: "partner.test" })
        expect(yield* deliveries(late.email_id)).toEqual([
          { recipient: ann, status: "failed", attempts: 1, lastResponse: `Gave up after 1 attempts: ${rateLimited}`, scheduled: false, claim: null },
          {
            recipient: bob,
            status: "failed",
            attempts: 0,
            lastResponse: `Gave up after 0 attempts: Not tried: partner.test's mail server deferred an earlier recipient's transaction of this message (${rateLimited})`,
            scheduled: false,
            claim: null
          }
        ])
        expect(told.map((t) => `${t.event} ${t.recipient} ${t.attempts}`)).toEqual([`email.failed ${ann} 1`, `email.failed ${bob} 0`])
      }))
  })

  it.layer(world)("a forwarded copy of 8-bit mail", (it) => {
    it.effect("goes 7-bit, signed as it then is, to a server without 8BITMIME; as received to one that takes 8-bit mail", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const mta = yield* Mta
        const server = yield* Receiver
        const dkim = yield* DkimKeys
        const owner = yield* insertUser("pro")
        const box = yield* insertMailbox(owner)
        const text = "Grüße aus Köln: 12 € pro Stück."
        const record = yield* dkim.record(DOMAIN, undefined)
        const resolver = async (name: string, type: string) => {
          if (name === record.name && type === "TXT") return [[record.value]]
          throw Object.assign(new Error(`no ${type} for ${name}`), { code: "ENOTFOUND" })
        }
        const forward = (subject: string) =>
          Effect.gen(function*() {
            // Stored as it came: a UTF-8 body under no Content-Transfer-Encoding (7bit by default), as mail programs send.
            const email = yield* insertEmail(box, { subject, receivedMinutesAgo: 1, text })
            expect(email.raw.some((byte) => byte > 127)).toBe(true)
            yield* sql`INSERT INTO forward_deliveries (email_id, address, domain) VALUES (${email.id}, 'reader@partner.test', 'partner.test')`
            yield* mta.handle({
              subject: subjects.forwardedMail(email.id),
              data: encodeJson({ forward_of: email.id, domain: "partner.test" }),
              msgId: `forward:${email.id}:partner.test`,
              deliveryCount: 1
            })
            const copies = yield* sql<{ status: string; attempts: number; lastResponse: string }>`
              SELECT status, attempts, last_response FROM forward_deliveries WHERE email_id = ${email.id}`
            return { email, copies, taken: server.taken.find((t) => t.raw.includes(`Message-ID: <${email.id}@test>`)) }
          })

        // No 8BITMIME (nor SMTPUTF8): the copy goes 7-bit, where it was bounced 554 5.6.3 before.
        const plain = yield* forward("Quarterly figures")
        expect(plain.copies).toEqual([{ status: "sent", attempts: 1, lastResponse: expect.stringMatching(/^250 /) }])
        const taken = plain.taken!
        expect(taken.raw.some((byte) => byte > 127)).toBe(false)
        expect(taken.raw.toString("latin1")).toMatch(/\r\nContent-Transfer-Encoding: quoted-printable\r\n/)
        expect(taken.raw.toString("latin1")).toMatch(/\r\nX-Mailroom-Forwarded-By: /)
        const parsed = yield* Effect.promise(() => simpleParser(taken.raw))
        expect(parsed.text?.trim()).toBe(text)
        // Signed after the conversion: the signature verifies over the bytes that arrived.
        const verdict = yield* Effect.promise(() => dkimVerify(taken.raw, { resolver }))
        expect(verdict.results.map((r) => ({ status: r.status.result, domain: r.signingDomain }))).toEqual([{ status: "pass", domain: DOMAIN }])

        // A server that takes 8-bit mail is given the copy as received, below Mailroom's fields.
        server.offer8Bit(true)
        const eightBit = yield* forward("Quarterly figures, again")
        expect(eightBit.copies).toEqual([{ status: "sent", attempts: 1, lastResponse: expect.stringMatching(/^250 /) }])
        const asReceived = eightBit.taken!.raw
        expect(asReceived.includes(Buffer.from(eightBit.email.raw))).toBe(true)
        expect(asReceived.toString("latin1")).not.toContain("quoted-printable")
        const verdict8 = yield* Effect.promise(() => dkimVerify(asReceived, { resolver }))
        expect(verdict8.results.map((r) => r.status.result)).toEqual(["pass"])
        server.offer8Bit(false)
      }))
  })

  it.layer(world)("a sent email with an attached 8-bit email", (it) => {
    it.effect("goes 7-bit, the attached email's text intact and the signature passing, to a server without 8BITMIME", () =>
      Effect.gen(function*() {
        const sending = yield* Outbound
        const mta = yield* Mta
        const server = yield* Receiver
        const dkim = yield* DkimKeys
        const owner = yield* insertUser("pro")
        const box = yield* insertMailbox(owner)
        const record = yield* dkim.record(DOMAIN, undefined)
        const resolver = async (name: string, type: string) => {
          if (name === record.name && type === "TXT") return [[record.value]]
          throw Object.assign(new Error(`no ${type} for ${name}`), { code: "ENOTFOUND" })
        }
        // An email as a mail program saved it: UTF-8 in its Subject and its body, under no transfer encoding.
        const attached = Buffer.from("From: ann@partner.test\r\nSubject: Grüße\r\nDate: Mon, 7 Dec 2026 10:00:00 +0000\r\n\r\nGrüße aus Köln.\r\n", "utf8")
        const sent = yield* sending.submit(owner.userId, box.mailboxId, fromSendInput({
          to: ["dee@partner.test"],
          subject: "The note, attached",
          text: "See the attached note.",
          attachments: [{ filename: "note.eml", content_type: "message/rfc822", content: attached.toString("base64") }]
        }))
        yield* mta.deliver({ email_id: sent.email_id, domain: "partner.test" })
        expect(yield* deliveries(sent.email_id)).toMatchObject([{ recipient: "dee@partner.test", status: "sent", attempts: 1 }])
        const taken = server.taken.find((t) => t.rcptTo.includes("dee@partner.test"))!
        expect(taken.raw.some((byte) => byte > 127)).toBe(false)
        const verdict = yield* Effect.promise(() => dkimVerify(taken.raw, { resolver }))
        expect(verdict.results.map((r) => r.status.result)).toEqual(["pass"])
        const note = (yield* Effect.promise(() => simpleParser(taken.raw))).attachments.find((a) => a.contentType === "message/rfc822")!
        // A message of its own, its re-encoded body declared MIME (RFC 2045 §4), or a reader would show it encoded.
        expect(note.content.toString("latin1")).toMatch(/(^|\r\n)MIME-Version: 1\.0\r\n/)
        const inner = yield* Effect.promise(() => simpleParser(note.content))
        expect({ subject: inner.subject, text: inner.text?.trim() }).toEqual({ subject: "Grüße", text: "Grüße aus Köln." })
      }))
  })

  it.layer(productionWorld)("MX hosts in our own network (OUTBOUND_ALLOW_PRIVATE off)", (it) => {
    it.effect("are never connected to: a domain whose every host is one fails saying why; a host's public address is used; another host that may come back defers", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const sending = yield* Outbound
        const mta = yield* Mta
        const owner = yield* insertUser("pro")
        const box = yield* insertMailbox(owner)
        const sendTo = (to: string) =>
          Effect.gen(function*() {
            const sent = yield* sending.submit(owner.userId, box.mailboxId, fromSendInput({ to: [to], subject: `To ${to}`, text: "Hello." }))
            yield* Effect.either(mta.deliver({ email_id: sent.email_id, domain: to.split("@")[1]! }))
            return yield* deliveries(sent.email_id)
          })
        connections.length = 0
        told.length = 0

        // The reviewer's case: MX ssrf.test → mx.ssrf.test → 127.0.0.1. Failed at once (the domain's DNS
        // must change; no retry helps), nothing connected to, the sender told.
        expect(yield* sendTo("admin@ssrf.test")).toEqual([{
          recipient: "admin@ssrf.test",
          status: "failed",
          attempts: 1,
          lastResponse: "550 5.4.4 Not sent: mx.ssrf.test resolves only to 127.0.0.1, a loopback address; mail is delivered to public addresses only",
          scheduled: false,
          claim: null
        }])
        expect(told).toEqual([{ event: "email.failed", recipient: "admin@ssrf.test", attempts: 1 }])
        // Every host, every address: the metadata service, IPv4-mapped private, unique-local.
        expect((yield* sendTo("ops@cloud.test"))[0]).toMatchObject({
          status: "failed",
          lastResponse: "550 5.4.4 Not sent: mx1.cloud.test resolves only to 169.254.169.254, a link-local address; " +
            "mx2.cloud.test resolves only to ::ffff:10.0.0.8 (a private address) and fd00::25 (a unique-local address); mail is delivered to public addresses only"
        })
        // No MX: the domain's own address (RFC 5321 §5.1) is held to the same rule.
        expect((yield* sendTo("ops@implicit.test"))[0]).toMatchObject({
          status: "failed",
          lastResponse: "550 5.4.4 Not sent: implicit.test resolves only to 192.168.1.25, a private address; mail is delivered to public addresses only"
        })
        expect(connections).toEqual([])

        // One host in our network and one whose DNS does not answer now: deferred, as that one may come back.
        const flaky = yield* sendTo("ops@flaky.test")
        expect(flaky[0]).toMatchObject({ status: "deferred", attempts: 1, scheduled: true })
        expect(connections).toEqual([])

        // A host with a private and a public address: the public one is connected to.
        expect((yield* sendTo("ops@mixed.test"))[0]).toMatchObject({ status: "sent", attempts: 1 })
        expect(connections).toEqual([{ host: "93.184.215.14", to: ["ops@mixed.test"] }])
        connections.length = 0

        // A received email's forwarded copy, and Mailroom's own mail, go the same way: not connected to.
        const email = yield* insertEmail(box, { subject: "Forward me", receivedMinutesAgo: 1, text: "Hello." })
        yield* sql`INSERT INTO forward_deliveries (email_id, address, domain) VALUES (${email.id}, 'reader@ssrf.test', 'ssrf.test')`
        yield* mta.handle({
          subject: subjects.forwardedMail(email.id),
          data: encodeJson({ forward_of: email.id, domain: "ssrf.test" }),
          msgId: `forward:${email.id}:ssrf.test`,
          deliveryCount: 1
        })
        expect(yield* sql<{ status: string; lastResponse: string }>`
          SELECT status, last_response FROM forward_deliveries WHERE email_id = ${email.id}`).toEqual([{
            status: "failed",
            lastResponse: "550 5.4.4 Not sent: mx.ssrf.test resolves only to 127.0.0.1, a loopback address; mail is delivered to public addresses only"
          }])
        yield* mta.handle({
          subject: subjects.systemMail("sys_private"),
          data: encodeJson({
            system_mail_id: "sys_private",
            mail_from: `noreply@${DOMAIN}`,
            to: "admin@ssrf.test",
            raw: Buffer.from("Subject: Reset your password\r\n\r\nHello.\r\n").toString("base64"),
            expires_at: Date.now() + 60_000
          }),
          msgId: "system:sys_private",
          deliveryCount: 1
        })
        expect(connections).toEqual([])
      }))
  })
})
